"""The index through MessageStore: query by KEYS / UNIQ_KEY, time ranges, caps, several files, collisions,
by_msg_id / by_unique_key, reopen, crash recovery, cleanup, read-only. Expected answers and bytes come from
the put results and from tests/_index_ref.py (a literal port of RocketMQ's IndexService / IndexFile)."""

import os
import shutil
import struct

import pytest

from rocketstore import Message, MessageStore, PutStatus, StoreConfig
from rocketstore.services import index_service

import _index_ref as REF

T0 = 1_700_000_000_000
SLOTS, NUM = 16, 20  # 19 entries per index file
SIZES = dict(
    mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=200, max_hash_slot_num=SLOTS, max_index_num=NUM
)


class Clock:
    """Store timestamps under the test's control: each call returns `now`, then moves it on by `step`."""

    def __init__(self, start=T0, step=1000):
        self.now, self.step = start, step

    def __call__(self):
        t = self.now
        self.now += self.step
        return t


def config(clock=None, **kw):
    return StoreConfig(**{**SIZES, "clock": clock or Clock(), **kw})


class Recorder:
    """Puts messages and remembers what RocketMQ's buildIndex would be handed for each record."""

    def __init__(self, store):
        self.store = store
        self.records = []  # (topic, phy, store_ts, sys_flag, uniq, keys) in put order
        self.by_phy = {}

    def put(self, topic, keys=None, uniq=None, body=b"x", sys_flag=0, queue_id=0):
        props = {"UNIQ_KEY": uniq} if uniq is not None else None
        r = self.store.put(
            Message(topic, body, keys=keys, properties=props, sys_flag=sys_flag, born_timestamp=1), queue_id
        )
        assert r.ok, r
        self.records.append((topic, r.physical_offset, r.store_timestamp, sys_flag, uniq, keys))
        self.by_phy[r.physical_offset] = (topic, keys, uniq)
        return r

    def put_batch(self, topic, keys_list, queue_id=0):
        msgs = [Message(topic, b"b%d" % i, keys=k, born_timestamp=1) for i, k in enumerate(keys_list)]
        rb = self.store.put_batch(msgs, queue_id)
        assert rb.ok
        for r, k in zip(rb, keys_list):
            self.records.append((topic, r.physical_offset, rb.store_timestamp, 0, None, k))
            self.by_phy[r.physical_offset] = (topic, k, None)
        return rb

    def reference(self, files=None):
        ref = REF.RefIndexService(SLOTS, NUM)
        if files:
            ref.files = list(files)
        for rec in sorted(self.records, key=lambda r: r[1]):
            ref.build_index(*rec)
        return ref


def index_bytes(root) -> list[bytes]:
    d = os.path.join(str(root), "index")
    if not os.path.isdir(d):
        return []
    out = []
    for n in sorted(os.listdir(d)):
        with open(os.path.join(d, n), "rb") as fh:
            out.append(fh.read())
    return out


def tree(root) -> dict:
    out = {}
    for dirpath, _dirs, files in os.walk(str(root)):
        for n in files:
            p = os.path.join(dirpath, n)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, str(root))] = fh.read()
    return out


def offsets(result) -> list[int]:
    return [m.physical_offset for m in result]


def expected(ref, topic, key, max_count=32, begin=0, end=REF.LONG_MAX) -> list[int]:
    """queryOffset's offsets, sorted as queryMessage sorts them."""
    return sorted(ref.query_offset(topic, key, max_count, begin, end)[0])


def msg_id(ip: str, port: int, offset: int) -> str:
    import ipaddress

    return (ipaddress.ip_address(ip).packed + struct.pack(">iq", port, offset)).hex().upper()


# ---------------------------------------------------------------- bytes on disk


