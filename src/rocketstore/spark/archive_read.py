"""One read over the live store and its archive: option("archive", DEST) on the "rocketstore" source.

    spark.read.format("rocketstore").option("path", store).option("archive", dest).load()

The seam, per queue, is the first queue offset whose record is still in the CommitLog: the first unit at or
after the queue's min offset that points at or past the CommitLog's min (its first segment). That is the
queue's min offset once RocketMQ's correctMinOffset has run; before it (cleanup removed CommitLog segments
and the ConsumeQueue's own cleanup has not caught up yet, or a store whose first ConsumeQueue file lies
wholly below the CommitLog) the min offset still names units whose records are gone, so it cannot be the
seam. Offsets below the seam are read from the archive, those from it on from the live store: the archive
also holds closed segments cleanup has not deleted yet, and their records are read live, not twice.

Planning reads the archive's manifest (files.archive_manifest) for its files, and from the files of the
segments cleanup deleted (those below the CommitLog's min: none of the others can hold an offset below a
seam) the columns queueId and queueOffset (and storeTimestamp for a time option), to know which offsets
each queue has there, and in which files. An offset asked for that is in neither is data loss
(failOnDataLoss); so is a hole in the archive (a segment cleaned before it was archived). Executors read
their ranges' files with pyarrow, only the rows of their queue and offsets, into the live read's schema.

Topics with a batch ConsumeQueue are not read from the archive: it holds their records as stored (a row per
batch), while the live read unpacks each batch into its messages.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import ArchiveError
from ..files import layout as L
from ..files.archive_manifest import MANIFEST_DIR, ArchiveManifest, file_topic, local_dest, segment_head
from ..formats import cq as CQ
from ..formats.record import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE, gets_queue_unit
from . import options as O
from . import columns as C
from . import record_batch as RB
from .errors import DataLossError
from .queue_read import QueueRange

log = logging.getLogger("rocketstore.spark")
OPTION = "archive"
COLUMNS = [f.name for f in RB.SCHEMA if f.name != "topic"]  # the archive's files hold all but the partitions


@dataclass
class ArchiveRange(QueueRange):
    """Offsets [start, end) of one queue, read from the archive: `files` (absolute paths, in offset order)
    hold them, among other rows."""

    files: tuple = ()


def dest_option(opts) -> str | None:
    """The `archive` option as the archive's local path, checked to be one; None without the option."""
    raw = O.get(opts, OPTION)
    if raw is None or not str(raw).strip():
        return None
    try:
        dest = local_dest(str(raw).strip())
    except ArchiveError as e:
        raise O.OptionError(f"option '{OPTION}': {e}") from None
    if not os.path.isdir(os.path.join(dest, MANIFEST_DIR)):
        raise O.OptionError(
            f"option '{OPTION}': {dest} is not an archive (no {MANIFEST_DIR}/ in it): give the DEST that "
            "`rocketstore archive STORE --to DEST` wrote"
        )
    return dest


def plan(opts, store, queues: dict[str, list[int]], timestamps=()) -> "ArchivePlan | None":
    """The archive's part of a query's plan (None without the `archive` option); `timestamps`: the query's
    time options (None where not given), resolved against the archive too."""
    dest = dest_option(opts)
    if dest is None:
        return None
    return ArchivePlan(dest, store, queues, tuple(t for t in timestamps if t is not None))


def live_seam(store, topic: str, queue_id: int) -> int:
    """The first offset of the queue whose record is still in the CommitLog (see the module's doc): the
    min offset, or past it while its units point below the CommitLog's min (units are in CommitLog order,
    so a binary search)."""
    lo, hi = max(store.min_offset(topic, queue_id), 0), store.max_offset(topic, queue_id)
    if topic in store.batch_topics:
        return lo
    floor = store.min_physical_offset

    def gone(offset: int) -> bool:
        unit = store.queue_unit(topic, queue_id, offset)
        return unit is None or unit[0] < floor

    while lo < hi:
        mid = (lo + hi) // 2
        if gone(mid):
            lo = mid + 1
        else:
            hi = mid
    return lo


