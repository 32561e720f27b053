"""The rebuild as a Spark job: ConsumeQueues, batch ConsumeQueues and index files from the CommitLog in
parallel (issue #6; apache/rocketmq #5184, #7355). The pieces are rocketstore.rebuild's; this module only
orchestrates them, in two Spark jobs:

1. one task per CommitLog segment decodes it (CRC checked, dispatch rules, index keys hashed) and leaves
   its queue units by queue and its index entries in a file under the staging store (rebuild_parts);
   each task reports how its segment ends and its counts, and the driver checks that only the last one
   may end before its BLANK filler, then plans the index files from the counts;
2. one task per group of queues writes them (reading their units from every segment's file), one task per
   index file writes it (reading the entries it holds, numbered across the log, and the one before);
3. the driver makes the store consistent (checkpoint, the CommitLog's end) and reports.

The store's lock is held throughout; the stages write into a staging store that is swapped in only once
complete (rocketstore.maintenance.rebuild_swap), so a failure or a kill at any instant leaves the old files or the new
ones. On a cluster the store must be at the same path on every executor (a shared filesystem): the tasks
write the new files there, and the decode tasks' files reach the write tasks the same way.
"""

from __future__ import annotations

import os
import shutil

import numpy as np

from ..maintenance import rebuild as RB
from .options import store_config
from .rebuild_parts import PARTS_DIR, GroupUnits, group_of, read_entries, units_path, write_parts


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
        # as many tasks per job as the session has cores, no more: a Python task costs ~0.1 s before it does
        # anything, which was most of a 16 MB segment's decode when each segment was a task of its own
        cores = max(sc.defaultParallelism, 1)
        groups = cores  # queue groups: a group's queues are written by one task
        decoded = _decode(sc, run.target, segments, run.settings, groups, cores)
        summaries = [d[0] for d in decoded]
        last = RB.check_segments(summaries)
        summaries, counts = summaries[: last + 1], [d[1] for d in decoded[: last + 1]]
        tell("queues", records=sum(s.records for s in summaries))
        try:
            queues, files, entries = _write_files(sc, run, summaries, counts, groups, cores, tell)
        finally:
            shutil.rmtree(os.path.join(run.target, PARTS_DIR), ignore_errors=True)
        summary = run.finish(queues, files, finishing)
    return {
        **summary,
        "segments": len(summaries),
        "records": sum(s.records for s in summaries),
        "indexEntries": entries,
    }


# ---------------------------------------------------------------------------- 1. decode
def _decode(
    sc, target: str, segments: list[tuple[str, int]], settings: RB.DecodeSettings, groups: int, cores: int
) -> list:
    """Each segment decoded, its units and entries left in its parts files, by `cores` tasks (a run of
    consecutive segments each). Returns, in CommitLog order, (summary, units per queue) of every segment."""

    def decode(item):
        path, base = item
        seg = RB.decode_segment(path, base, settings)
        return seg.summary(), write_parts(target, seg, groups)

    return sorted(sc.parallelize(segments, min(len(segments), cores)).map(decode).collect(), key=lambda d: d[0].base)