@pytest.mark.parametrize("inline", [True, False], ids=["put-path", "reput-thread"])
def test_index_files_are_what_build_index_writes(tmp_path, inline):
    """A mixed workload over several index files (UNIQ_KEY, KEYS, repeated and empty tokens, producer
    batches, transactions, a second topic): the files equal RocketMQ's buildIndex record by record."""
    clock = Clock(step=700)  # store times 0.7 s apart: truncated timeDiffs
    with MessageStore.open(tmp_path, config(clock, dispatch_in_put_path=inline)) as s:
        rec = Recorder(s)
        for i in range(40):
            topic = "U" if i % 5 == 0 else "T"
            keys = [None, f"k{i % 7}", f"k{i % 3} k{i % 4}", "dup dup", "  sp  ", "键😀"][i % 6]
            uniq = f"ID{i:04d}" if i % 3 else None
            sys_flag = 0xC if i % 11 == 5 else (0x4 if i % 13 == 7 else (0x8 if i % 17 == 3 else 0))
            rec.put(topic, keys=keys, uniq=uniq, body=bytes(i % 9), sys_flag=sys_flag)
            if i % 10 == 9:
                rec.put_batch("T", [f"b{i}", None, f"b{i} k1"])
        assert s.wait_dispatched(timeout_s=10)
        s._index.build()  # rocketstore queues dispatched records and indexes them a run at a time
        live = index_bytes(tmp_path)
    ref = rec.reference()
    assert len(ref.files) >= 4
    # live files: RocketMQ flushes a full file when it opens the next; the last one's header is current
    assert live == ref.file_bytes()
    ref.flush()
    assert index_bytes(tmp_path) == ref.file_bytes()


# ---------------------------------------------------------------- queries


def test_query_by_keys_and_unique_key(tmp_path):
    with MessageStore.open(tmp_path, config()) as s:
        rec = Recorder(s)
        a = rec.put("T", keys="order-1 shared", uniq="U-A", body=b"a")
        b = rec.put("T", keys=["order-2", "shared"], uniq="U-B", body=b"b")
        c = rec.put("Other", keys="order-1", uniq="U-C", body=b"c")
        rec.put("T", keys="order-10", body=b"d")
        r = s.query("T", "shared")
        assert offsets(r) == [a.physical_offset, b.physical_offset]
        assert [m.body for m in r] == [b"a", b"b"]
        assert offsets(s.query("T", "order-1")) == [a.physical_offset]  # not order-10, not Other's
        assert offsets(s.query("Other", "order-1")) == [c.physical_offset]
        assert offsets(s.query("T", "U-B")) == [b.physical_offset]
        assert offsets(s.query("T", "U-C")) == []
        assert offsets(s.query("T", "order")) == []
        assert offsets(s.query("Nope", "shared")) == []
        m = s.query("T", "U-A")[0]
        assert (m.topic, m.unique_key, m.keys, m.body) == ("T", "U-A", ["order-1", "shared"], b"a")


def test_query_time_range_uses_the_index_seconds(tmp_path):
    """selectPhyOffset compares begin_ts + timeDiff*1000, not the record's own store time."""
    clock = Clock()
    with MessageStore.open(tmp_path, config(clock)) as s:
        rec = Recorder(s)
        rs = []
        for dt in (0, 1_500, 2_999, 3_000, 10_000):
            clock.now = T0 + dt
            rs.append(rec.put("T", keys="k"))
        o = [r.physical_offset for r in rs]
        assert [r.store_timestamp - T0 for r in rs] == [0, 1_500, 2_999, 3_000, 10_000]
        # index times: T0, T0+1000, T0+2000, T0+3000, T0+10000
        assert offsets(s.query("T", "k", begin_ms=T0 + 1_200, end_ms=T0 + 2_500)) == [o[2]]
        assert offsets(s.query("T", "k", begin_ms=T0 + 1_000, end_ms=T0 + 1_000)) == [o[1]]
        assert offsets(s.query("T", "k", begin_ms=T0 + 1_001, end_ms=T0 + 1_999)) == []
        assert offsets(s.query("T", "k", end_ms=T0 + 999)) == [o[0]]
        assert offsets(s.query("T", "k", begin_ms=T0 + 3_000)) == [o[3], o[4]]
        assert offsets(s.query("T", "k", begin_ms=T0 + 10_001)) == []
        assert offsets(s.query("T", "k", begin_ms=T0, end_ms=T0 + 10_000)) == o
        assert offsets(s.query("T", "k", begin_ms=T0 + 5_000, end_ms=T0 + 1_000)) == []
        ref = rec.reference()
        for b, e in [(0, T0), (T0 + 1, T0 + 2_000), (T0 + 2_000, T0 + 9_999), (T0 + 9_000, REF.LONG_MAX)]:
            assert offsets(s.query("T", "k", begin_ms=b, end_ms=e)) == expected(ref, "T", "k", 32, b, e)


