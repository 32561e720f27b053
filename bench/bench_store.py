#!/usr/bin/env python
"""rocketstore against SQLite (WAL, synchronous=NORMAL), in one run, on fresh temporary stores.

    python bench/bench_store.py [--messages N] [--body 100] [--quick] [--runs R] [--only put,get,...]

Rows (each the best of --runs, default 3; --quick: 100,000 messages, 1 run):
  rocketstore  put             one Message per store.put call, ASYNC_FLUSH, default config
               put_batch       store.put_batch, batches of --batch (1,000) messages
               get(32)         store.get(..., max_count=32) over the whole queue, following next_begin_offset
               get(32), tag 10%
                               the same with tags="TagB" over a queue where every tenth message has tag TagB (the
                               rest TagA): matched messages/s (the ConsumeQueue tag filter skips nine units in ten)
               reput (open)    close, delete consumequeue/, time MessageStore.open (recovery re-dispatches
                               every record; check_crc_on_recover is on by default, so CRCs are checked)
               reput (thread held back)
                               dispatch_in_put_path=False with the reput thread stopped during the puts,
                               then time store.wait_dispatched() (one in-process pass over the CommitLog)
               put keyed, put_batch keyed
                               the same with producers' messages: tags, KEYS order-<i> and a UNIQ_KEY of 32 hex
                               digits, index on (the default), timed until the index holds them (index.build())
  SQLite       executemany     --batch rows per transaction
               autocommit      one INSERT per message
               keyed           the same into a table with KEYS and UNIQ_KEY columns, each with an index
               read LIMIT 32   SELECT ... WHERE id > ? ORDER BY id LIMIT 32, looped over the whole table
               read cursor     one SELECT over the whole table, iterated
Info rows (no target): reput (held back) with the ConsumeQueue ext and SQL92 bitmaps on and a filter
registered on the topic (every record's bitmap computed), put_batch with dispatch_in_put_path=False (the fill of the held-back reput row),
put (1/call) and put_batch to a BatchCQ topic (RIP-26: put_batch makes each batch one inner-batch record), and
close() after N messages (msync of the CommitLog and ConsumeQueue, checkpoint).

MB/s counts message bodies only (N * body bytes / s, 1 MB = 10^6 B); the stored bytes per message of each
store are printed under the table. Timed sections exclude building the Message objects / row tuples, which
are made once up front and then frozen out of the garbage collector's view (gc.freeze); the collector stays on.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time

import rocketstore
from rocketstore import GetStatus, Message, MessageStore, PutStatus, StoreConfig

TOPIC = "BenchTopic"
TAGS = "TagA"
QUEUE = 0
GROUP = "bench-group"
PUT_OK = PutStatus.PUT_OK

TARGETS = {
    # row key: (minimum msgs/s, minimum ratio to the SQLite peer or None)
    "rs_put": (400_000, None),
    "rs_batch": (1_500_000, 2.0),
    "rs_get": (2_000_000, None),
    "rs_get_tag": (2_000_000, None),
    "rs_reput_open": (1_000_000, None),
    "rs_reput_held": (1_000_000, None),
    "rs_put_keyed": (450_000, None),
    "rs_batch_keyed": (1_500_000, None),
}
PEERS = {
    "rs_put": "sq_auto",
    "rs_batch": "sq_batch",
    "rs_get": "sq_read32",
    "rs_put_keyed": "sq_auto_keyed",
    "rs_batch_keyed": "sq_batch_keyed",
}
LABELS = {
    "rs_put": "rocketstore put (1/call)",
    "rs_batch": "rocketstore put_batch",
    "rs_get": "rocketstore get(32)",
    "rs_get_tag": "rocketstore get(32), tag 10%",
    "rs_reput_open": "rocketstore reput (open)",
    "rs_reput_held": "rocketstore reput (held back)",
    "rs_reput_bitmap": "rs reput (held), SQL92 bitmaps",
    "rs_batch_nodisp": "rs put_batch, no put-path CQ",
    "rs_bcq_put": "rs put (1/call), BatchCQ topic",
    "rs_bcq_batch": "rs put_batch, BatchCQ topic",
    "rs_close": "rocketstore close()",
    "sq_batch": "SQLite executemany/txn",
    "sq_auto": "SQLite autocommit insert",
    "sq_read32": "SQLite read LIMIT 32",
    "sq_cursor": "SQLite read cursor",
    "rs_put_keyed": "rocketstore put keyed",
    "rs_batch_keyed": "rocketstore put_batch keyed",
    "sq_auto_keyed": "SQLite autocommit, key indexes",
    "sq_batch_keyed": "SQLite executemany, key indexes",
}
ORDER = [
    "rs_put",
    "sq_auto",
    "rs_batch",
    "sq_batch",
    "rs_put_keyed",
    "sq_auto_keyed",
    "rs_batch_keyed",
    "sq_batch_keyed",
    "rs_get",
    "rs_get_tag",
    "sq_read32",
    "sq_cursor",
    "rs_reput_open",
    "rs_reput_held",
    "rs_reput_bitmap",
    "rs_batch_nodisp",
    "rs_bcq_put",
    "rs_bcq_batch",
    "rs_close",
]
KEYED = {"rs_put_keyed", "rs_batch_keyed", "sq_auto_keyed", "sq_batch_keyed"}
GROUPS = {  # --only names -> what to run
    "put": {"rs_put"},
    "put_batch": {"rs_batch"},
    "get": {"rs_batch", "rs_get", "rs_get_tag"},
    "get_tag": {"rs_get_tag"},
    "reput": {"rs_batch", "rs_reput_open", "rs_reput_held", "rs_reput_bitmap"},
    "sqlite": {"sq_batch", "sq_auto", "sq_read32", "sq_auto_keyed", "sq_batch_keyed"},
    "keyed": KEYED,
    "batchcq": {"rs_bcq_put", "rs_bcq_batch"},
    "rocketstore": {
        "rs_put",
        "rs_batch",
        "rs_get",
        "rs_get_tag",
        "rs_reput_open",
        "rs_reput_held",
        "rs_reput_bitmap",
        "rs_put_keyed",
        "rs_batch_keyed",
    },
}


# ---------------------------------------------------------------- helpers


class Results:
    def __init__(self):
        self.times: dict[str, list[float]] = {}
        self.stored_bytes: dict[str, float] = {}
        self.counts: dict[str, int] = {}  # messages a row's rate counts, when not all N (matched ones)

    def add(self, key: str, seconds: float) -> None:
        self.times.setdefault(key, []).append(seconds)


def new_dir(base: str | None, prefix: str) -> str:
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def rs_config(**kw) -> StoreConfig:
    return StoreConfig(**kw)  # default file sizes: 1 GiB CommitLog segments (sparse), 6 MB ConsumeQueue files


def check_put(r) -> None:
    if r.status is not PUT_OK:
        raise RuntimeError(f"put failed: {r.status}")


# ---------------------------------------------------------------- rocketstore


def rs_put(msgs, base, res: Results | None) -> None:
    d = new_dir(base, "rs-put-")
    try:
        with MessageStore.open(d, config=rs_config()) as store:
            put = store.put
            t0 = time.perf_counter()
            for m in msgs:
                r = put(m, QUEUE)
                if r.status is not PUT_OK:
                    check_put(r)
            t = time.perf_counter() - t0
            assert store.max_offset(TOPIC, QUEUE) == len(msgs)
        if res is not None:
            res.add("rs_put", t)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def rs_keyed(msgs, batches, base, res: Results | None, want: set[str]) -> None:
    """Producers' messages (KEYS, UNIQ_KEY), index on: put one per call, and put_batch, each into a fresh
    store, timed until the index holds every key (the index builds in runs; index.build() places the rest)."""
    for key, one in (("rs_put_keyed", True), ("rs_batch_keyed", False)):
        if key not in want:
            continue
        d = new_dir(base, "rs-keyed-")
        try:
            with MessageStore.open(d, config=rs_config()) as store:
                t0 = time.perf_counter()
                if one:
                    put = store.put
                    for m in msgs:
                        r = put(m, QUEUE)
                        if r.status is not PUT_OK:
                            check_put(r)
                else:
                    put_batch = store.put_batch
                    for b in batches:
                        r = put_batch(b, QUEUE)
                        if r.status is not PUT_OK:
                            check_put(r)
                store._index.build()
                t = time.perf_counter() - t0
                if store.max_offset(TOPIC, QUEUE) != len(msgs):
                    raise RuntimeError(f"{key}: {store.max_offset(TOPIC, QUEUE)} of {len(msgs)} in the queue")
                last = msgs[-1]
                found = store.query(TOPIC, last.keys, 1)
                if len(found) != 1 or found[0].unique_key != last.properties["UNIQ_KEY"]:
                    raise RuntimeError(f"{key}: the last message's key is not in the index")
            if res is not None:
                res.add(key, t)
        finally:
            shutil.rmtree(d, ignore_errors=True)


def rs_batch_get_reput(batches, n, base, res: Results | None, want: set[str]) -> None:
    """put_batch into a fresh store, then get(32) over it, close it, and time recovery's full reput."""
    d = new_dir(base, "rs-batch-")
    try:
        store = MessageStore.open(d, config=rs_config())
        try:
            put_batch = store.put_batch
            t0 = time.perf_counter()
            for b in batches:
                r = put_batch(b, QUEUE)
                if r.status is not PUT_OK:
                    check_put(r)
            t = time.perf_counter() - t0
            assert store.max_offset(TOPIC, QUEUE) == n
            if res is not None:
                res.add("rs_batch", t)
                res.stored_bytes["rocketstore CommitLog"] = store.max_physical_offset / n

            if "rs_get" in want:
                get = store.get
                off = got = 0
                t0 = time.perf_counter()
                while True:
                    g = get(GROUP, TOPIC, QUEUE, off, 32)
                    if g.status is not GetStatus.FOUND:
                        break
                    got += len(g.messages)
                    off = g.next_begin_offset
                t = time.perf_counter() - t0
                if got != n or g.status is not GetStatus.OFFSET_OVERFLOW_ONE:
                    raise RuntimeError(f"get read {got} of {n} messages, ended with {g.status}")
                if res is not None:
                    res.add("rs_get", t)
            t0 = time.perf_counter()
        finally:
            store.close()
        if res is not None:
            res.add("rs_close", time.perf_counter() - t0)

        if "rs_reput_open" in want:
            shutil.rmtree(os.path.join(d, "consumequeue"))
            t0 = time.perf_counter()
            store = MessageStore.open(d, config=rs_config())
            t = time.perf_counter() - t0
            try:
                if store.max_offset(TOPIC, QUEUE) != n:
                    raise RuntimeError(f"recovery rebuilt {store.max_offset(TOPIC, QUEUE)} of {n} units")
                g = store.get(GROUP, TOPIC, QUEUE, n - 1, 1)
                assert g.status is GetStatus.FOUND and len(g.messages[0].body) == len(batches[-1][-1].body)
            finally:
                store.close()
            if res is not None:
                res.add("rs_reput_open", t)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def rs_get_tagged(n, body_size, batch, base, res: Results | None) -> None:
    """put_batch (untimed) messages of which every tenth has tag TagB, then time get(32) with tags="TagB" over
    the whole queue, following next_begin_offset: matched messages/s."""
    body = (bytes(range(256)) * (body_size // 256 + 1))[:body_size]
    msgs = [Message(topic=TOPIC, body=body, tags="TagB" if i % 10 == 0 else TAGS) for i in range(n)]
    d = new_dir(base, "rs-tag-")
    try:
        with MessageStore.open(d, config=rs_config()) as store:
            for i in range(0, n, batch):
                check_put(store.put_batch(msgs[i : i + batch], QUEUE))
            del msgs
            get = store.get
            off = got = 0
            t0 = time.perf_counter()
            while off < n:
                g = get(GROUP, TOPIC, QUEUE, off, 32, "TagB")
                if g.status is not GetStatus.FOUND and g.status is not GetStatus.NO_MATCHED_MESSAGE:
                    break
                got += len(g.messages)
                off = g.next_begin_offset
            t = time.perf_counter() - t0
            want = (n + 9) // 10
            if got != want:
                raise RuntimeError(f"get with a tag read {got} of {want} messages, ended with {g.status}")
            if res is not None:
                res.add("rs_get_tag", t)
                res.counts["rs_get_tag"] = want
    finally:
        shutil.rmtree(d, ignore_errors=True)


BITMAP_SQL = "region = 'eu' OR TAGS = 'TagA'"  # true for every message: each one gets its filter bits


def rs_reput_held(batches, n, base, res: Results | None, bitmaps: bool = False) -> None:
    """dispatch_in_put_path=False, reput thread stopped while putting; then one full in-process reput.
    With `bitmaps`: the ConsumeQueue ext and SQL92 bitmaps on, one consumer group's filter registered on the
    topic (the bitmap dispatcher evaluates it on every record's properties)."""
    d = new_dir(base, "rs-reput-")
    extra = dict(enable_consume_queue_ext=True, enable_calc_filter_bit_map=True) if bitmaps else {}
    try:
        with MessageStore.open(d, config=rs_config(dispatch_in_put_path=False, **extra)) as store:
            if bitmaps:
                store.register_filter(GROUP, TOPIC, BITMAP_SQL)
            store._reput.stop(drain=False)  # hold the background reput back (as Java's "reput held back")
            put_batch = store.put_batch
            t0 = time.perf_counter()
            for b in batches:
                r = put_batch(b, QUEUE)
                if r.status is not PUT_OK:
                    check_put(r)
            t_fill = time.perf_counter() - t0
            if store.max_offset(TOPIC, QUEUE) != 0:
                raise RuntimeError("the reput thread dispatched while held back")
            t0 = time.perf_counter()
            store.wait_dispatched()
            t = time.perf_counter() - t0
            if store.max_offset(TOPIC, QUEUE) != n:
                raise RuntimeError(f"reput dispatched {store.max_offset(TOPIC, QUEUE)} of {n}")
        if res is not None and bitmaps:
            res.add("rs_reput_bitmap", t)
        elif res is not None:
            res.add("rs_batch_nodisp", t_fill)
            res.add("rs_reput_held", t)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def rs_batch_cq(msgs, batches, base, res: Results | None, want: set[str]) -> None:
    """The same messages to a BatchCQ topic (RIP-26), each row into a fresh store: put one per call (a unit
    per message), and put_batch (each batch one inner-batch record: one unit of --batch queue offsets)."""
    for key, one in (("rs_bcq_put", True), ("rs_bcq_batch", False)):
        if key not in want:
            continue
        d = new_dir(base, "rs-bcq-")
        try:
            with MessageStore.open(d, config=rs_config()) as store:
                store.create_topic(TOPIC, attributes={"queue.type": "BatchCQ"})
                t0 = time.perf_counter()
                if one:
                    put = store.put
                    for m in msgs:
                        r = put(m, QUEUE)
                        if r.status is not PUT_OK:
                            check_put(r)
                else:
                    put_batch = store.put_batch
                    for b in batches:
                        r = put_batch(b, QUEUE)
                        if r.status is not PUT_OK:
                            check_put(r)
                t = time.perf_counter() - t0
                if store.max_offset(TOPIC, QUEUE) != len(msgs):
                    raise RuntimeError(f"{key}: {store.max_offset(TOPIC, QUEUE)} of {len(msgs)} in the queue")
            if res is not None:
                res.add(key, t)
        finally:
            shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- SQLite

SCHEMA = "CREATE TABLE m (id INTEGER PRIMARY KEY, topic TEXT, queue INT, tags TEXT, body BLOB)"
INSERT = "INSERT INTO m (topic, queue, tags, body) VALUES (?, ?, ?, ?)"
READ32 = "SELECT id, topic, queue, tags, body FROM m WHERE id > ? ORDER BY id LIMIT 32"
READALL = "SELECT id, topic, queue, tags, body FROM m ORDER BY id"
# the keyed workload's peer: KEYS and UNIQ_KEY columns with an index each (what the IndexFile answers)
SCHEMA_KEYED = (
    "CREATE TABLE mk (id INTEGER PRIMARY KEY, topic TEXT, queue INT, tags TEXT, keys TEXT, uniq TEXT, body BLOB)",
    "CREATE INDEX mk_keys ON mk (keys)",
    "CREATE INDEX mk_uniq ON mk (uniq)",
)
INSERT_KEYED = "INSERT INTO mk (topic, queue, tags, keys, uniq, body) VALUES (?, ?, ?, ?, ?, ?)"


def sq_open(path: str, schema=(SCHEMA,)) -> sqlite3.Connection:
    con = sqlite3.connect(path, isolation_level=None)  # autocommit unless BEGIN
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    for statement in schema:
        con.execute(statement)
    return con


def sq_keyed(rows, row_batches, base, res: Results | None, want: set[str]) -> None:
    """The keyed rows into a table with key indexes: one INSERT per message (autocommit), and executemany
    in transactions of --batch rows."""
    for key in ("sq_auto_keyed", "sq_batch_keyed"):
        if key not in want:
            continue
        d = new_dir(base, "sq-keyed-")
        try:
            con = sq_open(os.path.join(d, "bench.db"), SCHEMA_KEYED)
            try:
                ex, exm = con.execute, con.executemany
                t0 = time.perf_counter()
                if key == "sq_auto_keyed":
                    for r in rows:
                        ex(INSERT_KEYED, r)
                else:
                    for b in row_batches:
                        ex("BEGIN")
                        exm(INSERT_KEYED, b)
                        ex("COMMIT")
                t = time.perf_counter() - t0
            finally:
                con.close()
            if res is not None:
                res.add(key, t)
        finally:
            shutil.rmtree(d, ignore_errors=True)


def sq_batch_and_read(row_batches, n, base, res: Results | None, want: set[str]) -> None:
    d = new_dir(base, "sq-batch-")
    try:
        path = os.path.join(d, "bench.db")
        con = sq_open(path)
        try:
            ex, exm = con.execute, con.executemany
            t0 = time.perf_counter()
            for b in row_batches:
                ex("BEGIN")
                exm(INSERT, b)
                ex("COMMIT")
            t = time.perf_counter() - t0
            if res is not None:
                res.add("sq_batch", t)
            if "sq_read32" in want:
                last = got = 0
                t0 = time.perf_counter()
                while True:
                    rows = ex(READ32, (last,)).fetchall()
                    if not rows:
                        break
                    got += len(rows)
                    last = rows[-1][0]
                t = time.perf_counter() - t0
                if got != n:
                    raise RuntimeError(f"SQLite read {got} of {n}")
                if res is not None:
                    res.add("sq_read32", t)
                got = 0
                t0 = time.perf_counter()
                for _row in ex(READALL):
                    got += 1
                t = time.perf_counter() - t0
                if got != n:
                    raise RuntimeError(f"SQLite cursor read {got} of {n}")
                if res is not None:
                    res.add("sq_cursor", t)
        finally:
            con.close()
        if res is not None:
            size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
            res.stored_bytes["SQLite db+wal (after close)"] = size / n
    finally:
        shutil.rmtree(d, ignore_errors=True)


def sq_autocommit(rows, base, res: Results | None) -> None:
    d = new_dir(base, "sq-auto-")
    try:
        con = sq_open(os.path.join(d, "bench.db"))
        try:
            ex = con.execute
            t0 = time.perf_counter()
            for r in rows:
                ex(INSERT, r)
            t = time.perf_counter() - t0
        finally:
            con.close()
        if res is not None:
            res.add("sq_auto", t)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- driver


def make_inputs(n: int, body_size: int, batch: int, keyed: bool = False):
    body = bytes(range(256)) * (body_size // 256 + 1)
    body = body[:body_size]
    msgs = [Message(topic=TOPIC, body=body, tags=TAGS) for _ in range(n)]
    batches = [msgs[i : i + batch] for i in range(0, n, batch)]
    rows = [(TOPIC, QUEUE, TAGS, body) for _ in range(n)]
    row_batches = [rows[i : i + batch] for i in range(0, n, batch)]
    kmsgs = krows = None
    if keyed:  # what real producers send: a KEYS value and the client's message id as UNIQ_KEY
        kmsgs = [
            Message(topic=TOPIC, body=body, tags=TAGS, keys=f"order-{i}", properties={"UNIQ_KEY": f"{i:032X}"})
            for i in range(n)
        ]
        krows = [(TOPIC, QUEUE, TAGS, f"order-{i}", f"{i:032X}", body) for i in range(n)]
    keyed_inputs = (
        kmsgs,
        [kmsgs[i : i + batch] for i in range(0, n, batch)] if keyed else None,
        krows,
        [krows[i : i + batch] for i in range(0, n, batch)] if keyed else None,
    )
    return msgs, batches, rows, row_batches, keyed_inputs


def run_round(inputs, n, base, res, want) -> None:
    msgs, batches, rows, row_batches, (kmsgs, kbatches, krows, krow_batches) = inputs
    if "rs_put" in want:
        rs_put(msgs, base, res)
    if "sq_auto" in want:
        sq_autocommit(rows, base, res)
    if want & {"rs_batch", "rs_get", "rs_reput_open"}:
        rs_batch_get_reput(batches, n, base, res, want)
    if "rs_get_tag" in want:
        rs_get_tagged(n, len(batches[0][0].body), len(batches[0]), base, res)
    if want & {"sq_batch", "sq_read32"}:
        sq_batch_and_read(row_batches, n, base, res, want)
    if "rs_reput_held" in want:
        rs_reput_held(batches, n, base, res)
    if "rs_reput_bitmap" in want:
        rs_reput_held(batches, n, base, res, bitmaps=True)
    if want & {"rs_put_keyed", "rs_batch_keyed"}:
        rs_keyed(kmsgs, kbatches, base, res, want)
    if want & {"sq_auto_keyed", "sq_batch_keyed"}:
        sq_keyed(krows, krow_batches, base, res, want)
    if want & {"rs_bcq_put", "rs_bcq_batch"}:
        rs_batch_cq(msgs, batches, base, res, want)


def fmt_rate(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.2f} M"
    return f"{v / 1e3:.0f} k"


def report(res: Results, n: int, body: int, runs: int) -> str:
    lines = []
    head = f"{'operation':<31} {'msgs/s':>9} {'MB/s':>7} {'vs SQLite':>10}  {'target':<34} {'runs (s)'}"
    lines.append(head)
    lines.append("-" * len(head))
    best = {k: res.counts.get(k, n) / min(v) for k, v in res.times.items()}
    verdicts = []
    for key in ORDER:
        if key not in res.times:
            continue
        rate = best[key]
        mbs = rate * body / 1e6
        peer = PEERS.get(key)
        ratio = f"{rate / best[peer]:.2f}x" if peer in best else ""
        target = ""
        if key in TARGETS:
            floor, min_ratio = TARGETS[key]
            ok = rate >= floor
            target = f">= {fmt_rate(floor)}"
            if min_ratio is not None:
                target += f", >= {min_ratio:g}x SQLite"
                if "sq_batch" in best:
                    ok = ok and rate / best["sq_batch"] >= min_ratio
            target += ": MET" if ok else ": not met"
            verdicts.append((LABELS[key], ok))
        times = ", ".join(f"{t:.3f}" for t in res.times[key])
        if key == "rs_close":
            lines.append(f"{LABELS[key]:<31} {'':>9} {'':>7} {'':>10}  {'':<34} {times}")
            continue
        lines.append(f"{LABELS[key]:<31} {fmt_rate(rate):>9} {mbs:>7.1f} {ratio:>10}  {target:<34} {times}")
    lines.append("")
    lines.append(f"{n:,} messages of {body} B per row, best of {runs}; MB/s = body bytes only.")
    for what, b in res.stored_bytes.items():
        lines.append(f"stored bytes per message, {what}: {b:.1f}")
    met = sum(ok for _, ok in verdicts)
    lines.append(f"targets met: {met} of {len(verdicts)}")
    return "\n".join(lines)


def code_version() -> str:
    """Where rocketstore was imported from, and its git commit when that is a checkout."""
    src = os.path.dirname(os.path.dirname(os.path.abspath(rocketstore.__file__)))
    try:
        import subprocess

        head = subprocess.run(
            ["git", "-C", src, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", src, "status", "--porcelain", "--", "."], capture_output=True, text=True, check=True
        ).stdout.strip()
        return f"{src} @ {head}{' + uncommitted changes' if dirty else ''}"
    except (OSError, subprocess.CalledProcessError):
        return src


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=None, help="messages per row (default 1,000,000; --quick: 100,000)")
    ap.add_argument("--body", type=int, default=100, help="body bytes (default 100)")
    ap.add_argument("--batch", type=int, default=1000, help="put_batch / executemany size (default 1,000)")
    ap.add_argument("--quick", action="store_true", help="100,000 messages, best of 1")
    ap.add_argument("--runs", type=int, default=None, help="runs per row, best taken (default 3, --quick 1)")
    ap.add_argument(
        "--warmup", type=int, default=None, help="messages in the warm-up round (default max(20,000, N/10); 0: none)"
    )
    ap.add_argument(
        "--only", default=None, help="comma list of: " + ", ".join(sorted(GROUPS)) + " (default: everything)"
    )
    ap.add_argument("--tmpdir", default=None, help="where the temporary stores go (default: $TMPDIR or /tmp)")
    args = ap.parse_args(argv)

    n = args.messages or (100_000 if args.quick else 1_000_000)
    runs = args.runs or (1 if args.quick else 3)
    warm = args.warmup if args.warmup is not None else max(20_000, n // 10)
    if args.only:
        want: set[str] = set()
        for name in args.only.split(","):
            if name.strip() not in GROUPS:
                ap.error(f"--only: unknown {name!r}")
            want |= GROUPS[name.strip()]
    else:
        want = set(ORDER) - {"rs_close"}
    if "sq_read32" in want:
        want.add("sq_cursor")

    logging.basicConfig(level=logging.ERROR)  # rocketstore logs a warning when a new store is empty
    base = args.tmpdir or tempfile.gettempdir()
    # at most one store exists at a time: CommitLog records (~118 B + body + topic + properties) plus the
    # ConsumeQueue (20 B), or an SQLite database with its WAL
    need = n * (args.body + 250) * 2
    free = shutil.disk_usage(base).free
    if need > 3 * 1024**3:
        ap.error(f"{n:,} messages of {args.body} B need about {need / 1e9:.1f} GB of disk; keep it under 3 GB")
    if need > free:
        ap.error(f"{base} has {free / 1e9:.1f} GB free, the run needs about {need / 1e9:.1f} GB")

    print(
        f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, "
        f"tmp {base} ({free / 1e9:.0f} GB free)\nrocketstore {rocketstore.__version__} from {code_version()}",
        flush=True,
    )
    t_start = time.perf_counter()
    if warm:
        print(f"warming up with {warm:,} messages ...", flush=True)
        run_round(make_inputs(warm, args.body, args.batch, bool(want & KEYED)), warm, base, None, want)
        gc.collect()
    inputs = make_inputs(n, args.body, args.batch, bool(want & KEYED))
    gc.collect()
    gc.freeze()  # the inputs are long-lived: keep the collector from rescanning them during timed loops
    res = Results()
    for i in range(runs):
        print(f"run {i + 1} of {runs}: {n:,} messages ...", flush=True)
        run_round(inputs, n, base, res, want)
    print()
    print(report(res, n, args.body, runs))
    print(f"\nwall time {time.perf_counter() - t_start:.0f} s")
    if runs > 1:
        spread = {k: (max(v) - min(v)) / statistics.median(v) for k, v in res.times.items()}
        worst = max(spread, key=spread.get)
        print(f"largest spread between runs: {LABELS[worst]} {spread[worst]:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
