"""Transactional messages as RocketMQ 5's broker keeps them (TransactionalMessageBridge, EndTransactionProcessor,
TransactionalMessageServiceImpl.check), one pending state per store whichever protocol a producer speaks: the
gRPC side (the proxy's SendMessage / EndTransaction / Telemetry: serve/transactions_grpc.py) and the remoting
broker (remoting/broker/transaction.py) share the instance `Transactions.shared(store)` gives, so a half message
sent over one protocol can be ended over the other. It knows neither protocol.

- A TRANSACTION message (sysFlag TRANSACTION_PREPARED_TYPE, TRAN_MSG=true) is stored as a half message: topic
  RMQ_SYS_TRANS_HALF_TOPIC, queue 0, its real topic and queue in REAL_TOPIC / REAL_QID, the transaction id in
  __transactionId__, the transaction bits of its sysFlag reset to NOT_TYPE (parseHalfMessageInner). Its real
  topic gets nothing yet. The transaction id the producer gets is the message's UNIQ_KEY (as the broker answers
  MessageClientIDSetter.getUniqID).
- COMMIT puts a new record on the real topic and queue (endMessageTransaction: the half message's body, flag,
  born time and host, properties; sysFlag with COMMIT_TYPE; PREPARED_TRANSACTION_OFFSET = the half record's
  commit log offset), then an op record; ROLLBACK writes the op record only. Op records
  (RMQ_SYS_TRANS_OP_HALF_TOPIC, queue 0, tag "d", body "<half queue offset>,") say a half message is done.
  A half message already ended is not ended again (RocketMQ's broker would put a committed one twice).
- A half message with no end after transactionTimeOut (or its CHECK_IMMUNITY_TIME_IN_SECONDS, if larger) is
  checked every transactionCheckInterval: each checker (one per protocol, `add_checker`) is offered it until
  one sends the check to a producer (gRPC: a RecoverOrphanedTransactionCommand over the Telemetry stream of a
  producer publishing its topic; remoting: CHECK_TRANSACTION_STATE to a producer of its group). After
  transactionCheckMax checks it is given up: copied to TRANS_CHECK_MAX_TIME_TOPIC (resolveDiscardMsg) and
  marked done. The three are broker.conf keys (BrokerConfig's defaults: 6 s, 30 s, 15).
- Restart: what is pending is rebuilt from the half and op queues. The group CID_RMQ_SYS_TRANS's offsets on
  them (consumerOffset.json, as the broker keeps them) say where the scan starts: the half queue's is the
  lowest pending half offset, the op queue's the first op record that may still matter.

Unlike the broker, a check does not put the half message back at the end of the half queue (which moves the
broker's check offset forward): a check names the half record itself, and the check count lives in memory and
starts again after a restart. A store RocketMQ's broker wrote is taken over with its counts: the copies its
checks wrote carry TRANSACTION_CHECK_TIMES, and a copy supersedes the earlier records of its transaction."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import random
import struct
import threading
import time
from collections.abc import Callable

from ..formats import properties as P
from ..formats import record as R
from ..message import GetStatus, Message, PutResult
from ..services.service_thread import ServiceThread

log = logging.getLogger("rocketstore.serve")

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SYS_GROUP = "CID_RMQ_SYS_TRANS"
REMOVE_TAG = "d"
OFFSET_SEPARATOR = ","
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
TRANSACTION_ID = "__transactionId__"
CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"

TRAN_BITS = R.TRANSACTION_ROLLBACK_TYPE  # the two transaction bits of sysFlag

# BrokerConfig's defaults (RocketMQ 5.x)
DEFAULT_TIMEOUT_MS = 6_000
DEFAULT_CHECK_INTERVAL_MS = 30_000
DEFAULT_CHECK_MAX = 15


def now_ms() -> int:
    return int(time.time() * 1000)


_now = now_ms


@dataclasses.dataclass
class PendingHalf:
    """A half message not ended yet."""

    tx_id: str
    half_offset: int  # queue offset in RMQ_SYS_TRANS_HALF_TOPIC queue 0
    phys: int  # commit log offset of the half record
    real_topic: str
    producer_group: str
    born_ms: int
    immunity_ms: int
    checks: int = 0
    last_check_ms: int = 0


# A checker is offered a half message due for a check (the pending state, the half record as stored) and
# says whether it sent the check to a producer.
Checker = Callable[[PendingHalf, object], bool]


@dataclasses.dataclass
class EndResult:
    """What ending a half message came to: `half` the record ended (None when nothing was done), `put` the
    commit's put on the real topic (None for a rollback or when the put was not tried), `problem` why not."""

    half: object = None
    put: PutResult | None = None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


