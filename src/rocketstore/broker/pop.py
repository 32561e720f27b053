"""Pop-style consumption (RocketMQ 5's PopMessageProcessor / AckMessageProcessor /
ChangeInvisibleTimeProcessor, reduced to one store): per group, topic and queue, the next offset to pop and the
messages in flight (popped, not yet acked) with the time they become visible again. A message whose invisible
time ends without an ack is delivered again, its delivery attempt one higher.

Receipt handles are RocketMQ's (ReceiptHandle.encode): "startOffset retrieveTime invisibleTime reviveQueueId
topicType brokerName queueId offset commitLogOffset"; an in-flight message remembers the retrieve time of its
current handle, so a handle superseded by ChangeInvisibleDuration or a redelivery acks nothing (as an ack of an
old CK does nothing in RocketMQ) and an expired one is refused (ReceiptHandle.isExpired).

The state lives in <store>/config/popState.json plus its journal (broker/journal.py: every change is synced
before any answer that depends on it), and each queue's lowest unacked offset is committed to
consumerOffset.json as the group's offset (every few seconds and at close), so a restart of the server keeps
acked messages acked and in-flight ones in flight (redelivered once their time ends). Messages whose time
ends are handed to the retry topic %RETRY%group_topic (release_due, then serve/retry.py), and to %DLQ%group
after the maximum attempts (ack_after); FIFO groups are redelivered in place (pop_orderly)."""

from __future__ import annotations

import os
import threading
import time

from ..errors import RocketStoreError
from ..message import GetStatus
from ..services.service_thread import ServiceThread
from .journal import JournaledState

STATE_FILE = "popState.json"
OFFSETS_EVERY_S = 5.0
FOUND, SKIPPED, MOVED, STOP = "found", "skipped", "moved", "stop"  # PopState.take_new's answers
# get answers whose next offset a pop moves to without delivering anything
_MOVE_ON = (
    GetStatus.NO_MATCHED_MESSAGE,
    GetStatus.OFFSET_TOO_SMALL,
    GetStatus.OFFSET_OVERFLOW_BADLY,
    GetStatus.MESSAGE_WAS_REMOVING,
    GetStatus.OFFSET_FOUND_NULL,
)  # the broker's flushConsumerOffsetInterval
NORMAL_TOPIC = "0"


class OffsetFlush(ServiceThread):
    """ConsumerOffsetManager's persist task: every flushConsumerOffsetInterval (5 s) the pop groups' offsets
    are written, so `rocketstore groups` and the remoting side see the acks of a running server."""

    name = "pop-offsets"
    wakeable = False

    def __init__(self, pop: "PopState", interval_s: float = OFFSETS_EVERY_S):
        super().__init__()
        self.pop = pop
        self.interval_s = max(interval_s, 0.01)
        self.initial_delay_s = self.interval_s

    def do_round(self) -> float:
        self.pop.flush_offsets()
        return self.interval_s


def now_ms() -> int:
    return int(time.time() * 1000)


class HandleError(RocketStoreError, ValueError):
    """A receipt handle that cannot be parsed."""