def test_time_ranges_across_files(tmp_path):
    """Newest file first; a file whose span misses [begin, end] is skipped; the walk stops after the first
    file that begins before `begin`."""
    clock = Clock(step=1000)
    with MessageStore.open(tmp_path, config(clock)) as s:
        rec = Recorder(s)
        for i in range(60):
            rec.put("T", keys=f"k k{i % 2}")
        s._index.build()
        assert s.index_file_count() == 7
        ref = rec.reference()
        for b, e in [
            (0, REF.LONG_MAX),
            (T0 + 5_000, T0 + 12_000),
            (T0 + 12_000, T0 + 33_000),
            (T0 + 40_000, REF.LONG_MAX),
            (0, T0 + 9_000),
            (T0 + 59_000, T0 + 59_000),
            (T0 + 61_000, T0 + 99_000),
        ]:
            for key in ("k", "k0", "k1"):
                want = expected(ref, "T", key, 64, b, e)
                assert offsets(s.query("T", key, 64, b, None if e == REF.LONG_MAX else e)) == want, (key, b, e)
        # by hand: message i is stored at T0 + i*1000; k1 = odd i
        want = [rec.records[i][1] for i in range(13, 32, 2)]
        assert offsets(s.query("T", "k1", 64, T0 + 12_000, T0 + 31_500)) == want


def test_max_count_newest_first_and_the_batch_cap(tmp_path):
    with MessageStore.open(tmp_path, config()) as s:
        rec = Recorder(s)
        rs = [rec.put("T", keys="same") for _ in range(70)]
        o = [r.physical_offset for r in rs]
        s._index.build()
        assert s.index_file_count() == 4  # 70 entries in files of 19
        assert offsets(s.query("T", "same", 5)) == o[-5:]
        assert offsets(s.query("T", "same")) == o[-32:]
        assert offsets(s.query("T", "same", 1000)) == o[-64:]  # maxMsgsNumBatch = 64
        r = s.query("T", "same", 3)
        assert (r.index_last_update_timestamp, r.index_last_update_phy_offset) == (rs[-1].store_timestamp, o[-1])
    with MessageStore.open(tmp_path, config(max_msgs_num_batch=10)) as s:
        assert offsets(s.query("T", "same", 32)) == o[-10:]


def test_a_query_that_finds_nothing_reports_no_index_position(tmp_path):
    """queryMessage sets indexLastUpdateTimestamp/Phyoffset only after queryOffset returned offsets
    (DefaultMessageStore.queryMessage: `if (queryOffsetResult.getPhyOffsets().isEmpty()) break;` comes first)."""
    with MessageStore.open(tmp_path, config()) as s:
        rec = Recorder(s)
        r1 = rec.put("T", keys="k")
        rec.put("T", keys="other")
        hit = s.query("T", "k")
        assert offsets(hit) == [r1.physical_offset]
        assert hit.index_last_update_phy_offset == rec.records[-1][1]
        miss = s.query("T", "absent")
        assert list(miss) == []
        assert (miss.index_last_update_timestamp, miss.index_last_update_phy_offset) == (0, 0)


def test_duplicated_token_and_uniq_equal_to_a_key_return_the_offset_twice(tmp_path):
    with MessageStore.open(tmp_path, config()) as s:
        rec = Recorder(s)
        a = rec.put("T", keys="dup dup solo", uniq="solo")
        b = rec.put("T", keys="dup")
        assert offsets(s.query("T", "dup")) == [a.physical_offset, a.physical_offset, b.physical_offset]
        assert offsets(s.query("T", "solo")) == [a.physical_offset] * 2
        assert offsets(s.query("T", "dup", 2)) == [a.physical_offset, b.physical_offset]  # newest entries first
        assert s.by_unique_key("T", "solo").physical_offset == a.physical_offset


