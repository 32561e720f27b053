"""The store's metadata files under config/ (topics.json, consumerOffset.json): written as RocketMQ's
MixAll.string2File does, so a crash never leaves a half-written one (apache/rocketmq #3401): the new text
to a temp file and fsynced, the previous version kept as `.bak`, then a rename over, then the directory
fsynced. Reading falls back to the `.bak` when the file is missing or unreadable, as ConfigManager does."""
from __future__ import annotations

import os


def write_atomically(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
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


def read_with_backup(path: str, parse):
    """parse(text) of the file, else of its .bak; (None, []) when neither exists; (None, problems) when
    neither can be read."""
    problems = []
    for candidate in (path, path + ".bak"):
        if not os.path.exists(candidate):
            continue
        try:
            with open(candidate, encoding="utf-8") as fh:
                return parse(fh.read()), problems
        except (OSError, ValueError, AttributeError, TypeError) as e:
            problems.append(f"{candidate}: {e}")
    return None, problems


def _write_synced(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
