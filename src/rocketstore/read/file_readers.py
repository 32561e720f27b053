"""Store-less, read-only readers of a store's files: what a tool that must not open the store (the Spark
planner polling a live store, verify, dump) asks of them, read straight from the files, in a few reads.

A writer fills queue units in order and an unwritten unit is zeros, so the units written in a file are
found by a binary search for the first unit whose size is not positive."""

from __future__ import annotations

import mmap
import os

import numpy as np

from ..files import layout as L
from ..formats import batch_cq as BCQ
from ..formats import cq as CQ


def written_units(path: str, dtype: np.dtype) -> tuple[int, np.ndarray | None]:
    """(units written in the queue file at `path`, the last one): the first unit with size <= 0 (or a
    negative offset) ends them."""
    size = os.path.getsize(path)
    if size < dtype.itemsize:
        return 0, None
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        units = np.frombuffer(mm, dtype=dtype, count=size // dtype.itemsize)
        lo, hi = 0, len(units)  # invariant: units[:lo] written, units[hi:] not
        while lo < hi:
            mid = (lo + hi) // 2
            if units[mid]["size"] > 0 and units[mid]["pos"] >= 0:
                lo = mid + 1
            else:
                hi = mid
        last = units[lo - 1].copy() if lo else None
        del units
    return lo, last


def queue_end(root: str, topic: str, queue_id: int, batch_cq: bool) -> int:
    """The queue's max offset (one past its last message) as its files say now."""
    directory = L.StoreLayout(root).queue_dir(topic, queue_id, batch_cq)
    names = L.segment_names(directory)
    if not names:
        return 0
    if not batch_cq:
        n, _ = written_units(os.path.join(directory, names[-1]), CQ.DTYPE)
        return int(names[-1]) // CQ.UNIT_SIZE + n
    for name in reversed(names):  # an empty newest file: the previous one's end (a fresh queue: 0)
        _, last = written_units(os.path.join(directory, name), BCQ.DTYPE)
        if last is not None:
            return int(last["base_offset"]) + int(last["batch_size"])
    return 0
