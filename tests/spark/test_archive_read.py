"""One read over the live store and its archive (issue #30): option("archive", DEST) reads what cleanup
removed from the archive's Parquet and the rest from the store, each message once. One store, prepared once:
messages put (the ones acknowledged into a queue are the expectation), read live before cleanup (the columns
to compare with), archived, then cleanup deletes its oldest CommitLog segments."""

import os
import shutil

import pytest

import rocketstore.spark
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.files.archive_manifest import ArchiveManifest

from .test_archive import SEGMENT, SYSTEM, T0, put_messages, segments

HOUR = 3600 * 1000
NOW = T0 + 30 * 24 * HOUR  # the cleanup's "now": a month after the puts
DELETED = 3  # the oldest CommitLog segments cleanup deletes
TOPICS = "Old,Orders,Pays,%RETRY%g1,%DLQ%g1"  # every topic the archive holds (system topics are left out)
OLD = 30  # messages of "Old", all in the first segment: a queue wholly in the archive after cleanup


def as_tuple(row):
    """A collected row as plain values (the map as sorted pairs, bytes as bytes)."""
    out = []
    for v in row:
        if isinstance(v, dict):
            v = tuple(sorted(v.items()))
        elif isinstance(v, (bytes, bytearray)):
            v = bytes(v)
        out.append(v)
    return tuple(out)


def read(spark, root, **options):
    reader = spark.read.format("rocketstore").option("path", root)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def rows(df):
    return sorted(as_tuple(r) for r in df.collect())


def key(t):
    """(topic, queueId, queueOffset) of a row tuple (the schema's first three columns)."""
    return t[:3]


def store_config(**kw):
    return StoreConfig(mapped_file_size_commit_log=SEGMENT, clock=lambda: NOW, **kw)


@pytest.fixture(scope="module")
def prepared(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("archive-read")
    root, dest = str(base / "store"), str(base / "archive")
    now = [T0 - 60_000]
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=SEGMENT, clock=lambda: now[0])) as s:
        for i in range(OLD):
            now[0] = T0 - 60_000 + 1000 * i
            assert s.put(Message("Old", f"old{i}".encode(), tags=f"T{i % 3}"), 0).ok
    put = put_messages(root, 0, 900)
    acked = {(p["topic"], p["queueId"], p["queueOffset"]) for p in put if p["queued"] and p["topic"] not in SYSTEM}
    acked |= {("Old", 0, i) for i in range(OLD)}
    before = rows(read(spark, root, topics=TOPICS))
    assert {key(r) for r in before} == acked and len(before) == len(acked)  # the live read, before: as put
    names = segments(root)
    assert len(names) >= DELETED + 2
    # prepared and rolled-back records too: the read must know they are in no queue
    rocketstore.spark.archive(root, dest, spark, include_prepared=True)
    with MessageStore.open(root, store_config(archive_enable=True, archive_path=dest)) as s:
        for i, n in enumerate(names):  # the oldest 100 h old at NOW, the others an hour (files' times, not the clock's)
            t = (NOW - (100 if i < DELETED else 1) * HOUR) * 1_000_000
            os.utime(os.path.join(root, "commitlog", n), ns=(t, t))
        s._cleanup.disk_usage = lambda path: 0.1  # by time alone, whatever this machine's disk
        assert s.delete_expired_files(now_ms=NOW) == DELETED
    assert segments(root) == names[DELETED:]
    return {"root": root, "dest": dest, "before": before, "names": names, "put": put}


def seam_of(root, topic, queue_id):
    with MessageStore.open(root, store_config(), read_only=True) as s:
        return s.min_offset(topic, queue_id), s.max_offset(topic, queue_id)


