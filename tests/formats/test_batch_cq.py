"""BatchConsumeQueue units (46 B) and the client batch body of inner batches, against hand-computed bytes,
struct-packed bytes and the golden store written by RocketMQ."""

import base64
import struct

import numpy as np
import pytest
from hypothesis import given, strategies as st

from rocketstore.errors import CorruptDataError
from rocketstore.formats import batch_cq as B
from rocketstore.formats import inner_batch as IB
from rocketstore.formats.properties import parse_properties

from . import _golden as G

INT64 = st.integers(-(2**63), 2**63 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
UNIT_FIELDS = st.tuples(INT64, INT32, INT64, INT64, INT64, INT16, INT32, INT32)
GOLDEN = "store-batch-cq"

# unit 0 of BatchTopic-0 in the golden store: offset 2616, size 253, no tags, stored 1700300001610,
# queue offsets 0..1 (base 0, batch 2), compactedOffset -1, reserved 0
UNIT0_HEX = "0000000000000A38000000FD00000000000000000000018BE1C7114A00000000000000000002FFFFFFFF00000000"
UNIT0 = (2616, 253, 0, 1700300001610, 0, 2, -1, 0)


# ---- the 46-byte unit ---------------------------------------------------------------------------


def test_unit_literal_bytes():
    assert B.UNIT_SIZE == 46
    assert (B.TAGS_POS, B.STORE_TIME_POS, B.BASE_OFFSET_POS, B.BATCH_SIZE_POS, B.COMPACTED_OFFSET_POS) == (
        12,
        20,
        28,
        36,
        38,
    )
    # compactedOffset and reserved default to what putBatchMessagePositionInfo writes: -1 and 0
    assert B.encode_unit(2616, 253, 0, 1700300001610, 0, 2) == bytes.fromhex(UNIT0_HEX)
    # a negative tagsCode is sign-extended: -206781625 -> 0xFFFFFFFFF3ACC347; batch 16 -> 0x0010
    assert B.encode_unit(1, 2, -206781625, 3, 2**40, 16, 7, 9) == bytes.fromhex(
        "000000000000000100000002FFFFFFFFF3ACC3470000000000000003000001000000000000100000000700000009"
    )
    u = B.decode_unit(bytes.fromhex(UNIT0_HEX))
    assert tuple(u) == UNIT0
    assert (u.pos, u.size, u.tags, u.store_time, u.base_offset, u.batch_size) == UNIT0[:6]
    assert u.next_offset == 2


def test_golden_file_units():
    """The first two units of a BCQ file RocketMQ wrote decode to the values dumped from it with xxd."""
    with open(G.path(GOLDEN, "store", "batchconsumequeue", "BatchTopic", "0", "00000000000000000000"), "rb") as fh:
        data = fh.read()
    assert len(data) == 920
    assert data[:46] == bytes.fromhex(UNIT0_HEX)
    assert tuple(B.decode_unit(data, 46)) == (5093, 1276, 2598921, 1700300001610, 2, 12, -1, 0)
    arr = B.units(data)
    assert len(arr) == 20
    assert arr["base_offset"][:2].tolist() == [0, 2] and arr["batch_size"][:2].tolist() == [2, 12]
    assert arr["tags"][1] == 2598921  # "TagC".hashCode()
    assert B.valid_mask(arr).all()


def test_is_valid_unit():
    assert B.is_valid_unit(0, 1, 0, 1)
    assert not B.is_valid_unit(-1, 1, 0, 1)
    assert not B.is_valid_unit(0, 0, 0, 1)
    assert not B.is_valid_unit(0, 1, -1, 1)
    assert not B.is_valid_unit(0, 1, 0, 0)  # batchSize 0 fails too (a plain CQ has no such field)
    assert not B.is_valid_unit(0, 0, 0, 0)  # the unwritten rest of a file
    arr = B.units(B.encode_unit(5, 10, 0, 0, 3, 1) + bytes(46) + B.encode_unit(5, 10, 0, 0, 3, -2))
    assert B.valid_mask(arr).tolist() == [True, False, False]


def test_batch_size_must_fit_a_short():
    with pytest.raises(ValueError):
        B.encode_unit(0, 1, 0, 0, 0, 32768)
    with pytest.raises(ValueError):
        B.encode_unit(0, 1, 0, 0, 0, -32769)


@pytest.mark.parametrize("n", [0, 1, 45])
def test_decode_truncated_unit_raises(n):
    with pytest.raises(CorruptDataError) as e:
        B.decode_unit(bytes(n))
    assert e.value.offset == 0
    with pytest.raises(CorruptDataError) as e:
        B.decode_unit(bytes(100), 60)
    assert e.value.offset == 60


@given(UNIT_FIELDS, st.integers(0, 60))
def test_encode_decode_unit_match_struct(fields, at):
    raw = struct.pack(">qiqqqhii", *fields)
    assert B.encode_unit(*fields) == raw
    buf = bytes(at) + raw + b"\xff" * 3
    assert tuple(B.decode_unit(buf, at)) == fields


@given(st.lists(UNIT_FIELDS, max_size=25), st.integers(0, 45))
def test_units_numpy_view(items, tail):
    raw = b"".join(struct.pack(">qiqqqhii", *t) for t in items) + b"\x01" * tail
    arr = B.units(raw)
    assert len(arr) == len(items)  # a trailing partial unit is ignored
    assert [tuple(int(x) for x in a.item()) for a in arr] == items
    assert arr.dtype.itemsize == 46


def test_units_is_a_view_without_copy():
    buf = bytearray(B.encode_unit(1, 2, 3, 4, 5, 6) * 2)
    arr = B.units(buf)
    buf[46 + 28 : 46 + 36] = struct.pack(">q", 77)  # rewrite the second unit's base offset in place
    assert arr["base_offset"].tolist() == [5, 77]
    assert not arr.flags.owndata
    assert np.shares_memory(arr, np.frombuffer(buf, dtype=np.uint8))


# ---- the client batch body ----------------------------------------------------------------------


def test_encode_message_literal_bytes():
    # total 22 + 2 + 7 = 31; magic and body CRC are written as 0; flag 3; body "hi"; properties TAGS=A
    expected = bytes.fromhex("0000001F000000000000000000000003000000026869000754414753014102")
    assert IB.encode_message(b"hi", b"TAGS\x01A\x02", 3) == expected
    assert IB.encode_message(b"hi", "TAGS\x01A\x02", 3) == expected
    assert IB.encode_message(b"hi", {"TAGS": "A"}, 3) == expected
    # an empty message is 22 bytes; a negative flag is a Java int
    assert IB.encode_message(b"", b"", -1) == bytes.fromhex("000000160000000000000000FFFFFFFF000000000000")
    both = IB.encode_messages([(b"hi", b"TAGS\x01A\x02", 3), IB.InnerMessage(b"", b"", -1)])
    assert both == expected + IB.encode_message(b"", b"", -1)
    assert IB.decode_messages(both) == [IB.InnerMessage(b"hi", b"TAGS\x01A\x02", 3), IB.InnerMessage(b"", b"", -1)]
    assert IB.decode_messages(both)[0].properties == {"TAGS": "A"}
    assert IB.count_messages(both) == 2
    assert IB.decode_messages(b"") == [] and IB.count_messages(b"") == 0


def test_properties_too_long_for_a_short():
    IB.encode_message(b"", b"a" * 32767)
    with pytest.raises(ValueError):
        IB.encode_message(b"", b"a" * 32768)


def test_unpaired_surrogate_becomes_question_mark():
    """Java's getBytes(UTF_8) writes '?' for a lone surrogate."""
    assert IB.encode_message(b"", "K\x01\ud800\x02")[22:] == b"K\x01?\x02"


def _golden_inner_batches():
    m = G.manifest(GOLDEN)
    return [e for e in m["messages"] if e["topic"] == "BatchTopic"]


def test_golden_inner_batch_bodies():
    """Every inner batch the golden store holds: its body splits into INNER_NUM client messages and
    re-encodes to the same bytes; the store's own numbers come out of the record's properties."""
    entries = _golden_inner_batches()
    assert len(entries) == 408
    for e in entries:
        body = base64.b64decode(e["body_b64"])
        msgs = IB.decode_messages(body)
        assert len(msgs) == e["innerNum"] == IB.count_messages(body)
        assert IB.encode_messages(msgs) == body
        assert IB.is_inner_batch(e["stored"]["sysFlag"])
        assert IB.message_num(e["inputProperties"], e["inputSysFlag"], batch_cq=True) == e["msgNum"]
        stored = parse_properties(base64.b64decode(e["stored"]["propertiesRaw_b64"]))
        assert IB.dispatch_batch_fields(stored, -5) == (e["queueOffset"], e["innerNum"])


def test_first_golden_batch_body_by_hand():
    """seq 1: one message, body "body-100-" x 8 + "bod" (75 bytes), properties "WAIT=true"."""
    body = base64.b64decode(_golden_inner_batches()[0]["body_b64"])
    text = b"body-100-" * 8 + b"bod"
    assert IB.decode_messages(body) == [IB.InnerMessage(text, b"WAIT\x01true\x02", 0)]
    assert body[:20] == struct.pack(">iiiii", 22 + 75 + 10, 0, 0, 0, 75)


def _bad(buf, offset):
    with pytest.raises(CorruptDataError) as e:
        IB.decode_messages(buf)
    assert e.value.offset == offset, e.value


def test_corrupt_bodies_raise_naming_the_offset():
    good = IB.encode_message(b"abc", b"K\x01V\x02")  # 22 + 3 + 4 = 29 bytes
    _bad(good[:21], 0)  # shorter than a header
    _bad(good + good[:10], 29)  # a second message cut short
    _bad(good[:16] + struct.pack(">i", -1) + good[20:], 0)  # negative body length
    _bad(good[:16] + struct.pack(">i", 1 << 30) + good[20:], 0)  # body length beyond the buffer
    _bad(good[:23] + struct.pack(">h", -3) + good[25:], 0)  # negative properties length
    _bad(good[:23] + struct.pack(">h", 100) + good[25:], 0)  # properties beyond the buffer
    _bad(struct.pack(">i", 99) + good[4:], 0)  # TOTALSIZE disagrees with the fields
    _bad(good + struct.pack(">i", 33) + good[4:], 29)
    with pytest.raises(CorruptDataError) as e:
        IB.count_messages(good + struct.pack(">i", 0) + good[4:])  # a zero size would loop forever
    assert e.value.offset == 29
    with pytest.raises(CorruptDataError):
        IB.count_messages(good + b"\x00\x00")
    with pytest.raises(CorruptDataError):
        IB.count_messages(struct.pack(">i", 1000) + good[4:])


MESSAGE = st.tuples(st.binary(max_size=40), st.binary(max_size=40), INT32)


@given(st.lists(MESSAGE, max_size=8))
def test_batch_round_trip(msgs):
    data = IB.encode_messages(msgs)
    assert len(data) == sum(22 + len(b) + len(p) for b, p, _ in msgs)
    assert IB.decode_messages(data) == [IB.InnerMessage(*m) for m in msgs]
    assert IB.count_messages(data) == len(msgs)
    # bounded to a window of a larger buffer, offsets in errors are the buffer's
    assert IB.decode_messages(b"\x07" * 5 + data + b"\x09", 5, 5 + len(data)) == [IB.InnerMessage(*m) for m in msgs]


@given(st.lists(MESSAGE, min_size=1, max_size=4), st.data())
def test_random_damage_never_escapes_as_another_error(msgs, data):
    raw = bytearray(IB.encode_messages(msgs))
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    for buf in (bytes(raw), bytes(raw[:cut])):
        try:
            out = IB.decode_messages(buf)
        except CorruptDataError as e:
            assert 0 <= e.offset < len(buf)
        else:
            # whatever decodes accounts for every byte (magic and body CRC are not read, as in Java)
            assert sum(22 + len(m.body) + len(m.properties_raw) for m in out) == len(buf)
            assert IB.count_messages(buf) == len(out)
        try:
            IB.count_messages(buf)
        except CorruptDataError as e:
            assert 0 <= e.offset < len(buf)


# ---- INNER_NUM / INNER_BASE ------------------------------------------------------------------------


def test_message_num():
    props = {"INNER_NUM": "16"}
    assert IB.message_num(props, 0x80, batch_cq=False) == 16
    assert IB.message_num(props, 0, batch_cq=True) == 16  # a BatchCQ topic counts INNER_NUM as well
    assert IB.message_num(props, 0, batch_cq=False) == 1
    assert IB.message_num({}, 0x80, batch_cq=True) == 1
    assert IB.message_num({"INNER_NUM": "0"}, 0x80, batch_cq=True) == 1  # below 1 counts as 1
    assert IB.message_num({"INNER_NUM": "-4"}, 0x80, batch_cq=True) == 1
    for bad in ("x", "", "1_0", " 3", "40000", "+"):
        with pytest.raises(ValueError):
            IB.message_num({"INNER_NUM": bad}, 0x80, batch_cq=True)


def test_dispatch_batch_fields():
    assert IB.dispatch_batch_fields({}, 42) == (42, 1)  # the DispatchRequest defaults
    assert IB.dispatch_batch_fields({"INNER_NUM": "3"}, 42) == (42, 1)  # both are needed
    assert IB.dispatch_batch_fields({"INNER_BASE": "7"}, 42) == (42, 1)
    assert IB.dispatch_batch_fields({"INNER_BASE": "7", "INNER_NUM": "3"}, 42) == (7, 3)
    assert IB.dispatch_batch_fields({"INNER_BASE": "-7", "INNER_NUM": "+3"}, 0) == (-7, 3)
    with pytest.raises(ValueError):
        IB.dispatch_batch_fields({"INNER_BASE": "7", "INNER_NUM": "32768"}, 0)  # Short.parseShort's range
    with pytest.raises(ValueError):
        IB.dispatch_batch_fields({"INNER_BASE": "9223372036854775808", "INNER_NUM": "1"}, 0)


def test_parse_java_integer():
    assert IB.parse_java_integer("-32768", 16) == -32768
    assert IB.parse_java_integer("0032767", 16) == 32767
    assert IB.parse_java_integer("9223372036854775807", 64) == 2**63 - 1
    assert IB.parse_java_integer("\u0661\u0662", 32) == 12  # Character.digit takes any decimal digit
    for bad in ("", "-", "1 ", "1e3", "0x10", "1_000", "\U0001d7cf"):
        with pytest.raises(ValueError):
            IB.parse_java_integer(bad, 64)
