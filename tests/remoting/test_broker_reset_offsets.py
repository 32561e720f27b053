"""Offset resets over the wire: INVOKE_BROKER_TO_RESET_OFFSET (222; ResetOffsetRequestHeader: topic, group,
timestamp, isForce, queueId, offset), by default RocketMQ 5's server-side reset (the queues' next pulls answer
PULL_OFFSET_MOVED with the reset offset; commits ignored meanwhile), with useServerSideResetOffset=false the
RESET_CONSUMER_CLIENT_OFFSET it hands to the group's consumers (ResetOffsetRequestHeader again, a ResetOffsetBody
or, for a C++ admin, a ResetOffsetBodyForC), CLONE_GROUP_OFFSET (314;
CloneGroupOffsetRequestHeader: srcGroup, destGroup, topic, offline) and QUERY_CONSUME_TIME_SPAN (303;
QueryConsumeTimeSpanRequestHeader: topic, group; QueryConsumeTimeSpanBody of QueueTimeSpan). Expected bodies are
written out by hand from the Java beans (fastjson: fields sorted by name, a MessageQueue map key as its object)."""

import json
import time

import asyncio
import dataclasses

from broker_fixtures import with_broker
from remoting_client import Client
from test_broker_admin_runtime import QUIET, admin_port, heartbeat
from test_broker_pull import COMMIT, SUB, SUSPEND, header, pull_ext

from rocketstore import Message
from rocketstore.remoting.broker.reset import java_date
from rocketstore.remoting.codes import LanguageCode
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R

CLIENT_SIDE = dataclasses.replace(QUIET, useServerSideResetOffset=False)  # Broker2Client.resetOffset


def fill(store, queues=2, per_queue=6) -> dict[int, list[int]]:
    """Messages in topic T; the store times of each queue's messages, read back."""
    store.create_topic("T", queues)
    for q in range(queues):
        for i in range(per_queue):
            assert store.put(Message("T", f"{q}-{i}".encode()), q).ok
    return {q: [m.store_timestamp for m in store.get("g", "T", q, 0, 64).messages] for q in range(queues)}


def by_time(times: list[int], ts: int) -> int:
    return next((i for i, t in enumerate(times) if t >= ts), len(times))


def mq(q: int) -> str:
    return f'{{"brokerName":"rocketstore","queueId":{q},"topic":"T"}}'


def reset_ext(group="g", timestamp=0, force=True) -> dict:
    return {"group": group, "topic": "T", "timestamp": str(timestamp), "isForce": "true" if force else "false"}


def test_client_side_reset_tells_the_consumers_and_answers_the_offset_table(tmp_path):
    async def scenario(broker, admin, store):
        times = fill(store)
        ts = times[0][3]
        for q in range(2):
            broker.offsets.commit("g", "T", q, 6 if q == 0 else 0)
        consumer = await Client.connect(admin_port(admin))
        try:
            assert (await consumer.call(RC.HEART_BEAT, body=heartbeat(producer=None), version=479)).code == 0
            forced = await admin.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(timestamp=ts, force=True))
            told = await consumer.read()
            committed = {q: broker.offsets.query("g", "T", q) for q in range(2)}
            for q in range(2):  # back where they were
                broker.offsets.commit("g", "T", q, 6 if q == 0 else 0)
            kept = await admin.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(timestamp=ts, force=False))
            told_kept = await consumer.read()
            latest = await admin.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(timestamp=-1, force=False))
            await consumer.read()
            for_c = await admin.call(
                RC.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(timestamp=-1, force=True), language=LanguageCode.CPP
            )
            told_c = await consumer.read()
            return times, ts, forced, told, committed, kept, told_kept, latest, for_c, told_c
        finally:
            await consumer.close()

    (times, ts, forced, told, committed, kept, told_kept, latest, for_c, told_c), store = with_broker(
        tmp_path, scenario, CLIENT_SIDE
    )
    target = {q: by_time(times[q], ts) for q in range(2)}
    assert target[0] <= 3  # times[0][3] is that of offset 3 (or of earlier ones stored in the same ms)
    assert forced.code == R.SUCCESS and forced.remark is None
    body = f'{{"offsetTable":{{{mq(0)}:{target[0]},{mq(1)}:{target[1]}}}}}'.encode()
    assert forced.body == body
    assert told.code == RC.RESET_CONSUMER_CLIENT_OFFSET and told.is_oneway and not told.is_response
    assert told.ext_fields == {"topic": "T", "group": "g", "timestamp": str(ts), "isForce": "false"}
    assert told.body == body
    assert committed == target
    # without force an offset only moves back: queue 0 (the end, 6) moves, queue 1 (0) stays
    keep_body = f'{{"offsetTable":{{{mq(0)}:{target[0]},{mq(1)}:0}}}}'.encode()
    assert kept.code == R.SUCCESS and kept.body == told_kept.body == keep_body
    # -1: the end, which is ahead of every committed offset: kept without force
    assert latest.body == keep_body
    assert for_c.body == f'{{"offsetTable":{{{mq(0)}:6,{mq(1)}:6}}}}'.encode()
    assert json.loads(told_c.body) == {
        "offsetTable": [
            {"brokerName": "rocketstore", "offset": 6, "queueId": 0, "topic": "T"},
            {"brokerName": "rocketstore", "offset": 6, "queueId": 1, "topic": "T"},
        ]
    }
    assert list(json.loads(told_c.body)["offsetTable"][0]) == ["brokerName", "offset", "queueId", "topic"]
    store.close()


