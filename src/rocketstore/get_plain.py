"""A get's fast path (issue #15): the plain units at the head of a ConsumeQueue file's units, taken in one
compiled loop (formats.cq.take_units) by get_message.scan before its careful loop, which goes on from the
first unit that needs a closer look (another segment, a record that does not decode or is not the unit's,
the unit that fills the batch). Only for a get with no record-level filter, no ext and no CRC check."""

from __future__ import annotations

from .formats import cq as CQ
from .formats.cq_ext import MAX_ADDR as EXT_MAX_ADDR


def take_plain(
    store, cq, units, start: int, codes, max_count: int, max_py: int, memory: int, out: list
) -> tuple[int, int, int, bool]:
    """(units taken, their bytes, messages appended to `out`, whether the tag set refused any): see
    formats.cq.take_units. The records are read from the segment of the first unit's record."""
    if not len(units):
        return 0, 0, 0, False
    cfg = store.config
    pos = int(units[0]["pos"])
    mf = store.commitlog.files.find(pos, pos == 0)
    if mf is None or mf.buf is None:
        return 0, 0, 0, False
    limits = (
        cfg.max_transfer_bytes_on_message_in_memory,
        cfg.max_transfer_count_on_message_in_memory,
        cfg.max_transfer_bytes_on_message_in_disk,
        cfg.max_transfer_count_on_message_in_disk,
    )
    return CQ.take_units(
        units,
        start,
        codes,
        EXT_MAX_ADDR,
        max_count,
        limits,
        max_py,
        memory,
        mf.file_from_offset,
        mf.file_from_offset + mf.read_position,
        mf.buf,
        cq.topic,
        cq.queue_id,
        out,
    )
