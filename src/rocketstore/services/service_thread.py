"""ServiceThread: the one shape of every background service (RocketMQ's ServiceThread): start, stop, wake,
and a loop that pauses, does one round, and logs and goes on when a round fails.

A subclass says what one round is (`do_round`, which returns how long to pause before the next) and,
where it must, what to do once stopped (`on_stop`, e.g. a last flush). `wakeable = False` makes the pause
deaf to wake() (RocketMQ's flushCommitLogTimed: the interval is slept out whatever happens)."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("rocketstore.services")


class ServiceThread:
    name = "rocketstore-service"
    initial_delay_s = 0.0  # pause before the first round
    error_delay_s = 1.0  # pause after a round that raised
    wakeable = True

    def __init__(self):
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what a subclass says
    def do_round(self) -> float:
        """One round; returns the seconds to pause before the next."""
        raise NotImplementedError

    def on_stop(self) -> None:
        """After the last round, in the service's thread."""

    # -- the frame
    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Stop and wait for the thread (its on_stop included)."""
        t = self._thread
        if t is None:
            return
        self._stop.set()
        self._wake.set()
        t.join()
        self._thread = None

    def _pause(self, seconds: float) -> bool:
        """Pause up to `seconds` (a wake() cuts it short when wakeable); False once stopped."""
        if seconds > 0:
            if self.wakeable:
                self._wake.wait(seconds)
                self._wake.clear()
            else:
                self._stop.wait(seconds)
        return not self._stop.is_set()

    def _run(self) -> None:
        delay = self.initial_delay_s
        while self._pause(delay):
            try:
                delay = self.do_round()
            except Exception:  # the service lives on; the error is logged with its traceback
                log.exception("%s: a round failed", self.name)
                delay = self.error_delay_s
        try:
            self.on_stop()
        except Exception:
            log.exception("%s: stopping failed", self.name)
