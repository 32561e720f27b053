"""`rocketstore serve` (gRPC side) against what issue #25 found: the pop groups' offsets persisted while the
server runs (ConsumerOffsetManager's flushConsumerOffsetInterval, 5 s), long polls woken by their own topic only."""

import json
import time

from rocketstore.consumer import parse_offsets


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

    from rocketstore.serve.aio_service import Wakeups

    async def main():
        w = Wakeups(asyncio.get_running_loop())
        on_b = [w.register([("m", "B"), ("s", "g", "B")]) for _ in range(100)]
        on_a = w.register([("m", "A"), ("s", "g", "A")])
        w.notify([("m", "A")])  # what the store's dispatch reports for a record of A
        await asyncio.sleep(0.01)
        return on_a.is_set(), sum(e.is_set() for e in on_b)

    assert asyncio.run(main()) == (True, 0)
