#!/usr/bin/env python
"""The Spark pipeline's benchmark (issue #6): batch read, streaming, sink and rebuild, each against a peer
measured in the same run, one markdown table at the end.

    .venv/bin/python bench/bench_spark.py [--messages N] [--quick] [--only read,stream,sink,rebuild]
                                          [--runs R] [--master local[2]] [--tmpdir DIR]

Store: N messages (default 1,000,000; --quick 200,000) of 100-byte bodies, 2 topics x 4 queues, each with a
tag (8 distinct) and a key, written by put_batch (1,000 a call), default StoreConfig (1 GiB sparse CommitLog
segments), closed before Spark reads it.

read      spark.read.format("rocketstore") into the noop sink (every row and column is produced), the same
          with df.drop("body") (Spark drops it after the scan) and with the option columns naming every
          column but body, and topic + queueOffset (the source builds only those), one aggregate touching
          every column (its count checks the row count), count() of every column and of queueOffset.
          Peers: the library in-process (store.get(..., 32) over every queue: records decoded, and once
          more touching every field a column has), and Spark's own Parquet reader over the same rows
          (written once from the source, then read into noop with and without body, topic + queueOffset,
          count()).
stream    readStream.format("rocketstore"), startingOffsets earliest, trigger(availableNow=True), into
          noop: the whole store in one micro-batch and with maxOffsetsPerTrigger=100,000. Peer: the
          batch read of all columns.
sink      bench_sink.spark_sink (N rows of 100-byte bodies into a new store) against
          bench_sink.library_put_batch of the same rows.
rebuild   bench_rebuild.bench(N): ConsumeQueues + index rebuilt by Spark at local[1] and local[2] against
          the local engine (in-process reput) on the same CommitLog (bench_rebuild writes its own store:
          one topic x 8 queues, tags, a key and a UNIQ_KEY per message, 16 MB segments).

read/stream/sink run on one session of --master (default local[2]); it is stopped before the rebuild, which
starts local[1] and then local[2] itself. Every session's master is checked (sparkContext.master). Each
Spark measurement is the best of --runs (default 2, --quick 1) after one untimed warm-up query (workers
start); the read's queries and their Parquet peers run in rounds, each query next to its peer in every
round; the in-process peers are best of --runs too. Rows/s = rows / wall seconds of the action.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, HERE)

import rocketstore  # noqa: E402
from rocketstore import GetStatus, Message, MessageStore  # noqa: E402

TOPICS = ("BenchA", "BenchB")
QUEUES = 4
BODY = 100
BATCH = 1000
GROUP = "bench-spark"
PER_TRIGGER = 100_000
STAGES = ("read", "stream", "sink", "rebuild")

# every column of the source's schema but body (the option columns)
NO_BODY = (
    "topic, queueId, queueOffset, physicalOffset, msgId, tags, keys, properties, bornTimestamp, "
    "storeTimestamp, bornHost, storeHost, sysFlag, reconsumeTimes, flag, bodyCRC"
)

# an aggregate that needs every column of the source's schema
ALL_COLUMNS_AGG = (
    "count(*) AS n",
    "sum(length(body)) AS body_bytes",
    "max(length(msgId))",
    "max(length(topic))",
    "sum(queueId)",
    "sum(queueOffset)",
    "sum(physicalOffset)",
    "count(tags)",
    "count(keys)",
    "sum(size(properties))",
    "max(bornTimestamp)",
    "max(storeTimestamp)",
    "max(length(bornHost))",
    "max(length(storeHost))",
    "sum(sysFlag)",
    "sum(reconsumeTimes)",
    "sum(flag)",
    "sum(cast(bodyCRC AS BIGINT))",
)


class Table:
    """Rows of the final table: (measurement, rows, seconds, peer label, peer rows, peer seconds, note)."""

    def __init__(self):
        self.rows: list[tuple] = []

    def add(
        self,
        what: str,
        rows: int,
        secs: float | None,
        peer: str = "",
        peer_rows: int = 0,
        peer_secs: float | None = None,
        note: str = "",
    ):
        self.rows.append((what, rows, secs, peer, peer_rows, peer_secs, note))
        rate = f"{rows / secs:,.0f} rows/s" if secs else "-"
        print(f"  {what:<46} {secs if secs is not None else float('nan'):8.2f} s  {rate}", flush=True)

    def markdown(self) -> str:
        out = ["| measurement | rows | s | rows/s | peer | peer rows/s | ratio |", "|---|---:|---:|---:|---|---:|---:|"]
        for what, rows, secs, peer, prow, psecs, note in self.rows:
            rate = rows / secs if secs else None
            prate = prow / psecs if psecs else None
            ratio = f"{rate / prate:.2f}x" if rate and prate else ""
            out.append(
                f"| {what}{' (' + note + ')' if note else ''} | {rows:,} | "
                f"{secs:.2f} | {_k(rate)} | {peer} | {_k(prate)} | {ratio} |"
                if secs is not None
                else f"| {what} | {rows:,} | - | - | {peer} | {_k(prate)} | {note} |"
            )
        return "\n".join(out)


def _k(rate: float | None) -> str:
    if not rate:
        return ""
    return f"{rate / 1e6:.2f} M" if rate >= 1e6 else f"{rate / 1e3:.0f} k"


def best(fn, runs: int) -> float:
    return min(fn() for _ in range(runs))


def alternating(actions: dict, runs: int) -> dict[str, float]:
    """Each action once untimed (a warm-up), then `runs` rounds of each in turn; the best seconds of each."""
    for action in actions.values():
        action()
    times: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(runs):
        for name, action in actions.items():
            times[name].append(timed(action))
    return {name: min(v) for name, v in times.items()}


# ---------------------------------------------------------------- the store


def fill(root: str, n: int) -> float:
    """N messages, 2 topics x 4 queues, a put_batch of 1,000 per (topic, queue) in turn; returns seconds."""
    t = time.perf_counter()
    with MessageStore.open(root) as store:
        for b, start in enumerate(range(0, n, BATCH)):
            topic, queue = TOPICS[b % 2], (b // 2) % QUEUES
            msgs = [
                Message(topic, f"{i:012d}".encode().ljust(BODY, b"x"), tags=f"T{i % 8}", keys=[f"order-{i}"])
                for i in range(start, min(start + BATCH, n))
            ]
            r = store.put_batch(msgs, queue)
            assert r.ok, r
        assert sum(store.max_offset(t_, q) for t_ in TOPICS for q in range(QUEUES)) == n
    return time.perf_counter() - t


def library_get(root: str, touch: bool) -> tuple[int, float]:
    """store.get(group, topic, queue, offset, 32) over every queue of a read-only store; with touch, every
    field a Spark column has is read from each message (properties parsed, msgId and hosts formatted)."""
    with MessageStore.open(root, read_only=True) as store:
        got = 0
        t = time.perf_counter()
        for topic, queues in store.topics().items():
            for q in queues:
                off = store.min_offset(topic, q)
                while True:
                    g = store.get(GROUP, topic, q, off, 32)
                    if g.status is not GetStatus.FOUND:
                        break
                    if touch:
                        for m in g.messages:
                            (
                                m.topic,
                                m.queue_id,
                                m.queue_offset,
                                m.physical_offset,
                                m.msg_id,
                                m.tags,
                                m.keys,
                                len(m.body),
                                m.properties,
                                m.born_timestamp,
                                m.store_timestamp,
                                m.born_host,
                                m.store_host,
                                m.sys_flag,
                                m.reconsume_times,
                                m.flag,
                                m.body_crc,
                            )
                    got += len(g.messages)
                    off = g.next_begin_offset
        return got, time.perf_counter() - t


# ---------------------------------------------------------------- Spark


def session(master: str, app: str = "bench-spark"):
    import rocketstore.spark

    spark = rocketstore.spark.session(master, app)
    actual = spark.sparkContext.master
    if actual != master:
        raise RuntimeError(f"asked for a {master} session, got {actual} (a session still running?)")
    return spark


def timed(action) -> float:
    t = time.perf_counter()
    action()
    return time.perf_counter() - t


def source(spark, root: str, **options):
    reader = spark.read.format("rocketstore").option("path", root).option("topics", ",".join(TOPICS))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def noop(df) -> None:
    df.write.format("noop").mode("overwrite").save()


def check_agg(df, n: int) -> None:
    r = df.selectExpr(*ALL_COLUMNS_AGG).collect()[0]
    if r["n"] != n or r["body_bytes"] != n * BODY:
        raise RuntimeError(f"aggregate saw {r['n']} rows / {r['body_bytes']} body bytes, expected {n} / {n * BODY}")


def stage_read(spark, root: str, work: str, n: int, runs: int, table: Table) -> dict[str, tuple[float, float]]:
    """Returns, per read the targets table lists, the best seconds of the source and of Parquet on the same
    rows and columns ("all columns" first: the stream's peer)."""
    df = source(spark, root)
    print("read: warm-up (untimed) ...", flush=True)
    noop(df)
    cnt = df.count()
    if cnt != n:
        raise RuntimeError(f"count() = {cnt}, expected {n}")

    got, _ = library_get(root, False)
    assert got == n, (got, n)
    lib_plain = best(lambda: library_get(root, False)[1], runs)
    lib_touch = best(lambda: library_get(root, True)[1], runs)

    pq = os.path.join(work, "parquet")
    s_pq_write = timed(lambda: df.write.mode("overwrite").parquet(pq))
    pdf = spark.read.parquet(pq)
    check_agg(pdf, n)
    # Python data sources get no pruning from Spark: the columns a query needs are named (option columns)
    nobody = source(spark, root, columns=NO_BODY)
    two = source(spark, root, columns="topic, queueOffset")
    one = source(spark, root, columns="queueOffset")
    # the `tags` option, tested on the ConsumeQueue's tagsCode: plans, scans the ConsumeQueue, reads no record
    # (a df.where is applied by Spark after the source has read every record: the source takes no filter)
    none = source(spark, root, tags="NoSuchTag")
    # each query next to its Parquet peer, round after round: on a shared machine the load moves between
    # rounds, and a ratio of two measurements taken apart measures the load as much as the reads
    t = alternating(
        {
            "all": lambda: noop(df),
            "p_all": lambda: noop(pdf),
            "nobody": lambda: noop(df.drop("body")),
            "pruned": lambda: noop(nobody),
            "p_nobody": lambda: noop(pdf.drop("body")),
            "two": lambda: noop(two),
            "p_two": lambda: noop(pdf.select("topic", "queueOffset")),
            "agg": lambda: check_agg(df, n),
            "p_agg": lambda: check_agg(pdf, n),
            "count": df.count,
            "count1": one.count,
            "p_count": pdf.count,
            "plan": lambda: noop(none),
        },
        runs,
    )
    s_all, s_nobody, s_pruned, s_two, s_agg = t["all"], t["nobody"], t["pruned"], t["two"], t["agg"]
    s_count, s_count1, s_plan = t["count"], t["count1"], t["plan"]
    p_all, p_nobody, p_two, p_agg, p_count = t["p_all"], t["p_nobody"], t["p_two"], t["p_agg"], t["p_count"]

    src = "rocketstore source"
    table.add("batch read, all columns -> noop", n, s_all, "library get(32), every field", n, lib_touch)
    table.add("  same", n, s_all, "Parquet, all columns -> noop", n, p_all)
    table.add(
        "batch read, drop(body) -> noop",
        n,
        s_nobody,
        "library get(32), records decoded",
        n,
        lib_plain,
        note="no pruning: body still built",
    )
    table.add("  same", n, s_nobody, "Parquet, drop(body) -> noop", n, p_nobody, note="Parquet prunes body")
    table.add(
        "batch read, every column but body (option columns) -> noop",
        n,
        s_pruned,
        "Parquet, drop(body) -> noop",
        n,
        p_nobody,
    )
    table.add(
        "batch read, topic and queueOffset (option columns) -> noop",
        n,
        s_two,
        "Parquet, select(topic, queueOffset) -> noop",
        n,
        p_two,
    )
    table.add("batch read, aggregate over every column", n, s_agg, "Parquet, same aggregate", n, p_agg)
    table.add("batch read, count()", n, s_count, "Parquet, count()", n, p_count, note=f"{src}: every column read")
    table.add("batch read, count() of option columns = queueOffset", n, s_count1, "Parquet, count()", n, p_count)
    table.add(
        "batch query reading no record (option tags = 'NoSuchTag')",
        n,
        s_plan,
        "",
        note="info: planning + ConsumeQueue scan, the fixed cost in every row above",
    )
    table.add(f"{src} -> write Parquet", n, s_pq_write, "", note="info, once")
    table.add("library get(32), records decoded", n, lib_plain, "", note="peer")
    table.add("library get(32), every field", n, lib_touch, "", note="peer")
    return {
        "all columns -> noop": (s_all, p_all),
        "every column but body -> noop": (s_pruned, p_nobody),
        "topic, queueOffset -> noop": (s_two, p_two),
        "aggregate over every column": (s_agg, p_agg),
        "count() (option columns = queueOffset)": (s_count1, p_count),
    }


def stream_once(spark, root: str, work: str, n: int, per_trigger: int | None) -> tuple[float, int]:
    reader = (
        spark.readStream.format("rocketstore")
        .option("path", root)
        .option("topics", ",".join(TOPICS))
        .option("startingOffsets", "earliest")
    )
    if per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(per_trigger))
    ckpt = tempfile.mkdtemp(prefix="ckpt-", dir=work)
    t = time.perf_counter()
    q = reader.load().writeStream.format("noop").option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    q.awaitTermination()
    secs = time.perf_counter() - t
    progress = [p for p in q.recentProgress if p["numInputRows"]]
    spent = {}
    for p in progress:
        for k, v in p["durationMs"].items():
            spent[k] = spent.get(k, 0) + v
    print(
        f"    stream ({per_trigger or 'no limit'}): {secs:.2f} s wall, durationMs summed over "
        f"{len(progress)} micro-batches: {json.dumps(spent, sort_keys=True)}",
        flush=True,
    )
    rows = sum(p["numInputRows"] for p in progress)
    shutil.rmtree(ckpt, ignore_errors=True)
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    if rows != n:
        raise RuntimeError(f"stream delivered {rows} rows, expected {n}")
    return secs, len(progress)


