"""mqadmin's runtime and client requests over the wire: GET_BROKER_RUNTIME_INFO (28), GET_BROKER_CONFIG (26),
UPDATE_BROKER_CONFIG (25), GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204),
GET_CONSUME_STATS (208) and GET_CONSUMER_RUNNING_INFO (307). Expected bodies are written out by hand from the Java
beans (KVTable, ConsumerConnection, ProducerConnection, ConsumeStats: fastjson, fields sorted by name) and the
figures from what the test put and pulled."""

import asyncio
import json
import re
import time

from broker_fixtures import with_broker
from remoting_client import Client

from rocketstore import Message
from rocketstore.remoting import fastjson
from rocketstore.remoting.broker import BrokerSettings
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R
from rocketstore.remoting.command import RESPONSE_FLAG, RemotingCommand

# no NOTIFY_CONSUMER_IDS_CHANGED to the test's clients: their next read is the answer they wait for
QUIET = BrokerSettings(notifyConsumerIdsChangedEnable=False)
SUB_T = {"classFilterMode": False, "topic": "T", "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 123,
         "expressionType": "TAG"}  # fmt: skip


def heartbeat(client_id="cid", group="g", producer="pg", subs=(SUB_T,)) -> bytes:
    """HeartbeatData as the Java client writes it."""
    return json.dumps({
        "clientID": client_id,
        "consumerDataSet": [{"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                             "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": list(subs),
                             "unitMode": False}],
        "producerDataSet": [{"groupName": producer}] if producer else [],
    }).encode()  # fmt: skip


def pull_ext(topic="T", queue_id=0, offset=0, group="g"):
    return {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
            "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
            "subscription": "*", "subVersion": "0", "expressionType": "TAG"}  # fmt: skip


def local_addr(c: Client) -> str:
    host, port = c.writer.get_extra_info("sockname")[:2]
    return f"{host}:{port}"


def kv(resp) -> dict:
    doc = fastjson.loads(resp.body)
    assert list(doc) == ["table"]  # KVTable
    return doc["table"]


def test_runtime_info_counts_puts_and_pulls(tmp_path):
    async def scenario(broker, c, store):
        store._cleanup.disk_usage = lambda path: 0.25
        before = int(time.time() * 1000)
        store.create_topic("T", 1)
        puts = [store.put(Message("T", b"p" * (10 + i)), 0) for i in range(3)]
        store.wait_dispatched(10)
        pulled = await c.call(RC.PULL_MESSAGE, pull_ext(offset=1))
        return before, puts, pulled, await c.call(RC.GET_BROKER_RUNTIME_INFO)

    (before, puts, pulled, r), store = with_broker(tmp_path, scenario)
    assert pulled.code == R.SUCCESS
    assert r.code == R.SUCCESS and r.remark is None
    t = kv(r)
    assert t["brokerVersionDesc"] == "V5_3_3"  # MQVersion.getVersionDesc(CURRENT_VERSION)
    assert t["msgPutTotalTodayNow"] == "3"  # the three puts after the broker started
    assert t["msgGetTotalTodayNow"] == "2"  # the pull from offset 1 returned two records
    assert (t["msgPutTotalTodayMorning"], t["msgPutTotalYesterdayMorning"]) == ("0", "0")  # before any midnight
    assert (t["msgGetTotalTodayMorning"], t["msgGetTotalYesterdayMorning"]) == ("0", "0")
    assert t["commitLogMinOffset"] == "0"
    assert t["commitLogMaxOffset"] == str(sum(p.size for p in puts))
    assert t["earliestMessageTimeStamp"] == str(puts[0].store_timestamp)
    assert t["commitLogDiskRatio"] == "0.25" and t["consumeQueueDiskRatio"] == "0.25"
    assert t[f"commitLogDiskRatio_{store.root}/commitlog"] == "0.25"
    assert int(t["bootTimestamp"]) <= before
    assert re.fullmatch(r"\[ 0 days, 0 hours, \d+ minutes, \d+ seconds \]", t["runtime"])
    assert re.fullmatch(r"\d+\.\d\d \d+\.\d\d \d+\.\d\d", t["putTps"])  # 10 s, 1 min, 10 min
    assert re.fullmatch(r"Total : [\d.]+ [KMGTPE]iB, Free : [\d.]+ [KMGTPE]iB\.", t["commitLogDirCapacity"])
    # timerWheelEnable off: RocketMQ's fixed answers
    assert [t[k] for k in ("timerReadBehind", "timerOffsetBehind", "timerCongestNum")] == ["0", "0", "0"]
    assert (t["timerEnqueueTps"], t["timerDequeueTps"]) == ("0.0", "0.0")
    assert t["dispatchBehindBytes"] == "0"
    store.close()


