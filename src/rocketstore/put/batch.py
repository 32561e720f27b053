"""A producer batch (CommitLog.asyncPutMessages): one record per message, all in one segment, all or nothing.

Python pays per message, so a batch is handled a column at a time: plan() checks the batch and lays its
records out (bodies, flags, properties once per distinct value, sizes) into a BatchPlan, then one of two
encoders appends them under the put lock, taking the queue offsets and the store time:

- append_native: the compiled engine's encode_batch writes every record, CRCs included, in one call;
- append_numpy: the reference, the fixed fields of every record with numpy and the records joined.

Both write the same bytes; batch_written then moves the PutState and hands the records to the dispatch."""

from __future__ import annotations

import logging
import zlib

import numpy as np

from ..formats import properties as P
from ..formats import record as R
from ..message import Message, PutBatchResult, PutStatus
from ..services.dispatch import SCHEDULE_TOPIC
from .. import engine
from . import batch_topic, checks
from .append import append, appended
from .checks import BYTES_TYPES, MAX_PROPERTIES
from .encode import (
    batch_props_py,
    fill_crc_properties,
    interleave_uniform,
    message_props_py,
    props_info,
    tags_code,
)

log = logging.getLogger("rocketstore.put")
_crc32 = zlib.crc32


class BatchPlan:
    """A checked batch and its records' layout: what its append needs besides the writer's PutState."""

    __slots__ = (
        "msgs",  # the messages (the first gives the fixed fields all records share)
        "queue_id",
        "topic",  # the TopicInfo
        "bodies",  # the columns: each message's body, FLAG, PROPERTIES bytes
        "flags",
        "props_list",
        "uniform",  # every message has the same PROPERTIES (props_list holds one value n times)
        "infos",  # each PROPERTIES' props_info, when the C computed them (None: computed after the append)
        "codes",  # the C's tagsCodes (int64 bytes), or None
        "sizes",  # each record's size (numpy int64), and their sum
        "total",
        "born",  # the hosts as written, the sysFlag with their bits, the born time
        "store_host",
        "sys_flag",
        "born_ts",
        "native",  # append_native takes it (the compiled engine, bodies all bytes)
    )

    def __init__(self, **values):
        for name, value in values.items():
            setattr(self, name, value)


def put_batch(w, msgs: list[Message], queue_id: int) -> PutBatchResult:
    """MessageWriter.put_batch: the topic's checks, then plan() and an encoder (a batch-CQ topic: one
    inner-batch record, batch_topic.put_batch)."""
    if not msgs:
        return PutBatchResult(PutStatus.MESSAGE_ILLEGAL, reason="the batch is empty")
    first = msgs[0]
    t = w.topic_info(first.topic)
    if t is None:
        return PutBatchResult(PutStatus.MESSAGE_ILLEGAL, reason=w.topic_refused(first.topic))
    if not checks.queue_ok(t, queue_id):
        return PutBatchResult(PutStatus.MESSAGE_ILLEGAL, reason=checks.queue_refused(t, queue_id))
    if w.is_batch_topic(t.name):
        return batch_topic.put_batch(w, msgs, queue_id, t)
    plan = plan_batch(w, msgs, queue_id, t)
    if type(plan) is PutBatchResult:
        return plan
    return append_native(w, plan) if plan.native else append_numpy(w, plan)


def plan_batch(w, msgs: list[Message], queue_id: int, t) -> BatchPlan | PutBatchResult:
    """The batch checked as RocketMQ checks one (no transactions, every body within maxMessageSize, the
    properties within a short, the encoded batch within maxMessageSize) and laid out; or the refusal."""
    first = msgs[0]
    if R.transaction_type(first.sys_flag) != R.TRANSACTION_NOT_TYPE or first.sys_flag & R.INNER_BATCH_FLAG:
        return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)  # batches carry no transactions (asyncPutMessages)
    hosts = checks.hosts(first, w.store_host)
    if hosts is None:
        return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
    born, hflags, store_host = hosts
    born_ts = first.born_timestamp if first.born_timestamp is not None else w.config.clock()
    got = body_columns(msgs, t.name)
    if type(got) is PutBatchResult:
        return got
    bodies, flags, blens, checked_in_c = got
    if max(blens) > w.max_body:
        return PutBatchResult(
            PutStatus.MESSAGE_ILLEGAL,
            reason=f"a body is {max(blens)} bytes, over maxMessageSize ({w.max_body} bytes)",
        )
    got = props_columns(msgs, w.append_crc)
    if type(got) is PutBatchResult:
        return got
    props_list, infos, uniform, codes = got
    n = len(msgs)
    reserve = P.CRC32_RESERVED_LEN if w.append_crc else 0
    plens = list(map(len, props_list))
    if max(plens) + reserve > MAX_PROPERTIES:
        return PutBatchResult(
            PutStatus.PROPERTIES_SIZE_EXCEEDED, reason=checks.properties_refused(max(plens) + reserve)
        )
    encoded = 22 * n + sum(blens) + sum(plens)  # the encoded batch is one "body" to RocketMQ
    if encoded > w.max_body:
        return PutBatchResult(
            PutStatus.MESSAGE_ILLEGAL,
            reason=f"the encoded batch is {encoded} bytes, over maxMessageSize ({w.max_body} bytes)",
        )
    fixed_len = R.fixed_dtype(len(born), len(store_host)).itemsize
    sizes = np.array(blens, dtype=np.int64) + (
        np.array(plens, dtype=np.int64) + (fixed_len + len(t.tail) + 2 + reserve)
    )
    return BatchPlan(
        msgs=msgs,
        queue_id=queue_id,
        topic=t,
        bodies=bodies,
        flags=flags,
        props_list=props_list,
        uniform=uniform,
        infos=infos,
        codes=codes,
        sizes=sizes,
        total=int(sizes.sum()),
        born=born,
        store_host=store_host,
        sys_flag=R.with_host_flags(first.sys_flag, hflags),
        born_ts=born_ts,
        native=engine.native is not None and (checked_in_c or set(map(type, bodies)) == {bytes}),
    )


