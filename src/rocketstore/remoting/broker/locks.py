"""Queue locks for orderly consumers (RocketMQ's RebalanceLockManager, AdminBrokerProcessor.lockBatchMQ /
unlockBatchMQ): LOCK_BATCH_MQ locks each queue of the request's mqSet for the client unless another client holds
it and has renewed it within 60 s (rocketmq.broker.rebalance.lockMaxLiveTime); the answer lists the queues the
client holds. UNLOCK_BATCH_MQ releases the client's own locks."""

from __future__ import annotations

import time

from .. import fastjson
from ..codes import RequestCode, ResponseCode
from ..command import response_to
from ..errors import RemotingProtocolError

LOCK_MAX_LIVE_MS = 60_000


def _now() -> int:
    return int(time.time() * 1000)


def _request(cmd) -> tuple[str, str, list[dict]]:
    body = fastjson.loads(cmd.body or b"{}")
    if not isinstance(body, dict) or not isinstance(body.get("mqSet", []), list):
        raise RemotingProtocolError("lock body is not a LockBatchRequestBody")
    mqs = [m for m in body.get("mqSet") or () if isinstance(m, dict)]
    return str(body.get("consumerGroup") or ""), str(body.get("clientId") or ""), mqs


def _key(mq: dict) -> tuple[str, str, int]:
    return str(mq.get("topic")), str(mq.get("brokerName")), int(mq.get("queueId") or 0)


class QueueLocks:
    def __init__(self):
        self.table: dict[str, dict[tuple[str, str, int], list]] = {}  # group -> mq -> [client id, last update]

    def handlers(self) -> dict:
        return {RequestCode.LOCK_BATCH_MQ: self.lock_batch, RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch}

    def try_lock(self, group: str, client_id: str, mqs: list[dict], now: int | None = None) -> list[dict]:
        now = _now() if now is None else now
        locks = self.table.setdefault(group, {})
        out = []
        for mq in mqs:
            entry = locks.get(_key(mq))
            if entry is None or entry[0] == client_id or now - entry[1] > LOCK_MAX_LIVE_MS:
                locks[_key(mq)] = [client_id, now]
                out.append(mq)
        return out

    def unlock(self, group: str, client_id: str, mqs: list[dict]) -> None:
        locks = self.table.get(group)
        for mq in mqs if locks is not None else ():
            entry = locks.get(_key(mq))
            if entry is not None and entry[0] == client_id:
                del locks[_key(mq)]

    async def lock_batch(self, cmd, conn):
        group, client_id, mqs = _request(cmd)
        locked = self.try_lock(group, client_id, mqs)
        mq_set = [fastjson.Bean(brokerName=m.get("brokerName"), queueId=m.get("queueId"), topic=m.get("topic"))
                  for m in locked]  # fmt: skip
        return response_to(cmd, ResponseCode.SUCCESS, body=fastjson.dumpb(fastjson.Bean(lockOKMQSet=mq_set)))

    async def unlock_batch(self, cmd, conn):
        group, client_id, mqs = _request(cmd)
        self.unlock(group, client_id, mqs)
        return response_to(cmd, ResponseCode.SUCCESS)