def test_broker_config_and_runtime_updates(tmp_path):
    async def scenario(broker, c, store):
        store.create_topic("T", 1)
        assert store.put(Message("T", b"x"), 0).ok
        store.wait_dispatched(10)
        out = {"config": await c.call(RC.GET_BROKER_CONFIG)}
        out["wo"] = await c.call(RC.UPDATE_BROKER_CONFIG, body=b"# write only\nbrokerPermission=2\n")
        out["route"] = broker.routes.route("T").queue_datas[0].perm
        out["pull_wo"] = await c.call(RC.PULL_MESSAGE, pull_ext())
        out["config2"] = await c.call(RC.GET_BROKER_CONFIG)
        out["rw"] = await c.call(RC.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6")
        out["pull_rw"] = await c.call(RC.PULL_MESSAGE, pull_ext())
        out["black"] = await c.call(RC.UPDATE_BROKER_CONFIG, body=b"rocketmqHome=/tmp/x\n")
        out["unknown"] = await c.call(RC.UPDATE_BROKER_CONFIG, body=b"flushDiskType=SYNC_FLUSH\n")
        out["nan"] = await c.call(RC.UPDATE_BROKER_CONFIG, body=b"brokerPermission=rw\n")
        return out

    out, store = with_broker(tmp_path, scenario)
    cfg = out["config"]
    assert cfg.code == R.SUCCESS
    lines = cfg.body.decode().splitlines()
    for line in ("brokerName=rocketstore", "brokerClusterName=DefaultCluster", "brokerPermission=6",
                 "autoCreateTopicEnable=true", "defaultTopicQueueNums=8", f"storePathRootDir={store.root}"):  # fmt: skip
        assert line in lines
    version = json.loads(cfg.ext_fields["version"])  # GetBrokerConfigResponseHeader.version: a DataVersion
    assert list(version) == ["counter", "stateVersion", "timestamp"] and version["counter"] == 0
    assert (out["wo"].code, out["wo"].remark) == (R.SUCCESS, None)
    assert out["route"] == 2  # each topic's perm masked by brokerPermission (registerBrokerAll)
    assert out["pull_wo"].code == R.NO_PERMISSION
    assert "brokerPermission=2" in out["config2"].body.decode().splitlines()
    assert json.loads(out["config2"].ext_fields["version"])["counter"] == 1
    assert out["rw"].code == R.SUCCESS and out["pull_rw"].code == R.SUCCESS
    assert (out["black"].code, out["black"].remark) == (R.NO_PERMISSION, "Can not update config in black list.")
    assert out["unknown"].code == R.INVALID_PARAMETER and "flushDiskType" in out["unknown"].remark
    assert out["nan"].code == R.INVALID_PARAMETER
    store.close()


def test_consumer_and_producer_connections(tmp_path):
    async def scenario(broker, c, store):
        store.create_topic("T", 1)
        hb = await c.call(RC.HEART_BEAT, body=heartbeat(), language=0, version=479)
        assert hb.code == R.SUCCESS
        out = {"addr": local_addr(c)}
        out["consumer"] = await c.call(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "g"})
        out["producer"] = await c.call(RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "pg"})
        out["no_consumer"] = await c.call(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "none"})
        out["no_producer"] = await c.call(RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "none"})
        return out

    out, store = with_broker(tmp_path, scenario, QUIET)
    conn = '{"clientAddr":"%s","clientId":"cid","language":"JAVA","version":479}' % out["addr"]
    assert out["consumer"].code == R.SUCCESS
    assert out["consumer"].body.decode() == (
        '{"connectionSet":[%s],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY",'
        '"messageModel":"CLUSTERING","subscriptionTable":{"T":{"classFilterMode":false,"codeSet":[],'
        '"expressionType":"TAG","subString":"*","subVersion":123,"tagsSet":[],"topic":"T"}}}' % conn
    )
    assert out["producer"].code == R.SUCCESS
    assert out["producer"].body.decode() == '{"connectionSet":[%s]}' % conn
    assert (out["no_consumer"].code, out["no_consumer"].remark) == (
        R.CONSUMER_NOT_ONLINE,
        "the consumer group[none] not online",
    )
    assert (out["no_producer"].code, out["no_producer"].remark) == (
        R.SYSTEM_ERROR,
        "the producer group[none] not exist",
    )
    store.close()


