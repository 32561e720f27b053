"""The ConsumeQueue unit: physical offset 8 | size 4 | tagsCode 8 (20 bytes, big-endian)."""

from struct import Struct

import numpy as np

from ..errors import CorruptDataError
from .record import decode_record_py

UNIT_SIZE = 20
UNIT = Struct(">qiq")
# numpy view of a whole CQ file; zero-copy over the mmap.
DTYPE = np.dtype([("pos", ">i8"), ("size", ">i4"), ("tags", ">i8")])
# The unit ConsumeQueue.fillPreBlank writes before the first real unit of a queue that starts past 0.
PRE_BLANK = UNIT.pack(0, 0x7FFFFFFF, 0)


def encode_unit(physical_offset: int, size: int, tags_code: int) -> bytes:
    return UNIT.pack(physical_offset, size, tags_code)


def encode_units(offsets, sizes, tags_codes) -> bytes:
    """Many units at once (sequences or arrays of equal length)."""
    arr = np.empty(len(offsets), dtype=DTYPE)
    arr["pos"] = offsets
    arr["size"] = sizes
    arr["tags"] = tags_codes
    return arr.tobytes()


def decode_unit(buf, pos: int = 0) -> tuple[int, int, int]:
    return UNIT.unpack_from(buf, pos)


def is_valid_unit(physical_offset: int, size: int) -> bool:
    """ConsumeQueue.recover's test: a unit is written when offset >= 0 and size > 0 (pre-blanks count)."""
    return physical_offset >= 0 and size > 0


def units(buf) -> np.ndarray:
    """All whole units of a buffer as a structured array (no copy)."""
    n = len(buf) // UNIT_SIZE
    return np.frombuffer(buf, dtype=DTYPE, count=n)


# ---------------------------------------------------------------- a get's plain units
MAX_PULL_MSG_SIZE = 128 * 1024 * 1024


def take_units_py(
    units,
    start: int,
    codes,
    ext_max: int,
    max_count: int,
    limits: tuple,
    max_py: int,
    memory: int,
    seg_start: int,
    seg_end: int,
    seg_buf,
    topic: str,
    queue_id: int,
    out: list,
):
    """The units at the head of `units` (whole 20-byte units; the first is queue offset `start`) that a get
    (get_message.scan, from a call that has found nothing yet, with no record-level filter and no ext)
    takes without a closer look: units the tag set `codes` refuses (a tagsCode above `ext_max`), and records
    of the segment (`seg_buf`, [seg_start, seg_end) of the log) that decode and are the queue's record for
    that offset (appended to `out`). Stops before the first unit that would fill the batch (`limits`: bytes
    and count in memory, bytes and count on disk, as batch_full) or needs the careful loop (another segment,
    a record that does not decode or is not that unit's).

    Returns (units taken, their bytes, messages taken, whether the tag set refused any)."""
    bytes_mem, count_mem, bytes_disk, count_disk = limits
    total = count = 0
    skipped = False
    k = 0
    arr = units if isinstance(units, np.ndarray) else np.frombuffer(units, dtype=DTYPE, count=len(units) // UNIT_SIZE)
    for k, (pos, size, tcode) in enumerate(arr.tolist()):
        if total and count:
            in_memory = (max_py - pos) <= memory
            if (
                count + 1 > max_count
                or total + size > MAX_PULL_MSG_SIZE
                or (
                    (total + size > bytes_mem or count > count_mem - 1)
                    if in_memory
                    else (total + size > bytes_disk or count > count_disk - 1)
                )
            ):
                return k, total, count, skipped
        if codes is not None and tcode > ext_max:
            t = tcode & 0xFFFFFFFF
            if (t - 0x100000000 if t & 0x80000000 else t) not in codes:
                skipped = True
                continue
        if not seg_start <= pos <= seg_end - size or size <= 0:
            return k, total, count, skipped
        rel = pos - seg_start
        if rel + size > len(seg_buf):
            return k, total, count, skipped
        try:
            m = decode_record_py(seg_buf, rel, rel + size)
        except CorruptDataError:
            return k, total, count, skipped
        if not m.is_at(topic, queue_id, start + k, size, pos):
            return k, total, count, skipped
        out.append(m)
        total += size
        count += 1
    return len(arr), total, count, skipped


# the chosen twin (rocketstore.engine.TWINS); take_units_py stays the reference
from ..engine import take_units  # noqa: F401  (the public name)
