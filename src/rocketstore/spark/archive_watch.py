"""Archiving segments as they close (`rocketstore archive --watch`): the archive job's runs, one a round, on
one Spark session, holding the archive's lock from the first round to the last (no other job writes the
archive meanwhile), until a stop is asked for.

Which segments a round takes: every closed one not archived yet (the archive job's rule), with no wait for
age. Cleanup deletes only closed segments, and with archiveEnable only those the archive holds: archiving
each as soon as the writer leaves it is what keeps cleanup from ever waiting on the archive for longer than
one round (a segment reaches fileReservedTime long after it closed; a full disk's forcible cleanup may want
a segment at once, and gets it within `every` seconds and a round).

A stop (an Event, set by the caller: on SIGINT/SIGTERM for the command) is safe at any instant: between
rounds it ends the wait; in a round, the batch being staged is abandoned (its Spark job cancelled, nothing of
it committed), the batches staged before it are committed, the rest left for the next run. Whatever is stopped
or killed, the manifest's rule holds (rocketstore.files.archive_manifest): a segment is in with all its
files, or not in, and the next run removes what it left.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time

from ..errors import ArchiveError
from ..files.archive_manifest import ArchiveManifest
from .archive_job import archive_into, prepare

_CANCEL_POLL_S = 0.2  # how often the canceller looks whether the stop was asked for


def watch(
    store,
    dest,
    spark,
    every: float,
    stop: threading.Event | None = None,
    on_round=None,
    include_system: bool = False,
    include_prepared: bool = False,
    progress=None,
    segments_per_job: int | None = None,
    **options,
) -> dict:
    """Archive `store`'s segments into `dest` as they close: a round (archive_job.archive_into) every
    `every` seconds from the start of the last, until `stop` is set. `on_round(summary)` after each round
    (archive()'s summary, with `round`: 1, 2, ...). Returns the totals: store, archive, rounds, segments,
    records, left (the segments a round cut short by the stop left for the next run), seconds."""
    if not (math.isfinite(every) and every > 0):
        raise ArchiveError(f"every={every!r}: the seconds between rounds must be more than 0")
    started = time.monotonic()
    root, target = prepare(store, dest, options)
    stop = stop or threading.Event()
    totals = {"store": root, "archive": target, "rounds": 0, "segments": 0, "records": 0, "left": 0}
    with ArchiveManifest(target) as manifest, _cancel_jobs_on(stop, spark):
        while not stop.is_set():
            began = time.monotonic()
            summary = archive_into(
                manifest,
                root,
                spark,
                include_system,
                include_prepared,
                progress,
                segments_per_job,
                stopping=stop.is_set,
                options=options,
            )
            totals["rounds"] += 1
            totals["segments"] += summary["segments"]
            totals["records"] += summary["records"]
            totals["left"] = summary.get("left", 0)
            if on_round is not None:
                on_round({**summary, "round": totals["rounds"]})
            stop.wait(max(every - (time.monotonic() - began), 0))
    totals["seconds"] = round(time.monotonic() - started, 3)
    return totals


@contextlib.contextmanager
def _cancel_jobs_on(stop: threading.Event, spark):
    """While the block runs, a stop cancels the session's running Spark jobs (the archive job's staging
    write: nothing of it is committed) so the stop does not wait for a whole batch. From a thread of its own,
    not a signal handler: the main thread may be inside a call to the JVM."""
    done = threading.Event()

    def cancel_when_stopped():
        while not done.is_set():
            if stop.wait(_CANCEL_POLL_S):
                if not done.is_set():
                    with contextlib.suppress(Exception):  # a session already stopping has nothing to cancel
                        spark.sparkContext.cancelAllJobs()
                return

    thread = threading.Thread(target=cancel_when_stopped, name="rocketstore-archive-stop", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
