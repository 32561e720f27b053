"""The fast paths of the per-request codec against the general ones and against headers written out by hand:
header_json.encode / encode_bean and decode / decode_general on random commands and random JSON headers
(hypothesis), the send header as the C++ core client and the Java client put it on the wire
(SendMessageRequestHeaderV2's short field names a..n, RocketMQ's common/.../protocol/header/), and the custom
header reader (headers.Spec) against Java's Integer.parseInt / Long.parseLong / Boolean.parseBoolean."""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.remoting import fastjson, frame, header_json, headers
from rocketstore.remoting.broker import send
from rocketstore.remoting.codes import LanguageCode, RequestCode, ResponseCode
from rocketstore.remoting.command import RemotingCommand
from rocketstore.remoting.errors import HeaderError, RemotingProtocolError

# ---------------------------------------------------------------- the send header as the clients write it
# rocketmq-client-cpp (the core of the `rocketmq` 0.4.4 wheel): RemotingCommand::Encode builds a Json::Value and
# writes it with jsoncpp's FastWriter (object keys sorted, a trailing newline); SendMessageRequestHeaderV2::Encode
# puts d, e, f, h, l in as JSON numbers and g, j, k, m as strings; the credentials fields come along empty (no
# AccessKey configured) and OnsChannel is "ALIYUN". Properties: TAGS, KEYS and UNIQ_KEY with \u0001 \u0002.
CPP_PROPS = "TAGS\x01TagA\x02KEYS\x01k1\x02UNIQ_KEY\x017F00000100002A9F0000000000000001\x02"
CPP_HEADER = (
    b'{"code":310,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"","a":"cpp-group","b":"TopicTest",'
    b'"c":"TBW102","d":4,"e":3,"f":0,"g":"1700000000123","h":0,'
    b'"i":"TAGS\\u0001TagA\\u0002KEYS\\u0001k1\\u0002UNIQ_KEY\\u00017F00000100002A9F0000000000000001\\u0002",'
    b'"j":"0","k":"false","l":0,"m":"false"},"flag":0,"language":"CPP","opaque":7,"remark":"","version":63}\n'
)
# The Java client (DefaultMQProducerImpl.sendKernelImpl, MQClientAPIImpl.sendMessage): every non-null field of
# SendMessageRequestHeaderV2 as its toString() in a HashMap<String, String> (makeCustomHeaderToNet), l left null
# for a first send, n the broker's name; 13 entries resize the map to 32 buckets, and a one-letter key's hash is
# its char, so the map iterates a..n in order. fastjson writes the RemotingCommand bean sorted, the map in its
# own order, \u0001 / \u0002 as \u00XX escapes.
JAVA_PROPS = "KEYS\x01order-1\x02UNIQ_KEY\x01AC11000100002A9F0000000000000002\x02WAIT\x01true\x02TAGS\x01TagB\x02"
JAVA_HEADER = (
    b'{"code":310,"extFields":{"a":"java-group","b":"TopicTest","c":"TBW102","d":"4","e":"1","f":"0",'
    b'"g":"1700000000456","h":"0","i":"KEYS\\u0001order-1\\u0002UNIQ_KEY\\u0001AC11000100002A9F0000000000000002'
    b'\\u0002WAIT\\u0001true\\u0002TAGS\\u0001TagB\\u0002","j":"0","k":"false","m":"false","n":"broker-a"},'
    b'"flag":0,"language":"JAVA","opaque":12,"serializeTypeCurrentRPC":"JSON","version":479}'
)


def test_cpp_client_send_header():
    cmd = header_json.decode(CPP_HEADER)
    assert cmd == header_json.decode_general(CPP_HEADER)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark) == (310, 1, 63, 7, 0, "")
    # jsoncpp's numbers come back as their text, as fastjson reads them into a String map
    assert cmd.ext_fields == {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "", "a": "cpp-group",
                              "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000123",
                              "h": "0", "i": CPP_PROPS, "j": "0", "k": "false", "l": "0", "m": "false"}  # fmt: skip
    assert send.read_header(cmd, v2=True) == {
        "producerGroup": "cpp-group", "topic": "TopicTest", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": 3, "sysFlag": 0, "bornTimestamp": 1700000000123, "flag": 0, "properties": CPP_PROPS,
        "reconsumeTimes": 0, "unitMode": False, "batch": False, "maxReconsumeTimes": 0, "brokerName": None,
    }  # fmt: skip


