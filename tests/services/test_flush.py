"""Flush services and the checkpoint (issue 4): ASYNC_FLUSH's periodic CommitLog flush, SYNC_FLUSH's group
commit (FLUSH_DISK_TIMEOUT on timeout and on a failed fsync, never PUT_OK: apache/rocketmq #2706), nothing
readable before it is flushed under SYNC_FLUSH (apache/rocketmq #8239), the ConsumeQueue flush writing the
checkpoint, and a child process killed with SIGKILL under SYNC_FLUSH losing no acknowledged message."""

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import shutil
import time

import pytest

from rocketstore import ASYNC_FLUSH, GetStatus, Message, MessageStore, PutStatus, StoreConfig, SYNC_FLUSH
from rocketstore.files.mapped_file import default_sync as real_sync
from rocketstore.formats import checkpoint as CP


class Recorder:
    """A sync hook: counts calls, records how far each segment is durable, may sleep or fail."""

    def __init__(self, delay=0.0, fail=False):
        self.calls = 0
        self.delay = delay
        self.fail = fail
        self.durable = 0  # highest CommitLog offset a successful sync reached
        self.lock = threading.Lock()

    def __call__(self, mf, start, length):
        with self.lock:
            self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            raise OSError(5, "Input/output error (injected)")
        real_sync(mf, start, length)
        with self.lock:
            self.durable = max(self.durable, mf.file_from_offset + start + length)


def sync_config(**kw):
    base = dict(
        flush_disk_type=SYNC_FLUSH, mapped_file_size_commit_log=256 * 1024, mapped_file_size_consume_queue=20 * 1000
    )
    return StoreConfig(**{**base, **kw})


def read_all(s, topic, q, off=0):
    out = []
    while True:
        g = s.get("g", topic, q, off, 32)
        if not g.messages:
            return out
        out += g.messages
        off = g.next_begin_offset


def read_checkpoint(root):
    with open(os.path.join(root, "checkpoint"), "rb") as fh:
        return CP.decode(fh.read())


# ---------------------------------------------------------------- ASYNC_FLUSH
def test_async_flush_waits_for_least_pages_then_flushes_thoroughly_and_writes_the_checkpoint(tmp_path):
    cfg = StoreConfig(
        mapped_file_size_commit_log=1024 * 1024,
        flush_interval_commit_log=20,
        flush_commit_log_least_pages=4,
        flush_commit_log_thorough_interval=700,
        flush_interval_consume_queue=20,
        flush_consume_queue_least_pages=2,
        flush_consume_queue_thorough_interval=400,
    )
    with MessageStore.open(tmp_path, cfg) as s:
        hook = Recorder()
        s._flush_service.sync = hook
        files = s._commitlog.files
        time.sleep(0.1)  # the first (thorough) round has passed with nothing to do
        r = s.put(Message("T", b"x" * 100), 0)  # one dirty page: below least pages
        assert r.ok
        time.sleep(0.15)
        assert files.flushed_where == 0 and hook.calls == 0
        assert s._checkpoint.physic_msg_timestamp == 0
        for _ in range(200):  # 200 x ~200 bytes: more than 4 pages
            last = s.put(Message("T", b"y" * 100), 0)
        deadline = time.monotonic() + 0.5
        while files.flushed_where == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert files.flushed_where > 0 and hook.calls >= 1
        assert files.flushed_where <= s.max_physical_offset
        # the thorough round (every 0.7 s) flushes the rest and sets physicMsgTimestamp by what it flushed
        deadline = time.monotonic() + 2.5
        while (
            files.flushed_where < s.max_physical_offset or s._checkpoint.physic_msg_timestamp == 0
        ) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert files.flushed_where == s.max_physical_offset
        assert s._checkpoint.physic_msg_timestamp == last.store_timestamp
        # the ConsumeQueue service's thorough round wrote the checkpoint file (logicsMsgTimestamp etc.)
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            cp = read_checkpoint(tmp_path)
            if cp.physic_msg_timestamp == last.store_timestamp and cp.logics_msg_timestamp == last.store_timestamp:
                break
            time.sleep(0.05)
        assert cp.physic_msg_timestamp == last.store_timestamp
        assert cp.logics_msg_timestamp == last.store_timestamp
        assert s._flush_service.consume_queue.checkpoints_written >= 2
        cq = s.consume_queue("T", 0)
        assert cq.files.flushed_where == cq.files.max_offset()


