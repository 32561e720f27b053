"""Reading one queue's offset range in an executor: ConsumeQueue units -> CommitLog records -> Arrow.

Everything here runs from what a partition carries (the store's path and file sizes), opening the files
read-only itself: no MessageStore, no recovery, so a partition costs only the bytes it reads. Units come
from the ConsumeQueue files by numpy, tags are filtered on their tagsCode before the CommitLog is touched,
and the records of each CommitLog segment are turned into a RecordBatch a run at a time (record_batch).
Batch ConsumeQueue topics (inner batches) go through the store's own get, which unpacks them.
"""

from __future__ import annotations

import logging
import mmap
import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..formats import cq as CQ
from ..files import layout as L
from ..formats import cq_ext as X
from . import columns as C
from . import record_batch as RB
from .errors import DataLossError
from ..engine import from_records

log = logging.getLogger("rocketstore.spark")


@dataclass
class QueueRange:
    topic: str
    queue_id: int
    start: int  # first queue offset
    end: int  # one past the last
    batch_cq: bool = False

    @property
    def count(self) -> int:
        return max(self.end - self.start, 0)


@dataclass
class ReadSpec:
    """What every partition of a query shares."""

    root: str
    commitlog_size: int
    cq_size: int
    options: dict = field(default_factory=dict)  # the store's settings (options), for the batch-CQ path
    tags: frozenset | None = None  # exact tags wanted (None: all)
    tag_codes: tuple | None = None  # their hash codes, for the ConsumeQueue-side filter
    batch_rows: int = 8192
    fail_on_data_loss: bool = True
    sql: str | None = None  # a SQL92 filter on properties (RocketMQ's grammar)
    schema: pa.Schema | None = None  # the batches' columns when the query named some (spark.columns), else all


def _units(spec: ReadSpec, r: QueueRange) -> np.ndarray:
    """The ConsumeQueue units of [start, end), read from the files (a copy: files may be cleaned meanwhile)."""
    per_file = spec.cq_size // CQ.UNIT_SIZE
    directory = L.StoreLayout(spec.root).queue_dir(r.topic, r.queue_id)
    parts = []
    at = r.start
    while at < r.end:
        first = at - at % per_file
        path = os.path.join(directory, L.segment_name(first * CQ.UNIT_SIZE))
        n = min(r.end, first + per_file) - at
        try:
            arr = np.fromfile(path, dtype=CQ.DTYPE, count=n, offset=(at - first) * CQ.UNIT_SIZE)
        except FileNotFoundError:
            arr = None
        if arr is None or len(arr) < n:
            _lost(spec, f"ConsumeQueue file {path} for offsets {at}..{at + n - 1} of {r.topic}-{r.queue_id}")
            arr = np.empty(0, dtype=CQ.DTYPE)
        parts.append(arr)
        at += n
    return np.concatenate(parts) if parts else np.empty(0, dtype=CQ.DTYPE)


def _lost(spec: ReadSpec, what: str) -> None:
    message = (
        f"{what} is gone (cleaned as expired after the query was planned?); set failOnDataLoss=false "
        f"to skip lost offsets"
    )
    if spec.fail_on_data_loss:
        raise DataLossError(message)
    log.warning("skipping: %s", message.split(";")[0])


class _Segments:
    """CommitLog segments mapped read-only, one at a time (a partition walks the log forward)."""

    def __init__(self, spec: ReadSpec):
        self.spec = spec
        self.start = -1
        self.buf = None

    def get(self, start: int):
        if start != self.start:
            self.close()
            path = L.StoreLayout(self.spec.root).commitlog_segment(start)
            try:
                with open(path, "rb") as fh:
                    self.buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except FileNotFoundError:
                return None
            self.start = start
        return self.buf

    def close(self) -> None:
        if self.buf is not None:
            self.buf.close()
        self.buf, self.start = None, -1


def read_range(spec: ReadSpec, r: QueueRange):
    """Yield RecordBatches of the messages of one queue range, in queue order."""
    if r.batch_cq:
        yield from _read_batch_cq(spec, r)
        return
    units = _units(spec, r)
    offsets = np.arange(r.start, r.start + len(units), dtype=np.int64)
    keep = (units["pos"] >= 0) & (units["size"] > 0) & (units["size"] < 0x7FFFFFFF)  # not a pre-blank
    if spec.tag_codes is not None:
        tags = units["tags"].astype(np.int64)
        ext = tags <= X.MAX_ADDR  # the ConsumeQueue ext: the slot holds an ext address, not a tags hash
        if ext.any():
            tags = _ext_tags(spec, r, tags, ext)
        # what still is an address (its ext unit unreadable) goes on to the exact tag check, as RocketMQ lets a
        # unit without a valid tagsCode through the ConsumeQueue-side filter
        keep &= np.isin(tags, np.array(spec.tag_codes, dtype=np.int64)) | (tags <= X.MAX_ADDR)
    units, offsets = units[keep], offsets[keep]
    phys = units["pos"].astype(np.int64)
    sizes = units["size"].astype(np.int64)
    seg = phys - phys % spec.commitlog_size
    segments = _Segments(spec)
    built = C.needed(spec.schema, spec.tags is not None, spec.sql is not None)
    try:
        for lo in range(0, len(units), spec.batch_rows):
            hi = min(lo + spec.batch_rows, len(units))
            for start, a, b in _runs(seg, lo, hi):
                buf = segments.get(start)
                if buf is None or phys[b - 1] - start + sizes[b - 1] > len(buf):
                    _lost(
                        spec,
                        f"CommitLog file {start:020d} for {r.topic}-{r.queue_id} offsets "
                        f"{offsets[a]}..{offsets[b - 1]}",
                    )
                    continue
                batch = from_records(buf, phys[a:b] - start, sizes[a:b], built)
                yield C.shaped(_sql_filter(spec, _exact_tags(spec, batch)), spec.schema)
    finally:
        segments.close()


