"""MessageStore behaviour: rolling, offsets, get boundaries, bad input, locking, reopen, long polling."""

import os
import struct
import threading
import time

import pytest

from rocketstore import (
    CorruptDataError,
    GetStatus,
    Message,
    MessageStore,
    PutStatus,
    StoreConfig,
    StoreLockedError,
    StoreOpenError,
)

SMALL = dict(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=200)  # 10 units per CQ file


def small(**kw):
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000))
    return StoreConfig(**{**SMALL, "clock": lambda: next(clock), **kw})


def fill(store, topic, queue_id, n, body=b"x" * 50, tags=None):
    return [
        store.put(Message(topic, body, tags=tags(i) if callable(tags) else tags, born_timestamp=1), queue_id)
        for i in range(n)
    ]


def test_rolls_segments_with_blank_fillers(tmp_path):
    with MessageStore.open(tmp_path, small()) as s:
        rs = fill(s, "T", 0, 200, body=b"y" * 200)
        assert all(r.ok for r in rs)
        size = rs[0].size
        # 4096-byte segments hold floor((4096 - 8) / size) records each, then a BLANK
        per_seg = (4096 - 8) // size
        assert [r.physical_offset for r in rs[: per_seg + 1]] == [i * size for i in range(per_seg)] + [4096]
        files = sorted(os.listdir(tmp_path / "commitlog"))
        assert len(files) == -(-200 // per_seg)
        assert all(len(f) == 20 and int(f) % 4096 == 0 for f in files)
        with open(tmp_path / "commitlog" / files[0], "rb") as fh:
            seg = fh.read()
        assert struct.unpack_from(">ii", seg, per_seg * size) == (4096 - per_seg * size, -875286124)
        # ConsumeQueue: 10 units per 200-byte file -> 20 files
        assert len(os.listdir(tmp_path / "consumequeue" / "T" / "0")) == 20
        assert [s.look(r.physical_offset).queue_offset for r in rs[::37]] == list(range(0, 200, 37))


def test_queue_offsets_per_topic_queue_and_reopen(tmp_path):
    with MessageStore.open(tmp_path, small()) as s:
        for q in range(3):
            fill(s, "A", q, 5 + q)
        fill(s, "B", 0, 4)
        assert [s.max_offset("A", q) for q in range(3)] == [5, 6, 7]
        assert s.max_offset("B", 0) == 4 and s.max_offset("B", 1) == 0
    with MessageStore.open(tmp_path, small()) as s:
        assert [s.max_offset("A", q) for q in range(3)] == [5, 6, 7]
        r = s.put(Message("A", b"z"), 1)
        assert r.queue_offset == 6
        assert s.get("g", "A", 1, 6).messages[0].body == b"z"


def test_get_boundaries(tmp_path):
    with MessageStore.open(tmp_path, small()) as s:
        g = s.get("g", "T", 0, 0)
        assert (g.status, g.next_begin_offset, g.min_offset, g.max_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
        fill(s, "T", 0, 25)
        g = s.get("g", "T", 0, 25)
        assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 25)
        g = s.get("g", "T", 0, 99)
        assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 25)
        # one call never crosses a ConsumeQueue file (10 units each here)
        g = s.get("g", "T", 0, 3, max_count=32)
        assert g.status is GetStatus.FOUND
        assert [m.queue_offset for m in g.messages] == list(range(3, 10)) and g.next_begin_offset == 10
        g = s.get("g", "T", 0, 10, max_count=4)
        assert [m.queue_offset for m in g.messages] == [10, 11, 12, 13] and g.next_begin_offset == 14
        g = s.get("g", "T", 0, 24)
        assert [m.queue_offset for m in g.messages] == [24] and g.next_begin_offset == 25


