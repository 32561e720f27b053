"""Where the console's store comes from, and the rates its live chart draws.

- `LiveSource`: the store `rocketstore serve` has open for writing (the console may change topics and offsets
  and resend messages there, through `Hooks` the wiring hands it for what the protocols hold);
- `ReadOnlySource`: `rocketstore console STORE` opens the store read-only (never changing a byte, a live store
  included) and opens it again when the last open is older than `refresh_s`, so a store another process writes
  is followed; requests take turns on it (one lock), the reopen never closes a store a request is using.

`Sampler` samples the messages in and out once a second (the broker's counters when serve has metrics, else the
store's queue ends and committed offsets) and keeps the last `keep_s` seconds for the chart."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from ..broker.metrics import is_retry_or_dlq
from ..broker.rules import is_system_topic
from ..store.facade import MessageStore


@dataclass
class Hooks:
    """What the console gets from the process around it (all optional): `clients()` the connected clients (dicts
    with protocol, id, kind, group, language, version, address), `inflight(group, topic)` the messages received
    and not acked, `reset(group, topic, {queue: offset})` a reset the protocols must know of (else the offsets
    are committed in the store), `totals()` (messages in, messages out) from the broker's counters,
    `topic_changed()` after a topic is created, updated or deleted (the broker registers it)."""

    clients: Callable[[], list[dict]] | None = None
    inflight: Callable[[str, str], int] | None = None
    reset: Callable[[str, str, dict[int, int]], None] | None = None
    totals: Callable[[], tuple[float, float]] | None = None
    topic_changed: Callable[[], None] | None = None
    committed: Callable[[str, str, int], int] | None = None  # the broker's newest committed offsets
    groups: Callable[[], dict[str, set[str]]] | None = None  # groups with commits not yet in the store
    protocols: list[str] = field(default_factory=list)  # what the process serves, for the overview


class LiveSource:
    writable = True
    standalone = False

    def __init__(self, store: MessageStore):
        self.store_ = store

    @contextlib.contextmanager
    def store(self):
        yield self.store_

    def close(self) -> None:
        pass


class ReadOnlySource:
    writable = False
    standalone = True

    def __init__(self, path: str, config=None, refresh_s: float = 5.0):
        self.path = path
        self.config = config
        self.refresh_s = refresh_s
        self._lock = threading.RLock()
        self._store = MessageStore.open(path, config, read_only=True)
        self._opened = time.monotonic()

    @contextlib.contextmanager
    def store(self):
        with self._lock:
            if time.monotonic() - self._opened >= self.refresh_s:
                fresh = MessageStore.open(self.path, self.config, read_only=True)
                old, self._store = self._store, fresh
                self._opened = time.monotonic()
                old.close()
            yield self._store

    def close(self) -> None:
        with self._lock:
            self._store.close()


def store_totals(store) -> tuple[int, int]:
    """(messages in the queues, messages consumed): the sum of the queues' max offsets and of the groups'
    committed offsets, over the topics a client sends to (no retry, dead-letter or system topic)."""
    queued = 0
    for topic, queues in store.topics().items():
        if is_retry_or_dlq(topic) or is_system_topic(topic):
            continue
        queued += sum(max(store.max_offset(topic, q), 0) for q in queues)
    consumed = 0
    offsets = store.consumer_offsets
    for group, topics in offsets.groups().items():
        for topic in topics:
            if is_retry_or_dlq(topic) or is_system_topic(topic):
                continue
            for q in store.topics().get(topic, []):
                consumed += max(offsets.query(group, topic, q), 0)
    return queued, consumed


def topic_totals(store) -> dict[str, int]:
    return {t: sum(max(store.max_offset(t, q), 0) for q in qs) for t, qs in store.topics().items()}


def group_totals(store, hooks: Hooks) -> dict[str, int]:
    """group -> the sum of its committed offsets (the broker's newest): its consumption, as a counter."""
    from ..broker.metrics import queue_groups

    query = hooks.committed or store.consumer_offsets.query
    queues = store.topics()
    return {
        g: sum(max(query(g, t, q), 0) for t in topics for q in queues.get(t, ()))
        for g, topics in queue_groups(store, hooks.groups).items()
    }


class Sampler:
    """Once a second: (time, messages in, messages out) and each topic's queue total; rates are differences."""

    def __init__(self, source, hooks: Hooks, keep_s: int = 300, every_s: float = 1.0):
        self.source = source
        self.hooks = hooks
        self.every_s = every_s
        self.samples: deque[tuple[float, float, float]] = deque(maxlen=int(keep_s / every_s) + 1)
        self.topics: deque[tuple[float, dict[str, int]]] = deque(maxlen=int(60 / every_s) + 1)
        self.groups: deque[tuple[float, dict[str, int]]] = deque(maxlen=int(60 / every_s) + 1)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._base: tuple[float, float] | None = None  # the store's totals when sampling began (standalone)
        self._thread = threading.Thread(target=self._run, name="console-sampler", daemon=True)

    def start(self) -> None:
        self.sample()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.sample()
            except Exception:  # a store being reopened or closed: the next second tries again
                pass

    def sample(self) -> None:
        now = time.time()
        with self.source.store() as store:
            by_topic = topic_totals(store)
            by_group = group_totals(store, self.hooks)
            if self.hooks.totals is not None:
                tin, tout = self.hooks.totals()
            else:
                tin, tout = store_totals(store)
        with self._lock:
            self.samples.append((now, float(tin), float(tout)))
            self.topics.append((now, by_topic))
            self.groups.append((now, by_group))

    def series(self) -> dict:
        """Per-second rates over the kept window: {t: [unix seconds], in: [...], out: [...]}."""
        with self._lock:
            samples = list(self.samples)
        t, rin, rout = [], [], []
        for (t0, i0, o0), (t1, i1, o1) in zip(samples, samples[1:]):
            dt = t1 - t0
            if dt <= 0:
                continue
            t.append(round(t1, 3))
            rin.append(round(max(i1 - i0, 0) / dt, 3))
            rout.append(round(max(o1 - o0, 0) / dt, 3))
        return {"t": t, "in": rin, "out": rout}

    def topic_rates(self) -> dict[str, float]:
        """Each topic's messages per second over the last minute (as many samples as there are)."""
        return self._rates(self.topics)

    def group_rates(self) -> dict[str, float]:
        """Each group's consumption (committed offsets' growth) per second over the last minute."""
        return self._rates(self.groups)

    def _rates(self, samples) -> dict[str, float]:
        with self._lock:
            if len(samples) < 2:
                return {}
            (t0, first), (t1, last) = samples[0], samples[-1]
        dt = t1 - t0
        return {k: max(v - first.get(k, 0), 0) / dt for k, v in last.items()} if dt > 0 else {}
