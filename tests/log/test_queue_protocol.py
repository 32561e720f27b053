"""The queue protocol (log/queue.py) on both kinds of queue: what put_position, put_units, unit_at and
unit_rows write and answer, checked against unit bytes laid out by hand from RocketMQ's ConsumeQueue
(20 bytes: offset i64, size i32, tagsCode i64) and BatchConsumeQueue (46 bytes: offset i64, size i32,
tagsCode i64, storeTime i64, msgBaseOffset i64, batchSize i16, compactedOffset i32, reserved i32)."""

import struct

from rocketstore.config.store_config import StoreConfig
from rocketstore.files.layout import StoreLayout
from rocketstore.log.batch_consume_queue import BatchConsumeQueue
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.queue import Queue
from rocketstore.log.queue_table import QueueTable


def _file_bytes(q, n):
    return bytes(q.files.files[0].buf[:n])


def test_both_kinds_are_queues_of_the_protocol(tmp_path):
    plain = ConsumeQueue(str(tmp_path), "T", 0, 20 * 10, writable=True)
    batch = BatchConsumeQueue(str(tmp_path), "B", 0, 46 * 10, writable=True)
    assert isinstance(plain, Queue) and isinstance(batch, Queue)
    assert (plain.is_batch, batch.is_batch) == (False, True)
    assert plain.ext is None and batch.ext is None  # the ext is off for the one, absent for the other


def test_plain_units_written_and_read_through_the_protocol(tmp_path):
    q = ConsumeQueue(str(tmp_path), "T", 0, 20 * 10, writable=True)
    assert q.put_position(1000, 120, 7, 0, 1_700_000_000_000) is True
    assert q.put_units([1120, 1240], [120, 130], [8, -9], [1, 2], [0, 0]) is True
    want = b"".join(struct.pack(">qiq", *u) for u in ((1000, 120, 7), (1120, 120, 8), (1240, 130, -9)))
    assert _file_bytes(q, 60) == want
    assert q.max_offset == 3 and q.slot_range() == (0, 3)
    u = q.unit_at(1)
    assert (u.pos, u.size, u.tags, u.base_offset, u.batch_size) == (1120, 120, 8, 1, 1)
    slot, units = q.locate(1)
    assert slot == 1
    assert q.unit_rows(units, slot, 0, 10) == [(1120, 120, 8, 1, 1), (1240, 130, -9, 2, 1)]
    assert q.resolve_tags(8) == (8, None)


def test_batch_units_written_and_read_through_the_protocol(tmp_path):
    q = BatchConsumeQueue(str(tmp_path), "B", 0, 46 * 10, writable=True)
    # a plain record of a batch topic covers its own queue offset; an inner batch covers batch_size of them
    assert q.put_position(1000, 120, 7, 0, 111) is True
    assert q.put_position(1120, 300, 8, 1, 222, msg_base_offset=1, batch_size=4) is True
    assert q.put_position(1420, 50, 9, 5, 333, msg_base_offset=-1) is None  # dropped, as RocketMQ does
    assert q.put_units([1420], [50], [9], [5], [333]) is True
    want = b"".join(
        struct.pack(">qiqqqhii", pos, size, tags, ts, base, n, -1, 0)
        for pos, size, tags, ts, base, n in (
            (1000, 120, 7, 111, 0, 1),
            (1120, 300, 8, 222, 1, 4),
            (1420, 50, 9, 333, 5, 1),
        )
    )
    assert _file_bytes(q, 3 * 46) == want
    assert (q.min_offset, q.max_offset) == (0, 6) and q.slot_range() == (0, 3)
    u = q.unit_at(1)
    assert (u.pos, u.size, u.tags, u.base_offset, u.batch_size) == (1120, 300, 8, 1, 4)
    slot, units = q.locate(3)  # inside the inner batch: its unit
    assert slot == 1
    assert q.unit_rows(units, slot, 0, 10) == [(1120, 300, 8, 1, 4), (1420, 50, 9, 5, 1)]


def test_queue_table_finds_creates_and_reloads_both_kinds(tmp_path):
    cfg = StoreConfig(
        mapped_file_size_consume_queue=200,
        mapped_file_size_batch_consume_queue=460,
        mapped_file_size_consume_queue_ext=4096,
    )
    layout = StoreLayout(str(tmp_path))
    table = QueueTable(layout, cfg, writable=True)
    table.load({"B"})
    assert table.get("T", 0) is None
    plain, batch = table.find_or_create("T", 0), table.find_or_create("B", 2)
    assert table.find_or_create("T", 0) is plain and not plain.is_batch and batch.is_batch
    plain.put_position(1000, 120, 7, 0, 0)
    batch.put_position(1000, 120, 7, 0, 0)
    table.close()

    again = QueueTable(layout, cfg, writable=False)
    again.load(set())  # the batchconsumequeue/ directory alone makes B a batch topic
    assert sorted(again.keys()) == [("B", 2), ("T", 0)] and again.is_batch("B")
    assert [q.is_batch for q in sorted(again, key=lambda q: q.topic)] == [True, False]
    again.close()
    table = QueueTable(layout, cfg, writable=True)
    table.load(set())
    table.destroy_all()
    assert len(table) == 0 and StoreLayout(str(tmp_path)).queue_dirs() == []
