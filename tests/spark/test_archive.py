"""rocketstore.spark.archive and `rocketstore archive` (issue #30, first part): the closed CommitLog segments'
records as Parquet under DEST, partitioned by topic and UTC store date, each segment exactly once, checked
against the messages these tests put (timestamps from a fixed clock around a UTC midnight)."""

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from urllib.parse import unquote

import pytest

import rocketstore.spark
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.formats.record import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE

UTC = datetime.timezone.utc
T0 = int(datetime.datetime(2026, 11, 21, 23, 55, tzinfo=UTC).timestamp() * 1000)  # 5 min before a UTC midnight
SEGMENT = 64 * 1024
TOPICS = ("Orders", "Pays", "%RETRY%g1", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_wheel_timer", "%DLQ%g1")
SYSTEM = {"RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_wheel_timer"}  # RocketMQ's TopicValidator, by hand
# the partition directories Spark names (ExternalCatalogUtils.escapePathName: % is escaped), by hand
ESCAPED = {"Orders": "Orders", "Pays": "Pays", "%RETRY%g1": "%25RETRY%25g1", "%DLQ%g1": "%25DLQ%25g1"}
FILE = re.compile(r"topic=([^/]+)/date=(\d{4}-\d\d-\d\d)/(\d{20})-\d{5}\.parquet")


def put_messages(root, start, stop, until_new_segment=False):
    """Messages start..stop-1 (or until a new CommitLog segment is started), one a second from T0 + start s.
    Returns what a reader of the archive should see of each: a dict per record."""
    put = []
    queued = {}  # (topic, queue) -> next queue offset: only records a ConsumeQueue points at get one
    now = [T0]
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=SEGMENT, clock=lambda: now[0])) as s:
        for topic, q in s.topics().items():  # a reopened store: its queues go on from where they are
            for qid in q:
                queued[(topic, qid)] = s.max_offset(topic, qid)
        files = len(segments(root))
        i = start
        while i < stop:
            now[0] = T0 + 1000 * i
            topic = TOPICS[(i * 7) % len(TOPICS)]
            flag = 0
            if topic in ("Orders", "Pays"):
                flag = {5: TRANSACTION_PREPARED_TYPE, 8: TRANSACTION_COMMIT_TYPE, 9: TRANSACTION_ROLLBACK_TYPE}.get(
                    i % 11, 0
                )
            body = f"m{i}-".encode() * (20 + i % 60)
            qid = i % 2
            r = s.put(Message(topic, body, tags=f"T{i % 3}", keys=[f"k{i}", f"x{i % 7}"], sys_flag=flag), qid)
            assert r.ok, (topic, r.status, r.reason)
            in_queue = flag in (0, TRANSACTION_COMMIT_TYPE)
            offset = None
            if in_queue:
                offset = queued.get((topic, qid), 0)
                queued[(topic, qid)] = offset + 1
            put.append(
                {
                    "topic": topic,
                    "queueId": qid,
                    "queueOffset": offset,
                    "physicalOffset": r.physical_offset,
                    "body": body,
                    "tags": f"T{i % 3}",
                    "keys": f"k{i} x{i % 7}",
                    "storeMs": now[0],
                    "sysFlag": flag,
                    "date": datetime.datetime.fromtimestamp(now[0] / 1000, UTC).date().isoformat(),
                    "system": topic in SYSTEM,
                    "queued": in_queue,
                }
            )
            i += 1
            if until_new_segment and len(segments(root)) > files:
                break
    return put


def segments(root):
    d = os.path.join(root, "commitlog")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def closed_records(root, put, system=False, prepared=False):
    """The records of every segment but the last, with the segment holding each, in log order."""
    names = segments(root)
    out = []
    for p in put:
        if p["physicalOffset"] >= int(names[-1]) or (p["system"] and not system) or (not p["queued"] and not prepared):
            continue
        out.append({**p, "segment": max(n for n in names if int(n) <= p["physicalOffset"])})
    return out


