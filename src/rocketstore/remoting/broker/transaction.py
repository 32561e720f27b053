"""Transactional messages over the remoting protocol, on the store's shared pending state (broker/transaction.py,
the gRPC side's too: a half message sent over one protocol may be ended over the other):

- END_TRANSACTION (37) as EndTransactionProcessor answers it: the header (EndTransactionRequestHeader:
  producerGroup, tranStateTableOffset, commitLogOffset, commitOrRollback, fromTransactionCheck, msgId,
  transactionId), NOT_TYPE (the producer does not know yet) answered by nothing, COMMIT / ROLLBACK of the half
  message whose record starts at commitLogOffset after checkPrepareMessage's checks (its PGROUP is the
  producerGroup, its half queue offset the tranStateTableOffset); a commit's put answered as sendFinalMessage.
  The Java and C++ producers send it oneway.
- The check-back (AbstractTransactionalMessageCheckListener.sendCheckMessage, Broker2Client
  .checkProducerTransactionState): a oneway CHECK_TRANSACTION_STATE (39) to one producer connection of the half
  message's group (ProducerManager.getAvailableChannel: round robin over the group's live connections), its header
  a CheckTransactionStateRequestHeader, its body the half message as MessageDecoder.encode writes it, with its real
  topic and queue and TRANSACTION_CHECK_TIMES. The producer answers with END_TRANSACTION (fromTransactionCheck)."""

from __future__ import annotations

import asyncio
import itertools
import logging

from ...formats import properties as P
from ...formats import record as R
from ...message import PutStatus
from ...broker.transaction import CHECK_IMMUNITY, CHECK_TIMES, HALF_TOPIC, REAL_QID, REAL_TOPIC, PendingHalf, now_ms
from .. import headers
from ..codes import RequestCode, ResponseCode
from ..command import RemotingCommand, response_to
from ..errors import HeaderError
from . import properties as BP

log = logging.getLogger("rocketstore.remoting.broker")

NOT_TYPE, COMMIT_TYPE, ROLLBACK_TYPE = R.TRANSACTION_NOT_TYPE, R.TRANSACTION_COMMIT_TYPE, R.TRANSACTION_ROLLBACK_TYPE

END_REQUIRED = {"producerGroup": "str", "tranStateTableOffset": "long", "commitLogOffset": "long",
                "commitOrRollback": "int", "msgId": "str"}  # fmt: skip
END_OPTIONAL = {"fromTransactionCheck": "bool", "transactionId": "str", "topic": "str"}

NOT_FOUND = "Find prepared transaction message failed"


def read_end_header(cmd: RemotingCommand) -> dict:
    """EndTransactionRequestHeader, with its checkFields: commitOrRollback is one of the three types."""
    h = headers.read(cmd, END_REQUIRED, END_OPTIONAL)
    if h["commitOrRollback"] not in (NOT_TYPE, COMMIT_TYPE, ROLLBACK_TYPE):
        raise HeaderError("commitOrRollback field wrong")
    h["fromTransactionCheck"] = bool(h["fromTransactionCheck"])
    return h


def final_put_answer(status: PutStatus, max_message_size: int) -> tuple[int, str | None]:
    """sendFinalMessage: the code and remark of a commit's put (its own remarks, not SendMessageProcessor's)."""
    if status in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT,
                  PutStatus.SLAVE_NOT_AVAILABLE):  # fmt: skip
        return ResponseCode.SUCCESS, None
    if status is PutStatus.CREATE_MAPPED_FILE_FAILED:
        return ResponseCode.SYSTEM_ERROR, "Create mapped file failed."
    if status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
        return ResponseCode.MESSAGE_ILLEGAL, (
            "The message is illegal, maybe msg body or properties length not matched. msg body length limit "
            f"{max_message_size}B, msg properties length limit 32KB."
        )
    if status is PutStatus.SERVICE_NOT_AVAILABLE:
        return ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."
    if status is PutStatus.OS_PAGE_CACHE_BUSY:
        return ResponseCode.SYSTEM_ERROR, "OS page cache busy, please try another machine"
    if status is PutStatus.UNKNOWN_ERROR:
        return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"
    return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"


def encode_check_body(half, real_topic: str, real_queue_id: int, properties: str) -> bytes:
    """MessageDecoder.encode(msgExt, false) of a half message about to be checked: the record layout with the
    V1 magic and a one-byte topic length, size computed (storeSize 0), the real topic and queue, the half
    record's own queue offset, commit log offset, sysFlag, times, hosts and body."""
    topic = real_topic.encode()
    return R.encode_record(
        topic=topic[:255],
        body=half.body or b"",
        props=properties.encode(),
        queue_id=real_queue_id,
        flag=half.flag,
        sys_flag=half.sys_flag & ~(R.BORNHOST_V6_FLAG | R.STOREHOSTADDRESS_V6_FLAG),
        born_timestamp=half.born_timestamp,
        born_host=R.host_to_bytes(half.born_host),
        store_timestamp=half.store_timestamp,
        store_host=R.host_to_bytes(half.store_host),
        reconsume_times=half.reconsume_times,
        prepared_transaction_offset=half.prepared_transaction_offset,
        queue_offset=half.queue_offset,
        physical_offset=half.physical_offset,
        v2=False,
        body_crc_value=half.body_crc,
    )


