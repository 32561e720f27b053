"""`rocketstore serve` (gRPC side) against what issue #25 found: the timer never delivers into a system topic and
one message that cannot be delivered holds up no other (TimerMessageStore.doPut moves on past a put refused for
good), the pop groups' offsets persisted while the server runs (ConsumerOffsetManager's flushConsumerOffsetInterval,
5 s), long polls woken by their own topic only."""

import json
import time

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.store.consumer import parse_offsets
from rocketstore.broker.delay import DelayService
from _refusing import RefusingStore


def open_store(tmp_path):
    store = MessageStore.open(str(tmp_path / "store"), StoreConfig(mapped_file_size_commit_log=16 << 20))
    store._cleanup.disk_usage = lambda path: 0.0  # the shared machine's disk may be above the warning level
    store._cleanup.check_disk_full()
    return store


def _forge(store, topic, queue_id, **props):
    """A record as an older rocketstore let a remoting client write it (straight into the store here)."""
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


def test_timer_message_to_a_removed_queue_blocks_nothing(tmp_path):
    """The timer (broker/delay.py): a message for queue 3 of a topic now of 2 queues and one for REAL_QID
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
    refusing = DelayService(RefusingStore(store, "B", PutStatus.SERVICE_NOT_AVAILABLE))
    assert refusing.deliver_due(at + 10) == 1  # A delivered; B refused for now, C after it
    state = json.load(open(store.root + "/config/timerState.json"))
    assert state["offset"] == 1
    again = DelayService(store)  # a restart
    assert again.waiting() == 2
    assert again.deliver_due(at + 10) == 2
    store.wait_dispatched(10)
    assert [store.max_offset(t, 0) for t in ("A", "B", "C")] == [1, 1, 1]
    store.close()


def _offsets(server):
    try:
        with open(f"{server.store}/config/consumerOffset.json") as f:
            return parse_offsets(f.read())
    except FileNotFoundError:
        return {}


def test_pop_offsets_are_written_while_serve_runs(server):
    """A SimpleConsumer receives and acks 10 messages: consumerOffset.json says so within the flush interval (5 s,
    RocketMQ's default, not changed here), while the server still runs (before, only at its stop)."""
    sent = server.run("produce", {"topic": "Acked", "messages": [{"body": f"m{i}"} for i in range(10)]})
    bodies = [f"m{i}" for i in range(10)]
    got = server.run(
        "receive_some", {"topic": "Acked", "group": "g1", "count": 10, "invisible": 30, "ack": bodies, "deadline": 20}
    )
    assert sorted(m["body"] for m in got) == bodies
    assert len(sent) == 10
    deadline = time.monotonic() + 30
    seen = None
    while time.monotonic() < deadline:
        seen = _offsets(server).get("Acked@g1")
        if seen and sum(seen.values()) == 10:
            break
        time.sleep(0.2)
    assert server.proc.poll() is None  # still serving
    assert seen and sum(seen.values()) == 10, json.dumps(server.lines[-20:])  # every queue's offset past its acks


def test_a_put_wakes_only_the_long_polls_of_its_topic():
    """serve's long polls (aio_service.Wakeups) are keyed by topic, as PullRequestHoldService keys its pulls: a
    message stored in topic A sets the event of the poll on A and of none of the 100 polls on B."""
    import asyncio

    from rocketstore.grpc.aio_service import Wakeups

    async def main():
        w = Wakeups(asyncio.get_running_loop())
        on_b = [w.register([("m", "B"), ("s", "g", "B")]) for _ in range(100)]
        on_a = w.register([("m", "A"), ("s", "g", "A")])
        w.notify([("m", "A")])  # what the store's dispatch reports for a record of A
        await asyncio.sleep(0.01)
        return on_a.is_set(), sum(e.is_set() for e in on_b)

    assert asyncio.run(main()) == (True, 0)
