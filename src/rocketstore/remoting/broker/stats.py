"""What the broker counts for mqadmin (RocketMQ's BrokerStats, StoreStatsService and BrokerStatsManager, as far as
rocketstore can say them truthfully):

- messages put: the sum of every ConsumeQueue's max offset, minus that sum at boot. A queue's max offset grows by
  one per message dispatched, whichever side put it (remoting, gRPC, the library in this process); a deleted
  topic takes its queues' share out, so the count is the messages that arrived since boot in topics that still
  exist;
- messages got: the records the broker's pulls returned (counted by `count_pull`), in all and per group and
  topic;
- rates (putTps, getTransferredTps, a topic's put TPS, a group's consume TPS): RocketMQ keeps per-second
  samples; rocketstore samples a counter each time a rate is asked for and answers the rate since the newest
  sample at least the window old (else the oldest; 0.0 until it has two samples), so a monitor polling every
  few seconds sees RocketMQ-like figures;
- the morning snapshots (msgPutTotalTodayMorning, msgPutTotalYesterdayMorning ...): RocketMQ takes them at
  midnight; here they are taken when the first request after midnight (local time) comes, 0 before the first
  midnight, as RocketMQ's are."""

from __future__ import annotations

import datetime
import struct
import threading
import time
from collections import deque

WINDOWS_S = (10, 60, 600)  # StoreStatsService's putTps / getTransferredTps: the last 10 s, 1 min and 10 min
SNAPSHOT_WINDOWS_S = (60, 3600, 86400)  # StatsItem's statsDataInMinute, InHour, InDay
MAX_SAMPLES = 4096  # per stats item: a monitor asking every 20 s keeps a day of samples


class Rate:
    """A counter's samples (monotonic time, value), kept for the longest window."""

    def __init__(self, horizon_s: float = max(WINDOWS_S)):
        self.horizon_s = horizon_s
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, value: int, now: float) -> None:
        self.samples.append((now, value))
        while len(self.samples) > 2 and self.samples[1][0] <= now - self.horizon_s:
            self.samples.popleft()

    def per_second(self, window_s: float) -> float:
        """The rate from the newest sample at least `window_s` old (else the oldest one) to the newest sample;
        0.0 with a single sample."""
        now, value = self.samples[-1]
        base = self.samples[0]
        for t, v in self.samples:
            if t > now - window_s:
                break
            base = (t, v)
        if now - base[0] <= 0:
            return 0.0
        return max(value - base[1], 0) / (now - base[0])


def records_in(body: bytes) -> int:
    """How many CommitLog records a pull answer's body holds (each starts with its total size)."""
    n, pos = 0, 0
    while pos + 4 <= len(body):
        size = struct.unpack_from(">i", body, pos)[0]
        if size <= 0:
            break
        n += 1
        pos += size
    return n


