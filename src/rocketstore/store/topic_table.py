"""The store's topics: their configs (config/topics.json, topics.py's format) and the queues they have in
the queue table. Creates, updates and deletes topics as RocketMQ's broker does, and picks the queue of a
put sent without one."""

from __future__ import annotations

import os

from ..config import topics as TC


from ..files.layout import BATCH_CONSUMEQUEUE, CONSUMEQUEUE, CONSUMEQUEUE_EXT
from ..message import Message
from ..config.topics import BATCH_CQ
from ..validation import topic_problem
from ..engine import java_string_hash, parse_properties

DEFAULT_QUEUES = 4  # a put to a topic with no config: a producer's defaultTopicQueueNums (DefaultMQProducer)
SHARDING_KEY = "__SHARDINGKEY"


class TopicTable:
    def __init__(self, layout, queues, deleted):
        """`layout`: the store's StoreLayout; `queues`: its queue table (log.queue_table.QueueTable), which
        also keeps the set of batch topics; `deleted`: the deleted topics (deleted_topics.DeletedTopics)."""
        self.layout = layout
        self.queues = queues
        self.deleted = deleted
        self.configs: dict[str, dict] = {}
        self._round_robin: dict[str, int] = {}

    def load(self) -> set[str]:
        """Read config/topics.json; returns the topics whose queue.type is BatchCQ."""
        self.configs = TC.read_topic_configs(self.layout.root)
        return {t for t, cfg in self.configs.items() if TC.queue_type(cfg) == BATCH_CQ}

    # ---------------------------------------------------------------- create, update, delete
    def create(self, name: str, queues: int, attributes: dict[str, str] | None, writer) -> None:
        """Create or update a topic's config (see MessageStore.create_topic); `writer`: the MessageWriter,
        whose lock keeps puts out meanwhile."""
        problem = topic_problem(name)
        if problem:
            raise ValueError(problem)
        if type(queues) is not int or not 1 <= queues <= 1024:
            raise ValueError(f"queues must be between 1 and 1024, got {queues!r}")
        batch_topics = self.queues.batch_topics
        if attributes is None and name in self.configs:  # an update keeps the topic's attributes
            attributes = self.configs[name].get("attributes") or {}
        attributes = dict(attributes or {})
        kind = attributes.get(TC.QUEUE_TYPE, BATCH_CQ if name in batch_topics else TC.SIMPLE_CQ)
        if kind not in TC.QUEUE_TYPES:
            raise ValueError(f"{TC.QUEUE_TYPE} must be one of {', '.join(TC.QUEUE_TYPES)}, got {kind!r}")
        if kind == BATCH_CQ:
            attributes[TC.QUEUE_TYPE] = kind  # say it in the file: only SimpleCQ is the default
        with writer.lock:
            current = (
                TC.queue_type(self.configs.get(name))
                if name in self.configs
                else (BATCH_CQ if name in batch_topics else TC.SIMPLE_CQ if self.queues.queue_ids(name) else None)
            )
            if current is not None and current != kind:
                raise ValueError(f"topic {name} has {TC.QUEUE_TYPE} {current}; it cannot become {kind}")
            configs = dict(self.configs)
            configs[name] = TC.topic_config(name, queues, attributes)
            TC.write_topic_configs(self.layout.root, configs, counter=len(configs))
            self.configs = configs
            if kind == BATCH_CQ:
                batch_topics.add(name)
            writer.forget_topic(name)

    def set_fields(self, name: str, fields: dict, attributes: dict[str, str], writer) -> None:
        """Write `fields` (TopicConfig's JSON names) and `attributes` (added to the ones it has) over a topic's
        entry, which create() made (MessageStore.update_topic_config)."""
        with writer.lock:
            configs = dict(self.configs)
            # the entry names a batch topic's queue.type even when the update did not
            merged = {**(configs[name].get("attributes") or {}), **attributes}
            configs[name] = {**configs[name], **fields, "topicName": name, "attributes": merged}
            TC.write_topic_configs(self.layout.root, configs, counter=len(configs))
            self.configs = configs
            writer.forget_topic(name)

    def ensure(self, name: str, writer) -> None:
        """A config for a topic that has none: the default queue count, or as many queues as it has if more."""
        if name not in self.configs:
            existing = self.queues.queue_ids(name)
            self.create(name, max(TC.DEFAULT_QUEUE_NUMS, max(existing, default=-1) + 1), None, writer)

    def delete(self, name: str, writer) -> bool:
        """The topic's config and queues (deleteTopicInBroker, but the groups' offsets: the store's);
        False when there is no such topic."""
        with writer.lock:
            queue_ids = self.queues.queue_ids(name)
            if name not in self.configs and not queue_ids:
                return False
            # first, durably: no later dispatch of the records it has (a reopen's) gives it queues again
            self.deleted.add(name, writer.commitlog.max_offset())
            if name in self.configs:
                configs = {t: c for t, c in self.configs.items() if t != name}
                TC.write_topic_configs(self.layout.root, configs, counter=len(configs))
                self.configs = configs
            for q in queue_ids:
                self.queues.destroy(name, q)
                writer.queue_offsets.pop((name, q), None)
            for kind in (CONSUMEQUEUE, BATCH_CONSUMEQUEUE, CONSUMEQUEUE_EXT):
                directory = self.layout.topic_dir(kind, name)
                if os.path.isdir(directory) and not os.listdir(directory):
                    os.rmdir(directory)
            self.queues.batch_topics.discard(name)
            writer.forget_topic(name)
            self._round_robin.pop(name, None)
        return True

    # ---------------------------------------------------------------- queues of a put
    def queue_count(self, topic: str) -> int:
        """How many queues a put without a queue id spreads over: the topic config's writeQueueNums, else
        the queues the topic has, else a producer's default of 4 (DefaultMQProducer.defaultTopicQueueNums)."""
        cfg = self.configs.get(topic)
        if cfg and int(cfg.get("writeQueueNums") or 0) > 0:
            return int(cfg["writeQueueNums"])
        return max(max(self.queues.queue_ids(topic), default=-1) + 1, DEFAULT_QUEUES)

    def configured_queues(self, topic: str) -> int | None:
        """The queue ids a put may name for a topic with a config: below max(writeQueueNums, readQueueNums),
        as the broker's msgCheck requires; None (any int32) for a topic without one."""
        cfg = self.configs.get(topic)
        if not cfg or (cfg.get("writeQueueNums") is None and cfg.get("readQueueNums") is None):
            return None
        return max(cfg.get("writeQueueNums") or 0, cfg.get("readQueueNums") or 0)

    def pick_queue(self, msg: Message) -> int:
        """A queue for a message sent without one: by its sharding key (`__SHARDINGKEY`, as RocketMQ's
        SelectMessageQueueByHash: |hashCode % n|), else round robin over the topic's queues."""
        if not isinstance(msg.topic, str):
            return 0  # the put refuses the topic
        n = self.queue_count(msg.topic)
        key = (
            (msg.properties or {}).get(SHARDING_KEY)
            if msg.raw_properties is None
            else parse_properties(msg.raw_properties).get(SHARDING_KEY)
        )
        if key:
            return abs(java_string_hash(key)) % n
        turn = self._round_robin.get(msg.topic, 0)
        self._round_robin[msg.topic] = turn + 1
        return turn % n
