"""`rocketstore archive STORE --to DEST --watch`: rocketstore.spark.archive_watch on one Spark session, a
line per round on stdout (with --json a JSON object per round, then the totals), stopped by SIGINT or
SIGTERM.

The first signal asks the watcher to stop (the round in progress abandons the batch it is writing, commits
nothing half done, and the command exits 0 with its totals); a second one ends the process at once with the
signal's default action, which is as safe: the archive's manifest holds whatever instant the process dies
at, and the next run removes what it left."""

from __future__ import annotations

import datetime
import json
import os
import signal
import threading

import click

from . import main as M
from .archive import NEEDS, phases, warn_missing
from .progress import Phases
from .spark_run import spark_session

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopOnSignals:
    """`with StopOnSignals(stop):` SIGINT and SIGTERM set `stop`; a second one takes the default action. The
    handlers the block found are put back after it. `install()` again after a SparkContext starts: it
    installs a SIGINT handler of its own (one that cancels the jobs and raises KeyboardInterrupt)."""

    def __init__(self, stop: threading.Event):
        self.stop = stop
        self.was = {}

    def _handle(self, signum, _frame) -> None:
        if self.stop.is_set():  # asked twice: now (the default action: the process ends)
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.stop.set()  # (only that: the main thread may be anywhere, even inside a print)

    def install(self) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._handle)

    def __enter__(self) -> "StopOnSignals":
        self.was = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        self.install()
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.was.items():
            signal.signal(sig, handler)


def run_watch(store: str, dest: str, every: float, master, spark_props: dict, as_json: bool, job: dict) -> None:
    """The watcher: Spark started (said on stderr), a line per round, the totals at the end."""
    stop = threading.Event()
    with StopOnSignals(stop) as signals, Phases() as shown:
        with spark_session(master, spark_props, shown, store, NEEDS) as spark:
            signals.install()
            from rocketstore.spark import archive_watch

            click.echo(
                f"rocketstore: watching {store}: each CommitLog segment into {dest} as it closes, a round every "
                f"{every:g} s (SIGINT or SIGTERM stops)",
                err=True,
            )

            def on_round(summary: dict) -> None:
                warn_missing(summary)
                if as_json:
                    click.echo(json.dumps({"time": _now(), **summary}, ensure_ascii=False))
                elif summary["segments"] or summary["undone"]:
                    click.echo(round_line(summary))
                if not summary["segments"]:
                    shown.phase(f"watching: nothing closed to archive (round {summary['round']})")

            totals = archive_watch.watch(
                store, dest, spark, every=every, stop=stop, on_round=on_round, progress=phases(shown), **job
            )
    if as_json:
        click.echo(json.dumps({"time": _now(), **totals}, ensure_ascii=False))
        return
    M.print_result("archive --watch stopped", totals, [], False)


def round_line(summary: dict) -> str:
    """A round that did something, in one line: when, what it archived (each segment's name, or the first and
    the last of many), how many records, what it undid first."""
    names = summary["archived"]
    what = ", ".join(names) if len(names) <= 3 else f"{names[0]} .. {names[-1]}"
    line = f"{_now()} round {summary['round']}: archived {len(names)} segment{'' if len(names) == 1 else 's'}"
    if names:
        line += f" ({what}), {summary['records']} records, in {summary['seconds']:g} s"
    if summary["undone"]:
        line += f"; removed first what a stopped run left of {', '.join(summary['undone'])}"
    if summary.get("stopped"):
        line += f"; stopped with {summary['left']} left for the next run"
    return line


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
