"""`rocketstore rebuild | clean | recover`: the maintenance commands, the ones whose purpose is to write.

rebuild makes the ConsumeQueues and index files again by letting recovery dispatch every record of the
CommitLog (what RocketMQ does when those files are lost) in a staging store, swapped in once complete
(rocketstore.maintenance.rebuild_swap: a kill at any instant leaves the old files or the new ones), or with --engine
spark runs the parallel rebuild job (rocketstore.spark.rebuild, Spark in local mode), staged the same way;
clean runs the expired-file cleanup now; recover opens the store, which recovers it, and reports what
recovery cut. On a terminal each shows what it is doing on stderr (rocketstore.cli.progress): a bar over the
bytes of CommitLog data recovery checks and dispatches, then its later phases by name; the Spark engine
says what it is doing from the start (Spark takes seconds to start), by phase and Spark tasks, also as one
line per phase when stderr is not a terminal (none with --json).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time

import click

from .. import MessageStore
from ..errors import RocketStoreError
from ..maintenance.rebuild_swap import REBUILT, StagedRebuild
from ..store.lock import StoreLock
from . import main as M
from . import output as O
from .options import conf_opt, json_opt, store_arg
from .progress import Phases
from .spark_run import require_pyspark, spark_properties, spark_session


class _Cuts(logging.Handler):
    """Collects what recovery says it cut (its warnings)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _open_with_progress(store: str, conf, config=None, shown: Phases | None = None) -> tuple[MessageStore, list[str]]:
    """Open (and so recover) the store for writing, with a bar over the bytes recovery checks (on `shown`, or
    a bar of its own); also what recovery says it cut. `config` (already resolved) instead of -c's."""
    if config is None:  # the store itself (a staging store is made by the rebuild, not found)
        M.require_store(store)
    cfg = config or M.load_config(conf)
    cuts = _Cuts()
    logger = logging.getLogger("rocketstore")
    logger.addHandler(cuts)
    try:
        if shown is not None:
            return MessageStore.open(store, cfg, progress=shown.bytes), cuts.lines
        with Phases() as own:
            own.phase("recovering the CommitLog")
            return MessageStore.open(store, cfg, progress=own.bytes), cuts.lines
    except RocketStoreError as e:
        M.fail(str(e))
    except OSError as e:
        M.fail(M.os_problem(e, store))
    finally:
        logger.removeHandler(cuts)


def _report(title: str, summary: dict, cuts: list[str], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({**summary, "cut": cuts}, ensure_ascii=False))
        return
    M.print_result(title, summary, [{"what recovery cut": c} for c in cuts], False)


def _queue_totals(s: MessageStore) -> tuple[int, int]:
    queues = s.consume_queues()
    return len(queues), sum(max(cq.max_offset - max(cq.min_offset, 0), 0) for cq in queues)


