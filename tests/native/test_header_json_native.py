"""The JSON header's C reader (remoting.c decode_json_header) against header_json.decode_py: every header the C
reads gives the command decode_py gives (and decode_py does not refuse it), the plain shape RocketMQ's fastjson
writes is always read by the C, and damaged headers are either left to decode_py or read as it reads them."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore import engine
from rocketstore.remoting import header_json as H
from rocketstore.remoting.command import RemotingCommand
from rocketstore.remoting.errors import RemotingProtocolError

pytestmark = pytest.mark.skipif(engine.EXTENSION is None, reason=f"no extension: {engine.REASON}")

INT32 = st.integers(-(2**31), 2**31 - 1)
PLAIN_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)  # quotes, backslashes, \x01, \x02: escaped
LANGUAGES = sorted(H._LANGUAGE_CODES)


def c_read(data: bytes) -> RemotingCommand | None:
    got = engine.EXTENSION.decode_json_header(data, H._LANGUAGE_CODES)
    return None if got is None else RemotingCommand(*got, b"", H.SerializeType.JSON)


def python_read(data: bytes) -> RemotingCommand | None:
    try:
        return H.decode_py(data)
    except (RemotingProtocolError, ValueError):
        return None


@st.composite
def plain_headers(draw):
    """A header as fastjson writes RemotingCommand: sorted members, no nulls, string extFields."""
    h = {"code": draw(INT32)}
    if draw(st.booleans()):
        h["extFields"] = draw(st.dictionaries(PLAIN_TEXT, PLAIN_TEXT, max_size=6))
    h["flag"] = draw(INT32)
    h["language"] = draw(st.sampled_from(LANGUAGES))
    h["opaque"] = draw(INT32)
    if draw(st.booleans()):
        h["remark"] = draw(PLAIN_TEXT)
    h["serializeTypeCurrentRPC"] = "JSON"
    h["version"] = draw(INT32)
    return h


scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False), st.text(max_size=6)
)


@st.composite
def odd_headers(draw):
    """Anything near the shape: wrong types, unknown members, nulls, big numbers, escapes, nesting."""
    h = draw(plain_headers())
    for _ in range(draw(st.integers(0, 3))):
        key = draw(
            st.sampled_from(
                [
                    "code",
                    "flag",
                    "opaque",
                    "version",
                    "language",
                    "remark",
                    "extFields",
                    "x",
                    "ü",
                    "code\x00",
                    "remark\x00",
                ]
            )
        )
        h[key] = draw(
            st.one_of(scalar, st.dictionaries(st.text(max_size=3), scalar, max_size=3), st.lists(scalar, max_size=2))
        )
    return h


def dump(h, spaced: bool, ascii_only: bool) -> bytes:
    seps = (", ", ": ") if spaced else (",", ":")
    return json.dumps(h, separators=seps, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@settings(max_examples=400)
@given(plain_headers(), st.booleans(), st.booleans())
def test_the_plain_shape_is_read_by_the_c_as_python_reads_it(h, spaced, ascii_only):
    data = dump(h, spaced, ascii_only)
    got = c_read(data)
    assert got is not None
    assert got == python_read(data)
    assert got.language == H._LANGUAGE_CODES[h["language"]] and got.ext_fields == h.get("extFields")


@settings(max_examples=600)
@given(odd_headers(), st.booleans(), st.booleans())
def test_other_headers_are_left_to_python_or_read_alike(h, spaced, ascii_only):
    data = dump(h, spaced, ascii_only)
    got = c_read(data)
    if got is not None:
        assert got == python_read(data)


@settings(max_examples=600)
@given(plain_headers(), st.data())
def test_damaged_headers_are_left_to_python_or_read_alike(h, data):
    raw = bytearray(dump(h, False, False))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.sampled_from(b'{}[]":,0-9 \\\x00\x7f\xc3\xedtrue'))
    cut = data.draw(st.integers(0, len(raw)))
    for sample in (bytes(raw), bytes(raw[:cut])):
        got = c_read(sample)
        if got is not None:
            assert got == python_read(sample)


def test_by_hand():
    # fastjson's bytes for a SEND_MESSAGE_V2 request: the fields as RemotingCommand's getters sort them
    data = (
        b'{"code":310,"extFields":{"a":"pg","b":"T"},"flag":0,"language":"JAVA","opaque":7,'
        b'"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    assert engine.EXTENSION.decode_json_header(data, H._LANGUAGE_CODES) == (
        310,
        0,
        479,
        7,
        0,
        None,
        {"a": "pg", "b": "T"},
    )
    assert c_read(b"{}") == RemotingCommand(0, H._LANGUAGE_CODES["JAVA"], 0, 0, 0, None, None)
    # escapes: a send's properties (\u0001, \u0002), a pair of surrogates, the short ones
    got = c_read(b'{"extFields":{"i":"KEYS\\u0001k\\u0002\\ud83d\\ude00\\"\\\\\\/\\t"}}')
    assert got.ext_fields == {"i": 'KEYS\x01k\x02\U0001f600"\\/\t'}
    # a name with a NUL in it is not the member whose name it starts with
    assert c_read(b'{"code\\u0000x":5,"remark\\u0000":"r"}') == python_read(b'{"code\\u0000x":5,"remark\\u0000":"r"}')
    assert c_read(b'{"code\\u0000x":5}').code == 0
    for lone in (b'{"remark":"\\ud800"}', b'{"remark":"\\udc00x"}', b'{"remark":"\\x"}', b'{"remark":"\\u12"}'):
        assert c_read(lone) is None, lone
    for left in (
        b'{"code":01}',
        b'{"code":1.0}',
        b'{"code":2147483648}',
        b'{"language":null}',
        b'{"language":"KLINGON"}',
        b'{"code":1} x',
        b'{"extFields":{"a":null}}',
        b"[1]",
        b'{"x":[1]}',
    ):
        assert c_read(left) is None, left
