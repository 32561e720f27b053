"""An archive written by hand, without Spark, as `rocketstore archive` lays it out: a manifest entry per
segment and, for topic T, a Parquet file with the columns the archive's planners read (queueId, queueOffset,
storeTimestamp, sysFlag), from the puts' own results."""

import hashlib
import os

import pyarrow as pa
import pyarrow.parquet as pq

from rocketstore.files.archive_manifest import ArchiveManifest, entry


def write_archive(root, dest, put, names, segment_size):
    """Every closed segment into the archive: its rows of topic T as one Parquet file, then its entry."""
    with ArchiveManifest(dest) as m:
        for name in names[:-1]:
            mine = [p for p in put if int(name) <= p.physical_offset < int(name) + segment_size]
            rel = f"topic=T/date=2026-11-21/{name}-00000.parquet"
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            table = pa.table(
                {
                    "queueId": pa.array([p.queue_id for p in mine], pa.int32()),
                    "queueOffset": pa.array([p.queue_offset for p in mine], pa.int64()),
                    "storeTimestamp": pa.array([p.store_timestamp * 1000 for p in mine], pa.timestamp("us", "UTC")),
                    "sysFlag": pa.array([0] * len(mine), pa.int32()),
                }
            )
            pq.write_table(table, os.path.join(dest, rel))
            with open(os.path.join(root, "commitlog", name), "rb") as f:
                head = hashlib.sha256(f.read(4096)).hexdigest()
            m.commit(entry(name, segment_size, head, [{"path": rel, "rows": len(mine)}], {}))