def body_columns(msgs: list[Message], tname: str):
    """(bodies, flags, body lengths, whether the C checked them) of a batch of one topic whose bodies are
    bytes and whose fields fit the record; or the refusal. One C pass (batch_fields) when it takes the batch."""
    native = engine.native
    got = native.batch_fields(msgs, tname) if native is not None and type(msgs) is list else None
    if got is not None:
        if not checks.fields_fit(msgs[0]):
            return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
        bodies, flags, blens = got
        return bodies, flags, blens, True
    n = len(msgs)
    if [m.topic for m in msgs].count(tname) != n:
        log.warning("put_batch refused: one batch holds several topics (the first is %r)", tname)
        return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
    bodies = [m.body for m in msgs]
    flags = [m.flag for m in msgs]
    if not set(map(type, bodies)) <= BYTES_TYPES or not checks.fields_fit(msgs[0]) or not checks.flags_fit(flags):
        return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)  # no body, a body not bytes, a field out of range
    return bodies, flags, list(map(len, bodies)), False


def props_columns(msgs: list[Message], append_crc: bool):
    """(each message's PROPERTIES, their props_info or None, whether all are the same, the C's tagsCodes or
    None); or the refusal: a tag, key or property that cannot be stored, a delayed batch."""
    n = len(msgs)
    native = engine.native
    if native is not None:
        props_list, infos, uniform, careful, codes = native.batch_props(msgs, append_crc)
        if careful and None in props_list:  # what the C leaves to Python
            for i, props in enumerate(props_list):
                if props is None:
                    props_list[i] = props = message_props_py(msgs[i], append_crc)
                    infos[i] = props_info(props) if props is not None else None
            uniform = props_list.count(props_list[0]) == n
            codes = None
    else:
        props_list, uniform = batch_props_py(msgs, append_crc)
        infos, careful, codes = None, True, None
    if careful and None in props_list:
        return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)  # a tag, key or property cannot be stored
    for props in (props_list[:1] if uniform else props_list) if careful else ():  # (no DELAY: not careful)
        if b"DELAY\x01" in props and P.parse_properties(props).get(P.DELAY, "0").strip() not in ("", "0"):
            return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)  # RocketMQ refuses delayed batches
    return props_list, infos, uniform, codes


