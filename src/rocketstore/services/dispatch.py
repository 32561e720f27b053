"""Dispatch requests: what the ConsumeQueue and IndexFile builders need to know about one record.

`check_record` is CommitLog.checkMessageAndReturnSize: it reads a record at a position, validates it and
turns it into a DispatchRequest, telling a BLANK filler and a bad record apart.
"""

from __future__ import annotations

from ..errors import CorruptDataError
from ..formats import properties as P
from ..formats.inner_batch import dispatch_batch_fields
from ..formats import record as R
from ..engine import parse_properties

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

OK, BLANK, BAD = "ok", "blank", "bad"


class DispatchRequest:
    __slots__ = (
        "topic",
        "queue_id",
        "commit_log_offset",
        "msg_size",
        "tags_code",
        "store_timestamp",
        "consume_queue_offset",
        "keys",
        "uniq_key",
        "sys_flag",
        "prepared_transaction_offset",
        "properties",
        "msg_base_offset",
        "batch_size",
        "bit_map",
    )

    def __init__(
        self,
        topic,
        queue_id,
        commit_log_offset,
        msg_size,
        tags_code,
        store_timestamp,
        consume_queue_offset,
        keys="",
        uniq_key=None,
        sys_flag=0,
        prepared_transaction_offset=0,
        properties=None,
        msg_base_offset=None,
        batch_size=1,
    ):
        self.topic = topic
        self.queue_id = queue_id
        self.commit_log_offset = commit_log_offset
        self.msg_size = msg_size
        self.tags_code = tags_code
        self.store_timestamp = store_timestamp
        self.consume_queue_offset = consume_queue_offset
        self.keys = keys
        self.uniq_key = uniq_key
        self.sys_flag = sys_flag
        self.prepared_transaction_offset = prepared_transaction_offset
        self.properties = properties
        # RocketMQ's full constructor starts the base at the queue offset; INNER_BASE replaces it
        self.msg_base_offset = consume_queue_offset if msg_base_offset is None else msg_base_offset
        self.batch_size = batch_size
        # DispatchRequest.bitMap: the filter bitmap a dispatcher added first (the broker's
        # CommitLogDispatcherCalcBitMap) computes for the ConsumeQueue ext unit; None writes no bitmap
        self.bit_map = None

    def __repr__(self):
        return (
            f"DispatchRequest({self.topic}-{self.queue_id} @{self.commit_log_offset}+{self.msg_size} "
            f"cq={self.consume_queue_offset})"
        )


def tags_code_for(topic: str, props: dict, store_timestamp: int, sys_flag: int, delay_levels) -> int:
    """The ConsumeQueue's tagsCode: hashCode of TAGS; for SCHEDULE_TOPIC_XXXX with a DELAY level, the
    delivery time (store time + that level's delay, the level capped at the highest one)."""
    code = R.tags_code(props.get(P.TAGS))
    if topic == SCHEDULE_TOPIC:
        level_text = props.get(P.DELAY)
        if level_text is not None:
            level = int(level_text)
            if level > len(delay_levels):
                level = len(delay_levels)
            if level > 0:
                code = store_timestamp + delay_levels[level - 1]
    return code


def check_record(
    buf, pos: int, end: int, *, check_crc: bool, force_verify_prop_crc: bool, delay_levels
) -> tuple[str, int, DispatchRequest | None, str | None]:
    """(kind, size, request, problem) for the record at `pos`: kind OK with the request; BLANK with size 0
    (the end-of-segment filler); BAD with the record size if it could be read, else -1, and what is wrong."""
    if end - pos <= 4:
        return BAD, -1, None, "no record here"
    if end - pos >= 8 and R.I32.unpack_from(buf, pos + 4)[0] == R.BLANK_MAGIC:
        return BLANK, 0, None, None
    try:
        h = R.read_header(buf, pos, end)
    except CorruptDataError as e:
        size = R.I32.unpack_from(buf, pos)[0]
        mismatch = "does not match its fields" in e.reason and 0 < size <= end - pos
        return BAD, (size if mismatch else -1), None, e.reason
    props = parse_properties(h.props_raw) if h.props_raw else {}
    h.properties = props
    if check_crc:
        problem = R.verify_crc(buf, h, pos, force_verify_prop_crc)
        if problem:
            return BAD, -1, None, problem
    try:
        code = tags_code_for(h.topic, props, h.store_timestamp, h.sys_flag, delay_levels)
    except ValueError:
        return BAD, -1, None, f"DELAY property {props.get(P.DELAY)!r} is not a number"
    req = DispatchRequest(
        h.topic,
        h.queue_id,
        h.physical_offset,
        h.size,
        code,
        h.store_timestamp,
        h.queue_offset,
        props.get(P.KEYS) or "",
        props.get(P.UNIQ_KEY),
        h.sys_flag,
        0,
        props,
    )
    if P.INNER_NUM in props and P.INNER_BASE in props:
        try:  # Java parses these inside checkMessageAndReturnSize's catch-all: a bad number is a bad record
            req.msg_base_offset, req.batch_size = dispatch_batch_fields(props, h.queue_offset)
        except ValueError:
            return BAD, -1, None, f"INNER_BASE/INNER_NUM {props[P.INNER_BASE]!r}/{props[P.INNER_NUM]!r} are not numbers"
    return OK, h.size, req, None


gets_queue_unit = R.gets_queue_unit  # (verify and queue_check import it from here)
