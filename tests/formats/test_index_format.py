"""IndexFile layout (IndexHeader / IndexFile / IndexService of RocketMQ 5.x): header, slot and entry bytes of
small files worked out by hand, and rocketstore's run-at-a-time builder against a literal one-key-at-a-time
port of the Java (tests/_index_ref.py) for random inputs."""

import os
import struct
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rocketstore.formats import index as I
from rocketstore.log.index_file import IndexFile
from rocketstore.services.index_service import IndexService

import _index_ref as REF

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1


def hdr(begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count) -> bytes:
    return struct.pack(">qqqqii", begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count)


def layout(slots: int, num: int, header: bytes, slot_values: dict, entries: dict) -> bytes:
    """A whole file by hand: header, slots (slot -> entry number) and entries (number -> (hash, phy, diff, prev))."""
    out = bytearray(40 + 4 * slots + 20 * num)
    out[:40] = header
    for s, v in slot_values.items():
        struct.pack_into(">i", out, 40 + 4 * s, v)
    for n, e in entries.items():
        struct.pack_into(">iqii", out, 40 + 4 * slots + 20 * n, *e)
    return bytes(out)


def disk(path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def service(root, slots, num, flushed=None):
    return IndexService(
        str(root), slots, num, writable=True, on_full_flushed=(flushed.append if flushed is not None else None)
    )


def files_on_disk(root) -> list[bytes]:
    d = os.path.join(str(root), "index")
    return [disk(os.path.join(d, n)) for n in sorted(os.listdir(d))] if os.path.isdir(d) else []


def _hash(*units: int) -> int:
    """sum u_i * 31^(n-1-i) as a Java int, written out for hand-checked constants."""
    n = len(units)
    return REF.to_int(sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units)))


# "T#a".."T#i": 'T'=84, '#'=35 -> 84*961 + 35*31 + c = 81809 + c
HA, HB, HC, HD, HE, HI = (81809 + ord(c) for c in "abcdei")


# ---------------------------------------------------------------- constants and small pure functions


def test_sizes_and_positions_by_hand():
    assert (I.HEADER_SIZE, I.SLOT_SIZE, I.ENTRY_SIZE) == (40, 4, 20)
    assert I.file_size(4, 6) == 40 + 16 + 120 == 176
    assert I.file_size(100, 400) == 8440  # the golden stores' index files
    assert I.file_size(5_000_000, 20_000_000) == 420_000_040  # RocketMQ's default index file
    assert I.entry_position(4, 0) == 56 and I.entry_position(4, 1) == 76 and I.entry_position(8, 9) == 252
    assert I.build_key("TopicA", "k") == "TopicA#k"


def test_header_encode_decode_by_hand():
    h = I.IndexHeader(1_700_000_000_123, 1_700_000_009_999, 4096, 1 << 40, 7, 9)
    want = (
        bytes.fromhex("0000018BCFE5687B")
        + bytes.fromhex("0000018BCFE58F0F")
        + bytes.fromhex("0000000000001000")
        + bytes.fromhex("0000010000000000")
        + bytes.fromhex("00000007")
        + bytes.fromhex("00000009")
    )
    assert h.encode() == want
    assert I.decode_header(want) == h
    assert I.IndexHeader().encode() == bytes(36) + b"\0\0\0\x01"  # a new header counts from 1
    # IndexHeader.load: an index count of 0 or less (never flushed) reads as 1; nothing else is touched
    assert I.decode_header(bytes(40)).index_count == 1
    assert I.decode_header(bytes(36) + b"\xff\xff\xff\xfe").index_count == 1
    assert I.decode_header(bytes(32) + b"\0\0\0\x05" + b"\0\0\0\x00").hash_slot_count == 5


@pytest.mark.parametrize(
    "key,units",
    [
        ("T#a", (84, 35, 97)),
        ("Aa", (65, 97)),
        ("BB", (66, 66)),
        ("键", (0x952E,)),
        ("T#😀", (84, 35, 0xD83D, 0xDE00)),  # U+1F600 is two UTF-16 code units in Java
        ("T#键😀", (84, 35, 0x952E, 0xD83D, 0xDE00)),
        ("zzzzzzzz", (122,) * 8),  # hashCode -1910022912: abs is taken
        ("\ud800x", (0xD800, 120)),  # a lone surrogate is one code unit
    ],
)
def test_key_hash_by_code_units(key, units):
    h = _hash(*units)
    assert REF.java_hash(key) == h
    want = abs(h)
    assert int(I.key_hashes([key])[0]) == want == I.key_hash(key) == REF.index_key_hash(key)


