"""Long polling (RocketMQ's PullRequestHoldService): a pull that found nothing waits until its queue's max offset
passes the offset it asked for, or its time is up. Every put this broker makes, and every dispatch the store
reports (a watcher thread on the store's arrivals: sends over gRPC, delayed messages coming due), wakes the
waiting pulls to look again; they also look once a second (a wake-up that slipped between two waits). The
watcher waits on the store only while a pull is held: a waiter there makes every put wake it (a thread switch
per message, most of a send's CPU when nobody pulls)."""

from __future__ import annotations

import asyncio
import threading

RECHECK_S = 1.0


class PullHold:
    def __init__(self, store):
        self.store = store
        self._event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held = 0  # pulls waiting now (counted on the loop)
        self._wanted = threading.Event()  # set while _held: the watcher then waits on the store's arrivals

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._thread = threading.Thread(target=self._watch, name="broker-arrivals", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wanted.set()
        if self._thread is not None:
            self._thread.join(5)

    def _watch(self) -> None:
        while not self._stop.is_set():
            if not self._wanted.wait(0.5):
                continue
            self.store.wait_for_arrival(0.5)
            self.arrived_threadsafe()

    def arrived_threadsafe(self) -> None:
        """arrived(), from any thread."""
        loop = self._loop
        if threading.get_ident() == self._loop_thread:
            # a put made on the loop itself (a send): no wake-up through the loop's self-pipe, a system call and a
            # pass of the loop per message
            self.arrived()
        elif loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self.arrived)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def arrived(self) -> None:
        """Messages may have arrived: every waiting pull looks again."""
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, topic: str, queue_id: int, offset: int, timeout_s: float) -> bool:
        """True once the queue holds a message at `offset` or beyond, False when the time is up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self._held += 1
        self._wanted.set()
        try:
            while True:
                if self.store.max_offset(topic, queue_id) > offset:
                    return True
                left = deadline - loop.time()
                if left <= 0:
                    return False
                try:
                    await asyncio.wait_for(self._event.wait(), min(left, RECHECK_S))
                except asyncio.TimeoutError:
                    pass
        finally:
            self._held -= 1
            if not self._held:
                self._wanted.clear()
