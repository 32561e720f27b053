"""The remoting broker against hostile or unlucky clients (issue #25): system topics closed to clients' sends,
delayed messages whose queue went away, offsets persisted on RocketMQ's schedule, the name server's state changes
for admins only, idle and crowding connections, held pulls woken by their own queue only and not counted as work
in flight. Expectations come from RocketMQ's source (TopicValidator, AbstractSendMessageProcessor.msgCheck,
TimerMessageStore.doPut, NettyRemotingServer, PullRequestHoldService, ConsumerOffsetManager)."""

import asyncio
import struct
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
from _refusing import RefusingStore


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
    from rocketstore.broker.rules import is_client_send_forbidden
    from rocketstore.grpc.validator import topic_refusal

    for t in FORBIDDEN:
        assert is_client_send_forbidden(t)
        assert topic_refusal(t) is not None  # the gRPC side refuses at least as much
    for t in ["TBW102", "RMQ_SYS_TRACE_TOPIC", "%DLQ%g", "%RETRY%g", "T"]:
        assert not is_client_send_forbidden(t)


def _forge(store, topic, queue_id, **props):
    """A record as an older rocketstore let a client write it (straight into the store here)."""
    return store.put(Message(topic, b"forged", properties={k: str(v) for k, v in props.items()}), queue_id)


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


@pytest.mark.parametrize("status", ["SERVICE_NOT_AVAILABLE", "MESSAGE_ILLEGAL"])
def test_delay_level_progress_is_recorded_when_a_delivery_fails(tmp_path, status):
    from rocketstore.message import PutStatus

    store = open_store(tmp_path, message_delay_level="1s")
    for topic in ("A", "B", "C"):
        _forge(store, "SCHEDULE_TOPIC_XXXX", 0, REAL_TOPIC=topic, REAL_QID=0, DELAY=1)
    store.wait_dispatched(10)
    s = ScheduleService(RefusingStore(store, "B", PutStatus[status]))
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
    from rocketstore.store.consumer import offsets_path, parse_offsets

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


# ---------------------------------------------------------------- 7. idle and crowding connections
def test_idle_and_crowding_connections_lock_nobody_out(tmp_path):
    """1,030 sockets from 127.0.0.1, half silent, half stopped half-way through a frame: one address holds at
    most max_connections_per_address of the slots, a client from 127.0.0.2 is served at once, and the idle ones
    are closed after the idle timeout (1 s here; RocketMQ's serverChannelMaxIdleTimeSeconds, 120 s, by default)."""
    from rocketstore.remoting.broker import Broker
    from rocketstore.remoting.server import IDLE_TIMEOUT_S, MAX_CONNECTIONS_PER_ADDRESS, RemotingServer

    assert IDLE_TIMEOUT_S == 120.0 and RemotingServer({}).idle_timeout_s == 120.0
    assert MAX_CONNECTIONS_PER_ADDRESS < RemotingServer({}).max_connections
    store = open_store(tmp_path)
    store.create_topic("T", 1)

    async def main():
        broker = Broker(store, idle_timeout_s=1.0)
        port = await broker.start("127.0.0.1", 0)
        crowd = []
        try:
            for i in range(1030):
                r, w = await asyncio.open_connection("127.0.0.1", port)
                if i % 2:
                    w.write(struct.pack(">i", 100) + b"\x00\x00")  # a 100-byte frame, 2 bytes of it sent
                crowd.append((r, w))
            await asyncio.sleep(0.05)
            from_one = sum(1 for c in broker.server.connections.values() if c.host == "127.0.0.1")
            other = Client(*await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0)))
            served = await other.call(RC.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})
            await other.close()

            async def closed(r):
                try:
                    return await asyncio.wait_for(r.read(), 30) == b""
                except ConnectionError:
                    return True

            all_closed = all(await asyncio.gather(*(closed(r) for r, _ in crowd)))
            again = await Client.connect(port)  # the address's slots are free again
            served_again = await again.call(RC.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})
            await again.close()
            return from_one, served, all_closed, served_again
        finally:
            for _, w in crowd:
                w.close()
            await broker.close()

    from_one, served, all_closed, served_again = asyncio.run(main())
    assert 0 < from_one <= MAX_CONNECTIONS_PER_ADDRESS
    assert served.code == R.SUCCESS and served.ext_fields["offset"] == "0"
    assert all_closed
    assert served_again.code == R.SUCCESS
    store.close()


def test_connection_limits_from_broker_conf():
    from types import SimpleNamespace

    from rocketstore.cli.remoting_side import RemotingSide

    conf = SimpleNamespace(extra={"serverChannelMaxIdleTimeSeconds": "0.5", "serverMaxConnectionsPerAddress": "8"})
    side = RemotingSide(None, conf, "127.0.0.1:0", "127.0.0.1:0")
    assert side.server_options() == {"idle_timeout_s": 0.5, "max_connections_per_address": 8}
    assert RemotingSide(None, SimpleNamespace(extra={}), None, None).server_options() == {}


