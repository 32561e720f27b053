"""`consume` and `query` when what is asked for is only in the archive: one line saying so, with the Spark read
that gives it. The archive is written here without Spark (the manifest's entries, Parquet files with the
columns the hint reads), the way `rocketstore archive` lays it out; cleanup then deletes the oldest segments."""

import datetime
import json
import os
import re
import subprocess
import sys

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from tests._archive_by_hand import write_archive

HOUR = 3600 * 1000
T0 = int(datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.timezone.utc).timestamp() * 1000)
NOW = T0 + 30 * 24 * HOUR
SEGMENT = 4096
DELETED = 3
CONF = "mappedFileSizeCommitLog=4096\narchiveEnable=true\narchivePath={dest}\n"


def run(*args):
    p = subprocess.run([sys.executable, "-m", "rocketstore.cli", *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture
def cleaned(tmp_path):
    root, dest = str(tmp_path / "store"), str(tmp_path / "archive")
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF.format(dest=dest))
    clock = [T0]
    cfg = dict(mapped_file_size_commit_log=SEGMENT, clock=lambda: clock[0])
    with MessageStore.open(root, StoreConfig(**cfg)) as s:
        put = []
        for i in range(60):
            clock[0] = T0 + 1000 * i
            put.append(s.put(Message("T", f"m{i}".encode() * 50), i % 2))
        assert all(r.ok for r in put)
    names = sorted(os.listdir(os.path.join(root, "commitlog")))
    write_archive(root, dest, put, names, SEGMENT)
    clock[0] = NOW
    with MessageStore.open(root, StoreConfig(**cfg, archive_enable=True, archive_path=dest)) as s:
        for i, n in enumerate(names):
            t = (NOW - (100 if i < DELETED else 1) * HOUR) * 1_000_000
            os.utime(os.path.join(root, "commitlog", n), ns=(t, t))
        s._cleanup.disk_usage = lambda path: 0.1  # by time alone, whatever this machine's disk
        assert s.delete_expired_files(now_ms=NOW) == DELETED
    floor = int(names[DELETED])
    gone = [p for p in put if p.physical_offset < floor]
    lo = {q: min(p.queue_offset for p in put if p.queue_id == q and p.physical_offset >= floor) for q in (0, 1)}
    return root, dest, str(conf), put, gone, lo


def said(err):
    """stderr without consume's summary line (stderr under --json)."""
    return [line for line in err.splitlines() if not re.match(r"\d+ message\(s\) of T \(no group\)", line)]


def iso(ms):
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def test_consume_from_an_offset_or_a_time_only_in_the_archive_says_so_in_one_line(cleaned):
    root, dest, conf, put, gone, lo = cleaned
    assert lo[0] > 2 and lo[1] > 2
    code, out, err = run("consume", root, "T", "--offset", "2", "--archive", dest, "--json")
    assert code == 0, err
    read = (
        f'spark.read.format("rocketstore").option("path", "{root}").option("archive", "{dest}")'
        f'.option("topics", "T").option("startingOffsets", \'{{"T": {{"0": 2, "1": 2}}}}\').load()'
    )
    assert said(err) == [
        f"rocketstore: T-0 offsets 2..{lo[0] - 1}, T-1 offsets 2..{lo[1] - 1} are only in the archive {dest} "
        f"(cleanup deleted them here); read them with Spark: {read}"
    ]
    assert len(out.splitlines()) == len(put) - len(gone)  # what the store has, as before
    # the archive named by broker.conf's archivePath; one queue; a time
    since = gone[-4].store_timestamp  # the 4th-last message cleanup deleted: in queue 0 or 1
    q = gone[-4].queue_id
    code, _, err = run("consume", root, "T", "-q", str(q), "--from", str(since), "-c", conf, "--json")
    assert code == 0, err
    first = min(p.queue_offset for p in gone if p.queue_id == q and p.store_timestamp >= since)
    assert said(err) == [
        f"rocketstore: T-{q} offsets {first}..{lo[q] - 1} (stored at or after {iso(since)}) are only in the "
        f"archive {dest} (cleanup deleted them here); read them with Spark: "
        f'spark.read.format("rocketstore").option("path", "{root}").option("archive", "{dest}")'
        f'.option("topics", "T").option("startingTimestamp", \'{iso(since)}\').load()'
    ]
    # what the store has: nothing said
    code, _, err = run("consume", root, "T", "--offset", str(max(lo.values())), "-c", conf, "--json")
    assert code == 0 and said(err) == [], err
    # no archive named: as before
    code, _, err = run("consume", root, "T", "--offset", "0", "--json")
    assert code == 0 and said(err) == [], err
    code, _, err = run("consume", root, "T", "--offset", "0", "--archive", root)
    assert code == 2 and "is not an archive (no _rocketstore_archive/ in it)" in err, err


def test_query_by_time_or_offset_only_in_the_archive_says_so_in_one_line(cleaned):
    root, dest, conf, put, gone, lo = cleaned
    begin, end = gone[5].store_timestamp, gone[-1].store_timestamp + 5000
    code, out, err = run("query", root, "--begin", str(begin), "--end", str(end), "-c", conf, "--json")
    assert code == 0, err
    n = sum(1 for p in gone if begin <= p.store_timestamp <= end)
    assert err.splitlines() == [
        f"rocketstore: {n} of T stored in that range are only in the archive {dest} (cleanup deleted them here); "
        f'read them with Spark: spark.read.format("rocketstore").option("path", "{root}").option("archive", '
        f'"{dest}").option("topics", "T").option("startingTimestamp", \'{iso(begin)}\')'
        f".option(\"endingTimestamp\", '{iso(end + 1)}').load()"
    ]
    kept = [p for p in put if p not in gone and begin <= p.store_timestamp <= end]
    assert sorted(json.loads(line)["queueOffset"] for line in out.splitlines()) == sorted(p.queue_offset for p in kept)
    phys = gone[3].physical_offset
    code, _, err = run("query", root, "--offset", str(phys), "--archive", dest)
    segment = f"{phys - phys % SEGMENT:020d}"
    assert code == 1 and err.splitlines() == [
        f"rocketstore: error: offset {phys} is out of range: the CommitLog holds [{DELETED * SEGMENT}, "
        f"{put[-1].physical_offset + put[-1].size}); cleanup deleted its segment {segment}, which the archive "
        f'{dest} holds: spark.read.parquet("{dest}").where("physicalOffset = {phys}").show()'
    ], err
    code, _, err = run("query", root, "--key", "k1", "--archive", str(os.path.dirname(root)))
    assert code == 2 and "is not an archive (no _rocketstore_archive/ in it)" in err, err