class Handle:
    __slots__ = (
        "start_offset",
        "retrieve_time",
        "invisible_time",
        "revive_queue",
        "topic_type",
        "broker_name",
        "queue_id",
        "offset",
        "commitlog_offset",
    )

    def __init__(
        self,
        start_offset,
        retrieve_time,
        invisible_time,
        revive_queue,
        topic_type,
        broker_name,
        queue_id,
        offset,
        commitlog_offset=-1,
    ):
        self.start_offset = start_offset
        self.retrieve_time = retrieve_time
        self.invisible_time = invisible_time
        self.revive_queue = revive_queue
        self.topic_type = topic_type
        self.broker_name = broker_name
        self.queue_id = queue_id
        self.offset = offset
        self.commitlog_offset = commitlog_offset

    def encode(self) -> str:
        return " ".join(
            str(x)
            for x in (
                self.start_offset,
                self.retrieve_time,
                self.invisible_time,
                self.revive_queue,
                self.topic_type,
                self.broker_name,
                self.queue_id,
                self.offset,
                self.commitlog_offset,
            )
        )

    @property
    def next_visible_time(self) -> int:
        return self.retrieve_time + self.invisible_time

    def expired(self, now: int | None = None) -> bool:
        return self.next_visible_time <= (now_ms() if now is None else now)

    @classmethod
    def decode(cls, text: str) -> "Handle":
        parts = (text or "").split(" ")
        if len(parts) < 8:
            raise HandleError(f"receipt handle {text!r} cannot be parsed")
        try:
            return cls(
                int(parts[0]),
                int(parts[1]),
                int(parts[2]),
                int(parts[3]),
                parts[4],
                parts[5],
                int(parts[6]),
                int(parts[7]),
                int(parts[8]) if len(parts) > 8 else -1,
            )
        except ValueError:
            raise HandleError(f"receipt handle {text!r} cannot be parsed") from None


class Popped:
    """One message handed out by pop(): the stored message, its handle and delivery attempt."""

    __slots__ = ("message", "handle", "attempt", "invisible_ms")

    def __init__(self, message, handle: Handle, attempt: int, invisible_ms: int):
        self.message, self.handle, self.attempt, self.invisible_ms = message, handle, attempt, invisible_ms