def test_client_side_reset_refusals(tmp_path):
    async def scenario(broker, admin, store):
        fill(store)
        no_topic = await admin.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, {**reset_ext(), "topic": "Nope"})
        no_offsets = await admin.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext())
        for q in range(2):
            broker.offsets.commit("g", "T", q, 4)
        offline = await admin.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(timestamp=123))
        return no_topic, no_offsets, offline, {q: broker.offsets.query("g", "T", q) for q in range(2)}

    (no_topic, no_offsets, offline, after), store = with_broker(tmp_path, scenario, CLIENT_SIDE)
    assert (no_topic.code, no_topic.remark) == (
        R.TOPIC_NOT_EXIST,
        "[reset-offset] reset offset failed, no topic in this broker. topic=Nope",
    )
    assert (no_offsets.code, no_offsets.remark) == (R.SYSTEM_ERROR, "THe consumer group <g> not exist")
    assert (offline.code, offline.remark) == (
        R.CONSUMER_NOT_ONLINE,
        "Consumer not online, so can not reset offset, Group: g Topic: T Timestamp: 123",
    )
    assert after == {0: 4, 1: 4}  # nothing committed: mqadmin's fallback does it
    store.close()


def test_server_side_reset_of_all_queues_is_handed_to_their_next_pulls(tmp_path):
    """The default: every read queue's offset for the timestamp, isForce ignored, no consumer needed; each queue's
    next pull answers PULL_OFFSET_MOVED / OFFSET_RESET once (its commitOffset not taken), a held pull at once;
    commits of the queue are ignored until then and a query answers the reset offset."""

    async def scenario(broker, admin, store):
        times = fill(store)
        broker.subscription_groups.find("g")  # auto-created, as a consumer's heartbeat would
        for q in range(2):
            broker.offsets.commit("g", "T", q, 6 if q == 0 else 0)
        ts = times[0][3]  # queue 0's offset 3 (or earlier in the same ms); all of queue 1 (stored later): 0
        reset = await admin.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, reset_ext(timestamp=ts, force=False))
        out = {"reset": reset, "query": {}}
        for q in range(2):
            ext = {"consumerGroup": "g", "topic": "T", "queueId": str(q)}
            out["query"][q] = (await admin.call(RC.QUERY_CONSUMER_OFFSET, ext)).ext_fields["offset"]
        out["update"] = await admin.call(RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "T",
                                                                    "queueId": "0", "commitOffset": "5"})  # fmt: skip
        out["committed_after_update"] = broker.offsets.query("g", "T", 0)
        # queue 0: a pull at the old position, committing it: moved, the reset kept
        out["moved"] = await admin.call(RC.PULL_MESSAGE, pull_ext(offset=6, sys_flag=SUB | COMMIT, commitOffset="6"))
        out["committed_after_pull"] = broker.offsets.query("g", "T", 0)
        out["again"] = await admin.call(
            RC.PULL_MESSAGE, pull_ext(offset=int(out["moved"].ext_fields["nextBeginOffset"]))
        )
        # queue 1: its reset handed out, a pull held at its end is answered by a reset made while it waits
        out["moved1"] = await admin.call(RC.PULL_MESSAGE, pull_ext(offset=6, queue_id=1))
        holder = await Client.connect(admin_port(admin))
        try:
            held = asyncio.ensure_future(holder.call(RC.PULL_MESSAGE, pull_ext(
                offset=6, queue_id=1, sys_flag=SUB | SUSPEND, suspend_ms=30_000)))  # fmt: skip
            await asyncio.sleep(0.3)
            assert not held.done()  # held: nothing past offset 6
            await admin.call(
                RC.INVOKE_BROKER_TO_RESET_OFFSET, {**reset_ext(timestamp=0), "queueId": "1", "offset": "2"}
            )
            out["held"] = await asyncio.wait_for(held, 10)
        finally:
            await holder.close()
        return times, ts, out

    (times, ts, out), store = with_broker(tmp_path, scenario, QUIET)
    target = {q: by_time(times[q], ts) for q in range(2)}
    assert target[0] <= 3 and target[1] == 0
    reset = out["reset"]
    assert reset.code == R.SUCCESS and reset.remark is None
    assert reset.body == f'{{"offsetTable":{{{mq(0)}:{target[0]},{mq(1)}:{target[1]}}}}}'.encode()
    assert out["query"] == {q: str(target[q]) for q in range(2)}
    assert (out["update"].code, out["update"].remark) == (R.SUCCESS, "Offset has been previously reset")
    assert out["committed_after_update"] == target[0]
    moved = out["moved"]
    assert (moved.code, moved.remark) == (R.PULL_OFFSET_MOVED, "OFFSET_RESET")
    assert header(moved) == {"nextBeginOffset": target[0], "minOffset": 0, "maxOffset": 6, "suggestWhichBrokerId": 0}
    assert out["committed_after_pull"] == target[0]
    assert out["again"].code == R.SUCCESS  # handed out once: the next pull reads from there
    assert header(out["again"])["nextBeginOffset"] == 6
    assert header(out["moved1"])["nextBeginOffset"] == target[1]
    held = out["held"]
    assert (held.code, held.remark, header(held)["nextBeginOffset"]) == (R.PULL_OFFSET_MOVED, "OFFSET_RESET", 2)
    store.close()


