"""One message (CommitLog.asyncPutMessage): the checks, the queue offset, the record, the append, the dispatch.

`put` picks the cheapest path the message allows, each writing the same bytes as `put_general`, the
reference that takes every message:

- put_plain: a topic, a body, maybe tags (the record's tail cached per tag on the TopicInfo);
- put_keyed: keys and properties too, the record made in one C call (compiled engine only);
- put_general: anything else (hosts of its own, transactions, odd properties, a batch-CQ topic).

Each is a function of the MessageWriter `w`, whose PutState holds the queue offsets and last offset."""

from __future__ import annotations

import zlib

from ..config.store_config import wall_clock_ms
from ..formats import properties as P
from ..formats import record as R
from ..message import Message, PutResult, PutStatus
from .. import engine
from . import batch_topic, checks
from .append import append, appended
from .checks import BYTES, MAX_PROPERTIES, illegal
from .encode import message_props, props_info, tags_code
from .topic import TopicInfo

_crc32 = zlib.crc32


def put(w, msg: Message, queue_id: int) -> PutResult:
    """MessageWriter.put: a message of a topic the writer knows, fit for the plain path, takes it (put_plain,
    put_keyed); everything else is checked in full (put_checked)."""
    try:
        t = w.state.topics.get(msg.topic)
    except TypeError:  # an unhashable topic: put_general refuses it
        t = None
    if (
        t is not None
        and t.fast
        and type(msg.body) is bytes
        and msg.raw_properties is None
        and not msg.sys_flag
        and msg.born_host is None
        and msg.store_host is None
        and type(queue_id) is int
        and 0 <= queue_id < t.queues
    ):
        if not msg.properties and not msg.keys:
            if not checks.fields_fit(msg):
                return illegal(checks.fields_problem(msg))
            return put_plain(w, msg, queue_id, t)
        if engine.native is not None:
            return put_keyed(w, msg, queue_id, t)
    return put_checked(w, msg, queue_id)


def put_checked(w, msg: Message, queue_id: int) -> PutResult:
    """The general path, after the checks of put that it does not make itself."""
    if not isinstance(msg.body, BYTES):
        return illegal(checks.body_refused(msg.body, w.max_body))
    if not checks.fields_fit(msg):
        return illegal(checks.fields_problem(msg))
    return put_general(w, msg, queue_id)


def put_plain(w, msg: Message, queue_id: int, t: TopicInfo) -> PutResult:
    """The common message (a topic, a body, maybe tags), with nothing re-derived that the topic's cache
    already knows; the same bytes as put_general writes."""
    body = msg.body
    if body is None or len(body) > w.max_body:
        return illegal(checks.body_refused(body, w.max_body))
    got = t.tag_tail(msg.tags)
    if got is None:
        return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=checks.text_refused(msg))
    tail, tail_len, code, props, info = got
    if len(props) > MAX_PROPERTIES:
        return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, reason=checks.properties_refused(len(props)))
    blen = len(body)
    size = 88 + blen + tail_len
    if size > w.max_record:
        return illegal(checks.record_refused(size, w.max_record))
    return write_plain(w, msg, queue_id, t, body, blen, size, tail, code, props, info)


def put_keyed(w, msg: Message, queue_id: int, t: TopicInfo) -> PutResult:
    """A producer's message (KEYS, UNIQ_KEY, user properties) on the plain path: its record, properties and
    their props_info made in one C call (keyed_record) under the put lock, with nothing re-derived that the
    topic's cache knows; the same bytes and statuses as put_general, which decides whatever the C leaves to
    Python (before the clock is read) and writes the record that opens a new segment."""
    key = (t.name, queue_id)
    state = w.state
    with state.lock:
        files = w.commitlog.files.files
        if not files:
            return put_checked(w, msg, queue_id)
        mf = files[-1]
        qoff = state.queue_offsets.get(key, 0)
        phys = mf.file_from_offset + mf.wrote
        clock = w.config.clock
        got = engine.native.keyed_record(
            msg,
            t.tail,
            t.magic,
            queue_id,
            qoff,
            phys,
            mf.file_size - mf.wrote,
            w.max_body,
            w.max_record,
            w.store_host,
            None if clock is wall_clock_ms else clock,
        )
        if got is None:
            return put_checked(w, msg, queue_id)
        record, props, info, store_ts = got
        mf.append(record)
        size = len(record)
        state.last_physical_offset = phys
        mf.store_timestamp = store_ts
        state.queue_offsets[key] = qoff + 1
        if w.dispatch is not None:
            w.dispatch(t.name, queue_id, phys, size, info[0], store_ts, qoff, 0, props, phys + size, info=info)
    return PutResult(PutStatus.PUT_OK, phys, size, qoff, w.store_host, store_ts)