def stage_stream(spark, root: str, work: str, n: int, runs: int, batch_secs: float | None, table: Table):
    print("stream: warm-up (untimed) ...", flush=True)
    stream_once(spark, root, work, n, None)
    for per in (None, PER_TRIGGER):
        results = [stream_once(spark, root, work, n, per) for _ in range(runs)]
        secs, batches = min(results)
        what = "stream availableNow -> noop, " + (f"maxOffsetsPerTrigger {per:,}" if per else "no limit")
        table.add(
            what,
            n,
            secs,
            "batch read, all columns -> noop" if batch_secs else "",
            n,
            batch_secs,
            note=f"{batches} micro-batch{'es' if batches != 1 else ''}",
        )


def stage_sink(spark, work: str, n: int, runs: int, table: Table):
    import bench_sink

    print("sink: warm-up (untimed) ...", flush=True)
    bench_sink.spark_sink(spark, os.path.join(work, "sink-warmup"), 1000)

    def one_sink():
        d = os.path.join(work, "sink")
        shutil.rmtree(d, ignore_errors=True)
        secs = bench_sink.spark_sink(spark, d, n)
        assert bench_sink.count(d) == n
        shutil.rmtree(d, ignore_errors=True)
        return secs

    def one_lib():
        d = os.path.join(work, "lib")
        shutil.rmtree(d, ignore_errors=True)
        secs = bench_sink.library_put_batch(d, n)
        assert bench_sink.count(d) == n
        shutil.rmtree(d, ignore_errors=True)
        return secs

    s_sink = best(one_sink, runs)
    s_lib = best(one_lib, runs)
    table.add(
        "sink: df.write.format(rocketstore) (bench_sink)",
        n,
        s_sink,
        "library put_batch(1,000)",
        n,
        s_lib,
        note="topic + body columns",
    )