def as_rows(records):
    keys = ("topic", "queueId", "queueOffset", "physicalOffset", "body", "tags", "keys", "storeMs", "sysFlag")
    return [tuple(r[k] for k in keys) + (r["date"], r["segment"]) for r in records]


def read_back(spark, dest, schema=None):
    """Every row of the archive as a plain Parquet reader sees it, in log order; and each row's file."""
    rows = (
        (spark.read.schema(schema) if schema else spark.read)
        .parquet(dest)
        .selectExpr(
            "topic",
            "queueId",
            "queueOffset",
            "physicalOffset",
            "body",
            "tags",
            "keys",
            "unix_millis(storeTimestamp) AS storeMs",
            "sysFlag",
            "CAST(date AS STRING) AS date",
            "segment",
            "input_file_name() AS file",
        )
        .orderBy("physicalOffset")
        .collect()
    )
    got = [tuple(r)[:-1] for r in rows]
    return [g if g[-3] in (0, TRANSACTION_COMMIT_TYPE) else g[:2] + (None,) + g[3:] for g in got], rows


def parquet_files(dest):
    return sorted(
        os.path.relpath(os.path.join(d, f), dest)
        for d, _, files in os.walk(dest)
        for f in files
        if not os.path.relpath(d, dest).startswith("_rocketstore_archive")
    )


def manifest_files(dest):
    from rocketstore.files.archive_manifest import ArchiveManifest

    m = ArchiveManifest(dest)
    return sorted(f["path"] for name in m.archived() for f in m.entry(name)["files"])


@pytest.fixture(scope="module")
def base_store(tmp_path_factory):
    """About five 64 KiB segments: four topics, two of them system topics, prepared, committed and
    rolled-back transaction records, across a UTC midnight."""
    root = str(tmp_path_factory.mktemp("archive") / "store")
    put = put_messages(root, 0, 900)
    assert len(segments(root)) >= 4
    return root, put


class session_time_zone:
    """Run a block with another session time zone: the archive's dates must not depend on it."""

    def __init__(self, spark, zone):
        self.spark, self.zone = spark, zone

    def __enter__(self):
        self.was = self.spark.conf.get("spark.sql.session.timeZone")
        self.spark.conf.set("spark.sql.session.timeZone", self.zone)

    def __exit__(self, *exc):
        self.spark.conf.set("spark.sql.session.timeZone", self.was)


def test_archive_holds_each_closed_segment_record_once_and_a_rerun_adds_only_new_segments(spark, base_store, tmp_path):
    from rocketstore.files.archive_manifest import ArchiveManifest

    root = str(tmp_path / "store")
    shutil.copytree(base_store[0], root)
    put = list(base_store[1])
    dest = str(tmp_path / "archive")
    names = segments(root)
    want = closed_records(root, put)
    with session_time_zone(spark, "Asia/Tokyo"):  # UTC+9: a local date would be the next day for all
        first = rocketstore.spark.archive(root, dest, spark)
    assert (first["segments"], first["records"], first["archivedBefore"], first["active"]) == (
        len(names) - 1,
        len(want),
        0,
        names[-1],
    )
    assert {r["date"] for r in want} == {"2026-11-21", "2026-11-22"}  # the store crossed a UTC midnight
    assert {r["topic"] for r in want} == {"Orders", "Pays", "%RETRY%g1", "%DLQ%g1"}
    got, rows = read_back(spark, dest)
    assert got == as_rows(want)  # every record once, as put
    # the layout: topic=<escaped>/date=<UTC date>/<segment>-NNNNN.parquet, the rows' own topic, date, segment
    for r in rows:
        topic, date, segment = FILE.search(unquote(r.file)).groups()  # (a URI: its % escaped once more)
        assert (topic, date, segment) == (ESCAPED[r.topic], r.date, r.segment)
    files = parquet_files(dest)
    assert files == manifest_files(dest) and all(FILE.fullmatch(f) for f in files)
    m = ArchiveManifest(dest)
    assert m.archived() == names[:-1] and not m.is_archived(names[-1])
    assert sum(m.entry(n)["rows"] for n in names[:-1]) == len(want)

    again = rocketstore.spark.archive(root, dest, spark)  # nothing new: nothing written
    assert (again["segments"], again["records"], again["archivedBefore"]) == (0, 0, len(names) - 1)
    assert parquet_files(dest) == files

    put += put_messages(root, 900, 10_000, until_new_segment=True)  # the active segment closes
    assert len(segments(root)) == len(names) + 1
    new = [r for r in closed_records(root, put) if r["segment"] == names[-1]]
    third = rocketstore.spark.archive(root, dest, spark)
    assert (third["segments"], third["records"], third["active"]) == (1, len(new), segments(root)[-1])
    assert read_back(spark, dest)[0] == as_rows(closed_records(root, put))
    assert set(files) < set(parquet_files(dest)) and parquet_files(dest) == manifest_files(dest)


