"""The archive job (issue #30): every record of the CommitLog segments the writer has left that the archive
does not hold yet, written as Parquet under DEST, partitioned by topic and store date, each segment exactly
once (the manifest's rule: rocketstore.files.archive_manifest).

    DEST/topic=Orders/date=2026-11-22/00000000000001073741824-00000.parquet
    DEST/_rocketstore_archive/segments/00000000000001073741824.json

- Which segments: every one before the last that holds data. The last is the active one, which the next put
  may still append to; a segment is archived whole, once, when the writer has left it.
- Which records: all of them but, unless asked for, those of system topics (broker.rules.is_system_topic:
  SCHEDULE_TOPIC_XXXX, the transaction half and op topics, rmq_sys_*...; %RETRY% and %DLQ% topics are not
  system topics) and the transaction records no ConsumeQueue points at (prepared and rolled-back:
  formats.record.gets_queue_unit).
- Columns: the "rocketstore_commitlog" source's, `segment` (the segment file's name: with physicalOffset,
  where the record was), and the partition columns `topic` and `date`: the UTC date of storeTimestamp.
- Work: the segments go a batch at a time (twice the session's cores: each a task of one Spark job) into
  staging, partitioned by segment; then, in the driver, each segment's files are moved into place and its
  manifest entry written. Nothing is cleaned up on a failure: the next job's ArchiveManifest.recover()
  removes what an uncommitted segment left, whether the job died of an exception or of SIGKILL.

The store is only read (its closed segments' files, as the source reads them), never opened or locked: the
job can run beside the broker. Cleanup deleting a segment under a running job fails that job; run it again.
"""

from __future__ import annotations

import logging
import os
import shutil
import time

import pyarrow.parquet as pq
from pyspark.sql import functions as F

from ..broker.rules import SYSTEM_TOPIC_PREFIX, SYSTEM_TOPICS
from ..files import layout as L
from ..formats import record as R
from . import options as O
from . import record_batch as RB
from ..files.archive_manifest import (
    STAGED_COLUMN,
    ArchiveManifest,
    closed_segments,
    entry,
    has_data,
    destination,
    plan_moves,
    segment_head,
)
from ..errors import ArchiveError

log = logging.getLogger("rocketstore.spark")

PARTITIONS = ("topic", "date")
COLUMNS = [f.name for f in RB.SCHEMA if f.name != "topic"] + ["segment"]  # + the partitions, read back last
_TOPIC = "topic STRING NOT NULL, "
assert RB.DDL.startswith(_TOPIC)
# The archive's schema, for `spark.read.schema(DDL).parquet(dest)`: Spark infers partition values' types, so
# an archive whose topics all look like numbers ("2026") would read back with an integer topic column
DDL = RB.DDL[len(_TOPIC) :] + ", segment STRING NOT NULL, " + _TOPIC + "date DATE NOT NULL"


def archive(
    store,
    dest,
    spark,
    include_system: bool = False,
    include_prepared: bool = False,
    progress=None,
    segments_per_job: int | None = None,
    **options,
) -> dict:
    """Archive `store`'s closed CommitLog segments not archived yet into `dest` (a local path or file: URI)
    with `spark`. Options: the store's settings (brokerConf, MessageStoreConfig names), as the formats take
    them. Returns a summary: store, archive, segments (archived by this run), records (written by this
    run), archivedBefore, active (the segment left for later), undone (segments a killed run had half
    written, removed first), missingBytes (CommitLog bytes between the archive's last segment and the first
    one here: cleaned before they were archived), archived (the names of the segments this run archived),
    seconds.

    `progress(phase, **counts)`, in the driver: "planning" (segments=), "staging" (segments=: a batch's
    names), "moving" (segment=, files=), "moved" (segment=, file=: the index of the file just moved),
    "committed" (segment=, rows=)."""
    root, target = prepare(store, dest, options)
    with ArchiveManifest(target) as manifest:
        return archive_into(
            manifest, root, spark, include_system, include_prepared, progress, segments_per_job, options=options
        )