def test_tag_filter_and_subscription_strings(tmp_path):
    with MessageStore.open(tmp_path, small()) as s:
        fill(s, "T", 0, 10, tags=lambda i: ["TagA", "TagB", "TagC"][i % 3])
        assert [m.queue_offset for m in s.get("g", "T", 0, 0, tags="TagA").messages] == [0, 3, 6, 9]
        assert [m.queue_offset for m in s.get("g", "T", 0, 0, tags="TagA || TagC").messages] == [0, 2, 3, 5, 6, 8, 9]
        assert [m.queue_offset for m in s.get("g", "T", 0, 0, tags={"TagB"}).messages] == [1, 4, 7]
        assert len(s.get("g", "T", 0, 0, tags="*").messages) == 10
        g = s.get("g", "T", 0, 0, tags="NoSuchTag")
        assert (g.status, g.next_begin_offset, g.messages) == (GetStatus.NO_MATCHED_MESSAGE, 10, [])


@pytest.mark.parametrize(
    "msg,status",
    [
        (Message("", b"x"), PutStatus.MESSAGE_ILLEGAL),
        (Message("../escape", b"x"), PutStatus.MESSAGE_ILLEGAL),
        (Message("a/b", b"x"), PutStatus.MESSAGE_ILLEGAL),
        (Message("T" * 256, b"x"), PutStatus.MESSAGE_ILLEGAL),
        (Message("T", b"x" * (4 * 1024 * 1024 + 1)), PutStatus.MESSAGE_ILLEGAL),
        (Message("T", b"x", properties={"p": "v" * 40000}), PutStatus.PROPERTIES_SIZE_EXCEEDED),
        (Message("T", b"x", born_host="not-a-host"), PutStatus.MESSAGE_ILLEGAL),
    ],
)
def test_bad_input_gets_a_status_and_writes_nothing(tmp_path, msg, status):
    with MessageStore.open(tmp_path, StoreConfig(mapped_file_size_commit_log=1 << 20)) as s:
        assert s.put(msg, 0).status is status
        assert s.put_batch([msg], 0).status is status
        assert s.max_physical_offset == 0
    assert not (tmp_path.parent / "escape").exists()
    assert not list((tmp_path / "commitlog").glob("*"))  # no segment was even created


def test_record_larger_than_a_segment_is_refused(tmp_path):
    with MessageStore.open(tmp_path, small()) as s:
        assert s.put(Message("T", b"x" * 5000), 0).status is PutStatus.MESSAGE_ILLEGAL
        assert s.put_batch([Message("T", b"x" * 1500)] * 3, 0).status is PutStatus.MESSAGE_ILLEGAL
        assert s.max_offset("T", 0) == 0
        assert s.put(Message("T", b"ok"), 0).queue_offset == 0


def test_batch_is_all_or_nothing_and_shares_store_time(tmp_path):
    with MessageStore.open(tmp_path, small()) as s:
        r = s.put_batch([Message("T", b"a"), Message("U", b"b")], 0)
        assert r.status is PutStatus.MESSAGE_ILLEGAL and s.max_physical_offset == 0
        r = s.put_batch([Message("T", bytes([i]) * 10, tags="X") for i in range(5)], 2)
        assert r.ok and [x.queue_offset for x in r] == [0, 1, 2, 3, 4]
        got = s.get("g", "T", 2, 0).messages
        assert [m.body for m in got] == [bytes([i]) * 10 for i in range(5)]
        assert len({m.store_timestamp for m in got}) == 1


def test_one_writer_many_readers(tmp_path):
    s = MessageStore.open(tmp_path, small())
    try:
        fill(s, "T", 0, 3)
        s.flush()
        with pytest.raises(StoreLockedError):
            MessageStore.open(tmp_path, small())
        with MessageStore.open(tmp_path, small(), read_only=True) as r:
            assert r.max_offset("T", 0) == 3
            assert r.put(Message("T", b"x"), 0).status is PutStatus.SERVICE_NOT_AVAILABLE
    finally:
        s.close()
    assert not (tmp_path / "abort").exists()