def test_key_hash_known_numbers():
    assert I.key_hash("T#a") == HA == 81906
    assert I.key_hash("zzzzzzzz") == 1910022912
    assert I.key_hash("T#😀") == 84 * 29791 + 35 * 961 + 0xD83D * 31 + 0xDE00 == 4308978
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE; Math.abs leaves it negative -> 0
    assert REF.java_hash("polygenelubricants") == INT_MIN
    assert I.key_hash("polygenelubricants") == 0
    k = REF.string_with_hash("T#", INT_MIN)
    assert I.key_hash("T#" + k) == 0
    # MIN_VALUE + 1 is fine: its abs is MAX_VALUE
    k1 = REF.string_with_hash("T#", INT_MIN + 1)
    assert I.key_hash("T#" + k1) == INT_MAX
    assert I.key_hashes(["polygenelubricants", "T#a", "zzzzzzzz", ""]).tolist() == [0, 81906, 1910022912, 0]


def _texts():
    astral = st.integers(0x10000, 0x10FFFF).map(chr)
    bmp = st.integers(0, 0xFFFF).map(chr)  # includes lone surrogates
    return st.lists(st.one_of(bmp, astral, st.sampled_from("aAbB#")), max_size=40).map("".join)


@given(st.lists(_texts(), min_size=1, max_size=30))
def test_key_hashes_match_java_loop(keys):
    """Many keys of mixed lengths at once (rocketstore groups and pads them) against the textbook loop."""
    got = I.key_hashes(keys)
    assert got.tolist() == [REF.index_key_hash(k) for k in keys]
    assert all(0 <= v <= INT_MAX for v in got.tolist())


@pytest.mark.parametrize(
    "ts,begin,want",
    [
        (1_001_999, 1_000_000, 1),  # 1.999 s -> 1 (truncated)
        (1_002_000, 1_000_000, 2),
        (1_000_999, 1_000_000, 0),
        (1_000_000, 1_000_000, 0),
        (999_001, 1_000_000, 0),  # -0.999 s: Java truncates toward zero -> 0
        (997_000, 1_000_000, 0),  # -3 s -> clamped to 0
        (5_000, 0, 0),  # no begin timestamp yet -> 0
        (5_000, -7, 0),
        (1_000 + INT_MAX * 1000, 1_000, INT_MAX),
        (1_000 + INT_MAX * 1000 + 999, 1_000, INT_MAX),
        (1_000 + (INT_MAX + 1) * 1000, 1_000, INT_MAX),  # clamped to Integer.MAX_VALUE
        (LONG_MAX, 1, INT_MAX),
    ],
)
def test_time_diff_table(ts, begin, want):
    assert I.time_diff(ts, begin) == want
    assert I.time_diffs(np.array([ts], dtype=np.int64), begin).tolist() == [want]


@given(st.integers(0, 2**62), st.integers(-(10**6), 2**62))
def test_time_diff_matches_java(ts, begin):
    # putKey: (storeTimestamp - begin) / 1000 as a long, then the clamps
    d = REF.java_ldiv(ts - begin, 1000)
    want = 0 if begin <= 0 else (INT_MAX if d > INT_MAX else (0 if d < 0 else d))
    assert I.time_diff(ts, begin) == want
    assert I.time_diffs(np.array([ts], dtype=np.int64), begin).tolist() == [want]


@given(st.integers(0, 50), st.integers(0, 50), st.integers(-5, 60), st.integers(-5, 60))
def test_time_matched_is_java_is_time_matched(b, e, begin, end):
    h = I.IndexHeader(begin_timestamp=b, end_timestamp=e)
    r = REF.RefIndexFile(4, 6)
    r.header.begin_timestamp, r.header.end_timestamp = b, e
    assert h.time_matched(begin, end) == r.is_time_matched(begin, end)


# ---------------------------------------------------------------- small files by hand


