"""SIGKILL at random instants of put, put_batch (segment creation and index rolls many times a second, see
workload.py), expired-file cleanup and offset commits: after each kill the store reopens (abnormal recovery)
with every acknowledged message at its queue offset with its own body, verify finds nothing wrong, and the
committed offsets are never older than the last commit that returned."""

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from rocketstore import GetStatus, MessageStore
from rocketstore.maintenance.verify import verify_store

from . import workload as W

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workload.py")


def run_and_kill(root: str, mode: str, seed: int, rng: random.Random) -> list[str]:
    """Start the writer, let it work for a random time after it opened the store, SIGKILL it; its complete
    output lines (the last one may have been cut by the kill: dropped)."""
    p = subprocess.Popen(
        [sys.executable, CHILD, root, mode, str(seed)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(iter(p.stdout.readline, "")))
    reader.start()
    deadline = time.monotonic() + 30
    while not out and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert out and out[0] == "open\n", f"writer did not open the store: {p.stderr.read() if p.poll() else ''}"
    time.sleep(rng.uniform(0.02, 0.6))
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    reader.join()
    err = p.stderr.read()
    assert p.returncode == -signal.SIGKILL, f"writer died by itself ({p.returncode}): {err}"
    return [line.rstrip("\n") for line in out[1:] if line.endswith("\n")]


def acks(lines: list[str]) -> dict[tuple[str, int, int], str]:
    return {(t, int(q), int(o)): h for kind, t, q, o, h in (ln.split() for ln in lines if ln.startswith("ack "))}


def read_queue(s: MessageStore, topic: str, q: int, cleaned: bool) -> dict[int, str]:
    """Every message of one queue from its min offset, unpacking batch-ConsumeQueue batches. After a kill
    between a cleanup's CommitLog and queue passes the first units may point at deleted records: RocketMQ
    answers MESSAGE_WAS_REMOVING or OFFSET_FOUND_NULL there, with the offset to go on from (and moves the
    min offset on its next cleanup pass), so do we."""
    got, off = {}, s.min_offset(topic, q)
    end = s.max_offset(topic, q)
    while off < end:
        g = s.get("fault-check", topic, q, off, 32)
        gone = (GetStatus.MESSAGE_WAS_REMOVING, GetStatus.OFFSET_FOUND_NULL)
        if cleaned and not got and g.status in gone and g.next_begin_offset > off:
            off = g.next_begin_offset
            continue
        assert g.status is GetStatus.FOUND, (topic, q, off, g.status)
        msgs = g.unpacked() if hasattr(g, "unpacked") and topic == W.BATCH_TOPIC else g.messages
        for m in msgs:
            if m.queue_offset >= off:
                got[m.queue_offset] = W.sha1(m.body)
        off = g.next_begin_offset
    return got


def check_store(root: str, acked: dict, cleaned: bool) -> None:
    """Reopen after the kill: acknowledged messages at their offsets (those cleanup deleted excepted), the
    queues contiguous, the store sound."""
    with MessageStore.open(root, W.config()) as s:
        for topic in (W.TOPIC, W.BATCH_TOPIC):
            for q in range(W.QUEUES):
                if s.consume_queue(topic, q) is None:
                    assert not [k for k in acked if k[:2] == (topic, q)], f"queue {topic}/{q} lost"
                    continue
                got = read_queue(s, topic, q, cleaned)
                lo = min(got, default=s.max_offset(topic, q))
                assert sorted(got) == list(range(lo, s.max_offset(topic, q))), f"{topic}/{q} has holes"
                for (t, qq, off), h in acked.items():
                    if (t, qq) != (topic, q) or (cleaned and off < lo):
                        continue
                    assert got.get(off) == h, f"acknowledged {topic}/{q}@{off} lost or changed after the kill"
    report = verify_store(root, W.config())
    assert report["ok"], report["problems"][:5]


@pytest.mark.parametrize("mode", ["put", "put_batch", "cleanup"])
def test_kill_during_writes_loses_no_acknowledged_message(tmp_path, mode):
    root = str(tmp_path / "store")
    rng = random.Random(mode)
    acked: dict = {}
    cleanups = 0
    rounds, t_end = 0, time.monotonic() + 12
    while rounds < 3 or (rounds < 8 and time.monotonic() < t_end):
        rounds += 1
        lines = run_and_kill(root, mode, rounds, rng)
        acked.update(acks(lines))
        cleanups += sum(ln.startswith("cleaned ") for ln in lines)
        check_store(root, acked, cleaned=(mode == "cleanup"))
    assert len(acked) > 50, "the writer acknowledged too little to prove anything"
    if mode == "cleanup":
        assert cleanups >= 3, "the writer hardly reached a cleanup"


def test_kill_during_offset_commits_keeps_the_last_commit(tmp_path):
    """consumerOffset.json is rewritten whole on every commit: a kill at any instant leaves the last committed
    table (or the one being written), never a torn or older one."""
    root = str(tmp_path / "store")
    rng = random.Random(7)
    for seed in range(1, 7):
        lines = run_and_kill(root, "commit", seed, rng)
        commits = [int(ln.split()[2]) for ln in lines if ln.startswith("commit ")]
        assert commits, "no commit returned before the kill"
        with MessageStore.open(root, W.config()) as s:
            offsets = s.consumer_offsets
            seen = {offsets.query("g", W.TOPIC, q) for q in range(W.QUEUES)}
        assert len(seen) == 1, f"a commit was torn across queues: {seen}"
        (now,) = seen
        assert commits[-1] <= now <= commits[-1] + 1, (commits[-1], now)
