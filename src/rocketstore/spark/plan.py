"""Planning a read: which (topic, queue) offset ranges a query covers, resolved through the store read-only.

Offsets follow Spark's Kafka source: `earliest` / `latest` / JSON {"topic": {"queueId": offset}} with -2 for
earliest and -1 for latest; the ending offset is exclusive. `startingTimestamp` / `endingTimestamp` become
offsets by the ConsumeQueue's time lookup (the first message stored at or after the time).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os

from ..store.facade import MessageStore
from . import archive_read as AR
from . import options as O
from .queue_read import DataLossError, QueueRange, ReadSpec
from ..engine import java_string_hash

log = logging.getLogger("rocketstore.spark")
EARLIEST, LATEST = -2, -1


def open_store(opts) -> MessageStore:
    """Read-only, trusting the ConsumeQueues (no CommitLog recovery: planning reads no record but the few a
    time lookup needs, and a full check of a large CommitLog would cost seconds per query)."""
    root = O.store_path(opts)
    return MessageStore.open(root, O.store_config(opts, root), read_only=True, check_commitlog=False)


def read_spec(opts, store: MessageStore, tags=None) -> ReadSpec:

    wanted = tags if tags is not None else _tags_option(opts)
    # the executors rebuild the store's settings from these (brokerConf and MessageStoreConfig names)
    settings = {k: v for k, v in opts.items() if k.lower() in O.CONFIG_NAMES or k.lower() == "brokerconf"}
    return ReadSpec(
        root=store.root,
        commitlog_size=store.config.mapped_file_size_commit_log,
        cq_size=store.config.mapped_file_size_consume_queue,
        options=settings,
        tags=frozenset(wanted) if wanted is not None else None,
        tag_codes=tuple(sorted({java_string_hash(t) for t in wanted})) if wanted is not None else None,
        batch_rows=O.integer(opts, "maxRecordsPerBatch", 8192, minimum=1),
        fail_on_data_loss=O.boolean(opts, "failOnDataLoss", True),
        sql=O.sql(opts),
    )


def _tags_option(opts):
    """`tags`: RocketMQ's subscription expression ("TagA || TagB"; "*" or empty for all)."""
    raw = O.get(opts, "tags")
    if raw is None or raw.strip() in ("", "*"):
        return None
    tags = [t.strip() for t in raw.split("||")]
    if not all(tags):
        raise O.OptionError(f"option 'tags': expected tags separated by '||', got {raw!r}")
    return set(tags)


def topic_queues(opts, store: MessageStore, missing_ok: bool = False) -> dict[str, list[int]]:
    """The topics the options name, with their queues; a listed topic the store lacks is an error (unless
    missing_ok: a stream waits for it)."""
    available = store.topics()
    names = O.topics(opts, available)
    missing = [t for t in names if t not in available]
    if missing and O.get(opts, "topics") and not missing_ok:
        raise O.OptionError(f"option 'topics': no such topic in {store.root}: {', '.join(missing)}")
    return {t: available[t] for t in names if t in available}


def _position(store, topic: str, q: int, spec, ts: int | None, name: str, fail_on_data_loss: bool, archive=None) -> int:
    """One end of a queue's range: by time when a timestamp is given, else by the offsets spec (a queue
    JSON does not list starts at earliest and ends at latest). With an archive (archive_read.ArchivePlan)
    the queue starts at the archive's first offset, and a time finds archived offsets first."""
    lo, hi = max(store.min_offset(topic, q), 0), store.max_offset(topic, q)
    if archive is not None:
        lo = archive.first(topic, q)
    if ts is not None:
        archived = archive.offset_by_time(topic, q, ts) if archive is not None else None
        if archived is not None:
            return archived
        live = hi if _after_last(store, topic, q, ts) else store.offset_by_time(topic, q, ts)
        return max(live, archive.seam(topic, q)) if archive is not None else live
    if isinstance(spec, str):
        value = EARLIEST if spec == "earliest" else LATEST
    else:
        value = spec.get(topic, {}).get(q, EARLIEST if name == "startingOffsets" else LATEST)
    if value == EARLIEST:
        return lo
    if value == LATEST:
        return hi
    if value > hi:
        raise O.OptionError(f"option '{name}': offset {value} of {topic}-{q} is past the queue's end ({hi})")
    if value < lo:
        message = f"option '{name}': offset {value} of {topic}-{q} is gone (the queue now starts at {lo})"
        if archive is not None:
            message = (
                f"option '{name}': offset {value} of {topic}-{q} is in neither the store (the queue starts at "
                f"{archive.seam(topic, q)} there) nor the archive {archive.dest} (from {lo} there)"
            )
        if fail_on_data_loss:
            raise DataLossError(message + "; set failOnDataLoss=false to start at the first offset left")
        log.warning("%s: starting at %d", message, lo)
        return lo
    return value


