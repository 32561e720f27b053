"""LITE_PULL_MESSAGE (361, DefaultLitePullConsumer's pull) answered as PULL_MESSAGE is, long polling included, and
refused when litePullMessageEnable is off; QUERY_TOPIC_CONSUME_BY_WHO (300, the message track of mqadmin's
queryMsgById): the groups subscribed by heartbeat, then those with offsets, as a GroupList. The Java client drives
both in test_java_client.py."""

import asyncio
import json

from broker_fixtures import with_broker
from test_broker_pull import COMMIT, SUB, SUSPEND, fill, header, pull_ext

from rocketstore.formats.record import decode_record_py
from rocketstore.remoting.broker import BrokerSettings
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R

LITE = 0x10  # PullSysFlag.FLAG_LITE_PULL_MESSAGE


def bodies(r):
    pos, out = 0, []
    while pos < len(r.body):
        m = decode_record_py(r.body, pos)
        out.append((m.queue_offset, m.body))
        pos += m.size
    return out


def test_lite_pull_answers_as_a_pull(tmp_path):
    async def scenario(broker, c, store):
        fill(store)
        flags = SUB | SUSPEND | LITE  # what pullSyncImpl builds: no commit offset, suspend, subscription, lite
        lite = await c.call(RC.LITE_PULL_MESSAGE, pull_ext(offset=1, sys_flag=flags, maxMsgNums="3"))
        pull = await c.call(RC.PULL_MESSAGE, pull_ext(offset=1, sys_flag=SUB, maxMsgNums="3"))
        # nothing at the end: held (long polling) until a put comes
        held = asyncio.ensure_future(c.call(RC.LITE_PULL_MESSAGE, pull_ext(offset=5, sys_flag=flags, suspend_ms=20000)))
        await asyncio.sleep(0.3)
        assert not held.done()
        from rocketstore import Message

        assert (await asyncio.to_thread(store.put, Message("T", b"late"), 0)).ok
        broker.arrived("T", 0)
        woken = await asyncio.wait_for(held, 10)
        return lite, pull, woken, broker.stats.got_total

    (lite, pull, woken, got), store = with_broker(tmp_path, scenario)
    assert (lite.code, lite.remark) == (R.SUCCESS, "FOUND")
    assert header(lite) == header(pull) == {"nextBeginOffset": 4, "minOffset": 0, "maxOffset": 5,
                                            "suggestWhichBrokerId": 0}  # fmt: skip
    assert lite.body == pull.body and bodies(lite) == [(1, b"b1"), (2, b"b2"), (3, b"b3")]
    assert (woken.code, bodies(woken)) == (R.SUCCESS, [(5, b"late")])
    assert got == 7  # counted as pulled messages (brokerStatus, consumerProgress's TPS)
    # a lite pull commits nothing: its consumer sends UPDATE_CONSUMER_OFFSET
    assert store.consumer_offsets.query("g", "T", 0) == -1
    store.close()


def test_lite_pull_refused_when_disabled(tmp_path):
    async def scenario(broker, c, store):
        fill(store)
        lite = await c.call(RC.LITE_PULL_MESSAGE, pull_ext(sys_flag=SUB | LITE))
        pull = await c.call(RC.PULL_MESSAGE, pull_ext(sys_flag=SUB))
        return lite, pull

    (lite, pull), store = with_broker(tmp_path, scenario, BrokerSettings(litePullMessageEnable=False))
    assert (lite.code, lite.remark) == (R.NO_PERMISSION, "the broker[127.0.0.1] for lite pull consumer is forbidden")
    assert pull.code == R.SUCCESS
    store.close()


def heartbeat(group, *topics):
    subs = [{"topic": t, "subString": "*", "expressionType": "TAG", "tagsSet": [], "codeSet": [], "subVersion": 1}
            for t in topics]  # fmt: skip
    return json.dumps({"clientID": f"c-{group}", "producerDataSet": [], "consumerDataSet": [
        {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
         "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": subs, "unitMode": False}]}).encode()  # fmt: skip


def test_topic_consumed_by_who(tmp_path):
    async def scenario(broker, c, store):
        fill(store)
        out = {"none": await c.call(RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T"})}
        assert (await c.call(RC.HEART_BEAT, None, heartbeat("online", "T", "Other"))).code == R.SUCCESS
        # a pull of another group (its subscription group made) commits an offset
        ext = pull_ext(group="committed", sys_flag=SUB | COMMIT, commitOffset="3")
        assert (await c.call(RC.PULL_MESSAGE, ext)).code == R.SUCCESS
        out["both"] = await c.call(RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T"})
        out["other"] = await c.call(RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "Other"})
        await asyncio.to_thread(broker.offsets.flush)
        await c.call(RC.UNREGISTER_CLIENT, {"clientID": "c-online", "consumerGroup": "online"})
        out["left"] = await c.call(RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T"})
        out["left_other"] = await c.call(RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "Other"})
        return out

    out, store = with_broker(tmp_path, scenario, BrokerSettings(notifyConsumerIdsChangedEnable=False))
    assert all(r.code == R.SUCCESS and r.remark is None for r in out.values())
    # GroupList's HashSet<String> in java.util.HashMap order (String.hashCode spread, 16 buckets): "committed" in
    # bucket 2, "online" in 9, whatever order they came in
    assert out["none"].body == b'{"groupList":[]}'
    assert out["both"].body == b'{"groupList":["committed","online"]}'
    assert json.loads(out["other"].body) == {"groupList": ["online"]}
    # a group without clients leaves the topics it subscribed; its committed offsets keep it consuming
    assert json.loads(out["left"].body) == {"groupList": ["committed"]}
    assert json.loads(out["left_other"].body) == {"groupList": []}
    store.close()