def test_missing_store_and_wrong_file_size(tmp_path):
    with pytest.raises(StoreOpenError, match="no store"):
        MessageStore.open(tmp_path / "nope", read_only=True)
    with MessageStore.open(tmp_path / "s", small()) as s:
        fill(s, "T", 0, 3)
    with pytest.raises(StoreOpenError, match="00000000000000000000.*4096"):
        MessageStore.open(tmp_path / "s", StoreConfig(mapped_file_size_commit_log=8192))


def test_file_sizes_are_read_from_disk_when_not_configured(tmp_path):
    with MessageStore.open(tmp_path, small()) as s:
        fill(s, "T", 0, 30)
    with MessageStore.open(tmp_path) as s:
        assert s.config.mapped_file_size_commit_log == 4096
        assert s.config.mapped_file_size_consume_queue == 200
        assert s.max_offset("T", 0) == 30


def test_crash_with_torn_last_record_is_cut_back(tmp_path):
    with MessageStore.open(tmp_path, small()) as s:
        rs = fill(s, "T", 0, 12)
    last = rs[-1]
    seg = tmp_path / "commitlog" / f"{last.physical_offset - last.physical_offset % 4096:020d}"
    with open(seg, "r+b") as fh:  # tear the last record: its tail never reached the disk
        fh.seek(last.physical_offset % 4096 + last.size - 20)
        fh.write(bytes(20))
    (tmp_path / "abort").write_text("1")
    with MessageStore.open(tmp_path, small()) as s:
        assert s.max_physical_offset == last.physical_offset
        assert s.max_offset("T", 0) == 11
        assert s.get("g", "T", 0, 11).status is GetStatus.OFFSET_OVERFLOW_ONE
        assert s.put(Message("T", b"again"), 0).queue_offset == 11


def test_lost_consumequeue_is_rebuilt_from_the_commitlog(tmp_path):
    with MessageStore.open(tmp_path, small()) as s:
        fill(s, "T", 0, 15, tags="A")
        fill(s, "T", 1, 7)
    import shutil

    shutil.rmtree(tmp_path / "consumequeue")
    with MessageStore.open(tmp_path, small()) as s:
        assert (s.max_offset("T", 0), s.max_offset("T", 1)) == (15, 7)
        assert len(s.get("g", "T", 0, 10, tags="A").messages) == 5


def test_reput_thread_and_put_path_build_the_same_queue(tmp_path):
    """The reput thread (RocketMQ's way) and the put path must write byte-identical ConsumeQueues."""

    def build(name, inline):
        with MessageStore.open(tmp_path / name, small(dispatch_in_put_path=inline)) as s:
            fill(s, "T", 0, 25, tags=lambda i: f"Tag{i % 4}")
            s.put_batch([Message("T", bytes([i]), tags="B", born_timestamp=1) for i in range(13)], 0)
            fill(s, "T", 1, 3)
            assert s.wait_dispatched(timeout_s=10)
            assert (s.max_offset("T", 0), s.max_offset("T", 1)) == (38, 3)
        root = tmp_path / name / "consumequeue"
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    inline, reput = build("inline", True), build("reput", False)
    assert len(inline) == 5 and inline == reput  # 38 units in 10-unit files: 4 files, plus queue 1


def test_long_polling_wakes_on_arrival(tmp_path):
    with MessageStore.open(tmp_path, small(dispatch_in_put_path=False)) as s:
        fill(s, "T", 0, 2)
        s.wait_dispatched()
        t = threading.Timer(0.2, lambda: s.put(Message("T", b"late"), 0))
        t.start()
        t0 = time.monotonic()
        g = s.get("g", "T", 0, 2, wait_ms=5000)
        assert g.status is GetStatus.FOUND and g.messages[0].body == b"late"
        assert time.monotonic() - t0 < 4
        t.join()
        g = s.get("g", "T", 0, 3, wait_ms=50)
        assert g.status is GetStatus.OFFSET_OVERFLOW_ONE