# ---------------------------------------------------------------- 8, 9. held pulls
def _pull_frame(opaque, queue_id, offset, suspend_ms=30_000, topic="T"):
    from rocketstore.remoting import frame
    from rocketstore.remoting.command import RemotingCommand
    from test_broker_pull import SUB, SUSPEND, pull_ext

    ext = pull_ext(offset=offset, queue_id=queue_id, sys_flag=SUB | SUSPEND, suspend_ms=suspend_ms, topic=topic)
    return frame.encode(RemotingCommand(code=RC.PULL_MESSAGE, ext_fields=ext, opaque=opaque))


async def _until(probe, timeout=60):
    end = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < end, "timed out"
        await asyncio.sleep(0.02)


def test_a_put_wakes_only_the_pulls_held_on_its_queue(tmp_path):
    """50 pulls held on T's queue 1, one on queue 0 and one on U's queue 0: a send to T queue 0 (the broker's own
    put) and a put to U queue 0 made elsewhere (the store directly, as the gRPC side puts) each examine and wake
    the one pull held on their queue, none of the 50."""
    store = open_store(tmp_path)
    store.create_topic("T", 2)
    store.create_topic("U", 1)

    async def scenario(broker, c, store):
        hold = broker.hold
        await c.send_raw(b"".join(_pull_frame(1000 + i, 1, 0) for i in range(50)))
        await c.send_raw(_pull_frame(7, 0, 0) + _pull_frame(8, 0, 0, topic="U"))
        await _until(lambda: hold.held == 52)
        before = (hold.examined, hold.woken)
        sent = await c.call(RC.SEND_MESSAGE, send_ext(topic="T", queue_id=0, props=""), b"to-0")
        first = await c.read()
        after_send = (hold.examined - before[0], hold.woken - before[1])
        assert store.put(Message("U", b"to-u"), 0).ok  # not through the broker: the watcher sees it
        second = await c.read()
        await _until(lambda: hold.held == 50)
        after_put = (hold.examined - before[0], hold.woken - before[1])
        return sent, first, second, after_send, after_put

    (sent, first, second, after_send, after_put), store = with_broker(tmp_path, scenario, store=store)
    assert sent.code == R.SUCCESS
    assert (first.opaque, first.code) == (7, R.SUCCESS)
    assert (second.opaque, second.code) == (8, R.SUCCESS)
    assert after_send == (1, 1)  # examined, woken: the queue-0 pull alone
    assert after_put == (2, 2)
    store.close()


def test_held_pulls_are_not_work_in_flight(tmp_path):
    """4,100 held pulls (above the server's 4,096 requests in flight): a send and an offset query are served."""
    store = open_store(tmp_path)
    store.create_topic("T", 2)

    async def scenario(broker, c, store):
        assert broker.server.max_in_flight == 4096
        await c.send_raw(b"".join(_pull_frame(1000 + i, i % 2, 0) for i in range(4100)))
        await _until(lambda: broker.server.waiting_requests == 4100, timeout=120)
        other = await Client.connect(broker.server.port)
        try:
            sent = await other.call(RC.SEND_MESSAGE, send_ext(topic="Other", queue_id=0, props=""), b"x")
            query = await other.call(RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "T", "queueId": "0"})
            busy = broker.server.in_flight, broker.server.waiting_requests
        finally:
            await other.close()
        return sent, query, busy

    (sent, query, busy), store = with_broker(tmp_path, scenario, store=store)
    assert sent.code == R.SUCCESS
    assert query.code != R.SYSTEM_BUSY
    assert busy[0] < 10 and busy[1] >= 4100  # the parked pulls are held still, and not counted in flight
    store.close()


def test_held_pulls_are_bounded(tmp_path):
    from rocketstore.remoting.broker import BrokerSettings

    store = open_store(tmp_path)
    store.create_topic("T", 1)

    async def scenario(broker, c, store):
        await c.send_raw(b"".join(_pull_frame(1000 + i, 0, 0) for i in range(3)))
        await _until(lambda: broker.hold.held == 3)
        return await c.call(RC.PULL_MESSAGE, _pull_ext_suspended())

    refused, store = with_broker(tmp_path, scenario, settings=BrokerSettings(maxHeldPulls=3), store=store)
    assert (refused.code, refused.remark) == (
        R.SYSTEM_BUSY, "[HOLD_FULL] 3 pulls are held already (maxHeldPulls), try again later")  # fmt: skip
    store.close()


def _pull_ext_suspended():
    from test_broker_pull import SUB, SUSPEND, pull_ext

    return pull_ext(offset=0, sys_flag=SUB | SUSPEND, suspend_ms=30_000)