def _ext_tags(spec: ReadSpec, r: QueueRange, tags: np.ndarray, ext: np.ndarray) -> np.ndarray:
    """`tags` with each ext address (where `ext`) replaced by the tagsCode of its ext unit, read from the
    queue's consumequeue_ext/{topic}/{queueId}/ files (formats.cq_ext layout: size 2 | tagsCode 8 | ...).
    An address whose unit cannot be read (file gone, past the file, no unit there) is left as it is."""
    directory = L.StoreLayout(spec.root).ext_dir(r.topic, r.queue_id)
    names = L.segment_names(directory)
    if not names:
        log.warning("no ConsumeQueue ext files in %s: ext-addressed units go to the exact tag check", directory)
        return tags
    if not names:
        return tags
    out = tags.copy()
    where = np.flatnonzero(ext)
    real = (tags[where].view(np.uint64) - np.uint64(1 << 63)).view(np.int64)  # cq_ext.undecorate
    starts = np.array([int(n) for n in names], dtype=np.int64)
    file_of = np.searchsorted(starts, real, side="right") - 1
    for f in np.unique(file_of).tolist():
        if f < 0:
            continue
        sel = np.flatnonzero(file_of == f)
        pos = real[sel] - starts[f]
        path = os.path.join(directory, names[f])
        try:
            with open(path, "rb") as fh:
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (FileNotFoundError, ValueError):  # gone meanwhile, or empty
            continue
        try:
            raw = np.frombuffer(mm, dtype=np.uint8)
            ok = pos + X.MIN_UNIT_SIZE <= len(raw)
            head = raw[pos[ok, None] + np.arange(10)]  # size 2 | tagsCode 8 (a copy)
            del raw
        finally:
            mm.close()
        size = np.ascontiguousarray(head[:, :2]).view(">i2").ravel()
        code = np.ascontiguousarray(head[:, 2:10]).view(">i8").ravel().astype(np.int64)
        good = size >= X.MIN_UNIT_SIZE
        out[where[sel[ok][good]]] = code[good]
    return out


def _runs(seg: np.ndarray, lo: int, hi: int):
    """(segment start, a, b) for the runs of [lo, hi) that lie in one CommitLog segment."""
    cuts = np.flatnonzero(np.diff(seg[lo:hi])) + lo + 1
    edges = [lo, *cuts.tolist(), hi]
    for a, b in zip(edges, edges[1:]):
        yield int(seg[a]), a, b


def _exact_tags(spec: ReadSpec, batch: pa.RecordBatch) -> pa.RecordBatch:
    """tagsCode is a hash: two tags may share one, so the tags themselves decide."""
    if spec.tags is None or not batch.num_rows:
        return batch
    mask = pc.fill_null(pc.is_in(batch.column("tags"), pa.array(sorted(spec.tags), pa.string())), False)
    return batch.filter(mask)


def _sql_filter(spec: ReadSpec, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The expression decides per message, on its properties, as the broker's isMatchedByCommitLog."""
    if spec.sql is None or not batch.num_rows:
        return batch
    from ..filter import compile as compile_sql

    f = compile_sql(spec.sql)
    keep = [f.matches(dict(pairs)) for pairs in batch.column("properties").to_pylist()]
    return batch.filter(pa.array(keep, pa.bool_()))


def _read_batch_cq(spec: ReadSpec, r: QueueRange):
    from ..store.facade import MessageStore
    from .options import store_config

    store = MessageStore.open(spec.root, store_config(spec.options, spec.root), read_only=True)
    try:
        at = r.start
        while at < r.end:
            got = store.get("rocketstore-spark", r.topic, r.queue_id, at, max_count=min(spec.batch_rows, r.end - at))
            messages = [m for m in got.unpacked() if at <= m.queue_offset < r.end] if got.messages else []
            if messages:
                if spec.tags is not None:
                    messages = [m for m in messages if m.tags in spec.tags]
                yield C.shaped(_sql_filter(spec, RB.from_messages(messages)), spec.schema)
            if got.next_begin_offset <= at:
                _lost(spec, f"offsets {at}..{r.end - 1} of {r.topic}-{r.queue_id} ({got.status.name})")
                return
            at = got.next_begin_offset
    finally:
        store.close()
