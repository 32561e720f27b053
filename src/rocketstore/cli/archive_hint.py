"""What `consume` and `query` say when the messages asked for are only in the archive: cleanup deleted them
from the store after `rocketstore archive` had put them in DEST. One line on stderr, with the Spark read that
gives them (the "rocketstore" source with option("archive", DEST), which reads across the seam).

The archive is the one `--archive DEST` names, else broker.conf's archivePath (-c). What it holds is read from
its manifest and, for offsets and times, from its Parquet files of the segments the store no longer has (the
columns queueId, queueOffset, storeTimestamp, sysFlag, with pyarrow: without it, as without pyspark, there is nothing
to read the archive with, and nothing is said)."""

from __future__ import annotations

import json
import os

import click

from ..errors import ArchiveError
from ..formats.record import gets_queue_unit
from ..files.archive_manifest import MANIFEST_DIR, ArchiveManifest, file_topic, local_dest
from . import output as O

archive_opt = click.option(
    "--archive",
    "archive",
    default=None,
    metavar="DEST",
    help="The archive `rocketstore archive --to DEST` writes (default: broker.conf's archivePath): when what "
    "is asked for is only there, say so and how to read it.",
)


def archive_dest(store, given: str | None) -> str | None:
    """--archive DEST (a bad one is a usage error), else the store's archivePath when it is an archive."""
    dest = given or store.config.archive_path
    if not dest:
        return None
    try:
        path = local_dest(dest)
    except ArchiveError as e:
        raise click.BadParameter(str(e), param_hint="'--archive'") from None
    if not os.path.isdir(os.path.join(path, MANIFEST_DIR)):
        if given:
            raise click.BadParameter(f"{path} is not an archive (no {MANIFEST_DIR}/ in it)", param_hint="'--archive'")
        return None
    return path


def _archived(dest: str, store, topic: str):
    """(queueId, queueOffset, storeTimestamp ms) arrays of the topic's archived records from the segments
    the store no longer has; None without pyarrow."""
    try:
        import numpy as np
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
    except ImportError:
        return None
    manifest = ArchiveManifest(dest)
    floor = store.min_physical_offset
    paths = [
        os.path.join(dest, f["path"])
        for name in manifest.archived()
        if int(name) < floor
        for f in manifest.entry(name)["files"]
        if file_topic(f["path"]) == topic
    ]
    parts = [pq.read_table(p, columns=["queueId", "queueOffset", "storeTimestamp", "sysFlag"]) for p in paths]
    ids, offsets, ms = [np.empty(0, dtype=np.int64) for _ in range(3)]
    for t in parts:
        ids = np.concatenate((ids, t.column("queueId").to_numpy(zero_copy_only=False).astype(np.int64)))
        held = t.column("queueOffset").fill_null(-1).to_numpy(zero_copy_only=False)
        # (an archive made with include_prepared: records no queue points at have no offset of a queue)
        held = np.where(gets_queue_unit(t.column("sysFlag").to_numpy(zero_copy_only=False)), held, -1)
        offsets = np.concatenate((offsets, held))
        stamps = pc.cast(t.column("storeTimestamp"), "int64").to_numpy(zero_copy_only=False) // 1000
        ms = np.concatenate((ms, stamps))
    return ids, offsets, ms


def _spark_read(root: str, dest: str, topic: str, option: str, value: str) -> str:
    return (
        f'spark.read.format("rocketstore").option("path", {json.dumps(root)}).option("archive", {json.dumps(dest)})'
        f'.option("topics", {json.dumps(topic)}).option("{option}", {value!r}).load()'
    )


def below_min(store, dest: str, topic: str, queues: list[int], offset: int | None, since_ms: int | None) -> str | None:
    """The line for a consume that starts at `offset` (or at the first message stored at or after
    `since_ms`) in `queues` when the archive holds offsets of them below their min offsets; None else."""
    got = _archived(dest, store, topic)
    if got is None:
        return None
    ids, offsets, ms = got
    spans, starts = [], {}
    for q in queues:
        lo = max(store.min_offset(topic, q), 0)
        held = (ids == q) & (offsets >= 0) & (offsets < lo)
        held &= (offsets >= offset) if offset is not None else (ms >= since_ms)
        if held.any():
            first = int(offsets[held].min())
            spans.append(f"{topic}-{q} offsets {first}..{lo - 1}")
            starts[str(q)] = first
    if not spans:
        return None
    if offset is not None:
        option, value, what = "startingOffsets", json.dumps({topic: starts}), ""
    else:
        option, value, what = "startingTimestamp", O.iso_time(since_ms), f" (stored at or after {O.iso_time(since_ms)})"
    return (
        f"rocketstore: {', '.join(spans)}{what} are only in the archive {dest} (cleanup deleted them here); "
        f"read them with Spark: {_spark_read(store.root, dest, topic, option, value)}"
    )


def before_earliest(store, dest: str, topics: list[str], begin_ms: int, end_ms: int | None) -> str | None:
    """The line for a query by time whose range reaches before what the store still holds, when the
    archive holds messages of it stored in the range; None else."""
    end = end_ms if end_ms is not None else (1 << 63) - 1
    counts = {}
    for topic in topics:
        got = _archived(dest, store, topic)
        if got is None:
            return None
        n = int(((got[2] >= begin_ms) & (got[2] <= end) & (got[1] >= 0)).sum())
        if n:
            counts[topic] = n
    if not counts:
        return None
    read = _spark_read(store.root, dest, ",".join(counts), "startingTimestamp", O.iso_time(begin_ms))
    if end_ms is not None:  # (--end is inclusive, endingTimestamp is not)
        read = read.replace(".load()", f'.option("endingTimestamp", {O.iso_time(end_ms + 1)!r}).load()')
    found = ", ".join(f"{n} of {t}" for t, n in counts.items())
    return (
        f"rocketstore: {found} stored in that range are only in the archive {dest} (cleanup deleted them "
        f"here); read them with Spark: {read}"
    )


def archived_segment(dest: str, phys: int) -> str | None:
    """The archived segment that held physical offset `phys`, or None."""
    manifest = ArchiveManifest(dest)
    for name in manifest.archived():
        e = manifest.entry(name)
        if e["base"] <= phys < e["base"] + e["size"]:
            return name
    return None
