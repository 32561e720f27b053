"""The "rocketstore" format: a batch and streaming source over the ConsumeQueue, and the sink.

    spark.read.format("rocketstore").option("path", store).option("topics", "Orders").load()

The driver side (a Python worker, in fact) opens the store read-only to plan: topics, offset ranges,
timestamps. Each partition is one queue's offset range, read by its executor straight from the
ConsumeQueue and CommitLog files (queue_read), as Arrow batches.
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from . import options as O
from . import plan as PL
from . import queue_read as QR
from . import record_batch as RB


class RocketStoreSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketstore"

    def schema(self):
        return RB.DDL

    def reader(self, schema):
        return BatchReader(self.options)

    def streamReader(self, schema):
        from .stream import StreamReader
        return StreamReader(self.options)

    def writer(self, schema, overwrite: bool):
        from .sink import RocketStoreBatchWriter
        return RocketStoreBatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        from .sink import RocketStoreStreamWriter
        return RocketStoreStreamWriter(self.options, schema, overwrite)


class RangesPartition(InputPartition):
    def __init__(self, spec: QR.ReadSpec, ranges: list[QR.QueueRange]):
        super().__init__(None)
        self.spec = spec
        self.ranges = ranges


def read_partition(partition: RangesPartition):
    for r in partition.ranges:
        for batch in QR.read_range(partition.spec, r):
            if batch.num_rows:
                yield batch


class BatchReader(DataSourceReader):
    """Tags (=, IN), topic and queueId filters are pushed down: tags are tested on the ConsumeQueue's
    tagsCode before the CommitLog is read (then exactly, since tagsCode is a hash), topics and queues
    prune whole partitions."""

    def __init__(self, opts):
        self.options = dict(opts)
        self.tags = None
        self.topics = None
        self.queues = None
        with PL.open_store(self.options) as store:   # fail early, at load(), on a bad option or store
            PL.read_spec(self.options, store)
            PL.ranges(self.options, store)

    def pushFilters(self, filters):
        from pyspark.sql.datasource import EqualTo, In
        for f in filters:
            if isinstance(f, (EqualTo, In)) and f.attribute in (("tags",), ("topic",), ("queueId",)):
                values = set(f.value) if isinstance(f, In) else {f.value}
                name = f.attribute[0]
                current = getattr(self, name if name != "queueId" else "queues")
                setattr(self, name if name != "queueId" else "queues",
                        values if current is None else current & values)
            else:
                yield f

    def partitions(self):
        with PL.open_store(self.options) as store:
            tags = self.tags if self.tags is not None else PL._tags_option(self.options)
            if self.tags is not None and PL._tags_option(self.options) is not None:
                tags = self.tags & PL._tags_option(self.options)
            spec = PL.read_spec(self.options, store, tags)
            ranges = [r for r in PL.ranges(self.options, store)
                      if (self.topics is None or r.topic in self.topics)
                      and (self.queues is None or r.queue_id in self.queues)]
        parts = PL.split(ranges, O.integer(self.options, "minPartitions", None, minimum=1))
        return [RangesPartition(spec, p) for p in parts] or [RangesPartition(spec, [])]

    def read(self, partition):
        return read_partition(partition)
