"""Consumer groups: committed offsets in config/consumerOffset.json (RocketMQ's ConsumerOffsetManager file,
`topic@group` -> queue id -> next offset) and a consumer that reads a topic's queues in turn.

RocketMQ writes that file with fastjson, whose integer map keys are not quoted (`{0:12,1:7}`): not JSON,
but what a broker reads back. rocketstore reads both spellings and writes RocketMQ's.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time

from ..config.files import JAVA_INT, as_int, as_object, load_json, read_config, write_atomically
from ..errors import StoreOpenError
from ..formats.record import INNER_BATCH_FLAG
from ..message import GetStatus

SEPARATOR = "@"
_UNQUOTED_INT_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")  # topic and group names hold none of {,:


def offsets_path(root: str) -> str:
    return os.path.join(root, "config", "consumerOffset.json")


def parse_offsets(text: str) -> dict[str, dict[int, int]]:
    """offsetTable: `topic@group` -> queue id (a Java int) -> committed offset (a Java long); ValueError for
    any other shape."""
    doc = as_object(load_json(_UNQUOTED_INT_KEY.sub(r'\1"\2"\3', text)), "the file", optional=False)
    table = as_object(doc.get("offsetTable"), "offsetTable")
    out: dict[str, dict[int, int]] = {}
    for key, queues in table.items():
        offsets = out[key] = {}
        for q, o in as_object(queues, f"offsetTable[{key!r}]", optional=False).items():
            try:
                qid = int(q, 10)
            except ValueError:
                raise ValueError(f"offsetTable[{key!r}]: queue id {q!r} is not an integer") from None
            as_int(qid, f"offsetTable[{key!r}]: queue id", (0, JAVA_INT[1]))
            offsets[qid] = as_int(o, f"offsetTable[{key!r}][{q}]")
    return out


def format_offsets(table: dict[str, dict[int, int]], counter: int) -> str:
    """RocketMQ's layout of the file (fastjson: integer keys unquoted)."""
    entries = ",".join(
        f"{json.dumps(key)}:{{{','.join(f'{q}:{o}' for q, o in sorted(queues.items()))}}}"
        for key, queues in sorted(table.items())
    )
    version = json.dumps({"counter": counter, "stateVersion": 0, "timestamp": int(time.time() * 1000)})
    return f'{{"dataVersion":{version},"offsetTable":{{{entries}}}}}'