def write_plain(w, msg, queue_id, t, body, blen, size, tail, code, props, info) -> PutResult:
    """The record of put_plain (IPv4 hosts, sysFlag 0, no appended CRC) and its dispatch."""
    clock = w.config.clock
    born_ts = msg.born_timestamp if msg.born_timestamp is not None else clock()
    crc = _crc32(body) & 0x7FFFFFFF
    host = w.store_host
    key = (t.name, queue_id)
    state = w.state
    fixed = w.fixed_v4
    with state.lock:
        qoff = state.queue_offsets.get(key, 0)
        store_ts = clock()
        files = w.commitlog.files.files
        mf = files[-1] if files else None
        if mf is not None and mf.file_size - mf.wrote >= size + R.END_FILE_MIN_BLANK_LENGTH:
            # (the record packed inline, twice: a closure per put costs the plain path more than the lines)
            phys = mf.file_from_offset + mf.wrote
            mf.append(
                fixed.pack(
                    size,
                    t.magic,
                    crc,
                    queue_id,
                    msg.flag,
                    qoff,
                    phys,
                    0,
                    born_ts,
                    host,
                    store_ts,
                    host,
                    msg.reconsume_times,
                    msg.prepared_transaction_offset,
                    blen,
                )
                + body
                + tail
            )
        else:  # a new segment (and a BLANK filler) first: the general append knows how
            phys = append(
                w,
                size,
                lambda p: (
                    fixed.pack(
                        size,
                        t.magic,
                        crc,
                        queue_id,
                        msg.flag,
                        qoff,
                        p,
                        0,
                        born_ts,
                        host,
                        store_ts,
                        host,
                        msg.reconsume_times,
                        msg.prepared_transaction_offset,
                        blen,
                    )
                    + body
                    + tail
                ),
            )
            if type(phys) is PutStatus:
                return PutResult(phys, reason=w.append_problem)
        appended(state, w.commitlog, phys, store_ts, key, qoff + 1)
        if w.dispatch is not None:
            w.dispatch(t.name, queue_id, phys, size, code, store_ts, qoff, 0, props, phys + size, info=info)
    return PutResult(PutStatus.PUT_OK, phys, size, qoff, host, store_ts)


def put_general(w, msg: Message, queue_id: int) -> PutResult:
    """Any message, every check made (the reference the other paths write the same bytes as)."""
    t = w.topic_info(msg.topic)
    body = msg.body
    if t is None:
        return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=w.topic_refused(msg.topic))
    if not checks.queue_ok(t, queue_id):
        return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=checks.queue_refused(t, queue_id))
    if body is None or len(body) > w.max_body:
        return illegal(checks.body_refused(body, w.max_body))
    if w.is_batch_topic(t.name):
        return batch_topic.put(w, msg, queue_id, t)
    sys_flag = msg.sys_flag
    if sys_flag & R.INNER_BATCH_FLAG:  # inner batches need a BatchCQ topic
        return illegal(f"sysFlag has INNER_BATCH_FLAG, but topic {t.name} is no batch ConsumeQueue topic")
    props = message_props(msg, w.append_crc)
    if props is None:
        return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=checks.text_refused(msg))
    if b"INNER_NUM\x01" in props and P.INNER_NUM in P.parse_properties(props):  # RocketMQ's rule
        return illegal("property INNER_NUM without INNER_BATCH_FLAG in sysFlag")
    stored = R.encode_properties(props, w.append_crc, single=True) if w.append_crc else props
    plen = len(stored)
    if plen > MAX_PROPERTIES:
        return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, reason=checks.properties_refused(plen))
    hosts = checks.hosts(msg, w.store_host)
    if hosts is None:
        return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=checks.hosts_refused(msg))
    born, hflags, store_host = hosts
    sys_flag = R.with_host_flags(sys_flag, hflags)
    born_ts = msg.born_timestamp if msg.born_timestamp is not None else w.config.clock()
    blen = len(body)
    size = 72 + len(born) + len(store_host) + blen + len(t.tail) + 2 + plen
    if size > w.max_record:
        return illegal(checks.record_refused(size, w.max_record))
    return write_general(w, msg, queue_id, t, props, stored, born, store_host, sys_flag, born_ts, size)


def write_general(w, msg, queue_id, t, props, stored, born, store_host, sys_flag, born_ts, size) -> PutResult:
    """The record of put_general, checked: its queue offset (only a record that takes a unit takes one), the
    append, the dispatch."""
    body = msg.body
    blen = len(body)
    crc = _crc32(body) & 0x7FFFFFFF
    fixed = R.fixed_part(len(born), len(store_host))
    tail = t.tail + R.U16.pack(len(stored)) + stored
    magic = R.MAGIC_V2 if t.v2 else R.MAGIC_V1
    counts = R.gets_queue_unit(sys_flag)  # only these take a queue offset
    key = (t.name, queue_id)
    append_crc = w.append_crc
    state = w.state
    with state.lock:
        qoff = state.queue_offsets.get(key, 0) if counts else 0
        store_ts = w.config.clock()

        def make(phys):
            rec = (
                fixed.pack(
                    size,
                    magic,
                    crc,
                    queue_id,
                    msg.flag,
                    qoff,
                    phys,
                    sys_flag,
                    born_ts,
                    born,
                    store_ts,
                    store_host,
                    msg.reconsume_times,
                    msg.prepared_transaction_offset,
                    blen,
                )
                + body
                + tail
            )
            return R.fill_crc_property(rec) if append_crc else rec

        phys = append(w, size, make)
        if type(phys) is PutStatus:
            return PutResult(phys, reason=w.append_problem)
        appended(state, w.commitlog, phys, store_ts, key, qoff + 1 if counts else None)
        if w.dispatch is not None:
            info = props_info(props)
            code = tags_code(t.name, props, store_ts, sys_flag, info, w.delay_levels)
            w.dispatch(t.name, queue_id, phys, size, code, store_ts, qoff, sys_flag, props, phys + size, info=info)
    return PutResult(PutStatus.PUT_OK, phys, size, qoff, store_host, store_ts)
