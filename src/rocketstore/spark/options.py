"""Options of the rocketstore formats: the store's settings, and the Kafka-source-like read options.

Spark hands a data source its options with lower-cased keys; RocketMQ's MessageStoreConfig names are
camelCase. Every bad value raises OptionError naming the option, so the user sees which one to fix.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

from ..config.store_config import ALIASES, StoreConfig, read_properties_file
from ..store.facade import resolve_file_sizes
from .errors import OptionError

# options of the formats themselves (lower-case, as Spark passes them) -> the name users write
READ_OPTIONS = (
    "path",
    "brokerConf",
    "topics",
    "topicPattern",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "tags",
    "minPartitions",
    "failOnDataLoss",
    "maxOffsetsPerTrigger",
    "maxRecordsPerBatch",
    "columns",
    "sinkId",
    "sql",
    "small",
    "segments",
    "archive",
)


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _config_names() -> dict[str, str]:
    """lower-case -> RocketMQ's camelCase name, for every StoreConfig setting (and RocketMQ's own spellings)."""
    names = {}
    for f in dataclasses.fields(StoreConfig):
        if f.name not in ("clock", "extra"):
            camel = _camel(f.name)
            names[camel.lower()] = camel
    for alias in ALIASES:
        names[alias.lower()] = alias
    return names


CONFIG_NAMES = _config_names()
_OWN = {o.lower(): o for o in READ_OPTIONS}
_SPARKS = {"checkpointlocation", "queryname"}  # Spark's own, passed along with ours


def get(options, name: str, default=None):
    """An option by its user-facing name, whatever case it arrives in."""
    for key in (name, name.lower()):
        if key in options:
            return options[key]
    return default


def store_path(options) -> str:
    path = get(options, "path")
    if not path:
        raise OptionError("option 'path' is required: the store directory")
    root = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(root):
        raise OptionError(f"option 'path': {root} is not a store directory")
    return root


def store_config(options, root: str | None = None) -> StoreConfig:
    """The store's settings: brokerConf first, then MessageStoreConfig names given as options; file sizes
    left open are read from the segment files on disk (resolve_file_sizes)."""
    props: dict[str, str] = {}
    conf = get(options, "brokerConf")
    if conf:
        if not os.path.isfile(conf):
            raise OptionError(f"option 'brokerConf': {conf} is not a file")
        props.update(read_properties_file(conf))
    unknown = []
    for key, value in options.items():
        lower = key.lower()
        if lower in CONFIG_NAMES:
            props[CONFIG_NAMES[lower]] = value
        elif lower not in _OWN and lower not in _SPARKS and not lower.startswith("spark."):
            unknown.append(key)
    if unknown:
        raise OptionError(
            f"unknown option(s) {', '.join(sorted(unknown))}: expected rocketstore's "
            f"({', '.join(READ_OPTIONS)}) or a MessageStoreConfig name"
        )
    try:
        config = StoreConfig.from_properties(props)
    except (TypeError, ValueError) as e:
        raise OptionError(f"store setting: {e}") from None
    if root and boolean(options, "small", False) and not _has_commitlog(root):
        # a new store with small files (StoreConfig.with_small_files); an existing one keeps its files' sizes
        config = config.with_small_files()
    return resolve_file_sizes(root, config) if root else config


def _has_commitlog(root: str) -> bool:
    try:
        return any(not n.startswith(".") for n in os.listdir(os.path.join(root, "commitlog")))
    except OSError:
        return False


def integer(options, name: str, default: int | None, minimum: int | None = None) -> int | None:
    raw = get(options, name)
    if raw is None or raw == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option '{name}': expected an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise OptionError(f"option '{name}': must be at least {minimum}, got {value}")
    return value


def boolean(options, name: str, default: bool) -> bool:
    raw = get(options, name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"option '{name}': expected true or false, got {raw!r}")
    return text == "true"


def topics(options, available) -> list[str]:
    """The topics to read: `topics` (comma separated) or `topicPattern` (a regex, full match), exactly one."""
    listed, pattern = get(options, "topics"), get(options, "topicPattern")
    if bool(listed) == bool(pattern):
        raise OptionError("give exactly one of the options 'topics' (comma separated) and 'topicPattern' (a regex)")
    if listed:
        names = [t.strip() for t in listed.split(",") if t.strip()]
        if not names:
            raise OptionError(f"option 'topics': no topic in {listed!r}")
        return names
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise OptionError(f"option 'topicPattern': not a regular expression ({e}): {pattern!r}") from None
    return sorted(t for t in available if rx.fullmatch(t))


def offsets_spec(options, name: str, default: str):
    """`earliest`, `latest`, or JSON {"topic": {"queueId": offset}} where offset -2 means earliest and -1
    latest (Spark's Kafka source conventions)."""
    raw = get(options, name)
    if raw is None or str(raw).strip() == "":
        return default
    text = str(raw).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        spec = json.loads(text)
    except ValueError:
        raise OptionError(
            f'option \'{name}\': expected earliest, latest or JSON like {{"topic":{{"0":23}}}}, got {text!r}'
        ) from None
    if not isinstance(spec, dict) or not all(isinstance(v, dict) for v in spec.values()):
        raise OptionError(f"option '{name}': JSON must map topic -> {{queueId: offset}}, got {text!r}")
    out: dict[str, dict[int, int]] = {}
    for topic, queues in spec.items():
        out[topic] = {}
        for qid, off in queues.items():
            try:
                q, o = int(qid), int(off)
            except (TypeError, ValueError):
                raise OptionError(
                    f"option '{name}': queue id and offset must be integers: {topic} {qid!r}: {off!r}"
                ) from None
            if o < -2:
                raise OptionError(f"option '{name}': offset {o} for {topic}-{q} (use -2 earliest, -1 latest)")
            out[topic][q] = o
    return out


def sql(options) -> str | None:
    """`sql`: a SQL92 filter on the messages' properties (RocketMQ's grammar), checked here so a bad one
    fails at planning, naming the option and the position."""
    text = get(options, "sql")
    if text is None or not str(text).strip():
        return None
    if get(options, "tags"):
        raise OptionError("give the option 'tags' or 'sql', not both: a subscription is by tag or by SQL92")
    from ..filter import FilterSyntaxError, compile as compile_sql

    try:
        compile_sql(text)
    except FilterSyntaxError as e:
        raise OptionError(f"option 'sql': {e}") from None
    return text


def timestamp(options, name: str) -> int | None:
    """ms since the epoch: a number, or an ISO date-time (UTC unless it says otherwise)."""
    raw = get(options, name)
    if raw is None or str(raw).strip() == "":
        return None
    text = str(raw).strip()
    if re.fullmatch(r"-?\d+", text):
        value = int(text)
        if value < 0:
            raise OptionError(f"option '{name}': a timestamp must not be negative, got {value}")
        return value
    import datetime

    try:
        t = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise OptionError(f"option '{name}': expected ms since the epoch or an ISO date-time, got {text!r}") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return int(t.timestamp() * 1000)
