"""What the rebuild job's decode tasks hand to its write tasks: one file per CommitLog segment under the
staging store, holding the segment's queue units grouped by queue and its index entries, all numbers.

Files rather than a Spark shuffle: PySpark's groupByKey pickles every chunk into the JVM and back out to
other Python workers, which cost seconds even on a small log (bench/README.md, bench_spark rebuild rows),
and every executor already sees the staging store, since the new queue and index files are written there.
A retried task rewrites its file whole (written aside, then renamed), so a reader never sees half of one.
"""

from __future__ import annotations

import json
import os

import numpy as np

from .. import rebuild as RB

PARTS_DIR = ".spark-parts"  # under the staging store; removed before the staged files are finished
UNIT_COLUMNS = ("phys", "size", "tags_code", "queue_offset", "store_ts", "base", "batch_size")


def parts_path(target: str, base: int) -> str:
    return os.path.join(target, PARTS_DIR, f"{base:020d}.npz")


def write_parts(path: str, seg: RB.Segment) -> dict[tuple[str, int], int]:
    """Leave `seg`'s units (records that get one, by (topic, queue id), CommitLog order within a queue)
    and index entries at `path`; returns the number of units of each queue."""
    c = seg.columns
    groups = RB.units_by_queue(c) if seg.records else {}
    keys = sorted(groups)
    rows = [np.asarray(groups[k], dtype=np.int64) for k in keys]
    order = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    arrays = {k: np.asarray(c[k])[order] if seg.records else np.zeros(0, np.int64) for k in UNIT_COLUMNS}
    # topic names as JSON bytes: numpy's fixed-width strings would drop a name's trailing NULs
    arrays["q_topics"] = np.frombuffer(json.dumps([k[0] for k in keys]).encode("utf-8"), dtype=np.uint8)
    arrays["q_ids"] = np.array([k[1] for k in keys], dtype=np.int64)
    arrays["q_starts"] = np.cumsum([0] + [len(r) for r in rows], dtype=np.int64)
    arrays["e_hash"], arrays["e_phys"], arrays["e_ts"] = seg.entry_hash, seg.entry_phys, seg.entry_ts
    os.makedirs(os.path.dirname(path), exist_ok=True)
    aside = f"{path}.{os.getpid()}.tmp"
    with open(aside, "wb") as f:
        np.savez(f, **arrays)
    os.replace(aside, path)
    return {k: len(r) for k, r in zip(keys, rows)}


class SegmentParts:
    """One segment's file, read back: units by queue, index entries by number."""

    def __init__(self, path: str):
        with np.load(path, allow_pickle=False) as z:
            self._z = {k: z[k] for k in z.files}
        topics = json.loads(self._z["q_topics"].tobytes().decode("utf-8"))
        starts = self._z["q_starts"].tolist()
        self.queues = {
            (t, q): (starts[i], starts[i + 1]) for i, (t, q) in enumerate(zip(topics, self._z["q_ids"].tolist()))
        }

    def units(self, key: tuple[str, int]) -> dict[str, np.ndarray] | None:
        span = self.queues.get(key)
        if span is None:
            return None
        a, b = span
        return {k: self._z[k][a:b] for k in UNIT_COLUMNS}

    def entries(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Entries a..b-1 of the segment (key hash, physical offset, store time)."""
        return self._z["e_hash"][a:b], self._z["e_phys"][a:b], self._z["e_ts"][a:b]