def test_the_unified_read_gives_every_message_once_with_the_live_reads_columns(spark, prepared):
    root, dest, before = prepared["root"], prepared["dest"], prepared["before"]
    lo, hi = seam_of(root, "Orders", 0)
    assert 0 < lo < hi  # the seam in the middle of a queue
    assert seam_of(root, "Old", 0) == (OLD, OLD)  # a queue wholly in the archive
    alone = rows(read(spark, root, topics=TOPICS))
    assert len(alone) < len(before)  # the store alone lost the oldest
    assert rows(read(spark, root, topics=TOPICS, archive=dest)) == before

    def where(cond):
        return [r for r in before if cond(dict(zip(FIELDS, r)))]

    # offsets across the seam: from 3 before it to 3 after, in Orders-0 alone
    spec = '{"Orders": {"0": %d}, "Pays": {"0": -1, "1": -1}, "Old": {"0": -1}, "%%RETRY%%g1": {"0": -1, "1": -1}, "%%DLQ%%g1": {"0": -1, "1": -1}}'
    got = rows(
        read(
            spark,
            root,
            topics=TOPICS,
            archive=dest,
            startingOffsets=spec % (lo - 3),
            endingOffsets='{"Orders": {"0": %d}}' % (lo + 3),
        )
    )
    assert got == where(lambda r: r["topic"] == "Orders" and r["queueId"] == 0 and lo - 3 <= r["queueOffset"] < lo + 3)
    # tags and a SQL92 subscription, on both sides
    assert rows(read(spark, root, topics=TOPICS, archive=dest, tags="T1 || T2")) == where(
        lambda r: r["tags"] in ("T1", "T2")
    )
    assert rows(read(spark, root, topics=TOPICS, archive=dest, sql="TAGS = 'T0'")) == where(lambda r: r["tags"] == "T0")
    # times across the seam: from 40 s before the first message the store still has to 40 s after it
    kept = [p for p in prepared["put"] if p["physicalOffset"] >= int(prepared["names"][DELETED])]
    a, b = kept[0]["storeMs"] - 40_000, kept[0]["storeMs"] + 40_000
    timed = {(p["topic"], p["queueId"], p["queueOffset"]) for p in prepared["put"] if a <= p["storeMs"] < b}
    got = rows(read(spark, root, topics=TOPICS, archive=dest, startingTimestamp=str(a), endingTimestamp=str(b)))
    assert len(got) > 40 and got == [r for r in before if key(r) in timed]
    # a pattern
    got = rows(read(spark, root, topicPattern="O.*", archive=dest))
    assert got == where(lambda r: r["topic"] in ("Old", "Orders"))
    # the query's columns only (option columns), on both sides of the seam
    got = read(spark, root, topics=TOPICS, archive=dest, columns="queueOffset, topic, queueId")
    assert got.columns == ["queueOffset", "topic", "queueId"]
    want = sorted((r[FIELDS.index("queueOffset")], r[0], r[FIELDS.index("queueId")]) for r in before)
    assert sorted(tuple(r) for r in got.collect()) == want
    # the read the CLI's `consume --offset` shows when the offsets are only in the archive, run as shown
    from rocketstore.cli.archive_hint import below_min

    with MessageStore.open(root, store_config(), read_only=True) as s:
        line = below_min(s, dest, "Orders", [0], 0, None)
    assert line.startswith(f"rocketstore: Orders-0 offsets 0..{lo - 1} are only in the archive {dest} ")
    shown = eval(line.split("read them with Spark: ", 1)[1], {"spark": spark})
    assert rows(shown) == where(lambda r: r["topic"] == "Orders" and r["queueId"] == 0)


FIELDS = [f.name for f in __import__("rocketstore.spark.record_batch", fromlist=["SCHEMA"]).SCHEMA]


def without_segment(dest, name, to):
    """A copy of the archive without one segment (its entry and files): as if cleanup had taken that
    segment before it was archived."""
    shutil.copytree(dest, to)
    m = ArchiveManifest(to)
    for f in m.entry(name)["files"]:
        os.unlink(os.path.join(to, f["path"]))
    os.unlink(os.path.join(to, "_rocketstore_archive", "segments", f"{name}.json"))
    return to


def test_fail_on_data_loss_fails_only_for_offsets_in_neither(spark, prepared, tmp_path):
    root, before, names = prepared["root"], prepared["before"], prepared["names"]

    def in_segment(r, name):
        return int(name) <= dict(zip(FIELDS, r))["physicalOffset"] < int(name) + SEGMENT

    # a hole: the archive lacks the second segment, which the store no longer has either
    holed = without_segment(prepared["dest"], names[1], str(tmp_path / "holed"))
    with pytest.raises(Exception, match=r"DataLossError: offsets \d+\.\.\d+ of \S+ are in neither the store"):
        read(spark, root, topics=TOPICS, archive=holed).count()
    got = rows(read(spark, root, topics=TOPICS, archive=holed, failOnDataLoss="false"))
    assert got == [r for r in before if not in_segment(r, names[1])]
    # an archive begun after cleanup took the first segment: earliest is the archive's first, no loss there ...
    late = without_segment(prepared["dest"], names[0], str(tmp_path / "late"))
    assert rows(read(spark, root, topics=TOPICS, archive=late)) == [r for r in before if not in_segment(r, names[0])]
    # ... but an offset asked for below it is in neither
    with pytest.raises(Exception, match=r"DataLossError: .*offset 0 of Orders-0 is in neither the store \(the "):
        read(spark, root, topics="Orders", archive=late, startingOffsets='{"Orders": {"0": 0}}').count()
    # the option itself: not an archive
    with pytest.raises(Exception, match=r"option 'archive': \S+ is not an archive"):
        read(spark, root, topics="Orders", archive=str(tmp_path)).count()


