"""config/topics.json: RocketMQ's topic configs (TopicConfigManager's file, same JSON). The store needs a
topic's `queue.type` attribute from it (plain or batch ConsumeQueue); create_topic writes it."""
from __future__ import annotations

import json
import os
import time

from .config_files import read_with_backup, write_atomically
from .errors import StoreOpenError

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


def read_topic_configs(root: str) -> dict[str, dict]:
    """topic -> its TopicConfig (as JSON); no file at all means no topic configs."""
    def parse(text: str) -> dict[str, dict]:
        table = json.loads(text).get("topicConfigTable") or {}
        for name, cfg in table.items():
            kind = queue_type(cfg)
            if kind not in QUEUE_TYPES:
                raise ValueError(f"topic {name}: unknown {QUEUE_TYPE} {kind!r}")
        return dict(table)
    configs, problems = read_with_backup(topics_path(root), parse)
    if configs is None and problems:
        raise StoreOpenError("cannot read the topic configs: " + "; ".join(problems))
    return configs or {}


def queue_type(cfg: dict | None) -> str:
    return ((cfg or {}).get("attributes") or {}).get(QUEUE_TYPE, SIMPLE_CQ)


def topic_config(name: str, queues: int, attributes: dict[str, str]) -> dict:
    """A TopicConfig as RocketMQ serialises it."""
    return {"topicName": name, "readQueueNums": queues, "writeQueueNums": queues, "perm": PERM_READ_WRITE,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False, "attributes": dict(attributes)}


def write_topic_configs(root: str, configs: dict[str, dict], counter: int = 0) -> None:
    text = json.dumps({"dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": int(time.time() * 1000)},
                       "topicConfigTable": configs}, indent=4, ensure_ascii=False)
    write_atomically(topics_path(root), text)
