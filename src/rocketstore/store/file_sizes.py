"""File sizes a config leaves open (None), read from the files of the store as RocketMQ would have written
them: every segment of a kind has one size, so the first one found says it; else RocketMQ's defaults."""

from __future__ import annotations

import dataclasses
import os

from ..config.store_config import StoreConfig
from ..errors import StoreOpenError
from ..files.layout import BATCH_CONSUMEQUEUE, COMMITLOG, CONSUMEQUEUE, CONSUMEQUEUE_EXT, StoreLayout

# the files whose size is inferred from disk: (directory, what they are, their unit, RocketMQ's setting)
_INFERRED = {
    "mapped_file_size_commit_log": (COMMITLOG, "CommitLog", 1, "mappedFileSizeCommitLog"),
    "mapped_file_size_consume_queue": (CONSUMEQUEUE, "ConsumeQueue", 20, "mappedFileSizeConsumeQueue"),
    "mapped_file_size_batch_consume_queue": (
        BATCH_CONSUMEQUEUE,
        "batch ConsumeQueue",
        46,
        "mapperFileSizeBatchConsumeQueue",
    ),
    "mapped_file_size_consume_queue_ext": (CONSUMEQUEUE_EXT, "ConsumeQueueExt", 1, "mappedFileSizeConsumeQueueExt"),
}
_DEFAULTS = {
    "mapped_file_size_commit_log": StoreConfig.DEFAULT_COMMIT_LOG_SIZE,
    "mapped_file_size_consume_queue": StoreConfig.DEFAULT_CONSUME_QUEUE_SIZE,
    "mapped_file_size_batch_consume_queue": StoreConfig.DEFAULT_BATCH_CONSUME_QUEUE_SIZE,
    "mapped_file_size_consume_queue_ext": StoreConfig.DEFAULT_CONSUME_QUEUE_EXT_SIZE,
}


def inferred_size(layout: StoreLayout, name: str) -> int | None:
    """A file size the config leaves open, from the first segment on disk: it must hold whole units (a file
    cut inside a unit cannot say what size its queue's files have)."""
    kind, what, unit, setting = _INFERRED[name]
    path = layout.first_segment(kind)
    if path is None:
        return None
    size = os.path.getsize(path)
    if size and size % unit:
        raise StoreOpenError(
            f"{path}: {what} file is {size} bytes, not a whole number of {unit}-byte units "
            f"(cut short or damaged; {setting} cannot be taken from it)"
        )
    return size or None


def index_sizes(layout: StoreLayout, slots: int | None, entries: int | None) -> tuple[int, int]:
    """maxHashSlotNum and maxIndexNum left open: solved from an index file's size (40 + 4 x slots + 20 x
    entries; with both open, RocketMQ's ratio of 4 entries per slot), else RocketMQ's defaults."""
    if slots is not None and entries is not None:
        return slots, entries
    directory = layout.index
    names = sorted(n for n in os.listdir(directory) if not n.startswith(".")) if os.path.isdir(directory) else []
    if names:
        body = os.path.getsize(os.path.join(directory, names[0])) - 40
        if slots is None and entries is None and body > 0 and body % 84 == 0:
            return body // 84, body // 84 * 4
        if slots is not None and body - 4 * slots > 0 and (body - 4 * slots) % 20 == 0:
            return slots, (body - 4 * slots) // 20
        if entries is not None and body - 20 * entries > 0 and (body - 20 * entries) % 4 == 0:
            return (body - 20 * entries) // 4, entries
    return (slots or StoreConfig.DEFAULT_HASH_SLOT_NUM), (entries or StoreConfig.DEFAULT_INDEX_NUM)


def resolve_file_sizes(root: str, config: StoreConfig) -> StoreConfig:
    """Fill in file sizes the config leaves open: from the files on disk, else RocketMQ's defaults."""
    layout = StoreLayout(root)
    sizes = {
        name: getattr(config, name) if getattr(config, name) is not None else inferred_size(layout, name) or default
        for name, default in _DEFAULTS.items()
    }
    slots, entries = index_sizes(layout, config.max_hash_slot_num, config.max_index_num)
    return dataclasses.replace(config, **sizes, max_hash_slot_num=slots, max_index_num=entries)
