"""What a gRPC client may name and send, as RocketMQ 5's proxy decides it (GrpcValidator, SendMessageActivity)
over the broker's rules (broker/rules.py), plus the checks the proxy leaves to Java's property encoding.

Topics: every topic a request names (route, send, receive, ack, change invisible duration, end transaction,
assignment, dead-lettering, a producer's Telemetry settings) must be a legal name and not a system topic, answered
ILLEGAL_TOPIC "cannot access system topic" as GrpcValidator.validateTopic answers. Consumer groups named
CID_RMQ_SYS_... are refused (ILLEGAL_CONSUMER_GROUP).

Message fields: every field that becomes a property is checked, because a property is written as
name \\x01 value \\x02 and a planted separator would forge others (UNIQ_KEY, KEYS, TAGS, TRAN_MSG,
DLQ_ORIGIN_TOPIC ...). Control characters are Java's Character.isISOControl (U+0000-U+001F, U+007F-U+009F),
as GrpcValidator.containControlCharacter."""

from __future__ import annotations

import re

from ..broker.rules import SYSTEM_GROUP_PREFIX, is_client_send_forbidden, is_system_topic
from ..validation import group_problem, topic_problem
from .protocol import definition_pb2 as pb

Code = pb.Code

# ProxyConfig
MAX_MESSAGE_GROUP_SIZE = 64  # maxMessageGroupSize (bytes; a group this long or longer is refused)
MAX_USER_PROPERTY_SIZE = 16 * 1024  # maxUserPropertySize: user properties + tag + keys, in bytes
USER_PROPERTY_MAX_NUM = 128  # userPropertyMaxNum

# RocketMQ 5 clients' message ids (MessageIdCodec): version "01" and 16 bytes, in hex
MESSAGE_ID = re.compile(r"[0-9A-Fa-f]{34}")
MAX_BORN_HOST = 255  # a host name (what the clients send) or an address with a port
MAX_TRACE_CONTEXT = 4096  # a W3C traceparent is 55 characters; room for vendors' formats


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
