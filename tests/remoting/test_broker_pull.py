"""PULL_MESSAGE, consumer offsets and client registration over the wire, with RocketMQ's codes, remarks and
header fields; a pull's body is the CommitLog's own bytes (compared with the segment file read directly)."""

import asyncio
import json

from broker_fixtures import with_broker
from remoting_client import Client

from rocketstore import Message
from rocketstore.store.consumer import offsets_path, parse_offsets
from rocketstore.formats.record import decode_record_py
from rocketstore.remoting.broker import BrokerSettings
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R
from rocketstore.remoting.command import RemotingCommand

COMMIT, SUSPEND, SUB = 1, 2, 4


def pull_ext(offset=0, queue_id=0, sys_flag=SUB, subscription="*", suspend_ms=0, group="g", **more):
    ext = {"consumerGroup": group, "topic": "T", "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": "32", "sysFlag": str(sys_flag), "commitOffset": "0",
           "suspendTimeoutMillis": str(suspend_ms), "subscription": subscription, "subVersion": "0",
           "expressionType": "TAG"}  # fmt: skip
    ext.update(more)
    return ext


def fill(store, n=5):
    store.create_topic("T", 2)
    for i in range(n):
        m = Message("T", f"b{i}".encode(), tags="A" if i % 2 == 0 else "B", properties={"n": str(i)})
        assert store.put(m, 0).ok
    store.wait_dispatched(10)


def header(resp):
    e = resp.ext_fields or {}
    return {k: int(e[k]) for k in ("nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId")}


def segment_bytes(store, phys, size):
    path = store.commitlog_position(phys)[0]
    with open(path, "rb") as f:
        f.seek(phys % (16 << 20))
        return f.read(size)


def test_pull_found_body_is_the_commitlog_bytes(tmp_path):
    async def scenario(broker, c, store):
        fill(store)
        return await c.call(RC.PULL_MESSAGE, pull_ext(offset=1, maxMsgNums="3"))

    r, store = with_broker(tmp_path, scenario)
    assert (r.code, r.remark) == (R.SUCCESS, "FOUND")
    assert header(r) == {"nextBeginOffset": 4, "minOffset": 0, "maxOffset": 5, "suggestWhichBrokerId": 0}
    assert r.ext_fields["topicSysFlag"] == "0" and r.ext_fields["groupSysFlag"] == "0"
    pos, got = 0, []
    while pos < len(r.body):
        m = decode_record_py(r.body, pos)
        assert r.body[pos : pos + m.size] == segment_bytes(store, m.physical_offset, m.size)
        got.append((m.queue_offset, m.body, m.tags))
        pos += m.size
    assert got == [(1, b"b1", "B"), (2, b"b2", "A"), (3, b"b3", "B")]
    store.close()


