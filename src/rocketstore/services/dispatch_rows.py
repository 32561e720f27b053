"""What a run of decoded records makes: the rows that get a queue unit, by queue, and the index keys with
the row each belongs to. The one place the dispatch rules (formats.record.gets_queue_unit,
gets_index_entries, formats.index.record_keys) are applied to a run's columns: the bulk decoder's
`by_queue` (which the ConsumeQueue dispatcher writes), the index service's builds (the put path, reput,
recovery and the local rebuild) and the parallel rebuild, serial or on Spark executors (rocketstore.maintenance.rebuild,
rocketstore.spark.rebuild_job), which write per queue and per index file and so cannot hold the store's
dispatchers, all take their rows from here.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from ..formats import index as I
from ..formats import record as R


def unit_rows(topics, queue_ids, sys_flags) -> dict[tuple[str, int], list[int]]:
    """The rows that get a queue unit (CommitLogDispatcherBuildConsumeQueue: normal and committed
    records), by (topic, queue id), each queue's rows in order. `queue_ids`: Python ints (a list);
    `sys_flags`: a list or a numpy array."""
    by_queue: dict[tuple[str, int], list[int]] = {}
    for i in np.flatnonzero(R.gets_queue_unit(np.asarray(sys_flags, dtype=np.int64))).tolist():
        key = (topics[i], queue_ids[i])
        rows = by_queue.get(key)
        if rows is None:
            rows = by_queue[key] = []
        rows.append(i)
    return by_queue


def index_rows(topics, uniqs, keys, sys_flags, phys=None, indexed_to: int = 0) -> tuple[list[str], list[int]]:
    """The index keys of a run's rows in IndexService.buildIndex's order (topic#UNIQ_KEY, then topic#token
    for each KEYS token), and the row each belongs to; none for a rolled-back record. With `phys` (the
    rows' physical offsets), none either for a row below `indexed_to` or below an earlier row that made
    keys: already indexed (buildIndex's endPhyOffset check; recovery and reput replay from a safe point)."""
    out: list[str] = []
    owner: list[int] = []
    gets = R.gets_index_entries(np.asarray(sys_flags, dtype=np.int64)).tolist()
    end = indexed_to
    # without phys every row stands at indexed_to: none is below what is indexed
    for i, (topic, uniq, k, p, ok) in enumerate(zip(topics, uniqs, keys, repeat(end) if phys is None else phys, gets)):
        if p < end or not ok:
            continue
        mine = I.record_keys(topic, uniq, k)
        if mine:
            out.extend(mine)
            owner.extend([i] * len(mine))
            end = p
    return out, owner


def index_entry_counts(uniqs, keys, sys_flags) -> np.ndarray:
    """How many index entries each row makes (index_rows' keys per row, without making them; nothing is
    taken as indexed already): int32."""
    gets = R.gets_index_entries(np.asarray(sys_flags, dtype=np.int64)).tolist()
    count = I.record_key_count
    return np.array([count(u, k) if ok else 0 for u, k, ok in zip(uniqs, keys, gets)], dtype=np.int32)


def index_entries(topics, uniqs, keys, sys_flags, phys, stamps, indexed_to: int | None = None):
    """The index entries a run's rows make, in order: (key hashes, physical offsets, store times) as
    numpy arrays, and the row of the last entry (-1: none). With `indexed_to` (the last index file's end
    physical offset), rows already indexed make none (index_rows)."""
    keys_, owner = index_rows(topics, uniqs, keys, sys_flags, None if indexed_to is None else phys, indexed_to or 0)
    rows = np.array(owner, dtype=np.int64)
    hashes = I.key_hashes(keys_) if keys_ else np.zeros(0, dtype=np.int32)
    return (
        hashes,
        np.asarray(phys, dtype=np.int64)[rows],
        np.asarray(stamps, dtype=np.int64)[rows],
        owner[-1] if owner else -1,
    )
