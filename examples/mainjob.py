"""The main job: write, reopen, read back and check a few hundred thousand messages on a fresh store, then
read, export and rebuild it with Spark.

    python examples/mainjob.py --store work/store --messages 300000
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import time

from rocketstore import GetStatus, Message, MessageStore, StoreConfig
from rocketstore.maintenance.verify import verify_store

TOPICS = ("Orders", "Payments")
QUEUES = 4
TAGS = ("TagA", "TagB", "TagC")


def body_for(i: int, size: int) -> bytes:
    seed = hashlib.blake2b(i.to_bytes(8, "big"), digest_size=16).digest()
    return (seed * (size // 16 + 1))[:size]


class JobFailed(Exception):
    """A stage found something wrong: the message says what, and the job exits 1."""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--store",
        default="work/store",
        help="store directory (a store an earlier run left there "
        "is removed first, and said so; anything else there is left alone and the job stops)",
    )
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--body", type=int, default=100, help="body size in bytes")
    ap.add_argument("--segment-mb", type=int, default=64, help="CommitLog segment size in MiB")
    ap.add_argument("--no-spark", action="store_true", help="skip the Spark stage")
    args = ap.parse_args(argv)
    n, size = args.messages, args.body
    parquet = os.path.join(os.path.dirname(os.path.abspath(args.store)), "parquet")
    try:
        _make_room(args.store, "store", "commitlog")
        _make_room(parquet, "Parquet export", "_SUCCESS")
    except ValueError as e:
        print(f"rocketstore main job: {e}", file=sys.stderr)
        return 1
    cfg = StoreConfig(mapped_file_size_commit_log=args.segment_mb * 1024 * 1024)
    print(f"rocketstore main job: {n:,} messages of {size} B into a fresh store at {args.store}")
    try:
        single = write(args.store, cfg, n, size)
        t0 = time.perf_counter()
        with MessageStore.open(args.store, cfg) as store:
            read_back(store, n, size, time.perf_counter() - t0)
            look_up(store, n, size, single)
            consume(store, n)
        verify(args.store, cfg)
        if not args.no_spark:
            spark(args.store, n, parquet)
    except JobFailed as e:
        print(e, file=sys.stderr)
        return 1
    print("OK")
    return 0


def write(path: str, cfg, n: int, size: int) -> int:
    """1. write: most in producer batches of 1,000 (putMessages), the rest one by one (putMessage); how many
    went one by one."""
    t0 = time.perf_counter()
    single = min(n, max(1000, n // 10))
    with MessageStore.open(path, cfg) as store:
        i = 0
        while i < n - single:
            k = min(1000, n - single - i)
            topic, q = TOPICS[(i // 1000) % 2], (i // 2000) % QUEUES
            batch = [Message(topic, body_for(j, size), tags=TAGS[j % 3], keys=[f"order-{j}"]) for j in range(i, i + k)]
            r = store.put_batch(batch, queue_id=q)
            if not r.ok:
                raise JobFailed(f"put_batch failed at message {i}: {r.status.name}")
            i += k
        for j in range(i, n):
            r = store.put(
                Message(TOPICS[j % 2], body_for(j, size), tags=TAGS[j % 3], keys=[f"order-{j}"]), queue_id=j % QUEUES
            )
            if not r.ok:
                raise JobFailed(f"put failed at message {j}: {r.status.name}")
        wrote = store.max_physical_offset
    t_put = time.perf_counter() - t0
    print(
        f"  wrote   {n:,} messages, {wrote / 1e6:.1f} MB of CommitLog in {t_put:.2f} s "
        f"({n / t_put / 1e3:,.0f} k msg/s); closed cleanly"
    )
    return single


def read_back(store, n: int, size: int, t_open: float) -> None:
    """2. reopened (recovery): every queue read back through the ConsumeQueue, every body checked; a tag filter,
    a look by physical offset and one by time."""
    t1 = time.perf_counter()
    seen = tag_a = 0
    for topic in TOPICS:
        for q in range(QUEUES):
            seen += _check_queue(store, topic, q, size)
            tag_a += _count_tag(store, topic, q, "TagA")
    t_get = time.perf_counter() - t1
    if seen != n:
        raise JobFailed(f"read back {seen:,} messages, expected {n:,}")
    print(
        f"  reopened in {t_open:.2f} s; read back and checked all {seen:,} bodies in {t_get:.2f} s "
        f"({seen / t_get / 1e3:,.0f} k msg/s)"
    )
    expected_a = len(range(0, n, 3))
    print(f"  tag filter 'TagA' matched {tag_a:,} messages (expected {expected_a:,})")
    if tag_a != expected_a:
        raise JobFailed(f"the tag filter matched {tag_a:,} messages, expected {expected_a:,}")
    probe = store.get("mainjob", TOPICS[0], 0, 0, max_count=1).messages[0]
    again = store.look(probe.physical_offset)
    print(
        f"  look({probe.physical_offset}) -> msgId {again.msg_id}, topic {again.topic}, "
        f"queue offset {again.queue_offset}"
    )
    off = store.offset_by_time(TOPICS[0], 0, probe.store_timestamp)
    print(f"  offset_by_time({TOPICS[0]}/0, {probe.store_timestamp}) -> {off}")


def _check_queue(store, topic: str, q: int, size: int) -> int:
    """Every message of one queue, its body compared with what was written: how many."""
    seen, off = 0, store.min_offset(topic, q)
    while True:
        g = store.get("mainjob", topic, q, off, max_count=32)
        if g.status is not GetStatus.FOUND:
            return seen
        for m in g.messages:
            j = int(m.keys[0].split("-")[1])
            if m.body != body_for(j, size) or m.topic != topic or m.queue_id != q:
                raise JobFailed(f"MISMATCH at {topic}/{q} offset {m.queue_offset}")
            seen += 1
        off = g.next_begin_offset


def look_up(store, n: int, size: int, single: int) -> None:
    """3. messages looked up by key (IndexFile), by offset msgId, by unique key."""
    t1 = time.perf_counter()
    probes = range(0, n, max(1, n // 1000))
    for j in probes:
        topic = TOPICS[(j // 1000) % 2] if j < n - single else TOPICS[j % 2]
        hits = store.query(topic, f"order-{j}")
        if len(hits) != 1 or hits[0].body != body_for(j, size):
            raise JobFailed(f"query({topic}, order-{j}) found {len(hits)} messages, expected 1")
        if store.by_msg_id(hits[0].msg_id).physical_offset != hits[0].physical_offset:
            raise JobFailed(f"by_msg_id({hits[0].msg_id}) found another message")
    t_q = time.perf_counter() - t1
    print(
        f"  found {len(probes):,} messages by key and again by msgId in {t_q:.2f} s "
        f"({len(probes) / t_q:,.0f} lookups/s)"
    )


def consume(store, n: int) -> None:
    """4. a consumer group reads both topics across their queues and commits its offsets."""
    t1 = time.perf_counter()
    consumed = 0
    for topic in TOPICS:
        group = store.consumer("mainjob-group", topic)
        consumed += sum(1 for _ in group)
        group.commit()
        if any(group.lag().values()):
            raise JobFailed(f"consumer group left messages behind on {topic}: {group.lag()}")
    t_c = time.perf_counter() - t1
    if consumed != n:
        raise JobFailed(f"the consumer group read {consumed:,} messages, expected {n:,}")
    print(
        f"  consumer group read all {consumed:,} messages and committed its offsets in {t_c:.2f} s "
        f"({consumed / t_c / 1e3:,.0f} k msg/s)"
    )
    for topic in TOPICS:
        print(
            f"  {topic}: "
            + ", ".join(f"q{q} {store.min_offset(topic, q)}..{store.max_offset(topic, q)}" for q in range(QUEUES))
        )


def verify(path: str, cfg) -> None:
    """5. every record, queue unit and index entry of the closed store verified, as `rocketstore verify` does."""
    t1 = time.perf_counter()
    report = verify_store(path, cfg)
    if not report["ok"]:
        raise JobFailed(f"verify found {len(report['problems'])} problems, e.g. {report['problems'][:3]}")
    checked = ", ".join(f"{v:,} {k}" for k, v in report["checked"].items() if isinstance(v, int) and v)
    print(f"  verified the store in {time.perf_counter() - t1:.2f} s: {checked}")


def spark(path: str, n: int, parquet: str) -> None:
    """6. the Spark stage: read and aggregate, export to Parquet, rebuild the queues and indexes in parallel."""
    import importlib.util

    missing = [m for m in ("pyspark", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        raise JobFailed(
            f"the Spark stage needs {' and '.join(missing)} (pip install 'rocketstore[spark]'), or run with --no-spark"
        )
    from mainjob_spark import run as spark_stage

    if spark_stage(path, TOPICS, TAGS, n, parquet):
        raise JobFailed("the Spark stage failed")


def _make_room(path: str, what: str, sign: str) -> None:
    """Remove what an earlier run of this job left at `path` (a directory holding `sign`, or an empty one),
    saying so; refuse anything else rather than delete a user's files."""
    if not os.path.exists(path):
        return
    if not os.path.isdir(path) or (os.listdir(path) and not os.path.exists(os.path.join(path, sign))):
        raise ValueError(f"{path} exists and is not a {what} this job wrote: move it or give another --store")
    print(f"removing the {what} an earlier run left at {path}")
    shutil.rmtree(path)


def _count_tag(store, topic, q, tag) -> int:
    count, off = 0, store.min_offset(topic, q)
    hi = store.max_offset(topic, q)
    while off < hi:
        g = store.get("mainjob-tags", topic, q, off, max_count=32, tags=tag)
        if g.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE):
            count += sum(1 for m in g.messages if m.tags == tag)
            off = g.next_begin_offset
        else:
            break
    return count


if __name__ == "__main__":
    sys.exit(main())
