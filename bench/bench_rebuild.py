#!/usr/bin/env python
"""The rebuild of ConsumeQueues and index files from the CommitLog: Spark (rocketstore.spark.rebuild) at
local[1] and local[2] against the local engine (in-process reput: open the store without its queue and
index files, recovery dispatches every record), on the same CommitLog.

    python bench/bench_rebuild.py [--messages N] [--body B] [--segment-mb M] [--queues Q] [--runs R]

Default: 200,000 messages of 100 B (a quick run); --messages 1000000 for the issue's size. Each message has
tags, a KEYS token and a UNIQ_KEY (2 index entries). Each engine runs --runs times on a fresh copy of the
store (old files removed first; the copy is not timed); the best time counts. Rates: CommitLog MB/s (bytes
of records) and records/s; ratios against the local engine. Spark's session start is not timed (one per
master, reused across runs), nor is a warm-up job that starts its Python workers and imports rocketstore in
them (the local engine's process has it imported too).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from rocketstore import Message, MessageStore, StoreConfig  # noqa: E402
from rocketstore.maintenance.rebuild import REBUILT  # noqa: E402


def fill(root: str, cfg: StoreConfig, messages: int, body: int, queues: int) -> int:
    """Write the store; returns the CommitLog's bytes."""
    payload = b"x" * body
    batch = 1000
    with MessageStore.open(root, cfg) as s:
        for start in range(0, messages, batch):
            n = min(batch, messages - start)
            msgs = [
                Message(
                    "Bench",
                    payload,
                    tags=f"T{(start + j) % 8}",
                    keys=[f"order-{start + j}"],
                    properties={"UNIQ_KEY": f"U{start + j:010d}"},
                )
                for j in range(n)
            ]
            r = s.put_batch(msgs, queue_id=(start // batch) % queues)
            assert r.ok, r
        return s.max_physical_offset - s.min_physical_offset


def fresh_copy(src: str, dst: str) -> str:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def run_local(store: str, cfg: StoreConfig) -> float:
    for sub in REBUILT:
        shutil.rmtree(os.path.join(store, sub), ignore_errors=True)
    t = time.perf_counter()
    with MessageStore.open(store, cfg) as s:
        s.wait_dispatched(3600)
    return time.perf_counter() - t


def run_spark(store: str, spark, options: dict) -> float:
    import rocketstore.spark

    t = time.perf_counter()
    rocketstore.spark.rebuild(store, spark, **options)
    return time.perf_counter() - t


def warm_up(spark) -> None:
    """Untimed: every core's Python worker started with the rebuild's modules imported, as the local engine
    runs in a process that has them (Spark keeps idle workers for the next jobs)."""
    sc = spark.sparkContext
    n = max(sc.defaultParallelism, 1)
    sc.parallelize(range(n), n).map(lambda _: __import__("rocketstore.spark.rebuild_job") and 0).collect()


def bench(
    messages: int = 200_000,
    body: int = 100,
    segment_mb: int = 16,
    queues: int = 8,
    runs: int = 1,
    masters=("local[1]", "local[2]"),
) -> dict:
    """Times (s) per engine, and prints MB/s, records/s and ratios. Callable from other code."""
    cfg = StoreConfig(mapped_file_size_commit_log=segment_mb * 1024 * 1024)
    options = {"mappedFileSizeCommitLog": str(cfg.mapped_file_size_commit_log)}
    work = tempfile.mkdtemp(prefix="bench-rebuild-")
    try:
        src = os.path.join(work, "src")
        t = time.perf_counter()
        size = fill(src, cfg, messages, body, queues)
        print(
            f"store: {messages:,} messages of {body} B, {size / 1e6:.1f} MB CommitLog in "
            f"{len(os.listdir(os.path.join(src, 'commitlog')))} segments of {segment_mb} MB "
            f"(written in {time.perf_counter() - t:.1f} s)"
        )
        times: dict[str, float] = {}
        times["local"] = min(run_local(fresh_copy(src, os.path.join(work, "run")), cfg) for _ in range(runs))
        for master in masters:
            import rocketstore.spark

            spark = rocketstore.spark.session(master, "bench-rebuild")
            warm_up(spark)
            try:
                times[f"spark {master}"] = min(
                    run_spark(fresh_copy(src, os.path.join(work, "run")), spark, options) for _ in range(runs)
                )
            finally:
                spark.stop()
        print(f"{'engine':<18}{'seconds':>10}{'MB/s':>10}{'records/s':>14}{'vs local':>10}")
        for name, secs in times.items():
            print(
                f"{name:<18}{secs:>10.2f}{size / 1e6 / secs:>10.1f}{messages / secs:>14,.0f}"
                f"{times['local'] / secs:>9.2f}x"
            )
        return times
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--body", type=int, default=100)
    ap.add_argument("--segment-mb", type=int, default=16, help="CommitLog segment size (segments are the splits)")
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    bench(a.messages, a.body, a.segment_mb, a.queues, a.runs)


if __name__ == "__main__":
    main()
