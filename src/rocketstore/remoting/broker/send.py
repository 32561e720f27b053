"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310, the same header under the short names a..n) and SEND_BATCH_MESSAGE
(320), and SEND_MESSAGE with `batch=true` (what the C++ core sends for a batch), as RocketMQ's
SendMessageProcessor answers them: msgCheck (topic name, forbidden system topics, auto-creation from TBW102, the
queue id), the properties the broker adds (UNIQ_KEY when missing, CLUSTER; properties.py), a DELAY level turning
the message into SCHEDULE_TOPIC_XXXX's queue level-1 with REAL_TOPIC / REAL_QID (schedule.py delivers it), and
the put's status as RocketMQ's response codes. A send to %RETRY%group goes through send_back.route_send first
(handleRetryAndDLQ). The answer's header: msgId (the offset msgId; a batch's ids
joined by commas), queueId, queueOffset, transactionId (the UNIQ_KEY).

A transactional (prepared) message (TRAN_MSG=true, not a redelivered delayed one) becomes a half message of the
store's shared transaction state (TransactionalMessageService.prepareMessage; transaction.py ends and checks it):
the answer names its half record (msgId, and queueOffset in RMQ_SYS_TRANS_HALF_TOPIC, which the producer echoes as
commitLogOffset and tranStateTableOffset in END_TRANSACTION). Its DELAY, if any, is not applied (the Java and C++
producers clear it). With rejectTransactionMessage it is refused as RocketMQ refuses it."""

from __future__ import annotations

import asyncio

from ...config.store_config import SYNC_FLUSH
from ...errors import CorruptDataError
from ...formats import properties as P

from ...message import Message, PutStatus
from .. import headers
from ..codes import ResponseCode
from ..command import RemotingCommand, response_to
from . import properties as BP
from .send_back import max_delay_level, to_schedule
from .topics import FAQ, RETRY_PREFIX, send_refusal
from ...engine import decode_messages

REQUIRED = {"producerGroup": "str", "topic": "str", "defaultTopic": "str", "defaultTopicQueueNums": "int",
            "queueId": "int", "sysFlag": "int", "bornTimestamp": "long", "flag": "int"}  # fmt: skip
OPTIONAL = {"properties": "str", "reconsumeTimes": "int", "unitMode": "bool", "batch": "bool",
            "maxReconsumeTimes": "int", "brokerName": "str"}  # fmt: skip
V2_NAMES = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
            "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
            "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName"}  # fmt: skip
_LONG_TO_SHORT = {v: k for k, v in V2_NAMES.items()}
# laid out once: a send's header is read on every request (the V2 one hands its short names back as the long ones)
_SPEC = headers.Spec(REQUIRED, OPTIONAL)
_SPEC_V2 = headers.Spec({_LONG_TO_SHORT[k]: t for k, t in REQUIRED.items()},
                        {_LONG_TO_SHORT[k]: t for k, t in OPTIONAL.items()}, V2_NAMES)  # fmt: skip

REGION_ID = "DefaultRegion"  # BrokerConfig.regionId
TRAN_PREPARED = "TRAN_MSG"


def read_header(cmd: RemotingCommand, v2: bool) -> dict:
    return (_SPEC_V2 if v2 else _SPEC).read(cmd)


# the statuses of a put that stored the message, and their response codes
_STORED = {PutStatus.PUT_OK: ResponseCode.SUCCESS, PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
           PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
           PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE}  # fmt: skip


def _message(cmd, conn, h: dict, topic: str, **props) -> Message:
    """The Message a single send puts: the request's body and header fields, the sender as born host; `props`:
    its raw_properties or its properties."""
    return Message(
        topic,
        cmd.body or b"",
        flag=h["flag"],
        sys_flag=h["sysFlag"],
        born_timestamp=h["bornTimestamp"],
        born_host=conn.remote,
        reconsume_times=h["reconsumeTimes"] or 0,
        **props,
    )


def put_status_answer(status: PutStatus, max_message_size: int) -> tuple[int, str | None]:
    """handlePutMessageResult: the response code and remark of a put's status."""
    ok = _STORED.get(status)
    if ok is not None:
        return ok, None
    if status is PutStatus.CREATE_MAPPED_FILE_FAILED:
        return ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."
    if status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
        return ResponseCode.MESSAGE_ILLEGAL, (
            "the message is illegal, maybe msg body or properties length not matched. msg body length limit "
            f"{max_message_size}B, msg properties length limit 32KB."
        )
    if status is PutStatus.SERVICE_NOT_AVAILABLE:
        return ResponseCode.SERVICE_NOT_AVAILABLE, (
            "service not available now. It may be caused by one of the following reasons: the broker's disk is "
            "full, messages are put to the slave, message store has been shut down, etc."
        )
    if status is PutStatus.OS_PAGE_CACHE_BUSY:
        return ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
    if status is PutStatus.UNKNOWN_ERROR:
        return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"
    return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"


