"""verify's record table: the compiled VerifyRecords against the pure verify._Records, on random sequences of
adds (offsets repeated and out of order: a dict's replace-in-place order), covers and look-ups, and whole
stores whose segments overlap (an extended file), verified on both engines."""

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig, engine
from rocketstore.maintenance.verify import _Record as Record
from rocketstore.maintenance.verify import _Records as Records
from rocketstore.maintenance.verify import verify_store


def _record(topic, qid, qoff, size, tags, flag, keys, uniq):
    r = Record()
    r.topic, r.queue_id, r.queue_offset, r.size, r.tags_code = topic, qid, qoff, size, tags
    r.store_ts, r.sys_flag, r.inner_num, r.keys, r.uniq, r.file, r.pos = 7, flag, None, keys, uniq, "f", 0
    return r


RECORDS = st.builds(
    _record,
    st.sampled_from(["T", "U", "t\u00f6", "\U0001f600"]),
    st.integers(0, 3),
    st.integers(0, 10),
    st.integers(1, 300),
    st.none() | st.integers(-(2**40), 2**40),
    st.sampled_from([0, 4, 8, 0xC, 0x80]),
    st.sampled_from(["", "a", "a b", " k\u00e9y  \U0001f600 "]),
    st.none() | st.sampled_from(["U1", "\u00fc"]),
)
OPS = st.lists(
    st.tuples(st.sampled_from(["add", "add", "cover", "get"]), st.integers(0, 12).map(lambda i: i * 100), RECORDS),
    max_size=40,
)


def _plain(r):
    return None if r is None else {k: getattr(r, k) for k in Record.__slots__}


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_table_same_as_dict(native, ops):
    a, b = native.VerifyRecords(Record), Records()
    for op, phys, r in ops:
        if op == "add":
            a.add(phys, r)
            b.add(phys, r)
        elif op == "cover" and b.get(phys) is not None:
            a.cover(phys)
            b.cover(phys)
        assert _plain(a.get(phys)) == _plain(b.get(phys))
    assert a.offsets() == b.offsets()
    assert a.uncovered() == b.uncovered()
    a.clear()
    assert a.offsets() == [] and a.get(0) is None


CFG = dict(mapped_file_size_commit_log=4096, max_hash_slot_num=16, max_index_num=400)


def _report(root, pure):
    with engine.using("pure" if pure else "native"):
        r = verify_store(root, StoreConfig(**CFG))
    r.pop("root")
    return r


def test_overlapping_segments_same(native, tmp_path):
    """The second segment renamed to start inside the first: its records' offsets fall among the first's
    (some the same), out of order, and the walk of the segments after it goes on from there (the compiled
    table leaves its sorted search for the hash table)."""
    root = str(tmp_path / "s")
    with MessageStore.open(root, StoreConfig(**CFG)) as s:
        for i in range(120):
            s.put(Message("T", bytes(80 + i % 5), tags="a", keys=f"k{i} o\u00e9{i}"), i % 2)
        s.wait_dispatched()
    d = os.path.join(root, "commitlog")
    seg = sorted(os.listdir(d))
    assert len(seg) >= 3
    os.rename(os.path.join(d, seg[1]), os.path.join(d, f"{2048:020d}"))
    got = _report(root, False)
    assert not got["ok"] and got["checked"]["records"] >= 100
    assert got == _report(root, True)
