"""What the rebuild job's decode tasks hand to its write tasks, in files under the staging store, all
numbers: per CommitLog segment, its index entries, and its queue units by queue in one file per queue
group (a queue's group is a stable hash of its name: each write task reads only its group's files).

Files rather than a Spark shuffle: PySpark's groupByKey pickles every chunk into the JVM and back out to
other Python workers, which cost seconds even on a small log (bench/README.md, bench_spark rebuild rows),
and every executor already sees the staging store, since the new queue and index files are written there.
A retried task rewrites its file whole (written aside, then renamed), so a reader never sees half of one.
"""

from __future__ import annotations

import json
import os
import zlib

import numpy as np

from ..maintenance import rebuild as RB
from ..formats import record as R

PARTS_DIR = ".spark-parts"  # under the staging store; removed before the staged files are finished
UNIT_COLUMNS = ("phys", "size", "tags_code", "queue_offset", "store_ts", "base", "batch_size")


def entries_path(target: str, base: int) -> str:
    return os.path.join(target, PARTS_DIR, f"{base:020d}.entries")


def units_path(target: str, base: int, group: int) -> str:
    return os.path.join(target, PARTS_DIR, f"{base:020d}.units{group}")


def group_of(key: tuple[str, int], groups: int) -> int:
    """The write task a queue goes to: the same in every process (str's hash() is salted per process)."""
    topic, queue_id = key
    return zlib.crc32(f"{queue_id}@{topic}".encode("utf-8", "surrogatepass")) % groups


def write_parts(target: str, seg: RB.Segment, groups: int) -> dict[tuple[str, int], int]:
    """Leave `seg`'s index entries and its units (records that get one, by (topic, queue id), CommitLog
    order within a queue, in `groups` files) under `target`; returns the number of units of each queue."""
    c = seg.columns
    by_queue = unit_rows(c) if seg.records else {}
    _save(entries_path(target, seg.base), {"e_hash": seg.entry_hash, "e_phys": seg.entry_phys, "e_ts": seg.entry_ts})
    for g in range(groups):
        keys = sorted(k for k in by_queue if group_of(k, groups) == g)
        rows = [by_queue[k] for k in keys]
        order = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        arrays = {k: np.asarray(c[k])[order] if seg.records else np.zeros(0, np.int64) for k in UNIT_COLUMNS}
        arrays["q_ids"] = np.array([k[1] for k in keys], dtype=np.int64)
        arrays["q_starts"] = np.cumsum([0] + [len(r) for r in rows], dtype=np.int64)
        _save(units_path(target, seg.base, g), arrays, {"topics": [k[0] for k in keys]})
    return {k: len(r) for k, r in by_queue.items()}


def unit_rows(cols: dict) -> dict[tuple[str, int], np.ndarray]:
    """rebuild.units_by_queue (the reference) by numpy: the rows of a segment's columns that get a queue
    unit, by (topic, queue id), each queue's rows in order (int64 arrays). The Python loop of the reference
    took a third of a decode task."""
    topics = cols["topic"]
    names = list(dict.fromkeys(topics))  # the distinct topics, in order of appearance (a C loop, as the next)
    topic_no = np.fromiter(map({t: i for i, t in enumerate(names)}.__getitem__, topics), np.int64, len(topics))
    rows = np.flatnonzero(R.gets_queue_unit(np.asarray(cols["sys_flag"], dtype=np.int64)))
    if not len(rows):
        return {}
    # one int64 per (topic, queue id): queue ids are int32, so the topic's number goes above them
    key = (topic_no[rows] << 32) | (np.asarray(cols["queue_id"], dtype=np.int64)[rows] & 0xFFFFFFFF)
    order = np.argsort(key, kind="stable")  # stable: each queue's rows stay in CommitLog order
    key, rows = key[order], rows[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    ends = np.r_[starts[1:], len(key)]
    queue_ids = np.asarray(cols["queue_id"], dtype=np.int64)
    out = {}
    for a, b in zip(starts.tolist(), ends.tolist()):
        first = int(rows[a])
        out[(names[int(key[a] >> 32)], int(queue_ids[first]))] = rows[a:b]
    return out


def _save(path: str, arrays: dict, meta: dict | None = None) -> None:
    """Arrays (and a little JSON) in one file: an 8-byte header length, a JSON header naming each array's
    dtype and length, then their bytes one after the other. np.savez's zip (a CRC per member, a header
    parsed per member on load) was a third of the decode and write tasks."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    parts = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    header = json.dumps({"arrays": [[k, v.dtype.str, len(v)] for k, v in parts.items()], "meta": meta or {}})
    raw = header.encode("utf-8")
    aside = f"{path}.{os.getpid()}.tmp"
    with open(aside, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        for v in parts.values():
            f.write(memoryview(v).cast("B"))
    os.replace(aside, path)


def _load(path: str) -> tuple[dict[str, np.ndarray], dict]:
    """What _save wrote: the arrays (views of the file's bytes, read at once) and the JSON."""
    with open(path, "rb") as f:
        data = f.read()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size].decode("utf-8"))
    at = 8 + size
    arrays = {}
    for name, dtype, count in header["arrays"]:
        kind = np.dtype(dtype)
        arrays[name] = np.frombuffer(data, dtype=kind, count=count, offset=at)
        at += kind.itemsize * count
    if at != len(data):
        raise RB.RebuildError(f"{path}: {len(data)} bytes, its header describes {at}")
    return arrays, header["meta"]


def read_entries(target: str, base: int, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entries a..b-1 of a segment (key hash, physical offset, store time)."""
    z, _ = _load(entries_path(target, base))
    return z["e_hash"][a:b], z["e_phys"][a:b], z["e_ts"][a:b]


class GroupUnits:
    """One segment's units of one queue group, read back."""

    def __init__(self, path: str):
        self._z, meta = _load(path)
        starts = self._z["q_starts"].tolist()
        ids = self._z["q_ids"].tolist()
        self.queues = {(t, q): (starts[i], starts[i + 1]) for i, (t, q) in enumerate(zip(meta["topics"], ids))}

    def units(self, key: tuple[str, int]) -> dict[str, np.ndarray]:
        a, b = self.queues[key]
        return {k: self._z[k][a:b] for k in UNIT_COLUMNS}
