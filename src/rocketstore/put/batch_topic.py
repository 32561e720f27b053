"""Puts to a batch-ConsumeQueue topic (RIP-26): a record is either one message or an inner batch whose body
holds many (MessageDecoder.encodeMessages) and whose INNER_NUM says how many.

As RocketMQ does it (CommitLog.getMessageNum, BatchConsumeQueue.assignQueueOffset): the record takes the
queue offset, an inner batch gets the INNER_BASE property (= that offset) with its properties rewritten
in java.util.HashMap order, and the queue offset then advances by the batch size.

With the compiled engine (engine.native) the record (properties in HashMap order, CRC entry), what the
dispatch reads from it (tagsCode, KEYS, UNIQ_KEY) and a producer batch's inner-batch body are made in C
(put_batchcq.c); put_py and put_batch_py are the reference, and run whatever the C leaves to Python (it
answers None).
"""

from __future__ import annotations

import logging

from ..config.store_config import wall_clock_ms
from ..formats import inner_batch as IB
from ..formats import properties as P
from ..formats import record as R
from ..message import Message, PutBatchResult, PutResult, PutStatus
from .. import engine
from .checks import MAX_PROPERTIES

log = logging.getLogger("rocketstore.put")


def batch_size_of(props: dict[str, str]) -> int | None:
    """INNER_NUM as a Java short (1 without it), None when it is not one. The queue offset advances by
    at least 1 (getMessageNum), but the unit carries the number as written (setBatchSizeIfNeeded): a
    batch of 0 gets a unit of 0, a negative one none (putMessagePositionInfoWrapper drops it)."""
    text = props.get(P.INNER_NUM)
    if text is None:
        return 1
    try:
        return IB.parse_java_integer(text, 16)
    except ValueError:
        log.warning("put refused: INNER_NUM %r is not a short", text)
        return None


def put_py(writer, msg: Message, queue_id: int, topic) -> PutResult:
    """One record to a batch-CQ topic (topic is the writer's cached TopicInfo)."""
    body = msg.body
    if body is None or len(body) > writer.max_body:
        return PutResult(PutStatus.MESSAGE_ILLEGAL)
    problem = msg.text_problem()
    if problem is not None:
        log.warning("put refused: %s", problem)
        return PutResult(PutStatus.MESSAGE_ILLEGAL)
    inner = bool(msg.sys_flag & R.INNER_BATCH_FLAG)
    takes_offset = R.gets_queue_unit(msg.sys_flag)
    props = msg.property_map()
    props.pop(P.CRC32, None)
    if P.INNER_NUM in props and not inner:
        return PutResult(PutStatus.MESSAGE_ILLEGAL)  # RocketMQ: INNER_NUM without INNER_BATCH_FLAG
    batch = batch_size_of(props)
    if batch is None:
        return PutResult(PutStatus.MESSAGE_ILLEGAL)
    count = max(batch, 1)
    hosts = writer.hosts(msg)
    if hosts is None:
        return PutResult(PutStatus.MESSAGE_ILLEGAL)
    born, hflags, store_host = hosts
    sys_flag = R.with_host_flags(msg.sys_flag, hflags)
    born_ts = msg.born_timestamp if msg.born_timestamp is not None else writer.config.clock()
    key = (topic.name, queue_id)
    with writer.lock:
        qoff = writer.queue_offsets.get(key, 0) if takes_offset else 0  # prepared/rolled back: none
        if inner and takes_offset:  # assignQueueOffset runs only for messages that take an offset
            props[P.INNER_BASE] = str(qoff)
            # a default-capacity java.util.HashMap, as a Message built by a producer holds its properties
            # (the golden store's stored order); a map from string2messageProperties would be sized 128
            order = P.java_hashmap_order(list(props))
            raw = "".join(f"{k}\x01{props[k]}\x02" for k in order).encode("utf-8", "replace")
        else:
            raw = msg.properties_bytes(drop_crc=True)
        stored = R.encode_properties(raw, writer.append_crc, single=True)
        if len(stored) > MAX_PROPERTIES:
            return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED)
        size = R.record_length(topic.v2, sys_flag, len(body), topic.tlen, len(stored))
        if size > writer.max_record:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        store_ts = writer.config.clock()

        def make(phys):
            return R.encode_record(
                topic=topic.name.encode("utf-8"),
                body=body,
                props=stored,
                queue_id=queue_id,
                flag=msg.flag,
                sys_flag=sys_flag,
                born_timestamp=born_ts,
                born_host=born,
                store_timestamp=store_ts,
                store_host=store_host,
                reconsume_times=msg.reconsume_times,
                prepared_transaction_offset=0,
                queue_offset=qoff,
                physical_offset=phys,
                v2=topic.v2,
                append_crc=writer.append_crc,
            )

        phys = writer.append(size, make)
        if type(phys) is PutStatus:
            return PutResult(phys)
        writer.last_physical_offset = phys
        writer.commitlog.files.files[-1].store_timestamp = store_ts
        if takes_offset:
            writer.queue_offsets[key] = qoff + count
        if writer.dispatch is not None:
            writer.dispatch(
                topic.name,
                queue_id,
                phys,
                size,
                R.tags_code(props.get(P.TAGS)),
                store_ts,
                qoff,
                sys_flag,
                raw,
                phys + size,
                batch_size=batch,
            )
    return PutResult(PutStatus.PUT_OK, phys, size, qoff, store_host, store_ts, msg_num=count)