def test_transactions_prepared_indexed_rollback_not(tmp_path):
    with MessageStore.open(tmp_path, config()) as s:
        rec = Recorder(s)
        p = rec.put("T", keys="tx", uniq="P", sys_flag=0x4)
        rb = rec.put("T", keys="tx", uniq="R", sys_flag=0xC)
        c = rec.put("T", keys="tx", uniq="C", sys_flag=0x8)
        n = rec.put("T", keys="tx", uniq="N")
        assert offsets(s.query("T", "tx")) == [p.physical_offset, c.physical_offset, n.physical_offset]
        assert rb.physical_offset not in offsets(s.query("T", "tx"))
        assert s.by_unique_key("T", "R") is None
        assert s.by_unique_key("T", "P").sys_flag & 0xC == 0x4
        assert s.look(rb.physical_offset).unique_key == "R"  # the record itself is there
        assert index_bytes(tmp_path) == [rec.reference().files[0].buf]


def _colliding_keys():
    # "Aa" and "BB" have the same hashCode, so any strings built from them at the same positions collide
    keys = ["kAaAa", "kBBBB", "kAaBB", "kBBAa"]
    hashes = {REF.java_hash("T#" + k) for k in keys}
    assert len(hashes) == 1
    return keys


def test_colliding_keys_never_answer_for_each_other(tmp_path):
    k1, k2, k3, _ = _colliding_keys()
    with MessageStore.open(tmp_path, config()) as s:
        rec = Recorder(s)
        own = []
        for i in range(6):
            own.append(rec.put("T", keys=k1).physical_offset)
            rec.put("T", keys=k2)
            rec.put("T", keys=f"{k3} x")
        for _ in range(6):  # the newest entries of the chain are all someone else's
            rec.put("T", keys=k2)
        # the index itself cannot tell them apart (hash only, as RocketMQ) ...
        raw, _, _ = s._index.query_offsets("T", k1, 64)
        assert sorted(raw) == expected(rec.reference(), "T", k1, 64) and len(raw) == 24
        # ... but a query only answers with its own key, and others do not use up max_count
        assert offsets(s.query("T", k1)) == own
        assert offsets(s.query("T", k1, 3)) == own[-3:]
        assert offsets(s.query("T", k1, 1)) == own[-1:]
        assert [m.keys for m in s.query("T", k3)] == [[k3, "x"]] * 6
        assert offsets(s.query("T", "kBBAa")) == []


def test_colliding_topics_never_answer_for_each_other(tmp_path):
    """ "Aa#key" and "BB#key" hash alike: a query re-checks the topic."""
    assert REF.java_hash("Aa#key") == REF.java_hash("BB#key")
    with MessageStore.open(tmp_path, config()) as s:
        rec = Recorder(s)
        a = [rec.put("Aa", keys="key").physical_offset for _ in range(3)]
        b = [rec.put("BB", keys="key", uniq="key").physical_offset for _ in range(3)]
        assert offsets(s.query("Aa", "key", 3)) == a
        assert offsets(s.query("BB", "key", 3)) == sorted(b[1:] + b[2:])  # KEYS and UNIQ_KEY: twice each
        assert s.by_unique_key("Aa", "key") is None
        assert s.by_unique_key("BB", "key").physical_offset == b[0]


def test_index_disabled_writes_nothing_and_finds_nothing(tmp_path):
    with MessageStore.open(tmp_path, config(message_index_enable=False)) as s:
        rec = Recorder(s)
        r = rec.put("T", keys="k", uniq="U")
        s.flush()
        assert list(s.query("T", "k")) == [] and list(s.query("T", "U")) == []
        assert s.by_unique_key("T", "U") is None
        assert s.by_msg_id(r.msg_id).body == b"x"  # offset ids do not need the index
    with MessageStore.open(tmp_path, config(message_index_enable=False, dispatch_in_put_path=False)) as s:
        rec = Recorder(s)
        rec.put("T", keys="k2")
        assert s.wait_dispatched(timeout_s=10)
        assert list(s.query("T", "k2")) == []
    assert not os.path.exists(tmp_path / "index") or os.listdir(tmp_path / "index") == []