class PopState:
    """The pop bookkeeping of one store. Thread-safe; every change is persisted before it is answered."""

    def __init__(self, store, broker_name: str):
        self.store = store
        self.broker_name = broker_name
        self.path = os.path.join(store.root, "config", STATE_FILE)
        self._lock = threading.RLock()
        self._rr: dict[tuple[str, str], int] = {}
        self.journal = JournaledState(self.path)
        # {"topic@group": {"queueId": {"next": int, "inflight": {"offset": [retrieve, invisible, attempt, phys]}}}}
        self.table: dict = self.journal.load()
        self._committed: dict[tuple[str, str, int], int] = {}
        self._offsets_due: dict[tuple[str, str], dict[int, int]] = {}
        self._offsets_written = 0.0
        # called with the touched {(group, topic)} after each durable change (long polls wake on it)
        self.on_change = None

    # ------------------------------------------------------------------ persistence
    def _save(self, touched: set[tuple[str, str]]) -> None:
        """Make the touched groups' state durable (one journal line each, one fdatasync) before answering.
        Their lowest unacked offsets go to consumerOffset.json at most every OFFSETS_EVERY_S seconds and at
        close, as the broker persists consumer offsets on a schedule: the journal is what a restart trusts."""
        keys = {f"{topic}@{group}" for group, topic in touched}
        self.journal.append({k: self.table.get(k) for k in keys}, self.table)
        if self.on_change is not None:
            self.on_change(touched)
        for group, topic in touched:
            for q, qs in self.table.get(f"{topic}@{group}", {}).items():
                low = min([int(o) for o in qs["inflight"]] + [qs["next"]])
                key = (group, topic, int(q))
                if self._committed.get(key) != low:
                    self._offsets_due.setdefault((group, topic), {})[int(q)] = low
                    self._committed[key] = low
        if self._offsets_due and time.monotonic() - self._offsets_written >= OFFSETS_EVERY_S:
            self._write_offsets()

    def flush_offsets(self) -> None:
        """The offsets not yet written go to consumerOffset.json now (OffsetFlush calls it every
        flushConsumerOffsetInterval: without it the last acks waited for the next change, or the close)."""
        with self._lock:
            if self._offsets_due:
                self._write_offsets()

    def _write_offsets(self) -> None:
        due, self._offsets_due = self._offsets_due, {}
        for (group, topic), offsets in due.items():
            self.store.consumer_offsets.commit(group, topic, offsets)
        self._offsets_written = time.monotonic()

    def close(self) -> None:
        """At shutdown: the snapshot rewritten (the journal emptied) and the groups' offsets committed."""
        with self._lock:
            self.journal.close(self.table)
            if self._offsets_due:
                self._write_offsets()

    def _queue(self, group: str, topic: str, queue_id: int) -> dict:
        qs = self.table.setdefault(f"{topic}@{group}", {}).get(str(queue_id))
        if qs is None:
            committed = self.store.consumer_offsets.query(group, topic, queue_id)
            if committed >= 0:
                start = committed
            else:  # ConsumeInitMode.MAX, except from 0 while the queue still starts at 0 (initPopOffsetByCheckMsgInMem)
                start = 0 if self.store.min_offset(topic, queue_id) <= 0 else self.store.max_offset(topic, queue_id)
            qs = {"next": start, "inflight": {}}
            self.table[f"{topic}@{group}"][str(queue_id)] = qs
        return qs

    # ------------------------------------------------------------------ pop
    def _order(self, group: str, topic: str, queue_ids: list[int]) -> list[int]:
        """The queues in this call's order: each call starts one queue further (round robin over calls)."""
        start = self._rr.get((group, topic), 0)
        self._rr[(group, topic)] = start + 1
        return [queue_ids[(start + i) % len(queue_ids)] for i in range(len(queue_ids))] if queue_ids else []

    def _deliver_again(
        self, group, topic, q, qs, off, now, invisible_ms, out, max_attempts=0, dead_letter=None
    ) -> None:
        """An in-flight message whose invisible time ended, delivered again (attempt + 1, a new handle, appended
        to `out`); no longer in flight when it is gone from the store (expired files) or when its attempt
        would pass `max_attempts` (> 0: then handed to `dead_letter`)."""
        entry = qs["inflight"][str(off)]
        msg = self._read(group, topic, q, off)
        if msg is None:
            del qs["inflight"][str(off)]
            return
        attempt = entry[2] + 1
        if max_attempts > 0 and dead_letter is not None and attempt > max_attempts:
            dead_letter(msg)
            del qs["inflight"][str(off)]
            return
        qs["inflight"][str(off)] = [now, invisible_ms, attempt, msg.physical_offset]
        out.append(Popped(msg, self._handle(off, now, invisible_ms, q, msg.physical_offset), attempt, invisible_ms))

    def pop(
        self,
        group: str,
        topic: str,
        queue_ids: list[int],
        batch: int,
        invisible_ms: int,
        tags=None,
        sql: str | None = None,
    ) -> list[Popped]:
        """Up to `batch` messages: in-flight ones whose invisible time ended first (attempt + 1), then new ones
        from each queue in turn (round robin over calls). Nothing found: []."""
        out: list[Popped] = []
        now = now_ms()
        with self._lock:
            touched = False
            order = self._order(group, topic, queue_ids)
            # 1. redeliveries
            for q in order:
                qs = self._queue(group, topic, q)
                due = sorted(int(o) for o, e in qs["inflight"].items() if e[0] + e[1] <= now)
                for off in due:
                    if len(out) >= batch:
                        break
                    touched = True
                    self._deliver_again(group, topic, q, qs, off, now, invisible_ms, out)
            # 2. new messages
            for q in order:
                if len(out) >= batch:
                    break
                qs = self._queue(group, topic, q)
                for _ in range(8):  # a filtered get may find nothing in one scan; take a few steps
                    if len(out) >= batch:
                        break
                    step = self.take_new(group, topic, q, qs, batch - len(out), invisible_ms, now, out, tags, sql)
                    touched = touched or step != STOP
                    if step not in (FOUND, SKIPPED):
                        break
            if touched:
                self._save({(group, topic)})
        return out

    def pop_topics(
        self,
        group: str,
        sources: list[tuple[str, list[int]]],
        batch: int,
        invisible_ms: int,
        tags=None,
        sql: str | None = None,
    ) -> list[tuple[str, Popped]]:
        """pop() over several (topic, queue ids) in turn, as one step, up to `batch` messages in all; each with
        the topic it came from (a retry topic's messages are answered under their original topic)."""
        out: list[tuple[str, Popped]] = []
        with self._lock:
            for topic, queue_ids in sources:
                if len(out) >= batch:
                    break
                out.extend(
                    (topic, p)
                    for p in self.pop(group, topic, queue_ids, batch - len(out), invisible_ms, tags=tags, sql=sql)
                )
        return out

    def pop_orderly(
        self,
        group: str,
        topic: str,
        queue_ids: list[int],
        batch: int,
        invisible_ms: int,
        tags=None,
        sql: str | None = None,
        max_attempts: int = 0,
        dead_letter=None,
    ) -> list[Popped]:
        """Orderly pop for a FIFO group (fifo.py): up to `batch` messages, queue by queue (round robin over
        calls). A queue with a message in flight gives nothing (ConsumerOrderInfoManager.checkBlock); one whose
        in-flight messages all became visible again gives them again (attempt + 1, queue order) and nothing
        newer; a queue with nothing in flight gives its next messages.

        A message due again whose delivery attempt would pass `max_attempts` (> 0) is handed to `dead_letter`
        (the stored message) and done with instead (PopMessageResultFilterImpl's TO_DLQ), so its queue moves on."""
        out: list[Popped] = []
        now = now_ms()
        with self._lock:
            touched = False
            for q in self._order(group, topic, queue_ids):
                if len(out) >= batch:
                    break
                qs = self._queue(group, topic, q)
                inflight = qs["inflight"]
                if inflight:
                    if any(e[0] + e[1] > now for e in inflight.values()):
                        continue  # blocked: part of it is still being consumed
                    for off in sorted(int(o) for o in inflight):
                        if len(out) >= batch:
                            break
                        touched = True
                        self._deliver_again(group, topic, q, qs, off, now, invisible_ms, out, max_attempts, dead_letter)
                    continue
                for _ in range(8):  # a filtered get may find nothing in one scan
                    if len(out) >= batch:
                        break
                    step = self.take_new(group, topic, q, qs, batch - len(out), invisible_ms, now, out, tags, sql)
                    touched = touched or step != STOP
                    if step != SKIPPED:
                        break  # one run of a queue per pop: its order is kept
            if touched:
                self._save({(group, topic)})
        return out

    def take_new(self, group, topic, q, qs, want, invisible_ms, now, out, tags=None, sql=None) -> str:
        """One get from the queue's next offset. Messages found go in flight (appended to `out`); the queue's
        next offset moves past what the get looked at. Answers FOUND, SKIPPED (a stretch the filter refused:
        look again), MOVED (past removed or out-of-range offsets) or STOP (nothing to take)."""
        r = self.store.get(group, topic, q, qs["next"], max_count=want, tags=tags, sql=sql)
        if r.status is GetStatus.FOUND:
            for m in r.messages:
                off = m.queue_offset
                qs["inflight"][str(off)] = [now, invisible_ms, 1, m.physical_offset]
                out.append(Popped(m, self._handle(off, now, invisible_ms, q, m.physical_offset), 1, invisible_ms))
            qs["next"] = r.next_begin_offset
            return FOUND
        if r.next_begin_offset != qs["next"] and r.status in _MOVE_ON:
            qs["next"] = r.next_begin_offset
            return SKIPPED if r.status is GetStatus.NO_MATCHED_MESSAGE else MOVED
        return STOP

    def next_due_ms(self, group: str, topic: str) -> int | None:
        """When the earliest in-flight message of group/topic becomes visible again, or None."""
        with self._lock:
            times = [
                e[0] + e[1] for qs in self.table.get(f"{topic}@{group}", {}).values() for e in qs["inflight"].values()
            ]
        return min(times) if times else None

    def _read(self, group, topic, queue_id, offset):
        r = self.store.get(group, topic, queue_id, offset, max_count=1)
        if r.status is GetStatus.FOUND and r.messages and r.messages[0].queue_offset == offset:
            return r.messages[0]
        return None

    def _handle(self, offset, retrieve, invisible, queue_id, phys) -> Handle:
        return Handle(offset, retrieve, invisible, 0, NORMAL_TOPIC, self.broker_name, queue_id, offset, phys)

    # ------------------------------------------------------------------ ack and change invisible time
    def ack(self, group: str, topic: str, handle: Handle) -> bool:
        """True when the handle is live and the message is now acked (or was acked already); False when the
        handle expired."""
        return self.ack_all(group, [(topic, handle)])[0]

    def ack_all(self, group: str, acks: list[tuple[str, Handle]]) -> list[bool]:
        """Several acks of one group ((topic, handle) each: an AckMessage's entries) made durable together,
        one journal append and one fdatasync for them all instead of one each; each answer as `ack` gives it."""
        now = now_ms()
        answers, touched = [], set()
        with self._lock:
            for topic, handle in acks:
                answers.append(not handle.expired(now))
                qs = self.table.get(f"{topic}@{group}", {}).get(str(handle.queue_id)) if answers[-1] else None
                entry = qs["inflight"].get(str(handle.offset)) if qs is not None else None
                if entry is None or entry[0] != handle.retrieve_time:
                    continue  # expired, acked already, or a superseded handle: nothing to do
                del qs["inflight"][str(handle.offset)]
                touched.add((group, topic))
            if touched:
                self._save(touched)
        return answers

    def change_invisible(self, group: str, topic: str, handle: Handle, invisible_ms: int) -> Handle | None:
        """A new handle, the message invisible for invisible_ms from now; None for an expired, superseded or
        acked handle."""
        now = now_ms()
        if handle.expired(now):
            return None
        with self._lock:
            qs = self.table.get(f"{topic}@{group}", {}).get(str(handle.queue_id))
            entry = qs["inflight"].get(str(handle.offset)) if qs else None
            if entry is None or entry[0] != handle.retrieve_time:
                return None
            qs["inflight"][str(handle.offset)] = [now, invisible_ms, entry[2], entry[3]]
            self._save({(group, topic)})
        return Handle(
            handle.start_offset,
            now,
            invisible_ms,
            handle.revive_queue,
            handle.topic_type,
            handle.broker_name,
            handle.queue_id,
            handle.offset,
            handle.commitlog_offset,
        )

    def release_due(self, group: str, topic: str, release, now: int | None = None) -> int:
        """Every in-flight message of group/topic whose invisible time ended is done with, as one step: those
        still in the store are first handed to `release(message, retrieve_time)` (the revive into the retry
        topic). Returns how many were handed over."""
        now = now_ms() if now is None else now
        count = 0
        with self._lock:
            queues = self.table.get(f"{topic}@{group}")
            if not queues:
                return 0
            touched = False
            for q, qs in queues.items():
                for off in sorted(int(o) for o, e in qs["inflight"].items() if e[0] + e[1] <= now):
                    entry = qs["inflight"][str(off)]
                    msg = self._read(group, topic, int(q), off)
                    if msg is not None:
                        release(msg, entry[0])
                        count += 1
                    del qs["inflight"][str(off)]
                    touched = True
            if touched:
                self._save({(group, topic)})
        return count

    def ack_after(self, group: str, topic: str, handle: Handle, first) -> str:
        """The message of a live handle handed to `first` (ForwardMessageToDeadLetterQueue: into the DLQ), then
        acked, as one step. '' when done, else why not (expired, acked or superseded, gone from the store)."""
        with self._lock:
            if handle.expired():
                return "receipt handle is expired"
            qs = self.table.get(f"{topic}@{group}", {}).get(str(handle.queue_id))
            entry = qs["inflight"].get(str(handle.offset)) if qs else None
            if entry is None or entry[0] != handle.retrieve_time:
                return "receipt handle is acked or superseded"
            msg = self._read(group, topic, handle.queue_id, handle.offset)
            if msg is None:
                return "the message is gone from the store"
            first(msg)
            self.ack(group, topic, handle)
        return ""

    def inflight_count(self, group: str, topic: str) -> int:
        with self._lock:
            return sum(len(qs["inflight"]) for qs in self.table.get(f"{topic}@{group}", {}).values())
