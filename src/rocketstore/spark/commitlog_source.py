"""The "rocketstore_commitlog" format: every CommitLog record, the ones no ConsumeQueue points at included
(prepared and rolled-back transactions, SCHEDULE_TOPIC_XXXX...), for audits and exports.

    spark.read.format("rocketstore_commitlog").option("path", store).load().write.parquet("export")

One partition per segment file (every segment ends at a record boundary or a BLANK filler, so segments are
independent). A record that is neither a message nor a BLANK before the data ends is corruption: the read
fails naming the file and offset (failOnDataLoss=false: the rest of that segment is skipped with a warning).
Options: path, the store's settings, `topics` / `topicPattern` (optional), maxRecordsPerBatch, `segments`
(optional: segment file names, comma separated, to read only those; one that is not there fails the read,
so a job that planned on it never takes "no rows" for "read": the archive job reads its batches so).
"""

from __future__ import annotations

import logging
import mmap
import os
import re
from struct import Struct

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..files import layout as L
from ..formats import record as R
from ..formats.record_scan import chain
from . import options as O
from . import record_batch as RB
from ..engine import from_records

log = logging.getLogger("rocketstore.spark")
_SIZE_MAGIC = Struct(">ii")


class CommitLogSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketstore_commitlog"

    def schema(self):
        return RB.DDL

    def reader(self, schema):
        return CommitLogReader(self.options)


class SegmentPartition(InputPartition):
    def __init__(self, path: str, last: bool, topics, pattern, batch_rows: int, fail_on_data_loss: bool):
        super().__init__(path)
        self.last = last
        self.path = path
        self.topics = topics
        self.pattern = pattern
        self.batch_rows = batch_rows
        self.fail_on_data_loss = fail_on_data_loss


class CommitLogReader(DataSourceReader):
    def __init__(self, opts):
        self.options = dict(opts)
        root = O.store_path(self.options)
        O.store_config(self.options, root)  # unknown or bad settings fail here, named
        self.directory = L.StoreLayout(root).commitlog
        listed, pattern = O.get(self.options, "topics"), O.get(self.options, "topicPattern")
        if listed and pattern:
            raise O.OptionError("give at most one of the options 'topics' and 'topicPattern'")
        self.topics = frozenset(t.strip() for t in listed.split(",") if t.strip()) if listed else None
        if pattern:
            O.topics(self.options, [])  # a valid regex, or an error naming the option
        self.pattern = pattern or None
        self.batch_rows = O.integer(self.options, "maxRecordsPerBatch", 8192, minimum=1)
        self.fail = O.boolean(self.options, "failOnDataLoss", True)
        chosen = O.get(self.options, "segments")
        self.segments = [n.strip() for n in chosen.split(",") if n.strip()] if chosen else None

    def partitions(self):
        names = L.segment_names(self.directory)
        chosen = names
        if self.segments is not None:
            missing = sorted(set(self.segments) - set(names))
            if missing:
                raise O.OptionError(f"option 'segments': no segment {', '.join(missing)} in {self.directory}")
            chosen = sorted(set(self.segments))
        return [
            SegmentPartition(
                os.path.join(self.directory, n), n == names[-1], self.topics, self.pattern, self.batch_rows, self.fail
            )
            for n in chosen
        ]

    def read(self, partition: SegmentPartition):
        rx = re.compile(partition.pattern) if partition.pattern else None
        for batch in read_segment(partition.path, partition.last, partition.batch_rows, partition.fail_on_data_loss):
            if partition.topics is not None or rx is not None:
                topics = batch.column("topic").to_pylist()
                keep = [
                    (partition.topics is None or t in partition.topics) and (rx is None or rx.fullmatch(t))
                    for t in topics
                ]
                batch = batch.filter(keep)
            if batch.num_rows:
                yield batch


def read_segment(path: str, last: bool, batch_rows: int, fail_on_data_loss: bool):
    """RecordBatches of every record of one segment file, in order. In the last segment, the data ends at
    the first thing that is not a record (a crash may have torn the tail: recovery cuts it the same way)."""
    size = os.path.getsize(path)
    if size == 0:
        return
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        pos = 0
        while pos + 8 <= size:
            positions, sizes = chain(buf, pos, size, batch_rows)
            if positions:
                yield from_records(buf, positions, sizes)
                pos = positions[-1] + sizes[-1]
                continue
            total, magic = _SIZE_MAGIC.unpack_from(buf, pos)
            if magic == R.BLANK_MAGIC or (total == 0 and magic == 0):
                return  # the filler at a segment's end, or no data yet
            message = f"{path}: no valid record at offset {pos} (size {total}, magic {magic:#x})"
            if last:
                log.warning("%s: the data ends here (a torn tail, as recovery would cut it)", message)
                return
            if fail_on_data_loss:
                raise ValueError(message + "; set failOnDataLoss=false to skip the rest of this segment")
            log.warning("%s: skipping the rest of the segment", message)
            return