class BrokerStats:
    def __init__(self, store):
        self.store = store
        self.boot_ms = int(time.time() * 1000)
        self._lock = threading.Lock()
        self._put_at_boot = self.queue_total()
        self.got_total = 0
        self.got: dict[tuple[str, str], int] = {}  # (group, topic) -> messages pulled
        self.got_times: dict[tuple[str, str], int] = {}  # (group, topic) -> pulls that returned messages
        self._boot_mono = time.monotonic()
        self._topic_at_boot: dict[str, int] = {}
        for cq in store.consume_queues():
            self._topic_at_boot[cq.topic] = self._topic_at_boot.get(cq.topic, 0) + max(cq.max_offset, 0)
        self._items: dict[object, Rate] = {}
        self._rates: dict[object, Rate] = {}
        self._day = datetime.date.today()
        self.morning = {"put_today": 0, "put_yesterday": 0, "get_today": 0, "get_yesterday": 0}

    # ------------------------------------------------------------------ counting
    def queue_total(self, topic: str | None = None) -> int:
        total = 0
        for cq in self.store.consume_queues():
            if topic is None or cq.topic == topic:
                total += max(cq.max_offset, 0)
        return total

    def put_total(self) -> int:
        return max(self.queue_total() - self._put_at_boot, 0)

    def count_pull(self, handler):
        """Wrap a PULL_MESSAGE or LITE_PULL_MESSAGE handler: the records of each successful answer are counted."""

        async def counted(cmd, conn):
            response = await handler(cmd, conn)
            if response is not None and response.code == 0 and response.body:
                n = response.records if response.records is not None else records_in(response.body)
                ext = cmd.ext_fields or {}
                key = (ext.get("consumerGroup", ""), ext.get("topic", ""))
                with self._lock:
                    self.got_total += n
                    self.got[key] = self.got.get(key, 0) + n
                    self.got_times[key] = self.got_times.get(key, 0) + 1
            return response

        return counted

    # ------------------------------------------------------------------ rates
    def rates(self, key, value: int, windows_s=WINDOWS_S) -> list[float]:
        """Sample a counter and give its rate over each window."""
        with self._lock:
            meter = self._rates.setdefault(key, Rate())
            meter.add(value, time.monotonic())
            return [meter.per_second(w) for w in windows_s]

    def tps_text(self, key, value: int) -> str:
        """StoreStatsService.getPutTps's form: the rate over the last 10 s, 1 min and 10 min, "%.2f %.2f %.2f"."""
        return " ".join(f"{r:.2f}" for r in self.rates(key, value))

    def topic_put_tps(self, topic: str) -> float:
        return self.rates(("topic", topic), self.queue_total(topic), (60,))[0]

    def group_get_tps(self, group: str, topic: str) -> float:
        with self._lock:
            value = self.got.get((group, topic), 0)
        return self.rates(("group", group, topic), value, (60,))[0]

    # ------------------------------------------------------------------ BrokerStatsManager's items
    def topic_put_item(self, topic: str) -> tuple[int, int] | None:
        """TOPIC_PUT_NUMS <topic>: (messages put since boot, put calls: unknown here, 0), None while none came
        (RocketMQ makes the item at the first put)."""
        n = self.queue_total(topic) - self._topic_at_boot.get(topic, 0)
        return (n, 0) if n > 0 else None

    def group_get_item(self, topic: str, group: str) -> tuple[int, int] | None:
        """GROUP_GET_NUMS <topic@group>: (messages pulled, pulls that returned some), None before the first."""
        with self._lock:
            key = (group, topic)
            return (self.got[key], self.got_times[key]) if key in self.got else None

    def snapshots(self, key, value: int, times: int) -> list[tuple[int, float, float]]:
        """StatsItem's minute, hour and day snapshots (sum, tps, avgpt) of a counter since boot: the change
        from the newest sample at least the window old (else boot, where the counter was 0) to now."""
        now = time.monotonic()
        out = []
        with self._lock:
            samples = self._items.setdefault(key, Rate(SNAPSHOT_WINDOWS_S[-1]))
            if not samples.samples:
                samples.samples.append((self._boot_mono, (0, 0)))
            samples.add((value, times), now)
            while len(samples.samples) > MAX_SAMPLES:
                samples.samples.popleft()
            for window in SNAPSHOT_WINDOWS_S:
                base_t, (base_v, base_n) = samples.samples[0]
                for t, v in samples.samples:
                    if t > now - window:
                        break
                    base_t, (base_v, base_n) = t, v
                total, calls = max(value - base_v, 0), max(times - base_n, 0)
                span = now - base_t
                out.append((total, total / span if span > 0 else 0.0, total / calls if calls > 0 else 0.0))
        return out

    # ------------------------------------------------------------------ daily snapshots
    def roll_day(self, today: datetime.date | None = None) -> None:
        today = today or datetime.date.today()
        if today == self._day:
            return
        put, got = self.put_total(), self.got_total
        m = self.morning
        if (today - self._day).days == 1:
            m["put_yesterday"], m["get_yesterday"] = m["put_today"], m["get_today"]
        else:  # more than a day without a request: yesterday's morning is not known better than today's
            m["put_yesterday"], m["get_yesterday"] = put, got
        m["put_today"], m["get_today"] = put, got
        self._day = today
