"""The Spark driver of test_cluster.py, run in a process of its own (a process holds one SparkContext, and
the other Spark tests share a local one): on the standalone cluster whose master URL it is given, it reads a
store with the rocketstore source, writes rows into a store with the sink, rebuilds a store's queues and
index files and archives a store's closed segments; what it got goes to files that the test checks against
the store's own answers.

    python tests/spark/cluster_job.py spark://127.0.0.1:PORT spec.json

spec.json: {"source": store, "sink": store, "rebuild": store, "rebuildOptions": {...}, "archive": store,
"archiveTo": dir, "out": dir}. The
executors import rocketstore from the PYTHONPATH this process runs with (spark.executorEnv.PYTHONPATH).
"""

import json
import os
import pickle
import sys
import time

import rocketstore.spark
from tests.spark.test_sink import SCHEMA, sink_rows, write
from tests.spark.test_source import _read, _rows


def executor_of_this_task(_):
    """Where this task ran: the executor JVM above this Python worker (its --executor-id and its Worker's
    --work-dir, read from /proc), and which rocketstore it imported."""
    import rocketstore

    found = {"pid": os.getpid(), "rocketstore": rocketstore.__file__, "ancestors": []}
    pid = os.getppid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0")]
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
        found["ancestors"].append(pid)
        for flag, key in (("--executor-id", "executor"), ("--work-dir", "workDir")):
            if flag in argv[:-1]:
                found[key] = argv[argv.index(flag) + 1]
        pid = parent
    yield found


def said(what, since):
    print(f"{what}: {time.monotonic() - since:.1f} s", flush=True)  # in the driver's log, should it fail
    return time.monotonic()


def main(master, spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    out = spec["out"]
    t = time.monotonic()
    spark = rocketstore.spark.session(
        master,
        "rocketstore-cluster-test",
        conf={
            "spark.executorEnv.PYTHONPATH": os.environ["EXECUTOR_PYTHONPATH"],
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            # start once both executors are there: every job below then has two processes to run in
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        },
    )
    t = said("session with two executors", t)
    try:
        sc = spark.sparkContext
        tasks = sc.parallelize(range(8), 8).mapPartitions(executor_of_this_task).collect()
        with open(os.path.join(out, "executors.json"), "w") as f:
            json.dump({"master": sc.master, "driverPid": os.getpid(), "tasks": tasks}, f)
        t = said("where tasks run", t)

        df = _read(spark, spec["source"], topics="Orders,Pay", minPartitions=6)
        source = {"partitions": df.rdd.getNumPartitions(), "rows": _rows(df)}
        with open(os.path.join(out, "source.pkl"), "wb") as f:
            pickle.dump(source, f)
        t = said("source", t)

        write(spark.createDataFrame(sink_rows(), SCHEMA).repartition(3), spec["sink"])
        t = said("sink", t)

        summary = rocketstore.spark.rebuild(spec["rebuild"], spark, **spec["rebuildOptions"])
        with open(os.path.join(out, "rebuild.json"), "w") as f:
            json.dump(summary, f)
        t = said("rebuild", t)

        # two segments a Spark job: several jobs, each a task per segment, over the two executors
        summary = rocketstore.spark.archive(spec["archive"], spec["archiveTo"], spark, segments_per_job=2)
        with open(os.path.join(out, "archive.json"), "w") as f:
            json.dump(summary, f)
        said("archive", t)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