def stage_rebuild(n: int, runs: int, table: Table) -> dict[str, float]:
    import bench_rebuild
    import rocketstore.spark

    seen = []
    original = rocketstore.spark.session

    def checked(master="local[*]", app_name="rocketstore", conf=None):
        spark = original(master, app_name, conf)
        seen.append((master, spark.sparkContext.master))
        if spark.sparkContext.master != master:
            raise RuntimeError(f"asked for {master}, got {spark.sparkContext.master}")
        return spark

    rocketstore.spark.session = checked
    try:
        times = bench_rebuild.bench(messages=n, runs=runs, masters=("local[1]", "local[2]"))
    finally:
        rocketstore.spark.session = original
    print(f"rebuild: sessions asked / in effect: {seen}")
    for name, secs in times.items():
        if name == "local":
            table.add("rebuild: local engine (in-process reput)", n, secs, "", note="peer")
        else:
            table.add(f"rebuild: Spark {name.split()[-1]}", n, secs, "local engine", n, times["local"])
    return times


def targets(master: str, n: int, read: dict | None, rebuild: dict[str, float] | None) -> str:
    """The Spark targets (issues #15, #30), from the rows above: each read against Parquet's rate on the same
    rows and columns, the rebuild at local[1] and local[2] against the local engine."""
    out = [
        "| target | rocketstore rows/s | peer rows/s | ratio | target | met |",
        "|---|---:|---:|---:|---|---|",
    ]
    for what, (secs, peer) in (read or {}).items():
        ours, parquet = n / secs, n / peer
        out.append(
            f"| Spark batch read, {what}, {master} | {_k(ours)} | {_k(parquet)} (Parquet, same rows and columns) | "
            f"{ours / parquet:.2f}x | >= Parquet's rate | {'yes' if ours >= parquet else 'no'} |"
        )
    for name, secs in (rebuild or {}).items():
        if name != "local" and "local" in rebuild:
            ours, local = n / secs, n / rebuild["local"]
            out.append(
                f"| Spark rebuild {name.split()[-1]} vs local engine | {_k(ours)} | {_k(local)} (local engine) | "
                f"{ours / local:.2f}x | >= the local engine | {'yes' if ours >= local else 'no'} |"
            )
    return "\n".join(out) if len(out) > 2 else ""


