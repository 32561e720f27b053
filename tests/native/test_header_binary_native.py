"""The compact remoting header (SerializeType.ROCKETMQ) read in C (remoting.c) against the pure reader
(remoting/header_binary.decode_py): the same command for every header, and the pure reader's error for every one
the C leaves to it. Headers written by the encoder, then cut, bit-flipped or given lengths that lie, and random
bytes."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.remoting import header_binary
from rocketstore.remoting.command import RemotingCommand
from rocketstore.remoting.errors import RemotingProtocolError

TEXT = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["", "é", "中文", "\U0001f600", "TAGS\x01a\x02"]))
COMMANDS = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    language=st.integers(0, 255),
    version=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    remark=TEXT.filter(lambda t: t is None or "\ud800" not in t),
    ext_fields=st.one_of(st.none(), st.dictionaries(st.text(max_size=6), TEXT, max_size=6)),
)


def outcome(fn, data):
    """What a reader makes of data: the command's fields, or the error's type and message."""
    try:
        c = fn(data)
    except RemotingProtocolError as e:
        return ("error", str(e))
    return (c.code, c.language, c.version, c.opaque, c.flag, c.remark, c.ext_fields, c.body, c.serialize_type)


def same(data):
    assert outcome(header_binary.decode, data) == outcome(header_binary.decode_py, data)


@settings(max_examples=400, deadline=None)
@given(COMMANDS)
def test_encoded_headers_read_alike(native, cmd):
    data = header_binary.encode(cmd)
    same(data)
    # by RocketMQSerializable's rules: entries with a null value are not written, empty texts read back as null
    # and their entries are dropped; no entry written at all reads back as no map
    written = {k: v for k, v in (cmd.ext_fields or {}).items() if v is not None}
    want = {k: v for k, v in written.items() if k and v} if written else None
    assert header_binary.decode(data).ext_fields == want


@settings(max_examples=400, deadline=None)
@given(COMMANDS, st.data())
def test_damaged_headers_read_alike(native, cmd, data):
    raw = bytearray(header_binary.encode(cmd))
    if raw and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= data.draw(st.integers(1, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    same(bytes(raw))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_read_alike(native, data):
    same(data)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        struct.pack(">hBhii", 10, 0, 1, 2, 0),  # no remark length
        struct.pack(">hBhiii", 10, 0, 1, 2, 0, -1) + struct.pack(">i", 0),  # a negative remark length
        struct.pack(">hBhiii", 10, 0, 1, 2, 0, 2) + b"\xff\xfe" + struct.pack(">i", 0),  # a remark not UTF-8
        struct.pack(">hBhiiii", 10, 0, 1, 2, 0, 0, 9) + b"\x00\x01a",  # extFields longer than the header
        struct.pack(">hBhiiii", 10, 0, 1, 2, 0, 0, -3),  # a negative extFields length
        struct.pack(">hBhiiii", 10, 0, 1, 2, 0, 0, 3) + b"\xff\xff\x00",  # a negative key length
    ],
)
def test_each_refusal_is_the_pure_readers(native, data):
    """The C reader takes none of these; the pure reader's error is the answer."""
    assert native.decode_binary_header(data) is None
    with pytest.raises(RemotingProtocolError):
        header_binary.decode(data)


def test_an_entry_with_a_null_value_is_dropped(native):
    data = struct.pack(">hBhiiii", 10, 0, 1, 2, 0, 0, 7 + 8) + b"\x00\x01a\x00\x00\x00\x00"
    data += b"\x00\x01b\x00\x00\x00\x01c"
    assert native.decode_binary_header(data) == (10, 0, 1, 2, 0, None, {"b": "c"})
    same(data)
