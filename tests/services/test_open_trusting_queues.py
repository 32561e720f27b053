"""open(read_only=True, check_commitlog=False): the queues are trusted, the CommitLog is not recovered."""

import os

import pytest

from rocketstore import Message, MessageStore, StoreConfig

CFG = StoreConfig(mapped_file_size_commit_log=64 * 1024)


def _answers(s):
    out = {}
    for topic, queues in s.topics().items():
        for q in queues:
            off, msgs = s.min_offset(topic, q), []
            while off < s.max_offset(topic, q):
                g = s.get("t", topic, q, off, max_count=32)
                msgs += [(m.queue_offset, m.physical_offset, bytes(m.body)) for m in g.messages]
                off = g.next_begin_offset
            out[(topic, q)] = msgs
    return out


def test_same_answers_as_a_full_open_and_writers_must_recover(tmp_path):
    root = str(tmp_path / "s")
    with MessageStore.open(root, CFG) as s:
        for i in range(700):
            s.put(Message(f"T{i % 2}", f"m{i}".encode() * 30), queue_id=i % 3)
    with MessageStore.open(root, CFG, read_only=True) as full:
        want, end = _answers(full), full.max_physical_offset
    with MessageStore.open(root, CFG, read_only=True, check_commitlog=False) as quick:
        assert _answers(quick) == want and sum(map(len, want.values())) == 700
        assert quick.max_physical_offset == end
    with pytest.raises(ValueError):
        MessageStore.open(root, CFG, check_commitlog=False)


def test_a_live_store_is_read_up_to_what_its_queues_hold(tmp_path):
    root = str(tmp_path / "s")
    with MessageStore.open(root, CFG) as writer:
        for i in range(300):
            writer.put(Message("Live", f"m{i}".encode()), queue_id=0)
        assert os.path.exists(os.path.join(root, "abort"))  # a crash image, as far as readers can tell
        with MessageStore.open(root, CFG, read_only=True, check_commitlog=False) as reader:
            assert reader.max_offset("Live", 0) == 300
            got = reader.get("t", "Live", 0, 290, max_count=32)
            assert [bytes(m.body) for m in got.messages] == [f"m{i}".encode() for i in range(290, 300)]
