"""Validate: what the put path refuses before it takes a queue offset, and why, in words.

Statuses instead of exceptions for bad input, as CommitLog.asyncPutMessage(s) answers them: a message whose
fields do not fit the record, a body that is not bytes or too long, a queue id the topic does not have, a
host that cannot be written. Each refusal's reason is rocketstore's (PutResult.reason)."""

from __future__ import annotations

import logging

from ..formats import record as R
from ..message import Message, PutResult, PutStatus
from ..validation import topic_problem

log = logging.getLogger("rocketstore.put")
MAX_PROPERTIES = 32767  # PROPERTIESLENGTH is a Java short
BYTES = (bytes, bytearray, memoryview)
BYTES_TYPES = frozenset(BYTES)
I32_MIN, I32_MAX, I64_MIN, I64_MAX = -(2**31), 2**31 - 1, -(2**63), 2**63 - 1


def fields_fit(msg: Message) -> bool:
    """The record's fixed-width fields can hold the message's numbers (else MESSAGE_ILLEGAL, not a crash)."""
    flag, rt, sf, pto, bt = (
        msg.flag,
        msg.reconsume_times,
        msg.sys_flag,
        msg.prepared_transaction_offset,
        msg.born_timestamp,
    )
    return (
        type(flag) is int
        and I32_MIN <= flag <= I32_MAX
        and type(rt) is int
        and I32_MIN <= rt <= I32_MAX
        and type(sf) is int
        and I32_MIN <= sf <= I32_MAX
        and type(pto) is int
        and I64_MIN <= pto <= I64_MAX
        and (bt is None or (type(bt) is int and I64_MIN <= bt <= I64_MAX))
    )


def fields_problem(msg: Message) -> str:
    """What fields_fit finds wrong, in words (for a refusal's reason)."""
    for name, lo, hi, java in (
        ("flag", I32_MIN, I32_MAX, "int"),
        ("reconsume_times", I32_MIN, I32_MAX, "int"),
        ("sys_flag", I32_MIN, I32_MAX, "int"),
        ("prepared_transaction_offset", I64_MIN, I64_MAX, "long"),
        ("born_timestamp", I64_MIN, I64_MAX, "long"),
    ):
        v = getattr(msg, name)
        if v is None and name == "born_timestamp":
            continue
        if type(v) is not int or not lo <= v <= hi:
            return f"{name} {v!r} does not fit the record's field (a Java {java})"
    return "a field does not fit the record"


def flags_fit(flags: list) -> bool:
    """Every message of a batch has an int32 FLAG (the other fixed fields come from the first message)."""
    return set(map(type, flags)) == {int} and I32_MIN <= min(flags) and max(flags) <= I32_MAX


def illegal(reason: str) -> PutResult:
    """MESSAGE_ILLEGAL, with why."""
    return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=reason)


def queue_ok(t, queue_id) -> bool:
    """A queue id the record's int32 field holds and the topic's config has (the broker's msgCheck:
    queueId < max(writeQueueNums, readQueueNums)); `t`: the topic's TopicInfo."""
    if type(queue_id) is int and 0 <= queue_id < t.queues:
        return True
    log.warning("put refused: queue id %r is not one of topic %s's queues (0..%d)", queue_id, t.name, t.queues - 1)
    return False


def hosts(msg: Message, store_host: bytes) -> tuple[bytes, int, bytes] | None:
    """(born host, the sysFlag bits of their forms, store host) as the record writes them; a message without
    its own takes the store's. None (logged) for a host that cannot be written."""
    try:
        born = R.host_to_bytes(msg.born_host) if msg.born_host else store_host
        store = R.host_to_bytes(msg.store_host) if msg.store_host else store_host
    except ValueError as e:
        log.warning("put refused: %s", e)
        return None
    flags = (R.BORNHOST_V6_FLAG if len(born) == 20 else 0) | (R.STOREHOSTADDRESS_V6_FLAG if len(store) == 20 else 0)
    return born, flags, store


# -- the reasons, in words
def topic_refused(topic, auto_v2: bool) -> str:
    return topic_problem(topic, auto_v2) or f"topic {topic!r} is refused"


def queue_refused(t, queue_id) -> str:
    return f"queue id {queue_id!r} is not one of topic {t.name}'s queues (0..{t.queues - 1})"


def body_refused(body, max_body: int) -> str:
    if body is None:
        return "the message has no body"
    if not isinstance(body, BYTES):
        return f"the body must be bytes, not {type(body).__name__}"
    return f"the body is {len(body)} bytes, over maxMessageSize ({max_body} bytes)"


def record_refused(size: int, max_record: int) -> str:
    return (
        f"the record would be {size} bytes, over maxMessageSize + 64 KiB ({max_record} bytes: "
        "the body with its topic and properties)"
    )


def properties_refused(plen: int) -> str:
    return f"the properties take {plen} bytes, over {MAX_PROPERTIES} (their length is a Java short)"


def text_refused(msg: Message) -> str:
    return msg.text_problem() or "a tag, key or property cannot be stored"


def hosts_refused(msg: Message) -> str:
    try:
        for h in (msg.born_host, msg.store_host):
            if h:
                R.host_to_bytes(h)
    except ValueError as e:
        return str(e)
    return "a host cannot be stored"
