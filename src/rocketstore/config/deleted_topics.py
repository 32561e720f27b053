"""Deleted topics (config/deletedTopics.json): where the CommitLog ended when each topic was deleted.

RocketMQ's deleteTopic removes a topic's config and queues but leaves its CommitLog records until they expire;
the next start re-dispatches the CommitLog from the furthest point any queue reaches (DefaultMessageStore.start),
so when the deleted topic held the newest records its queues come back. rocketstore keeps deleted deleted: the
ConsumeQueue dispatcher and the rebuild give no unit to a record of a deleted topic that lies below the offset
recorded here. A topic created again under the same name gets its new records (they lie past that offset),
never the old ones. An entry is forgotten once the CommitLog's first record lies past it (every record it
covered has expired). The file is rocketstore's own: RocketMQ ignores it.
"""

from __future__ import annotations

import json
import os

from .files import as_int, as_object, load_json, read_config, write_atomically

FILE = "deletedTopics.json"


def path_of(root: str) -> str:
    return os.path.join(root, "config", FILE)


def parse(text: str) -> dict[str, int]:
    """{"deletedTopics": {topic: CommitLog offset}}: ValueError for any other shape."""
    table = as_object(as_object(load_json(text), FILE, optional=False).get("deletedTopics"), "deletedTopics")
    return {str(t): as_int(v, f"deletedTopics.{t}") for t, v in table.items()}


class DeletedTopics:
    """topic -> the CommitLog offset below which its records get no queue unit."""

    def __init__(self, root: str, writable: bool = True):
        self.path = path_of(root)
        self.writable = writable
        self.below_offset: dict[str, int] = {}

    def load(self) -> None:
        self.below_offset = read_config(self.path, parse, "the deleted topics") or {}

    def __bool__(self) -> bool:
        return bool(self.below_offset)

    def below(self, topic: str) -> int:
        """Records of `topic` before this CommitLog offset get no unit (-1: the topic was never deleted)."""
        return self.below_offset.get(topic, -1)

    def add(self, topic: str, end_offset: int) -> None:
        """`topic` was deleted while the CommitLog ended at `end_offset`: written (fsynced) before the
        topic's queues go, so that no crash lets them come back."""
        self.below_offset[topic] = max(end_offset, self.below(topic))
        self._write()

    def forget_expired(self, min_offset: int) -> None:
        """Drop the entries every one of whose records has expired (the CommitLog starts at or past them)."""
        kept = {t: o for t, o in self.below_offset.items() if o > min_offset}
        if kept != self.below_offset:
            self.below_offset = kept
            if self.writable:
                self._write()

    def _write(self) -> None:
        write_atomically(self.path, json.dumps({"deletedTopics": self.below_offset}, indent=4, sort_keys=True))