def test_async_flush_service_stops_on_close_and_flushes_everything(tmp_path):
    cfg = StoreConfig(
        mapped_file_size_commit_log=1024 * 1024, flush_interval_commit_log=10_000, flush_interval_consume_queue=10_000
    )
    # flush threads of stores other tests left open (a failed test's) are not this store's
    others = {t for t in threading.enumerate() if t.name.startswith("rocketstore-flush")}
    s = MessageStore.open(tmp_path, cfg)
    assert s._flush_service.commitlog._thread.is_alive() and s._flush_service.consume_queue._thread.is_alive()
    ours = {s._flush_service.commitlog._thread, s._flush_service.consume_queue._thread}
    assert all(t.name.startswith("rocketstore-flush") for t in ours) and not ours & others
    r = s.put(Message("T", b"z"), 0)
    t0 = time.monotonic()
    s.close()
    assert time.monotonic() - t0 < 8.0  # stop does not wait out the 10 s interval (room for a loaded machine)
    assert s._flush_service.commitlog._thread is None and s._flush_service.consume_queue._thread is None
    assert not any(t.is_alive() for t in ours)
    assert {t for t in threading.enumerate() if t.name.startswith("rocketstore-flush")} <= others
    assert read_checkpoint(tmp_path).logics_msg_timestamp == r.store_timestamp
    assert not os.path.exists(tmp_path / "abort")


