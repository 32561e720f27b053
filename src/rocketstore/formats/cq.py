"""The ConsumeQueue unit: physical offset 8 | size 4 | tagsCode 8 (20 bytes, big-endian)."""
from struct import Struct

import numpy as np

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
