"""Rebuilding the ConsumeQueues, batch ConsumeQueues and index files from the CommitLog, in pieces that can
run in parallel (apache/rocketmq #5184, #7355: regenerating them with one reput thread is slow).

Reput dispatches every record in CommitLog order, but what it writes splits cleanly:

- CommitLog segments are independent: every segment ends at a record boundary, then a BLANK filler, so
  each one decodes on its own (`decode_segment`) into dispatch columns: the records and tagsCodes reput
  would dispatch (check_record's rules, in bulk through formats.record_scan as recovery does).
- A queue's files depend only on its own units in CommitLog order (`write_queue`, through the same
  ConsumeQueue / BatchConsumeQueue classes reput uses, so fillPreBlank, guards and offsets are reput's).
- The index is a sequence of entries (one per UNIQ_KEY and KEYS token of each record, none for a
  rolled-back one) cut into files of maxIndexNum - 1 entries; a new, empty file opens when a record
  arrives while the last file is full (IndexService). `plan_index` numbers the files from per-segment
  counts; `write_index_file` writes one file from its slice, knowing only the entry before it.
- `RebuildRun` takes the store's lock and has the pieces write into a staging store
  (rocketstore.maintenance.rebuild_swap), which it finally opens and closes, so recovery settles the CommitLog's end and
  the checkpoint, then swaps in: a failure or a kill at any instant leaves the old files or the new ones.

Everything here is plain Python and numpy: `rebuild_serial` runs the pieces in this process;
rocketstore.spark.rebuild_job runs the same pieces as a Spark job.
"""

from __future__ import annotations

import dataclasses
import logging
import mmap
import os
import time
from dataclasses import dataclass, field

import numpy as np

from .. import engine
from ..config import topics as TC
from ..config.store_config import StoreConfig
from ..config.deleted_topics import DeletedTopics
from ..formats import checkpoint as CP
from ..files.layout import BATCH_CONSUMEQUEUE, StoreLayout
from ..log.batch_consume_queue import BatchConsumeQueue
from ..log.checkpoint_file import CheckpointFile
from ..log.consume_queue import ConsumeQueue
from ..log.index_file import IndexFile
from .rebuild_swap import REBUILT, RebuildError, StagedRebuild  # noqa: F401  (REBUILT: part of this API)

from ..services.dispatch import BLANK, OK, check_record
from ..services.dispatch_rows import index_entries as dispatch_index_entries
from ..services.dispatch_rows import index_entry_counts, unit_rows
from ..services.index_service import file_name_at, name_after
from ..engine import decode_run

log = logging.getLogger("rocketstore.rebuild")
EXT_REFUSED = (
    "the parallel rebuild does not write ConsumeQueue ext files, and the config enables them "
    "(enableConsumeQueueExt=true): rebuild with --engine local, whose recovery dispatch writes the "
    "ext units (with the registered SQL92 filters' bitmaps) as reput does"
)

# the dispatch columns of decoded records: numpy arrays, and Python lists for the strings
INT_COLUMNS = {
    "phys": np.int64,
    "size": np.int32,
    "queue_id": np.int32,
    "queue_offset": np.int64,
    "tags_code": np.int64,
    "store_ts": np.int64,
    "sys_flag": np.int32,
    "base": np.int64,
    "batch_size": np.int32,
    "entries": np.int32,
    "entry_no": np.int64,
}
STR_COLUMNS = ("topic", "keys", "uniq")


# ---------------------------------------------------------------------------- settings workers need
@dataclass(frozen=True)
class DecodeSettings:
    """What decoding a segment needs from the store's config (small and picklable, for Spark tasks)."""

    file_size: int
    check_crc: bool = True
    force_verify_prop_crc: bool = False
    delay_levels: tuple = ()
    index_enabled: bool = True

    @classmethod
    def of(cls, config: StoreConfig) -> "DecodeSettings":
        return cls(
            config.mapped_file_size_commit_log,
            config.check_crc_on_recover,
            config.force_verify_prop_crc,
            tuple(config.delay_levels()),
            config.message_index_enable,
        )


