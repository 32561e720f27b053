"""The ROCKETMQ header form against RocketMQSerializable's layout: bytes written out by hand, the sizes and offsets
RocketMQ's own RocketMQSerializableTest checks, strictness on truncated or overlong lengths, and round trips."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.remoting import header_binary
from rocketstore.remoting.codes import LanguageCode, SerializeType
from rocketstore.remoting.command import RemotingCommand
from rocketstore.remoting.errors import RemotingProtocolError


def cmd(**kw):
    base = dict(code=103, language=LanguageCode.JAVA, version=2333, opaque=0x01020304, flag=0)
    base.update(kw)
    return RemotingCommand(serialize_type=SerializeType.ROCKETMQ, **base)


def test_without_remark_and_ext_fields_is_21_bytes():
    # RocketMQSerializableTest: code short | language byte | version short | opaque int | flag int | 0 | 0
    expected = bytes.fromhex("006700091d01020304000000000000000000000000")
    assert header_binary.encode(cmd()) == expected
    assert len(expected) == 21
    back = header_binary.decode(expected)
    assert (back.code, back.language, back.version, back.opaque, back.flag) == (103, 0, 2333, 0x01020304, 0)
    assert back.remark is None and back.ext_fields is None


def test_remark_length_at_13_text_from_17():
    data = header_binary.encode(cmd(remark="Sample Remark"))
    assert len(data) == 34
    assert struct.unpack_from(">i", data, 13)[0] == 13
    assert data[17:30] == b"Sample Remark"
    assert struct.unpack_from(">i", data, 30)[0] == 0
    assert header_binary.decode(data).remark == "Sample Remark"


def test_ext_fields_entry_layout():
    data = header_binary.encode(cmd(ext_fields={"key": "value"}))
    assert len(data) == 35
    assert struct.unpack_from(">i", data, 17)[0] == 14  # short 3 + "key" + int 5 + "value"
    assert data[21:] == b"\x00\x03key\x00\x00\x00\x05value"
    assert header_binary.decode(data).ext_fields == {"key": "value"}


def test_fast_encode_example_round_trips():
    # RocketMQSerializableTest.testFastEncode: flag 3, version 99, opaque 1001, a header of str and num
    c = cmd(code=1, remark="remark", opaque=1001, version=99, flag=3, ext_fields={"str": "s1", "num": "100"})
    back = header_binary.decode(header_binary.encode(c))
    assert (back.code, back.remark, back.opaque, back.version, back.flag) == (1, "remark", 1001, 99, 3)
    assert back.ext_fields == {"str": "s1", "num": "100"}


def test_utf8_lengths_are_bytes_not_characters():
    data = header_binary.encode(cmd(remark="é", ext_fields={"ü": "日本"}))
    assert struct.unpack_from(">i", data, 13)[0] == 2
    assert data[17:19] == "é".encode() and struct.unpack_from(">i", data, 19)[0] == 14
    assert data[23:] == b"\x00\x02\xc3\xbc\x00\x00\x00\x06\xe6\x97\xa5\xe6\x9c\xac"


def test_empty_strings_read_back_as_null():
    # readStr: a zero length is null; null keys or values are not written
    data = header_binary.encode(cmd(remark="", ext_fields={"a": "", "b": "x"}))
    back = header_binary.decode(data)
    assert back.remark is None and back.ext_fields == {"b": "x"}


def test_negative_code_and_language_byte_kept():
    back = header_binary.decode(header_binary.encode(cmd(code=-2, language=200)))
    assert back.code == -2 and back.language == 200


@pytest.mark.parametrize(
    "data",
    [
        b"",
        bytes(12),  # fixed fields cut short
        bytes(13),  # no remark length
        bytes(13) + struct.pack(">i", 5) + b"abc",  # remark cut short
        bytes(13) + struct.pack(">i", -1) + bytes(4),  # negative remark length
        bytes(13) + bytes(4),  # no ext length
        bytes(13) + bytes(4) + struct.pack(">i", 100) + bytes(10),  # ext length beyond the header
        bytes(13) + bytes(4) + struct.pack(">i", -3),
        bytes(13) + bytes(4) + struct.pack(">i", 5) + b"\x00\x09key\x00\x00",  # key beyond the ext area
        bytes(13) + bytes(4) + struct.pack(">i", 6) + b"\x00\x01k\x00\x00\x00",  # value length cut short
        bytes(13) + bytes(4) + struct.pack(">i", 3) + b"\xff\xffk",  # negative key length
        bytes(13) + struct.pack(">i", 2) + b"\xff\xfe" + bytes(4),  # remark not UTF-8
    ],
)
def test_malformed_headers_are_protocol_errors(data):
    with pytest.raises(RemotingProtocolError):
        header_binary.decode(data)


nonempty = st.text(min_size=1, max_size=30)


@given(
    code=st.integers(-(2**15), 2**15 - 1),
    language=st.integers(0, 255),
    version=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    remark=st.none() | nonempty,
    ext=st.none() | st.dictionaries(nonempty, nonempty, min_size=1, max_size=8),
)
def test_round_trip(code, language, version, opaque, flag, remark, ext):
    c = cmd(code=code, language=language, version=version, opaque=opaque, flag=flag, remark=remark, ext_fields=ext)
    assert header_binary.decode(header_binary.encode(c)) == c


@given(st.binary(max_size=200))
def test_garbage_is_a_command_or_a_protocol_error(data):
    try:
        header_binary.decode(data)
    except RemotingProtocolError:
        pass


@given(st.data())
def test_every_strict_prefix_is_an_error(data):
    c = cmd(remark="r", ext_fields={"k": "v", "key2": "value2"})
    encoded = header_binary.encode(c)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(RemotingProtocolError):
        header_binary.decode(encoded[:cut])
