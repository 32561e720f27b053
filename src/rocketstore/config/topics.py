"""config/topics.json: RocketMQ's topic configs (TopicConfigManager's file, same JSON). The store needs a
topic's `queue.type` attribute from it (plain or batch ConsumeQueue); create_topic writes it."""

from __future__ import annotations

import json
import os
import time

from .files import JAVA_INT, as_int, as_object, as_str, load_json, read_config, write_atomically

QUEUE_TYPE = "queue.type"
SIMPLE_CQ = "SimpleCQ"
BATCH_CQ = "BatchCQ"
QUEUE_TYPES = (SIMPLE_CQ, BATCH_CQ)
PERM_READ_WRITE = 6
# queues of a topic created without a count: BrokerConfig.defaultTopicQueueNums (8), which is also what
# mqadmin updateTopic gives (readQueueNums = writeQueueNums = 8). The one default every tool uses: the
# store (create_topic, ensure_topic, a put's round robin), `rocketstore produce | topic create`, the Spark sink
# and `serve`.
DEFAULT_QUEUE_NUMS = 8


def topics_path(root: str) -> str:
    return os.path.join(root, "config", "topics.json")


def parse_topic_configs(text: str) -> dict[str, dict]:
    """topicConfigTable of a topics.json, each TopicConfig checked for the fields rocketstore reads having
    TopicConfig's types (ValueError otherwise)."""
    doc = as_object(load_json(text), "the file", optional=False)
    table = as_object(doc.get("topicConfigTable"), "topicConfigTable")
    for name, cfg in table.items():
        cfg = as_object(cfg, f"topic {name!r}", optional=False)
        for key in _INT_FIELDS:
            if cfg.get(key) is not None:
                as_int(cfg[key], f"topic {name!r}: {key}", (0, JAVA_INT[1]))
        if cfg.get("topicName") is not None:
            as_str(cfg["topicName"], f"topic {name!r}: topicName")
        for k, v in as_object(cfg.get("attributes"), f"topic {name!r}: attributes").items():
            as_str(v, f"topic {name!r}: attribute {k!r}")
        kind = queue_type(cfg)
        if kind not in QUEUE_TYPES:
            raise ValueError(f"topic {name!r}: unknown {QUEUE_TYPE} {kind!r}")
    return dict(table)


_INT_FIELDS = ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")  # Java ints in TopicConfig


def read_topic_configs(root: str) -> dict[str, dict]:
    """topic -> its TopicConfig (as JSON); no file at all means no topic configs."""
    return read_config(topics_path(root), parse_topic_configs, "the topic configs") or {}


def queue_type(cfg: dict | None) -> str:
    return ((cfg or {}).get("attributes") or {}).get(QUEUE_TYPE, SIMPLE_CQ)


def topic_config(name: str, queues: int, attributes: dict[str, str]) -> dict:
    """A TopicConfig as RocketMQ serialises it."""
    return {
        "topicName": name,
        "readQueueNums": queues,
        "writeQueueNums": queues,
        "perm": PERM_READ_WRITE,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
        "attributes": dict(attributes),
    }


def write_topic_configs(root: str, configs: dict[str, dict], counter: int = 0) -> None:
    text = json.dumps(
        {
            "dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": int(time.time() * 1000)},
            "topicConfigTable": configs,
        },
        indent=4,
        ensure_ascii=False,
    )
    write_atomically(topics_path(root), text)
