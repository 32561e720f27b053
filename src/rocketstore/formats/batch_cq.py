"""The BatchConsumeQueue unit of RIP-26 (46 bytes, big-endian):

phyOffset 8 | size 4 | tagsCode 8 | storeTime 8 | msgBaseOffset 8 | batchSize 2 | compactedOffset 4 | reserved 4.

One unit stands for `batchSize` consecutive queue offsets starting at `msgBaseOffset` (an inner-batch record),
so queue offsets are message offsets, not unit indexes. Pure functions on bytes: no file handling here.
"""

from __future__ import annotations

from struct import Struct
from typing import NamedTuple

import numpy as np

from ..errors import CorruptDataError

UNIT_SIZE = 46
UNIT = Struct(">qiqqqhii")
# Where each field sits inside a unit (RocketMQ's MSG_*_INDEX constants).
TAGS_POS = 12
STORE_TIME_POS = 20
BASE_OFFSET_POS = 28
BATCH_SIZE_POS = 36
COMPACTED_OFFSET_POS = 38
# putBatchMessagePositionInfo always writes compactedOffset = -1 (no compaction yet) and reserved = 0.
INVALID_POS = -1
# The first three fields carry the plain ConsumeQueue's names, so code reading arr["pos"], arr["size"],
# arr["tags"] (tag filters, physical lookups) works on either kind of queue.
DTYPE = np.dtype(
    [
        ("pos", ">i8"),
        ("size", ">i4"),
        ("tags", ">i8"),
        ("store_time", ">i8"),
        ("base_offset", ">i8"),
        ("batch_size", ">i2"),
        ("compacted_offset", ">i4"),
        ("reserved", ">i4"),
    ]
)
assert DTYPE.itemsize == UNIT_SIZE == UNIT.size

SHORT_MIN, SHORT_MAX = -0x8000, 0x7FFF


class BatchUnit(NamedTuple):
    pos: int
    size: int
    tags: int
    store_time: int
    base_offset: int
    batch_size: int
    compacted_offset: int = INVALID_POS
    reserved: int = 0

    @property
    def next_offset(self) -> int:
        """The queue offset just past this unit's messages."""
        return self.base_offset + self.batch_size


def encode_unit(
    pos: int,
    size: int,
    tags_code: int,
    store_time: int,
    base_offset: int,
    batch_size: int,
    compacted_offset: int = INVALID_POS,
    reserved: int = 0,
) -> bytes:
    if not SHORT_MIN <= batch_size <= SHORT_MAX:
        raise ValueError(f"batch size {batch_size} does not fit RocketMQ's 2-byte field")
    return UNIT.pack(pos, size, tags_code, store_time, base_offset, batch_size, compacted_offset, reserved)


def decode_unit(buf, pos: int = 0) -> BatchUnit:
    if pos < 0 or len(buf) - pos < UNIT_SIZE:
        raise CorruptDataError(
            f"truncated batch consume queue unit: {len(buf) - pos} bytes left, a unit needs {UNIT_SIZE}", pos
        )
    return BatchUnit._make(UNIT.unpack_from(buf, pos))


def is_valid_unit(pos: int, size: int, base_offset: int, batch_size: int) -> bool:
    """BatchConsumeQueue.recover's test: offset >= 0, size > 0, msgBaseOffset >= 0 and batchSize > 0.

    Stricter than the plain ConsumeQueue's (which has no pre-blank units to accept): an all-zero unit, the
    unwritten rest of a file, fails on size and batchSize."""
    return pos >= 0 and size > 0 and base_offset >= 0 and batch_size > 0


def valid_mask(arr: np.ndarray) -> np.ndarray:
    """is_valid_unit over a whole array of units."""
    return (arr["pos"] >= 0) & (arr["size"] > 0) & (arr["base_offset"] >= 0) & (arr["batch_size"] > 0)


def units(buf) -> np.ndarray:
    """All whole units of a buffer as a structured array (no copy)."""
    n = len(buf) // UNIT_SIZE
    return np.frombuffer(buf, dtype=DTYPE, count=n)


def chain_breaks(arr: np.ndarray) -> np.ndarray:
    """Indexes i of units after which the next one does not follow: a queue's units cover consecutive queue
    offsets (unit i+1's msgBaseOffset is unit i's plus its batchSize) of records in log order (unit i+1's
    physical offset is past unit i's record). A break means one of the two units is wrong."""
    if len(arr) < 2:
        return np.empty(0, dtype=np.int64)
    base = arr["base_offset"].astype(np.int64)
    nxt = base[:-1] + arr["batch_size"][:-1].astype(np.int64)
    pos = arr["pos"].astype(np.int64)
    end = pos[:-1] + arr["size"][:-1].astype(np.int64)  # may wrap for a garbage offset: the `<=` test holds
    return np.flatnonzero((base[1:] != nxt) | (pos[1:] <= pos[:-1]) | (pos[1:] < end))
