"""Recovery reports its progress (issue 4): a log line per CommitLog file recovered (logger
"rocketstore.recovery": file, records, bytes, elapsed) and MessageStore.open(..., progress=fn(done, total))."""

import logging
import os
import re

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.formats import checkpoint as CP

FILE = 64 * 1024


def config():
    return StoreConfig(mapped_file_size_commit_log=FILE, mapped_file_size_consume_queue=20 * 1000)


def fill(root, n=400, body=600):
    with MessageStore.open(root, config()) as s:
        for i in range(n):
            assert s.put(Message("T", b"x" * body, properties={"KEYS": f"k{i}"}), i % 2).ok
        return s.max_physical_offset


def crash(root):
    """What a killed broker leaves: the abort file, and a checkpoint that never got written."""
    with open(os.path.join(root, "abort"), "w") as fh:
        fh.write("1")
    with open(os.path.join(root, "checkpoint"), "wb") as fh:
        fh.write(bytes(CP.FILE_SIZE))


def segments(root):
    return sorted(os.listdir(os.path.join(root, "commitlog")))


def test_progress_after_a_crash_walks_every_segment(tmp_path, caplog):
    root = str(tmp_path / "s")
    end = fill(root)
    segs = segments(root)
    assert len(segs) >= 4
    crash(root)
    calls = []
    with caplog.at_level(logging.INFO, logger="rocketstore.recovery"):
        with MessageStore.open(root, config(), progress=lambda d, t: calls.append((d, t))) as s:
            assert s.max_physical_offset == end
            assert s.max_offset("T", 0) + s.max_offset("T", 1) == 400
    # in bytes of data, not of segments (each is FILE bytes on disk, the last one mostly zeros): (0, end),
    # then one call at each segment's end, the last at the log's end. The total is where the data ends from
    # the first call on (the last record's last byte is not zero, and nothing is written after it)
    assert calls == [(0, end)] + [((i + 1) * FILE, end) for i in range(len(segs) - 1)] + [(end, end)]
    done = [c[0] for c in calls]
    assert done == sorted(done)
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "rocketstore.recovery" and r.getMessage().startswith("recovered CommitLog file")
    ]
    assert len(lines) == len(segs)
    records = 0
    for line, seg in zip(lines, segs):
        m = re.match(r"recovered CommitLog file (\S+): (\d+) records, (\d+) bytes, ([\d.]+) s$", line)
        assert m, line
        assert os.path.basename(m.group(1)) == seg
        records += int(m.group(2))
        assert 0 < int(m.group(3)) <= FILE
    assert records == 400
    # the last segment's line says how far its valid records reach
    assert int(re.search(r"(\d+) bytes", lines[-1]).group(1)) == end % FILE


def test_progress_after_a_clean_close_starts_at_a_safe_segment(tmp_path):
    root = str(tmp_path / "s")
    end = fill(root)
    calls = []
    with MessageStore.open(root, config(), progress=lambda d, t: calls.append((d, t))):
        pass
    total = calls[-1][1]
    start = end - total  # the segment recovery started at
    assert 0 < total <= end and start % FILE == 0
    walked = (end - 1) // FILE - start // FILE + 1
    assert calls == [(0, total)] + [((i + 1) * FILE, total) for i in range(walked - 1)] + [(total, total)]


def test_progress_on_an_empty_store_and_read_only(tmp_path):
    root = str(tmp_path / "s")
    calls = []
    with MessageStore.open(root, config(), progress=lambda d, t: calls.append((d, t))):
        pass
    assert calls == [(0, 0)]
    end = fill(root, n=50)
    crash(root)
    calls.clear()
    with MessageStore.open(root, config(), read_only=True, progress=lambda d, t: calls.append((d, t))) as s:
        assert s.max_offset("T", 0) == 25
    assert end < FILE and calls == [(0, end), (end, end)]


