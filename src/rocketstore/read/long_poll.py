"""Long polling: gets and consumers that found nothing wait here until the dispatch pipeline says records
arrived (RocketMQ's PullRequestHoldService / messageArrivingListener), or their time is up."""

from __future__ import annotations

import threading
import time


class Arrivals:
    def __init__(self):
        self._arrival = threading.Condition(threading.Lock())
        self.waiters = 0  # read by the put lane (lane.c), which calls notify only when someone waits

    def notify(self) -> None:
        """Records were dispatched: wake whoever waits (nothing to do when nobody does)."""
        if self.waiters:
            with self._arrival:
                self._arrival.notify_all()

    def wait(self, timeout_s: float) -> None:
        """Sleep until records arrive or the timeout passes."""
        with self._arrival:
            self.waiters += 1
            try:
                self._arrival.wait(timeout_s)
            finally:
                self.waiters -= 1

    def poll(self, result, again, pending, wait_ms: int):
        """Ask again (`again()`) each time records arrive, at least every 0.1 s, while `pending(result)` and
        wait_ms have not passed; returns the last result."""
        deadline = time.monotonic() + wait_ms / 1000.0
        with self._arrival:
            self.waiters += 1
            try:
                while pending(result):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._arrival.wait(min(left, 0.1))
                    result = again()
            finally:
                self.waiters -= 1
        return result