def _after_last(store, topic: str, q: int, ts: int) -> bool:
    """No message of the queue was stored at or after `ts` (offset_by_time would clamp to the last one)."""
    hi = store.max_offset(topic, q)
    return hi <= max(store.min_offset(topic, q), 0) or store.store_timestamp_at(topic, q, hi - 1) < ts


def ranges(opts, store: MessageStore, start_spec=None, end_spec=None, missing_ok=False) -> list[QueueRange]:
    """Every (topic, queue) range of a batch query, or of a stream's first batch when given specs."""
    fail = O.boolean(opts, "failOnDataLoss", True)
    start_spec = start_spec if start_spec is not None else O.offsets_spec(opts, "startingOffsets", "earliest")
    end_spec = end_spec if end_spec is not None else O.offsets_spec(opts, "endingOffsets", "latest")
    if end_spec == "earliest":
        raise O.OptionError("option 'endingOffsets': earliest makes no sense for an end (use latest or JSON)")
    start_ts, end_ts = O.timestamp(opts, "startingTimestamp"), O.timestamp(opts, "endingTimestamp")
    if start_ts is not None and end_ts is not None and end_ts < start_ts:
        raise O.OptionError(f"option 'endingTimestamp' ({end_ts}) is before 'startingTimestamp' ({start_ts})")
    wanted = topic_queues(opts, store, missing_ok)
    archive = AR.plan(opts, store, wanted, (start_ts, end_ts))
    out = []
    for topic, queues in wanted.items():
        batch = topic in store.batch_topics
        for q in queues:
            start = _position(store, topic, q, start_spec, start_ts, "startingOffsets", fail, archive)
            end = _position(store, topic, q, end_spec, end_ts, "endingOffsets", fail, archive)
            if end < start and not isinstance(end_spec, str):
                raise O.OptionError(f"option 'endingOffsets': {topic}-{q} ends at {end}, before its start {start}")
            r = QueueRange(topic, q, start, max(start, end), batch)
            out.extend(archive.split(r, fail) if archive is not None else [r])
    return out


# below this many rows a partition is not worth a task of its own: each Spark task of a Python data source
# costs tens of milliseconds before it reads anything (worker hand-off, the read function sent again), which
# is what a few ten thousand rows take to read
MIN_PARTITION_ROWS = 65536
PARALLELISM_ENV = "ROCKETSTORE_SPARK_PARALLELISM"


def parallelism_hint() -> int | None:
    """The session's default parallelism, as register() left it in the Python workers' environment (the
    planner runs in a Python worker, which cannot ask Spark); None when unknown."""
    raw = os.environ.get(PARALLELISM_ENV, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def split(
    ranges_: list[QueueRange], min_partitions: int | None, parallelism: int | None = None
) -> list[list[QueueRange]]:
    """The partitions of a read, each a list of ranges read in turn. With minPartitions, one partition per
    non-empty range, large ranges cut (Kafka's rule: each range gets partitions in proportion to its size)
    so there are at least that many. Otherwise, knowing the session's parallelism, the ranges are packed in
    order into about that many partitions of equal row counts (a range cut where a partition fills up), no
    more than one per MIN_PARTITION_ROWS rows: per-task overhead, not the reading, is what many small
    partitions cost. Without either, one partition per non-empty range. The rows come in the same order
    whatever the split: partitions follow the ranges' order."""
    live = [r for r in ranges_ if r.count]
    if min_partitions:
        return _cut(live, min_partitions)
    if parallelism:
        return _pack(live, parallelism)
    return [[r] for r in live]


def _cut(live: list[QueueRange], min_partitions: int) -> list[list[QueueRange]]:
    if min_partitions <= len(live):
        return [[r] for r in live]
    total = sum(r.count for r in live)
    parts = []
    for r in live:
        pieces = max(1, math.ceil(r.count / total * min_partitions))
        step = math.ceil(r.count / pieces)
        for a in range(r.start, r.end, step):
            parts.append([dataclasses.replace(r, start=a, end=min(a + step, r.end))])
    return parts


def _pack(live: list[QueueRange], parallelism: int) -> list[list[QueueRange]]:
    total = sum(r.count for r in live)
    if not total:
        return []
    count = max(1, min(parallelism, total // MIN_PARTITION_ROWS))
    size = math.ceil(total / count)
    parts: list[list[QueueRange]] = [[]]
    room = size
    for r in live:
        at = r.start
        while at < r.end:
            if not room:
                parts.append([])
                room = size
            take = min(room, r.end - at)
            parts[-1].append(dataclasses.replace(r, start=at, end=at + take))  # (an archive range stays one)
            at += take
            room -= take
    return parts
