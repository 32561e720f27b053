"""fastjson's output as RocketMQ's RemotingSerializable writes it, and the reader for it. Expectations are written
out from fastjson 1.2.x's rules (sorted bean fields, nulls left out, unquoted non-string map keys, its escape table)
and from RocketMQ's RemotingSerializableTest."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.remoting import fastjson
from rocketstore.remoting.errors import RemotingProtocolError
from rocketstore.remoting.fastjson import Bean


def test_bean_fields_sorted_and_nulls_left_out():
    assert fastjson.dumps(Bean(zeta=1, alpha="a", mid=None, beta=[1, 2], flag=False)) == (
        '{"alpha":"a","beta":[1,2],"flag":false,"zeta":1}'
    )


def test_remoting_serializable_string_list():
    # RemotingSerializableTest.testToJson_normalString
    bean = Bean(stringList=["a", "o", "e", "i", "u", "v"])
    assert fastjson.dumps(bean) == '{"stringList":["a","o","e","i","u","v"]}'


def test_long_map_keys_unquoted_by_default_quoted_in_standard_mode():
    # RemotingSerializableTest.testEncode: a Map<Long, String> is not valid JSON by default, valid with
    # BrowserCompatible + QuoteFieldNames + MapSortField
    bean = Bean(map={0: "Test"})
    default = fastjson.dumps(bean)
    assert default == '{"map":{0:"Test"}}'
    with pytest.raises(ValueError):
        json.loads(default)
    standard = fastjson.dumps(bean, standard=True)
    assert standard == '{"map":{"0":"Test"}}'
    assert json.loads(standard) == {"map": {"0": "Test"}}


def test_maps_keep_their_order_unless_standard():
    m = {"b": 1, "a": 2, 10: "x", 2: "y"}
    assert fastjson.dumps(m) == '{"b":1,"a":2,10:"x",2:"y"}'
    assert fastjson.dumps(m, standard=True) == '{"2":"y","10":"x","a":2,"b":1}'


def test_map_null_values_left_out():
    assert fastjson.dumps({"a": None, "b": "x"}) == '{"b":"x"}'


def test_default_escapes():
    text = '\x00\x07\x08\t\n\x0b\x0c\r\x1f"\\\x7f\x9f\xa0/é日😀'
    expected = '"\\u0000\\u0007\\b\\t\\n\\u000B\\f\\r\\u001F\\"\\\\\\u007F\\u009F\xa0/é日😀"'
    assert fastjson.quote(text) == expected
    assert json.loads(expected) == text


def test_browser_compatible_escapes():
    text = '\x00\x08/"\\\x7f\xa0é😀a'
    expected = '"\\u0000\\b\\/\\"\\\\\\u007F\\u00A0\\u00E9\\uD83D\\uDE00a"'
    assert fastjson.quote(text, standard=True) == expected
    assert json.loads(expected) == text
    assert fastjson.quote(text, standard=True).isascii()


def test_sets_written_sorted():
    assert fastjson.dumps({"c": {"b", "a"}}) == '{"c":["a","b"]}'


def test_reader_takes_unquoted_integer_keys_outside_strings_only():
    text = '{"brokerAddrs":{0:"127.0.0.1:10911",1:"a,2:b"},"s":"{3:\\"x\\"}","list":[1, 2]}'
    assert fastjson.loads(text) == {
        "brokerAddrs": {"0": "127.0.0.1:10911", "1": "a,2:b"},
        "s": '{3:"x"}',
        "list": [1, 2],
    }
    assert fastjson.loads(b'{ -1 : "neg" , 7:{8:[]}}') == {"-1": "neg", "7": {"8": []}}


@pytest.mark.parametrize("bad", [b"{", b"\xff\xfe", b'{"a":}', b"[" * 100_000, b'{a:"x"}'])
def test_reader_errors_are_protocol_errors(bad):
    with pytest.raises(RemotingProtocolError):
        fastjson.loads(bad)


keys = st.text(max_size=10) | st.integers(-(2**63), 2**63 - 1)
scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=8,
)


def normalized(v):
    """What a reader gets back: integer keys as their text, null map entries gone."""
    if isinstance(v, dict):
        return {str(k): normalized(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [normalized(x) for x in v]
    return v


@settings(max_examples=60)
@given(values)
def test_round_trip_default(v):
    if isinstance(v, dict) and len({str(k) for k in v}) != len(v):
        return  # 1 and "1" collide once keys are text
    assert fastjson.loads(fastjson.dumps(v)) == normalized(v)


@settings(max_examples=60)
@given(values)
def test_standard_mode_is_strict_ascii_json(v):
    out = fastjson.dumps(v, standard=True)
    assert out.isascii()
    parsed = json.loads(out)
    if not (isinstance(v, dict) and len({str(k) for k in v}) != len(v)):
        assert parsed == normalized(v)


@given(st.text())
def test_strings_round_trip_in_both_modes(s):
    assert json.loads(fastjson.quote(s)) == s
    assert json.loads(fastjson.quote(s, standard=True)) == s