# ---------------------------------------------------------------- SYNC_FLUSH
def test_sync_flush_group_commit_concurrent_puts_share_fsyncs(tmp_path):
    with MessageStore.open(tmp_path, sync_config()) as s:
        hook = Recorder(delay=0.002)  # a slow disk lets requests pile up, as a real fsync does
        s._flush_service.sync = hook
        threads, per = 16, 40
        results: list = []
        unreadable = []

        def producer(k):
            for i in range(per):
                r = s.put(Message("T", f"{k}-{i}".encode()), k % 4)
                results.append(r)
                if r.ok:  # acknowledged: flushed and readable at once
                    if r.physical_offset + r.size > hook.durable:
                        unreadable.append(("not durable", r))
                    g = s.get("g", "T", k % 4, r.queue_offset, 1)
                    if g.status is not GetStatus.FOUND or g.messages[0].body != f"{k}-{i}".encode():
                        unreadable.append(r)

        ts = [threading.Thread(target=producer, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert len(results) == threads * per
        assert all(r.status is PutStatus.PUT_OK for r in results)
        assert not unreadable
        assert 0 < hook.calls < threads * per  # group commit: fewer fsyncs than puts
        assert s._flush_service.commitlog.commits < threads * per
        assert s._commitlog.files.flushed_where == s.max_physical_offset


def test_sync_flush_put_batch_waits_for_its_flush(tmp_path):
    with MessageStore.open(tmp_path, sync_config()) as s:
        hook = Recorder()
        s._flush_service.sync = hook
        r = s.put_batch([Message("T", b"a%d" % i) for i in range(50)], 1)
        assert r.ok and hook.durable >= r.physical_offset + r.size
        assert [m.body for m in read_all(s, "T", 1)] == [b"a%d" % i for i in range(50)]


def test_a_failed_fsync_never_answers_put_ok_and_nothing_unflushed_is_readable(tmp_path):
    with MessageStore.open(tmp_path, sync_config()) as s:
        s._flush_service.sync = Recorder(fail=True)
        r = s.put(Message("T", b"lost?"), 0)
        assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert not s.writeable  # RunningFlags: not writeable after a failed sync
        assert s.put_batch([Message("T", b"b1"), Message("T", b"b2")], 0).status is PutStatus.SERVICE_NOT_AVAILABLE
        # the disk "comes back": a later sync would succeed, yet nothing is flushed or confirmed any more
        # (after a failed fsync the kernel may have dropped the pages; a new fsync proves nothing about them)
        s._flush_service.sync = Recorder()
        assert s.put(Message("T", b"after"), 0).status is PutStatus.SERVICE_NOT_AVAILABLE
        time.sleep(0.05)
        assert s._commitlog.files.flushed_where == 0
        s.wait_dispatched(0.1)
        assert s.get("g", "T", 0, 0).status is GetStatus.NO_MESSAGE_IN_QUEUE  # not flushed: not visible
    assert os.path.exists(tmp_path / "abort")  # closed without flushing: the next open recovers
    with MessageStore.open(tmp_path, sync_config()) as s:
        assert s.writeable
        assert s.put(Message("T", b"after"), 0).ok
        assert s.max_offset("T", 0) >= 1


def test_a_slow_fsync_answers_flush_disk_timeout(tmp_path):
    with MessageStore.open(tmp_path, sync_config(sync_flush_timeout=100)) as s:
        s._flush_service.sync = Recorder(delay=0.6)
        t0 = time.monotonic()
        r = s.put(Message("T", b"slow"), 0)
        assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert time.monotonic() - t0 < 0.5
        assert r.physical_offset == 0 and r.queue_offset == 0  # written, not confirmed
        s._flush_service.sync = None
        time.sleep(0.7)  # the slow flush finishes
        # a real fsync on a busy machine may take more than 100 ms: the fast put gets a timeout no disk misses
        s.config.sync_flush_timeout = 30_000
        assert s.put(Message("T", b"fast"), 0).ok
        assert [m.body for m in s.get("g", "T", 0, 0).messages] == [b"slow", b"fast"]


def test_sync_flush_get_never_returns_unflushed_bytes(tmp_path):
    with MessageStore.open(tmp_path, sync_config()) as s:
        hook = Recorder(delay=0.003)
        s._flush_service.sync = hook
        stop = threading.Event()
        bad, seen = [], [0]

        def consumer(q):
            off = 0
            while not stop.is_set():
                g = s.get("g", "T", q, off, 32)
                durable = hook.durable  # read after the get: only ever grows
                for m in g.messages:
                    if m.physical_offset + m.size > durable:
                        bad.append((m.physical_offset, m.size, durable))
                    seen[0] += 1
                off = g.next_begin_offset
                if not g.messages:
                    time.sleep(0.001)

        def producer(k):
            for i in range(60):
                s.put(Message("T", b"m" * 50), k % 2)
                if i % 7 == 0:
                    s.put_batch([Message("T", b"b" * 30)] * 5, k % 2)

        cs = [threading.Thread(target=consumer, args=(q,)) for q in range(2)]
        ps = [threading.Thread(target=producer, args=(k,)) for k in range(6)]
        for t in cs + ps:
            t.start()
        for t in ps:
            t.join()
        time.sleep(0.1)
        stop.set()
        for t in cs:
            t.join()
        assert not bad
        assert seen[0] > 0


def test_read_uncommitted_keeps_inline_dispatch(tmp_path):
    with MessageStore.open(tmp_path, sync_config(read_uncommitted=True)) as s:
        assert s._writer.dispatch is not None
        assert s.put(Message("T", b"x"), 0).ok
    with MessageStore.open(tmp_path, sync_config()) as s:
        assert s._writer.dispatch is None  # SYNC_FLUSH: reput dispatches, up to the flushed offset
        assert [m.body for m in s.get("g", "T", 0, 0).messages] == [b"x"]


# ---------------------------------------------------------------- a real crash
CHILD = textwrap.dedent("""
    import sys
    from rocketstore import Message, MessageStore, StoreConfig
    root, tag, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    cfg = StoreConfig(flush_disk_type=mode, mapped_file_size_commit_log=64 * 1024,
                      mapped_file_size_consume_queue=20 * 100)
    s = MessageStore.open(root, cfg)
    print("open", flush=True)
    i = 0
    while True:
        q = i % 3
        body = f"{tag}-{i}".encode() * (1 + i % 5)
        if i % 10 == 9:
            r = s.put_batch([Message("C", body + b"/%d" % j) for j in range(3)], q)
            if r.ok:
                for j, pr in enumerate(r.results):
                    print(q, pr.queue_offset, pr.physical_offset, (body + b"/%d" % j).decode(), flush=True)
        else:
            r = s.put(Message("C", body, tags="T%d" % q), q)
            if r.ok:
                print(q, r.queue_offset, r.physical_offset, body.decode(), flush=True)
        i += 1
""")


@pytest.mark.parametrize("mode", [SYNC_FLUSH, ASYNC_FLUSH])
def test_sigkill_loses_no_acknowledged_message_and_reopens_consistent(tmp_path, mode):
    """SIGKILL keeps the page cache, so under both flush types every acknowledged message must come back
    (under SYNC_FLUSH each was also fsynced before its answer); the queues must match the CommitLog."""
    root = str(tmp_path / "store")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    acked: dict[tuple[int, int], tuple[int, str]] = {}
    rng = random.Random(4)
    t_end = time.monotonic() + 6
    rounds = 0
    while rounds < 4 and (rounds < 2 or time.monotonic() < t_end):
        rounds += 1
        p = subprocess.Popen([sys.executable, str(script), root, f"r{rounds}", mode], stdout=subprocess.PIPE, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")))
        reader.start()
        deadline = time.monotonic() + 10
        while not lines and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lines and lines[0].strip() == "open", "child did not open the store"
        time.sleep(rng.uniform(0.2, 0.7))
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        reader.join()
        assert os.path.exists(os.path.join(root, "abort"))  # killed: no clean shutdown
        for line in lines[1:]:
            parts = line.rstrip("\n").split(" ", 3)
            if not line.endswith("\n") or len(parts) != 4:
                continue  # the line the kill cut
            q, qoff, phys, body = int(parts[0]), int(parts[1]), int(parts[2]), parts[3]
            acked[(q, qoff)] = (phys, body)
        assert len(lines) > 1, "nothing acknowledged in this round"
        # reopen (abnormal recovery): every acknowledged message is there, readable through its queue
        with MessageStore.open(root, StoreConfig(flush_disk_type=mode)) as s:
            for (q, qoff), (phys, body) in acked.items():
                g = s.get("check", "C", q, qoff, 1)
                assert g.status is GetStatus.FOUND, (q, qoff, g.status)
                m = g.messages[0]
                assert (m.physical_offset, m.body.decode()) == (phys, body), (q, qoff)
            for q in range(3):  # the queues match the CommitLog: every unit's record is there
                cq = s.consume_queue("C", q)
                if cq is None:
                    continue
                assert len(read_all(s, "C", q, cq.min_offset)) == cq.max_offset - cq.min_offset
            r = s.put(Message("C", b"after-crash"), 0)  # writing continues
            assert r.ok
            acked[(0, r.queue_offset)] = (r.physical_offset, "after-crash")
    print(f"{rounds} kill rounds, {len(acked)} acknowledged messages all recovered")
    assert rounds >= 2 and len(acked) > 20


def test_flush_moves_past_deleted_segments(tmp_path):
    cfg = StoreConfig(mapped_file_size_commit_log=4096, flush_interval_commit_log=10_000)
    with MessageStore.open(tmp_path, cfg) as s:
        for i in range(100):
            assert s.put(Message("T", b"x" * 100), 0).ok
        files = s._commitlog.files
        assert len(files.files) > 3
        files.flush(0)
        assert files.flushed_where == 4096  # the first segment flushed
        files.delete_head(files.files[:2])  # the next one expired and deleted before its flush
        while not files.flush(0):
            pass
        assert files.flushed_where == files.max_offset()


def test_power_loss_keeps_every_message_acknowledged_under_sync_flush(tmp_path):
    """Simulated power loss: a copy of the live store in which every CommitLog byte no fsync covered is
    zeroed (the sync hook records how far each segment was synced) recovers every PUT_OK message."""
    root, image = tmp_path / "store", tmp_path / "image"
    cfg = sync_config(mapped_file_size_commit_log=32 * 1024, mapped_file_size_consume_queue=20 * 200)
    s = MessageStore.open(root, cfg)
    synced: dict[str, int] = {}

    def hook(mf, start, length):
        real_sync(mf, start, length)
        synced[mf.path] = max(synced.get(mf.path, 0), start + length)

    s._flush_service.sync = hook
    acked = []
    try:
        for i in range(300):
            body = b"p%d" % i * (1 + i % 7)
            r = s.put(Message("P", body), i % 2)
            assert r.ok
            acked.append((i % 2, r.queue_offset, body))
        s._flush_service.sync = lambda mf, start, length: (_ for _ in ()).throw(OSError(5, "EIO"))
        lost = s.put(Message("P", b"never-synced"), 0)  # written, its fsync failed: not acknowledged
        assert lost.status is PutStatus.FLUSH_DISK_TIMEOUT
        with s._writer.lock:  # the "power cut": copy what is on disk now, the store still open
            shutil.copytree(root, image, ignore=shutil.ignore_patterns("lock"))
            synced_at_cut = dict(synced)
    finally:
        s.close()
    for name in os.listdir(image / "commitlog"):
        path = image / "commitlog" / name
        keep = synced_at_cut.get(str(root / "commitlog" / name), 0)
        size = os.path.getsize(path)
        with open(path, "r+b") as fh:  # what no fsync covered is gone
            fh.seek(keep)
            fh.write(bytes(size - keep))
    assert os.path.exists(image / "abort")
    with MessageStore.open(image, cfg) as s2:
        for q, qoff, body in acked:
            g = s2.get("g", "P", q, qoff, 1)
            assert g.status is GetStatus.FOUND and g.messages[0].body == body, (q, qoff)
        assert s2.max_offset("P", 0) == lost.queue_offset  # the unsynced record is cut
        assert s2.max_physical_offset == lost.physical_offset
        r = s2.put(Message("P", b"after"), 0)
        assert r.ok and r.queue_offset == lost.queue_offset


def test_a_failed_async_flush_makes_the_store_not_writeable(tmp_path):
    cfg = StoreConfig(mapped_file_size_commit_log=1024 * 1024, flush_interval_commit_log=10)
    with MessageStore.open(tmp_path, cfg) as s:
        s._flush_service.sync = Recorder(fail=True)
        assert s.put(Message("T", b"x"), 0).ok  # ASYNC_FLUSH answers before any flush
        deadline = time.monotonic() + 2
        while s.writeable and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not s.writeable
        assert s.put(Message("T", b"y"), 0).status is PutStatus.SERVICE_NOT_AVAILABLE
        assert s._commitlog.files.flushed_where == 0
    assert os.path.exists(tmp_path / "abort")