def test_first_entry_by_hand(tmp_path):
    """indexCount starts at 1: the first entry is entry 1 (entry 0 stays zero), its timeDiff is 0 and the
    header's begin moves to it."""
    svc = service(tmp_path, 4, 6)
    svc.add("T", 100, 1_000_000, 0, None, "a")
    svc.build()
    [path] = [f.path for f in svc.files]
    assert HA % 4 == 2
    assert disk(path) == layout(4, 6, hdr(1_000_000, 1_000_000, 100, 100, 1, 2), {2: 1}, {1: (HA, 100, 0, 0)})
    svc.flush()
    assert disk(path) == layout(4, 6, hdr(1_000_000, 1_000_000, 100, 100, 1, 2), {2: 1}, {1: (HA, 100, 0, 0)})
    svc.close()


def test_chain_on_one_slot_by_hand(tmp_path):
    """Keys sharing slot 2 chain through prevIndexNo; hashSlotCount counts slots that were empty; timeDiff is
    seconds after the begin, truncated, negative -> 0, huge -> Integer.MAX_VALUE; end = the last put."""
    assert (HA % 4, HE % 4, HB % 4, HI % 4) == (2, 2, 3, 2)
    svc = service(tmp_path, 4, 8)
    for phy, ts, key in [
        (100, 1_000_000, "a"),
        (200, 1_001_999, "e"),
        (300, 999_000, "b"),
        (400, 1_002_000, "i"),
        (500, 1_000_000 + 2**31 * 1000, "a"),
        (600, 1_003_500, "b"),
    ]:
        svc.add("T", phy, ts, 0, None, key)
    svc.build()
    want = layout(
        4,
        8,
        hdr(1_000_000, 1_003_500, 100, 600, 2, 7),
        {2: 5, 3: 6},
        {
            1: (HA, 100, 0, 0),
            2: (HE, 200, 1, 1),
            3: (HB, 300, 0, 0),
            4: (HI, 400, 2, 2),
            5: (HA, 500, INT_MAX, 4),
            6: (HB, 600, 3, 3),
        },
    )
    assert disk(svc.files[0].path) == want
    # selectPhyOffset walks the whole chain but keeps only entries whose full hash matches
    assert svc.query_offsets("T", "a", 10)[0] == [500, 100]
    assert svc.query_offsets("T", "e", 10)[0] == [200]
    assert svc.query_offsets("T", "b", 10)[0] == [600, 300]
    assert svc.query_offsets("T", "c", 10)[0] == []
    svc.close()


def test_same_full_hash_keys_share_a_chain(tmp_path):
    """ "Aa" and "BB" hash alike, so "T#xAa" and "T#xBB" do too: the index cannot tell them apart."""
    h = REF.index_key_hash("T#xAa")
    assert h == REF.index_key_hash("T#xBB")
    svc = service(tmp_path, 8, 6)
    svc.add("T", 0, 2_000, 0, None, "xAa")
    svc.add("T", 50, 3_000, 0, None, "xBB")
    svc.build()
    assert disk(svc.files[0].path) == layout(
        8, 6, hdr(2_000, 3_000, 0, 50, 1, 3), {h % 8: 2}, {1: (h, 0, 0, 0), 2: (h, 50, 1, 1)}
    )
    assert svc.query_offsets("T", "xAa", 10)[0] == [50, 0]  # hash only, as RocketMQ
    svc.close()


def test_min_value_hash_goes_to_slot_zero(tmp_path):
    k = REF.string_with_hash("T#", INT_MIN)
    svc = service(tmp_path, 4, 6)
    svc.add("T", 7, 5_000, 0, None, k)
    svc.add("T", 9, 6_000, 0, None, "a")
    svc.build()
    assert disk(svc.files[0].path) == layout(
        4, 6, hdr(5_000, 6_000, 7, 9, 2, 3), {0: 1, 2: 2}, {1: (0, 7, 0, 0), 2: (HA, 9, 1, 0)}
    )
    assert svc.query_offsets("T", k, 10)[0] == [7]
    svc.close()


def test_non_ascii_and_emoji_keys(tmp_path):
    h1 = _hash(84, 35, 0xD83D, 0xDE00)  # "T#😀"
    h2 = abs(_hash(84, 35, 0x952E, 0xD83D, 0xDE00))  # "T#键😀"
    svc = service(tmp_path, 8, 6)
    svc.add("T", 10, 10_000, 0, "😀", "键😀")
    svc.build()
    slots = {h1 % 8: 1}
    slots[h2 % 8] = 2
    prev2 = 1 if h2 % 8 == h1 % 8 else 0
    assert disk(svc.files[0].path) == layout(
        8, 6, hdr(10_000, 10_000, 10, 10, len({h1 % 8, h2 % 8}), 3), slots, {1: (h1, 10, 0, 0), 2: (h2, 10, 0, prev2)}
    )
    svc.close()


