"""mqadmin's offset resets with RocketMQ 5.3.3's own tools and Java push consumer against a real `rocketstore serve`
(remoting on loopback), once with RocketMQ 5's default server-side reset and once with broker.conf's
useServerSideResetOffset=false: java/ResetClients.java puts 6 messages in each of JReset's 2 queues, then past a
timestamp `mid` 6 more, commits offsets for groups with no consumer online and runs resetOffsetByTime with -f false
and true, the `-s now` and `-s -1` forms and one queue's (-b -q), skipAccumulatedMessage, cloneGroupOffset and
queryConsumeTimeSpan; then a push consumer reads the whole topic and, while it runs, resetOffsetByTime to `mid`:
it must consume the second half again, from the reset offsets.

Server-side, the broker resets every queue (isForce plays no part, no consumer need be online) and the consumer's
next pull of each queue answers PULL_OFFSET_MOVED; client-side, the broker answers CONSUMER_NOT_ONLINE for groups
with no consumer online (mqadmin falls back to the old reset, resetOffsetByTimestampOld, where -f false keeps an
offset behind the time) and tells a live consumer (RESET_CONSUMER_CLIENT_OFFSET).

The expected offsets are computed here from the messages' store times (read from the store, read-only, while the
server is stopped). Skipped as test_java_client.py is without the RocketMQ jars or a JDK."""

import re

import pytest
from serve_harness import mqadmin_out, of, run_once

from rocketstore import MessageStore

TOPIC = "JReset"
PER_QUEUE = 6
GROUPS = ["GOld", "GOldKeep", "GOldForce", "GNow", "GMinus", "GSkip", "GClone", "GQueue", "GLive"]


MODES = {"server": "", "client": "useServerSideResetOffset=false\n"}