# ---------------------------------------------------------------------------- decoding one segment
@dataclass
class Segment:
    """One decoded CommitLog segment: its records' dispatch columns and how the segment ends."""

    path: str
    base: int  # the segment's first physical offset (its file name)
    columns: dict = field(default_factory=dict)
    end: int = 0  # physical offset where the records stop
    blank: bool = False  # they stop at a BLANK filler (else: the problem below)
    problem: str | None = None  # None with blank=False: zeros, nothing written there
    empty_at_end: bool = False  # nothing at all at the stop position (zeros)
    # the index entries of its records, in order (key hash, physical offset, store time): made once, at
    # decode, as the per-record counts come from them
    entry_hash: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    entry_phys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    entry_ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def records(self) -> int:
        return len(self.columns.get("phys", ()))

    def summary(self) -> "SegmentSummary":
        c = self.columns
        n = len(c.get("phys", ()))
        with_entries = np.flatnonzero(c["entries"]) if n else np.zeros(0, np.int64)
        last_entry = int(with_entries[-1]) if len(with_entries) else -1
        return SegmentSummary(
            self.path,
            self.base,
            self.end,
            self.blank,
            self.problem,
            self.empty_at_end,
            n,
            int(c["entries"].sum()) if n else 0,
            int(c["phys"][-1]) if n else -1,
            int(c["phys"][last_entry]) if last_entry >= 0 else -1,
            int(c["store_ts"][last_entry]) if last_entry >= 0 else 0,
        )


@dataclass
class SegmentSummary:
    """What the driver needs to know about a decoded segment (no columns): where and how it ends, and its
    counts for the index plan."""

    path: str
    base: int
    end: int
    blank: bool
    problem: str | None
    empty_at_end: bool
    records: int
    entries: int
    last_record_phys: int  # -1: no record
    last_entry_phys: int  # the last record with an index entry, -1: none
    last_entry_ts: int


class _Collector:
    """Accumulates dispatch columns: numpy chunks from bulk runs, single values from careful records."""

    def __init__(self):
        self.chunks = {k: [] for k in INT_COLUMNS}
        self.strings = {k: [] for k in STR_COLUMNS}

    def add_run(self, arrays: dict, topics: list, keys: list, uniqs: list) -> None:
        for k, v in arrays.items():
            self.chunks[k].append(v)
        self.strings["topic"].extend(topics)
        self.strings["keys"].extend(keys)
        self.strings["uniq"].extend(uniqs)

    def add_one(self, req) -> None:
        values = {
            "phys": req.commit_log_offset,
            "size": req.msg_size,
            "queue_id": req.queue_id,
            "queue_offset": req.consume_queue_offset,
            "tags_code": req.tags_code,
            "store_ts": req.store_timestamp,
            "sys_flag": req.sys_flag,
            "base": req.msg_base_offset,
            "batch_size": req.batch_size,
        }
        for k, v in values.items():
            self.chunks[k].append(np.array([v], dtype=INT_COLUMNS[k]))
        self.strings["topic"].append(req.topic)
        self.strings["keys"].append(req.keys or "")
        self.strings["uniq"].append(req.uniq_key)

    def columns(self) -> dict:
        cols = {
            k: (np.concatenate(v).astype(INT_COLUMNS[k]) if v else np.zeros(0, INT_COLUMNS[k]))
            for k, v in self.chunks.items()
            if k not in ("entries", "entry_no")
        }
        cols.update(self.strings)
        return cols


def add_index_entries(seg: Segment, cols: dict, index_enabled: bool) -> None:
    """The segment's index entries, and per row how many it makes ("entries", int32) and how many the
    segment's earlier rows made ("entry_no"). The counts come from the entries' physical offsets (one per
    entry, a segment's offsets increasing); with offsets that do not increase (never from a file, which is
    read in order) they are counted by dispatch_rows.index_entry_counts, the reference."""
    n = len(cols["phys"])
    entries = np.zeros(n, dtype=np.int32)
    if index_enabled and n:
        phys = cols["phys"]
        seg.entry_hash, seg.entry_phys, seg.entry_ts = index_entries(
            cols["topic"], cols["keys"], cols["uniq"], cols["sys_flag"], phys, cols["store_ts"]
        )
        if n == 1 or bool((np.diff(phys) > 0).all()):
            entries = np.searchsorted(seg.entry_phys, phys, "right") - np.searchsorted(seg.entry_phys, phys, "left")
        else:
            entries = index_entry_counts(cols["uniq"], cols["keys"], cols["sys_flag"])
    cols["entries"] = entries.astype(np.int32)
    cols["entry_no"] = np.cumsum(entries, dtype=np.int64) - entries  # the segment's entries before it


