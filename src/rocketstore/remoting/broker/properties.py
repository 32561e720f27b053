"""A sent message's properties as the broker stores them: string2messageProperties fills a java.util.HashMap
created with capacity 128, the broker adds UNIQ_KEY (when the producer set none) and CLUSTER, and
messageProperties2String writes the map in its iteration order: by bucket ((h ^ h >>> 16) & (capacity - 1), h the
String.hashCode), insertion order within a bucket."""

import itertools
from functools import lru_cache
import os
import random
import struct
import time

from ...engine import java_string_hash, parse_properties


CLUSTER = "CLUSTER"
HASHMAP_CAPACITY = 128  # string2messageProperties: new HashMap<>(128)


def parse(text: str | None) -> dict[str, str]:
    """string2messageProperties: empty names and values dropped; a repeated name keeps its first place."""
    return parse_properties(text) if text else {}


@lru_cache(maxsize=4096)  # a producer sends the same few names with every message
def _bucket(name: str, capacity: int) -> int:
    h = java_string_hash(name) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def hashmap_order(names: list[str], capacity: int = HASHMAP_CAPACITY) -> list[str]:
    while len(names) > capacity * 3 // 4:
        capacity *= 2
    return [n for _, _, n in sorted((_bucket(n, capacity), i, n) for i, n in enumerate(names))]


@lru_cache(maxsize=1024)  # the order depends on the names (and their insertion order) alone: a producer's repeat
def _order(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(hashmap_order(list(names)))


def to_string(props: dict[str, str]) -> str:
    """messageProperties2String over the HashMap the broker built."""
    return "".join([f"{k}\x01{props[k]}\x02" for k in _order(tuple(props))])


_counter = itertools.count(random.randrange(1 << 16))
_PREFIX = struct.pack(">4sHI", bytes([127, 0, 0, 1]), os.getpid() & 0xFFFF, random.getrandbits(32))


def new_uniq_id() -> str:
    """MessageClientIDSetter.createUniqID's layout: ip, pid, a random class-loader hash, time, counter (hex)."""
    now = int(time.time() * 1000)
    return (_PREFIX + struct.pack(">IH", now & 0xFFFFFFFF, next(_counter) & 0xFFFF)).hex().upper()