def test_user_dispatcher_sees_every_record(tmp_path):
    seen = []
    with MessageStore.open(tmp_path, small()) as s:
        s.add_dispatcher(lambda req: seen.append((req.topic, req.queue_id, req.consume_queue_offset)))
        fill(s, "T", 1, 3)
        s.put_batch([Message("U", b"1"), Message("U", b"2")], 0)
    assert seen == [("T", 1, 0), ("T", 1, 1), ("T", 1, 2), ("U", 0, 0), ("U", 0, 1)]


def test_offset_by_time_boundaries(tmp_path):
    times = iter([100, 200, 200, 200, 300])
    with MessageStore.open(tmp_path, StoreConfig(**SMALL, clock=lambda: next(times))) as s:
        fill(s, "T", 0, 5)
        lower = [s.offset_by_time("T", 0, t) for t in (50, 100, 150, 200, 250, 300, 999)]
        upper = [s.offset_by_time("T", 0, t, "upper") for t in (50, 100, 150, 200, 250, 300, 999)]
    assert lower == [0, 0, 1, 1, 4, 4, 5]
    assert upper == [0, 0, 0, 3, 3, 4, 4]


def test_broker_conf(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "# comment\nmappedFileSizeCommitLog=65536\nflushDiskType = SYNC_FLUSH\n"
        "enabledAppendPropCRC=true\nmapperFileSizeBatchConsumeQueue=920\nbrokerName=b1\n"
    )
    cfg = StoreConfig.from_properties(conf)
    assert (
        cfg.mapped_file_size_commit_log,
        cfg.flush_disk_type,
        cfg.enabled_append_prop_crc,
        cfg.mapped_file_size_batch_consume_queue,
    ) == (65536, "SYNC_FLUSH", True, 920)
    assert cfg.extra == {"brokerName": "b1"}
    with pytest.raises(ValueError, match="maxMessageSize"):
        StoreConfig.from_properties({"maxMessageSize": "lots"})


def test_tags_and_keys_are_stored_as_rocketmq_properties(tmp_path):
    with MessageStore.open(tmp_path, small()) as s:
        r = s.put(Message("T", b"body", tags="TagA", keys=["k1", "k2"], born_timestamp=5), 0)
        s.put(Message("T", b"body", properties={"a": "1"}, tags="TagB", born_timestamp=5), 0)
    with open(tmp_path / "commitlog" / f"{0:020d}", "rb") as fh:
        data = fh.read()
    props = b"KEYS\x01k1 k2\x02TAGS\x01TagA\x02"
    # TOTALSIZE = 88 fixed bytes for IPv4 hosts + body + 1 + topic + 2 + properties
    assert r.size == 88 + 4 + 1 + 1 + 2 + len(props)
    assert data[r.size - len(props) - 2 : r.size] == len(props).to_bytes(2, "big") + props
    second = data[r.size : r.size + 200]
    assert b"a\x011\x02TAGS\x01TagB\x02" in second
    # tagsCode in the ConsumeQueue is Java's "TagA".hashCode() = 2598919
    with open(tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}", "rb") as fh:
        assert struct.unpack(">qiq", fh.read(20)) == (0, r.size, 2598919)


def test_appended_crc_is_verified_on_read_when_configured(tmp_path):
    cfg = dict(enabled_append_prop_crc=True, force_verify_prop_crc=True)
    with MessageStore.open(tmp_path, small(**cfg)) as s:
        r = s.put(Message("T", b"payload", tags="A", born_timestamp=1), 0)
        assert s.look(r.physical_offset).body == b"payload"
    seg = tmp_path / "commitlog" / f"{0:020d}"
    data = bytearray(seg.read_bytes())
    tags_at = bytes(data[: r.size]).index(b"TAGS\x01A") + 5
    data[tags_at] ^= 0x01  # flip a bit inside TAGS, which only the appended CRC covers
    seg.write_bytes(bytes(data))
    with MessageStore.open(tmp_path, small(**cfg, check_crc_on_recover=False), read_only=True) as s:
        with pytest.raises(CorruptDataError) as ei:
            s.get("g", "T", 0, 0)
        assert "CRC" in str(ei.value) and "00000000000000000000" in str(ei.value) and "offset 0" in str(ei.value)
        assert s.look(r.physical_offset) is None
    with MessageStore.open(tmp_path, small(enabled_append_prop_crc=True), read_only=True) as s:
        assert s.get("g", "T", 0, 0).messages[0].body == b"payload"  # not verified unless configured


