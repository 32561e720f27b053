"""Delay messages: a message whose delivery timestamp (TIMER_DELIVER_MS, from the v2 delivery_timestamp) lies in
the future is kept out of its topic until then.

As RocketMQ 5's broker does it (HookUtils.transformTimerMessage), such a message is stored in the timer topic
rmq_sys_wheel_timer, queue 0, with TIMER_OUT_MS (its time), REAL_TOPIC and REAL_QID; at its time a new record
goes to the real topic and queue (TimerMessageStore.convertMessage: same body, flag, sysFlag, born time and
host, properties plus TIMER_ENQUEUE_MS / TIMER_DEQUEUE_MS). RocketMQ's timer wheel rounds the time down to
timerPrecisionMs (1 s), so it may deliver up to a second early; rocketstore delivers no earlier than the time.
Instead of the timer wheel's timerlog / timerwheel files, rocketstore keeps the timer messages not yet
delivered in memory, rebuilt at start from the timer topic and config/timerState.json: the lowest timer queue
offset not yet delivered, and the delivered ones above it (written atomically after each delivery). A
message already delivered when the server stopped is not delivered again; one due while the server was down
is delivered at start. One that cannot be delivered holds up no other (deliver(): another queue of its topic,
or skipped and logged, as TimerMessageStore.doPut moves on past PUT_NO_RETRY)."""

from __future__ import annotations

import dataclasses
import heapq
import json
import logging
import os
import threading
import time

from ..config.files import read_with_backup, write_atomically
from ..message import GetStatus, Message, PutResult, PutStatus
from ..services.service_thread import ServiceThread
from ..validation import topic_problem
from ..formats import properties as P
from .rules import is_client_send_forbidden

log = logging.getLogger("rocketstore.serve")

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
STATE_FILE = "timerState.json"
SYS_GROUP = "CID_SYS_RMQ_TIMER"


def _now() -> int:
    return int(time.time() * 1000)


# what a due delayed message's delivery came to (deliver()): in its topic, skipped for good, or to be tried again
DELIVERED, SKIPPED, RETRY = "delivered", "skipped", "retry"
# statuses of a put that stored the message (a sync flush that timed out stored it all the same)
_STORED = (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE)
# statuses no retry changes (TimerMessageStore.doPut's PUT_NO_RETRY)
_PERMANENT = (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED)


def existing_queue(store, topic: str, queue_id: int) -> int:
    """The queue a due message goes to: its own, or, when its topic has a config and the queue lies beyond it
    (the topic shrank while the message waited: updateTopic 4 -> 2 queues), queue_id modulo the topic's write
    queues, so it still reaches the topic's consumers."""
    cfg = store.topic_configs.get(topic)
    if not cfg:
        return queue_id
    write = int(cfg.get("writeQueueNums") or 0)
    limit = max(write, int(cfg.get("readQueueNums") or 0))
    if 0 <= queue_id < limit:
        return queue_id
    n = write or limit
    return queue_id % n if n > 0 else queue_id


def deliver(store, msg: Message, queue_id: int, where: str) -> tuple[str, PutResult | None]:
    """Put a due delayed message (remoting delay levels: schedule.py; the timer: DelayService) into its real
    topic, with what it came to. One message never holds up the others, as RocketMQ's TimerMessageStore moves
    on past a put that fails for good (doPut: MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED are PUT_NO_RETRY):
    - a queue beyond its topic's queues: delivered to an existing one (existing_queue);
    - a real topic that is no topic, or one no client may send to (rules.is_client_send_forbidden: a forged
      REAL_TOPIC of RMQ_SYS_TRANS_OP_HALF_TOPIC, say), or a put refused for good: SKIPPED and logged; the
      message stays readable where it waited (SCHEDULE_TOPIC_XXXX / rmq_sys_wheel_timer) until the store's
      retention removes it;
    - a put the store refuses for now (disk full, not writable, busy): RETRY, the caller tries again later."""
    topic = msg.topic
    if not isinstance(topic, str) or topic_problem(topic) or is_client_send_forbidden(topic):
        log.error("%s: real topic %r is no topic a client may send to: the message is skipped", where, topic)
        return SKIPPED, None
    q = existing_queue(store, topic, queue_id)
    if q != queue_id:
        log.warning("%s: queue %d of %s no longer exists: delivered to queue %d", where, queue_id, topic, q)
    r = store.put(msg, q)
    if r.status in _STORED:
        return DELIVERED, r
    if r.status in _PERMANENT:
        log.error("%s: delivery to %s queue %d refused for good (%s): the message is skipped", where, topic, q,
                  r.status.name)  # fmt: skip
        return SKIPPED, r
    log.warning("%s: delivery to %s queue %d refused (%s): tried again later", where, topic, q, r.status.name)
    return RETRY, r


def deliver_ms(props: dict) -> int | None:
    """A message's delivery time in ms (TIMER_DELIVER_MS, TIMER_DELAY_MS, TIMER_DELAY_SEC), or None."""
    try:
        if props.get(P.TIMER_DELAY_SEC) is not None:
            return _now() + int(props[P.TIMER_DELAY_SEC]) * 1000
        if props.get(P.TIMER_DELAY_MS) is not None:
            return _now() + int(props[P.TIMER_DELAY_MS])
        if props.get(P.TIMER_DELIVER_MS) is not None:
            return int(props[P.TIMER_DELIVER_MS])
    except ValueError:
        return None
    return None


