"""`rocketstore archive STORE --to DEST`: the CommitLog's closed segments to Parquet, each segment once
(rocketstore.spark.archive_job, Spark in local mode unless --master says otherwise). Says what it is doing
as `rebuild --engine spark` does (Spark takes seconds to start), then reports what this run archived."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import time

import click

from ..errors import RocketStoreError
from . import main as M
from .maintain import SPARK_MASTER, _spark_properties, os_problem
from .options import conf_opt, json_opt, store_arg
from .progress import Phases, SparkTasks


@click.command()
@store_arg
@click.option(
    "--to",
    "dest",
    required=True,
    metavar="DEST",
    help="The archive: a local directory (or file: URI), made if missing. Parquet files under "
    "DEST/topic=<topic>/date=<UTC date of storeTimestamp>/, the manifest under DEST/_rocketstore_archive/.",
)
@click.option(
    "--include-system",
    is_flag=True,
    help="Archive system topics' records too (SCHEDULE_TOPIC_XXXX, RMQ_SYS_TRANS_HALF_TOPIC, rmq_sys_*...: "
    "RocketMQ's TopicValidator; %RETRY% and %DLQ% topics are always archived).",
)
@click.option(
    "--include-prepared",
    is_flag=True,
    help="Archive the transaction records no queue points at too (prepared and rolled-back).",
)
@click.option(
    "--master",
    default=None,
    metavar="URL",
    help="The Spark master (default local[*]), as spark-submit's --master: on a cluster every executor must "
    "see the store and DEST at the same paths (a shared filesystem) and have rocketstore installed.",
)
@click.option(
    "--spark-conf",
    "spark_conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark property, as spark-submit's --conf (repeatable).",
)
@conf_opt
@json_opt
def archive(store, dest, include_system, include_prepared, master, spark_conf, conf, as_json):
    """Archive the CommitLog's closed segments as Parquet, each segment exactly once.

    Every segment but the active one (the last holding data) that DEST does not hold yet; run it again
    later for the segments closed since, or after a failure: what a killed run left half written is
    removed first. The store is only read: the broker may be running."""
    t = time.perf_counter()
    spark_props = _spark_properties(spark_conf)
    M.require_store(store)
    if not os.path.isdir(os.path.join(store, "commitlog")):
        M.fail(f"{store}: no CommitLog here to archive")
    from ..errors import ArchiveError
    from ..files.archive_manifest import destination

    try:
        destination(os.path.abspath(store), dest)
    except ArchiveError as e:
        raise click.BadParameter(str(e), param_hint="'--to'") from None
    M.load_config(conf)  # a bad broker.conf fails here, its unknown keys warned about
    if importlib.util.find_spec("pyspark") is None:  # without importing it: that alone takes a while
        M.fail("archive needs pyspark (not installed)")
    options = {"brokerConf": os.path.abspath(conf)} if conf else {}
    master = master or SPARK_MASTER
    spark = None
    with Phases(lines=not as_json) as shown:
        try:
            shown.phase(f"starting Spark ({master})...")
            import rocketstore.spark as rs
            from rocketstore.spark import archive_job

            spark = rs.session(master, conf=spark_props)
            with SparkTasks(spark.sparkContext, shown):
                summary = archive_job.archive(
                    os.path.abspath(store),
                    dest,
                    spark,
                    include_system=include_system,
                    include_prepared=include_prepared,
                    progress=_phases(shown),
                    **options,
                )
        except ImportError as e:
            M.fail(f"archive needs pyspark ({e})")
        except OSError as e:
            M.fail(os_problem(e, store))
        except (RocketStoreError, ValueError) as e:
            M.fail(str(e))
        except Exception as e:
            if not type(e).__module__.startswith(("pyspark", "py4j")):
                raise
            M.fail(spark_failure(e))
        finally:
            if spark is not None:
                shown.phase("stopping Spark")
                spark.stop()
    if summary["missingBytes"]:
        click.echo(
            f"rocketstore: warning: {summary['missingBytes']} bytes of CommitLog between the archive's last "
            "segment and this run's first were cleaned before they were archived",
            err=True,
        )
    summary["seconds"] = round(time.perf_counter() - t, 3)  # the whole command's, Spark's start included
    if as_json:
        click.echo(json.dumps(summary, ensure_ascii=False))
        return
    M.print_result("archived", {**summary, "undone": ", ".join(summary["undone"]) or "-"}, [], False)


_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?(\w*(?:Error|Exception)): (.+)$")


def spark_failure(e: BaseException) -> str:
    """A failed Spark job as the one line that matters: the last "SomeError: message" line (a Python
    worker's error, e.g. a damaged record's file and offset, comes last after its traceback), else Spark's
    first line."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    for line in reversed(lines):
        m = _ERROR_LINE.match(line)
        if m:
            return f"{m.group(1)}: {m.group(2)}"
    return lines[0] if lines else type(e).__name__


def _phases(shown: Phases):
    """archive_job's progress(phase, **counts) as phase labels."""
    total = [0, 0]  # segments to archive, staged so far

    def tell(phase, **c):
        if phase == "planning":
            total[0] = c["segments"]
            shown.phase(f"planning: {c['segments']} segment{'' if c['segments'] == 1 else 's'} to archive")
        elif phase == "staging":
            first, total[1] = total[1] + 1, total[1] + len(c["segments"])
            shown.phase(f"archiving segments {first}-{total[1]} of {total[0]}")

    return tell


def register(group: click.Group) -> None:
    group.add_command(archive)