# ---------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=None, help="default 1,000,000; --quick: 200,000")
    ap.add_argument("--quick", action="store_true", help="200,000 messages, 1 run")
    ap.add_argument("--only", default=None, help=f"comma-separated subset of {','.join(STAGES)}")
    ap.add_argument("--runs", type=int, default=None, help="best of R (default 2; --quick 1)")
    ap.add_argument("--master", default="local[2]", help="the session of read/stream/sink (default local[2])")
    ap.add_argument("--tmpdir", default=None)
    a = ap.parse_args(argv)
    n = a.messages or (200_000 if a.quick else 1_000_000)
    runs = a.runs or (1 if a.quick else 2)
    want = STAGES
    if a.only:
        want = tuple(s.strip() for s in a.only.split(",") if s.strip())
        bad = [s for s in want if s not in STAGES]
        if bad:
            ap.error(f"--only: unknown {', '.join(bad)} (choose from {', '.join(STAGES)})")
    logging.basicConfig(level=logging.ERROR)

    import pyspark
    from bench_store import code_version

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    started = datetime.datetime.now(datetime.timezone.utc)
    header = (
        f"{started:%Y-%m-%d %H:%M} UTC, {platform.node()}, {cores} cores (os.cpu_count {os.cpu_count()}), "
        f"load {os.getloadavg()[0]:.1f}, python {sys.version.split()[0]}, pyspark {pyspark.__version__}\n"
        f"rocketstore {rocketstore.__version__} from {code_version()}\n"
        f"{n:,} messages of {BODY} B, {len(TOPICS)} topics x {QUEUES} queues, best of {runs}; "
        f"read/stream/sink on {a.master}"
    )
    print(header, flush=True)
    t0 = time.perf_counter()
    table = Table()
    work = tempfile.mkdtemp(prefix="bench-spark-", dir=a.tmpdir)
    try:
        spark = None
        batch_secs = None
        read = rebuilt = None
        if {"read", "stream", "sink"} & set(want):
            spark = session(a.master)
            print(f"session: {spark.sparkContext.master}, defaultParallelism {spark.sparkContext.defaultParallelism}")
        try:
            if {"read", "stream"} & set(want):
                root = os.path.join(work, "store")
                secs = fill(root, n)
                with MessageStore.open(root, read_only=True) as s:
                    size = s.max_physical_offset - s.min_physical_offset
                print(
                    f"store: {n:,} messages written in {secs:.1f} s ({n / secs:,.0f} msgs/s, put_batch with "
                    f"tags and keys), CommitLog {size / 1e6:.0f} MB",
                    flush=True,
                )
                if "read" in want:
                    read = stage_read(spark, root, work, n, runs, table)
                    batch_secs = read["all columns -> noop"][0]
                if "stream" in want:
                    stage_stream(spark, root, work, n, runs, batch_secs, table)
            if "sink" in want:
                stage_sink(spark, work, n, runs, table)
        finally:
            if spark is not None:
                spark.stop()
        if "rebuild" in want:
            rebuilt = stage_rebuild(n, runs, table)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(header.replace("\n", "  \n"))
    print()
    print(table.markdown())
    goals = targets(a.master, n, read, rebuilt)
    if goals:
        print()
        print(goals)
    print(f"\nwall time {time.perf_counter() - t0:.0f} s, load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
