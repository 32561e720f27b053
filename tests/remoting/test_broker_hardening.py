"""The remoting broker against hostile or unlucky clients (issue #25): system topics closed to clients' sends,
delayed messages whose queue went away, offsets persisted on RocketMQ's schedule, the name server's state changes
for admins only, idle and crowding connections, held pulls woken by their own queue only and not counted as work
in flight. Expectations come from RocketMQ's source (TopicValidator, AbstractSendMessageProcessor.msgCheck,
TimerMessageStore.doPut, NettyRemotingServer, PullRequestHoldService, ConsumerOffsetManager)."""

import asyncio
import json
import time

import pytest
from broker_fixtures import open_store, with_broker
from remoting_client import Client
from test_broker_admin_topics import create_ext
from test_broker_send import send_ext, v2

from rocketstore import Message
from rocketstore.formats.inner_batch import encode_messages
from rocketstore.remoting.broker.schedule import ScheduleService
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R
from rocketstore.serve.delay import DelayService


# ---------------------------------------------------------------- 1. system topics
FORBIDDEN = ["rmq_sys_wheel_timer", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "RMQ_SYS_TRANS_HALF_TOPIC", "SCHEDULE_TOPIC_XXXX",
             "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "rmq_sys_REVIVE_LOG_x"]  # fmt: skip


def test_clients_cannot_send_to_system_topics(tmp_path):
    forged = "REAL_TOPIC\x01T\x02REAL_QID\x019999\x02TIMER_OUT_MS\x010\x02UNIQ_KEY\x01F1\x02"
    batch = encode_messages([(b"m1", "TAGS\x01A\x02", 0)])

    async def scenario(broker, c, store):
        out = {}
        for t in FORBIDDEN:
            out[t, "v1"] = await c.call(RC.SEND_MESSAGE, send_ext(topic=t, props=forged), b"forged")
            out[t, "v2"] = await c.call(RC.SEND_MESSAGE_V2, v2(send_ext(topic=t, props=forged)), b"forged")
            out[t, "batch"] = await c.call(RC.SEND_BATCH_MESSAGE, v2(send_ext(topic=t, props="")), batch)
        # what RocketMQ's msgCheck lets clients write stays writable: the template, traces, DLQs, benchmarks
        for t in ["TBW102", "RMQ_SYS_TRACE_TOPIC", "%DLQ%g", "BenchmarkTest"]:
            out[t, "v1"] = await c.call(RC.SEND_MESSAGE, send_ext(topic=t), b"ok")
        return out

    out, store = with_broker(tmp_path, scenario)
    for t in FORBIDDEN:
        for how in ("v1", "v2", "batch"):
            r = out[t, how]
            # AbstractSendMessageProcessor.msgCheck's answer
            assert (r.code, r.remark) == (R.NO_PERMISSION, f"Sending message to topic[{t}] is forbidden."), (t, how)
        assert store.max_offset(t, 0) <= 0
    for t in ["TBW102", "RMQ_SYS_TRACE_TOPIC", "%DLQ%g", "BenchmarkTest"]:
        assert out[t, "v1"].code == R.SUCCESS, t
    assert store.max_offset("rmq_sys_wheel_timer", 0) == 0
    store.close()


def test_one_rule_for_both_protocols():
    from rocketstore.serve.rules import is_client_send_forbidden, topic_refusal

    for t in FORBIDDEN:
        assert is_client_send_forbidden(t)
        assert topic_refusal(t) is not None  # the gRPC side refuses at least as much
    for t in ["TBW102", "RMQ_SYS_TRACE_TOPIC", "%DLQ%g", "%RETRY%g", "T"]:
        assert not is_client_send_forbidden(t)


def _forge(store, topic, queue_id, **props):
    """A record as an older rocketstore let a client write it (straight into the store here)."""
    return store.put(Message(topic, b"forged", properties={k: str(v) for k, v in props.items()}), queue_id)


def test_a_forged_timer_record_never_reaches_a_system_topic(tmp_path):
    store = open_store(tmp_path)
    _forge(store, "rmq_sys_wheel_timer", 0, REAL_TOPIC="RMQ_SYS_TRANS_OP_HALF_TOPIC", REAL_QID=0, TIMER_OUT_MS=1)
    _forge(store, "rmq_sys_wheel_timer", 0, REAL_TOPIC="T", REAL_QID=0, TIMER_OUT_MS=2)
    store.wait_dispatched(10)
    d = DelayService(store)  # as at a restart: the timer topic read back
    assert d.waiting() == 2
    assert d.deliver_due(10) == 2  # both taken off the timer; the forged op record skipped
    store.wait_dispatched(10)
    assert store.max_offset("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) <= 0
    assert [m.body for m in store.get("g", "T", 0, 0).messages] == [b"forged"]
    assert DelayService(store).waiting() == 0  # recorded
    store.close()


def test_a_forged_schedule_record_never_reaches_a_system_topic(tmp_path):
    store = open_store(tmp_path, message_delay_level="1s")
    _forge(store, "SCHEDULE_TOPIC_XXXX", 0, REAL_TOPIC="RMQ_SYS_TRANS_OP_HALF_TOPIC", REAL_QID=0, DELAY=1)
    _forge(store, "SCHEDULE_TOPIC_XXXX", 0, REAL_TOPIC="T", REAL_QID=0, DELAY=1)
    store.wait_dispatched(10)
    s = ScheduleService(store)
    assert s.deliver_due(int(time.time() * 1000) + 60_000) == 1
    store.wait_dispatched(10)
    assert store.max_offset("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) <= 0
    assert store.max_offset("T", 0) == 1
    assert ScheduleService(store).offsets == {1: 2}
    store.close()


# ---------------------------------------------------------------- 2. a delayed message whose queue went away
def test_delay_level_to_a_removed_queue_blocks_nothing(tmp_path):
    """Topic S shrinks from 4 to 2 queues while level-1 messages wait for its queues 3 and 0, and another topic's
    message waits behind them: each is delivered (queue 3 -> 3 % 2 = 1), and the level's progress is recorded."""
    store = open_store(tmp_path, message_delay_level="1s 2s")

    async def scenario(broker, c, store):
        out = [await c.call(RC.UPDATE_AND_CREATE_TOPIC, create_ext("S", read=4, write=4))]
        out.append(await c.call(RC.SEND_MESSAGE, send_ext(topic="S", queue_id=3, props="DELAY\x011\x02"), b"s3"))
        out.append(await c.call(RC.SEND_MESSAGE, send_ext(topic="S", queue_id=0, props="DELAY\x011\x02"), b"s0"))
        out.append(await c.call(RC.SEND_MESSAGE, send_ext(topic="O", queue_id=0, props="DELAY\x011\x02"), b"o0"))
        out.append(await c.call(RC.UPDATE_AND_CREATE_TOPIC, create_ext("S", read=2, write=2)))
        broker.schedule.stop()  # the test delivers by hand below, at a time it chooses
        return out

    out, store = with_broker(tmp_path, scenario, store=store)
    assert [r.code for r in out] == [R.SUCCESS] * 5
    store.wait_dispatched(10)
    s = ScheduleService(store)
    assert s.deliver_due(int(time.time() * 1000) + 60_000) == 3
    store.wait_dispatched(10)
    assert [m.body for m in store.get("g", "S", 1, 0).messages] == [b"s3"]
    assert [m.body for m in store.get("g", "S", 0, 0).messages] == [b"s0"]
    assert [m.body for m in store.get("g", "O", 0, 0).messages] == [b"o0"]
    # across a restart: nothing is delivered again
    again = ScheduleService(store)
    assert again.offsets == {1: 3}
    assert again.deliver_due(int(time.time() * 1000) + 60_000) == 0
    store.close()


class _Refusing:
    """The store, refusing puts to one topic for now (a full disk, say), to check that progress is recorded."""

    def __init__(self, store, topic, status):
        self._store, self._topic, self._status = store, topic, status

    def __getattr__(self, name):
        return getattr(self._store, name)

    def put(self, msg, queue_id=None):
        from rocketstore.message import PutResult

        if msg.topic == self._topic:
            return PutResult(self._status)
        return self._store.put(msg, queue_id)


@pytest.mark.parametrize("status", ["SERVICE_NOT_AVAILABLE", "MESSAGE_ILLEGAL"])
def test_delay_level_progress_is_recorded_when_a_delivery_fails(tmp_path, status):
    from rocketstore.message import PutStatus

    store = open_store(tmp_path, message_delay_level="1s")
    for topic in ("A", "B", "C"):
        _forge(store, "SCHEDULE_TOPIC_XXXX", 0, REAL_TOPIC=topic, REAL_QID=0, DELAY=1)
    store.wait_dispatched(10)
    s = ScheduleService(_Refusing(store, "B", PutStatus[status]))
    now = int(time.time() * 1000) + 60_000
    if status == "MESSAGE_ILLEGAL":  # refused for good: skipped, the level goes on (TimerMessageStore's PUT_NO_RETRY)
        assert s.deliver_due(now) == 2
        assert ScheduleService(store).offsets == {1: 3}
    else:  # refused for now: A is delivered and recorded, B waits for the next round
        assert s.deliver_due(now) == 1
        assert ScheduleService(store).offsets == {1: 1}
        assert ScheduleService(store).deliver_due(now) == 2
    store.wait_dispatched(10)
    assert store.max_offset("A", 0) == 1  # delivered once, never again
    assert store.max_offset("C", 0) == 1
    store.close()


def test_timer_message_to_a_removed_queue_blocks_nothing(tmp_path):
    """The gRPC side's timer (serve/delay.py): a message for queue 3 of a topic now of 2 queues and one for REAL_QID
    9999 are delivered to existing queues, the other topics' messages after them too, and nothing is delivered
    again after a restart."""
    store = open_store(tmp_path)
    store.create_topic("S", 4)
    store.create_topic("O", 1)
    d = DelayService(store)
    at = str(int(time.time() * 1000) + 3_600_000)
    for topic, q in (("S", 3), ("S", 0), ("O", 0)):
        assert d.put(Message(topic, f"{topic}{q}".encode(), properties={"TIMER_DELIVER_MS": at}), q).ok
    assert _forge(store, "rmq_sys_wheel_timer", 0, REAL_TOPIC="O", REAL_QID=9999, TIMER_OUT_MS=at).ok
    store.create_topic("S", 2)
    store.wait_dispatched(10)
    d = DelayService(store)
    assert d.waiting() == 4
    assert d.deliver_due(int(at) + 1) == 4
    store.wait_dispatched(10)
    assert [m.body for m in store.get("g", "S", 1, 0).messages] == [b"S3"]
    assert [m.body for m in store.get("g", "S", 0, 0).messages] == [b"S0"]
    assert [m.body for m in store.get("g", "O", 0, 0).messages] == [b"O0", b"forged"]
    assert DelayService(store).waiting() == 0
    store.close()


def test_timer_progress_is_recorded_when_a_delivery_fails(tmp_path):
    from rocketstore.message import PutStatus

    store = open_store(tmp_path)
    d = DelayService(store)
    at = int(time.time() * 1000) + 3_600_000
    for i, topic in enumerate(("A", "B", "C")):
        props = {"TIMER_DELIVER_MS": str(at + i)}
        assert d.put(Message(topic, topic.encode(), properties=props), 0).ok
    store.wait_dispatched(10)
    refusing = DelayService(_Refusing(store, "B", PutStatus.SERVICE_NOT_AVAILABLE))
    assert refusing.deliver_due(at + 10) == 1  # A delivered; B refused for now, C after it
    state = json.load(open(store.root + "/config/timerState.json"))
    assert state["offset"] == 1
    again = DelayService(store)  # a restart
    assert again.waiting() == 2
    assert again.deliver_due(at + 10) == 2
    store.wait_dispatched(10)
    assert [store.max_offset(t, 0) for t in ("A", "B", "C")] == [1, 1, 1]
    store.close()


def _unused():
    return asyncio


# ---------------------------------------------------------------- 6. the name server's state changes: admins only
def test_name_server_state_changes_need_an_admin_account():
    """A non-admin account allowed to read one topic cannot change routes, registrations or config; an admin can.
    Route reads stay open to it."""
    from test_acl import signed
    from test_namesrv import BROKER, register_body

    from rocketstore.remoting.acl import NAMESRV_ADMIN_CODES, PlainAcl
    from rocketstore.remoting.namesrv import NameServer

    acl = PlainAcl()
    acl.add_data(
        {"accounts": [
            {"accessKey": "reader1", "secretKey": "secret-r1", "topicPerms": ["T=SUB"]},
            {"accessKey": "reader2", "secretKey": "secret-r2", "whiteRemoteAddress": "127.0.0.1"},
            {"accessKey": "rocketmq2", "secretKey": "12345678", "admin": "true"},
        ]}
    )  # fmt: skip
    secrets = {"reader1": "secret-r1", "reader2": "secret-r2", "rocketmq2": "12345678"}
    ident = {k: BROKER[k] for k in ("brokerName", "brokerAddr", "clusterName", "brokerId")}
    rogue = dict(BROKER, brokerAddr="127.0.0.9:10911")
    version = b'{"counter":1,"stateVersion":0,"timestamp":1700000000000}'
    changes = [
        (RC.REGISTER_BROKER, rogue, register_body("T", "U")),
        (RC.UNREGISTER_BROKER, ident, b""),
        (RC.BROKER_HEARTBEAT, {k: BROKER[k] for k in ("clusterName", "brokerAddr", "brokerName")}, b""),
        (RC.QUERY_DATA_VERSION, ident, version),
        (RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}, b""),
        (RC.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}, b""),
        (RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"}, b""),
        (RC.REGISTER_TOPIC_IN_NAMESRV, {"topic": "Z"}, b'{"topicQueueMappingInfoMap":{}}'),
        (RC.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"}, b""),
        (RC.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"}, b""),
        (RC.UPDATE_NAMESRV_CONFIG, {}, b"orderMessageEnable=true"),
    ]
    assert {code for code, _, _ in changes} == set(NAMESRV_ADMIN_CODES)

    def call(c, code, ext, body, ak):
        req = signed(code, ext, body, ak=ak, secret=secrets[ak])
        return c.call(req.code, req.ext_fields, req.body, version=479)

    async def main():
        ns = NameServer(acl=acl)
        port = await ns.start("127.0.0.1", 0)
        c = await Client.connect(port)
        try:
            assert (await call(c, RC.REGISTER_BROKER, BROKER, register_body("T", "U"), "rocketmq2")).code == R.SUCCESS
            refused = {}
            for ak in ("reader1", "reader2"):
                for code, ext, body in changes:
                    refused[ak, code] = await call(c, code, ext, body, ak)
            route = await call(c, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, b"", "reader1")
            kv = ns.kv.get("ns", "k")
            wipe = await call(c, RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}, b"", "rocketmq2")
            return refused, route, kv, ns.routes.route("T"), wipe, ns.settings.orderMessageEnable
        finally:
            await c.close()
            await ns.close()

    refused, route, kv, table_route, wipe, order = asyncio.run(main())
    for (ak, code), r in refused.items():
        assert (r.code, r.remark) == (
            R.SYSTEM_ERROR,
            f"org.apache.rocketmq.acl.common.AclException: Need admin permission for request code={code}, "
            f"but accessKey={ak} is not",
        ), (ak, code)
    # nothing changed: the route names the broker where it registered, writable, and reads are served
    assert route.code == R.SUCCESS and b"10.0.0.1:10911" in route.body and b"127.0.0.9" not in route.body
    assert kv is None and order is False
    assert wipe.code == R.SUCCESS and wipe.ext_fields == {"wipeTopicCount": "2"}


# ---------------------------------------------------------------- 4. offsets persisted on RocketMQ's schedule
def _file_offsets(store):
    from rocketstore.consumer import offsets_path, parse_offsets

    try:
        with open(offsets_path(store.root)) as f:
            return parse_offsets(f.read())
    except FileNotFoundError:
        return {}


def test_remoting_offsets_are_written_on_the_flush_schedule(tmp_path):
    """ConsumerOffsetManager persists every flushConsumerOffsetInterval (5 s by default, broker.conf may say
    otherwise): a commit reaches the file while the broker runs, not only at its close."""
    from rocketstore.remoting.broker import BrokerSettings
    from test_broker_pull import fill, pull_ext

    assert BrokerSettings().flushConsumerOffsetInterval == 5000  # BrokerConfig's default
    settings = BrokerSettings.from_extra({"flushConsumerOffsetInterval": "200"})

    async def scenario(broker, c, store):
        fill(store)
        await c.call(RC.PULL_MESSAGE, pull_ext())  # the pull creates the subscription group
        q = {"consumerGroup": "g", "topic": "T", "queueId": "0"}
        update = await c.call(RC.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "3"})
        seen = None
        for _ in range(200):  # 20 s at most; the flush comes within 0.2 s
            seen = _file_offsets(store).get("T@g")
            if seen:
                break
            await asyncio.sleep(0.1)
        return update, seen

    (update, seen), store = with_broker(tmp_path, scenario, settings=settings)
    assert update.code == R.SUCCESS and seen == {0: 3}
    store.close()
