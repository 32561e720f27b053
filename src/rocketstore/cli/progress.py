"""What the long maintenance commands (rebuild, recover, clean) are doing, shown on stderr as they go.

On a terminal: one Rich bar, labelled with the current phase, over bytes of CommitLog data when the phase
counts them, over Spark tasks when a Spark stage runs, pulsing otherwise; each step redraws it at once (a
store of a few MiB is recovered in a fraction of a second, between two timed refreshes). Elsewhere (a pipe, a
log file): nothing, or with `lines`, one short line per phase, so a script's stderr stays readable. The bar
is transient: the command's report replaces it.
"""

from __future__ import annotations

import sys
import threading

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from . import output as O

TRACKER_POLL_S = 0.25  # how often the Spark stage tracker is asked how many tasks are done


class Phases:
    """`with Phases() as shown:` then `shown.phase("label")`, `shown.bytes(done, total)` (a callback for
    recovery's progress), `shown.tasks(done, total)`."""

    def __init__(self, lines: bool = False):
        self.err = O.console(stderr=True)
        self.live = self.err.is_terminal
        self.lines = lines and not self.live
        self.bar = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            TextColumn("{task.fields[amount]}", markup=False),
            TimeElapsedColumn(),
            console=self.err,
            transient=True,
            disable=not self.live,
        )
        self.task = None
        self.lock = threading.Lock()  # the Spark tracker's thread updates the bar too

    def __enter__(self) -> "Phases":
        self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.stop()

    def phase(self, label: str) -> None:
        """A new phase: its label, a pulsing bar until bytes or tasks are counted; a line when not a terminal."""
        if self.lines:
            print(label, file=sys.stderr, flush=True)
        if not self.live:
            return
        with self.lock:
            if self.task is not None:
                self.bar.remove_task(self.task)
            self.task = self.bar.add_task(label, total=None, amount="")
            self.bar.refresh()

    def bytes(self, done: int, total: int) -> None:
        """recovery's progress(done, total): bytes of CommitLog data."""
        pct = f" {100 * done // total}%" if total else ""
        self._show(done, total, f"{O.human_size(done)} of {O.human_size(total)}{pct}")

    def tasks(self, done: int, total: int) -> None:
        self._show(done, total, f"{done}/{total} tasks")

    def _show(self, done: int, total: int, amount: str) -> None:
        if not self.live:
            return
        with self.lock:
            if self.task is not None:
                self.bar.update(self.task, completed=done, total=max(total, 1), amount=amount, refresh=True)


class SparkTasks:
    """Spark's own progress, which the quiet log settings hide: a thread asks the SparkContext's status
    tracker how many tasks of the running stages are done and shows it on the bar (only on a terminal)."""

    def __init__(self, sc, shown: Phases):
        self.tracker = sc.statusTracker()
        self.shown = shown
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._poll, name="rocketstore-spark-progress", daemon=True)

    def __enter__(self) -> "SparkTasks":
        if self.shown.live:
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join()

    def _poll(self) -> None:
        while not self.stop_event.wait(TRACKER_POLL_S):
            try:
                infos = [self.tracker.getStageInfo(s) for s in self.tracker.getActiveStageIds()]
            except Exception:  # the context is stopping: nothing more to show
                return
            infos = [i for i in infos if i is not None]
            if infos:
                self.shown.tasks(sum(i.numCompletedTasks for i in infos), sum(i.numTasks for i in infos))