def prepare(store, dest, options: dict) -> tuple[str, str]:
    """(the store's absolute path, the archive's local path), both checked, and the store's settings: a bad
    one fails here, named, before Spark reads anything."""
    root = os.path.abspath(os.fspath(store))
    if not os.path.isdir(root):
        raise ArchiveError(f"{root}: no store directory here")
    target = destination(root, dest)
    O.store_config(options, root)
    return root, target


def archive_into(
    manifest: ArchiveManifest,
    root: str,
    spark,
    include_system: bool = False,
    include_prepared: bool = False,
    progress=None,
    segments_per_job: int | None = None,
    stopping=None,
    options: dict | None = None,
) -> dict:
    """One archive run into an archive whose lock the caller holds (archive(): for one run; a watcher: for
    all its rounds). `stopping()`, asked before and after each batch's staging, ends the run early: the
    batches staged before it are committed, the one being staged is abandoned (its Spark job cancelled by
    whoever stops, or finished: either way none of it goes in), the rest left for the next run (the
    summary's `stopped`, with `left`: how many)."""
    started = time.perf_counter()
    tell = progress or (lambda phase, **counts: None)
    options = options or {}
    directory = L.StoreLayout(root).commitlog
    names = L.segment_names(directory)
    path = {n: os.path.join(directory, n) for n in names}
    closed = closed_segments(names, [has_data(path[n]) for n in names])
    flags = {"includeSystem": bool(include_system), "includePrepared": bool(include_prepared)}
    undone = manifest.recover()
    if undone:
        log.warning("%s: removed the uncommitted output of segment(s) %s", manifest.dest, ", ".join(undone))
    _check_same_store(manifest, path)
    before = manifest.archived()
    todo = [n for n in closed if not manifest.is_archived(n)]
    missing = _missing_bytes(manifest, before, todo)
    tell("planning", segments=len(todo))
    heads = {n: (os.path.getsize(path[n]), segment_head(path[n])) for n in todo}
    per_job = segments_per_job or max(2 * spark.sparkContext.defaultParallelism, 1)
    rows, done = 0, []
    for i in range(0, len(todo), per_job):
        if stopping is not None and stopping():
            break
        batch = todo[i : i + per_job]
        tell("staging", segments=batch)
        try:
            _stage(spark, root, manifest.staging, batch, include_system, include_prepared, options)
        except Exception:
            if stopping is None or not stopping():
                raise  # (a stop cancels the batch's Spark job: then its failure is the stop's)
        if stopping is not None and stopping():
            break  # stopped while staging: the batch is abandoned whole, none of it moved in (staging goes below)
        for name in batch:
            rows += _commit(manifest, name, heads[name], flags, tell)
            done.append(name)
    shutil.rmtree(manifest.staging, ignore_errors=True)  # only Spark's _SUCCESS is left there
    summary = {
        "store": root,
        "archive": manifest.dest,
        "segments": len(done),
        "records": rows,
        "archivedBefore": len(before),
        "active": names[len(closed)] if len(closed) < len(names) else None,
        "undone": undone,
        "missingBytes": missing,
        "archived": done,
        "seconds": round(time.perf_counter() - started, 3),
    }
    if len(done) < len(todo):
        summary.update(stopped=True, left=len(todo) - len(done))
    return summary


def _check_same_store(manifest: ArchiveManifest, path: dict[str, str]) -> None:
    """An archived segment that is still in the store has the head it had: else the archive is another
    store's (segment names are offsets: every store has a 00000000000000000000), and archiving on would
    take this store's segments for archived ones."""
    for name in manifest.archived():
        if name in path and manifest.entry(name)["head"] != segment_head(path[name]):
            raise ArchiveError(
                f"{manifest.dest}: this archive holds another store's segment {name}: archive each store "
                "into a destination of its own"
            )


