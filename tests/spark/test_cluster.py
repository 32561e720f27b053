"""The source, the sink, the rebuild and the archive on a Spark standalone cluster: a master and two workers started from
the PySpark distribution on loopback, each executor a JVM of its own with its own Python workers, as users
run rocketstore once one machine is not enough. The driver is a process of its own (cluster_job.py); its
results are checked against the same expectations as the local-mode tests: store.get's answers, the rows
read back through the ConsumeQueues, the local engine's rebuilt files byte for byte, what was put (each
record of the closed segments once in the archive)."""

import json
import os
import pickle
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from rocketstore import MessageStore
from tests.spark.test_rebuild import OPTIONS, assert_rebuilt_as_locally, cleaned_store
from tests.rebuild.test_rebuild import assert_same_rebuild
from tests.spark.test_sink import assert_read_back, sink_rows
from tests.spark.test_archive import closed_records, put_messages, segments
from tests.spark.test_source import N, _expected, make_source_store
from rocketstore.broker.address import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SRC = os.path.join(REPO, "src")
WORKERS = 2


def spark_env(base):
    import pyspark

    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    conf = base / "conf"  # no spark-defaults.conf / spark-env.sh from anywhere else
    conf.mkdir(exist_ok=True)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY_")}  # a JVM of its own
    return {
        **inherited,
        "SPARK_HOME": home,
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(base / "local"),
        "SPARK_DAEMON_MEMORY": "256m",
        # every JVM here (daemons, driver, executors) runs short jobs: startup outweighs peak speed, so
        # the quick compiler alone (half the CPU time of the test on two cores)
        "JDK_JAVA_OPTIONS": "-XX:TieredStopAtLevel=1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # the master's REST submission server would take port 6066, whoever else has it
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }


def kill_group(p, grace=20):
    """SIGTERM to the process group (a Worker and the executors it started), SIGKILL if it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(grace)
            return
        except subprocess.TimeoutExpired:
            pass


def tail(path, n=3000):
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master and two workers (one core, 1 GB each) on 127.0.0.1: yields (master URL, env for
    a driver, base dir, the master's web UI port); all of them are killed, process group by process group, at teardown."""
    base = tmp_path_factory.mktemp("cluster")
    env = spark_env(base)
    spark_class = os.path.join(env["SPARK_HOME"], "bin", "spark-class")
    port, ui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    commands = [
        (
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
        )
    ]
    for i in range(WORKERS):
        (base / f"work{i}").mkdir()
        commands.append(
            (
                f"worker{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    "0",
                    "--work-dir",
                    str(base / f"work{i}"),
                ],
            )
        )
    procs, logs = [], []
    try:
        for name, args in commands:
            log = base / f"{name}.log"
            with open(log, "wb") as f:
                procs.append(
                    subprocess.Popen(
                        [spark_class, *args], stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True
                    )
                )
            logs.append(log)
        deadline = time.monotonic() + 180
        alive = 0
        while alive < WORKERS:
            for p, log in zip(procs, logs):
                assert p.poll() is None, f"{log.name} exited ({p.returncode}):\n{tail(log)}"
            assert time.monotonic() < deadline, f"{alive} of {WORKERS} workers registered:\n" + "\n".join(
                tail(log, 1500) for log in logs
            )
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as r:
                    alive = json.load(r)["aliveworkers"]
            except OSError:
                pass  # the master's web UI is not up yet
        yield url, env, base, ui
    finally:
        for p in reversed(procs):
            kill_group(p)


def read_archive(dest):
    """The archive's rows as a plain Parquet reader (pyarrow) sees them, sorted: a row twice shows twice."""
    import pyarrow.dataset as ds

    columns = ["physicalOffset", "topic", "queueId", "queueOffset", "body", "date", "segment"]
    table = ds.dataset(dest, format="parquet", partitioning="hive").to_table(columns=columns)
    rows = zip(*(table.column(c).to_pylist() for c in columns))
    # a prepared or rolled-back record has no queue offset (none kept here: not --include-prepared)
    return sorted((p, t, q, o, b, str(d), s) for p, t, q, o, b, d, s in rows)


