"""The compiled read path against the pure reference: decode_record (every field of the StoredMessage, or the
same CorruptDataError at the same offset) and the IndexFile chain walk of a query."""

import struct

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.errors import CorruptDataError
from rocketstore.formats import index as I
from rocketstore.formats import record as R

from ._records import corrupted, plain_record, record_params, segment

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(fn, *args, **kw):
    """Every field of the decoded message (the fixed tuple, the raw properties and each documented field),
    or the error's type, reason and offset."""
    try:
        m = fn(*args, **kw)
    except CorruptDataError as e:
        return ("error", type(e), e.reason, e.offset)
    d = m.as_dict() if m.body is not None else {k: getattr(m, k) for k in m.FIELDS if k != "body"}
    return ("ok", type(m), m._f, m.properties_raw, m.body, d, m.version)


def test_decode_record_is_native_when_built(native):
    assert R.decode_record is native.decode_record
    assert R.decode_record is not R.decode_record_py


@SETTINGS
@given(record_params(), st.integers(0, 50), st.booleans())
def test_same_message(native, params, pad, with_body):
    rec = bytes(pad) + R.encode_record(physical_offset=pad, **params)
    assert outcome(R.decode_record, rec, pad, with_body=with_body) == outcome(
        R.decode_record_py, rec, pad, with_body=with_body
    )
    assert outcome(R.decode_record, rec, pad, len(rec)) == outcome(R.decode_record_py, rec, pad, len(rec))


@SETTINGS
@given(st.data(), segment(max_records=3))
def test_same_on_corrupted(native, data, buf):
    bad = data.draw(corrupted(buf))
    pos = data.draw(st.integers(0, len(bad) + 2))
    end = data.draw(st.none() | st.integers(min(pos, len(bad)), len(bad)))
    assert outcome(R.decode_record, bad, pos, end) == outcome(R.decode_record_py, bad, pos, end)


@SETTINGS
@given(st.binary(max_size=300), st.integers(0, 20))
def test_same_on_random_bytes(native, buf, pos):
    assert outcome(R.decode_record, buf, pos) == outcome(R.decode_record_py, buf, pos)


def test_errors_name_the_offset(native):
    rec = plain_record()
    buf = bytes(7) + rec[:-1]
    for fn in (R.decode_record, R.decode_record_py):
        try:
            fn(buf, 7)
        except CorruptDataError as e:
            assert (e.offset, e.reason) == (7, f"record size {len(rec)} does not fit the {len(rec) - 1} bytes left")
        else:
            raise AssertionError("a record cut short decoded")


def test_keyword_arguments(native):
    rec = plain_record(props=b"TAGS\x01a", v2=True)
    m = R.decode_record(buf=rec, pos=0, end=None, with_body=False)
    assert m.body is None and m.tags == "a" and m.topic == "T"


# ---------------------------------------------------------------- the IndexFile chain walk


@st.composite
def index_file(draw):
    """An index file's bytes with random slots and entries: chains that loop, point past the count, have
    negative time diffs or other hashes."""
    slots = draw(st.integers(1, 8))
    num = draw(st.integers(2, 12))
    count = draw(st.integers(-1, num + 2))
    buf = bytearray(I.file_size(slots, num))
    for s in range(slots):
        struct.pack_into(">i", buf, I.HEADER_SIZE + 4 * s, draw(st.integers(-1, num + 1)))
    base = I.HEADER_SIZE + slots * 4
    for e in range(num):
        struct.pack_into(
            ">iqii",
            buf,
            base + 20 * e,
            draw(st.integers(0, 3)),
            draw(st.integers(0, 10**6)),
            draw(st.integers(-2, 50)),
            draw(st.integers(-1, num + 1)),
        )
    return bytes(buf), slots, num, count