def test_pull_statuses(tmp_path):
    async def scenario(broker, c, store):
        fill(store)
        out = {}
        out["empty_at_0"] = await c.call(RC.PULL_MESSAGE, pull_ext(queue_id=1))
        out["empty_at_5"] = await c.call(RC.PULL_MESSAGE, pull_ext(queue_id=1, offset=5))
        out["at_max"] = await c.call(RC.PULL_MESSAGE, pull_ext(offset=5))
        out["past_max"] = await c.call(RC.PULL_MESSAGE, pull_ext(offset=9))
        out["no_match"] = await c.call(RC.PULL_MESSAGE, pull_ext(offset=0, subscription="C"))
        out["tags"] = await c.call(RC.PULL_MESSAGE, pull_ext(offset=0, subscription="B || Z"))
        out["bad_queue"] = await c.call(RC.PULL_MESSAGE, pull_ext(queue_id=2))
        out["no_topic"] = await c.call(RC.PULL_MESSAGE, pull_ext(topic="Nope"))
        out["no_sub"] = await c.call(RC.PULL_MESSAGE, pull_ext(sys_flag=0))
        out["sql_off"] = await c.call(RC.PULL_MESSAGE, pull_ext(subscription="n > 1", expressionType="SQL92"))
        out["timeout"] = await c.call(RC.PULL_MESSAGE, pull_ext(offset=5, sys_flag=SUB | SUSPEND, suspend_ms=50))
        return out

    out, store = with_broker(tmp_path, scenario)
    store.close()
    code = {k: (v.code, v.remark) for k, v in out.items()}
    assert code["empty_at_0"] == (R.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE")
    assert code["empty_at_5"] == (R.PULL_OFFSET_MOVED, "NO_MESSAGE_IN_QUEUE")
    assert code["at_max"] == (R.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
    assert code["past_max"] == (R.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY")
    assert header(out["past_max"])["nextBeginOffset"] == 5
    assert code["no_match"] == (R.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    assert header(out["no_match"])["nextBeginOffset"] == 5
    pos, tags = 0, []
    while pos < len(out["tags"].body):
        m = decode_record_py(out["tags"].body, pos)
        tags.append(m.tags)
        pos += m.size
    assert tags == ["B", "B"]
    assert code["bad_queue"][0] == R.INVALID_PARAMETER
    assert code["bad_queue"][1].startswith("queueId[2] is illegal, topic:[T] topicConfig.readQueueNums:[2] consumer:[")
    assert code["no_topic"][0] == R.TOPIC_NOT_EXIST and code["no_topic"][1].startswith("topic[Nope] not exist")
    assert code["no_sub"][0] == R.SUBSCRIPTION_NOT_EXIST
    assert code["no_sub"][1].startswith("the consumer's group info not exist")
    assert code["sql_off"] == (R.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")
    assert code["timeout"] == (R.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")


def test_sql92_with_property_filter(tmp_path):
    async def scenario(broker, c, store):
        fill(store)
        ok = await c.call(RC.PULL_MESSAGE, pull_ext(subscription="n >= 3", expressionType="SQL92"))
        bad = await c.call(RC.PULL_MESSAGE, pull_ext(subscription="n >>", expressionType="SQL92"))
        return ok, bad

    (ok, bad), store = with_broker(tmp_path, scenario, BrokerSettings(enablePropertyFilter=True))
    store.close()
    assert ok.code == R.SUCCESS
    bodies, pos = [], 0
    while pos < len(ok.body):
        m = decode_record_py(ok.body, pos)
        bodies.append(m.body)
        pos += m.size
    assert bodies == [b"b3", b"b4"]
    assert (bad.code, bad.remark) == (R.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")


def test_long_poll_is_woken_by_a_send(tmp_path):
    async def scenario(broker, c, store):
        fill(store, 1)
        port = broker.server.port
        held = asyncio.ensure_future(
            c.call(
                RC.PULL_MESSAGE, pull_ext(offset=1, sys_flag=SUB | SUSPEND | COMMIT, suspend_ms=30000, commitOffset="1")
            )
        )
        await asyncio.sleep(0.2)
        assert not held.done()
        p = await Client.connect(port)
        ext = {"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
               "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0", "properties": "TAGS\x01A\x02"}  # fmt: skip
        sent = await p.call(RC.SEND_MESSAGE, ext, b"late")
        await p.close()
        return sent, await held, broker.offsets.query("g", "T", 0)

    (sent, got, committed), store = with_broker(tmp_path, scenario)
    store.close()
    assert sent.code == R.SUCCESS and sent.ext_fields["queueOffset"] == "1"
    assert got.code == R.SUCCESS and decode_record_py(got.body, 0).body == b"late"
    assert committed == 1  # FLAG_COMMIT_OFFSET: commitOffset stored before the get


def test_consumer_offsets(tmp_path):
    async def scenario(broker, c, store):
        fill(store)
        out = {}
        q = {"consumerGroup": "g", "topic": "T", "queueId": "0"}
        out["new_with_messages"] = await c.call(RC.QUERY_CONSUMER_OFFSET, q)
        out["new_empty"] = await c.call(RC.QUERY_CONSUMER_OFFSET, {**q, "queueId": "1"})
        out["no_zero"] = await c.call(RC.QUERY_CONSUMER_OFFSET, {**q, "setZeroIfNotFound": "false"})
        out["no_group"] = await c.call(RC.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "3"})
        await c.call(RC.PULL_MESSAGE, pull_ext())  # the pull creates the subscription group
        out["no_topic"] = await c.call(RC.UPDATE_CONSUMER_OFFSET, {**q, "topic": "Nope", "commitOffset": "3"})
        out["update"] = await c.call(RC.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "3"})
        out["query"] = await c.call(RC.QUERY_CONSUMER_OFFSET, q)
        out["max"] = await c.call(RC.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})
        out["min"] = await c.call(RC.GET_MIN_OFFSET, {"topic": "T", "queueId": "0"})
        t2 = store.store_timestamp_at("T", 0, 2)
        out["search"] = await c.call(
            RC.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "T", "queueId": "0", "timestamp": str(t2)}
        )
        out["earliest"] = await c.call(RC.GET_EARLIEST_MSG_STORETIME, {"topic": "T", "queueId": "0"})
        out["t0"] = store.store_timestamp_at("T", 0, 0)
        out["search_expected"] = store.offset_by_time("T", 0, t2)
        return out

    out, store = with_broker(tmp_path, scenario)
    assert (out["new_with_messages"].code, out["new_with_messages"].ext_fields) == (R.SUCCESS, {"offset": "0"})
    assert (out["new_empty"].code, out["new_empty"].remark) == (
        R.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")  # fmt: skip
    assert (out["no_zero"].code, out["no_zero"].remark) == (
        R.QUERY_NOT_FOUND, "Not found, do not set to zero, maybe this group boot first")  # fmt: skip
    assert (out["no_group"].code, out["no_group"].remark) == (R.SUBSCRIPTION_GROUP_NOT_EXIST, "Group g not exist!")
    assert (out["no_topic"].code, out["no_topic"].remark) == (R.TOPIC_NOT_EXIST, "Topic Nope not exist!")
    assert (out["update"].code, out["update"].remark) == (R.SUCCESS, None)
    assert out["query"].ext_fields == {"offset": "3"}
    assert out["max"].ext_fields == {"offset": "5"} and out["min"].ext_fields == {"offset": "0"}
    assert out["search"].ext_fields == {"offset": str(out["search_expected"])}
    assert out["earliest"].ext_fields == {"timestamp": str(out["t0"])}
    # persisted at close, in the store's own table (the gRPC side's too)
    assert store.consumer_offsets.query("g", "T", 0) == 3
    assert parse_offsets(open(offsets_path(store.root)).read())["T@g"] == {0: 3}
    store.close()


def heartbeat_body(client_id, group="cg", topic="T", sub="A || B"):
    return json.dumps({
        "clientID": client_id,
        "producerDataSet": [],
        "consumerDataSet": [{"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                             "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
                             "subscriptionDataSet": [{"topic": topic, "subString": sub, "expressionType": "TAG",
                                                      "classFilterMode": False, "tagsSet": [], "codeSet": [],
                                                      "subVersion": 1}]}],
    }).encode()  # fmt: skip


async def answer_and_notice(client, body):
    await client.send(RemotingCommand(RC.HEART_BEAT, opaque=7, body=body))
    two = [await client.read(), await client.read()]
    return next(f for f in two if f.is_response), next(f for f in two if not f.is_response)


def test_heartbeats_consumer_list_and_notifications(tmp_path):
    async def scenario(broker, c1, store):
        fill(store)
        out = {}
        out["none"] = await c1.call(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
        # every client of the group is told it changed, the new one too (its answer and the notice in any order)
        out["hb1"], out["notify_own"] = await answer_and_notice(c1, heartbeat_body("c1"))
        c2 = await Client.connect(broker.server.port)
        out["hb2"], out["notify_new"] = await answer_and_notice(c2, heartbeat_body("c2"))
        out["notify"] = await c1.read()
        out["list"] = await c2.call(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
        # a pull without FLAG_SUBSCRIPTION uses the subscription the heartbeat registered: A || B
        out["pull"] = await c1.call(RC.PULL_MESSAGE, pull_ext(sys_flag=0, group="cg", subscription="C"))
        out["unreg"] = await c2.call(RC.UNREGISTER_CLIENT, {"clientID": "c2", "consumerGroup": "cg"})
        out["notify2"] = await c1.read()
        out["after"] = await c1.call(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
        await c2.close()
        out["retry_topic"] = broker.routes.route("%RETRY%cg")
        return out

    out, store = with_broker(tmp_path, scenario)
    assert (out["none"].code, out["none"].remark) == (R.SYSTEM_ERROR, "no consumer for this group, cg")
    assert out["hb1"].code == R.SUCCESS and out["hb2"].code == R.SUCCESS
    n = out["notify"]
    assert (n.code, n.ext_fields, n.is_oneway, n.is_response) == (
        RC.NOTIFY_CONSUMER_IDS_CHANGED,
        {"consumerGroup": "cg"},
        True,
        False,
    )
    assert out["notify_new"].code == out["notify_own"].code == RC.NOTIFY_CONSUMER_IDS_CHANGED
    assert out["list"].code == R.SUCCESS and out["list"].body == b'{"consumerIdList":["c1","c2"]}'
    assert out["pull"].code == R.SUCCESS and len(out["pull"].body) > 0
    assert out["unreg"].code == R.SUCCESS and out["notify2"].code == RC.NOTIFY_CONSUMER_IDS_CHANGED
    assert out["after"].body == b'{"consumerIdList":["c1"]}'
    # the heartbeat created the group's retry topic (one queue) and registered it
    assert store.topic_configs["%RETRY%cg"]["writeQueueNums"] == 1
    assert [q.write_queue_nums for q in out["retry_topic"].queue_datas] == [1]
    store.close()


def test_queue_locks(tmp_path):
    def body(client, *queues):
        mqs = [{"topic": "T", "brokerName": "rocketstore", "queueId": q} for q in queues]
        return json.dumps({"consumerGroup": "og", "clientId": client, "onlyThisBroker": False, "mqSet": mqs}).encode()

    async def scenario(broker, c, store):
        a = await c.call(RC.LOCK_BATCH_MQ, None, body("A", 0, 1))
        b = await c.call(RC.LOCK_BATCH_MQ, None, body("B", 1, 2))
        await c.call(RC.UNLOCK_BATCH_MQ, None, body("A", 1))
        b2 = await c.call(RC.LOCK_BATCH_MQ, None, body("B", 1, 2))
        # a lock not renewed for 60 s is free for another client
        stale = broker.locks.try_lock("og", "C", [{"topic": "T", "brokerName": "rocketstore", "queueId": 0}],
                                      now=int(__import__("time").time() * 1000) + 60_001)  # fmt: skip
        return a, b, b2, stale

    (a, b, b2, stale), store = with_broker(tmp_path, scenario)
    store.close()
    mq = '{{"brokerName":"rocketstore","queueId":{},"topic":"T"}}'.format
    assert a.code == R.SUCCESS and a.body == f'{{"lockOKMQSet":[{mq(0)},{mq(1)}]}}'.encode()
    assert b.body == f'{{"lockOKMQSet":[{mq(2)}]}}'.encode()  # queue 1 is A's
    assert b2.body == f'{{"lockOKMQSet":[{mq(1)},{mq(2)}]}}'.encode()  # A gave it back
    assert [m["queueId"] for m in stale] == [0]


def test_a_topic_without_config_is_served(tmp_path):
    from broker_fixtures import open_store

    store = open_store(tmp_path)
    assert store.put(Message("Bare", b"x"), 5).ok  # the library's put: queues, no config/topics.json entry
    store.wait_dispatched(10)
    assert "Bare" not in store.topic_configs

    async def scenario(broker, c, store):
        return await c.call(RC.PULL_MESSAGE, pull_ext(topic="Bare", queue_id=5)), broker.routes.route("Bare")

    (r, route), store = with_broker(tmp_path, scenario, store=store)
    store.close()
    assert r.code == R.SUCCESS and decode_record_py(r.body, 0).body == b"x"
    assert [q.read_queue_nums for q in route.queue_datas] == [6]