def test_record_with_bad_inner_batch_numbers_cuts_the_log_instead_of_failing_the_open(tmp_path):
    with MessageStore.open(tmp_path, small()) as s:
        good = s.put(Message("T", b"ok", born_timestamp=1), 0)
        bad = s.put(Message("T", b"x", raw_properties="INNER_NUM\x01x\x02INNER_BASE\x015\x02", born_timestamp=1), 0)
    assert bad.status is PutStatus.MESSAGE_ILLEGAL  # refused at put: INNER_NUM without INNER_BATCH_FLAG
    # write such a record behind the store's back, as a corrupt disk would
    from rocketstore.formats import record as R

    rec = R.encode_record(
        topic=b"T",
        body=b"x",
        props=b"INNER_NUM\x01x\x02INNER_BASE\x015\x02",
        queue_id=0,
        flag=0,
        sys_flag=0,
        born_timestamp=1,
        born_host=R.host_to_bytes("127.0.0.1:1"),
        store_timestamp=2,
        store_host=R.host_to_bytes("127.0.0.1:10911"),
        reconsume_times=0,
        prepared_transaction_offset=0,
        queue_offset=1,
        physical_offset=good.size,
        v2=False,
    )
    seg = tmp_path / "commitlog" / f"{0:020d}"
    data = bytearray(seg.read_bytes())
    data[good.size : good.size + len(rec)] = rec
    seg.write_bytes(bytes(data))
    (tmp_path / "abort").write_text("1")
    with MessageStore.open(tmp_path, small()) as s:
        assert s.max_physical_offset == good.size and s.max_offset("T", 0) == 1


def test_plain_message_fast_path_writes_what_the_general_path_writes(tmp_path):
    """put() has a shortcut for a message with only a topic, a body and tags; the same messages sent
    through the general path (tags given as a property) must give byte-identical files, across segment
    rolls (BLANK fillers), V2 topics and unicode tags."""
    msgs = [("T", b"x" * (i % 300), ("TagA", "标签", None, "")[i % 4]) for i in range(400)]
    msgs += [("L" * 200, b"body-%d" % i, "TagB") for i in range(50)]

    def write(root, general):
        ticks = iter(range(1_700_000_000_000, 1_700_000_000_000 + 10_000))
        cfg = StoreConfig(
            mapped_file_size_commit_log=16 * 1024, mapped_file_size_consume_queue=20 * 64, clock=lambda: next(ticks)
        )
        with MessageStore.open(root, cfg) as s:
            for i, (topic, body, tags) in enumerate(msgs):
                m = (
                    Message(topic, body, properties={"TAGS": tags} if tags else {}, born_timestamp=7)
                    if general
                    else Message(topic, body, tags=tags, born_timestamp=7)
                )
                assert s.put(m, queue_id=i % 3).status is PutStatus.PUT_OK
        return {
            str(p.relative_to(root)): p.read_bytes()
            for p in root.rglob("*")
            if p.is_file() and p.parts[-2] != "index" and p.name not in ("checkpoint", "lock")
        }

    fast = write(tmp_path / "fast", False)
    general = write(tmp_path / "general", True)
    assert len([k for k in fast if k.startswith("commitlog")]) > 3
    assert fast == general


