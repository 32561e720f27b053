"""The compiled index build against the pure reference: index_columns' keys (services.dispatch_rows.index_entries),
index_place's file bytes (IndexFile.put_entries_py), and whole IndexServices fed by add / add_many / add_columns
in both engines against the one-key-at-a-time port of RocketMQ (tests/_index_ref.py), rolls included; and a
file's bytes worked out by hand."""

import os
import struct
import tempfile
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import engine as engine_module
from rocketstore.formats import index as I
from rocketstore.log.index_file import IndexFile
from rocketstore.services.dispatch_rows import index_entries
from rocketstore.services.index_service import IndexService

import _index_ref as REF

LONG_MAX = 2**63 - 1
TEXT = st.one_of(
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=8),
    st.sampled_from(["", " ", "a b", " a  b ", "\ud800", "\U0001f600", "中文", "xAa", "xBB"]),
)
RECORD = st.tuples(
    st.sampled_from(["T", "Tö", "\U0001f600", ""]),
    st.integers(0, 1000),
    st.integers(0, 10**13),
    st.sampled_from([0, 4, 8, 12, 0x8C]),
    st.one_of(st.none(), TEXT),
    TEXT,
)


@contextmanager
def engine(native):
    """The index build with the compiled functions (native) or the pure reference (None)."""
    with engine_module.using("pure" if native is None else "native"):
        yield


def np_list(raw: bytes, dtype: str) -> list[int]:
    return np.frombuffer(raw, dtype=dtype).tolist()


# ---------------------------------------------------------------- the keys of a run's columns
@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, max_size=10), st.integers(0, 1000))
def test_index_columns_same_as_reference(native, records, end):
    cols = [list(c) for c in zip(*records)] if records else [[] for _ in range(6)]
    got = native.index_columns(*cols, end)
    assert got == native.index_keys(records, end)
    hashes, phys, stamps, last_owner = got
    topics, phy_col, ts_col, flags, uniqs, kstrs = cols
    want = index_entries(topics, uniqs, kstrs, flags, phy_col, ts_col, end)
    assert np_list(hashes, "i4") == want[0].tolist()
    assert np_list(phys, "i8") == want[1].tolist() and np_list(stamps, "i8") == want[2].tolist()
    assert last_owner == want[3]
    # tuples are columns too
    assert native.index_columns(*map(tuple, cols), end) == got


def test_index_columns_leaves_odd_runs_to_python(native):
    one = [["T"], [1], [2], [0], [None], ["a"]]
    assert native.index_columns(*one, 0) is not None
    for col, odd in ((5, ["a", "b"]), (5, [["a"]]), (1, [2**70]), (1, [1.0]), (4, [b"u"]), (0, [None])):
        cols = list(one)
        cols[col] = odd
        assert native.index_columns(*cols, 0) is None
    with pytest.raises(TypeError):
        native.index_columns(*one[:5], 7, 0)


# ---------------------------------------------------------------- placing entries into a file
HASHES = st.one_of(
    st.sampled_from([0, 1, 2, 3, 7, 8, 2**31 - 1, 81906, -1, -7, -(2**31)]), st.integers(-(2**31), 2**31 - 1)
)
STAMPS = st.one_of(
    st.integers(0, 3),
    st.integers(1_000, 60_000),
    st.integers(10**12, 10**12 + 10**13),
    st.just(2**62),
    st.integers(-(2**63), 2**63 - 1),
)


