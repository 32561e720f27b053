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
delivery attempt one higher; in place, not through the retry topic (orderly pop never revives into it). That
is pop.PopState.pop_orderly; acks and ChangeInvisibleDuration work as for other groups."""

from __future__ import annotations

import json
import os
import threading

from ..config.files import read_with_backup

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
        from ..config.files import write_atomically

        with self._lock:
            data, _ = read_with_backup(self.path, json.loads)
            data = data or {"subscriptionGroupTable": {}, "forbiddenTable": {}}
            table = data.setdefault("subscriptionGroupTable", {})
            cfg = table.setdefault(
                group,
                {
                    "groupName": group,
                    "consumeEnable": True,
                    "consumeFromMinEnable": True,
                    "consumeBroadcastEnable": True,
                    "retryQueueNums": 1,
                    "retryMaxTimes": 16,
                    "brokerId": 0,
                    "whichBrokerWhenConsumeSlowly": 1,
                    "notifyConsumerIdsChangedEnable": True,
                },
            )
            cfg["consumeMessageOrderly"] = bool(fifo)
            write_atomically(self.path, json.dumps(data, indent=1))
            self._stamp = None


def _true(v) -> bool:
    return v is True or str(v).strip().lower() == "true"
