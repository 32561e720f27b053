"""Recovery writes what RocketMQ's recovery wrote: a crash image and a store without ConsumeQueues,
reopened for writing and closed, hold the same CommitLog, ConsumeQueue and index bytes as the golden
stores RocketMQ left after doing the same."""

import hashlib
import shutil


from rocketstore import MessageStore

from . import goldens as G


def _sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _compare(root, expected_name):
    expected = {f["path"]: f["sha256"] for f in G.manifest(expected_name)["files"]}
    problems = []
    for prefix in ("commitlog/", "consumequeue/"):
        theirs = {r: h for r, h in expected.items() if r.startswith(prefix)}
        ours = {str(p.relative_to(root)): _sha(p) for p in (root / prefix).rglob("*") if p.is_file()}
        if set(ours) != set(theirs):
            problems.append(
                f"{prefix}: files differ: only ours {sorted(set(ours) - set(theirs))[:5]}, "
                f"only RocketMQ's {sorted(set(theirs) - set(ours))[:5]}"
            )
        problems += [f"{r} differs" for r in sorted(theirs) if r in ours and ours[r] != theirs[r]]
    # index files are named by the wall clock: compare contents in creation order
    theirs_idx = [h for r, h in sorted(expected.items()) if r.startswith("index/")]
    ours_idx = [_sha(p) for p in sorted((root / "index").iterdir())]
    if ours_idx != theirs_idx:
        problems.append(
            f"index files differ: {len(ours_idx)} ours, {len(theirs_idx)} RocketMQ's, "
            f"equal at {[i for i, (a, b) in enumerate(zip(ours_idx, theirs_idx)) if a == b]}"
        )
    return problems


def test_crash_image_recovers_to_rocketmqs_bytes(tmp_path):
    G.require("store-abnormal")
    G.require("store-abnormal-recovered")
    root = tmp_path / "store"
    shutil.copytree(G.store_dir("store-abnormal"), root)
    assert (root / "abort").exists()
    with MessageStore.open(root, G.config_for("store-abnormal")) as store:
        assert store.wait_dispatched(timeout_s=30)
    assert not (root / "abort").exists()
    problems = _compare(root, "store-abnormal-recovered")
    assert not problems, "\n".join(problems[:20])


def test_lost_consume_queues_are_rebuilt_as_rocketmq_did(tmp_path):
    G.require("store-expired")
    G.require("store-expired-cq-rebuilt")
    root = tmp_path / "store"
    shutil.copytree(G.store_dir("store-expired"), root)
    shutil.rmtree(root / "consumequeue")
    with MessageStore.open(root, G.config_for("store-expired")) as store:
        assert store.wait_dispatched(timeout_s=30)
    problems = _compare(root, "store-expired-cq-rebuilt")
    assert not problems, "\n".join(problems[:20])


def test_batch_consume_queues_are_rebuilt_from_the_commitlog(tmp_path):
    """With queues gone, recovery re-dispatches every record: inner batches (INNER_BASE/INNER_NUM) go to
    the batch ConsumeQueue of the topic that topics.json (RocketMQ's format) marks queue.type=BatchCQ,
    and the rebuilt files are RocketMQ's bytes."""
    import json

    G.require("store-batch-cq")
    root = tmp_path / "store"
    shutil.copytree(G.store_dir("store-batch-cq"), root)
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "batchconsumequeue")
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "topics.json").write_text(
        json.dumps(
            {
                "topicConfigTable": {
                    "BatchTopic": {
                        "topicName": "BatchTopic",
                        "readQueueNums": 2,
                        "writeQueueNums": 2,
                        "perm": 6,
                        "topicFilterType": "SINGLE_TAG",
                        "topicSysFlag": 0,
                        "order": False,
                        "attributes": {"queue.type": "BatchCQ"},
                    }
                }
            }
        )
    )
    with MessageStore.open(root, G.config_for("store-batch-cq")) as store:
        assert store.wait_dispatched(timeout_s=30)
    expected = {f["path"]: f["sha256"] for f in G.manifest("store-batch-cq")["files"]}
    for prefix in ("consumequeue/", "batchconsumequeue/"):
        theirs = {r: h for r, h in expected.items() if r.startswith(prefix)}
        ours = {str(p.relative_to(root)): _sha(p) for p in (root / prefix).rglob("*") if p.is_file()}
        assert theirs and ours == theirs, prefix