def header_tuple(f: IndexFile):
    h = f.header
    return h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset, h.hash_slot_count, h.index_count


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 9), st.integers(2, 12), st.data())
def test_index_place_same_bytes_as_numpy(native, slots, num, data):
    """put_entries (index_place) and put_entries_py over the same file bytes (a new file, or arbitrary
    header values and slot heads) and the same runs: the same bytes, counts and header, runs past a full
    file included."""
    if data.draw(st.booleans()):
        raw = None
        end_phy, end_ts = data.draw(st.sampled_from([(0, 0), (500, 9_000), (0, 9_000), (500, 0)]))
    else:
        head = struct.pack(
            ">qqqqii",
            *[data.draw(st.integers(-(2**40), 2**40)) for _ in range(4)],
            data.draw(st.integers(0, slots)),
            data.draw(st.integers(-2, num + 2)),
        )
        body = bytearray(I.file_size(slots, num) - 40)
        for s in range(slots):
            struct.pack_into(">i", body, 4 * s, data.draw(st.integers(-3, num + 2)))
        raw = head + bytes(body)
    runs = data.draw(st.lists(st.lists(st.tuples(HASHES, st.integers(0, 2**62), STAMPS), max_size=6), max_size=5))
    with tempfile.TemporaryDirectory() as d:
        files = []
        for name in ("c", "py"):
            p = os.path.join(d, name)
            if raw is None:
                files.append(
                    IndexFile(p, slots, num, writable=True, create=True, end_phy_offset=end_phy, end_timestamp=end_ts)
                )
            else:
                with open(p, "wb") as fh:
                    fh.write(raw)
                files.append(IndexFile(p, slots, num, writable=True))
        fc, fp = files
        with engine(native):
            for run in runs:
                arrays = (
                    np.array([r[0] for r in run], dtype=np.int32),
                    np.array([r[1] for r in run], dtype=np.int64),
                    np.array([r[2] for r in run], dtype=np.int64),
                )
                assert fc.put_entries(*arrays) == fp.put_entries_py(*arrays)
                assert header_tuple(fc) == header_tuple(fp)
                assert bytes(fc.mf.buf) == bytes(fp.mf.buf)
        fc.close()
        fp.close()


def test_index_place_by_hand(native):
    """Two slots, room for 3 entries (numbers 1 and 2): hashes 5 and 7 share slot 1, the second chains to the
    first; a third entry finds the file full. The first entry's time is against the inherited begin (9 s
    before), the second's against the first's."""
    buf = bytearray(40 + 2 * 4 + 3 * 20)
    got = native.index_place(
        buf,
        2,
        3,
        1_000,
        1_000,
        64,
        64,
        0,
        1,
        np.array([5, 7, 9], dtype=np.int32),
        np.array([100, 200, 300], dtype=np.int64),
        np.array([10_000, 12_500, 13_000], dtype=np.int64),
    )
    assert got == (2, 10_000, 12_500, 100, 200, 1, 3)
    want = bytearray(struct.pack(">qqqqii", 10_000, 12_500, 100, 200, 1, 3))
    want += struct.pack(">ii", 0, 2)  # slot 0 empty, slot 1 -> entry 2
    want += bytes(20)  # entry 0 is never used
    want += struct.pack(">iqii", 5, 100, 9, 0)  # (10,000 - 1,000) // 1,000 = 9 s, no previous
    want += struct.pack(">iqii", 7, 200, 2, 1)  # (12,500 - 10,000) // 1,000 = 2 s, previous: 1
    assert bytes(buf) == bytes(want)
    # full: nothing written, the header as it was
    assert (
        native.index_place(
            buf,
            2,
            3,
            *got[1:],
            np.array([1], dtype=np.int32),
            np.array([1], dtype=np.int64),
            np.array([1], dtype=np.int64),
        )
        == (0,) + got[1:]
    )
    assert bytes(buf) == bytes(want)


def test_index_place_refuses_bad_arguments(native):
    buf = bytearray(40 + 2 * 4 + 3 * 20)
    one = (np.array([1], dtype=np.int32), np.array([1], dtype=np.int64), np.array([1], dtype=np.int64))
    for sizes in ((2, 4), (3, 3), (0, 3), (2, 1), (-1, 3), (2**62, 3)):
        with pytest.raises(ValueError):
            native.index_place(buf, *sizes, 0, 0, 0, 0, 0, 1, *one)
    with pytest.raises(ValueError):  # a count below 1 would write before the entries
        native.index_place(buf, 2, 3, 0, 0, 0, 0, 0, 0, *one)
    with pytest.raises(ValueError):
        native.index_place(buf, 2, 3, 0, 0, 0, 0, 0, 1, one[0], np.zeros(2, dtype=np.int64), one[2])
    with pytest.raises(TypeError):
        native.index_place(bytes(buf), 2, 3, 0, 0, 0, 0, 0, 1, *one)
    assert bytes(buf) == bytes(len(buf))


# ---------------------------------------------------------------- whole services, both engines, against Java
KEYS = st.one_of(st.just(""), st.text(alphabet="abAB 😀", max_size=7), st.sampled_from(["xAa", "xBB", "DWIECHC"]))


