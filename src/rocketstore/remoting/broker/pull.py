"""PULL_MESSAGE (11) as RocketMQ's PullMessageProcessor answers it: the checks (the subscription group, found or
auto-created by subscriptions.py, and its consumeEnable / consumeBroadcastEnable; topic, queue id, subscription:
the request's own with FLAG_SUBSCRIPTION, else the one the group's heartbeat registered), the store's get with
the subscription's tags (or its SQL92 expression, with enablePropertyFilter), the get's status as the response
code (PULL_NOT_FOUND, PULL_OFFSET_MOVED, PULL_RETRY_IMMEDIATELY, with GetMessageStatus's name as the remark), the
header (nextBeginOffset, minOffset, maxOffset, suggestWhichBrokerId, topicSysFlag, groupSysFlag), and the body:
the found records' bytes as the CommitLog holds them, one after the other. A pull with FLAG_SUSPEND that finds
nothing is held (hold.py) for suspendTimeoutMillis, then answered after one more look. FLAG_COMMIT_OFFSET commits
commitOffset first.

LITE_PULL_MESSAGE (361), what RocketMQ 5.x's DefaultLitePullConsumer pulls with (PullSysFlag's lite pull flag), is
served by the same processor, as RocketMQ's broker registers it: the same header, checks, long polling (a lite pull
sets FLAG_SUSPEND with brokerSuspendMaxTimeMillis, 20 s) and answer, refused with NO_PERMISSION when broker.conf sets
`litePullMessageEnable=false`. A lite pull commits no offset (no FLAG_COMMIT_OFFSET): its consumer sends
UPDATE_CONSUMER_OFFSET (offsets.py).

A queue whose consumer offset was reset on the broker (useServerSideResetOffset, reset.py) answers its next pull
with PULL_OFFSET_MOVED, remark OFFSET_RESET, nextBeginOffset the reset offset, as PullMessageProcessor does; the
client moves there (Java's push consumer drops the queue, commits the offset and takes it up again). A pull held
on the queue is answered so at once. Unlike RocketMQ, that pull's commitOffset (the consumer's old position) is
not committed over the reset: it would move the group back until the client commits the new offset."""

from __future__ import annotations

import asyncio

from ...filter import FilterSyntaxError
from ...filter import compile as compile_sql
from ...message import GetStatus
from .. import headers
from ..codes import RequestCode, ResponseCode
from ..command import response_to
from .topics import FAQ

FLAG_COMMIT_OFFSET, FLAG_SUSPEND, FLAG_SUBSCRIPTION = 0x1, 0x2, 0x4
PERM_READ = 4
SHORT_POLLING_MS = 1000  # BrokerConfig.shortPollingTimeMills

REQUIRED = {"consumerGroup": "str", "topic": "str", "queueId": "int", "queueOffset": "long", "maxMsgNums": "int",
            "sysFlag": "int", "commitOffset": "long", "suspendTimeoutMillis": "long", "subVersion": "long"}  # fmt: skip
OPTIONAL = {"subscription": "str", "expressionType": "str", "maxMsgBytes": "int"}
_SPEC = headers.Spec(REQUIRED, OPTIONAL)

CODES = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_RESET: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


def response_code(status: GetStatus, requested_offset: int) -> int:
    if status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if requested_offset != 0 else ResponseCode.PULL_NOT_FOUND
    return CODES[status]


