"""A deleted topic stays deleted (issue #25, point 3): RocketMQ re-dispatches the CommitLog from the furthest
point any queue reaches, so a topic deleted while it held the newest records got its queues back at the next
open. Whatever reopens the store (a clean open, a crash recovery, a rebuild), the deleted topic has no queue
and no message, and a topic created again under its name holds only what was put after."""

import json
import os
import shutil

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.maintenance.rebuild import rebuild_serial
from rocketstore.maintenance.verify import verify_store

CFG = StoreConfig(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=40 * 20)


def fill(root):
    """A: 30 messages, then B: 25 messages over 2 queues (B holds the newest records), then B deleted."""
    with MessageStore.open(root, CFG) as s:
        s.create_topic("A", queues=2)
        s.create_topic("B", queues=2)
        for i in range(30):
            assert s.put(Message("A", b"a%d" % i), queue_id=i % 2).ok
        for i in range(25):
            assert s.put(Message("B", b"old-b%d" % i, keys=["kb%d" % i]), queue_id=i % 2).ok
        assert s.delete_topic("B")
        end = s.max_physical_offset
    return end


def b_state(s):
    return [s.max_offset("B", q) for q in range(2)], [
        m.body for q in range(2) for m in s.get("g", "B", q, offset=0, max_count=32).messages
    ]


def assert_b_gone(root):
    assert not os.path.isdir(os.path.join(root, "consumequeue", "B"))
    with open(os.path.join(root, "config", "topics.json"), encoding="utf-8") as fh:
        assert "B" not in json.load(fh)["topicConfigTable"]
    with MessageStore.open(root, CFG, read_only=True) as s:
        assert b_state(s) == ([0, 0], [])
        assert [s.max_offset("A", q) for q in range(2)] == [15, 15]


@pytest.mark.parametrize("reopen", ["clean", "crash", "rebuild"])
def test_a_deleted_topic_does_not_come_back(tmp_path, reopen):
    root = str(tmp_path / "store")
    fill(root)
    if reopen == "crash":  # what a kill -9 after the delete leaves: the abort file, an abnormal recovery
        with open(os.path.join(root, "abort"), "w") as fh:
            fh.write("1")
    if reopen == "rebuild":
        rebuild_serial(root, CFG)
    with MessageStore.open(root, CFG) as s:  # a writable open: recovery and reput's re-dispatch
        assert b_state(s) == ([0, 0], [])
    assert_b_gone(root)
    report = verify_store(root, CFG)
    assert report["problems"] == [] and report["checked"]["undispatchedRecords"] == 0, report


def test_a_topic_created_again_holds_only_its_new_messages(tmp_path):
    root = str(tmp_path / "store")
    fill(root)
    with MessageStore.open(root, CFG) as s:
        s.create_topic("B", queues=2)
        for i in range(3):
            assert s.put(Message("B", b"new-b%d" % i), queue_id=0).ok
        copy = str(tmp_path / "crashed")
        shutil.copytree(root, copy)  # while open: the abort file makes its next open a crash recovery
    for where in (root, copy):
        with MessageStore.open(where, CFG) as s:
            assert b_state(s) == ([3, 0], [b"new-b0", b"new-b1", b"new-b2"]), where


def test_deletions_are_forgotten_once_their_records_expired(tmp_path):
    root = str(tmp_path / "store")
    end = fill(root)
    path = os.path.join(root, "config", "deletedTopics.json")
    with open(path, encoding="utf-8") as fh:
        assert json.load(fh) == {"deletedTopics": {"B": end}}
    with MessageStore.open(root, CFG) as s:
        while s.max_physical_offset < end + 3 * 64 * 1024:  # past the segments B's records are in
            assert s.put(Message("A", b"x" * 1000), queue_id=0).ok
        for n in os.listdir(os.path.join(root, "commitlog")):
            os.utime(os.path.join(root, "commitlog", n), (1, 1))  # 1970: every segment but the last expired
        s._cleanup.disk_usage = lambda path: 0.10  # this machine's disk must not matter
        assert s.delete_expired_files() > 0
        assert s.min_physical_offset > end
    with MessageStore.open(root, CFG):
        pass
    with open(path, encoding="utf-8") as fh:
        assert json.load(fh) == {"deletedTopics": {}}