def test_begin_timestamp_zero_keeps_every_diff_zero(tmp_path):
    """A first entry stored at time 0 leaves the begin timestamp at 0: putKey then writes timeDiff 0."""
    svc = service(tmp_path, 4, 6)
    svc.add("T", 0, 0, 0, None, "a")
    svc.add("T", 10, 5_000, 0, None, "b")
    svc.add("T", 20, 9_999_999, 0, None, "c")
    svc.build()
    assert disk(svc.files[0].path) == layout(
        4,
        6,
        hdr(0, 9_999_999, 0, 20, 3, 4),
        {2: 1, 3: 2, 0: 3},
        {1: (HA, 0, 0, 0), 2: (HB, 10, 0, 0), 3: (HC, 20, 0, 0)},
    )
    svc.close()


def test_uniq_key_first_then_keys_in_order_duplicates_twice(tmp_path):
    """buildIndex: UNIQ_KEY first, then each non-empty space-separated KEYS token (a repeated token twice);
    only ' ' separates."""
    svc = service(tmp_path, 8, 10)
    svc.add("T", 64, 1_000, 0, "U", " a  b\tc a ")
    svc.build()
    keys = ["T#U", "T#a", "T#b\tc", "T#a"]
    hashes = [REF.index_key_hash(k) for k in keys]
    slots, entries = {}, {}
    for n, h in enumerate(hashes, 1):
        entries[n] = (h, 64, 0, slots.get(h % 8, 0))
        slots[h % 8] = n
    assert disk(svc.files[0].path) == layout(8, 10, hdr(1_000, 1_000, 64, 64, len(slots), 5), slots, entries)
    assert svc.query_offsets("T", "a", 10)[0] == [64, 64]
    svc.close()


def test_rollback_not_indexed_prepared_and_commit_are(tmp_path):
    svc = service(tmp_path, 4, 6)
    svc.add("T", 0, 1_000, 0x4, None, "a")  # PREPARED
    svc.add("T", 10, 2_000, 0xC, None, "b")  # ROLLBACK
    svc.add("T", 20, 3_000, 0x8, None, "c")  # COMMIT
    svc.build()
    assert disk(svc.files[0].path) == layout(
        4, 6, hdr(1_000, 3_000, 0, 20, 2, 3), {2: 1, 0: 2}, {1: (HA, 0, 0, 0), 2: (HC, 20, 2, 0)}
    )
    svc.close()


def test_records_behind_the_last_entry_are_skipped_but_the_last_one_is_not(tmp_path):
    """buildIndex returns when commitLogOffset < the file's endPhyOffset (strictly)."""
    svc = service(tmp_path, 4, 8)
    svc.add("T", 100, 1_000, 0, None, "a")
    svc.add("T", 50, 1_000, 0, None, "b")  # behind: skipped
    svc.add("T", 100, 2_000, 0, None, "c")  # at the end offset: indexed again
    svc.build()
    assert disk(svc.files[0].path) == layout(
        4, 8, hdr(1_000, 2_000, 100, 100, 2, 3), {2: 1, 0: 2}, {1: (HA, 100, 0, 0), 2: (HC, 100, 1, 0)}
    )
    svc.close()


def test_full_file_rolls_and_the_new_one_inherits_the_end(tmp_path):
    """maxIndexNum=4 holds 3 entries. The next file starts with begin=end=the previous end; its first
    timeDiff is measured from that inherited begin, then begin moves to the first entry itself."""
    flushed = []
    svc = service(tmp_path, 4, 4, flushed)
    svc.add("T", 100, 10_000, 0, None, "a b")
    svc.add("T", 200, 12_500, 0, None, "c")
    svc.build()
    assert len(svc.files) == 1 and svc.files[0].is_write_full() and flushed == []
    svc.add("T", 300, 15_900, 0, None, "d")
    svc.add("T", 400, 17_000, 0, None, "e")
    svc.build()
    f1, f2 = files_on_disk(tmp_path)
    assert f1 == layout(
        4,
        4,
        hdr(10_000, 12_500, 100, 200, 3, 4),
        {2: 1, 3: 2, 0: 3},
        {1: (HA, 100, 0, 0), 2: (HB, 100, 0, 0), 3: (HC, 200, 2, 0)},
    )
    # (15_900 - 12_500) / 1000 = 3 against the inherited begin; then (17_000 - 15_900) / 1000 = 1
    assert f2 == layout(
        4, 4, hdr(15_900, 17_000, 300, 400, 2, 3), {1: 1, 2: 2}, {1: (HD, 300, 3, 0), 2: (HE, 400, 1, 0)}
    )
    assert flushed == [12_500]  # the full file's end goes to the checkpoint's indexMsgTimestamp
    # query: newest file first
    assert svc.query_offsets("T", "a", 10) == ([100], 17_000, 400)
    svc.close()


