"""`rocketstore rebuild | clean | recover`, run as real processes on copies of golden stores: the rebuilt
ConsumeQueues are RocketMQ's bytes, recovery of the crash image answers RocketMQ's offsets, cleanup deletes
what has expired."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

from tests.golden import goldens as G


def run(*args):
    p = subprocess.run([sys.executable, "-m", "rocketstore.cli", *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def broker_conf(tmp_path, name) -> str:
    path = tmp_path / "broker.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in G.manifest(name)["config_all"].items()), encoding="utf-8")
    return str(path)


def copy_store(tmp_path, name) -> str:
    G.require(name)
    dst = tmp_path / "store"
    shutil.copytree(G.store_dir(name), dst)
    for dirpath, dirs, files in os.walk(dst):  # the golden tree is read-only
        os.chmod(dirpath, 0o755)
        for f in files:
            os.chmod(os.path.join(dirpath, f), 0o644)
    return str(dst)


def sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def test_rebuild_writes_rocketmqs_consume_queues(tmp_path):
    root = copy_store(tmp_path, "store-expired")
    code, out, err = run("rebuild", root, "--yes", "--json", "-c", broker_conf(tmp_path, "store-expired"))
    assert code == 0, err
    report = json.loads(out)
    expected = {
        f["path"]: f["sha256"]
        for f in G.manifest("store-expired-cq-rebuilt")["files"]
        if f["path"].startswith("consumequeue/")
    }
    ours = {
        os.path.relpath(os.path.join(d, f), root): sha(os.path.join(d, f))
        for d, _, fs in os.walk(os.path.join(root, "consumequeue"))
        for f in fs
    }
    assert ours == expected
    answers = G.manifest("store-expired-cq-rebuilt")["answers_after_reopen"]["queues"]
    assert report["messages"] == sum(q["messageTotalInQueue"] for q in answers if q["topic"] != "NoSuchTopic")
    assert not [n for n in os.listdir(root) if n.startswith(".rebuild-")]  # the old files went afterwards


def test_rebuild_refuses_spark_options_it_cannot_use(tmp_path):
    """--master/--spark-conf only mean something to the Spark engine, and a property is KEY=VALUE: a
    mistake is named before anything is dropped or Spark starts."""
    root = copy_store(tmp_path, "store-expired")
    before = {f: sha(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(root, "consumequeue")) for f in fs}
    for args, said in (
        (("--master", "spark://127.0.0.1:7077"), "--master and --spark-conf are for --engine spark"),
        (("--spark-conf", "spark.executor.memory=1g"), "--master and --spark-conf are for --engine spark"),
        (("--engine", "spark", "--spark-conf", "spark.executor.memory"), "expected KEY=VALUE"),
        (("--engine", "spark", "--spark-conf", "=1g"), "expected KEY=VALUE"),
    ):
        code, out, err = run("rebuild", root, "--yes", *args)
        assert code != 0 and said in err, (args, err)
    after = {f: sha(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(root, "consumequeue")) for f in fs}
    assert after == before


def test_recover_reports_the_crash_and_rocketmqs_offsets(tmp_path):
    root = copy_store(tmp_path, "store-abnormal")
    code, out, err = run("recover", root, "--json", "-c", broker_conf(tmp_path, "store-abnormal"))
    assert code == 0, err
    report = json.loads(out)
    answers = G.manifest("store-abnormal")["answers_after_reopen"]
    assert report["lastShutdown"].startswith("crash")
    assert (report["commitLogMinOffset"], report["commitLogMaxOffset"]) == (
        answers["minPhyOffset"],
        answers["maxPhyOffset"],
    )
    assert not os.path.exists(os.path.join(root, "abort"))
    code, out, _ = run("recover", root, "--json", "-c", broker_conf(tmp_path, "store-abnormal"))
    assert code == 0 and json.loads(out)["lastShutdown"] == "clean"


def test_clean_deletes_expired_commitlog_files(tmp_path):
    root = copy_store(tmp_path, "store-v1-basic")
    segs = sorted(os.listdir(os.path.join(root, "commitlog")))
    now = time.time()  # every segment's age is set here: the golden files' own dates are whenever they were packed
    for i, name in enumerate(segs):
        t = now - 100 * 3600 if i < 5 else now
        os.utime(os.path.join(root, "commitlog", name), (t, t))
    code, out, err = run("clean", root, "--json", "-c", broker_conf(tmp_path, "store-v1-basic"))
    assert code == 0, err
    report = json.loads(out)
    assert report["commitLogFilesDeleted"] == 5
    assert report["commitLogMinOffset"] == int(segs[5])
    assert sorted(os.listdir(os.path.join(root, "commitlog"))) == segs[5:]


def test_maintenance_commands_refuse_a_missing_store(tmp_path):
    for cmd in ("rebuild", "clean", "recover"):
        code, _, err = (
            run(cmd, str(tmp_path / "none"), "--yes") if cmd == "rebuild" else run(cmd, str(tmp_path / "none"))
        )
        assert code == 1 and err.startswith("rocketstore: error:") and err.count("\n") == 1, (cmd, err)