def test_java_client_send_header():
    cmd = header_json.decode(JAVA_HEADER)
    assert cmd == header_json.decode_general(JAVA_HEADER)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark) == (310, 0, 479, 12, 0, None)
    assert send.read_header(cmd, v2=True) == {
        "producerGroup": "java-group", "topic": "TopicTest", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": 1, "sysFlag": 0, "bornTimestamp": 1700000000456, "flag": 0, "properties": JAVA_PROPS,
        "reconsumeTimes": 0, "unitMode": False, "batch": False, "maxReconsumeTimes": None, "brokerName": "broker-a",
    }  # fmt: skip
    # written back by this codec, the command is the bytes the Java client sent (the same writer as fastjson)
    assert header_json.encode(cmd) == header_json.encode_bean(cmd) == JAVA_HEADER


def test_send_answer_header_by_hand():
    # SendMessageResponseHeader as the broker answers a send (msgId, queueId, queueOffset, transactionId, then
    # preSend's MSG_REGION and TRACE_ON), written by fastjson: the bean's fields sorted, the map in its order
    ext = {"msgId": "7F00000100002A9F0000000000000000", "queueId": "3", "queueOffset": "0",
           "transactionId": "U1", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}  # fmt: skip
    resp = RemotingCommand(code=ResponseCode.SUCCESS, opaque=7, flag=1, ext_fields=ext, version=479)
    expected = (
        b'{"code":0,"extFields":{"msgId":"7F00000100002A9F0000000000000000","queueId":"3","queueOffset":"0",'
        b'"transactionId":"U1","MSG_REGION":"DefaultRegion","TRACE_ON":"true"},"flag":1,"language":"JAVA",'
        b'"opaque":7,"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    assert header_json.encode(resp) == header_json.encode_bean(resp) == expected


# ---------------------------------------------------------------- encode: fast == bean on random commands
def _odd_ints():
    return st.integers(-(2**70), 2**70) | st.booleans() | st.sampled_from(list(ResponseCode)[:5]) | st.none()


# texts near the escapes: the control characters, DEL and 128..159 (fastjson's \u00XX), quotes, backslashes, "\u00"
low_text = st.text(st.characters(max_codepoint=0xA0), max_size=12) | st.sampled_from(["\\u001a", "\x1f\x7f", "\x9f/"])
texts = st.text(max_size=20) | low_text

commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**31), 2**31 - 1) | _odd_ints(),
    language=st.integers(-2, 20) | st.sampled_from(list(LanguageCode)) | st.booleans() | st.just("JAVA"),
    version=st.integers(-(2**31), 2**31 - 1) | _odd_ints(),
    opaque=st.integers(-(2**31), 2**31 - 1) | _odd_ints(),
    flag=st.integers(0, 3) | _odd_ints(),
    remark=st.none() | texts | st.integers(),
    ext_fields=st.none()
    | st.dictionaries(texts, texts | st.none(), max_size=8)
    | st.dictionaries(
        st.text(max_size=4) | st.integers(-5, 5), st.text(max_size=5) | st.integers() | st.booleans(), max_size=4
    ),
)


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # the two paths must fail alike too
        return "error", type(e)


@settings(max_examples=600)
@given(commands)
def test_fast_encode_writes_what_the_bean_writer_writes(cmd):
    assert _outcome(header_json.encode, cmd) == _outcome(header_json.encode_bean, cmd)


@pytest.mark.parametrize("text", ["\x7f", "a\x7fb", "\x0b", "\x1a", "\x1f", "\x80", "\x9f", "\xa0", "\\u001a", "é\x01"])
def test_escapes_json_writes_otherwise_than_fastjson(text):
    # DEL (ASCII, yet \u007F for fastjson), 128..159, and the control characters whose \u00XX has hex letters
    cmd = RemotingCommand(code=1, remark=text, ext_fields={text: text})
    quoted = fastjson.quote(text).encode()
    assert header_json.encode(cmd) == header_json.encode_bean(cmd)
    assert b'"remark":' + quoted + b"," in header_json.encode(cmd)


# ---------------------------------------------------------------- decode: fast == general on random headers
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["JAVA", "CPP", "GO", "RUST", "NOPE", "12", "-3", "2147483648"])
)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=4)
header_objects = st.fixed_dictionaries(
    {},
    optional={
        "code": st.integers(-(2**31), 2**31 - 1) | json_scalars,
        "language": st.sampled_from([m.name for m in LanguageCode]) | json_scalars,
        "version": st.integers(0, 500) | json_scalars,
        "opaque": st.integers(-(2**31), 2**31 - 1) | json_scalars,
        "flag": st.integers(0, 3) | json_scalars,
        "remark": st.text(max_size=10) | json_scalars,
        "extFields": st.dictionaries(st.text(max_size=6), st.text(max_size=12) | json_values, max_size=6) | json_values,
        "serializeTypeCurrentRPC": st.just("JSON"),
    },
)


