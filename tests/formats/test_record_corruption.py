"""Corrupt bytes: read_header/decode_record raise only CorruptDataError (with the record's offset) and never
trust a size field; dispatch.check_record never raises and classifies every input as ok, blank or bad."""

import struct
import tracemalloc

import pytest
from hypothesis import given, strategies as st

from rocketstore.errors import CorruptDataError
from rocketstore.formats import record as R
from rocketstore.services import dispatch as D

from . import _ref

DELAY_LEVELS = (1000, 5000, 10000)

# A few well-formed records built by the independent reference encoder.
SAMPLES = [
    _ref.record(
        topic=b"TopicA",
        body=b"hello world",
        props=b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02",
        born_host=_ref.host("192.168.1.1", 50000),
        store_host=_ref.host("10.0.0.5", 10911),
        queue_offset=7,
        physical_offset=4096,
        store_ts=1700000000000,
    ),
    _ref.record(
        topic=b"L" * 150,
        body=bytes(range(40)),
        props=b"UNIQ_KEY\x01abc",
        v2=True,
        sys_flag=0x30,
        born_host=_ref.host("2001:db8::7", 40013),
        store_host=_ref.host("fd00::5", 10911),
    ),
    _ref.record(topic=b"T", born_host=_ref.host("127.0.0.1", 1), store_host=_ref.host("127.0.0.1", 2)),
    _ref.record(
        topic=b"TopicC",
        body=b"crc",
        props=b"a\x01b\x02" + bytes(20),
        crc_reserved=True,
        sys_flag=0x10,
        born_host=_ref.host("::1", 9),
        store_host=_ref.host("10.0.0.5", 10911),
    ),
]


def field_positions(rec: bytes) -> dict:
    """Where each length field sits, from the layout (not from the code under test)."""
    sysflag = struct.unpack_from(">i", rec, 36)[0]
    v2 = rec[4:8] == bytes.fromhex(_ref.MAGIC_V2_HEX)
    p = 48 + (20 if sysflag & 0x10 else 8) + 8 + (20 if sysflag & 0x20 else 8) + 4 + 8
    body_len = struct.unpack_from(">i", rec, p)[0]
    topic_pos = p + 4 + body_len
    tlen = struct.unpack_from(">H" if v2 else ">B", rec, topic_pos)[0]
    props_pos = topic_pos + (2 if v2 else 1) + tlen
    return {
        "size": (0, ">i"),
        "body": (p, ">i"),
        "topic": (topic_pos, ">H" if v2 else ">B"),
        "props": (props_pos, ">h"),
    }


def decode_or_corrupt(buf, pos=0, end=None):
    """decode_record, allowing only CorruptDataError, located at `pos`. Returns the message or None."""
    try:
        m = R.decode_record(buf, pos, end)
    except CorruptDataError as e:
        assert type(e) is CorruptDataError
        assert e.offset == pos
        assert e.reason
        return None
    # whatever decodes must at least be self-consistent
    limit = len(buf) if end is None else end
    assert 91 <= m.size <= limit - pos
    assert struct.unpack_from(">i", buf, pos)[0] == m.size
    return m


def header_or_corrupt(buf, pos=0, end=None):
    try:
        h = R.read_header(buf, pos, end)
    except CorruptDataError as e:
        assert e.offset == pos
        return None
    limit = len(buf) if end is None else end
    assert pos + 91 <= pos + h.size <= limit
    assert pos <= h.body_pos and h.body_pos + h.body_len <= pos + h.size
    return h


def check(buf, pos=0, end=None, check_crc=True, force=False):
    end = len(buf) if end is None else end
    kind, size, req, problem = D.check_record(
        buf, pos, end, check_crc=check_crc, force_verify_prop_crc=force, delay_levels=DELAY_LEVELS
    )
    assert kind in {"ok", "blank", "bad"}
    if kind == "ok":
        assert req is not None and size >= 91 and problem is None
    elif kind == "blank":
        assert size == 0 and req is None
    else:
        assert req is None and isinstance(problem, str) and (size == -1 or 0 < size <= end - pos)
    return kind, size


