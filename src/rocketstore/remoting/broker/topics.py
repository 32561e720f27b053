"""The broker's topic table (RocketMQ's TopicConfigManager): the store's topics (config/topics.json) plus the
system topics a broker starts with, kept in memory as RocketMQ's TopicConfigManager creates them at start:
SELF_TEST_TOPIC, TBW102 (with autoCreateTopicEnable: the default topic a producer's new topics inherit from),
BenchmarkTest, the cluster's and the broker's own names, OFFSET_MOVED_EVENT and SCHEDULE_TOPIC_XXXX.

Auto-creation as the broker does it: a send to an unknown topic whose defaultTopic (TBW102) has the inherit
permission creates it with min(the producer's defaultTopicQueueNums, the default topic's write queues) queues
(createTopicInSendMessageMethod); a consumer's heartbeat creates %RETRY%group with its group's retryQueueNums queues
(createTopicInSendMessageBackMethod). Every change re-registers the broker's topics with the name server."""

from __future__ import annotations

from functools import lru_cache

import threading

from ...broker.rules import is_client_send_forbidden
from ...validation import topic_problem
from ..namesrv.routes import PERM_INHERIT, PERM_READ, PERM_WRITE, TopicConfig

DEFAULT_TOPIC = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
SCHEDULE_QUEUES = 18  # ScheduleMessageService's queue count: one per delay level
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
RW = PERM_READ | PERM_WRITE
FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


def system_topics(cluster: str, broker_name: str, auto_create: bool, default_queues: int) -> dict[str, TopicConfig]:
    """What TopicConfigManager's constructor adds (clusterTopicEnable and brokerTopicEnable at their defaults)."""
    out = {"SELF_TEST_TOPIC": TopicConfig("SELF_TEST_TOPIC", 1, 1, RW)}
    if auto_create:
        out[DEFAULT_TOPIC] = TopicConfig(DEFAULT_TOPIC, default_queues, default_queues, PERM_INHERIT | RW)
    out["BenchmarkTest"] = TopicConfig("BenchmarkTest", 1024, 1024, RW)
    out[cluster] = TopicConfig(cluster, 16, 16, PERM_INHERIT | RW)
    out[broker_name] = TopicConfig(broker_name, 1, 1, PERM_INHERIT | RW)
    out["OFFSET_MOVED_EVENT"] = TopicConfig("OFFSET_MOVED_EVENT", 1, 1, RW)
    out[SCHEDULE_TOPIC] = TopicConfig(SCHEDULE_TOPIC, SCHEDULE_QUEUES, SCHEDULE_QUEUES, RW)
    return out


def from_store(name: str, cfg: dict) -> TopicConfig:
    return TopicConfig(
        name,
        int(cfg.get("readQueueNums", 0)),
        int(cfg.get("writeQueueNums", 0)),
        int(cfg.get("perm", RW)),
        str(cfg.get("topicFilterType") or "SINGLE_TAG"),
        int(cfg.get("topicSysFlag", 0)),
        bool(cfg.get("order", False)),
        dict(cfg.get("attributes") or {}),
    )


class BrokerTopics:
    """Topic configs by name; `on_change()` is called after a topic is created (to re-register)."""

    def __init__(self, store, settings, on_change=None):
        self.store = store
        self.settings = settings
        self.on_change = on_change
        self.lock = threading.Lock()
        self.system = system_topics(
            settings.brokerClusterName, settings.brokerName, settings.autoCreateTopicEnable,
            settings.defaultTopicQueueNums,
        )  # fmt: skip

    def get(self, name: str) -> TopicConfig | None:
        cfg = self.store.topic_configs.get(name)
        if cfg is not None:
            return from_store(name, cfg)
        if name in self.system:
            return self.system[name]
        return self._unconfigured().get(name)

    def all(self) -> dict[str, TopicConfig]:
        out = dict(self.system)
        out.update(self._unconfigured())
        for name, cfg in list(self.store.topic_configs.items()):
            out[name] = from_store(name, cfg)
        return out

    def _unconfigured(self) -> dict[str, TopicConfig]:
        """Topics the store has queues for but no config (written by the library's put without create_topic):
        served with as many queues as they have (the store's queue_count)."""
        configs = self.store.topic_configs
        out = {}
        for name in self.store.topics():
            if name not in configs and name not in self.system:
                n = self.store.queue_count(name)
                out[name] = TopicConfig(name, n, n, RW)
        return out

    def create(self, name: str, queues: int) -> TopicConfig:
        with self.lock:
            if name not in self.store.topic_configs:
                self.store.create_topic(name, queues)
        if self.on_change is not None:
            self.on_change()
        return self.get(name)

    def create_for_send(self, topic: str, default_topic: str | None, client_queues: int | None) -> TopicConfig | None:
        """createTopicInSendMessageMethod: inherit from the default topic, or None (TOPIC_NOT_EXIST)."""
        default = self.system.get(default_topic) if default_topic == DEFAULT_TOPIC else None
        if default is None or not default.perm & PERM_INHERIT:
            return None
        queues = max(min(client_queues if client_queues is not None else 0, default.write_queue_nums), 0)
        if queues == 0:
            return None  # a topic without queues cannot take the message
        return self.create(topic, queues)

    def create_retry(self, group: str) -> TopicConfig:
        """createTopicInSendMessageBackMethod for %RETRY%group (the group's retryQueueNums: 1)."""
        name = RETRY_PREFIX + group
        return self.get(name) or self.create(name, 1)


@lru_cache(maxsize=4096)  # asked on every send; a pure function of the name
def send_refusal(topic: str) -> tuple[str, str] | None:
    """msgCheck's topic checks: ("INVALID_PARAMETER" | "NO_PERMISSION", remark) or None (rules.is_client_send_forbidden:
    the one rule of both protocols)."""
    problem = topic_problem(topic, allow_long=False)
    if problem:
        return "INVALID_PARAMETER", problem
    if is_client_send_forbidden(topic):
        return "NO_PERMISSION", f"Sending message to topic[{topic}] is forbidden."
    return None