_shared: dict[int, list] = {}  # id(store) -> [Transactions, users]
_shared_lock = threading.Lock()


class Transactions(ServiceThread):
    """The half messages of one store and their checks (TransactionalMessageCheckService: a round of checks
    every tick, a second at most). Thread-safe.

    Each protocol adds its own checker (add_checker): how it asks a producer about a half message."""

    name = "transaction-check"

    def __init__(self, store, extra: dict | None = None, on_change=None):
        super().__init__()
        extra = extra or {}
        self.store = store
        self.timeout_ms = int(extra.get("transactionTimeOut", DEFAULT_TIMEOUT_MS))
        self.check_interval_ms = int(extra.get("transactionCheckInterval", DEFAULT_CHECK_INTERVAL_MS))
        self.check_max = int(extra.get("transactionCheckMax", DEFAULT_CHECK_MAX))
        self._lock = threading.RLock()
        self.pending: dict[int, PendingHalf] = {}  # half offset -> half
        self.by_tx: dict[str, list[int]] = {}  # transaction id -> its pending half offsets (a resend adds one)
        self.by_phys: dict[int, int] = {}  # commit log offset -> half offset
        self._ops: list[tuple[int, list[int]]] = []  # (op offset, half offsets it ends), from the op scan start
        self._checkers: list[Checker] = []
        # the pause before each round (and after one that failed): a check falls due within it
        tick_ms = min(self.check_interval_ms, self.timeout_ms, 1000)
        self.initial_delay_s = self.error_delay_s = max(0.05, tick_ms / 1000.0)
        self._rebuild()

    # ------------------------------------------------------------------ one per store
    @classmethod
    def shared(cls, store, extra: dict | None = None) -> "Transactions":
        """The store's instance, made and started by its first user; each user calls release() when done."""
        with _shared_lock:
            entry = _shared.get(id(store))
            if entry is None or entry[0].store is not store:
                entry = _shared[id(store)] = [cls(store, extra), 0]
                entry[0].start()
            entry[1] += 1
            return entry[0]

    def release(self) -> None:
        """A user of shared() is done: the last one stops the checks."""
        with _shared_lock:
            entry = _shared.get(id(self.store))
            if entry is not None and entry[0] is self:
                entry[1] -= 1
                if entry[1] > 0:
                    return
                del _shared[id(self.store)]
        self.stop()

    def add_checker(self, checker: Checker) -> Checker:
        with self._lock:
            self._checkers.append(checker)
        return checker

    def remove_checker(self, checker: Checker) -> None:
        with self._lock:
            if checker in self._checkers:
                self._checkers.remove(checker)

    # ------------------------------------------------------------------ state
    def _scan(self, topic: str, start: int):
        off = start
        while True:
            r = self.store.get(SYS_GROUP, topic, 0, off, max_count=64)
            if r.status is GetStatus.FOUND:
                yield from r.messages
                off = r.next_begin_offset
                continue
            if r.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.NO_MATCHED_MESSAGE) and r.next_begin_offset > off:
                off = r.next_begin_offset
                continue
            return

    def _start(self, topic: str) -> int:
        committed = self.store.consumer_offsets.query(SYS_GROUP, topic, 0)
        return max(committed, self.store.min_offset(topic, 0), 0)

    def _rebuild(self) -> None:
        removed: set[int] = set()
        for m in self._scan(OP_TOPIC, self._start(OP_TOPIC)):
            if m.tags != REMOVE_TAG:
                continue
            offsets = _parse_op_body(m.body)
            removed.update(offsets)
            self._ops.append((m.queue_offset, offsets))
        for m in self._scan(HALF_TOPIC, self._start(HALF_TOPIC)):
            if m.queue_offset in removed:
                continue
            checks = _int(m.properties.get(CHECK_TIMES))
            if checks:
                self._supersede(m.properties)
            self._add(m.queue_offset, m.physical_offset, m.properties, m.born_timestamp, checks)
        if self.pending:
            log.info("transactions: %d half message(s) pending", len(self.pending))
        self._commit_offsets()

    def _supersede(self, props: dict) -> None:
        """A half record with TRANSACTION_CHECK_TIMES is the copy RocketMQ's broker writes of a half message as
        it checks it (putBackHalfMsgQueue; the check names the copy): the earlier records of its transaction are
        done, and only the copy is checked from here on. Its check offset goes past them only at the end of a
        check round, so a broker stopped mid-round leaves both beyond it."""
        tx_id = props.get(TRANSACTION_ID) or props.get(P.UNIQ_KEY) or ""
        for off in list(self.by_tx.get(tx_id, ())):
            self._forget(self.pending[off])

    def _add(self, half_offset: int, phys: int, props: dict, born_ms: int, checks: int = 0) -> None:
        """A pending half message; `checks`: the checks it had (RocketMQ's broker counts them in the record)."""
        tx_id = props.get(TRANSACTION_ID) or props.get(P.UNIQ_KEY) or ""
        immunity = self.timeout_ms
        try:
            immunity = max(immunity, int(props.get(CHECK_IMMUNITY, "")) * 1000)
        except ValueError:
            pass
        self.pending[half_offset] = PendingHalf(
            tx_id, half_offset, phys, props.get(REAL_TOPIC, ""), props.get(P.PGROUP, ""), born_ms, immunity, checks
        )
        self.by_tx.setdefault(tx_id, []).append(half_offset)
        self.by_phys[phys] = half_offset

    def _forget(self, h: PendingHalf) -> None:
        self.pending.pop(h.half_offset, None)
        self.by_phys.pop(h.phys, None)
        offsets = self.by_tx.get(h.tx_id)
        if offsets is not None:
            if h.half_offset in offsets:
                offsets.remove(h.half_offset)
            if not offsets:
                del self.by_tx[h.tx_id]

    def _commit_offsets(self) -> None:
        half_low = min(self.pending) if self.pending else max(self.store.max_offset(HALF_TOPIC, 0), 0)
        # op records may be skipped next time once every half offset they end is below half_low
        op_low = None
        keep = []
        for op_off, offsets in self._ops:
            if op_low is None and all(o < half_low for o in offsets):
                continue
            if op_low is None:
                op_low = op_off
            keep.append((op_off, offsets))
        self._ops = keep
        if op_low is None:
            op_low = max(self.store.max_offset(OP_TOPIC, 0), 0)
        offsets = self.store.consumer_offsets
        if offsets.query(SYS_GROUP, HALF_TOPIC, 0) != half_low:
            offsets.commit(SYS_GROUP, HALF_TOPIC, {0: half_low})
        if offsets.query(SYS_GROUP, OP_TOPIC, 0) != op_low:
            offsets.commit(SYS_GROUP, OP_TOPIC, {0: op_low})

    # ------------------------------------------------------------------ prepare, find, end
    def prepare(self, msg: Message, queue_id: int, to_string=None) -> PutResult:
        """Store a transactional message (its properties in msg.properties) as a half message
        (parseHalfMessageInner). `to_string(props)`: the properties string to store, for a side that orders them
        as its broker does (the remoting broker's HashMap order); else the dict's order."""
        props = dict(msg.properties or {})
        uniq = props.get(P.UNIQ_KEY)
        if uniq:
            props[TRANSACTION_ID] = uniq
        props[REAL_TOPIC] = msg.topic
        props[REAL_QID] = str(queue_id)
        half = dataclasses.replace(msg, topic=HALF_TOPIC, properties=props, sys_flag=msg.sys_flag & ~TRAN_BITS)
        if to_string is not None:
            half = dataclasses.replace(half, properties=None, raw_properties=to_string(props))
        with self._lock:
            r = self.store.put(half, 0)
            if r.ok:
                self._add(
                    r.queue_offset,
                    r.physical_offset,
                    props,
                    half.born_timestamp if half.born_timestamp is not None else _now(),
                )
        return r

    def by_id(self, tx_id: str) -> PendingHalf | None:
        """The newest pending half message of a transaction id."""
        with self._lock:
            offsets = self.by_tx.get(tx_id)
            return self.pending.get(offsets[-1]) if offsets else None

    def at(self, phys: int) -> PendingHalf | None:
        """The pending half message whose record starts at a commit log offset."""
        with self._lock:
            off = self.by_phys.get(phys)
            return None if off is None else self.pending.get(off)

    def finish(self, h: PendingHalf, commit: bool, on_commit=None) -> EndResult:
        """COMMIT (the half message put on its real topic, then the op record) or ROLLBACK (the op record).
        `on_commit(half)` may refuse the commit after the half record is read: it returns a problem or None."""
        with self._lock:
            if self.pending.get(h.half_offset) is not h:
                return EndResult(problem="the transaction is ended already")
            half = self.store.look(h.phys)
            if half is None:
                return EndResult(problem="cannot read the prepared message")
            put = None
            if commit:
                put = self.store.put(_committed(half), int(half.properties.get(REAL_QID, "0") or 0))
                if not put.ok:
                    return EndResult(half, put, f"commit failed, putStatus={put.status.name}")
            if not self._write_op(h):
                return EndResult(half, put, "cannot write the transaction op record")
            self._forget(h)
            self._commit_offsets()
        log.debug("transaction %s %s", h.tx_id, "committed" if commit else "rolled back")
        return EndResult(half, put)

    def _write_op(self, h: PendingHalf) -> bool:
        op = Message(
            topic=OP_TOPIC,
            body=f"{h.half_offset}{OFFSET_SEPARATOR}".encode(),
            properties={"TAGS": REMOVE_TAG, P.UNIQ_KEY: _new_uniq()},
            sys_flag=0,
        )
        r = self.store.put(op, 0)
        if r.ok:
            self._ops.append((r.queue_offset, [h.half_offset]))
        return r.ok

    # ------------------------------------------------------------------ checks
    def do_round(self) -> float:
        self.check_once()
        return self.initial_delay_s

    def check_once(self, now: int | None = None) -> int:
        """One pass over the pending half messages: those past their immunity and not checked within the check
        interval are checked (or given up after check_max checks). Returns how many checks were sent."""
        now = _now() if now is None else now
        sent = 0
        with self._lock:
            due = [
                h
                for h in self.pending.values()
                if now - h.born_ms > h.immunity_ms and now - h.last_check_ms >= self.check_interval_ms
            ]
            for h in sorted(due, key=lambda h: h.half_offset):
                if h.checks >= self.check_max:
                    self._discard(h)
                    continue
                half = self.store.look(h.phys)
                if half is None:
                    continue
                h.checks += 1
                h.last_check_ms = now
                if any(checker(h, half) for checker in list(self._checkers)):
                    sent += 1
                else:
                    log.info(
                        "transaction %s: no producer of %s (group %s) online to check it",
                        h.tx_id,
                        h.real_topic,
                        h.producer_group,
                    )
        return sent

    def _discard(self, h: PendingHalf) -> None:
        """resolveDiscardMsg: the half message goes to TRANS_CHECK_MAX_TIME_TOPIC, and is done."""
        half = self.store.look(h.phys)
        if half is not None:
            props = dict(half.properties)
            props[CHECK_TIMES] = str(h.checks)
            self.store.put(
                Message(
                    topic=CHECK_MAX_TIME_TOPIC,
                    body=half.body or b"",
                    properties=props,
                    flag=half.flag,
                    sys_flag=half.sys_flag,
                    born_timestamp=half.born_timestamp,
                    born_host=half.born_host,
                    reconsume_times=half.reconsume_times,
                ),
                0,
            )
        log.warning("transaction %s of %s: no answer after %d checks, given up", h.tx_id, h.real_topic, h.checks)
        if self._write_op(h):
            self._forget(h)
            self._commit_offsets()

    # ------------------------------------------------------------------ inspection
    def pending_ids(self) -> list[str]:
        with self._lock:
            return [h.tx_id for h in sorted(self.pending.values(), key=lambda h: h.half_offset)]


