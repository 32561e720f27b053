#!/usr/bin/env python
"""The IndexFile (queryMessage by key) against SQLite (WAL, a (key, phy) table with an index on key), in one run.

    python bench/bench_index.py [--messages N] [--quick] [--runs R] [--queries Q]

Messages: 100-byte bodies, each with a unique UNIQ_KEY property and KEYS "order-<i>", every odd one also a
shared "cust-<i % 1001>": 2.5 index keys per message. Default index sizes (5 M slots, 20 M entries: one
sparse 420 MB file). Each build row is timed on a fresh temporary store (removed afterwards):
  put path   put_batch of --batch (1,000) with message_index_enable on / off, plus the final index.build()
  reput      dispatch_in_put_path=False, reput thread held back while putting; time store.wait_dispatched()
  rebuild    close, delete index/ and consumequeue/, write an abort file, zero the checkpoint's timestamps,
             time MessageStore.open (abnormal recovery re-dispatches every record; CRCs checked)
  verify     `rocketstore verify` of the put-path store (index on): every record's CRC, every ConsumeQueue
             unit and index entry checked against its record (rocketstore.maintenance.verify.verify_store)
The index's cost is "on" minus "off" of the same row; keys/s = index entries written / that difference.
Queries (--queries random keys each, after the put-path fill): store.query by an order key (1 hit), by a
shared key (32 hits), by a missing key; store.by_unique_key; and store._index.query_offsets (the index alone:
offsets only, no record read), the like-for-like peer of SQLite's `SELECT phy FROM k WHERE key = ?`.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

import rocketstore
from rocketstore import Message, MessageStore, PutStatus, StoreConfig
from rocketstore.formats import checkpoint as CP
from rocketstore.maintenance.verify import verify_store

TOPIC = "BenchTopic"
CUSTOMERS = 1001
SLOTS, ENTRIES = 5_000_000, 20_000_000
# apache/rocketmq 5.x measured on the same kind of machine (/work/shared/notes/python-performance.md)
JAVA = [
    ("dispatch (reput) alone", "653 k msg/s"),
    ("full CQ + index rebuild on restart", "about 550 k msg/s"),
    ("queryMessage by key", "248 k queries/s"),
]


def uniq(i: int) -> str:
    return f"7F00000100002A9F{i:016X}"  # 32 hex digits, as MessageClientIDSetter makes


def make_messages(n: int, body_size: int, batch: int):
    body = (bytes(range(256)) * (body_size // 256 + 1))[:body_size]
    msgs = [
        Message(
            TOPIC,
            body,
            tags="TagA",
            properties={"UNIQ_KEY": uniq(i)},
            keys=[f"order-{i}", f"cust-{i % CUSTOMERS}"] if i % 2 else [f"order-{i}"],
        )
        for i in range(n)
    ]
    keys = [k for i in range(n) for k in (uniq(i), f"order-{i}") + ((f"cust-{i % CUSTOMERS}",) if i % 2 else ())]
    return [msgs[i : i + batch] for i in range(0, n, batch)], keys


def entries(store) -> int:
    return sum(f.header.index_count - 1 for f in store._index.files)


def config(index: bool, **kw) -> StoreConfig:
    return StoreConfig(message_index_enable=index, max_hash_slot_num=SLOTS, max_index_num=ENTRIES, **kw)


def fill(store, batches) -> None:
    for b in batches:
        if store.put_batch(b, 0).status is not PutStatus.PUT_OK:
            raise RuntimeError("put_batch failed")


def crash_image(d: str) -> None:
    """A closed store made to look crashed with nothing vouched for: recovery must re-dispatch everything."""
    for sub in ("index", "consumequeue"):
        shutil.rmtree(os.path.join(d, sub), ignore_errors=True)
    with open(os.path.join(d, "abort"), "w") as fh:
        fh.write("0")
    path = os.path.join(d, "checkpoint")
    with open(path, "rb") as fh:
        cp = CP.decode(fh.read())
    cp.physic_msg_timestamp = cp.logics_msg_timestamp = cp.index_msg_timestamp = 0
    with open(path, "wb") as fh:
        fh.write(CP.encode(cp))


def latency(fn, args) -> tuple[float, list[int]]:
    lat = []
    ns = time.perf_counter_ns
    t0 = time.perf_counter()
    for a in args:
        s = ns()
        fn(a)
        lat.append(ns() - s)
    return time.perf_counter() - t0, lat


# ---------------------------------------------------------------- one round


def put_path_and_queries(batches, n, n_keys, picks, base, res, index: bool) -> None:
    """put_batch into a fresh store; with the index on, then the query rows and the crash rebuilds on it."""
    d = tempfile.mkdtemp(prefix="rs-index-", dir=base)
    try:
        with MessageStore.open(d, config=config(index)) as store:
            t0 = time.perf_counter()
            fill(store, batches)
            store._index.build()  # queued records become entries here at the latest (any query does it too)
            res.add(f"put_{index}", time.perf_counter() - t0)
            if entries(store) != (n_keys if index else 0):
                raise RuntimeError(f"put path indexed {entries(store)} keys, expected {n_keys if index else 0}")
            if index:
                queries(store, picks, n, res)
        if not index:
            return
        t0 = time.perf_counter()
        report = verify_store(d, config(True))
        res.add("verify", time.perf_counter() - t0)
        if not report["ok"] or report["checked"]["records"] != n or report["checked"]["indexEntries"] != n_keys:
            raise RuntimeError(f"verify: {report['checked']}, problems {report['problems'][:3]}")
        for idx in (True, False):
            crash_image(d)
            t0 = time.perf_counter()
            with MessageStore.open(d, config=config(idx)) as store:
                res.add(f"rebuild_{idx}", time.perf_counter() - t0)
                got, cq = entries(store), store.max_offset(TOPIC, 0)
                found = idx and len(store.query(TOPIC, f"order-{n - 1}")) == 1 and store.by_unique_key(TOPIC, uniq(0))
                if cq != n or got != (n_keys if idx else 0) or (idx and not found):
                    res.notes.add(
                        f"crash rebuild (index {'on' if idx else 'off'}) was NOT complete: {cq:,} of "
                        f"{n:,} ConsumeQueue units, {got:,} of {n_keys:,} index entries"
                    )
    finally:
        shutil.rmtree(d, ignore_errors=True)


def queries(store, picks, n, res) -> None:
    q = store.query
    shared = lambda i: min(32, sum(j % 2 for j in range(i % CUSTOMERS, n, CUSTOMERS)))  # noqa: E731
    rows = {  # row: (call, is its answer for pick i right)
        "q_key": (lambda i: q(TOPIC, f"order-{i}"), lambda i, r: len(r) == 1),
        "q_shared": (lambda i: q(TOPIC, f"cust-{i % CUSTOMERS}"), lambda i, r: len(r) == shared(i)),
        "q_uniq": (lambda i: store.by_unique_key(TOPIC, uniq(i)), lambda i, r: r and r.unique_key == uniq(i)),
        "q_missing": (lambda i: q(TOPIC, f"nope-{i}"), lambda i, r: len(r) == 0),
        # offsets whose key hash matches: another key with the same hash adds one (query re-checks, this does not)
        "q_offsets": (lambda i: store._index.query_offsets(TOPIC, f"order-{i}", 32), lambda i, r: len(r[0]) >= 1),
    }
    for key, (fn, ok) in rows.items():
        if not all(ok(i, fn(i)) for i in picks[:200]):
            raise RuntimeError(f"{key}: wrong answers")
        res.add(key, *latency(fn, picks))


def reput(batches, n, n_keys, base, res, index: bool) -> None:
    d = tempfile.mkdtemp(prefix="rs-reput-", dir=base)
    try:
        with MessageStore.open(d, config=config(index, dispatch_in_put_path=False)) as store:
            store._reput.stop(drain=False)  # held back while putting: one pass over the whole CommitLog
            fill(store, batches)
            t0 = time.perf_counter()
            store.wait_dispatched()
            res.add(f"reput_{index}", time.perf_counter() - t0)
            if store.max_offset(TOPIC, 0) != n or entries(store) != (n_keys if index else 0):
                raise RuntimeError(f"reput dispatched {store.max_offset(TOPIC, 0)} units, {entries(store)} keys")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def sqlite(keys, picks, base, res, batch: int) -> None:
    d = tempfile.mkdtemp(prefix="sq-index-", dir=base)
    try:
        con = sqlite3.connect(os.path.join(d, "k.db"), isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        con.execute("CREATE TABLE k (key TEXT, phy INTEGER)")
        con.execute("CREATE INDEX k_key ON k (key)")
        rows = [(f"{TOPIC}#{k}", 300 * j) for j, k in enumerate(keys)]  # the index's topic#key; phy of 8 bytes
        ex, exm = con.execute, con.executemany
        t0 = time.perf_counter()
        for i in range(0, len(rows), batch):
            ex("BEGIN")
            exm("INSERT INTO k VALUES (?, ?)", rows[i : i + batch])
            ex("COMMIT")
        res.add("sq_insert", time.perf_counter() - t0)
        sel = "SELECT phy FROM k WHERE key = ?"
        for key, make, want in (
            ("sq_key", lambda i: f"order-{i}", 1),
            ("sq_uniq", uniq, 1),
            ("sq_missing", lambda i: f"nope-{i}", 0),
        ):
            fn = lambda i: ex(sel, (f"{TOPIC}#{make(i)}",)).fetchall()  # noqa: E731
            if not all(len(fn(i)) == want for i in picks[:200]):
                raise RuntimeError(f"{key}: wrong answers")
            res.add(key, *latency(fn, picks))
        con.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


class Results:
    def __init__(self):
        self.t: dict[str, list[float]] = {}
        self.lat: dict[str, list[int]] = {}
        self.notes: set[str] = set()

    def add(self, key, seconds, lat=None):
        if lat is not None and (key not in self.t or seconds < min(self.t[key])):
            self.lat[key] = lat  # latencies of the fastest run
        self.t.setdefault(key, []).append(seconds)

    def best(self, key):
        return min(self.t[key])


def run_round(batches, keys, n, picks, base, res, batch) -> None:
    n_keys = len(keys)
    put_path_and_queries(batches, n, n_keys, picks, base, res, True)
    put_path_and_queries(batches, n, n_keys, picks, base, res, False)
    reput(batches, n, n_keys, base, res, True)
    reput(batches, n, n_keys, base, res, False)
    sqlite(keys, picks, base, res, batch)


# ---------------------------------------------------------------- report


def rate(v: float) -> str:
    return f"{v / 1e6:.2f} M" if v >= 1e6 else f"{v / 1e3:.0f} k"


def report(res: Results, n: int, n_keys: int) -> str:
    out = [f"{'index build':<38} {'msgs/s':>9} {'keys/s':>9} {'vs SQLite':>10}  runs (s)"]
    sq = n_keys / res.best("sq_insert")
    for what, key in (
        ("put_batch(1,000)", "put"),
        ("reput (wait_dispatched)", "reput"),
        ("crash rebuild on open", "rebuild"),
    ):
        on, off = res.best(f"{key}_True"), res.best(f"{key}_False")
        for label, k, t in ((f"{what}, index off", f"{key}_False", off), (f"{what}, index on", f"{key}_True", on)):
            runs = ", ".join(f"{x:.3f}" for x in res.t[k])
            out.append(
                f"{label:<38} {rate(n / t):>9} {rate(n_keys / t) if k.endswith('True') else '':>9} {'':>10}  {runs}"
            )
        if on > off:
            cost = n_keys / (on - off)
            out.append(
                f"{'  = the index alone (on - off)':<38} {rate(n / (on - off)):>9} {rate(cost):>9} "
                f"{cost / sq:>9.2f}x  {on - off:.3f}"
            )
        else:
            out.append(f"{'  = the index alone (on - off)':<38} {'n/a: on <= off, noise':>20}")
    runs = ", ".join(f"{x:.3f}" for x in res.t["verify"])
    out.append(
        f"{'verify (the put-path store, index on)':<38} {rate(n / res.best('verify')):>9} {'':>9} {'':>10}  {runs}"
    )
    out.append(
        f"{'SQLite executemany, 1,000 rows/txn':<38} {'':>9} {rate(sq):>9} {'':>10}  "
        + ", ".join(f"{x:.3f}" for x in res.t["sq_insert"])
    )
    out += sorted(res.notes) or [
        f"crash rebuild checked: every run re-dispatched all {n:,} ConsumeQueue units "
        f"and all {n_keys:,} index entries (index on), and the queries find them"
    ]
    out.append("")
    out.append(f"{'query (random keys)':<38} {'p50 us':>7} {'p99 us':>7} {'queries/s':>10} {'vs SQLite':>10}")
    peers = {"q_key": "sq_key", "q_uniq": "sq_uniq", "q_missing": "sq_missing", "q_offsets": "sq_key"}
    labels = {
        "q_key": "query(order key), 1 hit",
        "q_shared": "query(shared key), 32 hits",
        "q_uniq": "by_unique_key",
        "q_missing": "query(missing key)",
        "q_offsets": "index.query_offsets(order key)",
        "sq_key": "SQLite SELECT phy, order key",
        "sq_uniq": "SQLite SELECT phy, UNIQ_KEY",
        "sq_missing": "SQLite SELECT phy, missing key",
    }
    qps = {k: len(res.lat[k]) / res.best(k) for k in res.lat}
    for k, label in labels.items():
        lat = sorted(res.lat[k])
        p50, p99 = lat[len(lat) // 2] / 1e3, lat[int(len(lat) * 0.99)] / 1e3
        ratio = f"{qps[k] / qps[peers[k]]:.2f}x" if k in peers else ""
        out.append(f"{label:<38} {p50:>7.1f} {p99:>7.1f} {rate(qps[k]):>10} {ratio:>10}")
    out.append("")
    out.append(
        f"{n:,} messages of 100 B, {n_keys:,} index keys ({n_keys / n:.1f}/message), {len(lat):,} queries "
        f"per row; best of {len(res.t['sq_insert'])}. query/by_unique_key read and decode each hit and "
        f"re-check its key; SQLite returns the offset only (query_offsets is the like-for-like row)."
    )
    out.append(
        "Not measured in this run: apache/rocketmq 5.x (Java 17) on the same kind of machine, from "
        "/work/shared/notes/python-performance.md:"
    )
    out += [f"  {w}: {v}" for w, v in JAVA]
    return "\n".join(out)


def code_version() -> str:
    src = os.path.dirname(os.path.dirname(os.path.abspath(rocketstore.__file__)))
    git = lambda *a: subprocess.run(["git", "-C", src, *a], capture_output=True, text=True).stdout.strip()  # noqa
    head, dirty = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "--", ".")
    return f"{src} @ {head or '?'}{' + uncommitted changes' if dirty else ''}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, help="default 1,000,000; --quick: 100,000")
    ap.add_argument("--quick", action="store_true", help="100,000 messages, best of 1")
    ap.add_argument("--runs", type=int, help="rounds, best taken (default 3, --quick 1)")
    ap.add_argument("--queries", type=int, default=20_000, help="queries per query row (default 20,000)")
    ap.add_argument("--batch", type=int, default=1000, help="put_batch and SQLite transaction size")
    ap.add_argument("--warmup", type=int, help="messages in a warm-up round (default max(20,000, N/10); 0: none)")
    ap.add_argument("--tmpdir", help="where the temporary stores go (default $TMPDIR or /tmp)")
    args = ap.parse_args(argv)
    n = args.messages or (100_000 if args.quick else 1_000_000)
    runs = args.runs or (1 if args.quick else 3)
    warm = max(20_000, n // 10) if args.warmup is None else args.warmup
    base = args.tmpdir or tempfile.gettempdir()
    need = n * 1200 + 200e6  # CommitLog ~300 B/msg, touched index pages ~60 B/key, SQLite ~150 B/key, + slack
    free = shutil.disk_usage(base).free
    if need > free:
        ap.error(f"{base} has {free / 1e9:.1f} GB free, the run needs about {need / 1e9:.1f} GB")
    logging.basicConfig(level=logging.ERROR)
    print(
        f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, tmp {base} "
        f"({free / 1e9:.0f} GB free)\nrocketstore {rocketstore.__version__} from {code_version()}\n"
        f"index files: {SLOTS:,} slots x {ENTRIES:,} entries ({(40 + SLOTS * 4 + ENTRIES * 20) / 1e6:.0f} MB sparse)",
        flush=True,
    )
    t_start = time.perf_counter()
    if warm:
        print(f"warming up with {warm:,} messages ...", flush=True)
        batches, keys = make_messages(warm, 100, args.batch)
        run_round(batches, keys, warm, random.Random(1).choices(range(warm), k=2000), base, Results(), args.batch)
    batches, keys = make_messages(n, 100, args.batch)
    picks = random.Random(42).choices(range(n), k=args.queries)
    gc.collect()
    gc.freeze()
    res = Results()
    for r in range(runs):
        print(f"run {r + 1} of {runs}: {n:,} messages ...", flush=True)
        run_round(batches, keys, n, picks, base, res, args.batch)
    print()
    print(report(res, n, len(keys)))
    print(f"\nwall time {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