def _missing_bytes(manifest: ArchiveManifest, before: list[str], todo: list[str]) -> int:
    """CommitLog bytes between the archive's last segment and the first one to archive now (cleanup took
    them before they were archived)."""
    if not before or not todo:
        return 0
    last = manifest.entry(before[-1])
    return max(int(todo[0]) - (last["base"] + last["size"]), 0)


def system_topic(topic):
    """broker.rules.is_system_topic as a Spark expression over a topic column (its set and prefix, no
    Python per row)."""
    return topic.isin(sorted(SYSTEM_TOPICS)) | topic.startswith(SYSTEM_TOPIC_PREFIX)


def in_a_queue(sys_flag):
    """formats.record.gets_queue_unit as a Spark expression: not a prepared or rolled-back transaction
    record."""
    tran = sys_flag.bitwiseAND(R.TRANSACTION_ROLLBACK_TYPE)  # transaction_type: the two transaction bits
    return tran.isin(R.TRANSACTION_NOT_TYPE, R.TRANSACTION_COMMIT_TYPE)


def store_date(ts):
    """The UTC date of a TIMESTAMP column, whatever the session's time zone (days since the epoch)."""
    return F.date_from_unix_date(F.floor(F.unix_micros(ts) / 86_400_000_000).cast("int"))


def segment_of(phys, segments: list[str]):
    """The name of the segment (of `segments`, in offset order) holding each physical offset."""
    expr = None
    for name, after in zip(segments, segments[1:]):
        expr = (F.when if expr is None else expr.when)(phys < int(after), F.lit(name))
    last = F.lit(segments[-1])
    return last if expr is None else expr.otherwise(last)


def archive_frame(spark, root: str, segments: list[str], include_system: bool, include_prepared: bool, options):
    """The records of `segments` as they are archived: the columns COLUMNS, then `topic` and `date`."""
    reader = spark.read.format("rocketstore_commitlog").option("path", root).option("segments", ",".join(segments))
    for key, value in options.items():
        reader = reader.option(key, str(value))
    df = reader.load()
    if not include_system:
        df = df.where(~system_topic(F.col("topic")))
    if not include_prepared:
        df = df.where(in_a_queue(F.col("sysFlag")))
    df = df.withColumn("segment", segment_of(F.col("physicalOffset"), segments))
    return df.withColumn("date", store_date(F.col("storeTimestamp"))).select(*COLUMNS, *PARTITIONS)


def _stage(spark, root, staging, batch, include_system, include_prepared, options) -> None:
    """One Spark job: the batch's records under staging/stagedSegment=<segment>/topic=.../date=.../ (what is
    in staging now is committed or stale: recover() and every commit leave nothing else)."""
    shutil.rmtree(staging, ignore_errors=True)
    df = archive_frame(spark, root, batch, include_system, include_prepared, options)
    df = df.withColumn(STAGED_COLUMN, F.col("segment"))
    # Parquet's own microsecond timestamps rather than Spark's default INT96 (deprecated by Parquet, read
    # as nanoseconds by other readers): an archive outlives the session that wrote it
    key = "spark.sql.parquet.outputTimestampType"
    was = spark.conf.get(key)
    spark.conf.set(key, "TIMESTAMP_MICROS")
    try:
        df.write.partitionBy(STAGED_COLUMN, *PARTITIONS).parquet("file://" + staging)
    finally:
        spark.conf.set(key, was)


def _commit(manifest: ArchiveManifest, name: str, size_head: tuple[int, str], flags: dict, tell) -> int:
    """Move one staged segment's files into place, then write its entry. Returns its rows."""
    staged = manifest.staged_dir(name)
    moves = plan_moves(staged, name) if os.path.isdir(staged) else []  # none: nothing of it was kept
    files = [{"path": rel, "rows": pq.read_metadata(src).num_rows} for src, rel in moves]
    tell("moving", segment=name, files=len(moves))
    if moves:
        manifest.move_in(name, moves, moved=lambda i: tell("moved", segment=name, file=i))
    size, head = size_head
    record = entry(name, size, head, files, flags)
    manifest.commit(record)
    tell("committed", segment=name, rows=record["rows"])
    return record["rows"]