# ---------------------------------------------------------------- by_msg_id / by_unique_key


def test_by_msg_id(tmp_path):
    with MessageStore.open(tmp_path, config(store_host="10.1.2.3:10911")) as s:
        rec = Recorder(s)
        a = rec.put("T", keys="a", body=b"first")
        b = rec.put("T", keys="b", body=b"second")
        assert a.msg_id == msg_id("10.1.2.3", 10911, a.physical_offset)
        assert s.by_msg_id(a.msg_id).body == b"first"
        assert s.by_msg_id(msg_id("10.1.2.3", 10911, b.physical_offset)).body == b"second"
        assert s.by_msg_id(b.msg_id.lower()).body == b"second"
        # well formed, but not the start of a record this store wrote there
        for bad in (
            msg_id("10.1.2.3", 10911, b.physical_offset + 1),  # inside a record
            msg_id("10.1.2.3", 10911, a.physical_offset + 4),
            msg_id("10.1.2.3", 10911, s.max_physical_offset),  # past the end
            msg_id("10.1.2.3", 10911, 1 << 40),
            msg_id("10.1.2.3", 10911, -1),
            msg_id("10.1.2.3", 10912, a.physical_offset),  # another port
            msg_id("10.1.2.4", 10911, a.physical_offset),  # another host
            msg_id("::1", 10911, a.physical_offset),
        ):  # an IPv6 id (56 hex chars)
            assert s.by_msg_id(bad) is None, bad
        assert s.by_msg_id(a.msg_id) is not None


@pytest.mark.parametrize(
    "malformed",
    [
        "",
        "XYZ",
        "7F00000100002A9F000000000000000",  # 31 characters
        "7F00000100002A9F00000000000000000",  # 33
        "G" * 32,
        "0x000001" + "0" * 24,
        "7F00000100002A9F00000000000000  ",  # 32 characters, two of them blanks
        "7F000001 00002A9F 00000000000000",  # 32 characters with blanks between
        "7F00000100002A9F000000000000000\n",
    ],
)
def test_by_msg_id_malformed_is_a_value_error(tmp_path, malformed):
    with MessageStore.open(tmp_path, config()) as s:
        Recorder(s).put("T", keys="a")
        with pytest.raises(ValueError):
            s.by_msg_id(malformed)


def test_by_unique_key(tmp_path):
    with MessageStore.open(tmp_path, config()) as s:
        rec = Recorder(s)
        rec.put("T", keys="ID-1")  # a KEYS token equal to the id: not a unique key
        first = rec.put("T", uniq="ID-1", body=b"1")
        rec.put("T", uniq="ID-1", body=b"again")  # a producer retry: the first stored wins
        rec.put("U", uniq="ID-2")
        m = s.by_unique_key("T", "ID-1")
        assert (m.physical_offset, m.unique_key, m.body) == (first.physical_offset, "ID-1", b"1")
        assert s.by_unique_key("T", "ID-2") is None
        assert s.by_unique_key("U", "ID-2").topic == "U"
        assert s.by_unique_key("T", "ID-") is None


# ---------------------------------------------------------------- lifecycle


def _workload(rec, n=50, start=0):
    for i in range(start, start + n):
        rec.put("T", keys=f"k{i % 5} all", uniq=f"ID{i}")


def _answers(s):
    keys = [f"k{i}" for i in range(5)] + ["all", "ID3", "ID49", "ID77", "none"]
    return {k: offsets(s.query("T", k, 64)) for k in keys}


