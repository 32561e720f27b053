"""Delay levels (RocketMQ's ScheduleMessageService): a message sent with DELAY=n waits in SCHEDULE_TOPIC_XXXX's
queue n-1 (send.py puts it there with REAL_TOPIC and REAL_QID); the store's dispatch writes each unit's delivery
time (store time + level n's delay, messageDelayLevel) as its tagsCode. This thread delivers, queue by queue in
order, each message whose time has come to its real topic and queue (messageTimeUp: DELAY and the timer
properties cleared, the rest kept) and records how far each level got in config/delayOffset.json
({"offsetTable":{level:offset}}, RocketMQ's file), so delivery carries on across restarts. A message that cannot
be delivered never stalls its level (broker.delay.deliver, the timer's rule: a queue the topic no longer has is
replaced by one it has; a put refused for good, or a real topic no client may send to, is skipped and logged)."""

from __future__ import annotations

import logging
import os
import re
import time

from ...config.files import read_with_backup, write_atomically
from ...formats import properties as P
from ...message import Message
from ...broker.delay import DELIVERED, RETRY, deliver
from ...services.service_thread import ServiceThread
from .properties import to_string
from .topics import SCHEDULE_QUEUES, SCHEDULE_TOPIC

log = logging.getLogger("rocketstore.remoting.broker")

CLEARED = (P.DELAY, "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", P.CRC32)
_BARE_KEY = re.compile(r"([{,]\s*)(\d+)(\s*:)")


def _parse(text: str) -> dict[int, int]:
    import json

    doc = json.loads(_BARE_KEY.sub(r'\1"\2"\3', text))
    if not isinstance(doc, dict) or not isinstance(doc.get("offsetTable", {}), dict):
        raise ValueError("not a delayOffset.json")
    return {int(k): int(v) for k, v in doc.get("offsetTable", {}).items()}


def time_up(m) -> tuple[Message, int]:
    """messageTimeUp: the message for its real topic, and the real queue id."""
    props = {k: v for k, v in m.properties.items() if k not in CLEARED}
    msg = Message(
        props.get("REAL_TOPIC") or "",
        m.body or b"",
        flag=m.flag,
        sys_flag=m.sys_flag,
        born_timestamp=m.born_timestamp,
        born_host=m.born_host,
        reconsume_times=m.reconsume_times,
        raw_properties=to_string(props),
    )
    return msg, int(props.get("REAL_QID") or 0)


class ScheduleService(ServiceThread):
    name = "broker-schedule"

    def __init__(self, store, on_delivered=None):
        super().__init__()
        self.store = store
        self.on_delivered = on_delivered
        self.path = os.path.join(store.root, "config", "delayOffset.json")
        table, problems = read_with_backup(self.path, _parse)
        if table is None and problems:
            log.warning("delayOffset.json unreadable (%s): delivering from each level's first message", problems)
        self.offsets: dict[int, int] = table or {}

    def do_round(self) -> float:
        now = int(time.time() * 1000)
        pause = 0.1 if self.deliver_due(now) else 1.0
        return pause

    def deliver_due(self, now: int) -> int:
        """Deliver what is due, level by level in queue order (broker.delay.deliver: a message that can never be
        delivered is skipped, as RocketMQ moves on past it; one the store refuses for now stops its level until
        the next round); each level's progress is recorded even when a later delivery fails or raises."""
        done = 0
        changed = False
        try:
            for q in range(SCHEDULE_QUEUES):
                level = q + 1
                start = off = max(self.offsets.get(level, 0), self.store.min_offset(SCHEDULE_TOPIC, q))
                try:
                    while not self.stopped:
                        unit = self.store.queue_unit(SCHEDULE_TOPIC, q, off)
                        if unit is None or unit[2] > now:
                            break
                        m = self.store.look(unit[0])
                        if m is not None and m.topic == SCHEDULE_TOPIC:
                            msg, real_q = time_up(m)
                            what, _r = deliver(self.store, msg, real_q, f"delay level {level} offset {off}")
                            if what == RETRY:
                                break
                            done += what == DELIVERED
                        off += 1
                finally:
                    if off != start:
                        self.offsets[level] = off
                        changed = True
        finally:
            if changed:
                entries = ",".join(f"{k}:{v}" for k, v in sorted(self.offsets.items()))
                write_atomically(self.path, '{"offsetTable":{' + entries + "}}")
                if done and self.on_delivered is not None:
                    self.on_delivered()
        return done
