"""Expired-file cleanup (issue 4), as RocketMQ's CleanCommitLogService and CleanConsumeQueueService: by time at
the delete_when hours, by disk ratio, forcibly, by hand; queues and index in step; disk-full refusal."""

import os
import threading
import time


from rocketstore import GetStatus, Message, MessageStore, PutStatus, StoreConfig
from rocketstore.services import cleanup as C

HOUR = 3600 * 1000


def local_ms(hour, minute=30):
    return int(time.mktime((2026, 1, 10, hour, minute, 0, 0, 0, -1)) * 1000)


AT_4 = local_ms(4)  # delete_when "04"
AT_3 = local_ms(3, 59)
AT_10 = local_ms(10)


def config(**kw):
    clock = iter(range(AT_10 - 200 * HOUR, AT_10))
    base = dict(
        mapped_file_size_commit_log=4096,
        mapped_file_size_consume_queue=200,  # 10 CQ units a file
        mapped_file_size_batch_consume_queue=46 * 4,
        max_hash_slot_num=16,
        max_index_num=40,
        delete_commit_log_files_interval=0,
        delete_consume_queue_files_interval=0,
        clock=lambda: next(clock),
    )
    return StoreConfig(**{**base, **kw})


def disk(ratio):
    return lambda path: ratio


def open_store(path, ratio=0.10, **kw):
    s = MessageStore.open(path, config(**kw))
    s._cleanup.disk_usage = disk(ratio)
    return s


def fill(s, n, topic="T", queue_id=0, body=b"x" * 300):
    rs = [s.put(Message(topic, body, tags="TagA", keys=[f"k{i}"]), queue_id) for i in range(n)]
    assert all(r.ok for r in rs)
    s.flush()
    return rs


def cl_files(s):
    return sorted(os.listdir(os.path.join(s.root, "commitlog")))


def age(s, names, now_ms, hours=100):
    t = (now_ms - hours * HOUR) * 1_000_000
    for n in names:
        os.utime(os.path.join(s.root, "commitlog", n), ns=(t, t))


def test_deletes_expired_files_only_at_the_delete_when_hour(tmp_path):
    with open_store(tmp_path) as s:
        fill(s, 60)
        names = cl_files(s)
        assert len(names) >= 5
        age(s, names[:3], AT_4)
        assert s._cleanup.run_once(AT_3) == 0  # expired, but not the hour and the disk is fine
        assert cl_files(s) == names
        assert s._cleanup.run_once(local_ms(5, 0)) == 0
        assert s._cleanup.run_once(AT_4) == 3
        assert cl_files(s) == names[3:]
        assert s.min_physical_offset == int(names[3])
        # 71 h old is not expired (file_reserved_time 72)
        age(s, names[3:4], AT_4, hours=71)
        assert s._cleanup.run_once(AT_4) == 0


def test_stops_at_the_first_unexpired_file(tmp_path):
    with open_store(tmp_path) as s:
        fill(s, 60)
        names = cl_files(s)
        age(s, [names[0], names[1], names[3]], AT_4)  # names[2] is fresh: no hole in the middle
        assert s._cleanup.run_once(AT_4) == 2
        assert cl_files(s) == names[2:]


def test_delete_when_takes_several_hours():
    assert C.is_it_time_to_do("04", AT_4)
    assert not C.is_it_time_to_do("04", AT_3)
    assert C.is_it_time_to_do("01;10;04", AT_10)
    assert not C.is_it_time_to_do("01;11", AT_10)


def test_disk_above_max_used_ratio_deletes_expired_files_at_any_hour(tmp_path):
    with open_store(tmp_path, ratio=0.80) as s:
        fill(s, 60)
        names = cl_files(s)
        age(s, names[:2], AT_10)
        assert s._cleanup.run_once(AT_10) == 2  # 10 o'clock, but 80% > 75%: expired ones go
        assert cl_files(s) == names[2:]
        assert s._cleanup.run_once(AT_10) == 0  # unexpired ones stay below the forcible ratio
        assert not s.disk_full


def test_disk_above_forcible_ratio_deletes_unexpired_files_too(tmp_path):
    with open_store(tmp_path, ratio=0.86) as s:
        fill(s, 60)
        names = cl_files(s)
        assert s._cleanup.run_once(AT_10) == len(names) - 1  # nothing expired, all but the last go
        assert cl_files(s) == names[-1:]
        assert not s.disk_full  # 86% is below the warning ratio
        assert s.put(Message("T", b"still writable")).ok


def test_forcible_deletion_can_be_turned_off(tmp_path):
    with open_store(tmp_path, ratio=0.86, clean_file_forcibly_enable=False) as s:
        fill(s, 60)
        names = cl_files(s)
        assert s._cleanup.run_once(AT_10) == 0
        assert cl_files(s) == names