class ConsumerOffsets:
    """The committed offsets of every group of one store; commit() persists the whole table atomically."""

    def __init__(self, root: str, writable: bool):
        self.root = root
        self.writable = writable
        self._lock = threading.Lock()
        table = read_config(offsets_path(root), parse_offsets, "the consumer offsets")
        self.table: dict[str, dict[int, int]] = table or {}
        self._counter = 0

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """queryOffset: the committed next offset, -1 when the group has none for that queue."""
        return self.table.get(f"{topic}{SEPARATOR}{group}", {}).get(queue_id, -1)

    def commit(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        self._change(lambda: self.table.setdefault(f"{topic}{SEPARATOR}{group}", {}).update(offsets))

    def groups(self) -> dict[str, list[str]]:
        """group -> the topics it has offsets for (the table's `topic@group` keys)."""
        out: dict[str, list[str]] = {}
        for key in sorted(self.table):
            topic, sep, group = key.rpartition(SEPARATOR)
            if sep:
                out.setdefault(group, []).append(topic)
        return out

    def remove_group(self, group: str) -> int:
        """ConsumerOffsetManager.removeOffset: every topic's offsets of a group; how many topics it had."""
        return self._remove(lambda topic, g: g == group)

    def remove_topic(self, topic: str) -> int:
        """ConsumerOffsetManager.cleanOffsetByTopic: every group's offsets for a topic."""
        return self._remove(lambda t, group: t == topic)

    def _remove(self, which) -> int:
        keys = [k for k in self.table if SEPARATOR in k and which(*k.rsplit(SEPARATOR, 1))]
        if keys:
            self._change(lambda: [self.table.pop(k, None) for k in keys])
        return len(keys)

    def _change(self, edit) -> None:
        if not self.writable:
            raise StoreOpenError(f"{self.root}: opened read-only; offsets cannot be changed")
        with self._lock:
            edit()
            self._counter += 1
            write_atomically(offsets_path(self.root), format_offsets(self.table, self._counter))


class Consumer:
    """Reads a topic's queues in turn for a group, from its committed offsets (else the queue's earliest or
    latest, as `start` says), `tags` filtering as get() does. poll() returns the next messages; iterating
    yields messages until there are none (or, with follow, waits for more). commit() stores how far the
    group got: call it after processing (at-least-once)."""

    def __init__(
        self,
        store,
        offsets: ConsumerOffsets,
        group: str,
        topic: str,
        tags=None,
        start: str = "earliest",
        sql: str | None = None,
        queues: list[int] | None = None,
    ):
        if start not in ("earliest", "latest"):
            raise ValueError(f"start must be 'earliest' or 'latest', got {start!r}")
        self.store, self.offsets = store, offsets
        self.group, self.topic, self.tags, self.start, self.sql = group, topic, tags, start, sql
        if sql is not None and tags is not None:
            raise ValueError("give tags or sql, not both: a subscription is by tag or by SQL92")
        self.positions: dict[int, int] = {}
        self._turn = 0
        self.only = None if queues is None else sorted(set(queues))

    def on(self, store) -> "Consumer":
        """This consumer (group, subscription, positions, whose turn it is) over another handle of the same
        store, e.g. one opened again to see what a writer added since."""
        c = store.consumer(self.group, self.topic, self.tags, self.start, sql=self.sql, queues=self.only)
        c.positions.update(self.positions)
        c._turn = self._turn  # noqa: SLF001  (the same class)
        return c

    def queue_ids(self) -> list[int]:
        """The topic's queues: those with data, and those its config declares (or only those given)."""
        if self.only is not None:
            return list(self.only)
        ids = set(self.store.topics().get(self.topic, []))
        cfg = self.store.topic_configs.get(self.topic)
        if cfg:
            ids.update(range(int(cfg.get("readQueueNums") or 0)))
        return sorted(ids)

    def _position(self, q: int) -> int:
        pos = self.positions.get(q)
        if pos is None:
            pos = self.offsets.query(self.group, self.topic, q)
            if pos < 0:
                pos = (
                    max(self.store.min_offset(self.topic, q), 0)
                    if self.start == "earliest"
                    else self.store.max_offset(self.topic, q)
                )
            self.positions[q] = pos
        return pos

    def poll(self, max_count: int = 32, wait_ms: int = 0) -> list:
        """Up to max_count next messages, waiting up to wait_ms while there are none. One get returns at most
        32 (RocketMQ's transfer limits), so a larger max_count takes several, the queues taking turns; a
        batch-ConsumeQueue topic's batches are unpacked whole, so a poll can return a few more."""
        deadline = time.monotonic() + wait_ms / 1000.0
        while True:
            got = self._gather(max_count)
            left = deadline - time.monotonic()
            if got or left <= 0:
                return got
            self.store.wait_for_arrival(min(left, 0.1))

    def _gather(self, max_count: int) -> list:
        out: list = []
        ids = self.queue_ids()
        empty = 0  # queues in a row that had nothing: once every queue had nothing, stop
        while ids and len(out) < max_count and empty < len(ids):
            q = ids[self._turn % len(ids)]
            self._turn = (self._turn + 1) % len(ids)
            got = self._pull(q, max_count - len(out))
            out.extend(got)
            empty = 0 if got else empty + 1
        return out

    def _pull(self, q: int, max_count: int) -> list:
        pos = self._position(q)
        r = self.store.get(self.group, self.topic, q, pos, max_count, tags=self.tags, sql=self.sql)
        if r.status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.OFFSET_OVERFLOW_ONE):
            return []
        self.positions[q] = r.next_begin_offset  # also the correction for a stale or removed offset
        if any(m.sys_flag & INNER_BATCH_FLAG for m in r.messages):
            return r.unpacked()
        return r.messages

    def __iter__(self):
        while True:
            got = self.poll()
            if not got:
                return
            yield from got

    def follow(self, wait_ms: int = 1000):
        """Messages as they arrive, forever (long polling)."""
        while True:
            yield from self.poll(wait_ms=wait_ms)

    def lag(self) -> dict[int, int]:
        """Messages left per queue after the group's position."""
        return {q: max(self.store.max_offset(self.topic, q) - self._position(q), 0) for q in self.queue_ids()}

    def commit(self) -> None:
        self.offsets.commit(self.group, self.topic, dict(self.positions))