class PullProcessor:
    def __init__(self, broker):
        self.broker = broker
        self.store = broker.store

    def handlers(self) -> dict:
        return {RequestCode.PULL_MESSAGE: self.pull, RequestCode.LITE_PULL_MESSAGE: self.pull}

    def _subscription(self, cmd, h):
        """(expression type, expression) or the refusal."""
        if h["sysFlag"] & FLAG_SUBSCRIPTION:
            expr_type = (h["expressionType"] or "TAG").upper()
            expr = h["subscription"] or "*"
        else:
            sub = self.broker.clients.subscription(h["consumerGroup"], h["topic"])
            if self.broker.clients.consumers.get(h["consumerGroup"]) is None:
                return response_to(
                    cmd, ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist" + FAQ
                )
            refused = self.broker.subscription_groups.broadcast_refusal(
                cmd, h["consumerGroup"], self.broker.clients.consumers[h["consumerGroup"]].message_model
            )
            if refused is not None:
                return refused
            if sub is None:
                return response_to(
                    cmd, ResponseCode.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist" + FAQ
                )
            expr_type = str(sub.get("expressionType") or "TAG").upper()
            expr = sub.get("subString") or "*"
        if expr_type == "TAG":
            return "TAG", expr.strip() or "*"
        if expr_type != "SQL92" or not self.broker.settings.enablePropertyFilter:
            return response_to(
                cmd, ResponseCode.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {expr_type}"
            )
        try:
            compile_sql(expr)
        except FilterSyntaxError:
            return response_to(cmd, ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        return "SQL92", expr

    async def pull(self, cmd, conn):
        h = _SPEC.read(cmd)
        settings = self.broker.settings
        if not settings.brokerPermission & PERM_READ:
            return response_to(
                cmd, ResponseCode.NO_PERMISSION, f"the broker[{settings.brokerIP1}] pulling message is forbidden"
            )
        if cmd.code == RequestCode.LITE_PULL_MESSAGE and not settings.litePullMessageEnable:
            remark = f"the broker[{settings.brokerIP1}] for lite pull consumer is forbidden"
            return response_to(cmd, ResponseCode.NO_PERMISSION, remark)
        group, topic, q = h["consumerGroup"], h["topic"], h["queueId"]
        refused = self.broker.subscription_groups.pull_refusal(cmd, group)  # found or auto-created
        if refused is not None:
            return refused
        tc = self.broker.topics.get(topic)
        if tc is None:
            remark = f"topic[{topic}] not exist, apply first please! {FAQ}"
            return response_to(cmd, ResponseCode.TOPIC_NOT_EXIST, remark)
        if not tc.perm & PERM_READ:
            return response_to(cmd, ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        if q < 0 or q >= tc.read_queue_nums:
            remark = (f"queueId[{q}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}] "
                      f"consumer:[{conn.remote}]")  # fmt: skip
            return response_to(cmd, ResponseCode.INVALID_PARAMETER, remark)
        sub = self._subscription(cmd, h)
        if not isinstance(sub, tuple):
            return sub
        moved = self._reset_answer(cmd, h)
        if moved is not None:
            return moved
        if h["sysFlag"] & FLAG_COMMIT_OFFSET:
            self.broker.offsets.commit(group, topic, q, h["commitOffset"])
        response = await self._look(cmd, h, sub)
        if response.code != ResponseCode.PULL_NOT_FOUND or not h["sysFlag"] & FLAG_SUSPEND:
            return response
        polling_ms = h["suspendTimeoutMillis"] if settings.longPollingEnable else SHORT_POLLING_MS
        held = await self.broker.hold.wait(topic, q, h["queueOffset"], max(polling_ms, 0) / 1000, conn, group)
        if held is None:  # maxHeldPulls are held already: a client backs off from SYSTEM_BUSY (3 s for Java's)
            remark = f"[HOLD_FULL] {self.broker.hold.max_held} pulls are held already (maxHeldPulls), try again later"
            return response_to(cmd, ResponseCode.SYSTEM_BUSY, remark)
        return self._reset_answer(cmd, h) or await self._look(cmd, h, sub)

    def _reset_answer(self, cmd, h):
        """PULL_OFFSET_MOVED to a pending reset offset of the queue (forgotten as it is answered), or None."""
        if not self.broker.settings.useServerSideResetOffset:
            return None
        group, topic, q = h["consumerGroup"], h["topic"], h["queueId"]
        offset = self.broker.offsets.take_reset(group, topic, q)
        if offset is None:
            return None
        ext = self._header(group, offset, self.store.min_offset(topic, q), self.store.max_offset(topic, q))
        return response_to(cmd, ResponseCode.PULL_OFFSET_MOVED, GetStatus.OFFSET_RESET.name, ext)

    async def _look(self, cmd, h, sub):
        if sub[0] == "TAG":
            # on the loop: the get holds the GIL from start to end (in C or in Python, page faults included), so a
            # worker thread would block the loop as long, and its trip there and back costs the loop more CPU than a
            # get of 32 messages
            r, body, records = self._get(h, sub)
        else:
            # a SQL92 filter may read many records for few matches: in a worker, where the GIL's switch interval
            # lets the loop in between
            r, body, records = await asyncio.to_thread(self._get, h, sub)
        code = response_code(r.status, h["queueOffset"])
        ext = self._header(h["consumerGroup"], r.next_begin_offset, r.min_offset, r.max_offset)
        response = response_to(cmd, code, r.status.name, ext, body)
        response.records = records
        return response

    def _header(self, group: str, next_begin: int, lo: int, hi: int) -> dict:
        """headers.write's text of PullMessageResponseHeader, spelled out: one per pull."""
        return {
            "suggestWhichBrokerId": "0",
            "nextBeginOffset": str(next_begin),
            "minOffset": str(lo),
            "maxOffset": str(hi),
            "topicSysFlag": "0",
            "groupSysFlag": str(self.broker.subscription_groups.group_sys_flag(group)),
        }

    def _get(self, h, sub):
        """The store's get and, when it found messages (the only status answered SUCCESS), their records and how
        many they are."""
        kind, expr = sub
        tags, sql = (expr, None) if kind == "TAG" else (None, expr)
        max_count = max(h["maxMsgNums"], 0)
        r = self.store.get(
            h["consumerGroup"], h["topic"], h["queueId"], h["queueOffset"], max_count, tags, 0, None, sql
        )
        return (r, *self._records(r.messages)) if r.status is GetStatus.FOUND else (r, b"", 0)

    def _records(self, messages) -> tuple[bytes, int]:
        read = self.store.record_bytes
        parts = []
        for m in messages:
            record = m.record()  # the native get's copy, if it made one
            if record is None:
                record = read(m.physical_offset, m.size)
            if record is not None:
                parts.append(record)
        return b"".join(parts), len(parts)  # one copy, out of the mapped CommitLog
