"""`rocketstore archive STORE --to DEST [--watch]`: the CommitLog's closed segments to Parquet, each segment
once (rocketstore.spark.archive_job, Spark in local mode unless --master says otherwise). Says what it is
doing as `rebuild --engine spark` does (Spark takes seconds to start), then reports what this run archived;
--watch keeps archiving segments as they close (cli/archive_watch.py)."""

from __future__ import annotations

import json
import math
import os
import time

import click

from ..errors import ArchiveError
from ..files.archive_manifest import ArchiveManifest, destination
from . import main as M
from .options import conf_opt, json_opt, store_arg
from .progress import Phases
from .spark_run import require_pyspark, spark_properties, spark_session

NEEDS = "archive needs pyspark"
WATCH_EVERY_S = 60.0  # --every's default: a minute, as cleanup's own first pass waits a minute after start


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
@click.option(
    "--watch",
    is_flag=True,
    help="Keep running: archive each segment as it closes (a round every --every seconds, one Spark session "
    "throughout), a line per round that archived something (with --json: a line per round), until SIGINT or "
    "SIGTERM: the batch being written is abandoned, nothing half-archived (a second signal stops at once, "
    "as safely). Run it beside `rocketstore serve --archive DEST`.",
)
@click.option(
    "--every",
    type=float,
    default=None,
    metavar="SECONDS",
    help=f"With --watch: seconds between the starts of two rounds (default {WATCH_EVERY_S:g}): with a round's "
    "time, the longest that cleanup with archiveEnable can wait for a segment the archive could take.",
)
@conf_opt
@json_opt
def archive(store, dest, include_system, include_prepared, master, spark_conf, watch, every, conf, as_json):
    """Archive the CommitLog's closed segments as Parquet, each segment exactly once.

    Every segment but the active one (the last holding data) that DEST does not hold yet; run it again
    later for the segments closed since (or keep it running with --watch), or after a failure: what a killed
    run left half written is removed first. The store is only read: the broker may be running."""
    t = time.perf_counter()
    if every is not None and not watch:
        raise click.UsageError("--every is for --watch (the seconds between two rounds)")
    if every is not None and not (math.isfinite(every) and every > 0):
        raise click.BadParameter(f"{every:g}: the seconds between rounds must be more than 0", param_hint="'--every'")
    spark_props = spark_properties(spark_conf)
    _check(store, dest, conf)
    require_pyspark(NEEDS)
    job = {
        "include_system": include_system,
        "include_prepared": include_prepared,
        **({"brokerConf": os.path.abspath(conf)} if conf else {}),
    }
    if watch:
        from .archive_watch import run_watch

        run_watch(os.path.abspath(store), dest, every or WATCH_EVERY_S, master, spark_props, as_json, job)
        return
    with Phases(lines=not as_json) as shown, spark_session(master, spark_props, shown, store, NEEDS) as spark:
        from rocketstore.spark import archive_job

        summary = archive_job.archive(os.path.abspath(store), dest, spark, progress=phases(shown), **job)
    warn_missing(summary)
    summary["seconds"] = round(time.perf_counter() - t, 3)  # the whole command's, Spark's start included
    del summary["archived"]  # (the names: as many as the segments)
    if as_json:
        click.echo(json.dumps(summary, ensure_ascii=False))
        return
    M.print_result("archived", {**summary, "undone": ", ".join(summary["undone"]) or "-"}, [], False)


def _check(store: str, dest: str, conf) -> None:
    """Everything that can be told wrong before Spark starts: the store, DEST, broker.conf, and whether
    another job is writing the archive (its lock, taken and let go)."""
    M.require_store(store)
    if not os.path.isdir(os.path.join(store, "commitlog")):
        M.fail(f"{store}: no CommitLog here to archive")
    try:
        target = destination(os.path.abspath(store), dest)
    except ArchiveError as e:
        raise click.BadParameter(str(e), param_hint="'--to'") from None
    M.load_config(conf)  # a bad broker.conf fails here, its unknown keys warned about
    try:
        with ArchiveManifest(target):
            pass
    except ArchiveError as e:
        M.fail(str(e))
    except OSError as e:
        M.fail(M.os_problem(e, target))


def warn_missing(summary: dict) -> None:
    """A run (or a round) that found CommitLog cleaned before it was archived says how much, on stderr."""
    if summary["missingBytes"]:
        click.echo(
            f"rocketstore: warning: {summary['missingBytes']} bytes of CommitLog between the archive's last "
            "segment and this run's first were cleaned before they were archived",
            err=True,
        )


def phases(shown: Phases):
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