def decode_segment(path: str, base: int, settings: DecodeSettings) -> Segment:
    """The records of one CommitLog segment as reput would dispatch them, up to its BLANK filler or the
    first position that holds no valid record (the end of the log, or a problem the caller judges)."""
    size = os.path.getsize(path)
    if size != settings.file_size:
        raise RebuildError(
            f"{path}: CommitLog file is {size} bytes, the store expects {settings.file_size} (mappedFileSizeCommitLog)"
        )
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return _decode(mm, path, base, settings)
    finally:
        mm.close()


def _decode(buf, path: str, base: int, settings: DecodeSettings) -> Segment:
    out = _Collector()
    limit = settings.file_size
    # recovery goes one record at a time when the properties CRC must be verified: so do we
    bulk = not settings.force_verify_prop_crc
    pos = 0
    seg = Segment(path, base)
    while True:
        if bulk:
            after = _take_run(buf, pos, limit, out, settings)
            if after != pos:
                pos = after
                continue
        kind, rsize, req, problem = check_record(
            buf,
            pos,
            limit,
            check_crc=settings.check_crc,
            force_verify_prop_crc=settings.force_verify_prop_crc,
            delay_levels=settings.delay_levels,
        )
        if kind == OK:
            out.add_one(req)
            pos += rsize
            continue
        seg.blank = kind == BLANK
        seg.problem = None if kind == BLANK else problem
        seg.empty_at_end = kind != BLANK and not any(buf[pos : pos + 8])
        break
    seg.end = base + pos
    seg.columns = out.columns()
    add_index_entries(seg, seg.columns, settings.index_enabled)
    return seg


def _take_run(buf, pos: int, limit: int, out: _Collector, settings: DecodeSettings) -> int:
    """Dispatch columns of a run of plain records, from the bulk decoder reput and recovery use
    (bulk_dispatch.decode_run); returns where the run ends (pos: none taken). It stops before a record
    needing the careful path (CRC mismatch, inner batch, DELAY of SCHEDULE_TOPIC that is not a number),
    which check_record then judges."""
    # arrays: the numeric columns come as int64 arrays, not a Python int per field of every record
    done, after, _, cols = decode_run(buf, pos, limit, settings.check_crc, settings.delay_levels, arrays=True)
    if not done:
        return pos
    n = cols.count
    out.add_run(
        {
            "phys": cols.phys,
            "size": cols.size.astype(np.int32),
            "queue_id": cols.queue_id.astype(np.int32),
            "queue_offset": cols.queue_offset,
            "tags_code": cols.tags_code,
            "store_ts": cols.store_ts,
            "sys_flag": cols.sys_flag.astype(np.int32),
            "base": cols.queue_offset,
            "batch_size": np.ones(n, dtype=np.int32),
        },
        cols.topic,
        cols.keys,
        cols.uniq,
    )
    return after


def check_segments(segments: list[SegmentSummary]) -> int:
    """Index of the segment the log ends in. Every segment before it must end with a BLANK filler: a bad
    record there is an error naming the file and offset (recovery would cut the log at it and drop every
    later segment). Segments after it hold nothing (a preallocated file)."""
    last = len(segments) - 1
    while (
        last > 0
        and segments[last].records == 0
        and segments[last].empty_at_end
        and segments[last].end == segments[last].base
    ):
        last -= 1
    for s in segments[:last]:
        if not s.blank:
            what = s.problem if s.problem and not s.empty_at_end else "no record here (zeros)"
            raise RebuildError(
                f"{s.path}: offset {s.end - s.base}: {what}, but later CommitLog files hold "
                f"records; run `rocketstore recover` first (it cuts the log there), or repair "
                f"the file"
            )
    return last