def run_driver(cluster, spec):
    url, env, base, _ = cluster
    spec_path = base / "spec.json"
    spec_path.write_text(json.dumps(spec))
    env = {**env, "PYTHONPATH": os.pathsep.join([SRC, REPO]), "EXECUTOR_PYTHONPATH": SRC}
    log = base / "driver.log"
    with open(log, "wb") as f:
        p = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "cluster_job.py"), url, str(spec_path)],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
    try:
        code = p.wait(600)
    finally:
        kill_group(p, grace=10)  # the driver's JVM too, should it outlive its Python
    assert code == 0, f"the driver failed ({code}):\n{tail(log, 6000)}"


def test_source_sink_rebuild_and_archive_on_a_standalone_cluster(cluster, tmp_path):
    source = make_source_store(str(tmp_path / "source"))
    sink = tmp_path / "sink"
    sink.mkdir()
    rebuilt, ref, cfg = cleaned_store(tmp_path)
    archived = str(tmp_path / "archived")
    put = put_messages(archived, 0, 900)  # test_archive's: system topics, transactions, across a UTC midnight
    out = tmp_path / "out"
    out.mkdir()
    run_driver(
        cluster,
        {
            "source": source,
            "sink": str(sink),
            "rebuild": rebuilt,
            "out": str(out),
            "rebuildOptions": {k: str(v) for k, v in OPTIONS.items()},
            "archive": archived,
            "archiveTo": str(tmp_path / "archive"),
        },
    )

    # the tasks ran in two executor processes, started by the two workers, importing this tree's rocketstore
    ran = json.loads((out / "executors.json").read_text())
    assert ran["master"] == cluster[0]
    tasks = ran["tasks"]
    assert {t["executor"] for t in tasks} == {"0", "1"}
    assert len({t["workDir"] for t in tasks}) == WORKERS
    assert all(t["workDir"].startswith(str(cluster[2])) for t in tasks)
    assert all(ran["driverPid"] not in t["ancestors"] for t in tasks)
    assert {t["rocketstore"] for t in tasks} == {os.path.join(SRC, "rocketstore", "__init__.py")}

    # source: what store.get answers, every message once
    with open(out / "source.pkl", "rb") as f:
        read = pickle.load(f)
    assert read["partitions"] >= 6
    want = sorted(r for t in ("Orders", "Pay") for q in range(4) for r in _expected(source, t, q))
    assert len(want) == N
    assert sorted(read["rows"]) == want

    # sink: every row once, field by field, through the ConsumeQueues
    assert_read_back(sink_rows(), str(sink))

    # rebuild: the local engine's files, byte for byte
    assert_rebuilt_as_locally(json.loads((out / "rebuild.json").read_text()), rebuilt, ref, cfg)

    # archive: every closed segment, each record once and as put (read back by pyarrow, not Spark)
    summary = json.loads((out / "archive.json").read_text())
    want = closed_records(archived, put)
    assert (summary["segments"], summary["records"]) == (len(segments(archived)) - 1, len(want))
    assert read_archive(str(tmp_path / "archive")) == sorted(
        (r["physicalOffset"], r["topic"], r["queueId"], r["queueOffset"], r["body"], r["date"], r["segment"])
        for r in want
    )


def test_cli_rebuild_on_the_standalone_cluster(cluster, tmp_path):
    """`rocketstore rebuild --engine spark --master URL`: the operator's way to the same job on a cluster; its
    files are the local engine's byte for byte, and the master saw the CLI's application run."""
    url, env, base, ui = cluster
    rebuilt, ref, cfg = cleaned_store(tmp_path)
    conf = tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in OPTIONS.items()))
    props = {"spark.executorEnv.PYTHONPATH": SRC, "spark.executor.memory": "512m", "spark.cores.max": "2"}
    argv = [sys.executable, "-m", "rocketstore.cli", "rebuild", rebuilt, "--engine", "spark", "--master", url]
    argv += [a for k, v in props.items() for a in ("--spark-conf", f"{k}={v}")]
    p = subprocess.run(
        [*argv, "--yes", "--json", "-c", str(conf)],
        env={**env, "PYTHONPATH": SRC},
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-6000:]
    summary = json.loads(p.stdout)
    assert_same_rebuild(rebuilt, ref)
    with MessageStore.open(ref, cfg, read_only=True) as s:
        assert (summary["queues"], summary["indexFiles"], summary["commitLogMaxOffset"]) == (
            len(s.consume_queues()),
            s.index_file_count(),
            s.max_physical_offset,
        )
    with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as r:
        apps = json.load(r)
    assert [a["name"] for a in apps["completedapps"] + apps["activeapps"]].count("rocketstore") == 1
