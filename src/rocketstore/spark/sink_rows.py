"""The sink's row checks, run in Spark tasks: everything put_batch would refuse, named by column, partition
and row, before anything is staged (so a bad row fails the job with nothing appended); and the staged
form of a row (topic, body, RocketMQ's PROPERTIES bytes, queueId, sharding key)."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.compute as pc

from .. import validation as V
from .errors import PipelineError

MARKER = "__SPARK_SINK"  # the property naming the sink, batch and put a message came from
MARKER_RESERVE = 64  # bytes of PROPERTIES kept free for the marker
RECORD_OVERHEAD = 160  # a record's fixed fields, hosts (IPv6 at most) and lengths, generously
MAX_PROPERTIES = 32767
KEY_SEPARATOR = " "

# the reserved property names are the library's rule, shared with the CLI (rocketstore.validation)
RESERVED_PROPERTIES = V.RESERVED_PROPERTIES
TRANSIENT_PREFIX = V.TRANSIENT_PREFIX
SHARDING_KEY = V.SHARDING_KEY

COLUMNS = ("topic", "body", "tags", "keys", "properties", "queueId")


class SinkDataError(PipelineError, ValueError):
    """A row the store would refuse: names the column, the row and the problem."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """The store's limits a task checks rows against (computed on the driver, pickled to the tasks)."""

    max_body: int  # maxMessageSize
    max_properties: int  # PROPERTIES bytes a row may use (the CRC and the marker kept free)
    max_record: int  # a record must fit one CommitLog segment
    allow_long_topic: bool  # autoMessageVersionOnTopicLen

    @classmethod
    def of(cls, config) -> "Limits":
        crc = 20 if config.enabled_append_prop_crc else 0
        return cls(
            config.max_message_size,
            MAX_PROPERTIES - crc - MARKER_RESERVE,
            config.mapped_file_size_commit_log - 64,
            config.auto_message_version_on_topic_len,
        )


# ---------------------------------------------------------------------------------------------- the schema
READ_ONLY_COLUMNS = {
    "queueOffset",
    "physicalOffset",
    "msgId",
    "bornTimestamp",
    "storeTimestamp",
    "bornHost",
    "storeHost",
    "sysFlag",
    "reconsumeTimes",
    "flag",
    "bodyCRC",
}


def check_schema(schema) -> None:
    """Refuse a DataFrame whose columns the sink cannot write, before any task runs."""
    from pyspark.sql import types as T

    fields = {f.name: f.dataType for f in schema.fields}
    # the read side's own columns (a DataFrame read from a store written back) are ignored, as Kafka's sink
    # ignores what it does not write; anything else is a typo that would silently drop data
    unknown = sorted(set(fields) - set(COLUMNS) - READ_ONLY_COLUMNS)
    if unknown:
        raise SinkDataError(
            f"rocketstore sink: unknown column(s) {', '.join(unknown)}; the sink writes "
            f"{', '.join(COLUMNS)} (select or rename the columns to write)"
        )
    for required in ("topic", "body"):
        if required not in fields:
            raise SinkDataError(f"rocketstore sink: the column '{required}' is required")
    expected = {
        "topic": (T.StringType,),
        "body": (T.BinaryType, T.StringType),
        "tags": (T.StringType,),
        "properties": (T.MapType,),
        "queueId": (T.ByteType, T.ShortType, T.IntegerType, T.LongType),
    }
    for name, kinds in expected.items():
        if name in fields and not isinstance(fields[name], kinds):
            raise SinkDataError(
                f"rocketstore sink: column '{name}' has type {fields[name].simpleString()}; "
                f"expected {' or '.join(k.typeName() for k in kinds)}"
            )
    if "keys" in fields:
        kt = fields["keys"]
        if not (
            isinstance(kt, T.StringType) or (isinstance(kt, T.ArrayType) and isinstance(kt.elementType, T.StringType))
        ):
            raise SinkDataError(
                f"rocketstore sink: column 'keys' has type {kt.simpleString()}; expected string or array<string>"
            )
    if "properties" in fields:
        mt = fields["properties"]
        if not (isinstance(mt.keyType, T.StringType) and isinstance(mt.valueType, T.StringType)):
            raise SinkDataError(
                f"rocketstore sink: column 'properties' has type {mt.simpleString()}; expected map<string,string>"
            )