@pytest.fixture(scope="module", params=list(MODES))
def mode(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def reset_run(java_classpath, tmp_path_factory, mode):
    """(events, store times by queue, committed offsets by group, server log)"""
    root = tmp_path_factory.mktemp(f"java-reset-{mode}")
    events, log = run_once(root, java_classpath, "ResetClients", conf=MODES[mode])
    with MessageStore.open(str(root / "store"), read_only=True) as s:
        times = {}
        for q in range(2):
            got = s.get("test", TOPIC, q, 0, 64).messages
            times[q] = [m.store_timestamp for m in got]
        committed = {g: {q: s.consumer_offsets.query(g, TOPIC, q) for q in range(2)} for g in GROUPS}
    return events, times, committed, log


def mid_of(events) -> int:
    return of(events, "setup", "mid")[0]["mid"]


def by_time(times: list[int], ts: int) -> int:
    """The first queue offset stored at or after ts (the queue's end when none is): computed from the store times,
    apart from the store's offset_by_time."""
    return next((i for i, t in enumerate(times) if t >= ts), len(times))


def test_setup_put_two_halves_around_mid(reset_run):
    events, times, _, _ = reset_run
    of(events, "setup", "done")
    mid = mid_of(events)
    for q in range(2):
        assert len(times[q]) == 2 * PER_QUEUE
        assert by_time(times[q], mid) == PER_QUEUE  # the first half before mid, the second after


def offsets_printed(out: str) -> dict[int, int]:
    """The ResetOffsetBody mqadmin prints after a 222 served: brokerName, queueId, offset."""
    return {int(q): int(o) for q, o in re.findall(r"^rocketstore\s+(\d+)\s+(\d+)\s*$", out, re.M)}


def test_reset_by_time_without_a_consumer(reset_run, mode):
    """Server-side: 222 resets the group on the broker. Client-side: 222 answers CONSUMER_NOT_ONLINE; mqadmin
    resets through GET_CONSUME_STATS, SEARCH_OFFSET_BY_TIMESTAMP and UPDATE_CONSUMER_OFFSET. Either way the group
    moves back from the end to mid's offsets."""
    events, times, committed, log = reset_run
    mid = mid_of(events)
    out = mqadmin_out(events, "resetOffsetByTime.offline")
    expected = {q: by_time(times[q], mid) for q in range(2)}
    assert committed["GOld"] == expected
    assert "Consumer not online, so can not reset offset" not in out
    if mode == "server":
        assert offsets_printed(out) == expected and "#resetOffset" not in out
    else:
        assert "#resetOffset" in out  # the old command's table (ResetOffsetByTimeOldCommand.resetOffset)


def test_reset_without_force(reset_run, mode):
    """resetOffsetByTimestampOld (5.3.3's mqadmin has no resetOffsetByTimeOld sub command: it is reached through
    resetOffsetByTime's fallback) moves a group forward only with force; the server-side reset ignores force."""
    events, times, committed, _ = reset_run
    mid = mid_of(events)
    mqadmin_out(events, "resetOffsetByTime.keep")
    mqadmin_out(events, "resetOffsetByTime.force")
    at_mid = {q: by_time(times[q], mid) for q in range(2)}
    assert committed["GOldForce"] == at_mid
    if mode == "server":
        assert committed["GOldKeep"] == at_mid
    else:
        assert committed["GOldKeep"] == {0: 2, 1: 2}  # -f false: mid's offset (6) is ahead of 2, kept


def test_now_minus_one_and_skip_go_to_the_end(reset_run):
    events, times, committed, _ = reset_run
    for name in ("resetOffsetByTime.now", "resetOffsetByTime.minus1", "skipAccumulatedMessage"):
        mqadmin_out(events, name)
    end = {q: len(times[q]) for q in range(2)}
    assert committed["GNow"] == end
    assert committed["GMinus"] == end
    assert committed["GSkip"] == end


def test_reset_of_one_queue(reset_run, mode):
    """-b -q: mqadmin searches the offset, commits it and sends 222 naming the queue; the other queue stays.
    Client-side, the broker takes 222 for the whole topic (timestamp 0, not forced) and, with no consumer online,
    answers CONSUMER_NOT_ONLINE, which this path of mqadmin reports as a failure (RocketMQ's broker does the same)."""
    events, times, committed, _ = reset_run
    target = by_time(times[1], mid_of(events))
    if mode == "server":
        out = mqadmin_out(events, "resetOffsetByTime.queue")
    else:
        run = next(e for e in of(events, "mqadmin") if e["name"] == "resetOffsetByTime.queue")
        out = run["stdout"]
        assert "Consumer not online" in run["stdout"] + run["stderr"], run
    assert f"reset consumer offset to {target}" in out
    assert committed["GQueue"] == {0: len(times[0]), 1: target}


def test_clone_group_offset(reset_run):
    events, times, committed, _ = reset_run
    out = mqadmin_out(events, "cloneGroupOffset")
    assert "clone group offset success" in out
    assert committed["GClone"] == committed["GOld"]


def test_query_consume_time_span(reset_run):
    events, times, committed, _ = reset_run
    spans = sorted(of(events, "time_span", "spans")[0]["spans"], key=lambda s: s["queueId"])
    assert [s["queueId"] for s in spans] == [0, 1]
    for s in spans:
        q = s["queueId"]
        assert s["brokerName"] == "rocketstore"
        assert s["min"] == times[q][0]
        assert s["max"] == times[q][-1]
        # GOld's offset (mid's) - 1: the last message it consumed
        assert s["consume"] == times[q][committed["GOld"][q] - 1]
        assert s["delay"] >= 0


def test_reset_with_a_live_consumer(reset_run, mode):
    events, times, committed, log = reset_run
    mid = mid_of(events)
    consumed = of(events, "live", "consumed")[0]
    assert consumed["all"], consumed
    out = mqadmin_out(events, "resetOffsetByTime.live")
    expected = {q: by_time(times[q], mid) for q in range(2)}
    assert offsets_printed(out) == expected, out
    assert "#resetOffset" not in out  # served by 222, not the fallback
    after = of(events, "live", "after_reset")[0]
    assert after["again"], after
    for q in range(2):
        got = sorted({m["queueOffset"] for m in after["received"] if m["queueId"] == q})
        assert got[0] == expected[q]
        assert got == list(range(expected[q], 2 * PER_QUEUE))
    assert committed["GLive"] == {q: len(times[q]) for q in range(2)}  # consumed to the end once more
    if mode == "server":  # handed to the consumer's pulls
        assert "Reset offset, topic=JReset, group=GLive" in log
        assert "[reset-offset] reset offset success" not in log
    else:  # told to the consumer
        assert "[reset-offset] reset offset success. topic=JReset, group=GLive" in log