@click.command()
@store_arg
@click.option(
    "--engine",
    type=click.Choice(["local", "spark"]),
    default="local",
    show_default=True,
    help="Where to rebuild: this process, or a Spark job (with the Spark pipeline).",
)
@click.option(
    "--master",
    default=None,
    metavar="URL",
    help="The Spark master for --engine spark (default local[*]), as spark-submit's --master: on a cluster "
    "(spark://HOST:PORT, yarn, k8s://...) every executor must see the store at the same path (a shared "
    "filesystem) and have rocketstore installed.",
)
@click.option(
    "--spark-conf",
    "spark_conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark property for --engine spark, as spark-submit's --conf (repeatable).",
)
@click.option("--yes", is_flag=True, help="Do not ask before dropping the old queue and index files.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what would be rebuilt (queues, index files, their sizes) and the room the new files need "
    "meanwhile, changing nothing: the store is read read-only, no lock is taken.",
)
@conf_opt
@json_opt
def rebuild(store, engine, master, spark_conf, yes, dry_run, conf, as_json):
    """Rebuild every ConsumeQueue, batch ConsumeQueue and index file from the CommitLog."""
    t = time.perf_counter()  # the whole command's time, reported as "seconds" (Spark's start included)
    if dry_run:
        M.require_store(store)
        if not os.path.isdir(os.path.join(store, "commitlog")):
            M.fail(f"{store}: no CommitLog here to rebuild from")
        _rebuild_dry_run(store, conf, as_json)
        return
    if engine != "spark" and (master is not None or spark_conf):
        M.fail("--master and --spark-conf are for --engine spark")
    spark_props = spark_properties(spark_conf)
    M.require_store(store)
    if not os.path.isdir(os.path.join(store, "commitlog")):
        M.fail(f"{store}: no CommitLog here to rebuild from")
    cfg = M.load_config(conf)
    if engine == "spark" and cfg.enable_consume_queue_ext:
        from ..maintenance.rebuild import EXT_REFUSED

        M.fail(f"{store}: {EXT_REFUSED}")
    if engine == "spark":
        try:  # fail on the lock before Spark starts; the job takes it for itself and stages the same way
            StoreLock.take(os.path.abspath(store)).release()
        except RocketStoreError as e:
            M.fail(str(e))
        if not yes and not as_json:
            _confirm(store, [sub for sub in REBUILT if os.path.exists(os.path.join(store, sub))])
        _rebuild_with_spark(store, conf, as_json, master, spark_props, started=t)
        return
    try:
        # the lock first (nothing changes without it), the sizes read from the files in place, the new files
        # made by recovery in a staging store and swapped in only once complete (rocketstore.maintenance.rebuild_swap)
        with StagedRebuild(store, cfg) as stage:
            if not yes and not as_json:
                _confirm(store, stage.present)
            with Phases() as shown:
                # recovery dispatches every record into the staging store: the queues and, a run at a
                # time, the index (the bulk of the work, by bytes of CommitLog data)
                shown.phase("rebuilding queues and index from the CommitLog")
                s, cuts = _open_with_progress(stage.staging, None, stage.config, shown)
                with s:
                    shown.phase("flushing the new queue and index files")
                    if not s.wait_dispatched(timeout_s=3600):
                        M.fail(f"{store}: dispatch did not catch up; the store is unchanged")
                    queues, messages = _queue_totals(s)
                    summary = {
                        "store": stage.root,
                        "queues": queues,
                        "messages": messages,
                        "indexFiles": s.index_file_count(),
                        "commitLogMaxOffset": s.max_physical_offset,
                        "seconds": 0.0,
                        "consumeQueueExt": _ext_outcome(cfg, "consumequeue_ext" in stage.present),
                    }
                shown.phase("swapping the new files in")
                stage.commit()
        cuts = [c.replace(stage.staging, stage.root) for c in cuts]  # recovery saw the CommitLog through the stage
    except RocketStoreError as e:
        M.fail(str(e))
    except OSError as e:  # a read-only or full file system, a permission: one line, nothing half-swapped
        M.fail(M.os_problem(e, store))
    summary["seconds"] = round(time.perf_counter() - t, 3)
    _report("rebuilt", summary, cuts, as_json)


def _du(path: str) -> tuple[int, int]:
    """(files, bytes on disk) below a directory."""
    files = used = 0
    for dirpath, _dirs, names in os.walk(path):
        for n in names:
            files += 1
            used += os.stat(os.path.join(dirpath, n)).st_blocks * 512
    return files, used


