"""record_scan (the bulk reader reput and recovery use) accepts exactly the run of records that the
one-at-a-time reader accepts, and reads the same fields: checked against records laid out by the
independent reference encoder, intact and damaged."""

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.errors import CorruptDataError
from rocketstore.formats import record as R
from rocketstore.formats.record_scan import chain, scan

from . import _ref

V6 = _ref.host("2001:db8::a", 9876)
V4 = _ref.host("10.0.0.5", 10911)


@st.composite
def records(draw):
    v6_born, v6_store = draw(st.booleans()), draw(st.booleans())
    flags = (0x10 if v6_born else 0) | (0x20 if v6_store else 0) | draw(st.sampled_from([0, 0x4, 0x8, 0xC]))
    topic = draw(st.sampled_from([b"T", b"TopicA", "主题".encode(), b"x" * 127, b"y" * 200]))
    return _ref.record(
        topic=topic,
        body=draw(st.binary(max_size=40)),
        props=draw(st.sampled_from([b"", b"TAGS\x01a\x02", b"KEYS\x01k1 k2\x02UNIQ_KEY\x01u\x02"])),
        queue_id=draw(st.integers(0, 7)),
        sys_flag=flags,
        store_ts=draw(st.integers(0, 2**41)),
        born_host=V6 if v6_born else V4,
        store_host=V6 if v6_store else V4,
        queue_offset=draw(st.integers(0, 2**40)),
        physical_offset=draw(st.integers(0, 2**40)),
        v2=len(topic) > 127,
    )


def one_at_a_time(buf):
    """The records read_header accepts from the start, stopping at the first it refuses."""
    out, pos = [], 0
    while pos + 8 <= len(buf):
        size, magic = struct.unpack_from(">ii", buf, pos)
        if magic not in (R.MAGIC_V1, R.MAGIC_V2):
            break
        try:
            h = R.read_header(buf, pos, len(buf))
        except CorruptDataError:
            break
        if h.sys_flag & R.INNER_BATCH_FLAG:
            break
        out.append((pos, h))
        pos += h.size
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(records(), min_size=1, max_size=6), st.data())
def test_scan_matches_read_header_on_intact_and_damaged_runs(recs, data):
    buf = bytearray(b"".join(recs) + bytes(16))
    if data.draw(st.booleans()):  # damage one byte somewhere
        at = data.draw(st.integers(0, len(buf) - 1))
        buf[at] = data.draw(st.integers(0, 255))
    buf = bytes(buf)
    expected = one_at_a_time(buf)
    positions, sizes = chain(buf, 0, len(buf), 100)
    c = scan(buf, positions, sizes)
    assert c.count == len(expected)
    for i, (pos, h) in enumerate(expected):
        assert int(c.pos[i]) == pos and int(c.size[i]) == h.size
        assert (int(c.queue_id[i]), int(c.queue_offset[i]), int(c.phys[i]), int(c.sys_flag[i])) == (
            h.queue_id,
            h.queue_offset,
            h.physical_offset,
            h.sys_flag,
        )
        assert int(c.store_ts[i]) == h.store_timestamp and int(c.crc[i]) == h.body_crc
        assert (int(c.body_pos[i]), int(c.body_len[i])) == (h.body_pos, h.body_len)
        topic = buf[int(c.topic_pos[i]) : int(c.topic_pos[i]) + int(c.topic_len[i])]
        assert topic.decode("utf-8", "replace") == h.topic
        assert buf[int(c.props_pos[i]) : int(c.props_pos[i]) + int(c.props_len[i])] == h.props_raw


def test_scan_stops_before_an_inner_batch_and_a_blank():
    plain = _ref.record(topic=b"T", body=b"abc", store_host=V4, born_host=V4)
    inner = _ref.record(topic=b"T", body=b"abc", sys_flag=0x80, store_host=V4, born_host=V4)
    buf = plain + plain + inner + plain
    positions, sizes = chain(buf, 0, len(buf), 100)
    assert positions == [0, len(plain), 2 * len(plain), 2 * len(plain) + len(inner)]
    assert scan(buf, positions, sizes).count == 2
    blank = struct.pack(">ii", 64, -875286124) + bytes(56)
    buf = plain + blank + plain
    assert chain(buf, 0, len(buf), 100) == ([0], [len(plain)])


def test_a_record_cut_by_the_limit_is_not_in_the_chain():
    plain = _ref.record(topic=b"T", body=b"abcdef", store_host=V4, born_host=V4)
    buf = plain * 3
    assert chain(buf, 0, len(buf) - 1, 100)[0] == [0, len(plain)]
    assert chain(buf, 0, len(buf), 2)[0] == [0, len(plain)]