# ------------------------------------------------------------------------------------- validation (tasks)
def staged_schema():
    return pa.schema(
        [
            ("topic", pa.large_string()),
            ("body", pa.large_binary()),
            ("props", pa.large_binary()),
            ("queueId", pa.int32()),
            ("shardingKey", pa.large_string()),
        ]
    )


class _Rows:
    """Error messages for one partition's rows: `partition P, row R` counts rows from the partition's start."""

    def __init__(self, partition_id: int, first_row: int):
        self.partition_id, self.first_row = partition_id, first_row

    def fail(self, column: str, index: int, problem: str):
        raise SinkDataError(
            f"rocketstore sink: partition {self.partition_id}, row {self.first_row + index}: "
            f"column '{column}': {problem}; nothing of this batch was appended"
        )


def _first_true(mask) -> int | None:
    i = pc.index(mask.fill_null(False), True).as_py()
    return None if i < 0 else i


def validate_batch(batch, limits: Limits, rows: _Rows):
    """One Arrow batch of the DataFrame -> the staged batch (topic, body, props, queueId, shardingKey), or
    SinkDataError for the first row the store would refuse."""
    names = batch.schema.names
    n = batch.num_rows
    topic = _topics(batch.column(names.index("topic")).cast(pa.large_string()), limits, rows)
    body = _bodies(batch.column(names.index("body")), limits, rows)
    tags = batch.column(names.index("tags")).cast(pa.large_string()) if "tags" in names else None
    if tags is not None:
        _no_separators(tags, "tags", rows)
    keys = _keys(batch.column(names.index("keys")), rows) if "keys" in names else None
    user_props, sharding = (
        _user_properties(batch.column(names.index("properties")), rows) if "properties" in names else (None, None)
    )
    props = _properties_bytes(n, keys, tags, user_props)
    plen = pc.binary_length(props)
    i = _first_true(pc.greater(plen, limits.max_properties))
    if i is not None:
        rows.fail(
            "properties",
            i,
            f"the properties (with tags and keys) take {plen[i].as_py()} bytes; at most {limits.max_properties} fit",
        )
    # one row is a batch of one to put_batch: 22 bytes + body + properties must fit maxMessageSize
    size = pc.add(pc.add(pc.binary_length(body), plen), 22)
    i = _first_true(pc.greater(size, limits.max_body))
    if i is not None:
        rows.fail("body", i, f"body and properties take {size[i].as_py()} bytes; maxMessageSize is {limits.max_body}")
    record = pc.add(pc.add(size, pc.binary_length(topic)), RECORD_OVERHEAD)
    i = _first_true(pc.greater(record, limits.max_record))
    if i is not None:
        rows.fail(
            "body",
            i,
            f"the record ({record[i].as_py()} bytes) does not fit a CommitLog segment ({limits.max_record + 64} bytes)",
        )
    queue = _queue_ids(batch.column(names.index("queueId")), rows) if "queueId" in names else pa.nulls(n, pa.int32())
    if sharding is None:
        sharding = pa.nulls(n, pa.large_string())
    return pa.record_batch([topic, body, props, queue, sharding], schema=staged_schema())


def _topics(topic, limits: Limits, rows: _Rows):
    from ..validation import topic_problem

    i = _first_true(pc.is_null(topic))
    if i is not None:
        rows.fail("topic", i, "NULL (every message needs a topic)")
    for name in pc.unique(topic).to_pylist():  # few distinct topics: check each name once
        problem = topic_problem(name, limits.allow_long_topic)
        if problem:
            rows.fail("topic", _first_true(pc.equal(topic, name)), problem)
    return topic


