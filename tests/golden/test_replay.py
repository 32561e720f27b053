"""Replaying the golden stores' puts (same clock, hosts and inputs) writes the same bytes RocketMQ wrote."""

import hashlib
import os

import pytest

from rocketstore import MessageStore, PutStatus

from . import goldens as G

REPLAYABLE = ["store-v1-basic", "store-crc", "store-v2-topics", "store-txn", "store-batch-cq"]


def _sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


@pytest.mark.parametrize("in_put_path", [True, False], ids=["put-path-dispatch", "reput-dispatch"])
@pytest.mark.parametrize("name", REPLAYABLE)
def test_replay_writes_identical_commitlog_consumequeue_and_index(name, in_put_path, tmp_path):
    """Both ways of building queues and index (while putting, or by the reput thread reading the
    CommitLog back) must write RocketMQ's bytes."""
    G.require(name)
    entries = list(G.replay_inputs(name))
    times = iter([e["storeTimestamp"] for e, _ in entries])
    cfg = G.config_for(
        name,
        clock=lambda: next(times),
        store_host=G.manifest(name)["storeHostDefault"],
        dispatch_in_put_path=in_put_path,
    )
    root = tmp_path / "store"
    with MessageStore.open(root, cfg) as store:
        for topic, kind in G.manifest(name).get("topicQueueTypes", {}).items():
            store.create_topic(topic, queues=8, attributes={"queue.type": kind})
        for e, msgs in entries:
            if e["api"] == "putMessage":
                r = store.put(msgs[0], queue_id=e["queueId"])
                assert r.status is PutStatus[e["putStatus"]], e["seq"]
                assert (r.physical_offset, r.size, r.queue_offset, r.msg_id, r.store_timestamp) == (
                    e["wroteOffset"],
                    e["wroteBytes"],
                    e["queueOffset"],
                    e["msgId"],
                    e["storeTimestamp"],
                ), e["seq"]
            else:
                r = store.put_batch(msgs, queue_id=e["queueId"])
                assert r.status is PutStatus[e["putStatus"]], e["seq"]
                assert ",".join(r.msg_ids) == e["msgId"], e["seq"]
                assert (r.physical_offset, r.size, r.queue_offset) == (
                    e["wroteOffset"],
                    e["wroteBytes"],
                    e["queueOffset"],
                ), e["seq"]
    expected = {f["path"]: f for f in G.manifest(name)["files"]}
    compared = 0
    for rel, f in expected.items():
        if not rel.startswith(("commitlog/", "consumequeue/", "batchconsumequeue/")):
            continue
        ours = root / rel
        assert ours.exists(), f"{rel} was not written"
        assert os.path.getsize(ours) == f["size"], rel
        assert _sha(ours) == f["sha256"], f"{rel} differs from RocketMQ's"
        compared += 1
    ours_files = {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and (str(p.relative_to(root)).startswith(("commitlog/", "consumequeue/", "batchconsumequeue/")))
    }
    assert ours_files == {r for r in expected if r.startswith(("commitlog/", "consumequeue/", "batchconsumequeue/"))}
    assert compared > 10
    # index files are named by the wall clock: compare their contents, in creation order
    theirs = [f["sha256"] for rel, f in sorted(expected.items()) if rel.startswith("index/")]
    ours = [_sha(p) for p in sorted((root / "index").iterdir())]
    assert len(theirs) > 1 and ours == theirs, "index files differ from RocketMQ's"
