"""`rocketstore archive --watch` (issue #30): the command run as a process beside a store these tests append to
through the library, checked against what was put (tests/spark/test_archive.py's messages and rules, by
hand): segments archived as they close, each record once, whether the watcher is stopped by SIGINT between
rounds, by SIGTERM in the middle of one, or SIGKILLed in the middle of one and run again."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pyarrow.dataset as ds
import pytest

import rocketstore.spark
from tests.spark.test_archive import closed_records, manifest_files, parquet_files, put_messages, segments

WAIT_S = 300  # a round's first Spark job on a loaded two-core machine takes tens of seconds


class Watcher:
    """`rocketstore archive ROOT --to DEST --watch --json ...` in a process group of its own (it and its
    Spark JVM), its stdout's JSON lines read as they come."""

    def __init__(self, root, dest, *extra):
        argv = [sys.executable, "-m", "rocketstore.cli", "archive", root, "--to", dest, "--watch", "--json", *extra]
        self.p = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        self.lines = queue.Queue()
        self.err = []
        threading.Thread(target=self._read, args=(self.p.stdout, self.lines.put), daemon=True).start()
        threading.Thread(target=self._read, args=(self.p.stderr, self.err.append), daemon=True).start()

    @staticmethod
    def _read(stream, put):
        for line in stream:
            put(line)

    def next_round(self):
        """The next JSON line (a round's summary, or the totals at the end)."""
        try:
            return json.loads(self.lines.get(timeout=WAIT_S))
        except queue.Empty:
            raise AssertionError(f"no line from the watcher in {WAIT_S} s:\n{''.join(self.err)[-3000:]}") from None

    def round_archiving(self, names):
        """Rounds until one that archived `names` (those before it archived nothing)."""
        while True:
            r = self.next_round()
            assert "round" in r, (r, "".join(self.err)[-3000:])
            if r["segments"]:
                assert r["archived"] == names, r
                return r

    def totals(self):
        """The last line: the totals (after the rounds not read yet)."""
        while True:
            r = self.next_round()
            if "round" not in r:
                return r

    def wait(self, timeout=120):
        code = self.p.wait(timeout)
        time.sleep(0.2)  # the readers' last lines
        return code

    def kill(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()


def archived_offsets(dest):
    """physicalOffset of every record in the archive, as a plain Parquet reader (pyarrow) sees it, sorted:
    a record archived twice shows twice."""
    if not parquet_files(dest):
        return []
    table = ds.dataset(dest, format="parquet", partitioning="hive").to_table(columns=["physicalOffset"])
    return sorted(table.column("physicalOffset").to_pylist())


def offsets(records, in_segments=None):
    return [r["physicalOffset"] for r in records if in_segments is None or r["segment"] in in_segments]


def test_watch_archives_segments_as_they_close_and_stops_on_sigint(tmp_path):
    root, dest = str(tmp_path / "store"), str(tmp_path / "archive")
    put = put_messages(root, 0, 400)
    names = segments(root)
    assert len(names) >= 3
    w = Watcher(root, dest, "--every", "0.5", "--spark-conf", "spark.master=local[2]")
    try:
        first = w.round_archiving(names[:-1])  # what was closed when it started
        assert first["round"] == 1 and first["records"] == len(closed_records(root, put))
        for _ in range(2):  # the test's puts close the active segment: the watcher takes it, alone
            was = segments(root)
            put += put_messages(root, len(put), 100_000, until_new_segment=True)
            assert len(segments(root)) == len(was) + 1
            r = w.round_archiving([was[-1]])
            assert r["records"] == len([c for c in closed_records(root, put) if c["segment"] == was[-1]])
        assert parquet_files(dest) == manifest_files(dest)
        w.p.send_signal(signal.SIGINT)  # between rounds
        assert w.wait() == 0, "".join(w.err)[-3000:]
    finally:
        w.kill()
    totals = w.totals()
    closed = segments(root)[:-1]
    assert (totals["segments"], totals["left"]) == (len(closed), 0) and totals["rounds"] >= 3, totals
    assert archived_offsets(dest) == offsets(closed_records(root, put))  # each record once
    assert not any("Traceback" in line for line in w.err), "".join(w.err)


def test_watch_stopped_or_killed_mid_round_leaves_each_record_once(spark, tmp_path):
    """SIGTERM as the first segment of a many-batch round is committed: the watcher stops within the round,
    exit 0, the archive holds whole segments only (each record once); then a second watcher SIGKILLed (it and
    its JVM) as its round commits, and a plain run: every closed segment, each record once."""
    from rocketstore.files.archive_manifest import ArchiveManifest

    root, dest = str(tmp_path / "store"), str(tmp_path / "archive")
    put = put_messages(root, 0, 2500)
    closed = segments(root)[:-1]
    assert len(closed) >= 10  # two segments a batch (local[1]: 2 x its one core), five Spark jobs and more
    want = closed_records(root, put)
    m = ArchiveManifest(dest)

    def run_until_an_entry_more(sig, *extra):
        had = len(m.archived())
        w = Watcher(root, dest, "--spark-conf", "spark.master=local[1]", *extra)
        deadline = time.monotonic() + WAIT_S
        try:
            while len(m.archived()) <= had:
                assert w.p.poll() is None and time.monotonic() < deadline, "".join(w.err)[-3000:]
                time.sleep(0.002)
            if sig == signal.SIGKILL:
                w.kill()
            else:
                w.p.send_signal(sig)
                assert w.wait() == 0, "".join(w.err)[-3000:]
        finally:
            w.kill()
        return w

    w = run_until_an_entry_more(signal.SIGTERM)
    rounds = [w.next_round(), w.totals()]  # the round cut short (--every's default: no other), the totals
    stopped_at = m.archived()
    assert 0 < len(stopped_at) < len(closed) and stopped_at == closed[: len(stopped_at)]
    assert rounds[0]["archived"] == stopped_at and rounds[0]["left"] == len(closed) - len(stopped_at)
    assert (rounds[1]["segments"], rounds[1]["left"]) == (len(stopped_at), len(closed) - len(stopped_at))
    assert parquet_files(dest) == manifest_files(dest)  # nothing of a segment without its entry
    assert archived_offsets(dest) == offsets(want, stopped_at)

    run_until_an_entry_more(signal.SIGKILL)
    killed_at = m.archived()
    assert len(stopped_at) < len(killed_at) < len(closed)
    summary = rocketstore.spark.archive(root, dest, spark)
    assert (summary["archivedBefore"], summary["segments"]) == (len(killed_at), len(closed) - len(killed_at))
    assert archived_offsets(dest) == offsets(want)  # each record once
    assert parquet_files(dest) == manifest_files(dest) and m.archived() == closed


def test_a_stop_while_a_batch_is_staged_abandons_that_batch_whole(spark, tmp_path):
    """The library's watch, stopped as its round's second batch starts staging (one segment a batch): the
    first batch is in, the second's Spark job is cancelled (or finishes) and none of it goes in, the rest is
    left; a rerun takes the rest, each record once."""
    from rocketstore.files.archive_manifest import ArchiveManifest
    from rocketstore.spark.archive_watch import watch

    root, dest = str(tmp_path / "store"), str(tmp_path / "archive")
    put = put_messages(root, 0, 900)
    closed = segments(root)[:-1]
    stop, rounds, batches = threading.Event(), [], []

    def progress(phase, **c):
        if phase == "staging":
            batches.append(c["segments"])
            if len(batches) == 2:
                stop.set()

    totals = watch(root, dest, spark, every=3600, stop=stop, on_round=rounds.append, progress=progress,
                   segments_per_job=1)  # fmt: skip
    assert batches == [closed[:1], closed[1:2]] and len(rounds) == 1
    assert (rounds[0]["archived"], rounds[0]["left"]) == (closed[:1], len(closed) - 1)
    assert (totals["rounds"], totals["segments"], totals["left"]) == (1, 1, len(closed) - 1)
    assert ArchiveManifest(dest).archived() == closed[:1] and parquet_files(dest) == manifest_files(dest)
    want = closed_records(root, put)
    assert archived_offsets(dest) == offsets(want, closed[:1])
    assert rocketstore.spark.archive(root, dest, spark)["segments"] == len(closed) - 1
    assert archived_offsets(dest) == offsets(want)


@pytest.mark.parametrize("every", ["0", "-1", "nan", "inf"])
def test_the_library_watch_refuses_a_bad_period(every, tmp_path):
    from rocketstore.errors import ArchiveError
    from rocketstore.spark.archive_watch import watch

    with pytest.raises(ArchiveError, match="the seconds between rounds must be more than 0"):
        watch(str(tmp_path), str(tmp_path / "a"), None, every=float(every))