class ArchivePlan:
    """What the archive holds below each queue's seam, for the queues of one query."""

    def __init__(self, dest: str, store, queues: dict[str, list[int]], timestamps=()):
        self.dest = dest
        self.seams = {(t, q): live_seam(store, t, q) for t, qs in queues.items() for q in qs}
        self.runs: dict[tuple[str, int], list[tuple[int, int, str]]] = defaultdict(list)
        self.by_time: dict[tuple[str, int, int], int] = {}  # (topic, queue, ts) -> first offset stored at/after
        files = _deleted_segment_files(dest, store, set(queues))
        for topic, path in files:
            self._scan(topic, path, timestamps)
        for key in self.runs:
            self.runs[key].sort()

    def _scan(self, topic: str, path: str, timestamps) -> None:
        columns = ["queueId", "queueOffset", "sysFlag"] + (["storeTimestamp"] if timestamps else [])
        try:
            table = pq.read_table(path, columns=columns)
        except (OSError, pa.ArrowInvalid) as e:
            raise DataLossError(f"archive file {path} does not read: {e}") from None
        queue_ids = table.column("queueId").to_numpy(zero_copy_only=False)
        offsets = table.column("queueOffset").fill_null(-1).to_numpy(zero_copy_only=False)
        # an archive made with include_prepared holds records no queue points at: not offsets of a queue
        offsets = np.where(gets_queue_unit(table.column("sysFlag").to_numpy(zero_copy_only=False)), offsets, -1)
        ms = None
        if timestamps:
            ms = pc.cast(table.column("storeTimestamp"), pa.int64()).to_numpy(zero_copy_only=False) // 1000
        for q in np.unique(queue_ids).tolist():
            seam = self.seams.get((topic, q))
            if seam is None:
                continue
            mine = (queue_ids == q) & (offsets >= 0) & (offsets < seam)  # (-1: a record no queue points at)
            held = np.sort(offsets[mine])
            for a, b in _runs(held):
                self.runs[(topic, q)].append((a, b, path))
            for ts in timestamps:
                later = offsets[mine & (ms >= ts)] if ms is not None else held[:0]
                if len(later):
                    key = (topic, q, ts)
                    self.by_time[key] = min(self.by_time.get(key, int(later.min())), int(later.min()))

    def seam(self, topic: str, queue_id: int) -> int:
        return self.seams[(topic, queue_id)]

    def first(self, topic: str, queue_id: int) -> int:
        """The lowest offset this read can give of a queue: the archive's first below the seam, else the
        seam."""
        runs = self.runs.get((topic, queue_id))
        return runs[0][0] if runs else self.seam(topic, queue_id)

    def offset_by_time(self, topic: str, queue_id: int, ts: int) -> int | None:
        """The first offset below the seam stored at or after `ts` that the archive holds, or None."""
        return self.by_time.get((topic, queue_id, ts))

    def split(self, r: QueueRange, fail_on_data_loss: bool) -> list[QueueRange]:
        """`r` as archive ranges below the seam and a live range from it on; offsets in neither fail the read
        (or are skipped, with a warning, when failOnDataLoss is false)."""
        seam = self.seam(r.topic, r.queue_id)
        out: list[QueueRange] = []
        at, stop = r.start, min(r.end, seam)
        if at < stop and r.batch_cq:
            raise O.OptionError(
                f"{r.topic} keeps a batch ConsumeQueue: its offsets {at}..{stop - 1} (queue {r.queue_id}) are only "
                f"in the archive, which holds its batches as stored; read them with spark.read.parquet({self.dest!r})"
            )
        for a, b, files in _covered(self.runs.get((r.topic, r.queue_id), []), at, stop):
            if a > at:
                self._lost(r, at, a, seam, fail_on_data_loss)
            out.append(ArchiveRange(r.topic, r.queue_id, a, b, r.batch_cq, files))
            at = b
        if at < stop:
            self._lost(r, at, stop, seam, fail_on_data_loss)
        if max(r.start, seam) < r.end:
            out.append(QueueRange(r.topic, r.queue_id, max(r.start, seam), r.end, r.batch_cq))
        return out

    def _lost(self, r: QueueRange, a: int, b: int, seam: int, fail: bool) -> None:
        message = (
            f"offsets {a}..{b - 1} of {r.topic}-{r.queue_id} are in neither the store (the queue starts at {seam} "
            f"there) nor the archive {self.dest}"
        )
        if fail:
            raise DataLossError(message + "; set failOnDataLoss=false to skip them")
        log.warning("skipping: %s", message)


def _runs(sorted_offsets: np.ndarray):
    """(start, end) of each run of consecutive offsets."""
    if not len(sorted_offsets):
        return []
    cuts = np.flatnonzero(np.diff(sorted_offsets) != 1) + 1
    edges = [0, *cuts.tolist(), len(sorted_offsets)]
    return [(int(sorted_offsets[a]), int(sorted_offsets[b - 1]) + 1) for a, b in zip(edges, edges[1:])]


