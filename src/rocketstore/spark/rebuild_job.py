"""The rebuild as a Spark job: ConsumeQueues, batch ConsumeQueues and index files from the CommitLog in
parallel (issue #6; apache/rocketmq #5184, #7355). The pieces are rocketstore.rebuild's; this module only
orchestrates them:

1. one task per CommitLog segment decodes it into dispatch columns (numpy chunks); the result is persisted,
   so the CommitLog is read once; each segment also reports how it ends, and the driver checks that only
   the last one may end before its BLANK filler;
2. records that get a unit, grouped by (topic, queueId): one task writes each queue;
3. index entries numbered across the log from per-segment counts (the driver's plan), grouped by the file
   they fall in: one task writes each index file (2 and 3 share one shuffle, so one job);
4. the driver makes the store consistent (checkpoint, the CommitLog's end) and reports.

The store's lock is held throughout; the stages write into a staging store that is swapped in only once
complete (rocketstore.rebuild_swap), so a failure or a kill at any instant leaves the old files or the new
ones.

It runs on RDDs of numpy column chunks rather than DataFrames: mapInArrow / applyInArrow need pandas,
which rocketstore does not depend on, and numpy chunks pickle compactly anyway.
"""

from __future__ import annotations

import os

import numpy as np

from .. import rebuild as RB
from .options import store_config

ROWS, END = "rows", "end"
CHUNK = 65536  # records per decoded chunk: bounded pickles, however big the segment
QUEUE_COLUMNS = ("phys", "size", "tags_code", "queue_offset", "store_ts", "base", "batch_size")
ENTRY_COLUMNS = ("g", "hash", "phy", "ts", "prev")


def rebuild(store, spark, progress=None, **options) -> dict:
    """Rebuild `store`'s ConsumeQueues, batch ConsumeQueues and index files from its CommitLog with `spark`.
    Options: the store's settings (brokerConf, MessageStoreConfig names), as the rocketstore formats take
    them. A config that enables the ConsumeQueue extension (enableConsumeQueueExt) is refused (RebuildError):
    this job does not write ext units; the local engine (recovery's dispatch) does. Returns a summary: store, queues, messages, indexFiles, commitLogMaxOffset, seconds, and the
    job's own counts (segments, records, indexEntries).

    `progress(phase, **counts)`, when given, is told each phase as it starts, in the driver: "planning"
    (under the store's lock), "decoding" (segments=), "queues" (records=: those decoded), "index" (files=,
    entries=), then "finishing" (done=, total=: bytes of the staging store's recovery, repeatedly) before
    the new files are swapped in."""
    tell = progress or (lambda phase, **counts: None)
    from pyspark import StorageLevel

    root = os.path.abspath(os.fspath(store))
    if not os.path.isdir(root):
        raise RB.RebuildError(f"{root}: no store directory here")
    # file sizes left open are read by RebuildRun, under the lock, from the files in place
    config = store_config(options)
    if config.enable_consume_queue_ext:  # (RebuildRun refuses too; here before any Spark work)
        raise RB.RebuildError(f"{root}: {RB.EXT_REFUSED}")
    sc = spark.sparkContext
    with RB.RebuildRun(root, config) as run:
        tell("planning")
        segments = run.segments()

        def finishing(done, total):
            tell("finishing", done=done, total=total)

        if not segments:
            return {**run.finish([], [], finishing), "segments": 0, "records": 0, "indexEntries": 0}
        tell("decoding", segments=len(segments))
        decoded = _decode(sc, segments, run.settings).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            summaries = _segment_summaries(decoded)
            last = RB.check_segments(summaries)
            summaries = summaries[: last + 1]
            parts = max(sc.defaultParallelism, 1) * 2
            tell("queues", records=sum(s.records for s in summaries))
            queues, files, entries = _write_files(decoded, run, summaries, parts, tell)
        finally:
            decoded.unpersist()
        summary = run.finish(queues, files, finishing)
    return {
        **summary,
        "segments": len(summaries),
        "records": sum(s.records for s in summaries),
        "indexEntries": entries,
    }


# ---------------------------------------------------------------------------- 1. decode
def _decode(sc, segments: list[tuple[str, int]], settings: RB.DecodeSettings):
    """One partition per segment, each decoded by one task into (ROWS, segment, columns) chunks and one
    (END, segment, summary)."""
    return sc.parallelize(segments, len(segments)).mapPartitions(_decoder(settings))


def _decoder(settings: RB.DecodeSettings):
    def decode(paths):
        for path, base in paths:
            seg = RB.decode_segment(path, base, settings)
            c = seg.columns
            for a in range(0, seg.records, CHUNK):
                yield ROWS, base, {k: v[a : a + CHUNK] for k, v in c.items()}
            yield END, base, seg.summary()

    return decode


def _segment_summaries(decoded) -> list[RB.SegmentSummary]:
    return sorted(decoded.filter(lambda x: x[0] == END).map(lambda x: x[2]).collect(), key=lambda s: s.base)


