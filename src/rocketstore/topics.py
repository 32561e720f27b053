"""config/topics.json: RocketMQ's topic configs (TopicConfigManager's file, same JSON). The store needs a
topic's `queue.type` attribute from it (plain or batch ConsumeQueue); create_topic writes it, atomically
and with a `.bak` of the previous version, as RocketMQ's MixAll.string2File does."""
from __future__ import annotations

import json
import os
import time

from .errors import StoreOpenError

QUEUE_TYPE = "queue.type"
SIMPLE_CQ = "SimpleCQ"
BATCH_CQ = "BatchCQ"
QUEUE_TYPES = (SIMPLE_CQ, BATCH_CQ)
PERM_READ_WRITE = 6


def topics_path(root: str) -> str:
    return os.path.join(root, "config", "topics.json")


def read_topic_configs(root: str) -> dict[str, dict]:
    """topic -> its TopicConfig (as JSON). Like RocketMQ's ConfigManager, an unreadable file falls back to
    its `.bak` copy; no file at all means no topic configs."""
    path = topics_path(root)
    problems = []
    for candidate in (path, path + ".bak"):
        if not os.path.exists(candidate):
            continue
        try:
            with open(candidate, encoding="utf-8") as fh:
                data = json.load(fh)
            table = data.get("topicConfigTable") or {}
            for name, cfg in table.items():
                kind = queue_type(cfg)
                if kind not in QUEUE_TYPES:
                    raise ValueError(f"topic {name}: unknown {QUEUE_TYPE} {kind!r}")
            return dict(table)
        except (OSError, ValueError, AttributeError) as e:
            problems.append(f"{candidate}: {e}")
    if problems:
        raise StoreOpenError("cannot read the topic configs: " + "; ".join(problems))
    return {}


def queue_type(cfg: dict | None) -> str:
    return ((cfg or {}).get("attributes") or {}).get(QUEUE_TYPE, SIMPLE_CQ)


def topic_config(name: str, queues: int, attributes: dict[str, str]) -> dict:
    """A TopicConfig as RocketMQ serialises it."""
    return {"topicName": name, "readQueueNums": queues, "writeQueueNums": queues, "perm": PERM_READ_WRITE,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False, "attributes": dict(attributes)}


def write_topic_configs(root: str, configs: dict[str, dict], counter: int = 0) -> None:
    """Write topics.json: temp file, fsync, previous version to .bak, rename over, fsync the directory."""
    path = topics_path(root)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = json.dumps({"dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": int(time.time() * 1000)},
                       "topicConfigTable": configs}, indent=4, ensure_ascii=False)
    _write_synced(path + ".tmp", text)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            _write_synced(path + ".bak", fh.read())
    os.replace(path + ".tmp", path)
    fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
