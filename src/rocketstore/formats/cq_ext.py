"""The ConsumeQueue extension (RocketMQ's ConsumeQueueExt): byte layout of its units and of its addresses.

An ext unit, big-endian, variable length (CqExtUnit.write):

    size 2 | tagsCode 8 | msgStoreTime 8 | bitMapSize 2 | filterBitMap bitMapSize bytes

`size` is the whole unit's length (MIN_UNIT_SIZE = 20 plus the bitmap), at most Short.MAX_VALUE. A unit without
a bitmap has bitMapSize 0 and nothing after it. Units are packed one after another in fixed-size segment files
(consumequeue_ext/{topic}/{queueId}/); each file keeps its last END_BLANK_DATA_LENGTH bytes free so that a
unit that does not fit can be replaced by the end marker, the short -1 (fullFillToEnd), after which the
writer goes on in the next file. An unwritten place reads as size 0. Either one ends a walk through a file.

Addresses: a ConsumeQueue unit whose tagsCode is <= MAX_ADDR (Integer.MIN_VALUE - 1) holds the address of its
ext unit instead of a tags hash. The address of the ext byte offset `o` is o + Long.MIN_VALUE (decorate), so
it is always negative and below every int tags hash; undecorate gives the offset back.

Pure functions on bytes: the file handling is in log/consume_queue_ext.py.
"""

from __future__ import annotations

from struct import Struct
from typing import NamedTuple

import numpy as np

from ..errors import CorruptDataError

LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1
INT_MIN = -(1 << 31)
# ConsumeQueueExt.MAX_ADDR and MAX_REAL_OFFSET
MAX_ADDR = INT_MIN - 1  # -2147483649: tagsCode values at or below it are ext addresses
MAX_REAL_OFFSET = MAX_ADDR - LONG_MIN  # the highest ext byte offset an address can carry

END_BLANK_DATA_LENGTH = 4  # bytes each file keeps free for the end marker
END_MARKER = b"\xff\xff"  # (short) -1, written by fullFillToEnd

HEAD = Struct(">hqqh")  # size, tagsCode, msgStoreTime, bitMapSize
SIZE = Struct(">h")
MIN_UNIT_SIZE = HEAD.size  # CqExtUnit.MIN_EXT_UNIT_SIZE: 2 + 8 * 2 + 2 = 20
MAX_UNIT_SIZE = 0x7FFF  # CqExtUnit.MAX_EXT_UNIT_SIZE: Short.MAX_VALUE
assert MIN_UNIT_SIZE == 20


class ExtUnit(NamedTuple):
    """One ext unit (CqExtUnit). `filter_bit_map` is None when the unit has none (bitMapSize < 1), as
    getFilterBitMap answers."""

    size: int
    tags_code: int
    msg_store_time: int
    bit_map_size: int
    filter_bit_map: bytes | None


def _int64(v: int) -> int:
    """Java long arithmetic: wrap to 64 bits."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def is_ext_addr(address: int) -> bool:
    """ConsumeQueueExt.isExtAddr: does a ConsumeQueue tagsCode hold an ext address?"""
    return address <= MAX_ADDR


def decorate(offset: int) -> int:
    """The address of ext byte offset `offset` (offset + Long.MIN_VALUE, Java overflow included); a value that
    already is an address is returned as is."""
    if not is_ext_addr(offset):
        return _int64(offset + LONG_MIN)
    return offset


def undecorate(address: int) -> int:
    """The ext byte offset an address names; a value that is no address is returned as is."""
    if is_ext_addr(address):
        return address - LONG_MIN
    return address


def unit_size(filter_bit_map: bytes | None) -> int:
    """calcUnitSize: the bytes a unit with this bitmap takes."""
    return MIN_UNIT_SIZE + (len(filter_bit_map) if filter_bit_map else 0)


def encode_unit(tags_code: int, msg_store_time: int, filter_bit_map: bytes | None = None) -> bytes:
    """CqExtUnit.write: the unit's bytes. None or an empty bitmap writes bitMapSize 0 and no bitmap."""
    bm = bytes(filter_bit_map) if filter_bit_map else b""
    size = MIN_UNIT_SIZE + len(bm)
    if size > MAX_UNIT_SIZE:
        raise ValueError(f"ext unit of {size} bytes is larger than RocketMQ's {MAX_UNIT_SIZE}")
    return HEAD.pack(size, _int64(tags_code), _int64(msg_store_time), len(bm)) + bm


