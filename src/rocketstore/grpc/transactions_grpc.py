"""The gRPC side of transactional messages (the proxy's EndTransactionActivity and its Telemetry check-backs) over
the broker's shared transaction state (broker/transaction.py)."""

from __future__ import annotations

import itertools
import logging

from ..broker.transaction import REAL_QID, Checker, PendingHalf, Transactions
from . import convert as C
from .protocol import definition_pb2 as pb
from .protocol import service_pb2 as spb

log = logging.getLogger("rocketstore.serve")

_UNKNOWN = "transaction {} not found (ended already or unknown)"


def end_transaction(tx: Transactions, topic: str, tx_id: str, resolution: int, from_check: bool) -> tuple[int, str]:
    """EndTransaction: the half message committed or rolled back; (code, message) to answer."""
    h = tx.by_id(tx_id)
    if h is None:
        return pb.Code.INVALID_TRANSACTION_ID, _UNKNOWN.format(tx_id)
    if h.real_topic and h.real_topic != topic:
        return pb.Code.INVALID_TRANSACTION_ID, f"transaction {tx_id} does not belong to topic {topic}"
    if resolution not in (pb.TransactionResolution.COMMIT, pb.TransactionResolution.ROLLBACK):
        return pb.Code.OK, "OK"  # UNKNOWN: still pending, checked again later
    r = tx.finish(h, resolution == pb.TransactionResolution.COMMIT)
    if not r.ok:
        if r.half is None and r.problem.startswith("the transaction is ended"):
            return pb.Code.INVALID_TRANSACTION_ID, _UNKNOWN.format(tx_id)
        return pb.Code.INTERNAL_SERVER_ERROR, r.problem
    log.debug("transaction %s ended over gRPC%s", tx_id, " (check)" if from_check else "")
    return pb.Code.OK, "OK"


def grpc_checker(producers) -> Checker:
    """The check-back: a RecoverOrphanedTransactionCommand into the Telemetry outbox of a producer publishing the
    half message's topic (round robin over them); `producers(topic)` gives their outboxes."""
    turns = itertools.count()

    def check(h: PendingHalf, half) -> bool:
        outboxes = producers(h.real_topic)
        if not outboxes:
            return False
        msg = C.to_v2(half, h.real_topic)
        msg.system_properties.queue_id = int(half.properties.get(REAL_QID, "0") or 0)
        recover = spb.RecoverOrphanedTransactionCommand(message=msg, transaction_id=h.tx_id)
        outboxes[next(turns) % len(outboxes)].put(spb.TelemetryCommand(recover_orphaned_transaction_command=recover))
        return True

    return check