def _covered(runs: list[tuple[int, int, str]], start: int, stop: int):
    """(a, b, files) for each stretch of [start, stop) the runs (sorted) cover without a hole, the files
    holding it in offset order."""
    stretch = None
    for a, b, path in runs:
        a, b = max(a, start), min(b, stop)
        if a >= b:
            continue
        if stretch is not None and a == stretch[1]:
            stretch = (stretch[0], b, stretch[2] + [path])
            continue
        if stretch is not None:
            yield stretch[0], stretch[1], tuple(stretch[2])
        stretch = (a, b, [path])
    if stretch is not None:
        yield stretch[0], stretch[1], tuple(stretch[2])


def _deleted_segment_files(dest: str, store, topics: set[str]) -> list[tuple[str, str]]:
    """(topic, absolute path) of the archive's files of the wanted topics from the segments the store no
    longer has (below its CommitLog's min). An archived segment the store still has must have the same head
    there, else the archive is another store's."""
    manifest = ArchiveManifest(dest)
    commitlog = L.StoreLayout(store.root).commitlog
    floor = store.min_physical_offset
    out = []
    for name in manifest.archived():
        entry = manifest.entry(name)
        path = os.path.join(commitlog, name)
        if entry["base"] >= floor:
            if os.path.exists(path) and entry["head"] != segment_head(path):
                raise O.OptionError(
                    f"option '{OPTION}': {dest} holds another store's segment {name}, not {store.root}'s"
                )
            continue
        for f in entry["files"]:
            topic = file_topic(f["path"])
            if topic in topics:
                out.append((topic, os.path.join(dest, f["path"])))
    return out


# ---------------------------------------------------------------------------------------------- executors
def read_range(spec, r: ArchiveRange):
    """Yield RecordBatches of an archive range's messages, in queue order, in the live read's schema."""
    wanted = (pc.field("queueId") == r.queue_id) & (pc.field("queueOffset") >= r.start)
    wanted &= pc.field("queueOffset") < r.end
    wanted &= pc.bit_wise_and(pc.field("sysFlag"), pa.scalar(TRANSACTION_ROLLBACK_TYPE, pa.int32())).isin(
        [TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE]
    )  # (formats.record.gets_queue_unit: records of a queue only, whatever the archive's includePrepared)
    if spec.tags is not None:
        wanted &= pc.field("tags").isin(sorted(spec.tags))
    for path in r.files:  # files in offset order, each one segment's rows of one date: no two interleave
        try:
            table = pq.read_table(path, columns=COLUMNS, filters=wanted)
        except FileNotFoundError:
            _lost_file(spec, path, r)
            continue
        table = table.sort_by("queueOffset")
        for batch in table.to_batches(max_chunksize=spec.batch_rows):
            if batch.num_rows:
                yield C.shaped(_sql_filter(spec, _as_live(r.topic, batch)), spec.schema)  # the query's columns


def _as_live(topic: str, batch: pa.RecordBatch) -> pa.RecordBatch:
    """An archive batch in the live read's schema: the topic first, its types (the map's field names, the
    time zone) and nullability."""
    arrays = [pa.array([topic] * batch.num_rows, pa.string())]
    arrays += [batch.column(f.name).cast(f.type) for f in RB.SCHEMA if f.name != "topic"]
    return pa.RecordBatch.from_arrays(arrays, schema=RB.SCHEMA)


def _sql_filter(spec, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The SQL92 subscription decides per message, on its properties, as on the live side."""
    if spec.sql is None or not batch.num_rows:
        return batch
    from ..filter import compile as compile_sql

    f = compile_sql(spec.sql)
    return batch.filter(pa.array([f.matches(dict(p)) for p in batch.column("properties").to_pylist()], pa.bool_()))


def _lost_file(spec, path: str, r: ArchiveRange) -> None:
    message = f"archive file {path} for offsets {r.start}..{r.end - 1} of {r.topic}-{r.queue_id} is gone"
    if spec.fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip lost offsets")
    log.warning("skipping: %s", message)


def cq_unit_gone(root: str, topic: str, queue_id: int, offset: int, cq_size: int) -> bool:
    """Is a queue offset below its queue's seam, judged from the files alone (a stream's poll does not open
    the store): its ConsumeQueue file gone, or its unit pointing below the CommitLog's first segment."""
    names = L.segment_names(L.StoreLayout(root).commitlog)
    floor = int(names[0]) if names else 0
    per_file = cq_size // CQ.UNIT_SIZE
    first = offset - offset % per_file
    path = os.path.join(L.StoreLayout(root).queue_dir(topic, queue_id), L.segment_name(first * CQ.UNIT_SIZE))
    try:
        unit = np.fromfile(path, dtype=CQ.DTYPE, count=1, offset=(offset - first) * CQ.UNIT_SIZE)
    except FileNotFoundError:
        return True
    return len(unit) == 1 and int(unit["size"][0]) > 0 and 0 <= int(unit["pos"][0]) < floor