def test_server_side_reset_of_one_queue_and_refusals(tmp_path):
    """queueId (and offset) in the header: that queue alone (mqadmin resetOffsetByTime -b -q)."""

    async def scenario(broker, admin, store):
        times = fill(store)
        broker.subscription_groups.find("g")
        for q in range(2):
            broker.offsets.commit("g", "T", q, 6)
        ext = {**reset_ext(timestamp=0, force=False), "queueId": "1", "offset": "2"}
        given = await admin.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, ext)
        by_ts = await admin.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, {**reset_ext(timestamp=times[0][4]),
                                                                     "queueId": "0"})  # fmt: skip
        out_of_range = await admin.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, {**ext, "offset": "8"})
        no_group = await admin.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, {**ext, "group": "nope"})
        no_topic = await admin.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, {**reset_ext(), "topic": "Nope"})
        offsets = {q: broker.offsets.query("g", "T", q) for q in range(2)}
        return times, given, by_ts, out_of_range, no_group, no_topic, offsets

    (times, given, by_ts, out_of_range, no_group, no_topic, offsets), store = with_broker(tmp_path, scenario, QUIET)
    assert given.code == R.SUCCESS and given.body == f'{{"offsetTable":{{{mq(1)}:2}}}}'.encode()
    target = by_time(times[0], times[0][4])
    assert by_ts.body == f'{{"offsetTable":{{{mq(0)}:{target}}}}}'.encode()
    assert offsets == {0: target, 1: 2}
    assert (out_of_range.code, out_of_range.remark) == (
        R.SYSTEM_ERROR,
        "Target offset 8 not in consume queue range [0-6]",
    )
    assert (no_group.code, no_group.remark) == (R.SUBSCRIPTION_GROUP_NOT_EXIST, "Group nope does not exist")
    assert (no_topic.code, no_topic.remark) == (R.TOPIC_NOT_EXIST, "Topic Nope does not exist")
    store.close()