def test_system_topics_and_uncommitted_transactions_are_archived_only_when_asked(spark, base_store, tmp_path):
    from rocketstore.spark.archive_job import DDL

    root, put = base_store
    dest = str(tmp_path / "all")
    summary = rocketstore.spark.archive(root, dest, spark, include_system=True, include_prepared=True)
    want = closed_records(root, put, system=True, prepared=True)
    assert any(r["system"] for r in want) and any(r["sysFlag"] == TRANSACTION_PREPARED_TYPE for r in want)
    assert summary["records"] == len(want)
    assert read_back(spark, dest, schema=DDL)[0] == as_rows(want)  # (the archive's schema, given)
    from rocketstore.files.archive_manifest import ArchiveManifest

    m = ArchiveManifest(dest)
    assert all(m.entry(n)["includeSystem"] and m.entry(n)["includePrepared"] for n in m.archived())


def test_the_filters_and_the_date_are_the_stores_rules(spark):
    """The Spark expressions against RocketMQ's rules written out by hand: TopicValidator.isSystemTopic,
    the dispatch's transaction rule, the UTC date (under a session time zone that is not UTC)."""
    from pyspark.sql import functions as F

    from rocketstore.spark.archive_job import in_a_queue, store_date, system_topic

    topics = {
        "Orders": False,
        "%RETRY%g1": False,
        "%DLQ%g1": False,
        "SCHEDULE_TOPIC_XXXX": True,
        "RMQ_SYS_TRANS_HALF_TOPIC": True,
        "RMQ_SYS_TRANS_OP_HALF_TOPIC": True,
        "rmq_sys_wheel_timer": True,
        "TBW102": True,
        "RMQ_SYS_TRACE_TOPIC": True,
        "rmq_sys": False,
    }
    flags = {0x0: True, 0x4: False, 0x8: True, 0xC: False, 0x14: False, 0x19: True, 0x80: True}
    dates = {0: "1970-01-01", -1: "1969-12-31", T0 + 299_999: "2026-11-21", T0 + 300_000: "2026-11-22"}
    n = max(len(topics), len(flags), len(dates))
    data = [(list(topics)[i % len(topics)], list(flags)[i % len(flags)], list(dates)[i % len(dates)]) for i in range(n)]
    df = spark.createDataFrame(data, "topic STRING, sysFlag INT, ms LONG")
    with session_time_zone(spark, "America/Los_Angeles"):
        got = df.select(
            "topic",
            "sysFlag",
            "ms",
            system_topic(F.col("topic")).alias("system"),
            in_a_queue(F.col("sysFlag")).alias("queued"),
            store_date(F.timestamp_millis(F.col("ms"))).cast("string").alias("date"),
        ).collect()
    assert [(r.system, r.queued, r.date) for r in got] == [(topics[t], flags[f], dates[m]) for t, f, m in data]


