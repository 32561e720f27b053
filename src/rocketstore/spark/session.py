"""A local Spark session set up for rocketstore: loopback, quiet logs, this interpreter for the workers."""

from __future__ import annotations

import os
import sys
from importlib import resources


def session(master: str = "local[*]", app_name: str = "rocketstore", conf: dict | None = None):
    """getOrCreate a SparkSession with rocketstore's data sources registered.

    Local mode by default; pass `master` (or set spark.master in `conf`) to run the same code on a cluster,
    where rocketstore must be installed on the executors too. The driver binds to loopback unless
    SPARK_LOCAL_IP says otherwise; Python workers run this interpreter unless PYSPARK_PYTHON says otherwise
    (else they would run whatever `python3` is on PATH, without rocketstore)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    log4j = resources.files(__package__).joinpath("log4j2.properties")
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        # pyspark.daemon less the BrokenPipeError traceback it prints when show()/limit() stop early
        .config("spark.python.daemon.module", "rocketstore.spark.quiet_daemon")
    )
    if master.startswith("local"):
        builder = builder.config("spark.driver.host", os.environ["SPARK_LOCAL_IP"]).config(
            "spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"]
        )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from . import register

    register(spark)
    return spark
