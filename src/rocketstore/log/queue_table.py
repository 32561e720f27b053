"""The queue table: (topic, queue id) -> that queue's ConsumeQueue or BatchConsumeQueue (RocketMQ's
ConsumeQueueStore.consumeQueueTable). Loads every queue directory at open, finds or creates a queue for a
record, destroys queues. Which kind a topic's queues are is `batch_topics`' to say (the topic's
queue.type, or a batch ConsumeQueue directory found on disk)."""

from __future__ import annotations

import logging
import os

from ..files.layout import BATCH_CONSUMEQUEUE, CONSUMEQUEUE, StoreLayout
from ..validation import topic_problem
from .batch_consume_queue import BatchConsumeQueue
from .consume_queue import ConsumeQueue
from .consume_queue_ext import ConsumeQueueExt

log = logging.getLogger("rocketstore")


class QueueTable:
    def __init__(self, layout: StoreLayout, config, writable: bool):
        self.layout = layout
        self.config = config
        self.writable = writable
        self.batch_topics: set[str] = set()  # topics whose queue.type is BatchCQ (RIP-26)
        self._queues: dict = {}
        # the lookup the dispatchers make for every record: the dict's own get, keyed by (topic, queue id)
        self.get_by_key = self._queues.get

    # ---------------------------------------------------------------- open
    def load(self, batch_topics) -> None:
        """Load every queue directory (the files; recovery comes after). `batch_topics`: the topics whose
        config says BatchCQ; a batchconsumequeue/ directory makes its topic one too, and a consumequeue/
        directory of such a topic is ignored."""
        self.batch_topics = set(batch_topics)
        for kind in (CONSUMEQUEUE, BATCH_CONSUMEQUEUE):
            self._load_kind(kind)

    def _load_kind(self, kind: str) -> None:
        base = self.layout.path(kind)
        if not os.path.isdir(base):
            return
        batch = kind == BATCH_CONSUMEQUEUE
        for topic in sorted(os.listdir(base)):
            tdir = self.layout.topic_dir(kind, topic)
            if not os.path.isdir(tdir) or topic_problem(topic):
                log.warning("ignoring %s: not a topic directory", tdir)
                continue
            for q in sorted(os.listdir(tdir)):
                if not q.isdigit():
                    log.warning("ignoring %s: not a queue directory", os.path.join(tdir, q))
                    continue
                if batch:
                    self.batch_topics.add(topic)
                elif topic in self.batch_topics:
                    log.warning("ignoring %s: topic %s keeps a batch ConsumeQueue", os.path.join(tdir, q), topic)
                    continue
                cq = self._new(topic, int(q))
                cq.load()
                self._queues[(topic, int(q))] = cq

    def _new(self, topic: str, queue_id: int):
        root, cfg, writable = self.layout.root, self.config, self.writable
        if topic in self.batch_topics:
            return BatchConsumeQueue(root, topic, queue_id, cfg.mapped_file_size_batch_consume_queue, writable=writable)
        ext = None
        if cfg.enable_consume_queue_ext:  # consumequeue_ext/{topic}/{queueId}/, as RocketMQ's constructor
            ext = ConsumeQueueExt(
                root,
                topic,
                queue_id,
                cfg.mapped_file_size_consume_queue_ext,
                cfg.bit_map_length_consume_queue_ext,
                writable=writable,
            )
        return ConsumeQueue(root, topic, queue_id, cfg.mapped_file_size_consume_queue, writable=writable, ext=ext)

    # ---------------------------------------------------------------- lookups
    def get(self, topic: str, queue_id: int):
        """The queue, or None when the table has none."""
        return self._queues.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int):
        """The queue, created (and added to the table) if it is new."""
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            cq = self._queues[(topic, queue_id)] = self._new(topic, queue_id)
        return cq

    def is_batch(self, topic: str) -> bool:
        return topic in self.batch_topics

    def keys(self) -> list[tuple[str, int]]:
        return list(self._queues)

    def queue_ids(self, topic: str) -> list[int]:
        return [q for t, q in self._queues if t == topic]

    def __iter__(self):
        return iter(list(self._queues.values()))

    def __len__(self) -> int:
        return len(self._queues)

    def __bool__(self) -> bool:
        return bool(self._queues)

    def max_physic_offset(self) -> int:
        """The furthest any queue's units reach into the CommitLog (-1 without units)."""
        return max((cq.max_physic_offset for cq in self._queues.values()), default=-1)

    # ---------------------------------------------------------------- destroy, close
    def destroy(self, topic: str, queue_id: int) -> None:
        """Delete one queue's files (its ext's with it) and drop it from the table."""
        self._queues.pop((topic, queue_id)).destroy()

    def destroy_all(self) -> None:
        """Every queue's files gone (ConsumeQueue.destroy: the ext's with them), the table empty."""
        for cq in self._queues.values():
            cq.destroy()
        self._queues.clear()

    def close(self) -> None:
        for cq in self._queues.values():
            cq.close()
