"""The Spark sink's rows/s against the library's put_batch of the same rows in-process.

    .venv/bin/python bench/bench_sink.py [N]        # N rows of 100-byte bodies (default 300,000), local[2]

The sink validates and stages rows in the tasks, then the commit puts them with put_batch on the driver:
the ratio says what Spark (JVM -> Arrow -> Python tasks -> staging file -> commit) costs on top."""

import os
import shutil
import sys
import tempfile
import time

from rocketstore import Message, MessageStore, StoreConfig

BODY = 100
CONFIG = dict(mapped_file_size_commit_log=256 << 20)


def spark_sink(spark, root: str, n: int) -> float:
    from pyspark.sql import functions as F

    df = spark.range(n, numPartitions=2).select(
        F.lit("Bench").alias("topic"), F.expr(f"cast(rpad(cast(id as string), {BODY}, 'x') as binary)").alias("body")
    )
    start = time.perf_counter()
    (
        df.write.format("rocketstore")
        .mode("append")
        .option("path", root)
        .option("mappedFileSizeCommitLog", str(CONFIG["mapped_file_size_commit_log"]))
        .save()
    )
    return time.perf_counter() - start


def library_put_batch(root: str, n: int, chunk: int = 1000) -> float:
    bodies = [str(i).ljust(BODY, "x").encode() for i in range(n)]  # made before the clock starts
    start = time.perf_counter()
    with MessageStore.open(root, StoreConfig(**CONFIG)) as store:
        for i in range(0, n, chunk):
            msgs = [Message("Bench", b) for b in bodies[i : i + chunk]]
            r = store.put_batch(msgs)
            assert r.ok, r
        store.flush()
    return time.perf_counter() - start


def count(root: str) -> int:
    with MessageStore.open(root, StoreConfig(**CONFIG), read_only=True) as s:
        return sum(s.max_offset(t, q) for t, qs in s.topics().items() for q in qs)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    import rocketstore.spark

    spark = rocketstore.spark.session("local[2]", "bench-sink")
    work = tempfile.mkdtemp(prefix="bench-sink-")
    try:
        spark_sink(spark, os.path.join(work, "warmup"), 1000)  # JVM, workers, the first Python job
        t_sink = spark_sink(spark, os.path.join(work, "sink"), n)
        assert count(os.path.join(work, "sink")) == n
        t_lib = library_put_batch(os.path.join(work, "lib"), n)
        assert count(os.path.join(work, "lib")) == n
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    sink_rate, lib_rate = n / t_sink, n / t_lib
    print(f"{n:,} rows of {BODY}-byte bodies, local[2]")
    print(f"  Spark sink          {t_sink:7.2f} s  {sink_rate:12,.0f} rows/s")
    print(f"  library put_batch   {t_lib:7.2f} s  {lib_rate:12,.0f} rows/s")
    print(f"  sink / library      {sink_rate / lib_rate:7.2f}")


if __name__ == "__main__":
    main()