def test_a_segment_with_nothing_to_archive_is_committed_empty(spark, tmp_path):
    """Segment 0 holds message traces only (a system topic): its entry lists no file, and a rerun does not
    take it up again."""
    from rocketstore.files.archive_manifest import ArchiveManifest

    root, dest = str(tmp_path / "store"), str(tmp_path / "archive")
    orders = []
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=SEGMENT, clock=lambda: T0)) as s:
        while len(segments(root)) < 2:
            assert s.put(Message("RMQ_SYS_TRACE_TOPIC", b"t" * 500), 0).ok
        while len(segments(root)) < 3:
            orders.append(s.put(Message("Orders", b"o" * 500), 0).physical_offset)
    first, second, active = segments(root)
    summary = rocketstore.spark.archive(root, dest, spark)
    assert (summary["segments"], summary["records"]) == (2, len(orders) - 1)  # the last Orders is in the active
    m = ArchiveManifest(dest)
    assert (m.entry(first)["rows"], m.entry(first)["files"]) == (0, [])
    got = [r.physicalOffset for r in spark.read.parquet(dest).orderBy("physicalOffset").collect()]
    assert got == orders[:-1]
    assert rocketstore.spark.archive(root, dest, spark)["segments"] == 0


def test_segments_cleaned_before_they_were_archived_are_reported_missing(spark, tmp_path):
    root, dest = str(tmp_path / "store"), str(tmp_path / "archive")

    def fill_to(n_segments):
        with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=SEGMENT, clock=lambda: T0)) as s:
            while len(segments(root)) < n_segments:
                assert s.put(Message("Orders", b"o" * 500), 0).ok

    fill_to(3)
    assert rocketstore.spark.archive(root, dest, spark)["segments"] == 2  # 0 and 1
    fill_to(5)
    for name in segments(root)[:3]:  # cleanup took 0 to 2 meanwhile, 2 never archived
        os.unlink(os.path.join(root, "commitlog", name))
    summary = rocketstore.spark.archive(root, dest, spark)
    assert (summary["segments"], summary["missingBytes"]) == (1, SEGMENT)


class Killed(Exception):
    pass


def test_a_job_killed_half_way_then_run_again_leaves_each_record_once(spark, base_store, tmp_path):
    """The job is stopped by its progress callback at two points (its files half moved into place; all
    moved but not committed), as a kill there would stop it: it cleans up nothing on the way out. A killed
    Spark write is left by hand. The third run removes what the first two left and archives the rest."""
    from rocketstore.files.archive_manifest import ArchiveManifest

    root, put = base_store
    dest = str(tmp_path / "archive")
    closed = segments(root)[:-1]
    files_of = {}

    def kill_at(segment, file):
        def progress(phase, **c):
            if phase == "moving":
                files_of[c["segment"]] = c["files"]
            if phase == "moved" and c["segment"] == segment and c["file"] == file(c["segment"]):
                raise Killed

        return progress

    with pytest.raises(Killed):  # after the first file of the second segment
        rocketstore.spark.archive(root, dest, spark, progress=kill_at(closed[1], lambda s: 0))
    m = ArchiveManifest(dest)
    assert m.archived() == closed[:1] and files_of[closed[1]] > 1
    assert any(f.endswith(f"/{closed[1]}-00000.parquet") for f in parquet_files(dest))  # half moved in
    with pytest.raises(Killed):  # after the last file of the third
        rocketstore.spark.archive(root, dest, spark, progress=kill_at(closed[2], lambda s: files_of[s] - 1))
    assert m.archived() == closed[:2]
    assert {f.rsplit("/", 1)[1][:20] for f in parquet_files(dest)} == set(closed[:3])
    spark_left = os.path.join(m.staging, "_temporary", "0", "_temporary", "attempt_1")  # a killed Spark write
    os.makedirs(spark_left)
    with open(os.path.join(spark_left, "part-00000.parquet"), "wb") as f:
        f.write(b"PAR1 half")

    seen = {}

    def planning(phase, **c):  # after recovery, before anything new is written
        if phase == "planning":
            seen["files"], seen["listed"] = parquet_files(dest), manifest_files(dest)
            seen["staging"] = os.path.exists(m.staging)
            seen["empty"] = [d for d, sub, files in os.walk(dest) if not sub and not files]

    summary = rocketstore.spark.archive(root, dest, spark, progress=planning)
    assert seen["files"] == seen["listed"] and not seen["staging"]  # what no entry lists was removed first
    assert seen["empty"] == []  # and the partition directories it alone had
    assert (summary["undone"], summary["archivedBefore"], summary["segments"]) == (
        [closed[2]],
        2,
        len(closed) - 2,
    )
    assert read_back(spark, dest)[0] == as_rows(closed_records(root, put))  # each record once
    assert parquet_files(dest) == manifest_files(dest)  # no file that no entry lists
    assert m.archived() == closed and not os.path.exists(m.staging)