def _decoded(data):
    try:
        return "ok", header_json.decode_general(data)
    except RemotingProtocolError as e:
        return "error", str(e)


@settings(max_examples=400)
@given(header_objects, st.booleans())
def test_fast_decode_reads_what_the_general_reader_reads(obj, ascii_only):
    data = json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    expected = _decoded(data)
    try:
        got = "ok", header_json.decode(data)
    except RemotingProtocolError as e:
        got = "error", str(e)
    assert got == expected


@given(st.binary(max_size=200))
def test_fast_decode_on_garbage_fails_as_the_general_reader(data):
    expected = _decoded(data)
    try:
        got = "ok", header_json.decode(data)
    except RemotingProtocolError as e:
        got = "error", str(e)
    assert got == expected


def test_bare_integer_keys_go_the_general_way():
    # fastjson's unquoted map keys are not JSON: the fast reader hands the header on
    data = b'{"code":1,"extFields":{7:"x"}}'
    assert header_json.decode(data).ext_fields == {"7": "x"}


# ---------------------------------------------------------------- the custom header reader
NUMBER = re.compile(r"[+-]?[0-9]+")


def java_parse(kind, text):
    """Integer.parseInt / Long.parseLong over ASCII (the digits RocketMQ's clients write), Boolean.parseBoolean."""
    if kind == "str":
        return text
    if kind == "bool":
        return text.lower() == "true"
    if not NUMBER.fullmatch(text):
        return ValueError
    value = int(text)
    bits = 32 if kind == "int" else 64
    return value if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1) else ValueError


def java_decode(ext, required, optional):
    """decodeCommandCustomHeader: @CFNotNull fields first, in the order given, the first problem reported."""
    out = {}
    for name, kind in list(required.items()) + list(optional.items()):
        text = ext.get(name)
        if text is None:
            if name in required:
                return ("null", name)
            out[name] = None
            continue
        value = java_parse(kind, text)
        if value is ValueError:
            return ("bad", name)
        out[name] = value
    return out


numbers = st.integers(-(2**64), 2**64).map(str) | st.sampled_from(["", "+7", "-0", "1_0", " 1", "²", "0x1"])
field_text = numbers | st.sampled_from(["true", "TRUE", "false", "yes"]) | st.text(max_size=6)


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(list("abcdefghijklmn") + ["zz"]), field_text, max_size=15))
def test_v2_send_header_reader_against_java_rules(ext):
    required = {send._LONG_TO_SHORT[k]: t for k, t in send.REQUIRED.items()}
    optional = {send._LONG_TO_SHORT[k]: t for k, t in send.OPTIONAL.items()}
    expected = java_decode(ext, required, optional)
    cmd = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=ext)
    try:
        got = send.read_header(cmd, v2=True)
    except HeaderError as e:
        message = str(e)
        assert isinstance(expected, tuple), message
        kind, name = expected
        assert (f"<{name}> is null" if kind == "null" else f"<{name}> is") in message
        return
    assert got == {send.V2_NAMES[k]: v for k, v in expected.items()}


@pytest.mark.parametrize(
    "text, value",
    [("0", 0), ("2147483647", 2147483647), ("-2147483648", -(2**31)), ("+12", 12), ("007", 7)],
)
def test_int_fields_parse_as_integer_parse_int(text, value):
    spec = headers.Spec({"x": "int"})
    assert spec.read(RemotingCommand(code=1, ext_fields={"x": text})) == {"x": value}


@pytest.mark.parametrize("text", ["2147483648", "", "1_0", "²", " 1", "0x1", "-"])
def test_int_fields_refused_as_integer_parse_int_refuses(text):
    with pytest.raises(HeaderError, match="<x>"):
        headers.Spec({"x": "int"}).read(RemotingCommand(code=1, ext_fields={"x": text}))


def test_whole_send_frame_round_trip_through_the_fast_paths():
    # the Java client's frame: length, header length (JSON = 0 in the high byte), header, body
    body = b"hello"
    data = len(JAVA_HEADER).to_bytes(4, "big") + JAVA_HEADER + body
    data = (len(data)).to_bytes(4, "big") + data
    (cmd,), rest = frame.split(data)
    assert rest == b"" and cmd.body == body and cmd.code == RequestCode.SEND_MESSAGE_V2
    assert frame.encode(cmd) == data