def test_a_stream_starts_in_the_archive_and_catches_up_into_the_store_exactly_once(spark, prepared, tmp_path):
    """From earliest, 150 offsets a trigger: stopped after its first trigger; then cleanup deletes one more
    segment (the stream's position is now below the seam: what it has not read yet of that segment comes from
    the archive), messages are put, and it goes on from its checkpoint to the end (triggers straddle the
    seam). Each message once. Then one from a JSON offset below the store's min."""
    import time

    root = str(tmp_path / "store")
    shutil.copytree(prepared["root"], root)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")

    def start(begin="earliest", sink=out, checkpoint=ck, available_now=True):
        df = (
            spark.readStream.format("rocketstore")
            .option("path", root)
            .option("topics", TOPICS)
            .option("archive", prepared["dest"])
            .option("startingOffsets", begin)
            .option("maxOffsetsPerTrigger", 150)
            .load()
        )
        w = df.writeStream.format("parquet").option("path", sink).option("checkpointLocation", checkpoint)
        return w.trigger(availableNow=True).start() if available_now else w.start()

    def got(sink=out):
        return sorted(key(as_tuple(r)) for r in spark.read.parquet(sink).select(*FIELDS[:3]).collect())

    q = start(available_now=False)
    deadline = time.monotonic() + 120
    while not q.recentProgress or q.recentProgress[0]["numInputRows"] == 0:
        assert q.exception() is None and time.monotonic() < deadline, q.exception()
        time.sleep(0.2)
    q.stop()
    first = got()
    assert 0 < len(first) <= 300  # a trigger or two of the first
    names = segments(root)
    with MessageStore.open(root, store_config(archive_enable=True, archive_path=prepared["dest"])) as s:
        for i, n in enumerate(names):
            t = (NOW - (100 if i == 0 else 1) * HOUR) * 1_000_000
            os.utime(os.path.join(root, "commitlog", n), ns=(t, t))
        s._cleanup.disk_usage = lambda path: 0.1  # by time alone, whatever this machine's disk
        assert s.delete_expired_files(now_ms=NOW) == 1
    more = put_messages(root, 900, 960)
    q = start()
    q.awaitTermination()
    sizes = [p["numInputRows"] for p in q.recentProgress]
    assert len(sizes) > 3 and max(sizes) <= 150
    new = [(p["topic"], p["queueId"], p["queueOffset"]) for p in more if p["queued"] and p["topic"] not in SYSTEM]
    assert got() == sorted([key(r) for r in prepared["before"]] + new)  # each once

    lo, _ = seam_of(root, "Pays", 1)
    spec = '{"Pays": {"1": %d}}' % (lo - 5)
    q = start(spec, str(tmp_path / "out2"), str(tmp_path / "ck2"))
    q.awaitTermination()
    from_json = got(str(tmp_path / "out2"))
    assert [k for k in from_json if k[:2] == ("Pays", 1)][:6] == [("Pays", 1, o) for o in range(lo - 5, lo + 1)]


def test_the_seam_is_the_first_offset_whose_record_is_still_in_the_commitlog(tmp_path):
    """A CommitLog segment gone while the ConsumeQueue's first file (10 units) still lies wholly below the
    CommitLog's new min: RocketMQ's correctMinOffset looks at that first file only and leaves the min offset
    where it was, naming units whose records are gone. The seam is past them: the first put whose record is
    in a segment still there (from the puts' own offsets)."""
    from rocketstore.spark.archive_read import live_seam

    cfg = dict(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=200, clock=lambda: T0)
    with MessageStore.open(str(tmp_path), StoreConfig(**cfg)) as s:
        put = [s.put(Message("T", b"x" * 300), 0) for _ in range(60)]
    names = segments(str(tmp_path))
    os.unlink(os.path.join(str(tmp_path), "commitlog", names[0]))
    os.unlink(os.path.join(str(tmp_path), "commitlog", names[1]))  # the first 10 units' records, and more
    want = next(i for i, r in enumerate(put) if r.physical_offset >= int(names[2]))
    assert want > 10
    with MessageStore.open(str(tmp_path), StoreConfig(**cfg), read_only=True) as s:
        assert s.min_offset("T", 0) < want  # the min offset RocketMQ would give
        assert live_seam(s, "T", 0) == want
        assert live_seam(s, "Absent", 0) == 0


