"""What the facade gives a broker's request handlers, so they never reach into the store's parts: a whole
TopicConfig written, a record's bytes by physical offset, the segments, the queues, dispatch progress. Each
checked against the files themselves or values the test computes from RocketMQ's layouts."""

import json
import mmap
import os
import struct

import pytest

from rocketstore import Message, MessageStore, StoreConfig

SMALL = dict(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=200)


def test_update_topic_config_writes_each_field_into_topics_json(tmp_path):
    with MessageStore.open(tmp_path / "s", StoreConfig(**SMALL)) as s:
        s.update_topic_config("T", 3, 5, 4, topic_filter_type="MULTI_TAG", topic_sys_flag=1, order=True,
                              attributes={"+delete.policy": "x"})  # fmt: skip
        with open(tmp_path / "s" / "config" / "topics.json") as f:
            entry = json.load(f)["topicConfigTable"]["T"]
        assert entry == {
            "topicName": "T",
            "readQueueNums": 3,
            "writeQueueNums": 5,
            "perm": 4,
            "topicFilterType": "MULTI_TAG",
            "topicSysFlag": 1,
            "order": True,
            "attributes": {"+delete.policy": "x"},
        }
        assert s.queue_count("T") == 5  # puts spread over writeQueueNums


def test_update_topic_config_keeps_a_batch_topics_queue_type_and_refuses_a_change(tmp_path):
    with MessageStore.open(tmp_path / "s", StoreConfig(**SMALL)) as s:
        s.create_topic("B", 2, {"queue.type": "BatchCQ"})
        s.update_topic_config("B", 2, 2, 6)
        assert s.topic_configs["B"]["attributes"] == {"queue.type": "BatchCQ"}
        with pytest.raises(ValueError, match="cannot become SimpleCQ"):
            s.update_topic_config("B", 2, 2, 6, attributes={"queue.type": "SimpleCQ"})
        with pytest.raises(ValueError):
            s.update_topic_config("bad/name", 1, 1, 6)


def test_record_bytes_are_the_commitlog_files_bytes_at_the_offset(tmp_path):
    with MessageStore.open(tmp_path / "s", StoreConfig(**SMALL)) as s:
        results = [s.put(Message("T", b"body%d" % i), 0) for i in range(30)]  # rolls over segments of 4 KB
        s.wait_dispatched(10)
        for r in results:
            got = bytes(s.record_bytes(r.physical_offset, r.size))
            segment = tmp_path / "s" / "commitlog" / f"{r.physical_offset // 4096 * 4096:020d}"
            with open(segment, "rb") as f:
                f.seek(r.physical_offset % 4096)
                on_disk = f.read(r.size)
            assert got == on_disk
            assert struct.unpack(">i", got[:4])[0] == r.size  # TOTALSIZE heads the record
        assert s.record_bytes(s.max_physical_offset, 100) is None  # past what is written


def test_segments_queues_and_dispatch_progress(tmp_path):
    with MessageStore.open(tmp_path / "s", StoreConfig(**SMALL)) as s:
        for i in range(30):
            s.put(Message("T", b"x" * 100), i % 2)
        s.wait_dispatched(10)
        segments = s.commitlog_segments()
        names = sorted(os.listdir(tmp_path / "s" / "commitlog"))
        assert [f"{start:020d}" for start, _, _ in segments] == names
        assert all(size == 4096 for _, _, size in segments)
        assert segments[-1][0] + segments[-1][1] == s.max_physical_offset
        assert s.dispatched_offset == s.max_physical_offset and s.dispatch_behind_bytes == 0
        assert sorted((q.topic, q.queue_id, q.max_offset) for q in s.consume_queues()) == [("T", 0, 15), ("T", 1, 15)]
        assert s.consume_queue("T", 1).max_offset == 15 and s.consume_queue("T", 7) is None
        s.advise_commitlog(mmap.MADV_RANDOM)  # every mapped segment takes the advice
        assert 0.0 <= s.disk_ratio("commitlog") <= 1.0


def test_filter_groups_and_the_confirmed_offset(tmp_path):
    conf = StoreConfig(**SMALL, enable_consume_queue_ext=True, enable_calc_filter_bit_map=True)
    with MessageStore.open(tmp_path / "s", conf) as s:
        assert s.filter_groups() == set()
        s.register_filter("G1", "T", "a > 1")
        s.register_filter("G2", "U", "b = 'x'")
        assert s.filter_groups() == {"G1", "G2"}
        s.put(Message("T", b"x"), 0)
        s.flush()
        end = s.max_physical_offset
    with MessageStore.open(tmp_path / "s", conf, read_only=True) as s:
        # StoreCheckpoint's confirmPhyOffset: 8 bytes at 32 (physic, logics and index msg timestamps, then
        # masterFlushedOffset, before it)
        with open(tmp_path / "s" / "checkpoint", "rb") as f:
            on_disk = struct.unpack(">q", f.read()[32:40])[0]
        assert s.confirm_offset == on_disk and 0 <= on_disk <= end


def test_commitlog_position_names_the_segment_file_and_the_offset_in_it(tmp_path):
    root = tmp_path / "s"
    with MessageStore.open(root, StoreConfig(**SMALL)) as s:
        results = [s.put(Message("T", b"%d" % i * 100), 0) for i in range(30)]  # over segments of 4 KB
        s.flush()
        starts = {r.physical_offset // 4096 for r in results}
        assert len(starts) > 1
        for r in results:
            path, in_segment = s.commitlog_position(r.physical_offset)
            assert path == str(root / "commitlog" / f"{r.physical_offset // 4096 * 4096:020d}")
            assert in_segment == r.physical_offset % 4096
            with open(path, "rb") as f:
                f.seek(in_segment)
                assert struct.unpack(">i", f.read(4))[0] == r.size  # TOTALSIZE heads the record there
        past = (max(starts) + 1) * 4096  # no segment holds it: the directory itself
        assert s.commitlog_position(past) == (str(root / "commitlog"), 0)
