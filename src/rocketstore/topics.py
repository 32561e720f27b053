"""config/topics.json: RocketMQ's topic configs (TopicConfigManager's file). The store reads one thing from
it: a topic's `queue.type` attribute, which says whether its queues are plain or batch ConsumeQueues."""
from __future__ import annotations

import json
import os

from .errors import StoreOpenError

QUEUE_TYPE = "queue.type"
SIMPLE_CQ = "SimpleCQ"
BATCH_CQ = "BatchCQ"


def topics_path(root: str) -> str:
    return os.path.join(root, "config", "topics.json")


def read_topic_queue_types(root: str) -> dict[str, str]:
    """topic -> queue type, for the topics whose config names one. Like RocketMQ's ConfigManager, a
    missing or unreadable file falls back to its `.bak` copy; no file at all means no topic configs."""
    path = topics_path(root)
    problems = []
    for candidate in (path, path + ".bak"):
        if not os.path.exists(candidate):
            continue
        try:
            with open(candidate, encoding="utf-8") as fh:
                data = json.load(fh)
            table = data.get("topicConfigTable") or {}
            out = {}
            for name, cfg in table.items():
                kind = ((cfg or {}).get("attributes") or {}).get(QUEUE_TYPE)
                if kind is not None:
                    if kind not in (SIMPLE_CQ, BATCH_CQ):
                        raise ValueError(f"topic {name}: unknown {QUEUE_TYPE} {kind!r}")
                    out[name] = kind
            return out
        except (OSError, ValueError, AttributeError) as e:
            problems.append(f"{candidate}: {e}")
    if problems:
        raise StoreOpenError("cannot read the topic configs: " + "; ".join(problems))
    return {}
