"""Automatic renewal of receipt handles received with auto_renew=true (the PushConsumer), as RocketMQ's proxy
does it (proxy/service/receipt/DefaultReceiptHandleManager, common/ReceiptHandleGroup, MessageReceiptHandle,
RenewStrategyPolicy):

- ReceiveMessage with auto_renew registers every message it hands out under (group, message id, handle key:
  topic type, queue, offset, as ReceiptHandleGroup.HandleKey) with the client that received it, its ORIGINAL
  receipt handle and its current one.
- A renewal thread (renewSchedulePeriodMillis) looks at every registered message: when its client is gone
  (not heard of for channelExpiredTimeout, or NotifyClientTermination) the client's messages are cleared:
  their invisible time changed to invisibleTimeMillisWhenClear so they come back soon, and forgotten.
  Otherwise, when the current handle's invisible time ends within renewAheadTimeMillis, it is renewed
  (ChangeInvisibleTime from now) by a slice: renewSliceTimeMillis when set (the proxy's setting before
  RenewStrategyPolicy), else RenewStrategyPolicy's ladder 1m 3m 5m 10m 30m 1h by renewal count. Once
  renewMaxTimeMillis passed since it was received, renewal stops (STOP_RENEW): the invisible time becomes the
  group's retry delay for its reconsume times, and it is forgotten. A renewal the store refuses (handle acked
  or superseded elsewhere) forgets it; an unexpected error is retried up to maxRenewRetryTimes.
- AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue first take(): the registered entry
  for the message id and the handle the client gives (its original one, or the current one) is removed (no
  more renewal) and the current handle is used instead of the given one.

The state is in memory only (as the proxy's): a restart forgets it, the pop state keeps the last renewed
invisible time. At stop every registered message is cleared (the proxy's clearAllHandle)."""

from __future__ import annotations

import logging
import threading

from ..services.service_thread import ServiceThread
from ..broker.pop import Handle, HandleError, now_ms

log = logging.getLogger("rocketstore.serve")

RENEW_LADDER_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)  # RenewStrategyPolicy.next
# SubscriptionGroupConfig's default CUSTOMIZED retry policy (the STOP_RENEW invisible time by reconsume times)
RETRY_DELAYS_MS = tuple(
    s * 1000 for s in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
)


class _Entry:
    """MessageReceiptHandle + HandleData: one message in flight at one client, renewed for it."""

    __slots__ = (
        "client_id",
        "group",
        "topic",
        "msg_id",
        "original",
        "current",
        "reconsume_times",
        "consume_ts",
        "renew_times",
        "retry_times",
        "lock",
        "removed",
        "key",
    )

    def __init__(self, client_id, group, topic, msg_id, handle_str, reconsume_times, consume_ts):
        self.client_id, self.group, self.topic, self.msg_id = client_id, group, topic, msg_id
        self.original = self.current = handle_str
        self.reconsume_times = reconsume_times
        self.consume_ts = consume_ts  # the original handle's retrieve time
        self.renew_times = 0
        self.retry_times = 0
        self.lock = threading.Lock()
        self.removed = False
        self.key = None


def _key(group: str, msg_id: str, h: Handle) -> tuple:
    return group, msg_id, h.topic_type, h.queue_id, h.offset