def test_reopen_answers_the_same_and_goes_on_where_it_stopped(tmp_path):
    with MessageStore.open(tmp_path, config()) as s:
        rec = Recorder(s)
        _workload(rec)
        before = _answers(s)
    files = index_bytes(tmp_path)
    assert files == _flushed(rec.reference())
    with MessageStore.open(tmp_path, config(Clock(T0 + 100_000))) as s:
        assert _answers(s) == before
        assert index_bytes(tmp_path) == files  # opening changes nothing
        rec.store = s
        _workload(rec, 30, start=50)
        after = _answers(s)
    ref = rec.reference()
    assert index_bytes(tmp_path) == _flushed(ref)
    for key, offs in after.items():
        assert offs == expected(ref, "T", key, 64), key
    with MessageStore.open(tmp_path, config(), read_only=True) as s:
        assert _answers(s) == after


def _flushed(ref):
    ref.flush()
    return ref.file_bytes()


def _crash_copy(tmp_path, n):
    """A store written and flushed, then copied while still open (the copy has the abort file)."""
    src, dst = tmp_path / "live", tmp_path / "crashed"
    s = MessageStore.open(src, config())
    rec = Recorder(s)
    _workload(rec, n)
    s.flush()
    shutil.copytree(src, dst)
    answers = _answers(s)
    full_ends = [f.end_timestamp for f in s._index.files if f.is_write_full()]
    s.close()
    assert (dst / "abort").exists()
    return dst, rec, answers, full_ends


def test_abnormal_stop_drops_unvouched_index_files_and_rebuilds_them(tmp_path):
    dst, rec, answers, full_ends = _crash_copy(tmp_path, 50)
    with open(dst / "checkpoint", "rb") as fh:
        index_msg_ts = struct.unpack_from(">q", fh.read(), 16)[0]
    assert index_msg_ts == full_ends[-1]  # the end of the last full (flushed) index file
    kept = []
    for data in index_bytes(dst):
        f = REF.RefIndexFile(SLOTS, NUM, data=data)
        f.load()
        if f.header.end_timestamp <= index_msg_ts:  # IndexService.load(lastExitOK=false)
            kept.append(f)
    assert 0 < len(kept) < len(index_bytes(dst))
    kept_names = sorted(os.listdir(dst / "index"))[: len(kept)]
    dropped = sorted(os.listdir(dst / "index"))[len(kept) :]
    # recovery re-dispatches from the start here; buildIndex skips what the kept files end before, and
    # indexes the record at their end offset once more, into a new file
    ref = rec.reference(files=kept)
    with MessageStore.open(dst, config()) as s:
        for n in dropped:
            assert not (dst / "index" / n).exists()
        got = _answers(s)
        for key in got:
            assert got[key] == expected(ref, "T", key, 64), key
        # the record at the last kept file's end offset: its UNIQ_KEY (indexed first) is in the kept file,
        # and the whole record is indexed again, so that id now answers twice
        last_kept_end = kept[-1].header.end_phy_offset
        uniq = rec.by_phy[last_kept_end][2]
        assert offsets(s.query("T", uniq)) == [last_kept_end] * 2
        assert {k: v for k, v in got.items() if k != uniq} == {k: v for k, v in answers.items() if k != uniq}
    assert sorted(os.listdir(dst / "index"))[: len(kept)] == kept_names
    assert index_bytes(dst) == _flushed(ref)


def test_abnormal_stop_without_a_full_index_file_rebuilds_everything(tmp_path):
    """indexMsgTimestamp is 0 until a full file was flushed: every index file is dropped and rebuilt from the
    CommitLog, entry for entry as before."""
    dst, rec, answers, full_ends = _crash_copy(tmp_path, 5)
    assert full_ends == []
    old = sorted(os.listdir(dst / "index"))
    assert len(old) == 1
    with MessageStore.open(dst, config()) as s:
        assert _answers(s) == answers
    assert not (dst / "index" / old[0]).exists()
    assert index_bytes(dst) == _flushed(rec.reference())