def test_keys_of_one_record_split_across_files(tmp_path):
    svc = service(tmp_path, 4, 4)
    svc.add("T", 100, 10_000, 0, None, "a b")
    svc.add("T", 200, 13_000, 0, None, "c d e")  # c fills file 1, d and e go to file 2
    svc.build()
    f1, f2 = files_on_disk(tmp_path)
    assert f1 == layout(
        4,
        4,
        hdr(10_000, 13_000, 100, 200, 3, 4),
        {2: 1, 3: 2, 0: 3},
        {1: (HA, 100, 0, 0), 2: (HB, 100, 0, 0), 3: (HC, 200, 3, 0)},
    )
    # inherited begin = 13_000 = this record's own time: timeDiff 0
    assert f2 == layout(
        4, 4, hdr(13_000, 13_000, 200, 200, 2, 3), {1: 1, 2: 2}, {1: (HD, 200, 0, 0), 2: (HE, 200, 0, 0)}
    )
    svc.close()


def test_a_record_without_keys_opens_the_next_file(tmp_path):
    """getAndCreateLastIndexFile runs for every dispatched record: once the last file is full, any record
    (even one without keys) creates the next. Until a first entry or a flush, only the header fields the
    constructor set are in the file: hashSlotCount and indexCount bytes stay zero."""
    svc = service(tmp_path, 4, 4)
    svc.add("T", 100, 10_000, 0, None, "a b c")
    svc.build()
    assert len(files_on_disk(tmp_path)) == 1
    svc.add("T", 300, 20_000, 0, None, None)
    svc.build()
    f1, f2 = files_on_disk(tmp_path)
    assert f2 == layout(4, 4, hdr(10_000, 10_000, 100, 100, 0, 0), {}, {})
    svc.flush()
    assert files_on_disk(tmp_path)[1] == layout(4, 4, hdr(10_000, 10_000, 100, 100, 0, 1), {}, {})
    svc.close()


def test_rollback_record_also_opens_the_next_file(tmp_path):
    svc = service(tmp_path, 4, 4)
    svc.add("T", 100, 10_000, 0, None, "a b c")
    svc.add("T", 200, 11_000, 0xC, None, "d")
    svc.build()
    assert len(files_on_disk(tmp_path)) == 2
    svc.close()


def test_last_key_filling_the_file_does_not_open_the_next(tmp_path):
    svc = service(tmp_path, 4, 4)
    svc.add("T", 100, 10_000, 0, None, "a b")
    svc.add("T", 200, 11_000, 0, None, "c")
    svc.build()
    assert len(files_on_disk(tmp_path)) == 1
    svc.close()


def test_index_file_reopened_continues(tmp_path):
    """A loaded file (IndexHeader.load) goes on where it stopped."""
    svc = service(tmp_path, 4, 8)
    svc.add("T", 100, 10_000, 0, None, "a")
    svc.flush()
    svc.close()
    svc = service(tmp_path, 4, 8)
    svc.load(True, 0)
    svc.add("T", 200, 12_000, 0, None, "e")
    svc.build()
    assert files_on_disk(tmp_path) == [
        layout(4, 8, hdr(10_000, 12_000, 100, 200, 1, 3), {2: 2}, {1: (HA, 100, 0, 0), 2: (HE, 200, 2, 1)})
    ]
    svc.close()


def test_unflushed_index_count_zero_loads_as_one(tmp_path):
    """A file whose count bytes are 0 (created, never flushed) loads with count 1; its first put is entry 1."""
    path = tmp_path / "index" / "20240101000000000"
    path.parent.mkdir()
    path.write_bytes(layout(4, 6, hdr(5_000, 5_000, 64, 64, 0, 0), {}, {}))
    svc = service(tmp_path, 4, 6)
    svc.load(True, 0)
    svc.add("T", 64, 9_000, 0, None, "a")
    svc.build()
    # the inherited begin 5_000: (9_000 - 5_000)/1000 = 4; then begin = 9_000
    assert disk(path) == layout(4, 6, hdr(9_000, 9_000, 64, 64, 1, 2), {2: 1}, {1: (HA, 64, 4, 0)})
    svc.close()