class DelayService(ServiceThread):
    """Timer messages of one store: put() takes delay messages in, a thread delivers them at their time (it
    pauses until the earliest one's time, a second at most; a put wakes it)."""

    name = "delay-delivery"

    def __init__(self, store, extra: dict | None = None):
        super().__init__()
        extra = extra or {}
        self.store = store
        self.max_delay_ms = int(extra.get("maxDelayTimeMills", 24 * 3600 * 1000))  # ProxyConfig.maxDelayTimeMills
        self.path = os.path.join(store.root, "config", STATE_FILE)
        self._lock = threading.RLock()
        self._heap: list[tuple[int, int, int]] = []  # (deliver ms, timer queue offset, commit log offset)
        state, problems = read_with_backup(self.path, json.loads)
        if state is None and problems:
            raise ValueError("cannot read the timer state: " + "; ".join(problems))
        state = state or {}
        self.low = max(int(state.get("offset", 0)), self.store.min_offset(TIMER_TOPIC, 0), 0)
        self.delivered: set[int] = {int(o) for o in state.get("delivered", ()) if int(o) >= self.low}
        off = self.low
        while True:
            r = self.store.get(SYS_GROUP, TIMER_TOPIC, 0, off, max_count=64)
            if r.status is not GetStatus.FOUND:
                if r.status is GetStatus.NO_MATCHED_MESSAGE and r.next_begin_offset > off:
                    off = r.next_begin_offset
                    continue
                break
            for m in r.messages:
                if m.queue_offset not in self.delivered:
                    due = _int(m.properties.get(TIMER_OUT_MS), m.store_timestamp)
                    heapq.heappush(self._heap, (due, m.queue_offset, m.physical_offset))
            off = r.next_begin_offset
        if self._heap:
            log.info("delay: %d timer message(s) waiting", len(self._heap))

    # ------------------------------------------------------------------ send side
    @staticmethod
    def is_delayed(msg: Message) -> bool:
        due = deliver_ms(msg.properties or {})
        return due is not None and due > _now()

    def put(self, msg: Message, queue_id: int) -> PutResult:
        """Put a message: a delay message whose time is ahead into the timer topic, anything else as it is."""
        due = deliver_ms(msg.properties or {})
        if due is None or due <= _now():
            return self.store.put(msg, queue_id)
        props = dict(msg.properties or {})
        props[TIMER_OUT_MS] = str(due)
        props[REAL_TOPIC] = msg.topic
        props[REAL_QID] = str(queue_id)
        timer = dataclasses.replace(msg, topic=TIMER_TOPIC, properties=props)
        with self._lock:
            r = self.store.put(timer, 0)
            if r.ok:
                heapq.heappush(self._heap, (due, r.queue_offset, r.physical_offset))
        if r.ok:
            self.wake()  # it may be due before the one the thread waits for
        return r

    # ------------------------------------------------------------------ delivery
    def waiting(self) -> int:
        with self._lock:
            return len(self._heap)

    def do_round(self) -> float:
        """What is due delivered; then a pause until the next one's time (a second at most; a second after a
        delivery the store refused for now)."""
        self._refused = False
        self.deliver_due()
        if self._refused:
            return 1.0
        with self._lock:
            left = (self._heap[0][0] - _now()) / 1000.0 if self._heap else 1.0
        return min(max(left, 0.001), 1.0)

    _refused = False

    def deliver_due(self, now: int | None = None) -> int:
        """Deliver every timer message whose time has come (deliver(): one that can never be delivered is
        skipped, one the store refuses for now stops the round and waits for the next); how many were taken
        off the timer. What was taken is recorded even when a later one fails, so nothing is delivered twice."""
        now = _now() if now is None else now
        done = 0
        with self._lock:
            try:
                while self._heap and self._heap[0][0] <= now and not self.stopped:
                    due, off, phys = self._heap[0]
                    m = self.store.look(phys)
                    if m is not None and m.topic == TIMER_TOPIC:
                        what, _r = deliver(
                            self.store, _real(m), _int(m.properties.get(REAL_QID), 0), f"timer offset {off}"
                        )
                        if what == RETRY:
                            self._refused = True
                            break
                    heapq.heappop(self._heap)
                    self.delivered.add(off)
                    done += 1
            finally:
                if done:
                    while self.low in self.delivered:
                        self.delivered.discard(self.low)
                        self.low += 1
                    write_atomically(
                        self.path, json.dumps({"version": 1, "offset": self.low, "delivered": sorted(self.delivered)})
                    )
        return done


def _real(m) -> Message:
    """TimerMessageStore.convert: the timer record -> the real topic's record."""
    props = dict(m.properties)
    props[TIMER_ENQUEUE_MS] = str(m.store_timestamp)
    props[TIMER_DEQUEUE_MS] = str(_now())
    props.pop("__CRC32#", None)
    return Message(
        topic=props.get(REAL_TOPIC),
        body=m.body or b"",
        properties=props,
        flag=m.flag,
        sys_flag=m.sys_flag,
        born_timestamp=m.born_timestamp,
        born_host=m.born_host,
        reconsume_times=m.reconsume_times,
    )


def _int(text, default: int) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return default