def test_samples_are_valid():
    for rec in SAMPLES:
        m = decode_or_corrupt(rec)
        assert m is not None and m.size == len(rec)
        assert check(rec) == ("ok", len(rec))
    assert check(SAMPLES[3], force=True) == ("ok", len(SAMPLES[3]))


# ---- random bytes ------------------------------------------------------------------------------


@given(st.binary(max_size=512), st.integers(0, 64))
def test_random_bytes_raise_only_corrupt_data_error(buf, pos):
    decode_or_corrupt(buf, pos)
    header_or_corrupt(buf, pos)


@st.composite
def plausible_garbage(draw):
    """Random bytes behind a valid magic and a size that fits: gets past the first checks."""
    n = draw(st.integers(8, 400))
    body = bytearray(draw(st.binary(min_size=n, max_size=n)))
    magic = draw(st.sampled_from([R.MAGIC_V1, R.MAGIC_V2]))
    # sizes that fit the buffer (including ones below the 91-byte minimum), and anything at all
    size = draw(st.one_of(st.just(n), st.integers(0, n), st.integers(-(2**31), 2**31 - 1)))
    struct.pack_into(">ii", body, 0, size, magic)
    if draw(st.booleans()) and n >= 40:  # small, sane length fields make deeper paths reachable
        sysflag = draw(st.integers(0, 2**31 - 1))
        struct.pack_into(">i", body, 36, sysflag)
        p = 48 + (20 if sysflag & 0x10 else 8) + 8 + (20 if sysflag & 0x20 else 8) + 12
        if p + 4 <= n:
            struct.pack_into(">i", body, p, draw(st.integers(-4, 64)))
    return bytes(body)


@given(plausible_garbage())
def test_plausible_garbage_raises_only_corrupt_data_error(buf):
    decode_or_corrupt(buf)
    header_or_corrupt(buf)
    check(buf)
    check(buf, force=True)


@given(st.binary(max_size=512), st.integers(0, 64), st.booleans(), st.booleans())
def test_check_record_never_raises_on_random_bytes(buf, pos, check_crc, force):
    check(buf, pos, check_crc=check_crc, force=force)


@given(plausible_garbage(), st.booleans())
def test_check_record_never_raises_on_plausible_garbage(buf, force):
    check(buf, force=force)


@pytest.mark.parametrize("sysflag", [0, 0x10, 0x20, 0x30])
def test_short_buffers_whose_size_field_fits(sysflag):
    """48..90 bytes, valid magic, TOTALSIZE = the buffer length: too short for any record."""
    for n in range(0, 91):
        buf = bytearray(b"\x11" * n)
        if n >= 8:
            struct.pack_into(">ii", buf, 0, n, R.MAGIC_V1)
        if n >= 40:
            struct.pack_into(">i", buf, 36, sysflag)
        assert decode_or_corrupt(bytes(buf)) is None
        assert header_or_corrupt(bytes(buf)) is None
        assert check(bytes(buf))[0] == "bad"


def test_check_record_blank_and_short():
    blank = struct.pack(">ii", 4000, R.BLANK_MAGIC) + bytes(100)
    assert check(blank) == ("blank", 0)
    for n in range(0, 5):
        assert check(bytes(n)) == ("bad", -1)
    assert check(b"\x00" * 100)[0] == "bad"


# ---- truncation --------------------------------------------------------------------------------


@pytest.mark.parametrize("rec", SAMPLES, ids=["v1", "v2-ipv6", "minimal", "crc"])
def test_every_truncation_is_corrupt(rec):
    for n in range(len(rec)):
        assert decode_or_corrupt(rec[:n]) is None, n
        assert header_or_corrupt(rec[:n]) is None, n
        # the same with `end` cutting a longer buffer, and at a non-zero position
        buf = b"\xaa" * 5 + rec + b"\x00" * 300
        assert decode_or_corrupt(buf, 5, 5 + n) is None, n
        kind, _ = check(buf, 5, 5 + n)
        assert kind == "bad"
    assert decode_or_corrupt(rec).size == len(rec)


@given(st.sampled_from(SAMPLES), st.data())
def test_truncated_records_hypothesis(rec, data):
    n = data.draw(st.integers(0, len(rec) - 1))
    assert decode_or_corrupt(rec[:n]) is None
    assert decode_or_corrupt(memoryview(rec)[:n]) is None


