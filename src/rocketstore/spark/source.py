"""The "rocketstore" format: a batch and streaming source over the ConsumeQueue, and the sink.

    spark.read.format("rocketstore").option("path", store).option("topics", "Orders").load()

The driver side (a Python worker, in fact) opens the store read-only to plan: topics, offset ranges,
timestamps. Each partition is one queue's offset range, read by its executor straight from the
ConsumeQueue and CommitLog files (queue_read), as Arrow batches. With option("archive", DEST), offsets cleanup
removed are planned and read from the archive's Parquet instead (archive_read). A schema (or the `columns`
option) naming some of the columns makes the read build and ship only those (columns), on either side.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from . import archive_read as AR
from . import columns as C
from . import options as O
from . import plan as PL
from . import queue_read as QR


class RocketStoreSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketstore"

    def schema(self):
        return C.ddl(O.get(self.options, "columns"))

    def reader(self, schema):
        return BatchReader(self.options, C.arrow_schema(schema))

    def streamReader(self, schema):
        from .stream import StreamReader

        return StreamReader(self.options, C.arrow_schema(schema))

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
        read = AR.read_range if isinstance(r, AR.ArchiveRange) else QR.read_range
        for batch in read(partition.spec, r):
            if batch.num_rows:
                yield batch


class BatchReader(DataSourceReader):
    """The `tags` option is pushed down: tags are tested on the ConsumeQueue's tagsCode before the CommitLog
    is read (then exactly, since tagsCode is a hash).

    Spark's own filters (df.where) are not taken: in PySpark 4.3 a filter pushed into a Python data source
    stays with the DataFrame it came from, so after df.where("tags = 'X'").count(), df.count() counts only
    'X' (seen with a toy source too). Spark applies them after the read instead, which is always right."""

    def __init__(self, opts, columns=None):
        # Spark makes the reader and asks for its partitions back to back when a query runs: plan once here
        self.options = dict(opts)
        with PL.open_store(self.options) as store:
            self.spec = replace(PL.read_spec(self.options, store), schema=columns)
            self.ranges = PL.ranges(self.options, store)
        self.min_partitions = O.integer(self.options, "minPartitions", None, minimum=1)

    def partitions(self):
        parts = PL.split(self.ranges, self.min_partitions, PL.parallelism_hint())
        return [RangesPartition(self.spec, p) for p in parts] or [RangesPartition(self.spec, [])]

    def read(self, partition):
        return read_partition(partition)
