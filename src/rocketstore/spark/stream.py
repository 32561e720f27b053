"""The "rocketstore" streaming source: per-(topic, queue) offsets, new topics and queues picked up as they
appear, maxOffsetsPerTrigger admission control, exactly-once replay from Spark's checkpoint.

Offsets are {"topic": {"queueId": nextOffset}}. A micro-batch's range is decided on the driver side and
checkpointed by Spark before it is read, and a range always reads the same messages (queue offsets never
move), so a batch replayed after a failure delivers exactly what it did the first time.

The store may be written by another process meanwhile. Polls do not open the store: each queue's end is
found in its last ConsumeQueue file by a binary search over the units (a writer fills units in order and
zeroes are not units), a few reads per queue; topics and queues are the directories under consumequeue/.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from ..files import layout as L
from ..read.file_readers import queue_end
from ..validation import topic_problem
from . import archive_read as AR
from . import options as O
from . import plan as PL
from . import queue_read as QR
from .source import RangesPartition, read_partition


def _queues(root: str, sub: str, topic: str) -> list[int]:
    return L.queue_ids(os.path.join(root, sub, topic))


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts, columns=None):
        self.options = dict(opts)
        self.root = O.store_path(self.options)
        if O.get(self.options, "endingOffsets") or O.get(self.options, "endingTimestamp"):
            raise O.OptionError("options 'endingOffsets' and 'endingTimestamp' are for batch queries only")
        self.max_per_trigger = O.integer(self.options, "maxOffsetsPerTrigger", None, minimum=1)
        self.listed = O.get(self.options, "topics")
        pattern = O.get(self.options, "topicPattern")
        O.topics(self.options, [])  # exactly one of the two, a valid regex
        self.pattern = re.compile(pattern) if pattern else None
        with PL.open_store(self.options) as store:
            self.spec = replace(PL.read_spec(self.options, store), schema=columns)  # columns: spark.columns
            self.batch_topics = set(store.batch_topics)
        self.archive = AR.dest_option(self.options)
        self.available_now: dict | None = None

    # -- what the store holds now
    def _topics(self) -> dict[str, bool]:
        """topic -> keeps a batch ConsumeQueue, for the topics this query reads."""
        found = {}
        for sub, batch in ((L.CONSUMEQUEUE, False), (L.BATCH_CONSUMEQUEUE, True)):
            directory = os.path.join(self.root, sub)
            names = os.listdir(directory) if os.path.isdir(directory) else []
            for t in names:
                if topic_problem(t) is None:
                    found[t] = batch or t in self.batch_topics
        if self.listed:
            wanted = [t.strip() for t in self.listed.split(",") if t.strip()]
            return {t: found.get(t, t in self.batch_topics) for t in wanted}
        return {t: b for t, b in found.items() if self.pattern.fullmatch(t)}

    def _ends(self) -> dict[str, dict[str, int]]:
        ends: dict[str, dict[str, int]] = {}
        for topic, batch in self._topics().items():
            sub = L.BATCH_CONSUMEQUEUE if batch else L.CONSUMEQUEUE
            ends[topic] = {str(q): queue_end(self.root, topic, q, batch) for q in _queues(self.root, sub, topic)}
        return ends

    # -- Spark's calls
    def initialOffset(self) -> dict:
        """Where a new query starts: startingOffsets (default latest, as Kafka's) or startingTimestamp."""
        spec = O.offsets_spec(self.options, "startingOffsets", "latest")
        with PL.open_store(self.options) as store:
            ranges = PL.ranges(self.options, store, start_spec=spec, end_spec="latest", missing_ok=True)
        start: dict[str, dict[str, int]] = {t: {} for t in self._topics()}
        for r in ranges:  # (with an archive, a queue's pieces in offset order: the first is where it starts)
            start.setdefault(r.topic, {}).setdefault(str(r.queue_id), r.start)
        return start

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.max_per_trigger) if self.max_per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = self._ends()

    def latestOffset(self, start: dict, limit) -> dict:
        ends = self.available_now if self.available_now is not None else self._ends()
        end = {t: {q: max(o, start.get(t, {}).get(q, 0)) for q, o in qs.items()} for t, qs in ends.items()}
        for t, qs in start.items():  # a queue never goes away from the offsets
            for q, o in qs.items():
                end.setdefault(t, {}).setdefault(q, o)
        if isinstance(limit, ReadMaxRows):
            end = _admit(start, end, limit.max_rows)
        return end

    def partitions(self, start: dict, end: dict):
        ranges = []
        for topic, qs in end.items():
            batch = topic in self.batch_topics or os.path.isdir(os.path.join(self.root, L.BATCH_CONSUMEQUEUE, topic))
            for q, stop in qs.items():
                # a queue new since the last batch starts at its beginning (Kafka: new partitions, earliest)
                begin = start.get(topic, {}).get(q, 0)
                if stop > begin:
                    ranges.append(QR.QueueRange(topic, int(q), begin, stop, batch))
        ranges = self._across_the_seam(ranges)
        parts = PL.split(ranges, O.integer(self.options, "minPartitions", None, minimum=1), PL.parallelism_hint())
        return [RangesPartition(self.spec, p) for p in parts]

    def _across_the_seam(self, ranges: list) -> list:
        """With an archive, a range that starts below its queue's seam (the store's min offset, moved by
        cleanup) is read from the archive up to it: the same offsets, so a replayed batch reads the same
        messages wherever the seam has gone meanwhile. The store is opened to plan only when a range starts
        below (a look at the ConsumeQueue unit the range starts at)."""
        if self.archive is None:
            return ranges
        below = [
            r
            for r in ranges
            if not r.batch_cq and AR.cq_unit_gone(self.root, r.topic, r.queue_id, r.start, self.spec.cq_size)
        ]
        if not below:
            return ranges
        fail = self.spec.fail_on_data_loss
        with PL.open_store(self.options) as store:
            queues: dict[str, list[int]] = {}
            for r in below:
                queues.setdefault(r.topic, []).append(r.queue_id)
            plan = AR.ArchivePlan(self.archive, store, queues)
            split = {id(r) for r in below}
            return [piece for r in ranges for piece in (plan.split(r, fail) if id(r) in split else [r])]

    def read(self, partition):
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        pass  # nothing to release: the store keeps every message until it expires

    def stop(self) -> None:
        pass


def _admit(start: dict, end: dict, max_rows: int) -> dict:
    """Kafka's maxOffsetsPerTrigger: at most max_rows new offsets in all, shared among the queues in
    proportion to how far behind each is (at least one each while there is room)."""
    lag = {(t, q): o - start.get(t, {}).get(q, 0) for t, qs in end.items() for q, o in qs.items()}
    total = sum(v for v in lag.values() if v > 0)
    if total <= max_rows:
        return end
    out = {t: dict(qs) for t, qs in end.items()}
    left = max_rows
    for (t, q), behind in sorted(lag.items(), key=lambda kv: -kv[1]):
        if behind <= 0:
            continue
        take = min(behind, left, max(1, behind * max_rows // total))
        out[t][q] = start.get(t, {}).get(q, 0) + take
        left -= take
    return out