def _rebuild_dry_run(store: str, conf, as_json: bool) -> None:
    """What `rebuild` would make, from a read-only open (recovery in memory only: nothing is written, no lock
    is taken): every queue and index file again, in .rebuild-new/ beside the old ones until the swap."""
    from ..formats import index as IX

    M.require_store(store)
    cfg = M.load_config(conf)
    try:
        with MessageStore.open(store, cfg, read_only=True) as s:
            c = s.config
            index_size = IX.file_size(c.max_hash_slot_num, c.max_index_num)
            rows, queue_bytes = [], 0
            for cq in sorted(s.consume_queues(), key=lambda q: (q.topic, q.queue_id)):
                size = c.mapped_file_size_batch_consume_queue if cq.is_batch else c.mapped_file_size_consume_queue
                files = max(len(cq.files.files), 1)
                queue_bytes += files * size
                rows.append(
                    {
                        "topic": cq.topic,
                        "queueId": cq.queue_id,
                        "type": cq.cq_type,
                        "messages": max(cq.max_offset - max(cq.min_offset, 0), 0),
                        "files": files,
                        "fileSize": size,
                    }
                )
            index_files = s.index_file_count()
            summary = {
                "store": s.root,
                "dryRun": True,
                "commitLogBytes": max(s.max_physical_offset - s.min_physical_offset, 0),
                "queues": len(rows),
                "messages": sum(r["messages"] for r in rows),
                "queueFileSize": c.mapped_file_size_consume_queue,
                "indexFiles": index_files,
                "indexFileSize": index_size,
            }
    except RocketStoreError as e:
        M.fail(str(e))
    present = [sub for sub in REBUILT if os.path.isdir(os.path.join(store, sub))]
    in_place = sum(_du(os.path.join(store, sub))[1] for sub in present)
    needed = queue_bytes + index_files * index_size
    free = shutil.disk_usage(store).free
    summary.update(
        {
            "replaces": " ".join(present) or "nothing (none of them exist)",
            "bytesInPlace": in_place,
            "bytesNeeded": needed,
            "bytesFree": free,
            "enoughRoom": free >= needed,
            "what": f"rebuild would write {len(rows)} queue(s) and {index_files} index file(s) "
            f"(about {O.human_size(needed)}, reserved on disk) in .rebuild-new/ beside the old files "
            f"({O.human_size(in_place)}), then swap them in; nothing was changed",
        }
    )
    if as_json:
        click.echo(json.dumps({**summary, "rows": rows}, ensure_ascii=False))
        return
    M.print_result("rebuild --dry-run (nothing changed)", summary, rows, False)


def _confirm(store: str, present: list[str]) -> None:
    click.confirm(
        f"drop {', '.join(present or REBUILT)} under {store} and rebuild them from the CommitLog?", abort=True
    )


def _ext_outcome(cfg, had_ext: bool) -> str:
    if cfg.enable_consume_queue_ext:
        return "rebuilt"
    if had_ext:
        return (
            "dropped: the config does not enable it, the queues now hold plain tagsCodes "
            "(give -c broker.conf with enableConsumeQueueExt=true to rebuild it)"
        )
    return "off"


SUMMARY_KEYS = ("store", "queues", "messages", "indexFiles", "commitLogMaxOffset", "seconds")


def _rebuild_with_spark(
    store: str, conf, as_json: bool, master: str | None, spark_props: dict[str, str], started: float
) -> None:
    """The Spark job (rocketstore.spark.rebuild), local mode unless a master is given; the same report as the
    local engine. What it is doing is said from the start, before Spark's seconds of starting up. The paths
    go to the executors absolute: on a cluster they must name the same files there."""
    needs, hint = "the Spark engine needs pyspark", "; use --engine local"
    require_pyspark(needs, hint)
    options = {"brokerConf": os.path.abspath(conf)} if conf else {}
    cuts = _Cuts()
    logger = logging.getLogger("rocketstore")
    logger.addHandler(cuts)
    try:
        with Phases(lines=not as_json) as shown, spark_session(master, spark_props, shown, store, needs, hint) as spark:
            from rocketstore.spark import rebuild_job

            summary = rebuild_job.rebuild(os.path.abspath(store), spark, progress=_spark_phases(shown), **options)
    finally:
        logger.removeHandler(cuts)
    report = {k: summary[k] for k in SUMMARY_KEYS}
    # the whole command's wall time, from its start (`started`, time.perf_counter() when rebuild began):
    # Spark's start and stop included, not only the job's own phases
    report["seconds"] = round(time.perf_counter() - started, 3)
    _report("rebuilt", report, cuts.lines, as_json)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what[:-1] + 'ies' if what.endswith('y') else what + 's'}"