def test_clone_group_offset(tmp_path):
    async def scenario(broker, admin, store):
        fill(store)
        broker.offsets.commit("src", "T", 0, 3)
        broker.offsets.commit("src", "T", 1, 5)
        broker.offsets.flush()
        broker.offsets.commit("src", "T", 1, 6)  # pending: the in-memory table is what is cloned
        ext = {"srcGroup": "src", "destGroup": "dst", "topic": "T", "offline": "false"}
        cloned = await admin.call(RC.CLONE_GROUP_OFFSET, ext)
        no_topic = await admin.call(RC.CLONE_GROUP_OFFSET, {"srcGroup": "src", "destGroup": "none"})
        return cloned, no_topic, broker.offsets.offsets_of("dst", "T"), broker.offsets.topics_of("none")

    (cloned, no_topic, dst, none), store = with_broker(tmp_path, scenario, QUIET)
    assert (cloned.code, cloned.remark) == (R.SUCCESS, None)
    assert dst == {0: 3, 1: 6}
    assert no_topic.code == R.SUCCESS and none == []  # RocketMQ clones "null@src" then: nothing
    store.close()


def test_query_consume_time_span(tmp_path):
    async def scenario(broker, admin, store):
        times = fill(store, queues=2, per_queue=4)
        broker.offsets.commit("g", "T", 0, 2)
        broker.offsets.commit("g", "T", 1, 4)
        before = int(time.time() * 1000)
        resp = await admin.call(RC.QUERY_CONSUME_TIME_SPAN, {"topic": "T", "group": "g"})
        after = int(time.time() * 1000)
        missing = await admin.call(RC.QUERY_CONSUME_TIME_SPAN, {"topic": "Nope", "group": "g"})
        return times, resp, missing, before, after

    (times, resp, missing, before, after), store = with_broker(tmp_path, scenario, QUIET)
    assert resp.code == R.SUCCESS
    doc = json.loads(resp.body)
    assert list(doc) == ["consumeTimeSpanSet"]
    spans = doc["consumeTimeSpanSet"]
    fields = ["consumeTimeStamp", "consumeTimeStampStr", "delayTime", "maxTimeStamp", "maxTimeStampStr",
              "messageQueue", "minTimeStamp", "minTimeStampStr"]  # fmt: skip
    assert [list(s) for s in spans] == [fields, fields]
    s0, s1 = spans
    assert s0["messageQueue"] == {"brokerName": "rocketstore", "queueId": 0, "topic": "T"}
    assert (s0["minTimeStamp"], s0["maxTimeStamp"], s0["consumeTimeStamp"]) == (times[0][0], times[0][3], times[0][1])
    assert before - times[0][2] <= s0["delayTime"] <= after - times[0][2]  # now - the next message's store time
    assert (s1["consumeTimeStamp"], s1["delayTime"]) == (times[1][3], 0)  # consumed to the end: no delay
    assert s0["minTimeStampStr"] == java_date(times[0][0])
    assert len(java_date(times[0][0])) == len("2026-01-02 03:04:05,678")
    assert (missing.code, missing.remark) == (R.TOPIC_NOT_EXIST, "topic[Nope] not exist")
    store.close()


def test_java_date():
    ms = int(time.mktime((2021, 3, 4, 5, 6, 7, 0, 0, -1))) * 1000 + 9
    assert java_date(ms) == "2021-03-04 05:06:07,009"