# ---------------------------------------------------------------- select by hand


def _file_from(tmp_path, data: bytes, slots: int, num: int) -> IndexFile:
    p = tmp_path / "f"
    p.write_bytes(data)
    return IndexFile(str(p), slots, num, writable=False)


def test_select_stops_on_bad_links_and_time(tmp_path):
    h = 6  # slot 2 of 4
    base = dict(slots=4, num=8)
    # chain 5 -> 4 -> 3 (self loop at 3 would be prev == n) ; begin 10_000
    data = layout(
        4,
        8,
        hdr(10_000, 20_000, 0, 500, 1, 6),
        {2: 5},
        {1: (h, 100, 0, 0), 2: (h, 200, 1, 1), 3: (h, 300, 2, 3), 4: (h, 400, 5, 3), 5: (h, 500, 9, 4)},
    )
    f = _file_from(tmp_path, data, **base)
    out = []
    f.select(out, h, 10, 0, LONG_MAX)
    assert out == [500, 400, 300]  # stops at the self-linked entry 3
    out = []
    f.select(out, h, 2, 0, LONG_MAX)
    assert out == [500, 400]  # maxNum
    out = []
    f.select(out, h, 10, 14_000, 16_000)
    assert out == [400]  # 19_000 out of range, 15_000 in, 12_000 < begin stops
    out = []
    f.select(out, h + 4, 10, 0, LONG_MAX)
    assert out == []  # same slot, other hash
    f.close()
    # a negative timeDiff ends the walk; a slot beyond the count is empty; a count of 1 means empty
    data = layout(
        4,
        8,
        hdr(10_000, 20_000, 0, 500, 2, 4),
        {2: 3, 1: 7},
        {1: (h, 100, 0, 0), 2: (h, 200, -1, 1), 3: (h, 300, 2, 2), 7: (5, 700, 0, 0)},
    )
    f = _file_from(tmp_path, data, **base)
    out = []
    f.select(out, h, 10, 0, LONG_MAX)
    assert out == [300]
    out = []
    f.select(out, 5, 10, 0, LONG_MAX)
    assert out == []
    f.close()
    # an entry stored before `begin` ends the walk, even if older entries (out of time order) would match
    data = layout(
        4, 8, hdr(10_000, 20_000, 0, 500, 1, 4), {2: 3}, {1: (h, 100, 5, 0), 2: (h, 200, 1, 1), 3: (h, 300, 9, 2)}
    )
    f = _file_from(tmp_path, data, **base)
    out = []
    f.select(out, h, 10, 14_000, 20_000)
    assert out == [300]
    out = []
    f.select(out, h, 10, 11_000, 20_000)
    assert out == [300, 200, 100]
    f.close()
    data = layout(4, 8, hdr(10_000, 20_000, 0, 500, 1, 1), {2: 1}, {1: (h, 100, 0, 0)})
    f = _file_from(tmp_path, data, **base)
    out = []
    f.select(out, h, 10, 0, LONG_MAX)
    assert out == []
    f.close()


# ---------------------------------------------------------------- property tests against the Java port

SIZES = st.tuples(st.integers(4, 8), st.integers(6, 10))


