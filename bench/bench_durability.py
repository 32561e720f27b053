"""Durability benchmarks (issue 4): reopen/recovery time against store size, clean and after a crash, and
SYNC_FLUSH put throughput with 1, 8 and 64 producer threads (group commit), with SQLite's durable commit
(WAL, synchronous=FULL, one insert per transaction) measured in the same run as the peer.

    .venv/bin/python bench/bench_durability.py --quick
    .venv/bin/python bench/bench_durability.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
from rocketstore import Message, MessageStore, PutStatus, StoreConfig  # noqa: E402
from rocketstore.formats import checkpoint as CP  # noqa: E402

BODY = bytes(100)


def fill(root: str, n: int) -> None:
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=64 * 1024 * 1024)) as s:
        batch = [Message("Bench", BODY, tags="TagA", keys=[f"k{i}"]) for i in range(1000)]
        for i in range(0, n, 1000):
            assert s.put_batch(batch, queue_id=(i // 1000) % 4).ok


def timed_open(root: str) -> float:
    t = time.perf_counter()
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=64 * 1024 * 1024)):
        pass
    return time.perf_counter() - t


def as_crashed(root: str) -> None:
    """What a kill -9 leaves: the abort file, and a checkpoint that vouches for nothing (recovery then
    checks and re-dispatches from the first segment)."""
    open(os.path.join(root, "abort"), "w").close()
    with open(os.path.join(root, "checkpoint"), "r+b") as fh:
        fh.write(CP.encode(CP.Checkpoint()))


def recovery_rows(sizes, base) -> list[tuple]:
    rows = []
    for n in sizes:
        root = tempfile.mkdtemp(dir=base, prefix="recover-")
        try:
            fill(root, n)
            clean = timed_open(root)
            as_crashed(root)
            crashed = timed_open(root)
            rows.append((n, clean, crashed))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return rows


def sync_puts(producers: int, per_producer: int, base: str) -> float:
    root = tempfile.mkdtemp(dir=base, prefix="sync-")
    try:
        with MessageStore.open(root, StoreConfig(flush_disk_type="SYNC_FLUSH")) as s:
            s.put(Message("Sync", BODY), 0)
            bad = []

            def work(q):
                for _ in range(per_producer):
                    if s.put(Message("Sync", BODY, tags="T"), q % 4).status is not PutStatus.PUT_OK:
                        bad.append(q)

            threads = [threading.Thread(target=work, args=(i,)) for i in range(producers)]
            t = time.perf_counter()
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            dt = time.perf_counter() - t
            if bad:
                raise SystemExit(f"{len(bad)} SYNC_FLUSH puts were not PUT_OK")
        return producers * per_producer / dt
    finally:
        shutil.rmtree(root, ignore_errors=True)


def sqlite_durable(n: int, base: str) -> float:
    path = os.path.join(tempfile.mkdtemp(dir=base, prefix="sqlite-"), "db")
    try:
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        con.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, topic TEXT, tags TEXT, body BLOB)")
        t = time.perf_counter()
        for _ in range(n):
            con.execute("INSERT INTO m (topic, tags, body) VALUES (?, ?, ?)", ("Sync", "T", BODY))
        dt = time.perf_counter() - t
        con.close()
        return n / dt
    finally:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes: about 30 s")
    ap.add_argument("--tmpdir", default=None)
    args = ap.parse_args(argv)
    sizes = (100_000, 300_000) if args.quick else (300_000, 1_000_000, 3_000_000)
    per = 200 if args.quick else 1000
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, tmp {args.tmpdir or tempfile.gettempdir()}")
    print("\nreopen time against store size (100-byte bodies, 64 MiB segments, ConsumeQueue + index)")
    print(f"{'messages':>10} {'clean (s)':>10} {'after crash (s)':>16} {'crash: msgs/s re-checked':>26}")
    for n, clean, crashed in recovery_rows(sizes, args.tmpdir):
        print(f"{n:>10,} {clean:>10.2f} {crashed:>16.2f} {n / crashed:>26,.0f}")
    print("\nSYNC_FLUSH puts (every PUT_OK is on disk), group commit across producer threads")
    peer = sqlite_durable(per * 4, args.tmpdir)
    print(f"{'producers':>10} {'msgs/s':>10} {'vs SQLite FULL':>15}")
    for p in (1, 8, 64):
        rate = sync_puts(p, max(per // max(p // 8, 1), 20), args.tmpdir)
        print(f"{p:>10} {rate:>10,.0f} {rate / peer:>14.2f}x")
    print(f"{'SQLite':>10} {peer:>10,.0f}   (WAL, synchronous=FULL, one insert per transaction, 1 thread)")
    print(
        "RocketMQ Java on this kind of machine (notes, not measured here): SYNC_FLUSH 5.5k / 21k / 38k msg/s "
        "for 1 / 8 / 64 producers; reopen of 1 M messages 0.66 s clean, 1.35 s after kill -9"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
