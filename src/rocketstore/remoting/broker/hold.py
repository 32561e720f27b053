"""Long polling (RocketMQ's PullRequestHoldService): a pull that found nothing waits until its queue's max offset
passes the offset it asked for, or its time is up. Held pulls are kept by topic and queue (RocketMQ's
topic@queueId keys), so a message wakes only the pulls held on its own queue:
- a put this broker makes names its queue (`arrived(topic, queue_id)`): that queue's pulls look again;
- every other put (sends over gRPC, delayed messages coming due, transactions committed elsewhere) reaches a
  watcher thread through the store's arrivals; it looks at the max offset of each queue pulls are held on and
  wakes the pulls of the queues that grew (a queue that did not grow costs one comparison, its pulls none). It
  skips even that when nothing was dispatched since its last look but this broker's own puts, which woke their
  queues already (the store's dispatched end, reput's offset, is where its last look or the broker's last
  contiguous put left it).
Pulls also look once a second on their own (a wake-up that slipped between two waits). The watcher waits on the
store only while a pull is held: a waiter there makes every put wake it (a thread switch per message, most of a
send's CPU when nobody pulls).

A held pull is parked, not work in flight (`Connection.park()`): thousands of them never make a send or an offset
query SYSTEM_BUSY. Their number is bounded separately, `max_held` (RocketMQ bounds it by nothing but memory): a
pull that would be held past it is answered at once (`wait` returns None)."""

from __future__ import annotations

import asyncio
import contextlib
import threading

RECHECK_S = 1.0
MAX_HELD = 16384


class _Waiter:
    __slots__ = ("offset", "group", "event", "released")

    def __init__(self, offset: int, group: str | None):
        self.offset = offset
        self.group = group
        self.event = asyncio.Event()
        self.released = False  # answered before its time: the queue's consumer offset was reset


class PullHold:
    def __init__(self, store, max_held: int = MAX_HELD):
        self.store = store
        self.max_held = max_held
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.waiters: dict[tuple[str, int], set[_Waiter]] = {}  # topic, queue id -> the pulls held on it
        self._seen: dict[tuple[str, int], int] = {}  # each held queue's max offset when last looked at
        self.held = 0  # pulls waiting now (counted on the loop)
        self.examined = 0  # held pulls a wake-up looked at (all time): a put examines its own queue's only
        self.woken = 0  # held pulls woken by a wake-up (all time)
        self._check_scheduled = False
        self._known_end: int | None = None  # the dispatched end the held queues were last looked at for
        self._wanted = threading.Event()  # set while held: the watcher then waits on the store's arrivals

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

    def arrived_threadsafe(self, topic: str | None = None, queue_id: int | None = None, put=None) -> None:
        """arrived(), from any thread."""
        if threading.get_ident() == self._loop_thread:
            # a put made on the loop itself (a send): no wake-up through the loop's self-pipe, a system call and a
            # pass of the loop per message
            self.arrived(topic, queue_id, put)
            return
        loop = self._loop
        if loop is None or loop.is_closed() or not self.held:
            return
        if topic is None:
            if self._check_scheduled:  # one look at the held queues is enough for any number of arrivals
                return
            self._check_scheduled = True
        try:
            loop.call_soon_threadsafe(self.arrived, topic, queue_id, put)
        except RuntimeError:  # the loop closed meanwhile
            pass

    def arrived(self, topic: str | None = None, queue_id: int | None = None, put=None) -> None:
        """Messages arrived in topic's queue queue_id (its held pulls look again; `put`: this broker's PutResult
        there), or somewhere unknown (None): the held queues whose max offset grew have their pulls look again."""
        if topic is None:
            self._check_scheduled = False
            end = self.store.dispatched_offset  # everything below it is in its queue
            if end == self._known_end:
                return
            self._known_end = end
            for key in list(self.waiters):
                self._wake(key)
            return
        if put is not None and put.physical_offset == self._known_end:
            after = put.physical_offset + put.size
            if self.store.dispatched_offset >= after:  # dispatched: its queue's pulls are woken below
                self._known_end = after
        self._wake((topic, queue_id))

    def _wake(self, key: tuple[str, int]) -> None:
        waiters = self.waiters.get(key)
        if not waiters:
            return
        top = self.store.max_offset(*key)
        if top <= self._seen.get(key, -1):
            return  # the queue did not grow since the last look: nobody held on it can be served
        self._seen[key] = top
        for w in waiters:
            self.examined += 1
            if w.offset < top and not w.event.is_set():
                self.woken += 1
                w.event.set()

    def release(self, topic: str, queue_id: int, group: str) -> None:
        """The group's pulls held on a queue stop waiting now (a server-side offset reset hands them the new
        offset)."""
        for w in self.waiters.get((topic, queue_id), ()):
            if w.group == group:
                w.released = True
                w.event.set()

    async def wait(
        self, topic: str, queue_id: int, offset: int, timeout_s: float, conn=None, group: str | None = None
    ) -> bool | None:
        """True once the queue holds a message at `offset` or beyond, False when the time is up, None when
        max_held pulls are held already (the pull is not held). With `conn`, the wait is parked (not in flight)."""
        if self.held >= self.max_held:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        key = (topic, queue_id)
        me = _Waiter(offset, group)
        waiters = self.waiters.get(key)
        if waiters is None:
            waiters = self.waiters[key] = set()
            self._seen[key] = self.store.max_offset(topic, queue_id)
        waiters.add(me)
        self.held += 1
        self._wanted.set()
        try:
            with conn.park() if conn is not None else contextlib.nullcontext():
                while True:
                    if self.store.max_offset(topic, queue_id) > offset:
                        return True
                    if me.released:
                        return False
                    left = deadline - loop.time()
                    if left <= 0:
                        return False
                    me.event.clear()
                    try:
                        await asyncio.wait_for(me.event.wait(), min(left, RECHECK_S))
                    except asyncio.TimeoutError:
                        pass
        finally:
            self.held -= 1
            waiters.discard(me)
            if not waiters:
                del self.waiters[key]
                self._seen.pop(key, None)
            if not self.held:
                self._wanted.clear()
