"""What the put path knows of a topic, computed once: TopicInfo (the lane, lane.c, reads its slots)."""

from __future__ import annotations

import logging

from ..formats import properties as P
from ..formats import record as R
from .encode import props_info

log = logging.getLogger("rocketstore.put")
QUEUES_MAX = 2**31  # queue ids are a Java int: without a topic config, every one below this is accepted


class TopicInfo:
    """A topic's bytes, its record version, whether the plain-message fast path applies, and the record tails
    of the tags seen so far. The lane reads name, tail, magic, fast and queues."""

    __slots__ = ("name", "tail", "v2", "tlen", "magic", "fast", "tag_tails", "queues")

    def __init__(self, name: str, v2: bool, fast: bool, queues: int = QUEUES_MAX):
        raw = name.encode("utf-8")
        self.name, self.v2, self.tlen = name, v2, len(raw)
        self.queues = queues  # queue ids below this are accepted (a Java int; fewer with a topic config)
        self.tail = R.topic_tail(raw, v2)
        self.magic = R.MAGIC_V2 if v2 else R.MAGIC_V1
        self.fast = fast
        self.tag_tails: dict[str | None, tuple[bytes, int, int, bytes, tuple]] = {}

    def tag_tail(self, tags: str | None) -> tuple[bytes, int, int, bytes, tuple] | None:
        """(tail = TOPIC + PROPERTIES for a message with only these tags, its length, tagsCode, the
        properties alone, their props_info); None for tags that cannot be stored (not a string, or holding
        a separator)."""
        try:
            got = self.tag_tails.get(tags)
        except TypeError:  # unhashable: not a string
            return None
        if got is None:
            if tags is not None and not P.storable_text(tags):
                log.warning("put refused: tags %r must be a string without \\x01 or \\x02", tags)
                return None
            props = f"TAGS\x01{tags}\x02".encode("utf-8", "replace") if tags else b""
            tail = self.tail + R.U16.pack(len(props) & 0xFFFF) + props
            # the tagsCode of what is stored (a separator cuts the tag; an unpaired surrogate became "?")
            info = props_info(props)
            got = (tail, len(tail), info[0], props, info)
            if len(self.tag_tails) < 1024:
                self.tag_tails[tags] = got
        return got