def files_on_disk(root) -> list[bytes]:
    d = os.path.join(str(root), "index")
    if not os.path.isdir(d):
        return []
    out = []
    for n in sorted(os.listdir(d)):
        with open(os.path.join(d, n), "rb") as fh:
            out.append(fh.read())
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 6), st.integers(3, 9), st.data())
def test_index_service_columns_equal_java(native, slots, num, data):
    """Records reaching the service one by one (add), as lists of tuples (add_many) and as a run's columns
    (add_columns), with builds in between and files filling and rolling: with the compiled functions and with
    the pure ones, the files' bytes, the checkpoint's indexMsgTimestamp updates and queryOffset's answers are
    IndexService.buildIndex's record by record."""
    n = data.draw(st.integers(0, 40))
    records = []
    phy = 0
    for _ in range(n):
        phy = max(phy + data.draw(st.sampled_from([0, 1, 37, 100, -50])), 0)
        ts = data.draw(st.one_of(st.integers(1_000_000, 1_060_000), st.just(0), st.integers(10**12, 10**13)))
        records.append(
            (
                data.draw(st.sampled_from(["T", "T", "U"])),
                phy,
                ts,
                data.draw(st.sampled_from([0, 0, 0, 0x4, 0x8, 0xC])),
                data.draw(st.one_of(st.none(), st.sampled_from(["", "u1", "xAa"]))),
                data.draw(KEYS),
            )
        )
    # how the records arrive: (way, how many), and whether a build follows
    plan = data.draw(
        st.lists(st.tuples(st.sampled_from(["add", "many", "cols"]), st.integers(1, 8), st.booleans()), max_size=12)
    )
    queries = data.draw(
        st.lists(
            st.tuples(
                st.sampled_from(["T", "U"]),
                st.sampled_from(["a", "b", "A", "u1", "", "xAa", "xBB", "a😀"]),
                st.integers(1, 64),
                st.sampled_from([0, 1_000_000, 1_020_000, 10**12]),
                st.sampled_from([LONG_MAX, 1_030_000, 2 * 10**13]),
            ),
            max_size=4,
        )
    )
    ref = REF.RefIndexService(slots, num)
    for r in records:
        ref.build_index(*r)
    want_answers = [ref.query_offset(t, k, m, b, e) for t, k, m, b, e in queries]
    for eng in (native, None):
        flushed = []
        with tempfile.TemporaryDirectory() as d, engine(eng):
            svc = IndexService(d, slots, num, writable=True, on_full_flushed=flushed.append)
            i = 0
            for way, k, build in plan + [("cols", n, False)]:
                part = records[i : i + k]
                i += len(part)
                if way == "add":
                    for r in part:
                        svc.add(*r)
                elif way == "many":
                    svc.add_many(part)
                else:
                    svc.add_columns(*([list(c) for c in zip(*part)] if part else [[] for _ in range(6)]))
                if build:
                    svc.build()
            svc.build()
            assert files_on_disk(d) == ref.file_bytes()
            assert flushed == ref.index_msg_timestamps
            assert [svc.query_offsets(t, k, m, b, e) for t, k, m, b, e in queries] == want_answers
            svc.close()


def test_index_service_columns_runs_roll_many_files(native, tmp_path):
    """Long keyed runs as columns (KEYS of two tokens and a UNIQ_KEY) filling many small files: both engines
    write Java's bytes."""
    records = [
        (
            "T",
            10 * i,
            1_700_000_000_000 + i * 7,
            0,
            f"{i:032X}" if i % 3 else None,
            f"order-{i} cust-{i % 11}" if i % 4 else "",
        )
        for i in range(3000)
    ]
    ref = REF.RefIndexService(61, 500)
    for r in records:
        ref.build_index(*r)
    for eng in (native, None):
        d = tmp_path / ("c" if eng else "py")
        with engine(eng):
            svc = IndexService(str(d), 61, 500, writable=True)
            for a in range(0, len(records), 700):
                svc.add_columns(*[list(c) for c in zip(*records[a : a + 700])])
            svc.build()
            assert len(files_on_disk(d)) > 10
            assert files_on_disk(d) == ref.file_bytes()
            svc.close()
