"""The put path: validate -> assign queue offset -> encode -> append to the CommitLog -> dispatch.

Mirrors CommitLog.asyncPutMessage / asyncPutMessages: statuses instead of exceptions for bad input, queue
offsets taken under the put lock, one store timestamp per put (shared by a whole batch).
"""
from __future__ import annotations

import logging
import threading
import zlib

from .formats import properties as P
from .formats import record as R
from .log.commitlog import CommitLog, DoesNotFit
from .message import Message, PutBatchResult, PutResult, PutStatus
from .services.dispatch import DispatchRequest, tags_code_for
from .validation import topic_problem

log = logging.getLogger("rocketstore.put")
MAX_PROPERTIES = 32767
_NOT, _COMMIT = R.TRANSACTION_NOT_TYPE, R.TRANSACTION_COMMIT_TYPE


class MessageWriter:
    def __init__(self, config, commitlog: CommitLog, dispatch, dispatched_to=None):
        self.config = config
        self.commitlog = commitlog
        self.dispatch = dispatch            # called with each DispatchRequest under the lock, or None
        self.dispatched_to = dispatched_to  # told the end offset of what the put path dispatched
        self.lock = threading.RLock()
        self.queue_offsets: dict[tuple[str, int], int] = {}
        self.last_physical_offset = -1      # start of the last record this writer appended
        self.store_host = R.host_to_bytes(config.store_host)
        self.append_crc = config.enabled_append_prop_crc
        self.delay_levels = config.delay_levels()
        self.max_body = config.max_message_size
        self.max_record = config.max_message_size + 64 * 1024  # MessageExtEncoder reserves 64 KiB

    # -- checks shared by put and put_batch
    def _check(self, msg: Message, queue_id: int) -> PutStatus | None:
        problem = topic_problem(msg.topic, self.config.auto_message_version_on_topic_len)
        if problem or not isinstance(queue_id, int) or queue_id < 0:
            log.warning("put refused: %s", problem or f"queue id {queue_id!r} must be an int >= 0")
            return PutStatus.MESSAGE_ILLEGAL
        if msg.body is None or len(msg.body) > self.max_body:
            return PutStatus.MESSAGE_ILLEGAL
        return None

    def _born(self, msg: Message) -> tuple[bytes, int]:
        host = R.host_to_bytes(msg.born_host) if msg.born_host else self.store_host
        ts = msg.born_timestamp if msg.born_timestamp is not None else self.config.clock()
        return host, ts

    # -- one message
    def put(self, msg: Message, queue_id: int) -> PutResult:
        bad = self._check(msg, queue_id)
        if bad:
            return PutResult(bad)
        props = msg.properties_bytes(drop_crc=self.append_crc)
        if P.INNER_NUM.encode() + b"\x01" in props and not msg.sys_flag & R.INNER_BATCH_FLAG:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        if msg.sys_flag & R.INNER_BATCH_FLAG:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)  # inner batches need a BatchCQ topic
        stored_props = R.encode_properties(props, self.append_crc, single=True)
        if len(stored_props) > MAX_PROPERTIES:
            return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED)
        try:
            born_host, born_ts = self._born(msg)
        except ValueError as e:
            log.warning("put refused: %s", e)
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        topic = msg.topic.encode("utf-8")
        v2 = self.config.auto_message_version_on_topic_len and len(msg.topic) > R.MAX_TOPIC_BYTES_V1
        store_host = R.host_to_bytes(msg.store_host) if msg.store_host else self.store_host
        sys_flag = msg.sys_flag | (R.BORNHOST_V6_FLAG if len(born_host) == 20 else 0) \
            | (R.STOREHOSTADDRESS_V6_FLAG if len(store_host) == 20 else 0)
        body = bytes(msg.body)
        size = R.record_length(v2, sys_flag, len(body), len(topic), len(stored_props))
        if size > self.max_record:
            return PutResult(PutStatus.MESSAGE_ILLEGAL)
        crc = zlib.crc32(body) & 0x7FFFFFFF
        tran = sys_flag & R.TRANSACTION_ROLLBACK_TYPE
        counts = tran == _NOT or tran == _COMMIT
        key = (msg.topic, queue_id)
        with self.lock:
            qoff = self.queue_offsets.get(key, 0) if counts else 0
            store_ts = self.config.clock()

            def make(phys):
                return R.encode_record(
                    topic=topic, body=body, props=stored_props, queue_id=queue_id, flag=msg.flag,
                    sys_flag=sys_flag, born_timestamp=born_ts, born_host=born_host, store_timestamp=store_ts,
                    store_host=store_host, reconsume_times=msg.reconsume_times,
                    prepared_transaction_offset=msg.prepared_transaction_offset, queue_offset=qoff,
                    physical_offset=phys, v2=v2, body_crc_value=crc, append_crc=self.append_crc)
            try:
                phys = self.commitlog.append(size, make)
            except DoesNotFit as e:
                log.warning("put refused: %s", e)
                return PutResult(PutStatus.MESSAGE_ILLEGAL)
            except OSError as e:
                log.error("put failed: %s", e)
                return PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED)
            self.last_physical_offset = phys
            if counts:
                self.queue_offsets[key] = qoff + 1
            if self.dispatch is not None:
                pmap = P.parse_properties(props) if props else {}
                self.dispatch(DispatchRequest(
                    msg.topic, queue_id, phys, size,
                    tags_code_for(msg.topic, pmap, store_ts, sys_flag, self.delay_levels) if pmap else 0,
                    store_ts, qoff, pmap.get(P.KEYS) or "", pmap.get(P.UNIQ_KEY), sys_flag,
                    msg.prepared_transaction_offset, pmap))
                self.dispatched_to(phys + size)
        return PutResult(PutStatus.PUT_OK, phys, size, qoff, R.make_msg_id(store_host, phys), store_ts, 1)

    # -- a producer batch (putMessages): one record per message, all in one segment, all or nothing
    def put_batch(self, msgs: list[Message], queue_id: int) -> PutBatchResult:
        if not msgs:
            return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
        first = msgs[0]
        for m in msgs:
            bad = self._check(m, queue_id)
            if bad:
                return PutBatchResult(bad)
            if m.topic != first.topic:
                log.warning("put_batch refused: one batch holds topics %r and %r", first.topic, m.topic)
                return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
        if first.sys_flag & R.TRANSACTION_ROLLBACK_TYPE or first.sys_flag & R.INNER_BATCH_FLAG:
            return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)  # batches carry no transactions
        try:
            born_host, born_ts = self._born(first)
        except ValueError as e:
            log.warning("put_batch refused: %s", e)
            return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
        topic = first.topic.encode("utf-8")
        v2 = self.config.auto_message_version_on_topic_len and len(first.topic) > R.MAX_TOPIC_BYTES_V1
        store_host = R.host_to_bytes(first.store_host) if first.store_host else self.store_host
        sys_flag = first.sys_flag | (R.BORNHOST_V6_FLAG if len(born_host) == 20 else 0) \
            | (R.STOREHOSTADDRESS_V6_FLAG if len(store_host) == 20 else 0)
        items = []
        client_size = 0
        for m in msgs:
            props = m.properties_bytes(drop_crc=self.append_crc)
            pmap = P.parse_properties(props) if props else {}
            if P.DELAY in pmap and pmap[P.DELAY].strip() not in ("", "0"):
                return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)  # RocketMQ refuses delayed batches
            if len(props) > MAX_PROPERTIES:
                return PutBatchResult(PutStatus.PROPERTIES_SIZE_EXCEEDED)
            stored = R.encode_properties(props, self.append_crc, single=False)
            if len(stored) > MAX_PROPERTIES:
                return PutBatchResult(PutStatus.PROPERTIES_SIZE_EXCEEDED)
            body = bytes(m.body)
            size = R.record_length(v2, sys_flag, len(body), len(topic), len(stored))
            client_size += 20 + len(body) + 2 + len(props)
            items.append((m, body, stored, size, pmap, zlib.crc32(body) & 0x7FFFFFFF))
        if client_size > self.max_body:
            return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)  # the encoded batch is one "body" to RocketMQ
        total = sum(it[3] for it in items)
        key = (first.topic, queue_id)
        with self.lock:
            base_qoff = self.queue_offsets.get(key, 0)
            store_ts = self.config.clock()
            placed = []

            def make(phys):
                parts = []
                p = phys
                for i, (m, body, stored, size, _pm, crc) in enumerate(items):
                    parts.append(R.encode_record(
                        topic=topic, body=body, props=stored, queue_id=queue_id, flag=m.flag, sys_flag=sys_flag,
                        born_timestamp=born_ts, born_host=born_host, store_timestamp=store_ts,
                        store_host=store_host, reconsume_times=first.reconsume_times,
                        prepared_transaction_offset=0, queue_offset=base_qoff + i, physical_offset=p, v2=v2,
                        body_crc_value=crc, append_crc=self.append_crc))
                    placed.append(p)
                    p += size
                return b"".join(parts)
            try:
                phys = self.commitlog.append(total, make)
            except DoesNotFit as e:
                log.warning("put_batch refused: %s", e)
                return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
            except OSError as e:
                log.error("put_batch failed: %s", e)
                return PutBatchResult(PutStatus.CREATE_MAPPED_FILE_FAILED)
            self.queue_offsets[key] = base_qoff + len(items)
            self.last_physical_offset = placed[-1]
            results = []
            for i, ((m, body, stored, size, pmap, crc), p) in enumerate(zip(items, placed)):
                if self.dispatch is not None:
                    self.dispatch(DispatchRequest(
                        first.topic, queue_id, p, size,
                        tags_code_for(first.topic, pmap, store_ts, sys_flag, self.delay_levels) if pmap else 0,
                        store_ts, base_qoff + i, pmap.get(P.KEYS) or "", pmap.get(P.UNIQ_KEY), sys_flag, 0, pmap))
                results.append(PutResult(PutStatus.PUT_OK, p, size, base_qoff + i,
                                         R.make_msg_id(store_host, p), store_ts, 1))
            if self.dispatch is not None:
                self.dispatched_to(phys + total)
        return PutBatchResult(PutStatus.PUT_OK, results, phys, total, base_qoff, store_ts)