def test_a_failing_progress_callback_fails_the_open(tmp_path):
    root = str(tmp_path / "s")
    fill(root, n=10)

    def boom(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        MessageStore.open(root, config(), progress=boom)
    with MessageStore.open(root, config()) as s:  # the lock was released: it opens again
        assert s.max_offset("T", 0) == 5


# ---------------------------------------------------------------- confirmPhyOffset (StoreCheckpoint offset 32)
# For a plain store (no controller mode, no duplicationEnable) RocketMQ sets confirmOffset, and with it the
# checkpoint's confirmPhyOffset, only on load (from the checkpoint) and in recovery (the start of the last
# valid record): puts, flushes and the shutdown leave it alone (the golden stores: 0 in the checkpoint of a
# store written from scratch, and the recovered value after a reopen), and every checkpoint flush writes it.
from rocketstore import SYNC_FLUSH  # noqa: E402


def read_cp(root):
    with open(os.path.join(root, "checkpoint"), "rb") as fh:
        return CP.decode(fh.read())


def wait_checkpoint(root, pred, timeout=5.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(os.path.join(root, "checkpoint")):
            cp = read_cp(root)
            if pred(cp):
                return cp
        time.sleep(0.02)
    raise AssertionError("the flush service did not write the expected checkpoint")


def cp_config(**kw):
    return StoreConfig(
        mapped_file_size_commit_log=FILE,
        mapped_file_size_consume_queue=20 * 1000,
        flush_interval_commit_log=10,
        flush_interval_consume_queue=10,
        flush_consume_queue_thorough_interval=0,
        flush_commit_log_thorough_interval=0,
        **kw,
    )


@pytest.mark.parametrize("mode", ["ASYNC_FLUSH", SYNC_FLUSH])
def test_confirm_phy_offset_is_what_recovery_found_and_the_flush_services_write_it(tmp_path, mode):
    root = str(tmp_path / "s")
    cfg = cp_config(flush_disk_type=mode)
    with MessageStore.open(root, cfg) as s:
        for i in range(30):
            assert s.put(Message("T", b"a" * 500)).ok
        last1 = s.put(Message("T", b"b" * 500)).physical_offset
        # a new store: the flush services' checkpoints carry 0, as RocketMQ's
        cp = wait_checkpoint(root, lambda cp: cp.logics_msg_timestamp > 0)
        assert cp.confirm_phy_offset == 0 and s.confirm_offset == 0
    assert read_cp(root).confirm_phy_offset == 0  # the shutdown does not move it either
    with MessageStore.open(root, cfg) as s:
        assert s.confirm_offset == last1  # recoverNormally: the last valid record's start
        assert s._commitlog.confirm_offset == last1
        before = read_cp(root).logics_msg_timestamp
        for i in range(200):  # into the next segments
            r = s.put(Message("T", b"c" * 500))
            assert r.ok
        last2 = r.physical_offset
        cp = wait_checkpoint(root, lambda cp: cp.logics_msg_timestamp > before)
        assert cp.confirm_phy_offset == last1  # written by the flush service, not moved by puts
        assert s.confirm_offset == last1
    assert read_cp(root).confirm_phy_offset == last1
    with MessageStore.open(root, cfg) as s:
        assert s.confirm_offset == last2
        last3 = s.put(Message("T", b"d" * 500)).physical_offset
        s.flush()
    # a crash: the abort file stays; abnormal recovery finds the last record again
    crash(root)
    with MessageStore.open(root, cfg) as s:
        assert s.confirm_offset == last3
        assert sum(s.max_offset("T", q) for q in range(4)) == 232  # puts without a queue id: round robin
        s.flush()
        assert read_cp(root).confirm_phy_offset == last3


# ---------------------------------------------------------------- within a segment (issue #16, point 7)
BIG = 16 << 20
STEP = 4 << 20  # recovery tells its progress at least every this many bytes (and a record's length)


def big_store(root, n=10_000, body=1000):
    """About 10 MiB of records in one 16 MiB segment, and a crash: recovery checks and dispatches them all."""
    cfg = StoreConfig(mapped_file_size_commit_log=BIG)
    with MessageStore.open(root, cfg) as s:
        for i in range(n):
            assert s.put(Message("T", bytes([65 + i % 26]) * body, properties={"KEYS": f"k{i}"}), i % 4).ok
        end = s.max_physical_offset
    crash(root)
    return cfg, end


def test_progress_moves_within_one_segment_and_counts_data_bytes(tmp_path):
    root = str(tmp_path / "s")
    cfg, end = big_store(root)
    assert len(segments(root)) == 1 and os.path.getsize(os.path.join(root, "commitlog", segments(root)[0])) == BIG
    calls = []
    with MessageStore.open(root, cfg, progress=lambda d, t: calls.append((d, t))) as s:
        assert sum(s.max_offset("T", q) for q in range(4)) == 10_000
    assert calls[0] == (0, end) and calls[-1] == (end, end)  # bytes of data, not the segment's 16 MiB
    done = [d for d, _ in calls]
    assert done == sorted(set(done))
    assert len([d for d in done if 0 < d < end]) >= end // STEP - 1
    assert all(b - a <= STEP + 1200 for a, b in zip(done, done[1:]))


def test_the_total_is_the_data_also_when_the_segment_tail_is_written_zeros(tmp_path):
    """A segment copied without holes (cp --sparse=never): the file system reports every byte as data, and
    the estimate looks back over the zeros."""
    root = str(tmp_path / "s")
    cfg, end = big_store(root, n=2000)
    path = os.path.join(root, "commitlog", segments(root)[0])
    fd = os.open(path, os.O_WRONLY)
    try:
        for at in range(end, BIG, 1 << 20):
            os.pwrite(fd, bytes(min(1 << 20, BIG - at)), at)
        os.fsync(fd)
    finally:
        os.close(fd)
    calls = []
    with MessageStore.open(root, cfg, progress=lambda d, t: calls.append((d, t))):
        pass
    assert calls[0] == (0, end) and calls[-1] == (end, end)