def append_numpy(w, plan: BatchPlan) -> PutBatchResult:
    """The records with numpy (the reference encoder): the fixed fields of all at once, bodies and tails
    joined (one strided copy when all are the same size), appended in one write."""
    t, bodies, props_list, sizes = plan.topic, plan.bodies, plan.props_list, plan.sizes
    n = len(bodies)
    append_crc = w.append_crc
    reserve = P.CRC32_RESERVED_LEN if append_crc else 0
    crcs = np.fromiter(map(_crc32, bodies), dtype=np.int64, count=n) & 0x7FFFFFFF
    plens = list(map(len, props_list))
    if plan.uniform:
        tails = [t.tail + R.U16.pack(plens[0] + reserve) + props_list[0] + bytes(reserve)] * n
    else:
        tails = [t.tail + R.U16.pack(pl + reserve) + pr + bytes(reserve) for pl, pr in zip(plens, props_list)]
    blens = list(map(len, bodies))
    same_size = plan.uniform and blens.count(blens[0]) == n
    fixed_len = R.fixed_dtype(len(plan.born), len(plan.store_host)).itemsize
    state = w.state
    with state.lock:
        base = state.queue_offsets.get((t.name, plan.queue_id), 0)
        store_ts = w.config.clock()

        def make(phys):
            hb = R.fixed_parts(
                born=plan.born,
                store_host=plan.store_host,
                sizes=sizes,
                magic=t.magic,
                crcs=crcs,
                queue_id=plan.queue_id,
                flags=plan.flags,
                first_queue_offset=base,
                phys=record_starts(phys, sizes),
                sys_flag=plan.sys_flag,
                born_timestamp=plan.born_ts,
                store_timestamp=store_ts,
                reconsume_times=plan.msgs[0].reconsume_times,
                body_lens=blens,
            ).tobytes()
            if same_size:
                data = interleave_uniform(hb, bodies, tails[0], n, fixed_len, blens[0])
            else:
                parts = [None] * (3 * n)
                parts[0::3] = [hb[i : i + fixed_len] for i in range(0, n * fixed_len, fixed_len)]
                parts[1::3] = bodies
                parts[2::3] = tails
                data = b"".join(parts)
            return fill_crc_properties(data, sizes) if append_crc else data

        phys = append(w, plan.total, make)
        if type(phys) is PutStatus:
            return PutBatchResult(phys)
        infos = codes = None
        if w.dispatch is not None and plan.uniform:
            info = props_info(props_list[0])
            infos = [info] * n
            code = tags_code(t.name, props_list[0], store_ts, plan.sys_flag, info, w.delay_levels)
            codes = np.full(n, code, dtype=np.int64)
        elif w.dispatch is not None:
            infos = [props_info(props) for props in props_list]
        return batch_written(w, plan, phys, base, store_ts, infos, codes)


def append_native(w, plan: BatchPlan) -> PutBatchResult:
    """The records in one C call (encode_batch: the same bytes as append_numpy, CRCs included), and the
    properties' infos and tagsCodes the C computed handed to the dispatch as they are."""
    t = plan.topic
    append_crc = w.append_crc
    reserve = P.CRC32_RESERVED_LEN if append_crc else 0
    fixed = R.fixed_part(len(plan.born), len(plan.store_host))
    props = plan.props_list[0] if plan.uniform else plan.props_list
    encode_batch = engine.native.encode_batch
    state = w.state
    with state.lock:
        base = state.queue_offsets.get((t.name, plan.queue_id), 0)
        store_ts = w.config.clock()
        template = fixed.pack(
            0,
            t.magic,
            0,
            plan.queue_id,
            0,
            0,
            0,
            plan.sys_flag,
            plan.born_ts,
            plan.born,
            store_ts,
            plan.store_host,
            plan.msgs[0].reconsume_times,
            0,
            0,
        )
        phys = append(
            w,
            plan.total,
            lambda p: encode_batch(
                template, plan.bodies, props, t.tail, reserve, plan.flags, base, p, plan.total, append_crc
            ),
        )
        if type(phys) is PutStatus:
            return PutBatchResult(phys)
        codes = plan.codes
        if t.name != SCHEDULE_TOPIC and codes is not None and None not in plan.infos:
            codes = np.frombuffer(codes, dtype=np.int64)
        else:
            codes = None
        return batch_written(w, plan, phys, base, store_ts, plan.infos, codes)


def record_starts(phys: int, sizes: np.ndarray) -> np.ndarray:
    """Where each record of the batch starts, the first at phys."""
    starts = np.empty(len(sizes), dtype=np.int64)
    starts[0] = phys
    np.cumsum(sizes[:-1], out=starts[1:])
    starts[1:] += phys
    return starts


def batch_written(w, plan: BatchPlan, phys: int, base: int, store_ts: int, infos, codes) -> PutBatchResult:
    """After a producer batch is appended (under the put lock), by both encoders: the queue offset moves on,
    and the records go to the dispatch with their tagsCodes (computed here when `codes` is None)."""
    t, props_list, sizes = plan.topic, plan.props_list, plan.sizes
    n = len(sizes)
    starts = record_starts(phys, sizes)
    appended(w.state, w.commitlog, int(starts[-1]), store_ts, (t.name, plan.queue_id), base + n)
    if w.dispatch is not None:
        if codes is None:
            codes = np.array(
                [
                    tags_code(t.name, props, store_ts, plan.sys_flag, info, w.delay_levels)
                    for props, info in zip(props_list, infos)
                ],
                dtype=np.int64,
            )
        w.dispatch_batch(
            t.name,
            plan.queue_id,
            starts,
            sizes,
            codes,
            store_ts,
            base,
            plan.sys_flag,
            props_list,
            phys + plan.total,
            infos=infos,
        )
    return PutBatchResult(PutStatus.PUT_OK, starts, sizes, phys, plan.total, base, plan.store_host, store_ts)
