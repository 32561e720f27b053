"""rocketstore's data pipeline on Spark (PySpark 4's Python Data Source API).

    spark = rocketstore.spark.session()            # local[*], formats registered
    df = spark.read.format("rocketstore").option("path", "store").option("topics", "Orders").load()

Formats: "rocketstore" (batch and streaming source over the ConsumeQueue; batch and streaming sink),
"rocketstore_commitlog" (every CommitLog record). rebuild(store, spark) rebuilds the ConsumeQueues and
index files from the CommitLog as a parallel job; archive(store, dest, spark) writes the CommitLog's closed
segments to Parquet under dest, each once, and the "rocketstore" source with option("archive", dest) reads
the archive and the store as one. The Spark layer uses only the store's public API and the
format modules.
"""

from __future__ import annotations

from .session import session

__all__ = ["session", "register", "rebuild", "archive"]


def register(spark) -> None:
    """Register rocketstore's data sources on a SparkSession. The session's default parallelism goes along
    in the environment Spark gives the sources' Python workers: their planner sizes partitions by it."""
    from .plan import PARALLELISM_ENV

    # the environment a Python function carries is the SparkContext's at the time it is registered
    spark.sparkContext.environment[PARALLELISM_ENV] = str(spark.sparkContext.defaultParallelism)
    for source in _sources():
        spark.dataSource.register(source)


def _sources():
    from .commitlog_source import CommitLogSource
    from .source import RocketStoreSource

    return RocketStoreSource, CommitLogSource


def rebuild(store, spark=None, **options):
    """Rebuild the ConsumeQueues, batch ConsumeQueues and index files of `store` from its CommitLog with Spark
    (see rocketstore.spark.rebuild_job)."""
    from .rebuild_job import rebuild as run

    return run(store, spark or session(), **options)


def archive(store, dest, spark=None, **options):
    """Archive `store`'s closed CommitLog segments not archived yet as Parquet under `dest`, each segment
    exactly once (see rocketstore.spark.archive_job)."""
    from .archive_job import archive as run

    return run(store, dest, spark or session(), **options)