# ---------------------------------------------------------------------------- writing one queue
@dataclass
class QueueWritten:
    topic: str
    queue_id: int
    units: int
    last_phys: int = -1  # the last record whose unit went in, and its store time (checkpoint's logics time)
    last_store_ts: int = 0


def write_queue(
    root: str, topic: str, queue_id: int, batch: bool, file_size: int, cols: dict, below: int = -1
) -> QueueWritten:
    """One queue's ConsumeQueue (or batch ConsumeQueue) files from its units' columns (phys, size,
    tags_code, queue_offset, store_ts, and for a batch queue base, batch_size), in any order: written in
    CommitLog order through the classes reput uses, so the bytes are reput's. Units of records below
    `below` are left out (the topic was deleted when the CommitLog ended there: deleted_topics.py)."""
    phys = np.asarray(cols["phys"], dtype=np.int64)
    if below >= 0:
        kept = np.flatnonzero(phys >= below)
        if not len(kept):
            return QueueWritten(topic, queue_id, 0)
        cols = {k: np.asarray(v)[kept] for k, v in cols.items()}
        phys = phys[kept]
    order = np.argsort(phys, kind="stable")
    c = {
        k: np.asarray(cols[k])[order].astype(np.int64)
        for k in ("phys", "size", "tags_code", "queue_offset", "store_ts")
    }
    if batch:
        c["base"] = np.asarray(cols["base"])[order].astype(np.int64)
        c["batch_size"] = np.asarray(cols["batch_size"])[order].astype(np.int64)
        return _write_batch_queue(root, topic, queue_id, file_size, c)
    cq = ConsumeQueue(root, topic, queue_id, file_size, writable=True)
    cq.load()
    try:
        done = QueueWritten(topic, queue_id, len(order))
        qoffs = c["queue_offset"]
        # runs of consecutive queue offsets: the first unit through put() (fillPreBlank and the guards),
        # the rest through put_many, which writes them in one go when they simply continue the queue
        breaks = np.flatnonzero(np.diff(qoffs) != 1) + 1
        starts = np.r_[0, breaks].astype(np.int64)
        ends = np.r_[breaks, len(qoffs)].astype(np.int64)
        for a, b in zip(starts.tolist(), ends.tolist()):
            ok = cq.put(int(c["phys"][a]), int(c["size"][a]), int(c["tags_code"][a]), int(qoffs[a]))
            if b - a > 1:
                ok = cq.put_many(
                    c["phys"][a + 1 : b], c["size"][a + 1 : b], c["tags_code"][a + 1 : b], int(qoffs[a]) + 1
                )
            if ok:
                done.last_phys, done.last_store_ts = int(c["phys"][b - 1]), int(c["store_ts"][b - 1])
        cq.files.flush_all()
    finally:
        cq.close()
    return done


def _write_batch_queue(root, topic, queue_id, file_size, c) -> QueueWritten:
    bcq = BatchConsumeQueue(root, topic, queue_id, file_size, writable=True)
    bcq.load()
    try:
        done = QueueWritten(topic, queue_id, len(c["phys"]))
        for phys, size, code, ts, base, n in zip(
            *(c[k].tolist() for k in ("phys", "size", "tags_code", "store_ts", "base", "batch_size"))
        ):
            if bcq.dispatch(phys, size, code, ts, base, n):
                done.last_phys, done.last_store_ts = phys, ts
        bcq.files.flush_all()
    finally:
        bcq.files.close()
    return done