class TransactionProcessor:
    """END_TRANSACTION, and the remoting side's checker of the shared pending state."""

    def __init__(self, broker):
        self.broker = broker
        self.store = broker.store
        self.tx = None  # the shared pending state, from start()
        self.loop: asyncio.AbstractEventLoop | None = None  # the broker's, set at start: checks are sent there
        self._rr = itertools.count()

    def handlers(self) -> dict:
        return {RequestCode.END_TRANSACTION: self.end_transaction}

    def start(self, transactions) -> None:
        self.tx = transactions
        self.loop = asyncio.get_running_loop()
        self.tx.add_checker(self.check)

    def stop(self) -> None:
        if self.tx is not None:
            self.tx.remove_checker(self.check)

    # ------------------------------------------------------------------ END_TRANSACTION
    async def end_transaction(self, cmd: RemotingCommand, conn):
        h = read_end_header(cmd)
        kind = h["commitOrRollback"]
        if kind == NOT_TYPE:  # the producer does not know yet: no answer, the half message waits for a check
            log.info("transaction %s of %s: the producer %s does not know its state yet%s", h["msgId"],
                     h["producerGroup"], conn.remote, " (check)" if h["fromTransactionCheck"] else "")  # fmt: skip
            return None
        code, remark = await asyncio.to_thread(self._end, h, kind == COMMIT_TYPE)
        if code == ResponseCode.SUCCESS and kind == COMMIT_TYPE:
            self.broker.arrived()
        return response_to(cmd, code, remark)

    def _end(self, h: dict, commit: bool) -> tuple[int, str | None]:
        """commitMessage / rollbackMessage, rejectCommitOrRollback, checkPrepareMessage, then the end."""
        pending = self.tx.at(h["commitLogOffset"])
        if pending is None:
            return self._not_pending(h)
        if self._too_late(h, pending):
            log.warning("transaction %s: end from the producer after its check immunity time, left to the check",
                        pending.tx_id)  # fmt: skip
            return ResponseCode.ILLEGAL_OPERATION, None
        if pending.producer_group != h["producerGroup"]:
            return ResponseCode.SYSTEM_ERROR, "The producer group wrong"
        if pending.half_offset != h["tranStateTableOffset"]:
            return ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong"
        r = self.tx.finish(pending, commit)
        if r.ok:
            return ResponseCode.SUCCESS, None
        if r.put is not None and not r.put.ok:
            return final_put_answer(r.put.status, self.store.config.max_message_size)
        if r.half is None and r.problem.startswith("the transaction is ended"):
            return ResponseCode.SUCCESS, None  # ended meanwhile: nothing left to do
        return ResponseCode.SYSTEM_ERROR, r.problem

    def _not_pending(self, h: dict) -> tuple[int, str | None]:
        """No pending half message there: one ended already is answered as done (the broker would put a commit
        twice), anything else as the broker answers a record it cannot use."""
        half = self.store.look(h["commitLogOffset"]) if h["commitLogOffset"] >= 0 else None
        if half is None or half.topic != HALF_TOPIC:
            return ResponseCode.SYSTEM_ERROR, NOT_FOUND
        if half.properties.get(P.PGROUP) != h["producerGroup"]:
            return ResponseCode.SYSTEM_ERROR, "The producer group wrong"
        if half.queue_offset != h["tranStateTableOffset"]:
            return ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong"
        log.info("transaction %s ended already: nothing to do", h["msgId"])
        return ResponseCode.SUCCESS, None

    def _too_late(self, h: dict, pending: PendingHalf) -> bool:
        """rejectCommitOrRollback: a producer's own end (not a check's answer) of a half message with
        CHECK_IMMUNITY_TIME_IN_SECONDS, past that time, is refused: its check decides."""
        if h["fromTransactionCheck"]:
            return False
        half = self.store.look(pending.phys)
        text = None if half is None else half.properties.get(CHECK_IMMUNITY)
        if not text:
            return False
        try:
            seconds = int(text)
        except ValueError:
            return False
        immunity_ms = self.tx.timeout_ms if seconds == -1 else seconds * 1000
        return now_ms() - half.born_timestamp > immunity_ms

    # ------------------------------------------------------------------ the check-back
    def check(self, pending: PendingHalf, half) -> bool:
        """The checker the shared state calls (from its thread): a oneway CHECK_TRANSACTION_STATE to a producer
        connection of the half message's group, sent on the broker's loop."""
        loop = self.loop
        conn = self.broker.clients.producer_connection(pending.producer_group, next(self._rr))
        if conn is None or loop is None or loop.is_closed():
            return False
        cmd = check_request(half, pending, self.broker.settings.brokerName)
        asyncio.run_coroutine_threadsafe(conn.oneway(cmd), loop)
        log.info("transaction %s of %s: checking with producer %s (check %d)", pending.tx_id,
                 pending.producer_group, conn.remote, pending.checks)  # fmt: skip
        return True


def check_request(half, pending: PendingHalf, broker_name: str) -> RemotingCommand:
    """CHECK_TRANSACTION_STATE for one half message: CheckTransactionStateRequestHeader's fields as the check
    listener fills them (topic: the half topic, msgId and transactionId: the UNIQ_KEY, offsetMsgId: the half
    record's offset msgId), the body as Broker2Client writes it."""
    props = dict(half.properties)
    props[CHECK_TIMES] = str(pending.checks)  # needDiscard counted this check on the message
    uniq = props.get(P.UNIQ_KEY)
    ext = headers.write(
        topic=HALF_TOPIC,
        tranStateTableOffset=half.queue_offset,
        commitLogOffset=half.physical_offset,
        msgId=uniq,
        transactionId=uniq,
        offsetMsgId=half.msg_id,
        brokerName=broker_name,
    )
    body = encode_check_body(half, props.get(REAL_TOPIC, ""), _int(props.get(REAL_QID)), BP.to_string(props))
    return RemotingCommand(RequestCode.CHECK_TRANSACTION_STATE, ext_fields=ext, body=body)


def _int(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0
