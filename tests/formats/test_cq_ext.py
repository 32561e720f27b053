"""formats.cq_ext: the ConsumeQueue ext unit, end marker and addresses against bytes and values written out by
hand from RocketMQ's ConsumeQueueExt (CqExtUnit.write: short size, long tagsCode, long msgStoreTime, short
bitMapSize, the bitmap; MAX_ADDR = Integer.MIN_VALUE - 1L; decorate = offset + Long.MIN_VALUE)."""

import struct

import pytest

from rocketstore.errors import CorruptDataError
from rocketstore.formats import cq_ext as X


def test_constants():
    assert X.MAX_ADDR == -2147483649 == -(2**31) - 1
    assert X.MAX_REAL_OFFSET == 2**63 - 2**31 - 1
    assert X.MIN_UNIT_SIZE == 20
    assert X.MAX_UNIT_SIZE == 32767
    assert X.END_BLANK_DATA_LENGTH == 4
    assert X.END_MARKER == b"\xff\xff"


def test_unit_without_bitmap():
    # size 20 | tagsCode 0x41 | store time 1700000000123 | bitMapSize 0
    expected = b"\x00\x14" + b"\x00\x00\x00\x00\x00\x00\x00\x41" + (1700000000123).to_bytes(8, "big") + b"\x00\x00"
    assert X.encode_unit(0x41, 1700000000123) == expected
    assert X.encode_unit(0x41, 1700000000123, b"") == expected  # an empty bitmap writes none either
    u = X.decode_unit(expected)
    assert u == X.ExtUnit(20, 0x41, 1700000000123, 0, None)


def test_unit_with_bitmap_and_negative_tags():
    bitmap = bytes([0x80, 0x01, 0xFF, 0x00, 0x10, 0x20, 0x30, 0x40])  # 64 bits, RocketMQ's default length
    tags = -1867987054  # a negative String.hashCode, sign-extended to a long in the unit
    expected = struct.pack(">h", 28) + struct.pack(">q", tags) + struct.pack(">q", 5) + struct.pack(">h", 8) + bitmap
    assert expected[:2] == b"\x00\x1c" and expected[2:10] == b"\xff\xff\xff\xff\x90\xa8\xc7\x92"
    data = X.encode_unit(tags, 5, bitmap)
    assert data == expected
    u = X.decode_unit(b"junk" + data + b"\x00" * 8, 4)
    assert u == X.ExtUnit(28, tags, 5, 8, bitmap)
    assert X.unit_size(bitmap) == 28 and X.unit_size(None) == 20


def test_decode_none_for_blank_and_marker():
    assert X.decode_unit(b"\x00" * 40) is None  # nothing written
    assert X.decode_unit(X.END_MARKER + b"\x00\x00") is None  # the end marker, size -1
    assert X.decode_unit(b"\x00") is None  # not even a size
    assert X.read_size(X.END_MARKER, 0) == -1
    assert X.read_size(b"\x00\x1c", 0) == 28
    assert X.read_size(b"\x00", 0) == 0


def test_decode_truncated_raises():
    data = X.encode_unit(1, 2, b"\x01\x02")
    with pytest.raises(CorruptDataError):
        X.decode_unit(data, 0, len(data) - 1)
    with pytest.raises(CorruptDataError):
        X.decode_unit(data[:10])


def test_oversized_unit_refused():
    X.encode_unit(0, 0, b"\x00" * (32767 - 20))
    with pytest.raises(ValueError):
        X.encode_unit(0, 0, b"\x00" * (32767 - 19))


def test_addresses():
    # decorate(0) is Long.MIN_VALUE, ConsumeQueueExtTest.testRecovery's min address
    assert X.decorate(0) == -9223372036854775808
    assert X.decorate(60) == -9223372036854775748
    assert X.decorate(48 * 1024 * 1024) == -(2**63) + 50331648
    assert X.undecorate(-9223372036854775748) == 60
    assert X.undecorate(X.decorate(123456789)) == 123456789
    # a value that already is an address stays; undecorate of a plain tagsCode is that tagsCode
    assert X.decorate(X.MAX_ADDR) == X.MAX_ADDR
    assert X.undecorate(12345) == 12345
    assert X.undecorate(-5) == -5
    # Java overflow: a negative non-address wraps (-5 + Long.MIN_VALUE = Long.MAX_VALUE - 4)
    assert X.decorate(-5) == 2**63 - 5
    # the highest offset an address carries decorates to MAX_ADDR itself
    assert X.decorate(X.MAX_REAL_OFFSET) == X.MAX_ADDR


def test_is_ext_addr():
    assert X.is_ext_addr(X.MAX_ADDR)
    assert X.is_ext_addr(-(2**63))
    assert not X.is_ext_addr(-(2**31))  # Integer.MIN_VALUE: a tags hash can be that
    assert not X.is_ext_addr(0)
    assert not X.is_ext_addr(2**31 - 1)
    assert not X.is_ext_addr(1)  # what ConsumeQueueExt.put answers when it fails
