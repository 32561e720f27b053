"""Names a user gives, checked as RocketMQ's TopicValidator checks them (so none can leave the store dir), and
the property names a user may not set (RocketMQ's system properties)."""

import string

VALID_CHARS = frozenset("%|-_" + string.ascii_letters + string.digits)
TOPIC_MAX_LENGTH = 127
MAX_TOPIC_BYTES = 255  # a topic is a directory name: the file system's limit (RocketMQ's HookUtils)


def topic_problem(topic, allow_long: bool = True) -> str | None:
    """None for a good topic, else what is wrong with it."""
    if not isinstance(topic, str) or not topic.strip():
        return "the topic is blank"
    bad = sorted({c for c in topic if c not in VALID_CHARS})
    if bad:
        return f"topic {topic!r} contains illegal characters {''.join(bad)!r}; allowed: ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH and not allow_long:
        return f"topic {topic!r} is longer than {TOPIC_MAX_LENGTH} characters"
    if len(topic) > MAX_TOPIC_BYTES:
        return f"topic {topic!r} is longer than {MAX_TOPIC_BYTES} characters"
    return None


def group_problem(group) -> str | None:
    if not isinstance(group, str) or not group.strip():
        return "the group is blank"
    if any(c not in VALID_CHARS for c in group):
        return f"group {group!r} contains illegal characters; allowed: ^[%|a-zA-Z0-9_-]+$"
    if len(group) > 120:
        return f"group {group!r} is longer than 120 characters"
    return None


# MessageConst.STRING_HASH_SET (RocketMQ 5.x): property names a producer may not set (the gRPC side refuses them
# and never hands them back as user properties). __SHARDINGKEY is not one: it picks the queue.
STRING_HASH_SET = frozenset(
    """
    TRACE_ON MSG_REGION KEYS TAGS WAIT DELAY RETRY_TOPIC REAL_TOPIC REAL_QID TRAN_MSG PGROUP MIN_OFFSET
    MAX_OFFSET BUYER_ID ORIGIN_MESSAGE_ID TRANSFER_FLAG CORRECTION_FLAG MQ2_FLAG RECONSUME_TIME UNIQ_KEY
    MAX_RECONSUME_TIMES CONSUME_START_TIME POP_CK POP_CK_OFFSET 1ST_POP_TIME TRAN_PREPARED_QUEUE_OFFSET
    DUP_INFO EXTEND_UNIQ_INFO INSTANCE_ID CORRELATION_ID REPLY_TO_CLIENT TTL ARRIVE_TIME PUSH_REPLY_TIME
    CLUSTER MSG_TYPE INNER_MULTI_QUEUE_OFFSET TIMER_DELAY_MS TIMER_DELAY_SEC TIMER_DELIVER_MS
    TIMER_ENQUEUE_MS TIMER_DEQUEUE_MS TIMER_ROLL_TIMES TIMER_OUT_MS TIMER_DEL_UNIQKEY TIMER_DELAY_LEVEL
    __BORNHOST BORN_TIMESTAMP DLQ_ORIGIN_TOPIC DLQ_ORIGIN_MESSAGE_ID __CRC32#""".split()
)
# The rule of the user-facing entry points (the CLI's --property, the Spark sink): those, plus what the store
# itself reads (INNER_* of a batch ConsumeQueue record) and the Spark sink's marker (a forged one would mislead
# its replay check). MessageStore.put takes any property, as a broker takes a client library's (which sets
# UNIQ_KEY, KEYS, TAGS... itself).
RESERVED_PROPERTIES = STRING_HASH_SET | {"INNER_NUM", "INNER_BASE", "__SPARK_SINK"}
TRANSIENT_PREFIX = "__RMQ.TRANSIENT."  # never stored by a broker
SHARDING_KEY = "__SHARDINGKEY"


def property_name_problem(name, tags_keys_hint: str = " (set the message's tags / keys)") -> str | None:
    """None for a property name a user may set, else what is wrong with it (reserved by RocketMQ, transient,
    empty, holding a separator). `tags_keys_hint`: how the entry point sets TAGS and KEYS instead."""
    if not isinstance(name, str) or not name:
        return "a property name is empty"
    if name == "__SPARK_SINK":
        return f"property {name!r} is reserved by rocketstore's Spark sink (it marks the batch a message came from)"
    if name in RESERVED_PROPERTIES:
        hint = tags_keys_hint if name in ("TAGS", "KEYS") else ""
        return f"property {name!r} is reserved by RocketMQ{hint}"
    if name.startswith(TRANSIENT_PREFIX):
        return f"property {name!r}: names starting {TRANSIENT_PREFIX!r} are transient, never stored"
    if "\x01" in name or "\x02" in name:
        return f"property name {name!r} contains \\x01 or \\x02 (RocketMQ's property separators)"
    return None