def _bodies(body, limits: Limits, rows: _Rows):
    if pa.types.is_string(body.type) or pa.types.is_large_string(body.type):
        body = body.cast(pa.large_string()).cast(pa.large_binary())  # UTF-8, as Arrow holds it
    else:
        body = body.cast(pa.large_binary())
    i = _first_true(pc.is_null(body))
    if i is not None:
        rows.fail("body", i, "NULL (write an empty body as b'' / '')")
    lengths = pc.binary_length(body)
    i = _first_true(pc.greater(lengths, limits.max_body))
    if i is not None:
        rows.fail("body", i, f"{lengths[i].as_py()} bytes; maxMessageSize is {limits.max_body}")
    return body


def _no_separators(values, column: str, rows: _Rows) -> None:
    """\\x01 and \\x02 delimit RocketMQ's properties: inside a value they would split it."""
    i = _first_true(pc.match_substring_regex(values, "[\x01\x02]"))
    if i is not None:
        rows.fail(column, i, f"{values[i].as_py()!r} contains \\x01 or \\x02 (RocketMQ's property separators)")


def _keys(keys, rows: _Rows):
    """KEYS as one space-separated string per row (NULL: none)."""
    if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
        keys = keys.cast(pa.large_string())
        _no_separators(keys, "keys", rows)
        return keys
    values = keys.flatten()  # array<string>: no element may be NULL or hold the key separator
    if len(values):
        owner = pc.list_parent_indices(keys)
        j = _first_true(pc.is_null(values))
        if j is not None:
            rows.fail("keys", owner[j].as_py(), "an element of the keys array is NULL")
        j = _first_true(pc.match_substring_regex(values, "[ \x01\x02]"))
        if j is not None:
            rows.fail(
                "keys",
                owner[j].as_py(),
                f"key {values[j].as_py()!r} contains a space (RocketMQ's key separator) or \\x01/\\x02",
            )
    return pc.binary_join(keys, KEY_SEPARATOR).cast(pa.large_string())


def property_name_problem(name: str) -> str | None:
    return V.property_name_problem(name, " (use the tags / keys columns)")


def _user_properties(column, rows: _Rows):
    """map<string,string> -> (the properties as RocketMQ's `name\\x01value\\x02` text per row, the
    __SHARDINGKEY value per row). NULL and empty values are left out: RocketMQ's parser drops them."""
    text, sharding = [], []
    for i, entries in enumerate(column.to_pylist()):
        parts, shard = [], None
        for name, value in entries or ():
            problem = property_name_problem(name)
            if problem:
                rows.fail("properties", i, problem)
            if value is None or value == "":
                continue
            if "\x01" in value or "\x02" in value:
                rows.fail(
                    "properties", i, f"the value of {name!r} contains \\x01 or \\x02 (RocketMQ's property separators)"
                )
            if name == SHARDING_KEY:
                shard = value
            parts.append(f"{name}\x01{value}\x02")
        text.append("".join(parts))
        sharding.append(shard)
    return pa.array(text, pa.large_string()), pa.array(sharding, pa.large_string())


def _properties_bytes(n: int, keys, tags, user_props):
    """Each row's PROPERTIES: KEYS, then TAGS (the order Message writes them), then the user's; UTF-8."""
    empty = pa.scalar("", pa.large_string())
    parts = []
    for name, values in (("KEYS", keys), ("TAGS", tags)):
        if values is None:
            continue
        entry = pc.binary_join_element_wise(
            pa.scalar(f"{name}\x01", pa.large_string()), values, pa.scalar("\x02", pa.large_string()), empty
        )
        blank = pc.or_kleene(pc.is_null(values), pc.equal(pc.binary_length(values), 0))
        parts.append(pc.if_else(blank, empty, entry))  # no tag / no key: no entry at all
    if user_props is not None:
        parts.append(user_props)
    if not parts:
        return pa.array([b""] * n, pa.large_binary())
    joined = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, empty)
    return joined.cast(pa.large_binary())


def _queue_ids(column, rows: _Rows):
    q = column.cast(pa.int64())
    i = _first_true(pc.less(q, 0))
    if i is not None:
        rows.fail("queueId", i, f"{q[i].as_py()} is negative")
    i = _first_true(pc.greater(q, 2**31 - 1))
    if i is not None:
        rows.fail("queueId", i, f"{q[i].as_py()} does not fit an int")
    return q.cast(pa.int32())
