"""The statistics and bulk admin requests over the wire: VIEW_BROKER_STATS_DATA (315;
ViewBrokerStatsDataRequestHeader: statsName, statsKey; a BrokerStatsData of statsMinute / statsHour / statsDay
BrokerStatsItems: sum, tps, avgpt), GET_BROKER_CONSUME_STATS (317; GetConsumeStatsInBrokerHeader: isOrder; a
ConsumeStatsList: brokerAddr, consumeStatsList [{group: [ConsumeStats]}], totalDiff, totalInflightDiff) and
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225; a SubscriptionGroupList: groupConfigList) and
INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223; GetConsumerStatusRequestHeader: topic, group, clientAddr), which asks the
consumers GET_CONSUMER_STATUS_FROM_CLIENT (221) and gathers their GetConsumerStatusBody's messageQueueTable; and
two requests answered as RocketMQ answers them with the feature off: GET_BROKER_EPOCH_CACHE (1007, no controller
mode) and RESET_MASTER_FLUSH_OFFSET (908, ResetMasterFlushOffsetHeader: masterFlushOffset; a master). Expected bodies are
written out by hand from the Java beans (fastjson: fields sorted by name, a MessageQueue map key as its object)."""

import asyncio
import json
import time

from broker_fixtures import with_broker
from remoting_client import Client
from test_broker_admin_runtime import QUIET, admin_port, heartbeat, pull_ext

from rocketstore import Message
from rocketstore.formats.properties import java_hashmap_order
from rocketstore.remoting import fastjson
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R
from rocketstore.remoting.command import RESPONSE_FLAG, RemotingCommand


def stats_ext(name, key) -> dict:
    return {"statsName": name, "statsKey": key}


def test_view_broker_stats_data_counts_puts_and_pulls_since_boot(tmp_path):
    async def scenario(broker, admin, store):
        store.create_topic("T", 1)
        for i in range(4):  # before the broker counts: RocketMQ's item is made at the first put it sees
            assert store.put(Message("T", f"old-{i}".encode()), 0).ok
        broker.stats.__init__(store)  # the broker booting now, with T's 4 messages already there
        before = await admin.call(RC.VIEW_BROKER_STATS_DATA, stats_ext("TOPIC_PUT_NUMS", "T"))
        started = time.monotonic()
        for i in range(3):
            assert store.put(Message("T", f"new-{i}".encode()), 0).ok
        put = await admin.call(RC.VIEW_BROKER_STATS_DATA, stats_ext("TOPIC_PUT_NUMS", "T"))
        no_get = await admin.call(RC.VIEW_BROKER_STATS_DATA, stats_ext("GROUP_GET_NUMS", "T@g"))
        pulled = [await admin.call(RC.PULL_MESSAGE, pull_ext(offset=o)) for o in (0, 5)]
        got = await admin.call(RC.VIEW_BROKER_STATS_DATA, stats_ext("GROUP_GET_NUMS", "T@g"))
        other = await admin.call(RC.VIEW_BROKER_STATS_DATA, stats_ext("TOPIC_PUT_SIZE", "T"))
        return before, put, no_get, pulled, got, other, time.monotonic() - started

    (before, put, no_get, pulled, got, other, elapsed), store = with_broker(tmp_path, scenario, QUIET)
    store.close()  # its flush thread must not outlive the test's directory
    assert (before.code, before.remark) == (R.SYSTEM_ERROR, "The stats <TOPIC_PUT_NUMS> <T> not exist")
    assert (no_get.code, no_get.remark) == (R.SYSTEM_ERROR, "The stats <GROUP_GET_NUMS> <T@g> not exist")
    assert (other.code, other.remark) == (R.SYSTEM_ERROR, "The stats <TOPIC_PUT_SIZE> <T> not exist")

    assert put.code == R.SUCCESS and put.remark is None
    assert put.body.startswith(b'{"statsDay":{"avgpt":')
    doc = json.loads(put.body)
    assert list(doc) == ["statsDay", "statsHour", "statsMinute"]
    for item in doc.values():  # every window reaches back to the boot: the 3 puts since
        assert list(item) == ["avgpt", "sum", "tps"]
        assert item["sum"] == 3 and item["avgpt"] == 0.0
        assert 3 / (elapsed + 60) < item["tps"]

    assert [p.code for p in pulled] == [R.SUCCESS, R.SUCCESS]
    assert [p.ext_fields["nextBeginOffset"] for p in pulled] == ["7", "7"]  # 7 records, then the last 2
    doc = json.loads(got.body)
    for item in doc.values():
        assert item["sum"] == 9 and item["avgpt"] == 4.5  # 9 messages in 2 pulls
        assert item["tps"] > 0


