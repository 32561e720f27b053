"""ConsumeQueueExt.put_many (a run of ext units, a file's worth per write) against put() one unit at a time:
the same addresses and the same file bytes, across file ends (the end marker) and with units put() refuses."""

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.formats import cq_ext as X
from rocketstore.log.consume_queue_ext import PUT_FAILED, ConsumeQueueExt

BITMAP = st.one_of(st.none(), st.binary(min_size=0, max_size=90), st.just(b"\x01" * (X.MAX_UNIT_SIZE - 19)))
UNIT = st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**62), BITMAP)


def _ext(root, file_size):
    ext = ConsumeQueueExt(str(root), "T", 0, file_size, writable=True)
    ext.load()
    return ext


def _files(ext) -> dict[str, bytes]:
    d = ext.directory
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))} if os.path.isdir(d) else {}


@settings(max_examples=60, deadline=None)
@given(st.lists(UNIT, max_size=40), st.sampled_from([64, 200, 1024]), st.integers(0, 3))
def test_same_as_one_at_a_time(tmp_path_factory, units, file_size, before):
    one, many = _ext(tmp_path_factory.mktemp("one"), file_size), _ext(tmp_path_factory.mktemp("many"), file_size)
    for ext in (one, many):  # some units already there, so the run starts inside a file
        for k in range(before):
            ext.put(k, k, b"\x07")
    tags, times, maps = [list(c) for c in zip(*units)] if units else ([], [], [])
    want = [one.put(t, s, b) for t, s, b in units]
    got = many.put_many(tags, times, maps)
    assert got == want
    assert _files(many) == _files(one)
    for addr, (t, s, b) in zip(got, units):  # and each unit reads back as written
        if addr != PUT_FAILED:
            u = many.get(addr)
            assert (u.tags_code, u.msg_store_time, u.filter_bit_map) == (t, s, b or None)


def test_units_by_hand(tmp_path):
    # 64-byte files keep 4 bytes for the end marker: 60 usable. Two 20-byte units fit; the 24-byte one does
    # not (40 + 24 > 60), so the marker (short -1) goes at 40 and it opens the next file, at 64
    ext = _ext(tmp_path, 64)
    got = ext.put_many([5, 6, 7, 8], [50, 60, 70, 80], [None, None, b"\xaa\xbb\xcc\xdd", b"\x01"])
    assert got == [X.decorate(0), X.decorate(20), X.decorate(64), X.decorate(88)]
    files = _files(ext)
    first, second = files["00000000000000000000"], files["00000000000000000064"]
    assert first[:20] == (20).to_bytes(2, "big") + (5).to_bytes(8, "big") + (50).to_bytes(8, "big") + b"\0\0"
    assert first[40:42] == b"\xff\xff"
    assert second[:24] == (
        (24).to_bytes(2, "big") + (7).to_bytes(8, "big") + (70).to_bytes(8, "big") + b"\0\x04" + b"\xaa\xbb\xcc\xdd"
    )
    assert second[24:45] == (21).to_bytes(2, "big") + (8).to_bytes(8, "big") + (80).to_bytes(8, "big") + b"\0\x01\x01"


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 40).flatmap(
        lambda length: st.lists(
            st.tuples(
                st.integers(-(2**63), 2**63 - 1),
                st.integers(0, 2**62),
                st.none() | st.just(b"") if length == 0 else st.binary(min_size=length, max_size=length),
            ),
            max_size=40,
        )
    ),
    st.sampled_from([64, 200, 1024]),
    st.integers(0, 3),
)
def test_one_bitmap_length_same_as_one_at_a_time(tmp_path_factory, units, file_size, before):
    # units of one size: put_many encodes them as one array and computes their addresses
    test_same_as_one_at_a_time.hypothesis.inner_test(tmp_path_factory, units, file_size, before)


@given(
    st.integers(0, 12).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(
                st.tuples(
                    st.integers(-(2**64), 2**64), st.integers(-(2**63), 2**63 - 1), st.binary(min_size=n, max_size=n)
                ),
                max_size=20,
            ),
        )
    )
)
def test_encode_units_is_encode_unit_joined(case):
    length, units = case
    maps = [b for _, _, b in units]
    assert X.same_bit_map_length(maps) in ((length if units else 0), 0)
    got = X.encode_units([t for t, _, _ in units], [s for _, s, _ in units], maps, length)
    assert got == b"".join(X.encode_unit(t, s, b) for t, s, b in units)