class RenewManager(ServiceThread):
    """The receipt handle manager of one service. `change(group, topic, handle, invisible_ms)` changes an
    in-flight message's invisible time (a new Handle, or None when the handle is no longer valid);
    `is_alive(client_id)` says whether the client is still there. Its thread scans every
    renewSchedulePeriodMillis; stopped, it clears every registered message (the proxy's clearAllHandle)."""

    name = "renewal"

    def __init__(self, change, is_alive, config):
        super().__init__()
        self.change = change
        self.is_alive = is_alive
        self.config = config
        self._entries: dict[tuple, _Entry] = {}
        self._lock = threading.Lock()
        self.initial_delay_s = self.error_delay_s = max(config.renew_schedule_period_ms, 10) / 1000.0
        self.renewals = 0  # how many renewals were done (for tests and logs)

    # ------------------------------------------------------------------ lifecycle
    def do_round(self) -> float:
        self.scan()
        return self.initial_delay_s

    def on_stop(self) -> None:
        """Every registered message cleared, as the proxy's shutdown: it comes back soon."""
        with self._lock:
            entries = list(self._entries.values())
        for e in entries:
            self._finish(e, self.config.invisible_ms_when_clear, "clear")

    # ------------------------------------------------------------------ registry
    def add(self, client_id: str, group: str, topic: str, msg_id: str, handle_str: str, reconsume_times: int) -> None:
        h = Handle.decode(handle_str)
        e = _Entry(client_id, group, topic, msg_id, handle_str, reconsume_times, h.retrieve_time)
        e.key = _key(group, msg_id, h)
        with self._lock:
            old = self._entries.get(e.key)
            if old is not None:
                old.removed = True
            self._entries[e.key] = e

    def take(self, group: str, msg_id: str, handle_str: str) -> str | None:
        """ReceiptHandleGroup.remove: the current handle of the message registered under this id and handle
        (original or current), no longer renewed; None when none is registered."""
        try:
            h = Handle.decode(handle_str)
        except HandleError:
            return None
        key = _key(group, msg_id, h)
        with self._lock:
            e = self._entries.get(key)
            if e is None or handle_str not in (e.original, e.current):
                return None
        with e.lock:  # waits for a renewal under way: the newest handle is returned
            if e.removed:
                return None
            e.removed = True
            current = e.current
        with self._lock:
            if self._entries.get(key) is e:
                del self._entries[key]
        return current

    def client_gone(self, client_id: str) -> int:
        """clearGroup for every group of a client (NotifyClientTermination, expiry): its messages come back
        after invisibleTimeMillisWhenClear. Returns how many were cleared."""
        with self._lock:
            entries = [e for e in self._entries.values() if e.client_id == client_id]
        for e in entries:
            self._finish(e, self.config.invisible_ms_when_clear, "clear")
        return len(entries)

    def count(self) -> int:
        with self._lock:
            return len(self._entries)

    # ------------------------------------------------------------------ renewal
    def scan(self) -> None:
        """scheduleRenewTask: one pass over the registered messages."""
        with self._lock:
            entries = list(self._entries.values())
        gone: set[str] = set()
        alive: set[str] = set()
        for e in entries:
            if self.stopped:
                return
            cid = e.client_id
            if cid not in alive and cid not in gone:
                (alive if self.is_alive(cid) else gone).add(cid)
            if cid in gone:
                self._finish(e, self.config.invisible_ms_when_clear, "clear")
                continue
            try:
                h = Handle.decode(e.current)
            except HandleError:
                self._forget(e)
                continue
            if h.next_visible_time - now_ms() > self.config.renew_ahead_ms:
                continue
            self._renew(e)

    def _renew(self, e: _Entry) -> None:
        cfg = self.config
        with e.lock:
            if e.removed:
                return
            if e.retry_times >= cfg.max_renew_retry_times:
                log.warning("handle exceeded max renew retry times: %s", e.original)
                self._drop(e)
                return
            if now_ms() - e.consume_ts >= cfg.renew_max_ms:  # STOP_RENEW: the group's retry delay
                delay = RETRY_DELAYS_MS[min(max(e.reconsume_times, 0), len(RETRY_DELAYS_MS) - 1)]
                self._change_and_drop(e, delay)
                return
            slice_ms = (
                cfg.renew_slice_ms
                if cfg.renew_slice_ms > 0
                else RENEW_LADDER_MS[min(e.renew_times, len(RENEW_LADDER_MS) - 1)]
            )
            try:
                new = self.change(e.group, e.topic, Handle.decode(e.current), slice_ms)
            except Exception:
                log.exception("renewal of %s failed", e.original)
                e.retry_times += 1
                return
            if new is None:  # acked, superseded or expired elsewhere: nothing more to renew
                self._drop(e)
                return
            e.current = new.encode()
            e.retry_times = 0
            e.renew_times += 1
            self.renewals += 1

    def _finish(self, e: _Entry, invisible_ms: int, why: str) -> None:
        with e.lock:
            if not e.removed:
                self._change_and_drop(e, invisible_ms)

    def _change_and_drop(self, e: _Entry, invisible_ms: int) -> None:
        """Under e.lock: the message's invisible time set to invisible_ms from now, then forgotten."""
        try:
            self.change(e.group, e.topic, Handle.decode(e.current), invisible_ms)
        except Exception:
            log.exception("changing the invisible time of %s failed", e.original)
        self._drop(e)

    def _drop(self, e: _Entry) -> None:
        e.removed = True
        self._forget(e)

    def _forget(self, e: _Entry) -> None:
        e.removed = True
        with self._lock:
            if self._entries.get(e.key) is e:
                del self._entries[e.key]