# ---------------------------------------------------------------------------- 2. and 3. queues, index files
def _write_files(
    decoded, run: RB.RebuildRun, summaries: list[RB.SegmentSummary], parts: int, tell
) -> tuple[list[RB.QueueWritten], list[dict], int]:
    """The queues and the index files in one shuffle (one job: on a small log, each Spark job costs more
    than the writing), keyed ("q", (topic, queueId)) and ("i", file number)."""
    cfg = run.config
    plan, explode, directory = None, None, os.path.join(run.target, "index")
    if cfg.message_index_enable:
        plan = RB.plan_index(
            cfg.max_index_num,
            [(s.base, s.records, s.entries) for s in summaries],
            RB.arrival_after_last_entry(summaries),
        )
        tell("index", files=len(plan.names), entries=plan.total_entries)
        os.makedirs(directory, exist_ok=True)
        if plan.files_with_entries:
            explode = _entry_exploder(plan.segment_first_entry, plan.per_file, plan.files_with_entries)
    queue_writer = _queue_writer(
        run.target, frozenset(run.batch_topics), run.queue_dir_size(False), run.queue_dir_size(True)
    )
    index_writer = (
        _index_writer(directory, plan.names, cfg.max_hash_slot_num, cfg.max_index_num) if explode is not None else None
    )

    def keyed(item):
        for key, cols in _units_by_queue(item):
            yield ("q", key), cols
        if explode is not None:
            for f, cols in explode(item):
                yield ("i", f), cols

    def write(group):
        (kind, key), chunks = group
        return kind, (queue_writer if kind == "q" else index_writer)((key, chunks))

    done = decoded.filter(lambda x: x[0] == ROWS).flatMap(keyed).groupByKey(parts).map(write).collect()
    queues = [w for kind, w in done if kind == "q"]
    if plan is None:
        return queues, [], 0
    written = dict(w for kind, w in done if kind == "i")
    if sorted(written) != list(range(plan.files_with_entries)):
        raise RB.RebuildError(
            f"the index stage wrote files {sorted(written)}, expected 0..{plan.files_with_entries - 1}"
        )
    # the empty file a record opens after the entries filled the last one exactly: written here
    for i in range(plan.files_with_entries, len(plan.names)):
        written[i] = RB.write_index_file(
            os.path.join(directory, plan.names[i]),
            cfg.max_hash_slot_num,
            cfg.max_index_num,
            [],
            [],
            [],
            RB.last_entry(summaries),
        )
    return queues, [written[i] for i in range(len(plan.names))], plan.total_entries


def _units_by_queue(item):
    """A chunk's records that get a unit, split by (topic, queueId)."""
    _, _, c = item
    for key, idx in RB.units_by_queue(c).items():
        idx = np.array(idx, dtype=np.int64)
        yield key, {k: c[k][idx] for k in QUEUE_COLUMNS}


def _queue_writer(root: str, batch_topics: frozenset, cq_size: int, bcq_size: int):
    def write(group):
        (topic, queue_id), chunks = group
        chunks = list(chunks)
        cols = {k: np.concatenate([ch[k] for ch in chunks]) for k in QUEUE_COLUMNS}
        batch = topic in batch_topics
        return RB.write_queue(root, topic, queue_id, batch, bcq_size if batch else cq_size, cols)

    return write


def _entry_exploder(first_entry: dict, per_file: int, files: int):
    """A chunk's records -> their index entries with global numbers g, by file (g // per_file). The last
    entry of each file goes to the next file too (prev=True): a new file starts where the previous ended."""

    def explode(item):
        _, base, c = item
        has = np.flatnonzero(c["entries"])
        if not len(has):
            return
        hashes, phys, stamps = RB.index_entries(
            [c["topic"][i] for i in has],
            [c["keys"][i] for i in has],
            [c["uniq"][i] for i in has],
            c["sys_flag"][has].tolist(),
            c["phys"][has],
            c["store_ts"][has],
        )
        counts = c["entries"][has].astype(np.int64)
        if len(hashes) != counts.sum():
            raise RB.RebuildError(f"segment {base}: {len(hashes)} index keys, the decode counted {counts.sum()}")
        record_first = first_entry[base] + c["entry_no"][has].astype(np.int64)
        g = np.repeat(record_first, counts) + (
            np.arange(len(hashes), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        )
        file = g // per_file
        carry = np.flatnonzero(((g + 1) % per_file == 0) & (file + 1 < files))
        for f in np.unique(file).tolist():
            sel = np.flatnonzero(file == f)
            yield (
                f,
                {
                    "g": g[sel],
                    "hash": hashes[sel],
                    "phy": phys[sel],
                    "ts": stamps[sel],
                    "prev": np.zeros(len(sel), dtype=bool),
                },
            )
        for i in carry.tolist():
            yield (
                int(file[i]) + 1,
                {
                    "g": g[i : i + 1],
                    "hash": hashes[i : i + 1],
                    "phy": phys[i : i + 1],
                    "ts": stamps[i : i + 1],
                    "prev": np.ones(1, dtype=bool),
                },
            )

    return explode


def _index_writer(directory: str, names: list[str], hash_slot_num: int, index_num: int):
    def write(group):
        file, chunks = group
        chunks = list(chunks)
        cols = {k: np.concatenate([ch[k] for ch in chunks]) for k in ENTRY_COLUMNS}
        prev = cols["prev"]
        mine = np.flatnonzero(~prev)
        mine = mine[np.argsort(cols["g"][mine], kind="stable")]
        prev_end = (int(cols["phy"][prev][0]), int(cols["ts"][prev][0])) if prev.any() else None
        if file > 0 and prev_end is None:
            raise RB.RebuildError(f"index file #{file}: the previous file's last entry is missing")
        return file, RB.write_index_file(
            os.path.join(directory, names[file]),
            hash_slot_num,
            index_num,
            cols["hash"][mine],
            cols["phy"][mine],
            cols["ts"][mine],
            prev_end,
        )

    return write
