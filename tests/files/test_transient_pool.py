"""The transient store pool (transient_store_pool_enable, seed 002): puts land in a write buffer, a commit
service copies them into the CommitLog file, and only committed bytes are readable, dispatched or flushed.
The files it leaves are the bytes the plain path writes."""

import shutil
import time

from rocketstore import GetStatus, Message, MessageStore, StoreConfig


def cfg(**kw):
    base = dict(
        mapped_file_size_commit_log=16 * 1024,
        mapped_file_size_consume_queue=20 * 64,
        max_hash_slot_num=16,
        max_index_num=64,
        transient_store_pool_enable=True,
        commit_interval_commit_log=60_000,
        flush_interval_commit_log=60_000,
    )  # commits only when asked
    base.update(kw)
    return StoreConfig(**base)


def test_nothing_is_readable_before_it_is_committed(tmp_path):
    with MessageStore.open(tmp_path, cfg()) as s:
        r = s.put(Message("T", b"pooled", tags="A"), 0)
        assert r.ok
        assert s.max_physical_offset == 0  # the file holds nothing yet
        assert s.get("g", "T", 0, 0).status is GetStatus.NO_MESSAGE_IN_QUEUE
        assert s.look(r.physical_offset) is None
        s._flush_service.commit.commit_once(0)  # what the commit service does every 200 ms
        assert s.wait_dispatched(timeout_s=5)
        got = s.get("g", "T", 0, 0)
        assert got.status is GetStatus.FOUND and got.messages[0].body == b"pooled"


def test_the_commit_service_commits_on_its_own(tmp_path):
    with MessageStore.open(tmp_path, cfg(commit_interval_commit_log=20, commit_commit_log_thorough_interval=20)) as s:
        s.put(Message("T", b"x"), 0)
        deadline = time.monotonic() + 5
        while s.max_offset("T", 0) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.max_offset("T", 0) == 1


def test_a_crash_before_the_commit_loses_only_uncommitted_messages(tmp_path):
    live, copy = tmp_path / "live", tmp_path / "copy"
    with MessageStore.open(live, cfg()) as s:
        for i in range(5):
            s.put(Message("T", b"kept-%d" % i), 0)
        s.flush()  # commit + flush: these are on disk
        for i in range(3):
            s.put(Message("T", b"lost-%d" % i), 0)  # still only in the write buffer
        shutil.copytree(live, copy)  # what a kill -9 now would leave
    with MessageStore.open(copy, cfg(transient_store_pool_enable=False)) as c:
        bodies = [m.body for m in c.get("g", "T", 0, 0).messages]
        assert bodies == [b"kept-%d" % i for i in range(5)]
    with MessageStore.open(live, cfg()) as s:  # the clean close committed everything
        assert [m.body for m in s.get("g", "T", 0, 0).messages][-3:] == [b"lost-%d" % i for i in range(3)]


def test_pooled_files_are_the_bytes_the_plain_path_writes(tmp_path):
    def write(root, pooled):
        ticks = iter(range(1_700_000_000_000, 1_700_000_100_000))
        with MessageStore.open(root, cfg(transient_store_pool_enable=pooled, clock=lambda: next(ticks))) as s:
            for i in range(300):  # several segments, BLANK fillers included
                assert s.put(Message("T", b"m" * (i % 200), tags="A", born_timestamp=1), i % 2).ok
                if pooled and i % 37 == 0:
                    s._flush_service.commit.commit_once(0)
            s.put_batch([Message("T", b"b%d" % i, born_timestamp=1) for i in range(20)], 1)
        return {
            str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file() and p.parts[-2] in ("commitlog", "0", "1")
        }

    plain, pooled = write(tmp_path / "plain", False), write(tmp_path / "pooled", True)
    assert len([k for k in plain if k.startswith("commitlog")]) > 3
    assert plain == pooled


def test_the_pool_limits_how_many_segments_hold_a_buffer(tmp_path):
    with MessageStore.open(tmp_path, cfg(transient_store_pool_size=1)) as s:
        pool = s._commitlog.files.pool
        for i in range(200):  # fills several 16 KiB segments, uncommitted
            s.put(Message("T", b"y" * 150), 0)
        buffered = [mf for mf in s._commitlog.files.files if mf.wbuf is not None]
        assert len(buffered) == 1 and pool.available == 0  # the rest were written directly
        s.flush()
        assert s.wait_dispatched(timeout_s=5)
        assert pool.available == 1 and s.max_offset("T", 0) == 200


def test_sync_flush_keeps_the_pool_off(tmp_path):
    with MessageStore.open(tmp_path, cfg(flush_disk_type="SYNC_FLUSH")) as s:
        assert s._commitlog.files.pool is None
        assert s.put(Message("T", b"z"), 0).ok and s.max_offset("T", 0) == 1
