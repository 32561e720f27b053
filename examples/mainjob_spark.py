"""The main job's Spark stage: read the topics through the ConsumeQueue, aggregate by tag, export to
Parquet, rebuild the ConsumeQueues and index files with Spark and check them against what was there.

Expectations come from how the main job wrote the store (message j has tag TAGS[j % 3]), not from Spark.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time


def _queue_digest(root: str) -> str:
    """One hash over every ConsumeQueue file's name and bytes."""
    h = hashlib.sha256()
    base = os.path.join(root, "consumequeue")
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            h.update(os.path.relpath(path, base).encode())
            with open(path, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def run(store: str, topics, tags, n: int, parquet_dir: str) -> int:
    from rocketstore.spark import rebuild, session
    from rocketstore.maintenance.verify import verify_store

    t0 = time.perf_counter()
    spark = session("local[*]", "rocketstore-mainjob")
    try:
        print(f"  Spark {spark.version} session ({spark.sparkContext.master}) up in {time.perf_counter() - t0:.1f} s")
        # the first query starts the Python workers (a few seconds): timed on its own
        t1 = time.perf_counter()
        spark.read.format("rocketstore").option("path", store).option("topics", topics[0]).option(
            "endingOffsets", f'{{"{topics[0]}": {{"0": 1}}}}'
        ).load().count()
        print(f"  first Spark query (Python workers starting) took {time.perf_counter() - t1:.1f} s")
        # 1. read every topic through the ConsumeQueue and count messages per tag
        t1 = time.perf_counter()
        df = spark.read.format("rocketstore").option("path", store).option("topics", ",".join(topics)).load()
        counts = {r["tags"]: r["count"] for r in df.groupBy("tags").count().collect()}
        t_read = time.perf_counter() - t1
        expected = {tag: len(range(k, n, len(tags))) for k, tag in enumerate(tags)}
        if counts != expected:
            print(f"Spark counted {counts} messages per tag, expected {expected}", file=sys.stderr)
            return 1
        print(
            f"  Spark read {n:,} messages and counted them by tag in {t_read:.2f} s ({n / t_read / 1e3:,.0f} k "
            f"msg/s): " + ", ".join(f"{t} {c:,}" for t, c in sorted(counts.items()))
        )
        # 2. export one tag to Parquet and read it back
        t1 = time.perf_counter()
        shutil.rmtree(parquet_dir, ignore_errors=True)
        df.where(f"tags = '{tags[0]}'").select(
            "topic", "queueId", "queueOffset", "msgId", "keys", "body", "storeTimestamp"
        ).write.parquet(parquet_dir)
        exported = spark.read.parquet(parquet_dir).count()
        if exported != expected[tags[0]]:
            print(f"the Parquet export holds {exported:,} rows, expected {expected[tags[0]]:,}", file=sys.stderr)
            return 1
        print(
            f"  exported the {exported:,} '{tags[0]}' messages to Parquet ({parquet_dir}) in "
            f"{time.perf_counter() - t1:.2f} s"
        )
        # 3. rebuild the ConsumeQueues and index files with Spark: the same bytes as reput wrote
        before = _queue_digest(store)
        t1 = time.perf_counter()
        summary = rebuild(store, spark)
        t_rebuild = time.perf_counter() - t1
    finally:
        spark.stop()
    if _queue_digest(store) != before:
        print("the Spark rebuild wrote ConsumeQueue files that differ from reput's", file=sys.stderr)
        return 1
    report = verify_store(store)
    if not report["ok"]:
        print(f"verify after the Spark rebuild: {report['problems'][:3]}", file=sys.stderr)
        return 1
    print(
        f"  rebuilt {summary['queues']} ConsumeQueues ({summary['messages']:,} units, byte-identical to reput's) "
        f"and {summary['indexFiles']} index file(s) with Spark in {t_rebuild:.2f} s; verify passes"
    )
    return 0