# ---------------------------------------------------------------------------- the index
@dataclass
class IndexPlan:
    """Which index files the entries make: file i holds global entries [i * per_file, (i+1) * per_file),
    the last one what is left; `names` in order (wall-clock names, unique and increasing)."""

    per_file: int
    total_entries: int
    names: list[str]
    segment_first_entry: dict[int, int]  # segment base -> global number of its first entry

    @property
    def files_with_entries(self) -> int:
        return -(-self.total_entries // self.per_file)

    def file_of(self, entry_no: np.ndarray) -> np.ndarray:
        return entry_no // self.per_file


def plan_index(
    index_num: int,
    segment_counts: list[tuple[int, int, int]],
    arrival_after_last_entry: bool,
    now_ms: int | None = None,
) -> IndexPlan:
    """The index files: `segment_counts` is (segment base, records, entries) in CommitLog order;
    `arrival_after_last_entry` says whether some record comes after the last one with an entry (or, with no
    entries at all, whether there is any record). IndexService opens a new file when a record arrives and
    the last file is full (or there is none), so the files are the full ones, the partly filled one, and an
    empty one when records arrive after the entries filled the last file exactly."""
    per_file = index_num - 1  # entry 0 is never written
    first: dict[int, int] = {}
    total = 0
    for base, _records, entries in segment_counts:
        first[base] = total
        total += entries
    files = -(-total // per_file)
    if total % per_file == 0 and arrival_after_last_entry:
        files += 1
    return IndexPlan(per_file, total, index_file_names(files, now_ms), first)


def index_file_names(count: int, now_ms: int | None = None) -> list[str]:
    """`count` names as IndexService gives them: the time now (yyyyMMddHHmmssSSS), each next one later."""
    names: list[str] = []
    name = file_name_at(time.time_ns() // 1_000_000 if now_ms is None else now_ms)
    for _ in range(count):
        names.append(name)
        name = name_after(name)
    return names


def index_entries(topics, keys, uniqs, sys_flags, phys, stamps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(key hashes, physical offsets, store times) of the index entries of records, in order: what
    IndexService's builds make of them (dispatch_rows.index_entries)."""
    phys = np.asarray(phys, dtype=np.int64)
    # the compiled loop skips a record below the last one that made keys (reput's replay rule): none is when
    # the offsets increase, as a segment's do; None back from it means a record it leaves to Python
    if engine.native is not None and len(phys) and (len(phys) == 1 or bool((np.diff(phys) > 0).all())):
        got = engine.native.index_columns(
            topics,
            phys.tolist(),
            np.asarray(stamps, dtype=np.int64).tolist(),
            np.asarray(sys_flags, dtype=np.int64).tolist(),
            uniqs,
            keys,
            -(2**63),
        )
        if got is not None:
            return (
                np.frombuffer(got[0], dtype=np.int32),
                np.frombuffer(got[1], dtype=np.int64),
                np.frombuffer(got[2], dtype=np.int64),
            )
    return index_entries_py(topics, keys, uniqs, sys_flags, phys, stamps)


def index_entries_py(topics, keys, uniqs, sys_flags, phys, stamps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """index_entries in Python (the reference)."""
    hashes, entry_phys, entry_stamps, _ = dispatch_index_entries(topics, uniqs, keys, sys_flags, phys, stamps)
    return hashes, entry_phys, entry_stamps


def write_index_file(
    path: str, hash_slot_num: int, index_num: int, hashes, phys, stamps, prev_end: tuple[int, int] | None
) -> dict:
    """One index file from its entries in order; `prev_end` is the previous file's end (physical offset,
    store time of its last entry), which a new file starts from (IndexFile's constructor)."""
    end_phy, end_ts = prev_end or (0, 0)
    f = IndexFile(
        path, hash_slot_num, index_num, writable=True, create=True, end_phy_offset=end_phy, end_timestamp=end_ts
    )
    try:
        n = len(hashes)
        if n > f.room():
            raise RebuildError(f"{path}: {n} entries do not fit an index file of {index_num - 1}")
        if n:
            f.put_entries(
                np.asarray(hashes, dtype=np.int32), np.asarray(phys, dtype=np.int64), np.asarray(stamps, dtype=np.int64)
            )
        f.flush()
        return {
            "name": f.name,
            "entries": n,
            "full": f.is_write_full(),
            "end_timestamp": f.end_timestamp,
            "end_phy_offset": f.end_phy_offset,
        }
    finally:
        f.close()


# ---------------------------------------------------------------------------- the run: lock, stage, finish
class RebuildRun:
    """The frame of a rebuild: rebuild_swap.StagedRebuild (the store's lock, the file sizes read from the
    files in place, a staging store the pieces write into: `target`), and `finish`, which makes the staged
    files consistent (checkpoint, the CommitLog's end) by opening and closing the staging store, then swaps
    them in. Leaving the block without `finish` leaves the store as it was."""

    def __init__(self, root: str, config: StoreConfig | None = None):
        self._stage = StagedRebuild(root, config)
        self.root = self._stage.root
        self.config = self._stage.config
        self.batch_topics: set[str] = set()
        self.deleted = DeletedTopics(self.root, writable=False)
        self.checkpoint = CP.Checkpoint()
        self.started = time.perf_counter()

    @property
    def target(self) -> str:
        """Where the pieces write the new files (a store root: consumequeue/, index/ ... under it)."""
        return self._stage.staging

    # -- settings for the pieces
    @property
    def settings(self) -> DecodeSettings:
        return DecodeSettings.of(self.config)

    def segments(self) -> list[tuple[str, int]]:
        """(path, base offset) of every CommitLog segment, in order."""
        return StoreLayout(self.root).commitlog_segments()

    def queue_dir_size(self, batch: bool) -> int:
        return self.config.mapped_file_size_batch_consume_queue if batch else self.config.mapped_file_size_consume_queue

    # -- the frame
    def __enter__(self) -> "RebuildRun":
        if self._stage.config.enable_consume_queue_ext:
            # reput writes each unit's ext unit (put_wrapped, in CommitLog order, with the bitmaps of the
            # filters registered at the time): not something the per-queue writers here reproduce
            raise RebuildError(f"{self.root}: {EXT_REFUSED}")
        self._stage.__enter__()
        try:
            self.config = self._stage.config  # sizes read from the files in place: the new ones keep them
            self.batch_topics = {
                t for t, cfg in TC.read_topic_configs(self.root).items() if TC.queue_type(cfg) == TC.BATCH_CQ
            }
            # a batch ConsumeQueue on disk makes its topic a batch topic for the store too
            self.batch_topics |= set(StoreLayout(self.root).topic_names(BATCH_CONSUMEQUEUE))
            self.checkpoint = self._read_checkpoint()
            self.deleted.load()
        except BaseException as e:
            self._stage.__exit__(type(e), e, e.__traceback__)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and not self._stage.committed:
            log.warning("%s: rebuild failed; the store is unchanged", self.root)
        self._stage.__exit__(exc_type, exc, tb)

    def _read_checkpoint(self) -> CP.Checkpoint:
        return CheckpointFile(StoreLayout(self.root).checkpoint, writable=False).load()

    # -- the end
    def finish(self, queues: list[QueueWritten], index_files: list[dict], progress=None) -> dict:
        """Make the staged files consistent, swap them in, and say what the store holds now. The checkpoint
        gets the times reput would have left in it (logics: the last unit's record; index: the last full
        file that another followed), then the staging store is opened and closed: recovery settles the
        CommitLog's end (a torn tail is cut) and the checkpoint's physical time and confirm offset, and
        finds nothing left to dispatch. It opens without the index dispatcher: recovery may replay records
        past the last queue unit, and the index must stay exactly as built (IndexService would index the
        last record's keys again). The staging store has no `abort` file: every record was checked and
        dispatched above, up to where the log ends, so what is left to recovery is the normal case (an
        abnormal recovery would drop index files newer than the checkpoint's index time). `progress(done,
        total)`: that recovery's progress in bytes (MessageStore.open's)."""
        from ..store.facade import MessageStore

        cp = dataclasses.replace(self.checkpoint)
        written = [q for q in queues if q.last_phys >= 0]
        if written:
            cp.logics_msg_timestamp = max(written, key=lambda q: q.last_phys).last_store_ts
        if len(index_files) >= 2:
            cp.index_msg_timestamp = max(cp.index_msg_timestamp, index_files[-2]["end_timestamp"])
        _write_checkpoint(self.target, cp)
        final = dataclasses.replace(self.config, message_index_enable=False)
        with MessageStore.open(self.target, final, progress=progress) as s:
            queues_now = s.consume_queues()
            summary = {
                "store": self.root,
                "queues": len(queues_now),
                "messages": sum(max(cq.max_offset - max(cq.min_offset, 0), 0) for cq in queues_now),
                "indexFiles": s.index_file_count(),
                "commitLogMaxOffset": s.max_physical_offset,
            }
        self._stage.commit()
        return {**summary, "seconds": round(time.perf_counter() - self.started, 3)}


def _write_checkpoint(root: str, cp: CP.Checkpoint) -> None:
    CheckpointFile(StoreLayout(root).checkpoint, writable=True, data=cp).write()


# ---------------------------------------------------------------------------- everything in this process
def units_by_queue(cols: dict) -> dict[tuple[str, int], list[int]]:
    """The rows of decoded columns (a segment's, or a chunk of them) that get a queue unit, by (topic,
    queue id), in order: the rows reput's ConsumeQueue dispatcher writes (dispatch_rows.unit_rows)."""
    return unit_rows(cols["topic"], cols["queue_id"].tolist(), cols["sys_flag"])


def queue_groups(segments: list[Segment]) -> dict[tuple[str, int], dict]:
    """The units of every queue (records that get one), as columns, across segments."""
    rows: dict[tuple[str, int], list[tuple[int, np.ndarray]]] = {}
    for si, s in enumerate(segments):
        c = s.columns
        if not s.records:
            continue
        for key, members in units_by_queue(c).items():
            rows.setdefault(key, []).extend((si, i) for i in members)
    out = {}
    for key, members in rows.items():
        out[key] = {
            k: np.array([segments[si].columns[k][i] for si, i in members])
            for k in ("phys", "size", "tags_code", "queue_offset", "store_ts", "base", "batch_size")
        }
    return out


def rebuild_serial(root: str, config: StoreConfig | None = None) -> dict:
    """The whole rebuild in this process, piece by piece (what the Spark job does in parallel)."""
    with RebuildRun(root, config) as run:
        settings = run.settings
        segments = [decode_segment(p, b, settings) for p, b in run.segments()]
        last = check_segments([s.summary() for s in segments]) if segments else -1
        segments = segments[: last + 1]
        queues = [
            write_queue(
                run.target,
                t,
                q,
                t in run.batch_topics,
                run.queue_dir_size(t in run.batch_topics),
                cols,
                run.deleted.below(t),
            )
            for (t, q), cols in sorted(queue_groups(segments).items())
        ]
        files = []
        if settings.index_enabled:
            files = _write_index_serial(run, segments)
        summary = run.finish(queues, files)
    return summary


def arrival_after_last_entry(segments: list[SegmentSummary]) -> bool:
    """Does a record come after the last one with an index entry (with no entries: is there any record)?"""
    last_entry = max((s.last_entry_phys for s in segments), default=-1)
    return max((s.last_record_phys for s in segments), default=-1) > last_entry


def last_entry(segments: list[SegmentSummary]) -> tuple[int, int] | None:
    """(physical offset, store time) of the last index entry, None without entries."""
    found = [s for s in segments if s.entries]
    return (found[-1].last_entry_phys, found[-1].last_entry_ts) if found else None


def _write_index_serial(run: RebuildRun, segments: list[Segment]) -> list[dict]:
    cfg = run.config
    summaries = [s.summary() for s in segments]
    plan = plan_index(
        cfg.max_index_num, [(s.base, s.records, s.entries) for s in summaries], arrival_after_last_entry(summaries)
    )
    parts = [(s.entry_hash, s.entry_phys, s.entry_ts) for s in segments if s.records]
    hashes = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
    phys = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    stamps = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int64)
    directory = StoreLayout(run.target).index
    os.makedirs(directory, exist_ok=True)
    out = []
    for i, name in enumerate(plan.names):
        a, b = i * plan.per_file, min((i + 1) * plan.per_file, plan.total_entries)
        prev = (int(phys[a - 1]), int(stamps[a - 1])) if a > 0 else None
        out.append(
            write_index_file(
                os.path.join(directory, name),
                cfg.max_hash_slot_num,
                cfg.max_index_num,
                hashes[a:b],
                phys[a:b],
                stamps[a:b],
                prev,
            )
        )
    return out