def test_the_readme_reads_across_the_seam_as_written(spark, prepared, capsys):
    """README.md's "Reading across the seam" Python, run as written (its paths ours): the count of each queue
    of Orders is what was put there (every message is after the README's date)."""
    import re
    from collections import Counter

    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md"), encoding="utf-8").read()
    section = readme[readme.index("**Reading across the seam.**") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    code = code.replace("path/to/store", prepared["root"]).replace("path/to/archive", prepared["dest"])
    exec(compile(code, "README.md", "exec"), {"spark": spark})
    shown = capsys.readouterr().out
    counts = Counter(p["queueId"] for p in prepared["put"] if p["topic"] == "Orders" and p["queued"])
    for q, n in counts.items():
        assert re.search(rf"\|\s*{q}\|\s*{n}\|", shown), (q, n, shown)


def test_a_range_splits_at_the_seam_and_around_the_archives_holes(tmp_path):
    """Without Spark: the plan of one queue over a store whose 3 oldest segments cleanup deleted and an archive
    (written by hand, as the CLI's tests do) missing the second one; the pieces from the puts' own offsets."""
    from rocketstore.spark.archive_read import ArchivePlan, ArchiveRange
    from rocketstore.spark.errors import DataLossError, OptionError
    from rocketstore.spark.queue_read import QueueRange

    from tests._archive_by_hand import write_archive

    root, dest = str(tmp_path / "store"), str(tmp_path / "archive")
    cfg = dict(mapped_file_size_commit_log=4096, clock=lambda: NOW)
    with MessageStore.open(root, StoreConfig(**cfg)) as s:
        put = [s.put(Message("T", f"m{i}".encode() * 50), 0) for i in range(90)]
    names = segments(root)
    write_archive(root, dest, put, names, 4096)
    without_segment(dest, names[1], str(tmp_path / "holed"))
    with MessageStore.open(root, StoreConfig(**cfg, archive_enable=True, archive_path=dest)) as s:
        for i, n in enumerate(names):
            t = (NOW - (100 if i < 3 else 1) * HOUR) * 1_000_000
            os.utime(os.path.join(root, "commitlog", n), ns=(t, t))
        s._cleanup.disk_usage = lambda path: 0.1  # by time alone, whatever this machine's disk
        assert s.delete_expired_files(now_ms=NOW) == 3

    def first_in(name):
        return next(r.queue_offset for r in put if r.physical_offset >= int(name))

    hole, after, seam = first_in(names[1]), first_in(names[2]), first_in(names[3])
    with MessageStore.open(root, StoreConfig(**cfg), read_only=True) as s:
        plan = ArchivePlan(str(tmp_path / "holed"), s, {"T": [0]})
        whole = QueueRange("T", 0, 0, 90)
        got = [(type(p).__name__, p.start, p.end) for p in plan.split(whole, fail_on_data_loss=False)]
        assert got == [("ArchiveRange", 0, hole), ("ArchiveRange", after, seam), ("QueueRange", seam, 90)]
        assert plan.first("T", 0) == 0 and plan.seam("T", 0) == seam
        with pytest.raises(DataLossError, match=rf"offsets {hole}\.\.{after - 1} of T-0 are in neither the store"):
            plan.split(whole, fail_on_data_loss=True)
        # a range wholly live, or wholly archived, is one piece
        assert plan.split(QueueRange("T", 0, seam + 1, 90), True) == [QueueRange("T", 0, seam + 1, 90)]
        (one,) = plan.split(QueueRange("T", 0, 1, 3), True)
        assert isinstance(one, ArchiveRange) and (one.start, one.end) == (1, 3) and len(one.files) == 1
        with pytest.raises(OptionError, match="keeps a batch ConsumeQueue"):
            plan.split(QueueRange("T", 0, 0, 90, batch_cq=True), True)
