"""rocketstore.spark.rebuild: the parallel rebuild job writes what the local engine (reput on open) writes,
byte for byte (ConsumeQueues, batch ConsumeQueues, checkpoint; index files by content, their names being
wall-clock times), and on a golden store the ConsumeQueues RocketMQ itself rebuilt."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import rocketstore.spark
from rocketstore import MessageStore
from tests.golden import goldens as G
from tests.rebuild.test_rebuild import SMALL, assert_same_rebuild, index_contents, make_store, rebuild_locally, tree
from tests.rebuild.test_rebuild_safety import assert_sizes_kept, make_sized_store

OPTIONS = {
    "mappedFileSizeCommitLog": SMALL["mapped_file_size_commit_log"],
    "mappedFileSizeConsumeQueue": SMALL["mapped_file_size_consume_queue"],
    "mapperFileSizeBatchConsumeQueue": SMALL["mapped_file_size_batch_consume_queue"],
    "maxHashSlotNum": SMALL["max_hash_slot_num"],
    "maxIndexNum": SMALL["max_index_num"],
}


def golden_copy(tmp_path, name, where):
    G.require(name)
    dst = tmp_path / where
    shutil.copytree(G.store_dir(name), dst)
    for d, _, files in os.walk(dst):  # the golden tree is read-only
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    return str(dst)


def broker_conf(tmp_path, name):
    path = tmp_path / f"{name}.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in G.manifest(name)["config_all"].items()), encoding="utf-8")
    return str(path)


def cleaned_store(tmp_path):
    """Several topics and queues, tags, keys, transactions, a delay topic, a batch-CQ topic, several
    CommitLog segments and index files, the first segments deleted by cleanup, one topic deleted (its records
    stay in the CommitLog); and a copy of it rebuilt by the local engine (the reference). Returns (store,
    reference, config)."""
    root = str(tmp_path / "store")
    cfg = make_store(root, n=1500)
    with MessageStore.open(root, cfg) as s:
        for n in sorted(os.listdir(os.path.join(root, "commitlog")))[:2]:
            os.utime(os.path.join(root, "commitlog", n), (1, 1))
        assert s.delete_expired_files() >= 1 and s.min_physical_offset > 0
        assert s.delete_topic("Pays")
    ref = str(tmp_path / "ref")
    shutil.copytree(root, ref)
    rebuild_locally(ref, cfg)
    return root, ref, cfg


def test_generated_store_with_a_cleaned_head(spark, tmp_path):
    root, ref, cfg = cleaned_store(tmp_path)
    summary = rocketstore.spark.rebuild(root, spark, **{k: str(v) for k, v in OPTIONS.items()})
    assert_rebuilt_as_locally(summary, root, ref, cfg)


def assert_rebuilt_as_locally(summary, root, ref, cfg):
    """The Spark rebuild of `root` wrote what the local engine wrote in `ref`, and its summary says so."""
    assert summary["segments"] > 3 and len(index_contents(root)) > 5
    assert_same_rebuild(root, ref)
    assert not os.path.exists(os.path.join(root, "consumequeue", "Pays"))  # deleted stays deleted
    with MessageStore.open(ref, cfg, read_only=True) as s:
        assert (summary["queues"], summary["indexFiles"], summary["commitLogMaxOffset"]) == (
            len(s.consume_queues()),
            s.index_file_count(),
            s.max_physical_offset,
        )
    assert not [n for n in os.listdir(root) if n.startswith(".rebuild-")]


def test_golden_stores(spark, tmp_path):
    """store-expired (cleaned by RocketMQ): the ConsumeQueues RocketMQ rebuilt itself
    (store-expired-cq-rebuilt); store-batch-cq (inner batches): what the local engine writes."""
    root = golden_copy(tmp_path, "store-expired", "expired")
    rocketstore.spark.rebuild(root, spark, brokerConf=broker_conf(tmp_path, "store-expired"))
    expected = {
        f["path"]: f["sha256"]
        for f in G.manifest("store-expired-cq-rebuilt")["files"]
        if f["path"].startswith("consumequeue/")
    }
    ours = {"consumequeue/" + k: hashlib.sha256(v).hexdigest() for k, v in tree(root, "consumequeue").items()}
    assert ours == expected
    for name in ("store-batch-cq", "store-txn"):
        ours, ref = golden_copy(tmp_path, name, name), golden_copy(tmp_path, name, name + "-ref")
        rebuild_locally(ref, G.config_for(name))
        rocketstore.spark.rebuild(ours, spark, brokerConf=broker_conf(tmp_path, name))
        assert tree(ours, "batchconsumequeue") or name != "store-batch-cq"
        assert_same_rebuild(ours, ref)


def test_cli_rebuild_with_the_spark_engine(tmp_path):
    root = golden_copy(tmp_path, "store-txn", "store")
    before = tree(root, "consumequeue")
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "rocketstore.cli",
            "rebuild",
            root,
            "--engine",
            "spark",
            "--json",
            "--yes",
            "-c",
            broker_conf(tmp_path, "store-txn"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert "planning" not in p.stderr and "decoding" not in p.stderr  # --json, not a terminal: no phase lines
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert set(report) == {"store", "queues", "messages", "indexFiles", "commitLogMaxOffset", "seconds", "cut"}
    assert report["queues"] == len({os.path.dirname(k) for k in before}) and report["messages"] > 0
    assert tree(root, "consumequeue") == before  # RocketMQ's own files, rebuilt to the byte


def test_sizes_not_given_are_kept(spark, tmp_path):
    """Issue #17 point 3 on this engine: sizes not given are read from the files in place (non-default
    ConsumeQueue, batch ConsumeQueue and index sizes), and the store opens with them after the rebuild."""
    root = str(tmp_path / "store")
    make_sized_store(root, 3_000, 600)
    rocketstore.spark.rebuild(root, spark)
    assert_sizes_kept(root, 3_000, 600)
    assert not [n for n in os.listdir(root) if n.startswith(".rebuild-")]