def put_batch_py(writer, msgs: list[Message], queue_id: int, topic) -> PutBatchResult:
    """A producer batch to a batch-CQ topic: one inner-batch record holding every message."""
    if any(m.topic != topic.name or m.body is None for m in msgs):
        return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
    problems = [p for p in map(Message.text_problem, msgs) if p is not None]
    if problems:
        log.warning("put refused: %s", problems[0])
        return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
    body = IB.encode_messages_py((m.body, m.properties_bytes(drop_crc=True), m.flag) for m in msgs)
    return _put_batch(writer, msgs, queue_id, topic, body, put_py)


def _put_batch(writer, msgs: list[Message], queue_id: int, topic, body: bytes, put_one) -> PutBatchResult:
    """The inner-batch record of `body` (the messages' encodeMessages) put by put_one."""
    first = msgs[0]
    if len(body) > writer.max_body:
        return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
    record = Message(
        topic.name,
        body,
        properties={P.INNER_NUM: str(len(msgs))},
        sys_flag=R.INNER_BATCH_FLAG,
        born_timestamp=first.born_timestamp,
        born_host=first.born_host,
        store_host=first.store_host,
    )
    r = put_one(writer, record, queue_id, topic)
    if not r.ok:
        return PutBatchResult(r.status)
    n = len(msgs)
    return PutBatchResult(
        PutStatus.PUT_OK,
        [r.physical_offset] * n,
        [r.size] * n,
        r.physical_offset,
        r.size,
        r.queue_offset,
        writer.store_host if first.store_host is None else R.host_to_bytes(first.store_host),
        r.store_timestamp,
    )


def put_native(writer, msg: Message, queue_id: int, topic) -> PutResult:
    """put_py with the record made in C under the put lock (bcq_record), when it fits the current segment;
    anything the C leaves to Python (None) runs put_py, which decides."""
    born = store = writer.store_host
    if msg.born_host or msg.store_host:
        try:  # writer.hosts without its log line: put_py logs the refusal
            if msg.born_host:
                born = R.host_to_bytes(msg.born_host)
            if msg.store_host:
                store = R.host_to_bytes(msg.store_host)
        except Exception:  # whatever it is, put_py answers it
            return put_py(writer, msg, queue_id, topic)
    key = (topic.name, queue_id)
    clock = writer.config.clock
    with writer.lock:
        files = writer.commitlog.files.files
        if files:
            mf = files[-1]
            phys = mf.file_from_offset + mf.wrote
            got = engine.native.bcq_record(
                msg,
                topic.tail,
                topic.magic,
                queue_id,
                writer.queue_offsets.get(key, 0),
                phys,
                mf.file_size - mf.wrote,
                writer.max_body,
                writer.max_record,
                born,
                store,
                writer.append_crc,
                None if clock is wall_clock_ms else clock,
            )
            if got is not None:
                record, raw, code, batch, info, store_ts, sys_flag, takes = got
                mf.append(record)
                size = len(record)
                writer.last_physical_offset = phys
                mf.store_timestamp = store_ts
                qoff = writer.queue_offsets.get(key, 0) if takes else 0
                count = max(batch, 1)
                if takes:
                    writer.queue_offsets[key] = qoff + count
                if writer.dispatch is not None:
                    writer.dispatch(
                        topic.name,
                        queue_id,
                        phys,
                        size,
                        code,
                        store_ts,
                        qoff,
                        sys_flag,
                        raw,
                        phys + size,
                        batch_size=batch,
                        info=info,
                    )
                return PutResult(PutStatus.PUT_OK, phys, size, qoff, store, store_ts, msg_num=count)
    return put_py(writer, msg, queue_id, topic)


def put_batch_native(writer, msgs: list[Message], queue_id: int, topic) -> PutBatchResult:
    """put_batch_py with the inner-batch body made in C (inner_body) and its record by put_native; what the
    C leaves to Python runs put_batch_py. (inner_body answers bytes only for messages of this topic, with
    bodies and texts put_batch_py's checks accept.)"""
    body = engine.native.inner_body(msgs, topic.name) if type(msgs) is list else None
    if body is None:
        return put_batch_py(writer, msgs, queue_id, topic)
    return _put_batch(writer, msgs, queue_id, topic, body, put_native)


# the chosen twins (rocketstore.engine.TWINS: batchcq_put, batchcq_put_batch), after the sides they choose from
from ..engine import batchcq_put as put, batchcq_put_batch as put_batch  # noqa: E402, F401