def _spark_phases(shown: Phases):
    """rebuild_job's progress(phase, **counts) as phase labels (and the final recovery's bytes)."""
    labels = {
        "planning": lambda c: "planning",
        "decoding": lambda c: f"decoding {_count(c['segments'], 'CommitLog segment')}",
        "queues": lambda c: f"writing queues ({_count(c['records'], 'record')})",
        "index": lambda c: f"writing {_count(c['files'], 'index file')} ({_count(c['entries'], 'entry')})",
        "finishing": lambda c: "swapping in (checking the CommitLog's end)",
    }
    current = [None]

    def progress(phase, **counts):
        if phase != current[0]:
            current[0] = phase
            shown.phase(labels[phase](counts))
        if phase == "finishing":
            shown.bytes(counts["done"], counts["total"])

    return progress


MANUAL_PASSES = 20  # RocketMQ's manual trigger: this many passes (MAX_MANUAL_DELETE_FILE_TIMES)
HOUR_MS = 3600 * 1000


def _segments(store: str) -> list[tuple[str, int, int]]:
    """The CommitLog segments on disk, oldest first: (name, bytes, mtime in ms: the age cleanup goes by)."""
    directory = os.path.join(store, "commitlog")
    try:
        names = sorted(n for n in os.listdir(directory) if n.isdigit() and len(n) == 20)
    except OSError:
        return []
    out = []
    for n in names:
        st = os.stat(os.path.join(directory, n))
        out.append((n, st.st_size, st.st_mtime_ns // 1_000_000))
    return out


def _clean_plan(segments, cfg, now_ms: int) -> tuple[list[tuple[str, int, int]], str]:
    """What the manual trigger deletes by age (deleteExpiredFileByTime, pass after pass): from the oldest
    segment on, those last modified fileReservedTime hours or more ago, never the last (current) one,
    stopping at the first that has not expired; and why the first one kept stays."""
    kept_h = cfg.file_reserved_time
    limit = MANUAL_PASSES * max(cfg.delete_file_batch_max, 1)
    going = []
    for i, (name, _size, mtime) in enumerate(segments):
        age_h = (now_ms - mtime) / HOUR_MS
        if i == len(segments) - 1:
            why = f"commitlog/{name} is the last (current) CommitLog file, which cleanup never deletes"
            if i == 0:
                why = f"commitlog/{name} is the only CommitLog file: the last (current) one is never deleted"
            return going, why
        if age_h < kept_h:
            which = "the oldest CommitLog file" if i == 0 else f"the next CommitLog file, commitlog/{name},"
            return going, (
                f"{which} is {age_h:.1f} h old, files are kept {kept_h} h (fileReservedTime; "
                "cleanup stops at the first file that has not expired)"
            )
        if len(going) == limit:
            return (
                going,
                f"one manual trigger deletes at most {limit} files ({MANUAL_PASSES} passes of deleteFileBatchMax)",
            )
        going.append(segments[i])
    return going, "there are no CommitLog files"


# the periodic cleanup's other rule, which the manual trigger does not wait for
NOT_DELETE_WHEN = "deleteWhen ({}) times only the periodic cleanup, not this manual trigger"


def _disk_note(store: str, cfg) -> str | None:
    """A disk fuller than diskSpaceCleanForciblyRatio: cleanup then deletes files whatever their age."""
    try:
        usage = shutil.disk_usage(store)
    except OSError:
        return None
    percent = 100 * usage.used / max(usage.total, 1)
    if percent >= cfg.disk_space_clean_forcibly_ratio and cfg.clean_file_forcibly_enable:
        return (
            f"the disk is {percent:.0f}% full (diskSpaceCleanForciblyRatio {cfg.disk_space_clean_forcibly_ratio}%): "
            "cleanup may delete files that have not expired too"
        )
    return None


@click.command()
@store_arg
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say which CommitLog files would be deleted (and why the others stay), changing nothing: the store "
    "is not opened, no byte or file date changes.",
)
@conf_opt
@json_opt
def clean(store, dry_run, conf, as_json):
    """Run the expired-file cleanup now (RocketMQ's manual delete trigger): CommitLog files older than
    fileReservedTime (72 h by default; their age is their last modification), oldest first, never the last
    (current) one; then the queue and index files in step with the new minimum. Says why files stay."""
    if dry_run:
        _clean_dry_run(store, conf, as_json)
        return
    s, cuts = _open_with_progress(store, conf)
    try:
        with s:
            before = s.min_physical_offset
            deleted = s.delete_expired_files()
            cfg = s.config
            going, why = _clean_plan(_segments(s.root), cfg, cfg.clock())  # what stays, and why
            summary = {
                "store": s.root,
                "commitLogFilesDeleted": deleted,
                "commitLogMinOffsetBefore": before,
                "commitLogMinOffset": s.min_physical_offset,
                "fileReservedTimeHours": cfg.file_reserved_time,
                "why": _why(deleted, why, cfg, s.root),
            }
    except RocketStoreError as e:
        M.fail(str(e))
    except OSError as e:
        M.fail(M.os_problem(e, store))
    _report("cleaned", summary, cuts, as_json)


def _why(deleted: int, why: str, cfg, store: str) -> str:
    head = f"{deleted} file(s) deleted" if deleted else "0 files deleted"
    notes = [why, NOT_DELETE_WHEN.format(cfg.delete_when)]
    disk = _disk_note(store, cfg)
    if disk:
        notes.append(disk)
    return f"{head}; the rest stay: " + "; ".join(notes) if deleted else f"{head}: " + "; ".join(notes)


def _clean_dry_run(store: str, conf, as_json: bool) -> None:
    M.require_store(store)
    cfg = M.load_config(conf)
    segments = _segments(store)
    now = cfg.clock()
    going, why = _clean_plan(segments, cfg, now)
    rows = [
        {"file": f"commitlog/{name}", "bytes": size, "ageHours": round((now - mtime) / HOUR_MS, 1)}
        for name, size, mtime in going
    ]
    new_min = int(segments[len(going)][0]) if len(going) < len(segments) else None
    summary = {
        "store": os.path.abspath(store),
        "dryRun": True,
        "commitLogFilesToDelete": len(going),
        "bytesToFree": sum(size for _n, size, _m in going),
        "commitLogMinOffsetAfter": new_min,
        "fileReservedTimeHours": cfg.file_reserved_time,
        "why": (f"{len(going)} file(s) would be deleted" if going else "0 files would be deleted")
        + (", then the queue and index files wholly below the new minimum offset" if going else "")
        + f"; the rest stay: {why}; {NOT_DELETE_WHEN.format(cfg.delete_when)}",
    }
    disk = _disk_note(store, cfg)
    if disk:
        summary["why"] += f"; {disk}"
    if as_json:
        click.echo(json.dumps({**summary, "files": rows}, ensure_ascii=False))
        return
    M.print_result("clean --dry-run (nothing changed)", summary, rows, False)


@click.command()
@store_arg
@conf_opt
@json_opt
def recover(store, conf, as_json):
    """Open the store (which recovers it: after a crash, every record since the checkpoint is checked and
    dispatched again), report what was cut, and close it cleanly."""
    crashed = os.path.exists(os.path.join(store, "abort"))
    s, cuts = _open_with_progress(store, conf)
    try:
        with s:
            s.wait_dispatched(timeout_s=3600)
            queues, messages = _queue_totals(s)
            summary = {
                "store": s.root,
                "lastShutdown": "crash (abort file)" if crashed else "clean",
                "commitLogMinOffset": s.min_physical_offset,
                "commitLogMaxOffset": s.max_physical_offset,
                "confirmPhyOffset": s.confirm_offset,
                "queues": queues,
                "messages": messages,
            }
    except RocketStoreError as e:
        M.fail(str(e))
    except OSError as e:
        M.fail(M.os_problem(e, store))
    _report("recovered", summary, cuts, as_json)


COMMANDS = (rebuild, clean, recover)


def register(group: click.Group) -> None:
    for command in COMMANDS:
        group.add_command(command)
