"""apache.rocketmq.v2 Message <-> rocketstore messages, mapped as RocketMQ's proxy maps them
(SendMessageActivity.buildMessageProperty on the way in, GrpcConverter.buildMessage on the way out)."""

from __future__ import annotations

import hashlib
import time

from .protocol import definition_pb2 as pb

from ..errors import RocketStoreError
from ..formats import properties as P
from ..message import Message
from ..validation import STRING_HASH_SET
from . import validator as R

UNIQ_KEY = P.UNIQ_KEY
TAGS = P.TAGS
KEYS = P.KEYS
PGROUP = P.PGROUP
TRAN_MSG = P.TRAN_MSG
SHARDING_KEY = "__SHARDINGKEY"
RECONSUME_TIME = "RECONSUME_TIME"
BORN_HOST = "__BORNHOST"
BORN_TIMESTAMP = "BORN_TIMESTAMP"
TRACE_CONTEXT = "TRACE_CONTEXT"
TIMER_DELIVER_MS = P.TIMER_DELIVER_MS
TIMER_DELAY_SEC = P.TIMER_DELAY_SEC
DELAY = "DELAY"
POP_CK = "POP_CK"
DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
COMPRESSED_FLAG = 0x1
TRANSACTION_PREPARED_TYPE = 0x4  # MessageSysFlag
CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"

# MessageConst.STRING_HASH_SET: property names a user may not set, and that never come back as user properties
SYSTEM_PROPERTIES = STRING_HASH_SET


class ConvertError(RocketStoreError):
    """A message the proxy would refuse: `code` is the v2 Code to answer."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def peer_host(peer: str | None) -> str | None:
    """grpc's context.peer() ("ipv4:127.0.0.1:5555", "ipv6:[::1]:5555") -> "ip:port"."""
    if not peer:
        return None
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest
    if kind == "ipv6":
        return rest.replace("[", "").replace("]", "") if rest.count("]") else rest
    return None


def _fail(code: int, message: str):
    raise ConvertError(code, message)


