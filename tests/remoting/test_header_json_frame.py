"""The JSON header form and the frame around both forms: bytes written out by hand from RemotingCommand.encode's
layout and fastjson's rules, a header as the C++ core client writes it (jsoncpp, sorted keys, a trailing newline),
and the decoder's limits: truncated, oversized and garbage frames are RemotingProtocolErrors."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.remoting import frame, header_json
from rocketstore.remoting.codes import LanguageCode, SerializeType
from rocketstore.remoting.command import RemotingCommand, response_to
from rocketstore.remoting.errors import RemotingProtocolError


def test_json_header_as_fastjson_writes_it():
    c = RemotingCommand(code=103, version=2333, opaque=5, ext_fields={"key": "value"})
    assert header_json.encode(c) == (
        b'{"code":103,"extFields":{"key":"value"},"flag":0,"language":"JAVA","opaque":5,'
        b'"serializeTypeCurrentRPC":"JSON","version":2333}'
    )


def test_response_header_has_remark_and_no_ext_fields():
    request = RemotingCommand(code=999, opaque=77, language=LanguageCode.CPP)
    resp = response_to(request, 3, " request type 999 not supported", version=479)
    assert header_json.encode(resp) == (
        b'{"code":3,"flag":1,"language":"JAVA","opaque":77,"remark":" request type 999 not supported",'
        b'"serializeTypeCurrentRPC":"JSON","version":479}'
    )


def test_whole_json_frame_by_hand():
    c = RemotingCommand(code=105, opaque=1, ext_fields={"topic": "T"}, body=b"xyz")
    header = (
        b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":1,'
        b'"serializeTypeCurrentRPC":"JSON","version":0}'
    )
    expected = struct.pack(">ii", 4 + len(header) + 3, len(header)) + header + b"xyz"
    assert frame.encode(c) == expected
    assert frame.decode(expected[4:]) == c


def test_whole_rocketmq_frame_by_hand():
    c = RemotingCommand(code=34, opaque=9, serialize_type=SerializeType.ROCKETMQ, body=b"{}")
    header = bytes.fromhex("002200000000000009000000000000000000000000")
    expected = struct.pack(">iI", 4 + 21 + 2, (1 << 24) | 21) + header + b"{}"
    assert frame.encode(c) == expected
    assert frame.decode(expected[4:]) == c


def test_cpp_client_header():
    # what rocketmq-client-cpp sends (seen from the rocketmq 0.4.4 wheel): jsoncpp's FastWriter output
    header = (
        b'{"code":105,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"PdRq=","topic":"T"},'
        b'"flag":0,"language":"CPP","opaque":3,"remark":"","version":63}\n'
    )
    data = struct.pack(">ii", 4 + len(header), len(header)) + header
    (c,), rest = frame.split(data)
    assert rest == b""
    assert (c.code, c.language, c.version, c.opaque, c.flag, c.remark) == (105, LanguageCode.CPP, 63, 3, 0, "")
    assert c.ext("topic") == "T" and c.ext("AccessKey") == ""


def test_json_header_lenient_field_types():
    # fastjson reads a numeric string into an int field and the extFields map as strings
    c = header_json.decode(b'{"code":"12","extFields":{"n":5,"b":true,"z":null},"language":"NOPE"}')
    assert c.code == 12 and c.ext_fields == {"n": "5", "b": "true"} and c.language == LanguageCode.OTHER
    assert c.opaque == 0 and c.version == 0 and c.remark is None


@pytest.mark.parametrize(
    "header",
    [
        b"[]",
        b'{"code":1.5}',
        b'{"code":2147483648}',
        b'{"opaque":true}',
        b'{"remark":5}',
        b'{"extFields":[]}',
        b'{"extFields":{"a":[1]}}',
        b'{"language":[]}',
        b"not json",
    ],
)
def test_bad_json_headers(header):
    with pytest.raises(RemotingProtocolError):
        header_json.decode(header)


def test_frame_length_limits():
    assert frame.frame_length(struct.pack(">i", 4)) == 4
    with pytest.raises(RemotingProtocolError):
        frame.frame_length(struct.pack(">i", 3))  # no room for the header length
    with pytest.raises(RemotingProtocolError):
        frame.frame_length(struct.pack(">i", -1))
    # NettyDecoder: the length field plus its own 4 bytes against frameMaxLength (16 MiB)
    assert frame.frame_length(struct.pack(">i", 16 * 1024 * 1024 - 4)) == 16 * 1024 * 1024 - 4
    with pytest.raises(RemotingProtocolError, match="exceeds the limit"):
        frame.frame_length(struct.pack(">i", 16 * 1024 * 1024 - 3))
    with pytest.raises(RemotingProtocolError):
        frame.frame_length(struct.pack(">i", 1000), max_frame=1000)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x00\x00\x00",
        struct.pack(">I", 10) + b"{}",  # header longer than the frame
        struct.pack(">I", (2 << 24) | 2) + b"{}",  # serialization type 2
        struct.pack(">I", (1 << 24) | 2) + b"{}",  # ROCKETMQ form too short
        struct.pack(">I", 2) + b"{}" + b"body",  # JSON header {} is fine: code 0
    ],
)
def test_bad_frames(body):
    if body.endswith(b"body"):
        assert frame.decode(body).body == b"body"
        return
    with pytest.raises(RemotingProtocolError):
        frame.decode(body)


def test_split_keeps_incomplete_tail():
    one = frame.encode(RemotingCommand(code=1, opaque=1))
    two = frame.encode(RemotingCommand(code=2, opaque=2, body=b"b"))
    data = one + two
    for cut in range(len(data) + 1):
        cmds, rest = frame.split(data[:cut])
        consumed = sum(len(x) for x in (one, two)[: len(cmds)])
        assert rest == data[consumed:cut]
        assert [c.code for c in cmds] == [1, 2][: len(cmds)]


def test_split_refuses_oversized_before_reading_it():
    with pytest.raises(RemotingProtocolError):
        frame.split(struct.pack(">i", 2**31 - 1), max_frame=1024)


int32 = st.integers(-(2**31), 2**31 - 1)
ext_maps = st.none() | st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=6)


@given(
    code=int32,
    language=st.sampled_from(list(LanguageCode)),
    version=int32,
    opaque=int32,
    flag=int32,
    remark=st.none() | st.text(max_size=30),
    ext=ext_maps,
    body=st.binary(max_size=50),
)
def test_json_frame_round_trip(code, language, version, opaque, flag, remark, ext, body):
    c = RemotingCommand(code, int(language), version, opaque, flag, remark, ext, body)
    (back,), rest = frame.split(frame.encode(c))
    assert back == c and rest == b""


@given(st.binary(max_size=300))
def test_garbage_frames_only_raise_protocol_errors(data):
    try:
        frame.split(data, max_frame=4096)
    except RemotingProtocolError:
        pass
    try:
        frame.decode(data)
    except RemotingProtocolError:
        pass


@given(st.binary(max_size=120), st.sampled_from([0, 1]))
def test_random_headers_of_either_type(header, kind):
    data = struct.pack(">I", (kind << 24) | len(header)) + header
    try:
        frame.decode(data)
    except RemotingProtocolError:
        pass
