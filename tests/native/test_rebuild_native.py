"""The rebuild's index entries and per-record entry counts through the compiled index_keys against the pure
reference (rebuild.index_entries_py, dispatch_rows.index_entry_counts), on random records: UNIQ_KEY or
none, KEYS with empty, repeated and non-ASCII tokens, rolled-back and prepared transactions, offsets that
increase (a segment's: the compiled path) or not (the reference runs)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.maintenance import rebuild as RB
from rocketstore.services.dispatch_rows import index_entry_counts

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=8)
KEYS = st.sampled_from(["", " ", "a", "a b", " a  b ", "k\u00e9y \u4e3b"]) | TEXT
ROW = st.tuples(
    st.sampled_from(["T", "t\u00f6pic", "\u4e3b\u9898"]),
    st.one_of(st.none(), TEXT),
    KEYS,
    st.sampled_from([0, 0, 4, 8, 0xC, 0x80]),
    st.integers(1, 500),
    st.integers(0, 2**41),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(ROW, max_size=12), st.booleans())
def test_index_entries_and_counts_same_as_reference(native, rows, increasing):
    topics = [r[0] for r in rows]
    uniqs = [r[1] for r in rows]
    keys = [r[2] for r in rows]
    flags = np.array([r[3] for r in rows], dtype=np.int32)
    steps = np.array([r[4] for r in rows], dtype=np.int64)
    phys = np.cumsum(steps) if increasing else steps
    stamps = np.array([r[5] for r in rows], dtype=np.int64)
    got = RB.index_entries(topics, keys, uniqs, flags, phys, stamps)
    want = RB.index_entries_py(topics, keys, uniqs, flags.tolist(), phys, stamps)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tolist() == w.tolist()
    cols = {"topic": topics, "keys": keys, "uniq": uniqs, "sys_flag": flags, "phys": phys, "store_ts": stamps}
    seg = RB.Segment("segment", 0)
    RB.add_index_entries(seg, cols, True)
    for g, w in zip((seg.entry_hash, seg.entry_phys, seg.entry_ts), want):
        assert g.tolist() == w.tolist()
    counts = cols["entries"]
    expected = index_entry_counts(uniqs, keys, flags)
    assert counts.dtype == expected.dtype and counts.tolist() == expected.tolist()
    assert int(counts.sum()) == len(want[0])