def same_bit_map_length(bit_maps) -> int | None:
    """The one bitmap length of a run's units (0 when none has a bitmap; None and b"" count as 0), or None
    when their lengths differ."""
    if bit_maps is None:
        return 0
    try:
        distinct = set(bit_maps)  # the distinct bitmaps of a run are few
    except TypeError:  # (a bytearray: no hash)
        distinct = bit_maps
    lengths = {len(b) if b else 0 for b in distinct}
    return lengths.pop() if len(lengths) == 1 else (0 if not lengths else None)


def encode_units(tags_codes, store_times, bit_maps, bit_map_length: int) -> bytes:
    """encode_unit of each (tagsCode, store time, bitmap), joined: units whose bitmaps all have
    `bit_map_length` bytes (same_bit_map_length), encoded as one array of rows. Values out of the long range
    wrap as encode_unit wraps them."""
    size = MIN_UNIT_SIZE + bit_map_length
    if size > MAX_UNIT_SIZE:
        raise ValueError(f"ext unit of {size} bytes is larger than RocketMQ's {MAX_UNIT_SIZE}")
    fields = [("size", ">i2"), ("tags", ">i8"), ("time", ">i8"), ("bm_size", ">i2")]
    if bit_map_length:
        fields.append(("bm", f"S{bit_map_length}"))
    rows = np.empty(len(tags_codes), dtype=np.dtype(fields))
    rows["size"] = size
    rows["tags"] = _int64_column(tags_codes)
    rows["time"] = _int64_column(store_times)
    rows["bm_size"] = bit_map_length
    if bit_map_length:
        rows["bm"] = bit_maps
    return rows.tobytes()


def _int64_column(values) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.int64)
    except OverflowError:  # (Java longs never are; wrap as encode_unit does)
        return np.array([_int64(int(v)) for v in values], dtype=np.int64)


def read_size(buf, pos: int) -> int:
    """The size field at `pos` (readBySkip); 0 when fewer than 2 bytes are left (nothing written)."""
    if pos < 0 or len(buf) - pos < 2:
        return 0
    return SIZE.unpack_from(buf, pos)[0]


def decode_unit(buf, pos: int = 0, limit: int | None = None) -> ExtUnit | None:
    """CqExtUnit.read over buf[pos:limit]: the unit there, or None when there is none (fewer than 2 bytes, or a
    size below 1: unwritten space or the end marker). A unit cut short by `limit` raises CorruptDataError
    (Java would throw a BufferUnderflowException there)."""
    end = len(buf) if limit is None else min(limit, len(buf))
    if pos < 0 or pos + 2 > end:
        return None
    size = SIZE.unpack_from(buf, pos)[0]
    if size < 1:
        return None
    if end - pos < MIN_UNIT_SIZE:
        raise CorruptDataError(
            f"truncated consume queue ext unit: {end - pos} bytes left, a unit needs {MIN_UNIT_SIZE}", pos
        )
    size, tags, store_time, bm_size = HEAD.unpack_from(buf, pos)
    if bm_size < 1:
        return ExtUnit(size, tags, store_time, bm_size, None)
    if end - pos - MIN_UNIT_SIZE < bm_size:
        raise CorruptDataError(
            f"truncated consume queue ext unit: bitmap of {bm_size} bytes, {end - pos - MIN_UNIT_SIZE} left", pos
        )
    start = pos + MIN_UNIT_SIZE
    return ExtUnit(size, tags, store_time, bm_size, bytes(buf[start : start + bm_size]))
