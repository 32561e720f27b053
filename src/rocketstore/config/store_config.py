"""StoreConfig: RocketMQ's MessageStoreConfig names in snake_case, with RocketMQ's defaults."""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"

# RocketMQ spells a few names its own way; map them onto ours.
ALIASES = {
    "mapperFileSizeBatchConsumeQueue": "mapped_file_size_batch_consume_queue",
    "mappedFileSizeBatchConsumeQueue": "mapped_file_size_batch_consume_queue",
    "enabledAppendPropCRC": "enabled_append_prop_crc",
    "checkCRCOnRecover": "check_crc_on_recover",
    "forceVerifyPropCRC": "force_verify_prop_crc",
}


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def wall_clock_ms() -> int:
    """The default clock: ms since the epoch (the put path's C reads the same clock itself when it is this)."""
    return time.time_ns() // 1_000_000


@dataclass
class StoreConfig:
    # file sizes; None = RocketMQ's default for a new store, or the size of the segments already on disk
    mapped_file_size_commit_log: int | None = None  # 1 GiB
    mapped_file_size_consume_queue: int | None = None  # 300,000 units of 20 B
    mapped_file_size_batch_consume_queue: int | None = None  # 300,000 units of 46 B
    # flushing
    flush_disk_type: str = ASYNC_FLUSH
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    flush_commit_log_timed: bool = True
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    sync_flush_timeout: int = 5000
    commit_interval_commit_log: int = 200
    transient_store_pool_enable: bool = False
    transient_store_pool_size: int = 5
    commit_commit_log_least_pages: int = 4
    commit_commit_log_thorough_interval: int = 200
    # messages
    max_message_size: int = 4 * 1024 * 1024
    auto_message_version_on_topic_len: bool = True
    enabled_append_prop_crc: bool = False
    force_verify_prop_crc: bool = False
    check_crc_on_recover: bool = True
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    # reads
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    max_filter_message_size: int = 16000
    travel_cq_file_num_when_get_message: int = 1
    max_msgs_num_batch: int = 64
    default_query_max_num: int = 32
    read_uncommitted: bool = False
    # index
    message_index_enable: bool = True
    message_index_safe: bool = False
    # None = RocketMQ's default (5,000,000 / 20,000,000) for a new store, or what the index files on disk say
    max_hash_slot_num: int | None = None
    max_index_num: int | None = None
    # cleanup
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: int = 85
    disk_space_warning_level_ratio: int = 90
    delete_file_batch_max: int = 10
    delete_commit_log_files_interval: int = 100
    delete_consume_queue_files_interval: int = 100
    destroy_maped_file_interval_forcibly: int = 120_000
    clean_resource_interval: int = 10_000
    clean_file_forcibly_enable: bool = True
    # the rest of the broker's identity the store records
    broker_role: str = "ASYNC_MASTER"
    duplication_enable: bool = False
    enable_consume_queue_ext: bool = False
    # SQL92 filters' bitmaps (BrokerConfig's names): computed at dispatch into the ConsumeQueue ext units
    enable_calc_filter_bit_map: bool = False
    max_error_rate_of_bloom_filter: int = 20
    expect_consumer_num_use_filter: int = 32
    # the ConsumeQueue extension (consumequeue_ext/): its file size (RocketMQ: 48 MiB) and the filter bitmap's
    # length in bits (RocketMQ's default 64; set by the bitmap calculation, nothing on disk depends on it)
    mapped_file_size_consume_queue_ext: int | None = None  # 48 MiB, or the size of the ext files on disk
    bit_map_length_consume_queue_ext: int = 64
    # rocketstore's own
    store_host: str = "127.0.0.1:10911"  # written into STOREHOST and msgIds
    clock: Callable[[], int] = field(default=wall_clock_ms, repr=False, compare=False)  # ms since epoch
    dispatch_in_put_path: bool = True  # build ConsumeQueue units while putting instead of in the reput thread
    total_physical_memory: int | None = None  # for RocketMQ's "in memory" read limits; None = this machine's
    # cleanup waits for the archive (`rocketstore archive --to`): no CommitLog segment is deleted before the
    # archive at archive_path holds it (broker.conf's archiveEnable and archivePath; serve's --archive)
    archive_enable: bool = False
    archive_path: str = ""
    extra: dict = field(default_factory=dict)  # broker.conf keys rocketstore does not use

    DEFAULT_COMMIT_LOG_SIZE = 1024 * 1024 * 1024
    DEFAULT_CONSUME_QUEUE_SIZE = 300_000 * 20
    DEFAULT_BATCH_CONSUME_QUEUE_SIZE = 300_000 * 46
    DEFAULT_CONSUME_QUEUE_EXT_SIZE = 48 * 1024 * 1024
    DEFAULT_HASH_SLOT_NUM = 5_000_000
    DEFAULT_INDEX_NUM = 5_000_000 * 4

    def __post_init__(self):
        if self.flush_disk_type not in (ASYNC_FLUSH, SYNC_FLUSH):
            raise ValueError(f"flush_disk_type must be {ASYNC_FLUSH} or {SYNC_FLUSH}, got {self.flush_disk_type!r}")
        for name in (
            "mapped_file_size_commit_log",
            "mapped_file_size_consume_queue",
            "mapped_file_size_batch_consume_queue",
        ):
            v = getattr(self, name)
            if v is not None and v <= 0:
                raise ValueError(f"{name} must be positive, got {v}")
        if self.mapped_file_size_consume_queue_ext is not None and self.mapped_file_size_consume_queue_ext <= 0:
            raise ValueError(
                f"mapped_file_size_consume_queue_ext must be positive, got {self.mapped_file_size_consume_queue_ext}"
            )
        if self.archive_enable and not self.archive_path:
            raise ValueError("archiveEnable=true needs archivePath: the archive cleanup waits for")
        cq = self.mapped_file_size_consume_queue
        if cq is not None and cq % 20:
            raise ValueError(f"mapped_file_size_consume_queue must be a multiple of 20, got {cq}")
        bcq = self.mapped_file_size_batch_consume_queue
        if bcq is not None and bcq % 46:
            raise ValueError(f"mapped_file_size_batch_consume_queue must be a multiple of 46, got {bcq}")

    @classmethod
    def from_properties(cls, source: Mapping[str, object] | str | os.PathLike, **overrides) -> "StoreConfig":
        """Build from RocketMQ's camelCase names (a mapping, or the path of a broker.conf).

        Values may be strings, as a broker.conf holds them; unknown keys are kept in `extra`."""
        if isinstance(source, (str, os.PathLike)):
            source = read_properties_file(source)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict = {}
        extra: dict = {}
        for key, raw in source.items():
            name = ALIASES.get(key) or _snake(key)
            f = fields.get(name)
            if f is None or name in ("clock", "extra"):
                extra[key] = raw
                continue
            kwargs[name] = _coerce(key, raw, f)
        kwargs.update(overrides)
        if extra:
            kwargs.setdefault("extra", {}).update(extra)
        return cls(**kwargs)

    def with_small_files(self) -> "StoreConfig":
        """The file sizes this config leaves open set to SMALL_FILE_SIZES: for a new store that should not
        reserve RocketMQ's 1 GiB CommitLog segment and 400 MiB index file up front. A store's later opens
        keep these sizes without being told (they are read from the files, file_sizes.resolve_file_sizes)."""
        small = {ALIASES.get(k) or _snake(k): v for k, v in SMALL_FILE_SIZES.items()}
        return dataclasses.replace(self, **{k: v for k, v in small.items() if getattr(self, k) is None})

    def delay_levels(self):
        from ..formats.record import parse_delay_levels

        return parse_delay_levels(self.message_delay_level)