def test_the_command_sigkilled_mid_run_then_run_again_leaves_each_record_once(spark, base_store, tmp_path):
    """A real kill: `rocketstore archive` (and its Spark JVM, one process group) SIGKILLed as soon as its
    first segment is committed, while it moves the next ones in or stages the next batch; then run again."""
    from rocketstore.files.archive_manifest import ArchiveManifest

    root, put = base_store
    dest = str(tmp_path / "archive")
    closed = segments(root)[:-1]
    entries = os.path.join(dest, "_rocketstore_archive", "segments")
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rocketstore.cli",
            "archive",
            root,
            "--to",
            dest,
            "--spark-conf",
            "spark.master=local[2]",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    try:
        while not (os.path.isdir(entries) and any(n.endswith(".json") for n in os.listdir(entries))):
            assert p.poll() is None and time.monotonic() < deadline, p.returncode
            time.sleep(0.002)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    killed_at = ArchiveManifest(dest).archived()
    assert 0 < len(killed_at) < len(closed)  # killed half-way
    summary = rocketstore.spark.archive(root, dest, spark)
    assert (summary["archivedBefore"], summary["segments"]) == (len(killed_at), len(closed) - len(killed_at))
    assert read_back(spark, dest)[0] == as_rows(closed_records(root, put))  # each record once
    assert parquet_files(dest) == manifest_files(dest)


def test_an_archive_elsewhere_than_a_local_path_of_its_own_is_refused(spark, base_store, tmp_path):
    from rocketstore.errors import ArchiveError

    root, _ = base_store
    with pytest.raises(ArchiveError, match="only local paths are supported"):
        rocketstore.spark.archive(root, "s3a://bucket/archive", spark)
    with pytest.raises(ArchiveError, match="the archive must not be inside the store"):
        rocketstore.spark.archive(root, os.path.join(root, "archive"), spark)
    with pytest.raises(ArchiveError, match="the store must not be inside the archive"):
        rocketstore.spark.archive(root, os.path.dirname(root), spark)
    # an archive of another store: its segment 0 has another head
    dest = tmp_path / "other"
    (dest / "_rocketstore_archive" / "segments").mkdir(parents=True)
    other = {"segment": "0" * 20, "base": 0, "size": SEGMENT, "head": "0" * 64, "rows": 0, "files": []}
    (dest / "_rocketstore_archive" / "segments" / f"{'0' * 20}.json").write_text(json.dumps(other))
    with pytest.raises(ArchiveError, match="another store's segment 00000000000000000000"):
        rocketstore.spark.archive(root, str(dest), spark)
    assert parquet_files(str(dest)) == []
    # one job at a time on an archive
    from rocketstore.files.archive_manifest import ArchiveManifest

    with ArchiveManifest(str(dest)):
        with pytest.raises(ArchiveError, match="another archive job is writing this archive"):
            rocketstore.spark.archive(root, str(dest), spark)
    # the source's `segments` option, which the job reads by: a segment that is not there fails the read
    with pytest.raises(Exception, match="option 'segments': no segment 99999999999999999999"):
        spark.read.format("rocketstore_commitlog").option("path", root).option("segments", "9" * 20).load().count()