def test_ratios_are_clamped_as_rocketmq_clamps_them(tmp_path):
    with open_store(tmp_path, disk_space_warning_level_ratio=99, disk_space_clean_forcibly_ratio=99) as s:
        assert s._cleanup.commitlog.disk_space_warning_level_ratio() == 0.90
        assert s._cleanup.commitlog.disk_space_clean_forcibly_ratio() == 0.85
    with open_store(tmp_path, disk_space_warning_level_ratio=10, disk_space_clean_forcibly_ratio=10) as s:
        assert s._cleanup.commitlog.disk_space_warning_level_ratio() == 0.35
        assert s._cleanup.commitlog.disk_space_clean_forcibly_ratio() == 0.30


def test_batch_max_per_pass_and_never_the_last_file(tmp_path):
    with open_store(tmp_path, delete_file_batch_max=2) as s:
        fill(s, 60)
        names = cl_files(s)
        age(s, names, AT_4)  # the last one too
        for k in range(1, 10):
            n = s._cleanup.run_once(AT_4)
            assert n == min(2, len(names) - 1 - 2 * (k - 1)) if 2 * k <= len(names) else n == 0
            if n == 0:
                break
        assert cl_files(s) == names[-1:]
        assert s._cleanup.run_once(AT_4) == 0
        assert s.put(Message("T", b"after")).ok


def test_manual_trigger_deletes_expired_files_now_pass_after_pass(tmp_path):
    with open_store(tmp_path, delete_file_batch_max=2) as s:
        fill(s, 60)
        names = cl_files(s)
        age(s, names[:5], AT_10)
        assert s._cleanup.run_once(AT_10) == 0  # not the hour, disk fine
        assert s.delete_expired_files(now_ms=AT_10) == 5  # 2 + 2 + 1, whatever the hour
        assert cl_files(s) == names[5:]
        assert s.delete_expired_files(now_ms=AT_10) == 0  # unexpired files are kept
        assert cl_files(s) == names[5:]


def test_manual_trigger_uses_the_store_clock(tmp_path):
    now = [AT_10]
    with open_store(tmp_path) as s:
        fill(s, 40)
        s.config.clock = lambda: now[0]
        names = cl_files(s)
        age(s, names[:2], AT_10, hours=73)
        now[0] = AT_10 - 2 * HOUR  # then those files were 71 h old
        assert s.delete_expired_files() == 0
        now[0] = AT_10
        assert s.delete_expired_files() == 2


def _assert_queue_in_step(s, topic, queue_id, rs):
    """min offset = first unit pointing at or past the CommitLog's min; CQ files wholly below it gone."""
    min_phy = s.min_physical_offset
    first_kept = next(i for i, r in enumerate(rs) if r.physical_offset >= min_phy)
    assert s.min_offset(topic, queue_id) == first_kept
    g = s.get("g", topic, queue_id, first_kept - 1)
    assert g.status is GetStatus.OFFSET_TOO_SMALL and g.next_begin_offset == first_kept
    g = s.get("g", topic, queue_id, 0)
    assert g.status is GetStatus.OFFSET_TOO_SMALL and g.next_begin_offset == first_kept
    g = s.get("g", topic, queue_id, first_kept)
    assert g.status is GetStatus.FOUND and g.messages[0].physical_offset == rs[first_kept].physical_offset
    return first_kept