def _timestamps():
    return st.one_of(
        st.integers(0, 3), st.integers(1_000, 60_000), st.integers(10**12, 10**12 + 10**13), st.just(2**62)
    )


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=150, deadline=None)
@given(
    SIZES,
    st.lists(st.tuples(st.integers(0, 12), st.integers(0, 10**6), _timestamps()), max_size=14),
    st.lists(st.integers(1, 5), min_size=20, max_size=20),
    st.integers(0, 3),
)
def test_index_file_runs_equal_one_key_at_a_time(sizes, puts, runs, inherit):
    """IndexFile.put_entries over random runs writes what putKey writes one key at a time."""
    slots, num = sizes
    hash_pool = [0, 1, 2, 3, slots, slots + 1, 2 * slots, INT_MAX, INT_MAX - 1, 81906, 4308978, 12345, 7]
    end_phy, end_ts = [(0, 0), (500, 9_000), (0, 9_000), (500, 0)][inherit]
    ref = REF.RefIndexFile(slots, num, end_phy, end_ts)
    ref_taken = 0
    for hi, phy, ts in puts:
        if not ref.put_hash(hash_pool[hi], phy, ts):
            break
        ref_taken += 1
    with tempfile.TemporaryDirectory() as d:
        f = IndexFile(
            os.path.join(d, "x"), slots, num, writable=True, create=True, end_phy_offset=end_phy, end_timestamp=end_ts
        )
        if not puts:
            # a new file holds only what the constructor set
            assert disk(f.path) == bytes(ref.buf)
        i = taken = 0
        for r in runs:
            if i >= len(puts):
                break
            chunk = puts[i : i + r]
            n = f.put_entries(
                np.array([hash_pool[c[0]] for c in chunk], dtype=np.int32),
                np.array([c[1] for c in chunk], dtype=np.int64),
                np.array([c[2] for c in chunk], dtype=np.int64),
            )
            assert n == min(len(chunk), num - 1 - taken)  # as many as fit
            taken += n
            i += r
        assert taken == ref_taken == min(len(puts), num - 1)
        assert disk(f.path) == bytes(ref.buf)
        f.flush()
        ref.flush()
        assert disk(f.path) == bytes(ref.buf)
        f.close()


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=150, deadline=None)
@given(SIZES, st.data())
def test_index_file_over_existing_bytes_equals_java(sizes, data):
    """A file loaded from disk with arbitrary slot heads (stale ones beyond the count read as empty) and
    arbitrary header values: putKey's rules, one key at a time, whatever the run lengths. (Links only point
    backwards or at the entry itself: a cycle would make Java's selectPhyOffset spin.)"""
    slots, num = sizes
    count = data.draw(st.integers(-2, num))
    head = hdr(
        data.draw(st.integers(0, 20_000)),
        data.draw(st.integers(0, 20_000)),
        data.draw(st.integers(0, 99)),
        data.draw(st.integers(0, 99)),
        data.draw(st.integers(0, slots)),
        count,
    )
    slot_values = {s: data.draw(st.integers(-3, num - 1)) for s in range(slots)}
    entries = {
        n: (data.draw(st.integers(0, 40)), n * 10, data.draw(st.integers(-1, 9)), data.draw(st.integers(-1, n)))
        for n in range(1, num)
    }
    raw = layout(slots, num, head, slot_values, entries)
    puts = data.draw(
        st.lists(st.tuples(st.integers(0, 40), st.integers(0, 10**6), st.integers(0, 60_000)), max_size=12)
    )
    runs = data.draw(st.lists(st.integers(1, 4), min_size=12, max_size=12))
    ref = REF.RefIndexFile(slots, num, data=raw)
    ref.load()
    for h, phy, ts in puts:
        if not ref.put_hash(h, phy, ts):
            break
    # and the chains it builds answer as selectPhyOffset does
    queries = data.draw(
        st.lists(
            st.tuples(st.integers(0, 40), st.integers(0, 30_000), st.integers(0, 80_000), st.integers(1, 12)),
            max_size=6,
        )
    )
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x")
        with open(p, "wb") as fh:
            fh.write(raw)
        f = IndexFile(p, slots, num, writable=True)
        i = 0
        for r in runs:
            if i >= len(puts):
                break
            chunk = puts[i : i + r]
            f.put_entries(
                np.array([c[0] for c in chunk], dtype=np.int32),
                np.array([c[1] for c in chunk]),
                np.array([c[2] for c in chunk]),
            )
            i += r
        assert disk(p) == bytes(ref.buf)
        for h, b, e, m in queries:
            want = []
            ref.select_hash(want, h, m, b, e)
            got = []
            f.select(got, h, m, b, e)
            assert got == want
        f.close()


