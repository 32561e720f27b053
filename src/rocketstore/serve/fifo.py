"""FIFO consumption: orderly pop (RocketMQ 5's PopMessageProcessor with order=true and ConsumerOrderInfoManager),
for consumer groups whose subscription group config says consumeMessageOrderly.

Which groups are FIFO: config/subscriptionGroup.json in the store, RocketMQ's SubscriptionGroupManager file
({"subscriptionGroupTable": {"<group>": {"groupName": ..., "consumeMessageOrderly": true, ...}}}), as
`mqadmin updateSubGroup -o true` leaves it on a broker. The proxy tells such a group's clients fifo=true in
their settings and pops orderly for them; other groups pop as usual. The file is read again when it changes.

Orderly pop: a FIFO producer's messages of one message group all go to one queue (the server picks it by the
group's hash), and a queue with any message of the group in flight (received, not acked, invisible time not
over) gives the group nothing more (ConsumerOrderInfoManager.checkBlock). When the invisible time of the
in-flight messages is over, they are delivered again, in queue order, before anything after them, their
delivery attempt one higher; in place, not through the retry topic (orderly pop never revives into it). Acks
and ChangeInvisibleDuration work as for other groups (pop.PopState)."""
from __future__ import annotations

import json
import os
import threading

from ..config_files import read_with_backup
from .pop import SKIPPED, STOP, PopState, Popped, now_ms

SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"


class SubscriptionGroups:
    """The groups' SubscriptionGroupConfig from config/subscriptionGroup.json (read on change)."""

    def __init__(self, store_root: str):
        self.path = os.path.join(store_root, "config", SUBSCRIPTION_GROUP_FILE)
        self._lock = threading.Lock()
        self._stamp = None
        self._table: dict = {}

    def _load(self) -> dict:
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                table = {}
                if stamp is not None or os.path.exists(self.path + ".bak"):
                    data, _ = read_with_backup(self.path, json.loads)
                    table = (data or {}).get("subscriptionGroupTable") or {}
                self._table, self._stamp = table, stamp
            return self._table

    def get(self, group: str) -> dict | None:
        return self._load().get(group)

    def is_fifo(self, group: str) -> bool:
        cfg = self.get(group)
        return bool(cfg and _true(cfg.get("consumeMessageOrderly")))

    def set_fifo(self, group: str, fifo: bool = True) -> None:
        """Mark a group orderly (or not) in the file, keeping the rest (updateSubGroup -o)."""
        from ..config_files import write_atomically
        with self._lock:
            data, _ = read_with_backup(self.path, json.loads)
            data = data or {"subscriptionGroupTable": {}, "forbiddenTable": {}}
            table = data.setdefault("subscriptionGroupTable", {})
            cfg = table.setdefault(group, {"groupName": group, "consumeEnable": True, "consumeFromMinEnable": True,
                                           "consumeBroadcastEnable": True, "retryQueueNums": 1,
                                           "retryMaxTimes": 16, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                                           "notifyConsumerIdsChangedEnable": True})
            cfg["consumeMessageOrderly"] = bool(fifo)
            write_atomically(self.path, json.dumps(data, indent=1))
            self._stamp = None


def _true(v) -> bool:
    return v is True or str(v).strip().lower() == "true"


def pop_orderly(state: PopState, group: str, topic: str, queue_ids: list[int], batch: int, invisible_ms: int,
                tags=None, sql: str | None = None, max_attempts: int = 0, dead_letter=None) -> list[Popped]:
    """Up to `batch` messages for a FIFO group, queue by queue (round robin over calls): a queue with a message
    in flight gives nothing; one whose in-flight messages all became visible again gives them again (attempt
    + 1, queue order) and nothing newer; a queue with nothing in flight gives its next messages.

    A message due again whose delivery attempt would pass `max_attempts` (> 0) is handed to `dead_letter`
    (the stored message) and done with instead (PopMessageResultFilterImpl's TO_DLQ), so its queue moves on."""
    out: list[Popped] = []
    now = now_ms()
    with state._lock:
        touched = False
        start = state._rr.get((group, topic), 0)
        state._rr[(group, topic)] = start + 1
        order = [queue_ids[(start + i) % len(queue_ids)] for i in range(len(queue_ids))] if queue_ids else []
        for q in order:
            if len(out) >= batch:
                break
            qs = state._queue(group, topic, q)
            inflight = qs["inflight"]
            if inflight:
                if any(e[0] + e[1] > now for e in inflight.values()):
                    continue                      # blocked: part of it is still being consumed
                for off in sorted(int(o) for o in inflight):
                    if len(out) >= batch:
                        break
                    entry = inflight[str(off)]
                    msg = state._read(group, topic, q, off)
                    touched = True
                    if msg is None:               # gone (expired files)
                        del inflight[str(off)]
                        continue
                    attempt = entry[2] + 1
                    if max_attempts > 0 and dead_letter is not None and attempt > max_attempts:
                        dead_letter(msg)
                        del inflight[str(off)]
                        continue
                    inflight[str(off)] = [now, invisible_ms, attempt, msg.physical_offset]
                    out.append(Popped(msg, state._handle(off, now, invisible_ms, q, msg.physical_offset), attempt,
                                      invisible_ms))
                continue
            for _ in range(8):                    # a filtered get may find nothing in one scan
                if len(out) >= batch:
                    break
                step = state.take_new(group, topic, q, qs, batch - len(out), invisible_ms, now, out, tags, sql)
                touched = touched or step != STOP
                if step != SKIPPED:
                    break                         # one run of a queue per pop: its order is kept
        if touched:
            state._save({(group, topic)})
    return out
