"""What a client may name and send on either protocol, as RocketMQ's broker decides it over TopicValidator's and
MixAll's sets: the system topics (TopicValidator.SYSTEM_TOPIC_SET and every name starting with `rmq_sys_`: the
half and op queues of transactions, the timer topic rmq_sys_wheel_timer, SCHEDULE_TOPIC_XXXX, TBW102 ...), the
topics no client's send may name (is_client_send_forbidden: NOT_ALLOWED_SEND_TOPIC_SET, the broker's own refusal,
and every `rmq_sys_` topic; the remoting broker answers it NO_PERMISSION, the gRPC side ILLEGAL_TOPIC, the delay
deliveries never write it) and the system consumer groups (CID_RMQ_SYS_..., MixAll.isSysConsumerGroup). Retry
(%RETRY%) and dead-letter (%DLQ%) topics are not system topics: a dead-letter queue stays readable, so failed
messages can be reprocessed. How each protocol answers a refusal is its own (grpc: serve/validator.py)."""

from __future__ import annotations

# TopicValidator
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SYSTEM_TOPICS = frozenset(
    [
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "CHECKPOINT_TOPIC",
    ]
)
NOT_ALLOWED_SEND_TOPICS = frozenset(
    [
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    ]
)
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"  # MixAll.CID_RMQ_SYS_PREFIX


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    return topic in NOT_ALLOWED_SEND_TOPICS


def is_client_send_forbidden(topic: str) -> bool:
    """The one rule of both protocols for what a client's send may not name (the gRPC side refuses every
    system topic before this, so it holds there too): TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET, as
    AbstractSendMessageProcessor.msgCheck refuses it, and every `rmq_sys_` topic (the broker's own: the timer
    topic rmq_sys_wheel_timer, whose REAL_TOPIC / REAL_QID / TIMER_OUT_MS the delay service trusts; RocketMQ's
    msgCheck lets those through). The other system topics stay writable as in RocketMQ, since the broker reads
    nothing from them: TBW102, BenchmarkTest, RMQ_SYS_TRACE_TOPIC (clients' message traces),
    CHECKPOINT_TOPIC; so do %RETRY% (send.py routes it as handleRetryAndDLQ does) and %DLQ% topics. The broker's
    own writes to its topics (delay levels, the timer, transactions) go to the store, never through a send."""
    return topic in NOT_ALLOWED_SEND_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)