def test_consume_queue_and_index_files_go_in_step(tmp_path):
    with open_store(tmp_path) as s:
        rs = fill(s, 120, body=b"x" * 200)
        cq_dir = tmp_path / "consumequeue" / "T" / "0"
        cq_before = sorted(os.listdir(cq_dir))
        idx_before = sorted(os.listdir(tmp_path / "index"))
        assert len(cq_before) == 12 and len(idx_before) >= 3
        names = cl_files(s)
        age(s, names[:4], AT_10)
        assert s.delete_expired_files(now_ms=AT_10) == 4
        min_phy = s.min_physical_offset
        assert min_phy == int(names[4])
        first_kept = _assert_queue_in_step(s, "T", 0, rs)
        # a CQ file goes when its last unit points below the CommitLog's min
        cq_after = sorted(os.listdir(cq_dir))
        assert cq_after == cq_before[first_kept // 10 :]
        assert len(cq_after) < len(cq_before)
        # index files that end below the min are gone, the others stay
        idx_after = sorted(os.listdir(tmp_path / "index"))
        assert idx_after == idx_before[len(idx_before) - len(idx_after) :] and len(idx_after) < len(idx_before)
        assert s._index.files[0].end_phy_offset >= min_phy
        # readers of deleted offsets: no crash
        assert s.look(rs[0].physical_offset + 1) is None
        assert s.look(rs[1].physical_offset) is None
        assert len(s.query("T", "k0")) == 0
        assert [m.physical_offset for m in s.query("T", f"k{first_kept}")] == [rs[first_kept].physical_offset]
        assert s.earliest_message_time("T", 0) == rs[first_kept].store_timestamp
        assert s.store_timestamp_at("T", 0, 0) == -1
    # reopened, the store answers the same
    with MessageStore.open(tmp_path, config()) as s:
        assert s.min_physical_offset == min_phy
        _assert_queue_in_step(s, "T", 0, rs)
        assert s.put(Message("T", b"more"), 0).queue_offset == 120


def test_a_queue_wholly_below_the_min_moves_its_min_to_its_max(tmp_path):
    with open_store(tmp_path) as s:
        old = [s.put(Message("Old", b"o" * 200), 0) for _ in range(15)]
        rs = fill(s, 40, body=b"x" * 200)
        names = cl_files(s)
        keep_from = next(i for i, n in enumerate(names) if int(n) > old[-1].physical_offset)
        age(s, names[:keep_from], AT_10)
        assert s.delete_expired_files(now_ms=AT_10) == keep_from
        assert s.min_offset("Old", 0) == s.max_offset("Old", 0) == 15
        g = s.get("g", "Old", 0, 3)
        assert g.status is GetStatus.OFFSET_TOO_SMALL and g.next_begin_offset == 15
        assert s.get("g", "Old", 0, 15).status is GetStatus.OFFSET_OVERFLOW_ONE
        assert s.max_offset("T", 0) == 40 and rs


def test_batch_consume_queue_goes_in_step(tmp_path):
    with open_store(tmp_path) as s:
        s.create_topic("BT", queues=1, attributes={"queue.type": "BatchCQ"})
        rs = []
        for i in range(80):
            r = s.put_batch([Message("BT", b"b" * 150, keys=[f"b{i}"]) for _ in range(2)], 0)
            assert r.ok
            rs.append(r)
        s.flush()
        bdir = tmp_path / "batchconsumequeue" / "BT" / "0"
        before = sorted(os.listdir(bdir))
        names = cl_files(s)
        assert len(names) > 6
        age(s, names[:5], AT_10)
        assert s.delete_expired_files(now_ms=AT_10) == 5
        after = sorted(os.listdir(bdir))
        assert len(after) < len(before) and after == before[len(before) - len(after) :]
        min_phy = s.min_physical_offset
        first = next(r for r in rs if r.physical_offset >= min_phy)
        assert s.min_offset("BT", 0) == first.queue_offset
        g = s.get("g", "BT", 0, 0)
        assert g.status is GetStatus.OFFSET_TOO_SMALL and g.next_begin_offset == first.queue_offset
        g = s.get("g", "BT", 0, first.queue_offset)
        assert g.status is GetStatus.FOUND and g.messages[0].physical_offset >= min_phy


def test_refuses_writes_above_the_warning_ratio_and_recovers_by_itself(tmp_path):
    ratio = [0.10]
    with open_store(tmp_path) as s:
        s._cleanup.disk_usage = lambda path: ratio[0]
        rs = fill(s, 30)
        ratio[0] = 0.95
        assert s._cleanup.run_once(AT_10) >= 1  # above 90%: forcible deletion as well
        assert s.disk_full
        r = s.put(Message("T", b"refused"))
        assert r.status is PutStatus.SERVICE_NOT_AVAILABLE and not r.ok
        assert s.put_batch([Message("T", b"a"), Message("T", b"b")]).status is PutStatus.SERVICE_NOT_AVAILABLE
        assert s.max_offset("T", 0) == 30  # nothing was written
        assert s.get("g", "T", 0, 29).status is GetStatus.FOUND  # reads go on
        ratio[0] = 0.50
        s._cleanup.run_once(AT_10)
        assert not s.disk_full
        assert s.put(Message("T", b"accepted")).queue_offset == 30
        assert rs


def test_the_cleanup_thread_clears_the_disk_full_flag(tmp_path):
    ratio = [0.95]
    with open_store(tmp_path, clean_resource_interval=10) as s:
        s._cleanup.stop()
        s._cleanup.disk_usage = lambda path: ratio[0]
        s._cleanup.first_run_delay_ms = 10
        s._cleanup.start()
        deadline = time.monotonic() + 5
        while not s.disk_full and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.disk_full
        assert s.put(Message("T", b"x")).status is PutStatus.SERVICE_NOT_AVAILABLE
        ratio[0] = 0.40
        deadline = time.monotonic() + 5
        while s.disk_full and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.put(Message("T", b"x")).ok
    # close() stopped the thread
    assert not any(
        t.name == "rocketstore-cleanup" and t.is_alive() for t in threading.enumerate() if t is s._cleanup._thread
    )
    assert s._cleanup._thread is None


def test_disk_usage_ratio_of_a_real_path(tmp_path):
    r = C.disk_space_used_ratio(str(tmp_path))
    assert 0 <= r <= 1
    assert C.disk_space_used_ratio(str(tmp_path / "missing")) == -1


def test_read_only_store_never_deletes(tmp_path):
    with open_store(tmp_path) as s:
        fill(s, 40)
        names = cl_files(s)
    age_t = (AT_10 - 100 * HOUR) * 1_000_000
    for n in names[:-1]:
        os.utime(tmp_path / "commitlog" / n, ns=(age_t, age_t))
    with MessageStore.open(tmp_path, config(), read_only=True) as s:
        assert s.delete_expired_files(now_ms=AT_10) == 0
    assert sorted(os.listdir(tmp_path / "commitlog")) == names


def test_readers_during_cleanup_never_crash(tmp_path):
    with open_store(tmp_path, ratio=0.86) as s:
        rs = fill(s, 200, body=b"r" * 100)
        errors, stop = [], threading.Event()

        def read():
            try:
                while not stop.is_set():
                    for off in (0, 50, 120, 199):
                        g = s.get("g", "T", 0, off, max_count=8)
                        assert g.status in (
                            GetStatus.FOUND,
                            GetStatus.OFFSET_TOO_SMALL,
                            GetStatus.MESSAGE_WAS_REMOVING,
                            GetStatus.OFFSET_FOUND_NULL,
                        ), g.status
                        for m in g.messages:
                            assert m.body == b"r" * 100
                    s.look(rs[10].physical_offset)
                    s.query("T", "k5")
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        t = threading.Thread(target=read)
        t.start()
        try:
            for _ in range(6):
                s._cleanup.run_once(AT_10)
                time.sleep(0.01)
        finally:
            stop.set()
            t.join()
        assert not errors, errors
        assert len(cl_files(s)) == 1
        assert s.get("g", "T", 0, 0).status is GetStatus.OFFSET_TOO_SMALL


def test_with_archive_enable_cleanup_waits_for_the_archive(tmp_path, caplog):
    # archiveEnable: a segment goes only once the archive's manifest holds it (an entry per segment, as the
    # archive job commits them, with the hash of the segment's first 4 KiB), oldest first with no hole,
    # whatever the disk (86%: past the forcible ratio); an entry of the same name from another store's segment
    # (another head) holds nothing
    import hashlib

    from rocketstore.files.archive_manifest import ArchiveManifest, entry

    dest = str(tmp_path / "archive")
    with open_store(str(tmp_path / "store"), ratio=0.86, archive_enable=True, archive_path=dest) as s:
        fill(s, 60)
        names = cl_files(s)
        assert len(names) >= 5
        age(s, names[:-1], AT_4)

        def archived(name, head=None):  # what the archive job does once a segment's files are in (no Spark)
            with open(os.path.join(s.root, "commitlog", name), "rb") as f:
                head = head or hashlib.sha256(f.read(4096)).hexdigest()
            with ArchiveManifest(dest) as manifest:
                manifest.commit(entry(name, 4096, head, [], {}))

        archived(names[0], head="0" * 64)  # another store's segment 0
        assert s._cleanup.run_once(AT_4) == 0 and cl_files(s) == names
        archived(names[0])
        with caplog.at_level("WARNING", logger="rocketstore.cleanup"):
            assert s._cleanup.run_once(AT_4) == 1
        assert cl_files(s) == names[1:]
        held = [r.getMessage() for r in caplog.records if "held back" in r.getMessage()]
        assert held and names[1] in held[-1] and dest in held[-1]
        archived(names[2])  # a hole: names[1] is still not archived, so nothing after it goes either
        assert s._cleanup.run_once(AT_4) == 0 and cl_files(s) == names[1:]
        archived(names[1])
        assert s._cleanup.run_once(AT_4) == 2
        assert cl_files(s) == names[3:]
        assert s.get("g", "T", 0, 0, max_count=1).status is GetStatus.OFFSET_TOO_SMALL  # the queue moved on


def test_archive_enable_needs_a_path_and_comes_from_broker_conf(tmp_path):
    import pytest

    with pytest.raises(ValueError, match="archiveEnable=true needs archivePath"):
        StoreConfig(archive_enable=True)
    cfg = StoreConfig.from_properties({"archiveEnable": "true", "archivePath": str(tmp_path)})
    assert cfg.archive_enable is True and cfg.archive_path == str(tmp_path) and not cfg.extra