def consume_stats_json(broker_name: str, rows, tps: str) -> str:
    table = ",".join(
        f'{{"brokerName":"{broker_name}","queueId":{q},"topic":"{topic}"}}:'
        f'{{"brokerOffset":{b},"consumerOffset":{c},"lastTimestamp":{last},"pullOffset":0}}'
        for topic, q, b, c, last in rows
    )
    return f'{{"consumeTps":{tps},"offsetTable":{{{table}}}}}'


def test_broker_consume_stats_and_the_group_list(tmp_path):
    groups_body = json.dumps({"groupConfigList": [{"groupName": "g"}, {"groupName": "g2", "consumeEnable": False}]})

    async def scenario(broker, admin, store):
        store.create_topic("T", 2)
        for q in range(2):
            for i in range(6):
                assert store.put(Message("T", f"{q}-{i}".encode()), q).ok
        times = [m.store_timestamp for m in store.get("x", "T", 0, 0, 8).messages]
        version0 = broker.subscription_groups.version["counter"]
        empty = await admin.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, body=b'{"groupConfigList":[]}')
        bad = await admin.call(
            RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST,
            body=json.dumps({"groupConfigList": [{"groupName": "ok"}, {"groupName": "bad name"}]}).encode(),
        )
        version1 = broker.subscription_groups.version["counter"]
        made = await admin.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, body=groups_body.encode())
        version2 = broker.subscription_groups.version["counter"]
        listed = await admin.call(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        broker.offsets.commit("g", "T", 0, 4)
        broker.offsets.commit("g", "T", 1, 0)
        broker.offsets.commit("nogroup", "T", 0, 1)  # offsets without a subscription group: not listed
        stats = await admin.call(RC.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
        ordered = await admin.call(RC.GET_BROKER_CONSUME_STATS, {"isOrder": "true"})
        groups = list(broker.subscription_groups.table)
        return times, (version0, version1, version2), empty, bad, made, listed, stats, ordered, groups

    (times, versions, empty, bad, made, listed, stats, ordered, groups), store = with_broker(tmp_path, scenario, QUIET)
    store.close()  # its flush thread must not outlive the test's directory
    assert empty.code == R.SUCCESS and versions[0] == versions[1]
    assert bad.code == R.INVALID_PARAMETER  # nothing put: "ok" is not in the table
    assert made.code == R.SUCCESS and made.remark is None and versions[2] == versions[1] + 2
    table = fastjson.loads(listed.body)["subscriptionGroupTable"]
    assert "ok" not in table and table["g"]["consumeEnable"] is True and table["g2"]["consumeEnable"] is False

    assert "g" in groups and "g2" in groups and "nogroup" not in groups
    order = java_hashmap_order(groups)
    rows = [("T", 0, 6, 4, times[3]), ("T", 1, 6, 0, 0)]

    def expected(g_stats: str) -> str:
        return ",".join(f'{{"{g}":[{g_stats if g == "g" else ""}]}}' for g in order)

    addr = stats.body.split(b'"brokerAddr":"', 1)[1].split(b'"', 1)[0].decode()
    assert addr.startswith("127.0.0.1:")
    assert stats.code == R.SUCCESS
    g_stats = consume_stats_json("rocketstore", rows, "0.0")
    body = f'{{"brokerAddr":"{addr}","consumeStatsList":[{expected(g_stats)}],"totalDiff":8,"totalInflightDiff":-4}}'
    assert stats.body == body.encode()  # diffs 2 + 6; inflight: pullOffset 0 less the consumer offsets 4 + 0
    body = f'{{"brokerAddr":"{addr}","consumeStatsList":[{expected("")}],"totalDiff":0,"totalInflightDiff":0}}'
    assert ordered.body == body.encode()


def test_consumer_status_gathers_the_consumers_offset_tables(tmp_path):
    mq_table = '{{"brokerName":"rocketstore","queueId":0,"topic":"T"}:5,{"brokerName":"rocketstore","queueId":1,"topic":"T"}:7}'

    async def scenario(broker, admin, store):
        offline = await admin.call(RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": "T", "group": "g"})
        push, lite = await Client.connect(admin_port(admin)), await Client.connect(admin_port(admin))
        try:
            for c, cid in ((push, "push-cid"), (lite, "lite-cid")):
                hb = await c.call(RC.HEART_BEAT, body=heartbeat(client_id=cid, producer=None), language=0, version=479)
                assert hb.code == R.SUCCESS
            asked = asyncio.ensure_future(
                admin.call(RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": "T", "group": "g"})
            )
            questions = []
            for c, body in ((push, f'{{"consumerTable":{{}},"messageQueueTable":{mq_table}}}'),
                            (lite, '{"consumerTable":{},"messageQueueTable":{}}')):  # fmt: skip
                q = await c.read()
                questions.append(q)
                await c.send(RemotingCommand(0, opaque=q.opaque, flag=RESPONSE_FLAG, body=body.encode()))
            both = await asked
            one = asyncio.ensure_future(
                admin.call(
                    RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": "T", "group": "g", "clientAddr": "lite-cid"}
                )
            )
            q = await lite.read()
            await lite.send(RemotingCommand(0, opaque=q.opaque, flag=RESPONSE_FLAG, body=b'{"messageQueueTable":{}}'))
            return offline, questions, both, await one
        finally:
            await push.close()
            await lite.close()

    (offline, questions, both, one), store = with_broker(tmp_path, scenario, QUIET)
    store.close()  # its flush thread must not outlive the test's directory
    assert (offline.code, offline.remark) == (R.SYSTEM_ERROR, "No Any Consumer online in the consumer group: [g]")
    for q in questions:
        assert q.code == RC.GET_CONSUMER_STATUS_FROM_CLIENT and not q.is_response and not q.is_oneway
        assert q.ext_fields == {"topic": "T", "group": "g"}
    assert both.code == R.SUCCESS
    tables = {"lite-cid": "{}", "push-cid": mq_table}
    inner = ",".join(f'"{c}":{tables[c]}' for c in java_hashmap_order(list(tables)))
    assert both.body == f'{{"consumerTable":{{{inner}}},"messageQueueTable":{{}}}}'.encode()
    assert one.body == b'{"consumerTable":{"lite-cid":{}},"messageQueueTable":{}}'


def test_system_topic_list_from_broker(tmp_path):
    async def scenario(broker, admin, store):
        return await admin.call(RC.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)

    answer, store = with_broker(tmp_path, scenario, QUIET)
    store.close()  # its flush thread must not outlive the test's directory
    topics = json.loads(answer.body)["topicList"]
    assert answer.code == R.SUCCESS and list(json.loads(answer.body)) == ["topicList"]
    assert set(topics) == {"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
                           "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
                           "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC", "DefaultCluster",
                           "rocketstore"}  # fmt: skip
    assert topics == java_hashmap_order(topics)


def test_feature_off_answers(tmp_path):
    async def scenario(broker, admin, store):
        epoch = await admin.call(RC.GET_BROKER_EPOCH_CACHE)
        flush = await admin.call(RC.RESET_MASTER_FLUSH_OFFSET, {"masterFlushOffset": "123"})
        return epoch, flush

    (epoch, flush), store = with_broker(tmp_path, scenario, QUIET)
    store.close()  # its flush thread must not outlive the test's directory
    assert (epoch.code, epoch.remark, epoch.body) == (R.SYSTEM_ERROR, "this request only for controllerMode ", b"")
    assert (flush.code, flush.remark) == (R.SUCCESS, None)