def test_abnormal_stop_read_only_rebuilds_in_memory_only(tmp_path):
    dst, rec, answers, full_ends = _crash_copy(tmp_path, 50)
    before = tree(dst)
    kept = []
    for data in index_bytes(dst):
        f = REF.RefIndexFile(SLOTS, NUM, data=data)
        f.load()
        if f.header.end_timestamp <= full_ends[-1]:
            kept.append(f)
    ref = rec.reference(files=kept)
    with MessageStore.open(dst, config(), read_only=True) as s:
        got = _answers(s)
        for key in got:
            assert got[key] == expected(ref, "T", key, 64), key
        assert s.by_unique_key("T", "ID49").unique_key == "ID49"
    after = tree(dst)
    assert {k: v for k, v in after.items() if k.startswith("index")} == {
        k: v for k, v in before.items() if k.startswith("index")
    }
    assert after == before


def test_read_only_open_changes_no_byte(tmp_path):
    with MessageStore.open(tmp_path, config()) as s:
        rec = Recorder(s)
        _workload(rec, 45)
    before = tree(tmp_path)
    with MessageStore.open(tmp_path, config(), read_only=True) as s:
        assert offsets(s.query("T", "ID44")) == [rec.records[-1][1]]
        assert len(s.query("T", "all", 64)) == 45
        assert s.put(Message("T", b"x", keys="k")).status is PutStatus.SERVICE_NOT_AVAILABLE
    assert tree(tmp_path) == before


def test_delete_expired_keeps_the_last_file(tmp_path):
    with MessageStore.open(tmp_path, config()) as s:
        rec = Recorder(s)
        for _ in range(80):  # 80 entries: 4 full files and one more
            rec.put("T", keys="all")
        s._index.build()
        files = list(s._index.files)
        ends = [f.end_phy_offset for f in files]
        names = [f.name for f in files]
        assert len(files) == 5 and ends == sorted(ends)
        idx = tmp_path / "index"
        assert s._index.delete_expired(ends[0]) == 0  # not below: kept (strictly less)
        assert s._index.delete_expired(0) == 0
        assert sorted(os.listdir(idx)) == names
        assert s._index.delete_expired(ends[0] + 1) == 1
        assert sorted(os.listdir(idx)) == names[1:]
        assert s._index.delete_expired(ends[2] + 1) == 2
        assert sorted(os.listdir(idx)) == names[3:]
        assert s._index.delete_expired(1 << 50) == 1  # everything below, but the last stays
        assert sorted(os.listdir(idx)) == names[4:]
        assert s._index.delete_expired(1 << 50) == 0
        assert [f.name for f in s._index.files] == names[4:]
        # queries see only what is left; new entries still go in
        ref = REF.RefIndexService(SLOTS, NUM)
        ref.files = [REF.RefIndexFile(SLOTS, NUM, data=index_bytes(tmp_path)[0])]
        ref.files[0].load()
        assert offsets(s.query("T", "all", 64)) == expected(ref, "T", "all", 64)
        r = rec.put("T", keys="late")
        assert offsets(s.query("T", "late")) == [r.physical_offset]


def test_query_drops_offsets_in_deleted_commitlog_files(tmp_path):
    """An index entry whose CommitLog file is gone: queryOffset still returns it, and queryMessage drops it
    (the golden store-expired answers). Offset 0 included: queryMessage reads each hit with
    commitLog.getData(offset, false), which finds no file for 0 once the first file is gone (only
    lookMessageByOffset falls back to the first file for offset 0)."""
    with MessageStore.open(tmp_path, config()) as s:
        rec = Recorder(s)
        rs = [rec.put("T", keys="k", body=b"z" * 300) for _ in range(14)]
    o = [r.physical_offset for r in rs]
    in_second = [p for p in o if p >= 4096]
    assert 0 < len(in_second) < len(o) - 3
    os.unlink(tmp_path / "commitlog" / f"{0:020d}")
    with MessageStore.open(tmp_path, config()) as s:
        assert s.min_physical_offset == 4096
        n = len(in_second)
        assert offsets(s.query("T", "k", n)) == in_second
        assert offsets(s.query("T", "k", n + 2)) == in_second
        assert s._index.query_offsets("T", "k", 64)[0] == o[::-1]
        assert offsets(s.query("T", "k", 64)) == in_second  # the walk reaches the entry for offset 0