@pytest.mark.parametrize(
    "bad",
    [
        dict(body="a str, not bytes"),
        dict(flag=2**31),
        dict(flag="1"),
        dict(reconsume_times=-(2**31) - 1),
        dict(born_timestamp=2**63),
        dict(prepared_transaction_offset=1.5),
    ],
)
def test_fields_a_record_cannot_hold_are_refused_not_raised(tmp_path, bad):
    with MessageStore.open(tmp_path, StoreConfig(mapped_file_size_commit_log=64 * 1024)) as s:
        assert s.put(Message("T", b"ok"), 0).status is PutStatus.PUT_OK  # caches the topic: the fast path
        fields = {"body": b"x", **bad}
        assert s.put(Message("T", **fields), 0).status is PutStatus.MESSAGE_ILLEGAL
        assert s.put(Message("T", tags="t", **fields), 0).status is PutStatus.MESSAGE_ILLEGAL
        # a batch takes its shared fields from its first message, and a body and a flag from each
        assert s.put_batch([Message("T", **fields), Message("T", b"y")], 0).status is PutStatus.MESSAGE_ILLEGAL
        if "body" in bad or "flag" in bad:
            assert s.put_batch([Message("T", b"y"), Message("T", **fields)], 0).status is PutStatus.MESSAGE_ILLEGAL
        assert s.max_physical_offset == s.put(Message("T", b"after"), 0).physical_offset  # nothing written


def test_tags_code_is_that_of_the_tags_as_stored(tmp_path):
    """An unpaired surrogate is stored as "?": the put path's ConsumeQueue unit must carry the tagsCode
    reput would compute. (A separator inside a tag, which RocketMQ would read back cut, is refused:
    tests/store/test_put_separators.py.)"""
    from _index_ref import java_hash  # the tests' own String.hashCode

    for dispatch in (True, False):
        root = tmp_path / str(dispatch)
        with MessageStore.open(root, StoreConfig(dispatch_in_put_path=dispatch)) as s:
            assert s.put(Message("T", b"1", tags="a\x02b"), 0).status is PutStatus.MESSAGE_ILLEGAL
            s.put(Message("T", b"2", tags="\ud800x"), 0)
            s.put(Message("T", b"3", tags="\ud800x"), 0)  # the second one takes the fast path
            assert s.wait_dispatched(5)
            assert [s.queue_unit("T", 0, i)[2] for i in range(2)] == [java_hash("?x"), java_hash("?x")]
            assert s.look(s.queue_unit("T", 0, 0)[0]).tags == "?x"


def test_a_property_merely_named_like_inner_num_is_not_refused(tmp_path):
    with MessageStore.open(tmp_path) as s:
        assert s.put(Message("T", b"x", properties={"XINNER_NUM": "1"}), 0).status is PutStatus.PUT_OK
        assert s.put(Message("T", b"x", properties={"INNER_NUM": "1"}), 0).status is PutStatus.MESSAGE_ILLEGAL


def test_a_tag_mismatch_after_a_removed_record_answers_no_matched_message(tmp_path):
    """getMessage: MESSAGE_WAS_REMOVING (a record whose CommitLog file is gone) is replaced by
    NO_MATCHED_MESSAGE when a later unit fails the filter and nothing was found (DefaultMessageStore sets the
    status at each refusal while the result is empty)."""
    from rocketstore import GetStatus as GS

    cfg = StoreConfig(mapped_file_size_commit_log=16 * 1024)
    with MessageStore.open(str(tmp_path / "s"), cfg) as s:
        while s.max_physical_offset + 2 * 400 < 16 * 1024:  # tag A fills the first segment...
            s.put(Message("T", b"x" * 200, tags="A"), queue_id=0)
        while len(s._commitlog.files.files) < 2:  # ...another topic rolls to the second
            s.put(Message("Other", b"z" * 200), queue_id=0)
        for _ in range(10):
            s.put(Message("T", b"y" * 200, tags="B"), queue_id=0)
        first = s._commitlog.files.files[0]
        s._commitlog.files.delete_head([first])  # the CommitLog cleaned, the queue not corrected yet
        r = s.get("g", "T", 0, 0, max_count=32, tags="A")
        assert r.messages == [] and r.status is GS.NO_MATCHED_MESSAGE
        r = s.get("g", "T", 0, 0, max_count=32)  # no filter: nothing refuses, it stays
        assert r.status is GS.FOUND and {m.tags for m in r.messages} == {"B"}