def test_the_readme_path_archives_then_queries_with_spark_sql(spark, base_store, tmp_path, capsys):
    """README.md's "Archive past retention" Python, run as written (its paths ours): its query's table
    shows the count of each topic and UTC date of what was put (the README's date filter keeps them all)."""
    from collections import Counter

    root, put = base_store
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md"), encoding="utf-8").read()
    section = readme[readme.index("### Archive past retention") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    code = code.replace("path/to/store", root).replace("path/to/archive", str(tmp_path / "archive"))
    exec(compile(code, "README.md", "exec"), {})
    shown = capsys.readouterr().out
    counts = Counter((r["topic"], r["date"]) for r in closed_records(root, put))
    lines = [line for line in shown.splitlines() if re.match(r"\|\s*[%\w]+\|\d{4}-", line)]
    assert len(lines) == len(counts), shown
    for (topic, date), n in counts.items():
        assert re.search(rf"\|\s*{re.escape(topic)}\|{date}\|\s*{n}\|", shown), (topic, date, n, shown)


def test_the_command_archives_and_says_what_it_did(base_store, tmp_path):
    """`rocketstore archive` (stderr not a terminal): a line per phase, then the report; the archive as a
    plain Parquet reader (pyarrow) sees it."""
    import pyarrow.dataset as ds

    root, put = base_store
    dest = str(tmp_path / "archive")
    p = subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", "archive", root, "--to", dest],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert p.returncode == 0, p.stderr
    want = closed_records(root, put)
    closed = len(segments(root)) - 1
    ours = [line for line in p.stderr.splitlines() if not line.startswith("WARNING")]
    assert ours[:2] == ["starting Spark (local[*])...", f"planning: {closed} segments to archive"], ours
    assert ours[-1] == "stopping Spark", ours
    batches = [re.fullmatch(rf"archiving segments (\d+)-(\d+) of {closed}", line) for line in ours[2:-1]]
    assert all(batches) and batches, ours
    spans = [(int(m.group(1)), int(m.group(2))) for m in batches]
    assert [a for a, _ in spans] == [1] + [b + 1 for _, b in spans[:-1]] and spans[-1][1] == closed
    report = dict(re.findall(r"^\s*(\w+)\s+(\S+)\s*$", p.stdout, re.M))
    assert (report["segments"], report["records"], report["active"]) == (
        str(closed),
        str(len(want)),
        segments(root)[-1],
    )
    table = ds.dataset(dest, format="parquet", partitioning="hive").to_table(columns=["physicalOffset"])
    assert sorted(table.column("physicalOffset").to_pylist()) == [r["physicalOffset"] for r in want]


def test_a_failed_spark_job_is_told_in_its_one_line_that_matters():
    import rocketstore.cli.main  # noqa: F401  (the command group first, as `rocketstore` loads it)
    from rocketstore.cli.spark_run import spark_failure

    worker = (
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        '  File "commitlog_source.py", line 127, in read_segment\n'
        "    raise ValueError(message)\n"
        "ValueError: /s/commitlog/00000000000000065536: no valid record at offset 4204 (size 412, magic 0x1)\n"
    )
    assert spark_failure(Exception(worker)) == (
        "ValueError: /s/commitlog/00000000000000065536: no valid record at offset 4204 (size 412, magic 0x1)"
    )
    assert spark_failure(Exception("[TASK_WRITE_FAILED] Task failed\n\tat org.apache.Foo")) == (
        "[TASK_WRITE_FAILED] Task failed"
    )