# ---- length fields -----------------------------------------------------------------------------


@given(st.sampled_from(SAMPLES), st.integers(-(2**31), 2**31 - 1), st.integers(0, 600))
def test_wrong_total_size_is_always_corrupt(rec, size, pad):
    """Every other field still describes the original record, so any other TOTALSIZE is inconsistent."""
    if size == len(rec):
        size += 1
    buf = bytearray(rec + bytes(pad))
    struct.pack_into(">i", buf, 0, size)
    assert decode_or_corrupt(bytes(buf)) is None
    kind, got = check(bytes(buf))
    assert kind == "bad"


@pytest.mark.parametrize("rec", SAMPLES, ids=["v1", "v2-ipv6", "minimal", "crc"])
@pytest.mark.parametrize("field", ["size", "body", "topic", "props"])
def test_length_field_extremes(rec, field):
    pos, fmt = field_positions(rec)[field]
    lo, hi = {
        "b": (-128, 127),
        "B": (0, 255),
        "h": (-(2**15), 2**15 - 1),
        "H": (0, 2**16 - 1),
        "i": (-(2**31), 2**31 - 1),
    }[fmt[-1]]
    orig = struct.unpack_from(fmt, rec, pos)[0]
    values = {lo, hi, 0, 1, -1, 90, 91, 92, orig - 1, orig + 1, orig + 20, orig - 20, len(rec), 2 * len(rec)}
    for v in sorted(x for x in values if lo <= x <= hi and x != orig):
        for pad in (0, 64, 70000):
            buf = bytearray(rec + bytes(pad))
            struct.pack_into(fmt, buf, pos, v)
            buf = bytes(buf)
            m = decode_or_corrupt(buf)
            check(buf)
            if field == "size" or (field == "props" and (v >= 0 or orig > 0)):
                # the other fields are untouched, so the record cannot add up any more
                assert m is None, (field, v, pad)
            if field == "props" and v < 0 and orig == 0 and m is not None:
                # Java reads a negative short PROPLEN as "no properties" (calMsgLength uses max(len, 0))
                assert m.properties == {}


@pytest.mark.parametrize("rec", SAMPLES, ids=["v1", "v2-ipv6", "minimal", "crc"])
def test_every_byte_position_corrupted(rec):
    """Overwrite each byte in turn: the result is a clean decode or a CorruptDataError, never anything else."""
    for i in range(len(rec)):
        for v in {0x00, 0x01, 0x7F, 0x80, 0xFF, rec[i] ^ 0x20}:
            if v == rec[i]:
                continue
            buf = rec[:i] + bytes((v,)) + rec[i + 1 :]
            decode_or_corrupt(buf)
            check(buf)
            check(buf, force=True)


@given(st.sampled_from(SAMPLES), st.data())
def test_random_multi_byte_corruption(rec, data):
    buf = bytearray(rec + bytes(data.draw(st.integers(0, 32))))
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(buf) - 1))
        j = data.draw(st.integers(i, min(len(buf), i + 8)))
        buf[i:j] = data.draw(st.binary(min_size=j - i, max_size=j - i))
    decode_or_corrupt(bytes(buf))
    check(bytes(buf))


def _peak_while(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "field,value",
    [("size", 2**31 - 1), ("body", 2**31 - 1), ("body", 2**31 - 100), ("topic", 0xFFFF), ("props", 0x7FFF)],
)
def test_no_allocation_from_an_unchecked_size(field, value):
    rec = SAMPLES[1]  # V2, so the topic length is 2 bytes
    pos, fmt = field_positions(rec)[field]
    buf = bytearray(rec)
    struct.pack_into(fmt, buf, pos, value)
    if field == "size":
        pass
    else:  # make TOTALSIZE huge as well, so only the buffer bound stands between us and a big copy
        struct.pack_into(">i", buf, 0, 2**31 - 1)
    buf = bytes(buf)

    def run():
        with pytest.raises(CorruptDataError):
            R.decode_record(buf)
        with pytest.raises(CorruptDataError):
            R.read_header(buf)
        assert check(buf)[0] == "bad"

    assert _peak_while(run) < 1_000_000