def test_index_file_names_stay_ordered_after_a_quick_reopen(tmp_path, monkeypatch):
    """Index files are loaded in name order and the last one is written. Names come from the clock (as
    RocketMQ's timeMillisToHumanString); when several files are made within one millisecond rocketstore
    moves later names on by 1 ms, so a store reopened at once must not name a new file at or before
    them (same name: the new file cannot be created; earlier name: the newest file sorts first)."""
    frozen = int(T0)

    class FrozenTime:
        @staticmethod
        def time_ns():
            return frozen * 1_000_000  # the wall clock stands still while the files are made

        localtime = staticmethod(index_service.time.localtime)
        strftime = staticmethod(index_service.time.strftime)

    monkeypatch.setattr(index_service, "time", FrozenTime)
    with MessageStore.open(tmp_path, config(max_index_num=2)) as s:  # one entry per file
        rec = Recorder(s)
        for i in range(4):
            rec.put("T", keys=f"k{i}")
    names = sorted(os.listdir(tmp_path / "index"))
    assert len(names) == 4  # named T, T+1 ms, T+2 ms, T+3 ms
    frozen += 1  # reopened 1 ms later
    with MessageStore.open(tmp_path, config(Clock(T0 + 100_000), max_index_num=2)) as s:
        rec.store = s
        r = rec.put("T", keys="new")
        assert offsets(s.query("T", "new")) == [r.physical_offset]
    names2 = sorted(os.listdir(tmp_path / "index"))
    assert names2[:4] == names and len(names2) == 5
    with MessageStore.open(tmp_path, config(Clock(T0 + 200_000), max_index_num=2)) as s:
        rec.store = s
        assert offsets(s.query("T", "new")) == [r.physical_offset]
        r2 = rec.put("T", keys="newer")
        assert offsets(s.query("T", "newer")) == [r2.physical_offset]
        assert s._index.files[-1].end_phy_offset == r2.physical_offset


def test_a_corrupt_index_count_never_escapes_as_a_deep_error(tmp_path):
    """An index header claiming more entries than the file holds (and a slot pointing past the end) must
    not crash a query: the walk stays inside the file."""
    import struct as _struct

    cfg = StoreConfig(max_hash_slot_num=4, max_index_num=8)
    with MessageStore.open(tmp_path, cfg) as s:
        s.put(Message("T", b"x", keys=["k"]), 0)
    (path,) = list((tmp_path / "index").iterdir())
    data = bytearray(path.read_bytes())
    _struct.pack_into(">i", data, 36, 1000)  # indexCount
    for slot in range(4):
        _struct.pack_into(">i", data, 40 + 4 * slot, 900)  # every slot points far past the entries
    path.write_bytes(bytes(data))
    with MessageStore.open(tmp_path, cfg, read_only=True) as s:
        assert list(s.query("T", "k")) == []


def test_a_full_index_file_is_written_out_off_the_put_path(tmp_path, monkeypatch):
    """As RocketMQ's FlushIndexFileThread: the put that fills an index file does not wait for its fsync; the
    checkpoint's indexMsgTimestamp moves only once that file is on disk, and flush() waits for it."""
    import threading as _threading
    from rocketstore.log.index_file import IndexFile

    seen = []
    real = IndexFile.flush

    def recording_flush(self):
        seen.append((_threading.current_thread().name, self.is_write_full()))
        real(self)

    monkeypatch.setattr(IndexFile, "flush", recording_flush)
    with MessageStore.open(tmp_path, StoreConfig(max_hash_slot_num=4, max_index_num=4)) as s:
        for i in range(7):  # 3 entries per file: two files fill
            s.put(Message("T", b"x", keys=[f"k{i}"]), 0)
        s._index.build()
        s.flush()
        full = [name for name, was_full in seen if was_full]
        assert full and all(name == "rocketstore-index-flush" for name in full[:2])
        assert s._checkpoint.index_msg_timestamp == s._index.files[1].end_timestamp
