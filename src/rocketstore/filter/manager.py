"""Consumer groups' SQL92 filters and their bloom bits (the broker's ConsumerFilterManager and
ConsumerFilterData), kept in config/consumerFilter.json in RocketMQ's layout.

A group registers an expression for a topic; the group gets k bit positions (its BloomFilterData, from
"group#topic") in an m-bit map. While the group's filter lives, the bitmap dispatcher sets those bits in
the ConsumeQueue ext unit of every message the expression matches, so a filtered get tests a few bits
instead of reading the record. A message stored before the filter was born carries no verdict for it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field

from ..config.files import JAVA_INT, JAVA_LONG, as_int, as_object, as_str, load_json, read_config, write_atomically
from .bloom import BloomFilter, BloomFilterData
from .sql92 import Filter, compile as compile_sql

SQL92 = "SQL92"
FILE = os.path.join("config", "consumerFilter.json")
CLEAN_AFTER_DEATH_MS = 24 * 3600 * 1000  # BrokerConfig.filterDataCleanTimeSpan
DEAD_ON_LOAD_MS = 30 * 1000  # decode(): every loaded filter counts as dead 30 s ago


@dataclass
class ConsumerFilterData:
    consumer_group: str
    topic: str
    expression: str
    bloom: BloomFilterData
    born_time: int
    dead_time: int = 0
    client_version: int = 0
    expression_type: str = SQL92
    compiled: Filter | None = field(default=None, repr=False, compare=False)

    @property
    def dead(self) -> bool:
        return self.dead_time >= self.born_time

    def msg_in_live(self, msg_store_time: int) -> bool:
        """isMsgInLive: the bitmap of a message stored after the filter was born holds its verdict."""
        return msg_store_time > self.born_time

    def to_json(self) -> dict:
        # fastjson's field names and its alphabetical order
        return {
            "bloomFilterData": {"bitNum": self.bloom.bit_num, "bitPos": list(self.bloom.bit_pos)},
            "bornTime": self.born_time,
            "clientVersion": self.client_version,
            "consumerGroup": self.consumer_group,
            "dead": self.dead,
            "deadTime": self.dead_time,
            "expression": self.expression,
            "expressionType": self.expression_type,
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, d, what: str = "filter") -> "ConsumerFilterData":
        """One ConsumerFilterData as fastjson writes it; ValueError when a field has the wrong type."""
        d = as_object(d, what, optional=False)
        b = as_object(d.get("bloomFilterData"), f"{what}: bloomFilterData")
        bit_pos = b.get("bitPos") or []
        if not isinstance(bit_pos, list):
            raise ValueError(f"{what}: bitPos must be a JSON array")

        def number(key: str, bounds=JAVA_LONG) -> int:
            return 0 if d.get(key) is None else as_int(d[key], f"{what}: {key}", bounds)

        return cls(
            as_str(d.get("consumerGroup"), f"{what}: consumerGroup"),
            as_str(d.get("topic"), f"{what}: topic"),
            as_str(d.get("expression"), f"{what}: expression"),
            BloomFilterData(
                tuple(as_int(p, f"{what}: bitPos", JAVA_INT) for p in bit_pos),
                0 if b.get("bitNum") is None else as_int(b["bitNum"], f"{what}: bitNum", JAVA_INT),
            ),
            number("bornTime"),
            number("deadTime"),
            number("clientVersion"),
            as_str(d.get("expressionType") or SQL92, f"{what}: expressionType"),
        )


def parse_filters(text: str) -> dict[str, dict[str, ConsumerFilterData]]:
    """consumerFilter.json: topic -> group -> its filter; ValueError for any other shape."""
    doc = as_object(load_json(text), "the file", optional=False)
    out: dict[str, dict[str, ConsumerFilterData]] = {}
    for topic, entry in as_object(doc.get("filterDataByTopic"), "filterDataByTopic").items():
        groups = as_object(
            as_object(entry, f"filterDataByTopic[{topic!r}]").get("groupFilterData"),
            f"filterDataByTopic[{topic!r}]: groupFilterData",
        )
        out[topic] = {
            group: ConsumerFilterData.from_json(d, f"filter of {group!r} on {topic!r}") for group, d in groups.items()
        }
    return out


class ConsumerFilterManager:
    def __init__(self, root: str | None, bloom: BloomFilter | None = None, clock=None, writable: bool = True):
        self.path = os.path.join(root, FILE) if root else None
        self.writable = writable
        self.bloom = bloom or BloomFilter()
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.by_topic: dict[str, dict[str, ConsumerFilterData]] = {}
        self.lock = threading.Lock()

    # -- persistence
    def load(self) -> None:
        """decode(): filters whose bloom data no longer fits this bloom filter are all dropped (their bits
        mean nothing now); every loaded filter is taken as dead since 30 s ago until its group registers
        again (nobody has been consuming while the store was closed)."""
        if not self.path:
            return
        by_topic = read_config(self.path, parse_filters, "the consumer filters")
        if by_topic is None:
            return
        loaded: dict[str, dict[str, ConsumerFilterData]] = {}
        for topic, groups in by_topic.items():
            for group, data in groups.items():
                if not self.bloom.is_valid(data.bloom):
                    return
                try:
                    data.compiled = compile_sql(data.expression)
                except (ValueError, RecursionError):  # not compilable now: the group registers it again
                    data.compiled = None
                if data.dead_time == 0:
                    data.dead_time = max(self.clock() - DEAD_ON_LOAD_MS, data.born_time)
                loaded.setdefault(topic, {})[group] = data
        self.by_topic = loaded

    def persist(self) -> None:
        if not self.path or not self.writable:
            return
        self._clean()
        doc = {
            "filterDataByTopic": {
                t: {"groupFilterData": {g: d.to_json() for g, d in sorted(groups.items())}, "topic": t}
                for t, groups in sorted(self.by_topic.items())
            }
        }
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        write_atomically(self.path, json.dumps(doc, indent=1, ensure_ascii=False))

    def _clean(self) -> None:
        now = self.clock()
        for topic in list(self.by_topic):
            groups = self.by_topic[topic]
            for g in [g for g, d in groups.items() if d.dead and now - d.dead_time >= CLEAN_AFTER_DEATH_MS]:
                del groups[g]
            if not groups:
                del self.by_topic[topic]

    # -- registration
    def register(self, group: str, topic: str, expression: str, client_version: int = 0) -> ConsumerFilterData:
        """FilterDataMapByTopic.register for one subscription: a new or changed expression gets a new born
        time (bitmaps computed before it do not speak for it); the same one brings a dead filter back."""
        compiled = compile_sql(expression)  # a bad expression raises FilterSyntaxError here
        bloom = self.bloom.consumer_data(group, topic)
        with self.lock:
            groups = self.by_topic.setdefault(topic, {})
            old = groups.get(group)
            if old is not None and old.expression == expression and old.bloom == bloom:
                old.client_version = max(old.client_version, client_version)
                if old.dead:
                    old.dead_time = 0  # reAlive
                old.compiled = old.compiled or compiled
                data = old
            else:
                data = ConsumerFilterData(
                    group, topic, expression, bloom, self.clock(), 0, client_version, compiled=compiled
                )
                groups[group] = data
            self.persist()
        return data

    def unregister(self, group: str) -> None:
        with self.lock:
            for groups in self.by_topic.values():
                d = groups.get(group)
                if d is not None and not d.dead:
                    d.dead_time = self.clock()
            self.persist()

    def get(self, topic: str, group: str | None = None):
        """The filter of (topic, group), or with group None every filter of the topic (dead ones included:
        RocketMQ keeps computing their bits until they are cleaned)."""
        groups = self.by_topic.get(topic) or {}
        return list(groups.values()) if group is None else groups.get(group)