# ---------------------------------------------------------------------------- 2. queues, index files
def _write_files(
    sc,
    run: RB.RebuildRun,
    summaries: list[RB.SegmentSummary],
    counts: list[dict],
    groups: int,
    cores: int,
    tell,
) -> tuple[list[RB.QueueWritten], list[dict], int]:
    """The queue groups and the index files in one job (on a small log, each Spark job costs more than the
    writing) of `cores` tasks: Spark slices the work list into consecutive runs, the index files first
    (each about as much work as a queue group or two: they hold every key of the log)."""
    cfg = run.config
    target = run.target
    queues_in: dict[int, dict[tuple[str, int], list[int]]] = {}  # group -> queue -> segments with its units
    for s, c in zip(summaries, counts):
        for key in c:
            queues_in.setdefault(group_of(key, groups), {}).setdefault(key, []).append(s.base)
    work = []
    plan = None
    if cfg.message_index_enable:
        plan = RB.plan_index(
            cfg.max_index_num,
            [(s.base, s.records, s.entries) for s in summaries],
            RB.arrival_after_last_entry(summaries),
        )
        tell("index", files=len(plan.names), entries=plan.total_entries)
        os.makedirs(os.path.join(target, "index"), exist_ok=True)
        work += [("i", f) for f in range(plan.files_with_entries)]
    work += [("q", g) for g in sorted(queues_in)]
    write_queues = _queue_writer(
        target,
        queues_in,
        frozenset(run.batch_topics),
        run.queue_dir_size(False),
        run.queue_dir_size(True),
        dict(run.deleted.below_offset),
    )
    write_index = _index_writer(target, summaries, plan, cfg.max_hash_slot_num, cfg.max_index_num) if plan else None

    def write(item):
        kind, what = item
        return kind, (write_queues(what) if kind == "q" else write_index(what))

    done = sc.parallelize(work, min(len(work), cores)).map(write).collect() if work else []
    queues = [q for kind, got in done if kind == "q" for q in got]
    if plan is None:
        return queues, [], 0
    written = dict(got for kind, got in done if kind == "i")
    # the empty file a record opens after the entries filled the last one exactly: written here
    for i in range(plan.files_with_entries, len(plan.names)):
        written[i] = RB.write_index_file(
            os.path.join(target, "index", plan.names[i]),
            cfg.max_hash_slot_num,
            cfg.max_index_num,
            [],
            [],
            [],
            RB.last_entry(summaries),
        )
    return queues, [written[i] for i in range(len(plan.names))], plan.total_entries


def _queue_writer(
    target: str, queues_in: dict, batch_topics: frozenset, cq_size: int, bcq_size: int, deleted: dict[str, int]
):
    """`deleted`: topic -> the CommitLog offset its deletion left (deleted_topics.py), whose units below it
    are left out."""

    def write(group):
        queues = queues_in[group]
        bases = sorted({b for segs in queues.values() for b in segs})
        chunks: dict[tuple[str, int], list[dict]] = {k: [] for k in queues}
        for base in bases:  # CommitLog order: a queue's units in order
            parts = GroupUnits(units_path(target, base, group))
            for key in parts.queues:
                chunks[key].append(parts.units(key))
        done = []
        for (topic, queue_id), got in sorted(chunks.items()):
            cols = {k: np.concatenate([ch[k] for ch in got]) for k in got[0]}
            batch = topic in batch_topics
            size = bcq_size if batch else cq_size
            done.append(RB.write_queue(target, topic, queue_id, batch, size, cols, deleted.get(topic, -1)))
        return done

    return write


def _index_writer(target: str, summaries: list[RB.SegmentSummary], plan: RB.IndexPlan, slots: int, index_num: int):
    """Index file f holds the log's entries f * per_file .. (f + 1) * per_file - 1 and starts from the
    entry before them (IndexFile's constructor takes the previous file's end)."""
    spans = [(s.base, plan.segment_first_entry[s.base], s.entries) for s in summaries if s.entries]

    def write(f):
        lo, hi = f * plan.per_file, min((f + 1) * plan.per_file, plan.total_entries)
        want = max(lo - 1, 0)
        got = []
        for base, first, n in spans:
            a, b = max(want, first), min(hi, first + n)
            if a < b:
                got.append(read_entries(target, base, a - first, b - first))
        hashes, phys, stamps = (np.concatenate([g[i] for g in got]) for i in range(3))
        if len(hashes) != hi - want:
            raise RB.RebuildError(f"index file #{f}: {len(hashes)} entries read back, expected {hi - want}")
        prev_end = (int(phys[0]), int(stamps[0])) if lo > 0 else None
        skip = 1 if lo > 0 else 0
        path = os.path.join(target, "index", plan.names[f])
        return f, RB.write_index_file(path, slots, index_num, hashes[skip:], phys[skip:], stamps[skip:], prev_end)

    return write