def _user_properties(msg: pb.Message) -> tuple[dict[str, str], int]:
    """The user properties as the proxy takes them (buildMessageProperty), and their size in bytes."""
    if len(msg.user_properties) > R.USER_PROPERTY_MAX_NUM:
        _fail(pb.Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {R.USER_PROPERTY_MAX_NUM}")
    props, size = {}, 0
    for k, v in msg.user_properties.items():
        if k in SYSTEM_PROPERTIES:
            _fail(pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {k}")
        if R.has_control(k):
            _fail(pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"the key of property {k!r} cannot contain control character")
        if R.has_control(v):
            _fail(pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"the value of property {k!r} cannot contain control character")
        props[k] = v
        size += len(k.encode()) + len(v.encode())
    return props, size


def _check_tag_and_keys(sp, user_size: int) -> None:
    """The tag and keys as the proxy checks them, and the user properties' total size with them."""
    if sp.tag:
        if not sp.tag.strip():
            _fail(pb.Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in sp.tag:
            _fail(pb.Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if R.has_control(sp.tag):
            _fail(pb.Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")
    size = user_size + len(sp.tag.encode())
    for k in sp.keys:
        if k and not k.strip():
            _fail(pb.Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if R.has_control(k):
            _fail(pb.Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")
        size += len(k.encode())
    if size > R.MAX_USER_PROPERTY_SIZE:
        _fail(
            pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the total size of user property is too large, max is {R.MAX_USER_PROPERTY_SIZE}",
        )


def _check_message_id_and_group(sp) -> None:
    if not sp.message_id.strip():
        _fail(pb.Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    if not R.MESSAGE_ID.fullmatch(sp.message_id):
        _fail(
            pb.Code.ILLEGAL_MESSAGE_ID,
            f"message id {sp.message_id[:80]!r} is not a client message id (34 hex digits: a version and 16 bytes)",
        )
    group = sp.message_group
    if group:
        if not group.strip():
            _fail(pb.Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
        if len(group.encode()) >= R.MAX_MESSAGE_GROUP_SIZE:
            _fail(pb.Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {R.MAX_MESSAGE_GROUP_SIZE}")
        if R.has_control(group):
            _fail(pb.Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")


def _system_fields(msg: pb.Message, user_size: int) -> None:
    """Every system field that becomes a property: the proxy's checks (tag, keys, message id, message group),
    and those it leaves out (the message id's shape, trace context, born host) so that no field can plant
    the \\x01 / \\x02 separators of the property encoding."""
    sp = msg.system_properties
    _check_tag_and_keys(sp, user_size)
    _check_message_id_and_group(sp)
    if R.has_control(sp.trace_context) or len(sp.trace_context) > R.MAX_TRACE_CONTEXT:
        _fail(
            pb.Code.BAD_REQUEST,
            f"trace context cannot contain control character or exceed {R.MAX_TRACE_CONTEXT} characters",
        )
    host = sp.born_host
    if host and (R.has_control(host) or any(c.isspace() for c in host) or len(host) > R.MAX_BORN_HOST):
        _fail(pb.Code.BAD_REQUEST, f"born host {host[:80]!r} is not a host name or address")


def to_store(msg: pb.Message, max_body_size: int, peer: str | None = None) -> Message:
    """A v2 Message from SendMessage -> the Message to put (properties as the proxy sets them). Raises
    ConvertError, with the proxy's code, for a field the proxy refuses or that would forge a property."""
    body = bytes(msg.body)
    if not body:
        raise ConvertError(pb.Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if max_body_size > 0 and len(body) > max_body_size:
        raise ConvertError(pb.Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {max_body_size}")
    sp = msg.system_properties
    props, user_size = _user_properties(msg)
    _system_fields(msg, user_size)
    if sp.tag:
        props[TAGS] = sp.tag
    keys = list(sp.keys)
    if keys:
        props[KEYS] = P.KEY_SEPARATOR.join(keys)
    props[UNIQ_KEY] = sp.message_id
    sys_flag = COMPRESSED_FLAG if sp.body_encoding == pb.Encoding.GZIP else 0
    if sp.message_type == pb.MessageType.TRANSACTION:  # buildSysFlag, buildMessageProperty
        sys_flag |= TRANSACTION_PREPARED_TYPE
        props[TRAN_MSG] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            props[CHECK_IMMUNITY_TIME_IN_SECONDS] = str(sp.orphaned_transaction_recovery_duration.seconds)
    if sp.HasField("delivery_timestamp"):
        deliver_ms = sp.delivery_timestamp.seconds * 1000 + sp.delivery_timestamp.nanos // 1_000_000
        props[TIMER_DELIVER_MS] = str(deliver_ms)
    props[RECONSUME_TIME] = str(sp.delivery_attempt)
    props[PGROUP] = msg.topic.name  # the proxy uses the topic as the producer group
    if sp.message_group:
        props[SHARDING_KEY] = sp.message_group
    if sp.trace_context:
        props[TRACE_CONTEXT] = sp.trace_context
    born_host = sp.born_host.strip() or peer_host(peer)
    if born_host:
        props[BORN_HOST] = born_host
    born_ms = None
    if sp.HasField("born_timestamp"):
        born_ms = sp.born_timestamp.seconds * 1000 + sp.born_timestamp.nanos // 1_000_000
        props[BORN_TIMESTAMP] = str(born_ms)
    record_born_host = peer_host(peer)
    try:  # the record's BORNHOST is the sending connection, as the broker sees the proxy's
        if record_born_host:
            from ..formats.record import host_to_bytes

            host_to_bytes(record_born_host)
    except ValueError:
        record_born_host = None
    return Message(
        topic=msg.topic.name,
        body=body,
        properties=props,
        sys_flag=sys_flag,
        born_timestamp=born_ms if born_ms is not None else int(time.time() * 1000),
        born_host=record_born_host,
        reconsume_times=0,
    )


def _ts(target, ms: int) -> None:
    target.seconds = ms // 1000
    target.nanos = (ms % 1000) * 1_000_000


def message_type(props: dict[str, str]) -> int:
    if props.get(TRAN_MSG) == "true":
        return pb.MessageType.TRANSACTION
    if DELAY in props or TIMER_DELIVER_MS in props or TIMER_DELAY_SEC in props:
        return pb.MessageType.DELAY
    if SHARDING_KEY in props:
        return pb.MessageType.FIFO
    return pb.MessageType.NORMAL


def to_v2(
    stored,
    topic: str,
    receipt_handle: str | None = None,
    delivery_attempt: int | None = None,
    invisible_ms: int | None = None,
) -> pb.Message:
    """A StoredMessage -> the v2 Message ReceiveMessage streams (GrpcConverter.buildMessage)."""
    props = stored.properties
    out = pb.Message()
    out.topic.name = topic
    for k, v in props.items():
        if k not in SYSTEM_PROPERTIES:
            out.user_properties[k] = v
    sp = out.system_properties
    if props.get(TAGS) is not None:
        sp.tag = props[TAGS]
    keys = props.get(KEYS)
    if keys is not None:
        sp.keys.extend(keys.split(P.KEY_SEPARATOR))
    sp.message_id = props.get(UNIQ_KEY) or stored.msg_id
    body = stored.body or b""
    sp.body_digest.type = pb.DigestType.MD5
    sp.body_digest.checksum = hashlib.md5(body).hexdigest().upper()
    sp.body_encoding = pb.Encoding.GZIP if stored.sys_flag & COMPRESSED_FLAG else pb.Encoding.IDENTITY
    sp.message_type = message_type(props)
    _ts(sp.born_timestamp, stored.born_timestamp)
    sp.born_host = props.get(BORN_HOST) or stored.born_host
    _ts(sp.store_timestamp, stored.store_timestamp)
    sp.store_host = stored.store_host
    if TIMER_DELAY_SEC in props:
        _ts(sp.delivery_timestamp, int(time.time() * 1000) + int(props[TIMER_DELAY_SEC]) * 1000)
    elif TIMER_DELIVER_MS in props:
        _ts(sp.delivery_timestamp, int(props[TIMER_DELIVER_MS]))
    if SHARDING_KEY in props:
        sp.message_group = props[SHARDING_KEY]
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    if invisible_ms is not None:
        sp.invisible_duration.seconds = invisible_ms // 1000
        sp.invisible_duration.nanos = (invisible_ms % 1000) * 1_000_000
    sp.queue_id = stored.queue_id
    sp.queue_offset = stored.queue_offset
    sp.delivery_attempt = delivery_attempt if delivery_attempt is not None else stored.reconsume_times + 1
    if TRACE_CONTEXT in props:
        sp.trace_context = props[TRACE_CONTEXT]
    if DLQ_ORIGIN_TOPIC in props and DLQ_ORIGIN_MESSAGE_ID in props:
        sp.dead_letter_queue.topic = props[DLQ_ORIGIN_TOPIC]
        sp.dead_letter_queue.message_id = props[DLQ_ORIGIN_MESSAGE_ID]
    out.body = body
    return out


def consistent_hash(value: int, buckets: int) -> int:
    """Guava's Hashing.consistentHash(long, int), which the proxy uses to pick a FIFO message group's queue."""
    state = value & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        hi = (state >> 33) & 0xFFFFFFFF
        if hi >= 1 << 31:
            hi -= 1 << 32  # Java's (int) cast
        d = (hi + 1) / float(1 << 31)
        nxt = int((candidate + 1) / d) if d != 0 else buckets
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def check_delivery_time(m: pb.Message, max_delay_ms: int) -> None:
    """SendMessageActivity.validateDelayTime: a delivery time more than max_delay_ms ahead (maxDelayTimeMills) is
    refused."""
    sp = m.system_properties
    if sp.HasField("delivery_timestamp") and max_delay_ms > 0:
        ms = sp.delivery_timestamp.seconds * 1000 + sp.delivery_timestamp.nanos // 1_000_000
        if ms - int(time.time() * 1000) > max_delay_ms:
            raise ConvertError(
                pb.Code.ILLEGAL_DELIVERY_TIME, f"the max delay time of message is too large, max is {max_delay_ms}"
            )
