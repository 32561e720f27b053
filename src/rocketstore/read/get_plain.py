"""A get's fast paths (issue #15).

get_plain: a whole get of a plain ConsumeQueue (no ext, no filter but the tag set, no CRC check) in one
call, or None when the careful loop (get_message.scan) must answer; get_message.get asks it first when the
engine is native. get_plain_py is its reference.

take_plain: the plain units at the head of a ConsumeQueue file's units, taken in one compiled loop
(formats.cq.take_units) by get_message.scan before its careful loop, which goes on from the first unit that
needs a closer look (another segment, a record that does not decode or is not the unit's, the unit that
fills the batch). Only for a get with no record-level filter, no ext and no CRC check."""

from __future__ import annotations

from ..errors import CorruptDataError
from ..formats import cq as CQ
from ..formats.cq_ext import MAX_ADDR as EXT_MAX_ADDR
from ..formats.record import decode_record_py
from ..engine import take_units

MAX_PULL_MSG_SIZE = 128 * 1024 * 1024
UNIT = CQ.UNIT_SIZE


def _find(files: list, file_size: int, offset: int):
    """MappedFileQueue.find(offset) over its list of files: (start, read position, buffer) or None."""
    if not files or offset < 0:
        return None
    idx = offset // file_size - files[0].file_from_offset // file_size
    if not 0 <= idx < len(files):
        return None
    mf = files[idx]
    if not mf.file_from_offset <= offset < mf.file_from_offset + file_size or mf.buf is None:
        return None
    return mf.file_from_offset, mf.read_position, mf.buf


def get_plain_py(
    cq_files: list,
    cq_file_size: int,
    cq_min_logic_offset: int,
    cl_files: list,
    cl_file_size: int,
    offset: int,
    hi: int,
    max_count: int,
    codes,
    ext_max: int,
    limits: tuple[int, int, int, int],
    max_filter_message_size: int,
    travel: int,
    memory: int,
    topic: str,
    queue_id: int,
):
    """(next_begin_offset, bytes, message count, messages) of get_message.scan over a plain ConsumeQueue
    with no ext, no filter but the tag set `codes` and no CRC check, for `offset` in [min, hi) — when every
    unit it looks at is in the ConsumeQueue file holding `offset` and points at a record of a CommitLog
    segment that decodes and is that unit's (the status is then FOUND with messages, else
    NO_MATCHED_MESSAGE). None when anything else comes up (an expired or wrong unit, a corrupt record, a scan
    that would go on into the next file): the careful loop answers then.

    `cq_files`, `cl_files`: the ConsumeQueue's and the CommitLog's MappedFileQueue.files; `limits`: bytes
    and count in memory, bytes and count on disk (batch_full); `memory`: the bytes of the log deemed in
    memory; `travel`: travel_cq_file_num_when_get_message."""
    if travel < 1 or offset < 0 or max_count < 0:
        return None
    cq = _find(cq_files, cq_file_size, offset * UNIT)
    if cq is None or offset * UNIT < cq_min_logic_offset:
        return None
    _, cq_read, ubuf = cq
    in_file = offset * UNIT % cq_file_size
    if in_file >= cq_read:
        return None
    end_units = min(cq_read, len(ubuf))
    max_py = cl_files[-1].file_from_offset + cl_files[-1].read_position if cl_files else 0
    cap = offset - (-max(max_filter_message_size, max_count * UNIT) // UNIT)
    out = []
    next_begin = offset
    total = count = 0
    seg = None
    for at in range(in_file, end_units - UNIT + 1, UNIT):
        base = offset + (at - in_file) // UNIT
        if next_begin >= hi or base >= cap:
            break
        pos, size, tcode = CQ.decode_unit(ubuf, at)
        if total and count and _batch_full(limits, total, count, size, max_count, (max_py - pos) <= memory):
            break
        next_begin = base + 1
        if codes is not None and tcode > ext_max and _int32(tcode) not in codes:
            continue
        seg = _segment_for(cl_files, cl_file_size, seg, pos, size)
        m = _record_of_unit(seg, pos, size, topic, queue_id, base)
        if m is None:
            return None
        out.append(m)
        total += size
        count += 1
    if total <= 0 and next_begin < hi and travel > 1:
        return None  # the careful loop goes on into the next file
    return next_begin, total, count, out


def _int32(v: int) -> int:
    """A tagsCode as the Java int the tag set holds."""
    t = v & 0xFFFFFFFF
    return t - 0x100000000 if t & 0x80000000 else t


def _batch_full(limits, total: int, count: int, size: int, max_count: int, in_memory: bool) -> bool:
    """get_message.batch_full over the four transfer limits (bytes, count in memory; bytes, count on disk)."""
    bytes_mem, count_mem, bytes_disk, count_disk = limits
    if count + 1 > max_count or total + size > MAX_PULL_MSG_SIZE:
        return True
    if in_memory:
        return total + size > bytes_mem or count > count_mem - 1
    return total + size > bytes_disk or count > count_disk - 1


def _segment_for(cl_files: list, cl_file_size: int, seg, pos: int, size: int):
    """The CommitLog segment (start, read position, buffer) whose written part holds [pos, pos + size): the one
    in hand when it does, else its own; None for an expired record or a wrong unit."""
    if size <= 0 or pos < 0:
        return None
    if seg is not None and seg[0] <= pos <= seg[0] + seg[1] - size:
        return seg
    seg = _find(cl_files, cl_file_size, pos)
    if seg is None or not 0 <= pos - seg[0] <= seg[1] - size:
        return None
    return seg


def _record_of_unit(seg, pos: int, size: int, topic: str, queue_id: int, base: int):
    """The record a unit points at, decoded, when it is that unit's; None when it is not, or does not decode."""
    if seg is None:
        return None
    rel = pos - seg[0]
    if rel + size > len(seg[2]):
        return None
    try:
        m = decode_record_py(seg[2], rel, rel + size)
    except CorruptDataError:
        return None
    return m if m.is_at(topic, queue_id, base, size, pos) else None


# the chosen twin (rocketstore.engine.TWINS); get_plain_py stays the reference
from ..engine import get_plain  # noqa: F401  (the public name)


def take_plain(
    parts, cq, units, start: int, codes, max_count: int, max_py: int, memory: int, out: list
) -> tuple[int, int, int, bool]:
    """(units taken, their bytes, messages appended to `out`, whether the tag set refused any): see
    formats.cq.take_units. The records are read from the segment of the first unit's record. `parts`: the
    get's get_message.ReadParts (its config and CommitLog)."""
    if not len(units):
        return 0, 0, 0, False
    cfg = parts.config
    pos = int(units[0]["pos"])
    mf = parts.commitlog.files.find(pos, pos == 0)
    if mf is None or mf.buf is None:
        return 0, 0, 0, False
    limits = (
        cfg.max_transfer_bytes_on_message_in_memory,
        cfg.max_transfer_count_on_message_in_memory,
        cfg.max_transfer_bytes_on_message_in_disk,
        cfg.max_transfer_count_on_message_in_disk,
    )
    return take_units(
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