def _committed(half) -> Message:
    """endMessageTransaction: the real topic's record of a committed half message. Its properties are the half
    message's string as stored: the broker computes the string before clearing REAL_TOPIC / REAL_QID / TRAN_MSG
    from the map, and the store writes the string."""
    return Message(
        topic=half.properties.get(REAL_TOPIC),
        body=half.body or b"",
        raw_properties=half.properties_raw,
        flag=half.flag,
        sys_flag=(half.sys_flag & ~TRAN_BITS) | R.TRANSACTION_COMMIT_TYPE,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        reconsume_times=half.reconsume_times,
        prepared_transaction_offset=half.physical_offset,
    )


def _int(text) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


def _parse_op_body(body: bytes | None) -> list[int]:
    out = []
    for part in (body or b"").decode("utf-8", "replace").split(OFFSET_SEPARATOR):
        part = part.strip()
        if part.lstrip("-").isdigit():
            out.append(int(part))
    return out


_counter = itertools.count(random.randrange(1 << 16))
_PREFIX = struct.pack(">4sHI", bytes([127, 0, 0, 1]), os.getpid() & 0xFFFF, random.getrandbits(32))


def _new_uniq() -> str:
    """A UNIQ_KEY for an op record, laid out like MessageClientIDSetter's (32 upper-case hex characters)."""
    return (_PREFIX + struct.pack(">IH", _now() & 0xFFFFFFFF, next(_counter) & 0xFFFF)).hex().upper()