class SendProcessor:
    def __init__(self, broker):
        self.broker = broker
        self.store = broker.store
        self.topics = broker.topics
        # an asynchronously flushed put returns in microseconds: on the event loop it costs less than the hand-off
        # to a worker thread and back (which was most of a send's CPU, bench_remoting); a synchronously flushed
        # one waits for the disk, so it goes to a thread and the loop serves other connections meanwhile
        self.inline = self.store.config.flush_disk_type != SYNC_FLUSH

    async def _put(self, fn, *args):
        return fn(*args) if self.inline else await asyncio.to_thread(fn, *args)

    def handlers(self) -> dict:
        from ..codes import RequestCode

        return {RequestCode.SEND_MESSAGE: self.send, RequestCode.SEND_MESSAGE_V2: self.send_v2,
                RequestCode.SEND_BATCH_MESSAGE: self.send_batch}  # fmt: skip

    async def send(self, cmd, conn):
        h = read_header(cmd, v2=False)
        return regional(await (self._batch(cmd, conn, h) if h["batch"] else self._single(cmd, conn, h)))

    async def send_v2(self, cmd, conn):
        h = read_header(cmd, v2=True)
        return regional(await (self._batch(cmd, conn, h) if h["batch"] else self._single(cmd, conn, h)))

    async def send_batch(self, cmd, conn):
        return regional(await self._batch(cmd, conn, read_header(cmd, v2=True)))

    # ------------------------------------------------------------------ checks
    def _check(self, cmd, conn, h):
        """msgCheck: (None, topic config) or (the refusal, None)."""
        topic = h["topic"]
        refusal = send_refusal(topic)
        if refusal is not None:
            return response_to(cmd, ResponseCode[refusal[0]], refusal[1]), None
        tc = self.topics.get(topic)
        if tc is None:
            tc = self.topics.create_for_send(topic, h["defaultTopic"], h["defaultTopicQueueNums"])
            if tc is None and topic.startswith(RETRY_PREFIX):
                tc = self.topics.create_retry(topic[len(RETRY_PREFIX) :])
            if tc is None:
                remark = f"topic[{topic}] not exist, apply first please!{FAQ}"
                return response_to(cmd, ResponseCode.TOPIC_NOT_EXIST, remark), None
        if h["queueId"] >= max(tc.write_queue_nums, tc.read_queue_nums):
            remark = f"request queueId[{h['queueId']}] is illegal, {describe(tc)} Producer: {conn.remote}"
            return response_to(cmd, ResponseCode.INVALID_PARAMETER, remark), None
        return None, tc

    def _queue(self, h, tc) -> int:
        q = h["queueId"]
        return q if q >= 0 else self.broker.random_queue(tc.write_queue_nums)

    def answer(self, cmd, r, msg_id, queue_id, queue_offset, uniq, stored):
        """The answer to a put's result `r`; when the messages were stored it carries `stored` (topic, properties,
        count) for the metrics."""
        code, remark = put_status_answer(r.status, self.store.config.max_message_size)
        if code not in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                        ResponseCode.SLAVE_NOT_AVAILABLE):  # fmt: skip
            return response_to(cmd, code, remark)
        ext = headers.write(msgId=msg_id, queueId=queue_id, queueOffset=queue_offset, transactionId=uniq)
        response = response_to(cmd, code, None, ext)
        response.stored = stored
        return response

    # ------------------------------------------------------------------ one message
    async def _single(self, cmd, conn, h):
        refused, tc = self._check(cmd, conn, h)
        if refused is not None:
            return refused
        queue_id = self._queue(h, tc)
        props = BP.parse(h["properties"])
        # handleRetryAndDLQ (send_back.py): a client's own retry past the max goes to %DLQ%group instead
        refused, topic, put_queue = self.broker.send_back.route_send(cmd, h, props, queue_id)
        if refused is not None:
            return refused
        # a half message: TRAN_MSG=true, unless a redelivered delayed one (clients before 4.6.1)
        prepared = props.get(TRAN_PREPARED, "").lower() == "true" and not (
            h["reconsumeTimes"] and _delay_level(props) > 0
        )
        if prepared and self.broker.settings.rejectTransactionMessage:
            remark = f"the broker[{self.broker.settings.brokerIP1}] sending transaction message is forbidden"
            return response_to(cmd, ResponseCode.NO_PERMISSION, remark)
        uniq = props.get(P.UNIQ_KEY) or None
        if uniq is None:
            uniq = props[P.UNIQ_KEY] = BP.new_uniq_id()
        props[BP.CLUSTER] = self.broker.settings.brokerClusterName
        if prepared:
            return await self._prepare(cmd, conn, h, queue_id, props, uniq)
        level = _delay_level(props)
        if level > 0:  # HookUtils.transformDelayLevelMessage: past the configured levels is the last one
            topic, schedule_queue = to_schedule(props, topic, put_queue, level, max_delay_level(self.store))
            level = schedule_queue + 1
        msg = _message(cmd, conn, h, topic, raw_properties=BP.to_string(props))
        # the answer names the queue asked for (a delayed message's queue offset is its schedule queue's)
        put_queue = level - 1 if level > 0 else put_queue
        r = await self._put(self.store.put, msg, put_queue)
        if r.ok:
            self.broker.arrived(msg.topic, put_queue, r)
        return self.answer(cmd, r, r.msg_id, queue_id, r.queue_offset, uniq, (h["topic"], props, 1))

    async def _prepare(self, cmd, conn, h, queue_id, props, uniq):
        msg = _message(cmd, conn, h, h["topic"], properties=props)
        r = await self._put(self.broker.transactions.prepare, msg, queue_id, BP.to_string)
        return self.answer(cmd, r, r.msg_id, queue_id, r.queue_offset, uniq, (h["topic"], props, 1))

    # ------------------------------------------------------------------ a batch
    async def _batch(self, cmd, conn, h):
        refused, tc = self._check(cmd, conn, h)
        if refused is not None:
            return refused
        queue_id = self._queue(h, tc)
        topic = h["topic"]
        if len(topic) > 127:
            return response_to(cmd, ResponseCode.MESSAGE_ILLEGAL, f"message topic length too long {len(topic)}")
        if topic.startswith(RETRY_PREFIX):
            return response_to(cmd, ResponseCode.MESSAGE_ILLEGAL, f"batch request does not support retry group {topic}")
        try:
            inner = decode_messages(cmd.body or b"")
        except CorruptDataError as e:
            return response_to(cmd, ResponseCode.MESSAGE_ILLEGAL, f"the batch body does not decode: {e}")
        if not inner:
            return response_to(cmd, ResponseCode.MESSAGE_ILLEGAL, "the batch holds no message")
        msgs = [
            Message(
                topic,
                m.body,
                flag=m.flag,
                sys_flag=h["sysFlag"],
                born_timestamp=h["bornTimestamp"],
                born_host=conn.remote,
                reconsume_times=h["reconsumeTimes"] or 0,
                raw_properties=bytes(m.properties_raw or b""),
            )
            for m in inner
        ]
        r = await self._put(self.store.put_batch, msgs, queue_id)
        if not r.ok:
            return self.answer(cmd, r, None, queue_id, None, None, None)
        self.broker.arrived(topic, queue_id, r)
        props = BP.parse(h["properties"])
        return self.answer(cmd, r, ",".join(r.msg_ids), queue_id, r.queue_offset, props.get(P.UNIQ_KEY),
                            (topic, props, len(msgs)))  # fmt: skip


def regional(response: RemotingCommand) -> RemotingCommand:
    """preSend: every answer to a send whose header parsed names the region (BrokerConfig.regionId) and whether
    tracing is on (traceOn); the Java client copies them into its SendResult."""
    response.ext_fields = {**(response.ext_fields or {}), "MSG_REGION": REGION_ID, "TRACE_ON": "true"}
    return response


def _delay_level(props: dict) -> int:
    try:
        return int(props.get(P.DELAY) or 0)
    except ValueError:
        return 0


def describe(tc) -> str:
    """TopicConfig.toString, as the queue id refusal quotes it."""
    return (
        f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
        f"writeQueueNums={tc.write_queue_nums}, perm={_perm(tc.perm)}, topicFilterType={tc.topic_filter_type}, "
        f"topicSysFlag={tc.topic_sys_flag}, order={'true' if tc.order else 'false'}, attributes={tc.attributes}]"
    )


def _perm(perm: int) -> str:
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")