# A small store's file sizes (broker.conf names): a CommitLog segment holds a message of maxMessageSize
# (4 MiB) and more; queue files of 6,000 units; index files of 5,000 slots and 20,000 entries (RocketMQ's ratio).
SMALL_FILE_SIZES = {
    "mappedFileSizeCommitLog": 16 * 1024 * 1024,
    "mappedFileSizeConsumeQueue": 6_000 * 20,
    "mapperFileSizeBatchConsumeQueue": 6_000 * 46,
    "mappedFileSizeConsumeQueueExt": 1024 * 1024,
    "maxHashSlotNum": 5_000,
    "maxIndexNum": 20_000,
}

_OPTIONAL_INTS = ("total_physical_memory", "max_hash_slot_num", "max_index_num")


def _coerce(key: str, raw, f: dataclasses.Field):
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    default = f.default
    if isinstance(default, bool):
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{key}={raw!r}: expected true or false")
        return text.lower() == "true"
    if isinstance(default, int) or f.name.startswith("mapped_file_size") or f.name in _OPTIONAL_INTS:
        if text.lower() == "null":
            return None
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{key}={raw!r}: expected an integer") from None
    return text


def read_properties_file(path) -> dict[str, str]:
    """A Java .properties file as RocketMQ's broker.conf uses it: key=value lines, # and ! comments."""
    out = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            s = line.strip()
            if not s or s[0] in "#!":
                continue
            m = re.match(r"([^=:\s]+)\s*[=:\s]?\s*(.*)$", s)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def store_names() -> frozenset[str]:
    """The broker.conf names StoreConfig takes (camelCase, RocketMQ's spellings included)."""
    fields = (f.name for f in dataclasses.fields(StoreConfig) if f.name not in ("clock", "extra"))
    return frozenset(_camel(n) for n in fields) | frozenset(ALIASES)


def unknown_keys(source: Mapping[str, object] | str | os.PathLike) -> list[tuple[str, str | None]]:
    """The keys of a broker.conf (a mapping, or its path) that neither StoreConfig nor RocketMQ's broker, proxy
    and store settings know (broker_conf_names), in file order, each with the closest known name or None:
    most likely typos, which from_properties keeps in `extra` and nothing reads."""
    from .broker_conf_names import ROCKETMQ_NAMES, SERVE_NAMES

    if isinstance(source, (str, os.PathLike)):
        source = read_properties_file(source)
    fields = {f.name for f in dataclasses.fields(StoreConfig)} - {"clock", "extra"}
    known = store_names() | ROCKETMQ_NAMES | SERVE_NAMES
    out = []
    for key in source:
        if key in known or (ALIASES.get(key) or _snake(key)) in fields:  # what from_properties takes
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1)
        out.append((key, close[0] if close else None))
    return out
