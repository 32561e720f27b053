"""store-expired: replaying its puts, ageing the same 15 CommitLog files and running the manual cleanup leaves
the very files RocketMQ's CleanCommitLogService / CleanConsumeQueueService left, with the same answers."""

import hashlib
import os
import time

from rocketstore import MessageStore, PutStatus

from . import goldens as G
from .test_answers import check_answers

NAME = "store-expired"


def _sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _inputs(monkeypatch):
    """The puts; bodies over 2 KiB of records in the CommitLog files RocketMQ deleted cannot be read back
    from the golden store: a stand-in of the same length gives the same offsets, queue units and index
    entries (a body only shows in its own record, and those records are deleted here)."""
    read_body = G._golden_body

    def body(name, phys, length, file_size):
        try:
            return read_body(name, phys, length, file_size)
        except FileNotFoundError:
            assert phys < 983040
            return b"\0" * length

    monkeypatch.setattr(G, "_golden_body", body)
    return list(G.replay_inputs(NAME))


def test_cleanup_of_store_expired_leaves_rocketmqs_files_and_answers(tmp_path, monkeypatch):
    G.require(NAME)
    m = G.manifest(NAME)
    entries = _inputs(monkeypatch)
    times = iter([e["storeTimestamp"] for e, _ in entries])
    cfg = G.config_for(NAME, clock=lambda: next(times), store_host=m["storeHostDefault"])
    assert (cfg.delete_commit_log_files_interval, cfg.delete_consume_queue_files_interval) == (0, 0)
    root = tmp_path / "store"
    now = int(time.time() * 1000)
    with MessageStore.open(root, cfg) as store:
        for topic, kind in m.get("topicQueueTypes", {}).items():
            store.create_topic(topic, queues=8, attributes={"queue.type": kind})
        for e, msgs in entries:
            r = (
                store.put(msgs[0], queue_id=e["queueId"])
                if e["api"] == "putMessage"
                else store.put_batch(msgs, queue_id=e["queueId"])
            )
            assert r.status is PutStatus[e["putStatus"]], e["seq"]
            assert (r.physical_offset, r.size, r.queue_offset) == (
                e["wroteOffset"],
                e["wroteBytes"],
                e["queueOffset"],
            ), e["seq"]
        store.flush()
        store._cleanup.disk_usage = lambda path: 0.10  # this machine's disk must not matter
        aged = m["agedCommitLogFiles_mtimeMinus100h"]
        old, fresh = (now - 100 * 3600 * 1000) * 1_000_000, now * 1_000_000
        for n in os.listdir(root / "commitlog"):  # every segment's age set here, against the clock used below
            t = old if n in aged else fresh
            os.utime(root / "commitlog" / n, ns=(t, t))
        # RocketMQ's harness: the manual trigger and two passes (deleteFileBatchMax 10), then the queues
        assert store.delete_expired_files(now_ms=now) == len(aged) == 15
        assert store.min_physical_offset == 983040
        live = m["answers_after_reopen"]
        for q in live["queues"]:
            if q["topic"] != "NoSuchTopic":
                assert store.min_offset(q["topic"], q["queueId"]) == q["minOffsetInQueue"], q["topic"]
                assert store.max_offset(q["topic"], q["queueId"]) == q["maxOffsetInQueue"], q["topic"]
    expected = {f["path"]: f for f in m["files"]}
    ours = {str(p.relative_to(root)): p for p in root.rglob("*") if p.is_file()}
    for prefix in ("commitlog/", "consumequeue/"):
        theirs_set = {r for r in expected if r.startswith(prefix)}
        ours_set = {r for r in ours if r.startswith(prefix)}
        assert ours_set == theirs_set, (
            f"{prefix}: ours only {sorted(ours_set - theirs_set)[:5]}, "
            f"RocketMQ only {sorted(theirs_set - ours_set)[:5]}"
        )
        for rel in theirs_set:
            assert _sha(ours[rel]) == expected[rel]["sha256"], f"{rel} differs from RocketMQ's"
        assert len(theirs_set) > 10
    # index files are named by the wall clock: the same ones survive, in creation order
    theirs_idx = [f["sha256"] for rel, f in sorted(expected.items()) if rel.startswith("index/")]
    ours_idx = [_sha(p) for p in sorted((root / "index").iterdir())]
    assert ours_idx == theirs_idx, "index files differ from RocketMQ's"
    # reopened, every recorded answer is RocketMQ's
    problems: list[str] = []
    with MessageStore.open(root, G.config_for(NAME), read_only=True) as store:
        compared = check_answers(store, m["answers_after_reopen"], problems, simple_only=False)
    assert compared > 500
    assert not problems, f"{len(problems)} answers differ, e.g.:\n" + "\n".join(problems[:15])