@SETTINGS
@given(
    index_file(),
    st.integers(0, 3),
    st.integers(1, 10),
    st.integers(0, 30 * 1000),
    st.integers(0, 60 * 1000),
    st.integers(0, 3),
    st.integers(0, 10**4),
)
def test_select_chain_same(native, f, key_hash, max_num, begin, end, veto, begin_ts):
    buf, slots, num, count = f
    calls = {"py": [], "c": []}

    def accept_for(name):
        def accept(phy):
            calls[name].append(phy)
            return veto == 0 or phy % veto != 0

        return accept

    out_py, out_c = [], []
    I.select_chain_py(buf, slots, begin_ts, count, num, key_hash, max_num, begin, end, out_py, accept_for("py"))
    native.select_chain(buf, slots, begin_ts, count, num, key_hash, max_num, begin, end, out_c, accept_for("c"))
    assert out_c == out_py
    assert calls["c"] == calls["py"]
    out_n = []
    native.select_chain(buf, slots, begin_ts, count, num, key_hash, max_num, begin, end, out_n)
    out_pn = []
    I.select_chain_py(buf, slots, begin_ts, count, num, key_hash, max_num, begin, end, out_pn)
    assert out_n == out_pn


def test_select_chain_on_a_real_chain(native):
    # three entries of one key, newest first, one outside the time range: what IndexFile.selectPhyOffset finds
    slots, num = 4, 8
    buf = bytearray(I.file_size(slots, num))
    key = I.key_hash("T#k")
    struct.pack_into(">i", buf, I.HEADER_SIZE + 4 * (key % slots), 3)
    base = I.HEADER_SIZE + slots * 4
    for n, (phy, diff, prev) in {1: (100, 1, 0), 2: (200, 5, 1), 3: (300, 9, 2)}.items():
        struct.pack_into(">iqii", buf, base + 20 * n, key, phy, diff, prev)
    out = []
    I.select_chain(bytes(buf), slots, 1_000_000, 4, num, key, 32, 1_000_000, 1_000_000 + 6000, out)
    assert out == [200, 100]
    assert np.array_equal(out, [200, 100])


# ---------------------------------------------------------------- a get's plain units


@st.composite
def queue_and_segment(draw):
    """A segment of records of queue T-0 (and a few of another queue), and units pointing at them: mostly
    right, some with a wrong offset, size or queue offset, some pointing past the segment."""
    seg = bytearray(draw(st.integers(0, 40)))
    seg_start = draw(st.sampled_from([0, 1 << 20]))
    units = []
    start = draw(st.integers(0, 5))
    for i in range(draw(st.integers(0, 12))):
        other = draw(st.integers(0, 9)) == 0
        pos = seg_start + len(seg)
        rec = plain_record(
            topic=b"Other" if other else b"T",
            body=draw(st.binary(max_size=30)),
            props=b"TAGS\x01" + draw(st.sampled_from([b"a", b"b", b"c"])),
            queue_offset=start + i,
            physical_offset=pos,
            v2=draw(st.booleans()),
        )
        seg += rec
        size = len(rec)
        fault = draw(st.integers(0, 12))
        if fault == 1:
            pos += draw(st.sampled_from([-1, 1, 10**9]))
        elif fault == 2:
            size += draw(st.sampled_from([-1, 1, -size]))
        tag = draw(st.sampled_from(["a", "b", "c", "ext"]))
        code = draw(st.integers(-(2**62), -(2**61))) if tag == "ext" else R.tags_code(tag)
        units.append((pos, size, code))
    if draw(st.booleans()) and seg:
        seg = draw(corrupted(bytes(seg)))
    return bytes(seg), seg_start, start, units


@SETTINGS
@given(
    queue_and_segment(),
    st.sampled_from([None, set(), {R.tags_code("a")}, {R.tags_code("a"), R.tags_code("c")}]),
    st.integers(1, 40),
    st.tuples(st.integers(0, 2000), st.integers(1, 40), st.integers(0, 2000), st.integers(1, 40)),
    st.integers(0, 3000),
    st.booleans(),
)
def test_take_units_same(native, q, codes, max_count, limits, memory, end_short):
    from rocketstore.formats import cq as CQ
    from rocketstore.formats.cq_ext import MAX_ADDR

    seg, seg_start, start, units = q
    data = CQ.encode_units([u[0] for u in units], [u[1] for u in units], [u[2] for u in units]) if units else b""
    arr = CQ.units(data)
    seg_end = seg_start + len(seg) - (7 if end_short else 0)
    args = (start, codes, MAX_ADDR, max_count, limits, seg_start + len(seg), memory, seg_start, seg_end, seg, "T", 0)
    out_py, out_c = [], []
    got_py = CQ.take_units_py(arr, *args, out_py)
    got_c = native.take_units(arr, *args, out_c)
    assert got_c == got_py
    assert [m.as_dict() for m in out_c] == [m.as_dict() for m in out_py]
