"""What a client may name and send, as RocketMQ 5's proxy decides it (GrpcValidator, SendMessageActivity) over
TopicValidator's and MessageConst's sets, plus the checks the proxy leaves to Java's property encoding.

Topics: every topic a request names (route, send, receive, ack, change invisible duration, end transaction,
assignment, dead-lettering, a producer's Telemetry settings) must be a legal name and not a system topic:
TopicValidator.SYSTEM_TOPIC_SET or a name starting with `rmq_sys_` (so the half and op queues of transactions,
the timer topic rmq_sys_wheel_timer, SCHEDULE_TOPIC_XXXX, TBW102 ...), answered ILLEGAL_TOPIC "cannot access
system topic" as GrpcValidator.validateTopic answers. What a client's send may not name on either protocol is
is_client_send_forbidden (NOT_ALLOWED_SEND_TOPIC_SET, the broker's own refusal, and every `rmq_sys_` topic): the
remoting broker answers it NO_PERMISSION, the delay deliveries never write it, and this set holds it. Retry (%RETRY%) and dead-letter
(%DLQ%) topics are not system topics: a dead-letter queue stays readable, so failed messages can be
reprocessed. Consumer groups named CID_RMQ_SYS_... are refused (ILLEGAL_CONSUMER_GROUP), as MixAll.isSysConsumerGroup.

Message fields: every field that becomes a property is checked, because a property is written as
name \\x01 value \\x02 and a planted separator would forge others (UNIQ_KEY, KEYS, TAGS, TRAN_MSG,
DLQ_ORIGIN_TOPIC ...). Control characters are Java's Character.isISOControl (U+0000-U+001F, U+007F-U+009F),
as GrpcValidator.containControlCharacter."""

from __future__ import annotations

import re

from ..validation import group_problem, topic_problem
from .protocol import definition_pb2 as pb

Code = pb.Code

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

# ProxyConfig
MAX_MESSAGE_GROUP_SIZE = 64  # maxMessageGroupSize (bytes; a group this long or longer is refused)
MAX_USER_PROPERTY_SIZE = 16 * 1024  # maxUserPropertySize: user properties + tag + keys, in bytes
USER_PROPERTY_MAX_NUM = 128  # userPropertyMaxNum

# RocketMQ 5 clients' message ids (MessageIdCodec): version "01" and 16 bytes, in hex
MESSAGE_ID = re.compile(r"[0-9A-Fa-f]{34}")
MAX_BORN_HOST = 255  # a host name (what the clients send) or an address with a port
MAX_TRACE_CONTEXT = 4096  # a W3C traceparent is 55 characters; room for vendors' formats


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


def topic_refusal(topic: str) -> tuple[int, str] | None:
    """GrpcValidator.validateTopic: (ILLEGAL_TOPIC, why) for a bad name or a system topic, else None."""
    problem = topic_problem(topic)
    if problem:
        return Code.ILLEGAL_TOPIC, problem
    if is_system_topic(topic) or is_client_send_forbidden(topic):
        return Code.ILLEGAL_TOPIC, f"cannot access system topic {topic!r}"
    return None


def group_refusal(group: str) -> tuple[int, str] | None:
    """GrpcValidator.validateConsumerGroup: (ILLEGAL_CONSUMER_GROUP, why) or None."""
    problem = group_problem(group)
    if problem:
        return Code.ILLEGAL_CONSUMER_GROUP, problem
    if group.startswith(SYSTEM_GROUP_PREFIX):
        return Code.ILLEGAL_CONSUMER_GROUP, f"cannot use system consumer group {group!r}"
    return None


def has_control(text: str) -> bool:
    """Character.isISOControl for any character (GrpcValidator.containControlCharacter)."""
    return any(c <= "\x1f" or "\x7f" <= c <= "\x9f" for c in text)