KEYS = st.one_of(st.none(), st.text(alphabet="abAB 😀", max_size=7), st.sampled_from(["xAa", "xBB", "DWIECHC"]))


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=150, deadline=None)
@given(SIZES, st.data())
def test_index_service_equals_java_build_index(sizes, data):
    """IndexService.add/build in random run lengths == IndexService.buildIndex record by record: every file's
    bytes (rolling included), the checkpoint's indexMsgTimestamp updates, and queryOffset's answers."""
    slots, num = sizes
    n = data.draw(st.integers(0, 25))
    records = []
    phy = 0
    for _ in range(n):
        step = data.draw(st.sampled_from([0, 1, 37, 100, -50]))
        phy = max(phy + step, 0)
        ts = data.draw(st.one_of(st.integers(1_000_000, 1_060_000), st.just(0), st.integers(10**12, 10**12 + 10**13)))
        topic = data.draw(st.sampled_from(["T", "T", "U"]))
        sys_flag = data.draw(st.sampled_from([0, 0, 0, 0x4, 0x8, 0xC]))
        uniq = data.draw(st.one_of(st.none(), st.sampled_from(["", "u1", "xAa"])))
        records.append((topic, phy, ts, sys_flag, uniq, data.draw(KEYS)))
    builds = set(data.draw(st.lists(st.integers(0, n), max_size=6)))
    ref = REF.RefIndexService(slots, num)
    for topic, phy, ts, sf, uniq, keys in records:
        ref.build_index(topic, phy, ts, sf, uniq, keys)
    flushed = []
    with tempfile.TemporaryDirectory() as d:
        svc = service(d, slots, num, flushed)
        for i, rec in enumerate(records):
            if i in builds:
                svc.build()
            svc.add(*rec)
        svc.build()
        assert files_on_disk(d) == ref.file_bytes()
        assert flushed == ref.index_msg_timestamps
        for _ in range(data.draw(st.integers(0, 5))):
            topic = data.draw(st.sampled_from(["T", "U"]))
            key = data.draw(st.sampled_from(["a", "b", "A", "B", "u1", "", "xAa", "xBB", "DWIECHC", "a😀", "ab"]))
            m = data.draw(st.integers(1, 70))
            begin = data.draw(st.sampled_from([0, 1_000_000, 1_020_000, 10**12]))
            end = data.draw(st.sampled_from([LONG_MAX, 1_030_000, 1_060_000, 2 * 10**13]))
            assert svc.query_offsets(topic, key, min(m, 64), begin, end) == ref.query_offset(topic, key, m, begin, end)
        svc.flush()
        ref.flush()
        assert files_on_disk(d) == ref.file_bytes()
        svc.close()


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=150, deadline=None)
@given(
    SIZES,
    st.lists(
        st.tuples(st.integers(1, 500), st.integers(1, 5_000), st.lists(st.integers(0, 12), min_size=1, max_size=3)),
        min_size=2,
        max_size=9,
    ),
    st.data(),
)
def test_cutting_the_newest_entries_leaves_the_file_putkey_wrote_before_them(sizes, records, data):
    """Records (each at a higher offset, a later time, with 1-3 keys) go into a file; cutting it at a record's
    offset (recovery cut the CommitLog there) leaves the very bytes Java's putKey writes for the records before
    it alone, flushed: the slots' heads and hashSlotCount as they were, the cut entries zeroed, the header
    ending at the last entry kept."""
    slots, num = sizes
    hash_pool = [0, 1, 2, 3, slots, slots + 1, 2 * slots, INT_MAX, INT_MAX - 1, 81906, 4308978, 12345, 7]
    phy, ts, rows, time_of = 100, 10**12, [], {}
    for gap, dt, keys in records:
        phy, ts = phy + gap, ts + dt
        time_of[phy] = ts
        rows += [(hash_pool[k], phy, ts) for k in keys]
    rows = rows[: num - 1]  # what one file holds
    starts = sorted({p for _, p, _ in rows})
    if len(starts) < 2:
        return
    cut_at = data.draw(st.sampled_from(starts[1:]))  # a record's start, keeping at least one record
    kept = [r for r in rows if r[1] < cut_at]
    ref = REF.RefIndexFile(slots, num)
    for h, p, t in kept:
        assert ref.put_hash(h, p, t)
    ref.flush()
    with tempfile.TemporaryDirectory() as d:
        f = IndexFile(os.path.join(d, "x"), slots, num, writable=True, create=True)
        f.put_entries(
            np.array([r[0] for r in rows], dtype=np.int32),
            np.array([r[1] for r in rows], dtype=np.int64),
            np.array([r[2] for r in rows], dtype=np.int64),
        )
        assert f.cut_from(cut_at, time_of.get) == len(rows) - len(kept)
        assert disk(f.path) == bytes(ref.buf)
        assert f.cut_from(cut_at, time_of.get) == 0  # nothing past it any more
        f.close()