def test_consume_stats_bytes(tmp_path):
    async def scenario(broker, c, store):
        store.create_topic("T", 2)
        store.create_topic("U", 1)
        puts = [store.put(Message("T", f"{i}".encode()), 0) for i in range(3)]
        assert store.put(Message("T", b"q1"), 1).ok
        assert store.put(Message("U", b"u"), 0).ok
        store.wait_dispatched(10)
        await c.call(RC.HEART_BEAT, body=heartbeat(producer=None), language=0, version=479)
        commit = {"consumerGroup": "g", "topic": "T", "queueId": "0", "commitOffset": "2"}
        assert (await c.call(RC.UPDATE_CONSUMER_OFFSET, commit)).code == R.SUCCESS
        out = {"puts": puts}
        out["topic"] = await c.call(RC.GET_CONSUME_STATS, {"consumerGroup": "g", "topic": "T"})
        out["all"] = await c.call(RC.GET_CONSUME_STATS, {"consumerGroup": "g"})
        # a listed topic is taken without the subscription check; one without a config is left out
        out["listed"] = await c.call(RC.GET_CONSUME_STATS, {"consumerGroup": "g", "topicList": "U;Nope"})
        out["unsubscribed"] = await c.call(RC.GET_CONSUME_STATS, {"consumerGroup": "g", "topic": "U"})
        return out

    out, store = with_broker(tmp_path, scenario, QUIET)
    ts = out["puts"][1].store_timestamp  # getMessageStoreTimeStamp at consumerOffset - 1
    expected_t = (
        '{"consumeTps":0.0,"offsetTable":{'
        '{"brokerName":"rocketstore","queueId":0,"topic":"T"}:'
        '{"brokerOffset":3,"consumerOffset":2,"lastTimestamp":%d,"pullOffset":2},'
        '{"brokerName":"rocketstore","queueId":1,"topic":"T"}:'
        '{"brokerOffset":1,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0}}}' % ts
    )
    assert out["topic"].code == R.SUCCESS and out["topic"].body.decode() == expected_t
    assert out["all"].body.decode() == expected_t  # the group's offsets name T only
    assert out["listed"].body.decode() == (
        '{"consumeTps":0.0,"offsetTable":{{"brokerName":"rocketstore","queueId":0,"topic":"U"}:'
        '{"brokerOffset":1,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0}}}'
    )
    assert out["unsubscribed"].body == b'{"consumeTps":0.0,"offsetTable":{}}'
    store.close()


def test_consumer_running_info_is_asked_of_the_consumer(tmp_path):
    async def scenario(broker, admin, store):
        store.create_topic("T", 1)
        consumer = await Client.connect(admin_port(admin))
        try:
            assert (
                await consumer.call(RC.HEART_BEAT, body=heartbeat(producer=None), language=0, version=479)
            ).code == 0
            ext = {"consumerGroup": "g", "clientId": "cid", "jstackEnable": "false"}
            asked = asyncio.ensure_future(admin.call(RC.GET_CONSUMER_RUNNING_INFO, ext))
            forwarded = await consumer.read()
            await consumer.send(RemotingCommand(0, opaque=forwarded.opaque, flag=RESPONSE_FLAG, body=b'{"x":1}'))
            answer = await asked
            missing = await admin.call(RC.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "g", "clientId": "nope"})
            return forwarded, answer, missing
        finally:
            await consumer.close()

    (forwarded, answer, missing), store = with_broker(tmp_path, scenario, QUIET)
    assert forwarded.code == RC.GET_CONSUMER_RUNNING_INFO and not forwarded.is_response
    assert forwarded.ext_fields == {"consumerGroup": "g", "clientId": "cid", "jstackEnable": "false"}
    assert (answer.code, answer.body) == (R.SUCCESS, b'{"x":1}')
    assert (missing.code, missing.remark) == (R.SYSTEM_ERROR, "The Consumer <g> <nope> not online")
    store.close()


def admin_port(c: Client) -> int:
    return c.writer.get_extra_info("peername")[1]
