"""Consumer offsets and queue offsets (ConsumerManageProcessor, AdminBrokerProcessor): QUERY_CONSUMER_OFFSET,
UPDATE_CONSUMER_OFFSET, GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME.

Committed offsets are the store's (config/consumerOffset.json, the table the gRPC side commits to as well).
Commits are kept in memory first and written together every flushConsumerOffsetInterval (broker.conf, 5 s, as
RocketMQ persists its offset table) and at close; a query sees the newest commit at once.

Pending resets (ConsumerOffsetManager's resetOffsetTable, with useServerSideResetOffset, RocketMQ 5's default): a
reset (reset.py) commits the new offset and keeps it for the queue's next pull, which answers it as OFFSET_RESET
and forgets it (`take_reset`). Until then the group's commits of that queue are ignored (a consumer still holding
its old position would undo the reset) and a query answers the reset offset. Kept in memory, as RocketMQ keeps
them: a restart forgets them, and the committed offset stays."""

from __future__ import annotations

import asyncio
import logging
import threading

from .. import headers
from ..codes import RequestCode, ResponseCode
from ..command import response_to

log = logging.getLogger("rocketstore.remoting.broker")


class Offsets:
    def __init__(self, broker):
        self.broker = broker
        self.store = broker.store
        self._pending: dict[tuple[str, str], dict[int, int]] = {}
        self._resets: dict[tuple[str, str], dict[int, int]] = {}
        self._lock = threading.Lock()

    def handlers(self) -> dict:
        return {RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
                RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
                RequestCode.GET_MAX_OFFSET: self.max_offset, RequestCode.GET_MIN_OFFSET: self.min_offset,
                RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
                RequestCode.GET_EARLIEST_MSG_STORETIME: self.earliest_time}  # fmt: skip

    # ------------------------------------------------------------------ the table
    def query(self, group: str, topic: str, queue_id: int) -> int:
        with self._lock:
            pending = self._resets.get((group, topic), {}).get(queue_id)
            if pending is None:
                pending = self._pending.get((group, topic), {}).get(queue_id)
        return pending if pending is not None else self.store.consumer_offsets.query(group, topic, queue_id)

    def pending_groups(self) -> dict[str, set[str]]:
        """group -> topics with commits not yet written to the store (the metrics' and the console's lags)."""
        with self._lock:
            keys = list(self._pending) + list(self._resets)
        out: dict[str, set[str]] = {}
        for group, topic in keys:
            out.setdefault(group, set()).add(topic)
        return out

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self._pending.setdefault((group, topic), {})[queue_id] = offset

    def assign_reset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """assignResetOffset: committed now, and handed to the queue's next pull."""
        with self._lock:
            self._resets.setdefault((group, topic), {})[queue_id] = offset
            self._pending.setdefault((group, topic), {})[queue_id] = offset

    def has_reset(self, group: str, topic: str, queue_id: int) -> bool:
        with self._lock:
            return queue_id in self._resets.get((group, topic), {})

    def take_reset(self, group: str, topic: str, queue_id: int) -> int | None:
        """queryThenEraseResetOffset: the queue's pending reset offset, forgotten as it is handed out."""
        if not self._resets:  # every pull asks: without a pending reset anywhere, no lock taken
            return None
        with self._lock:
            resets = self._resets.get((group, topic))
            if not resets or queue_id not in resets:
                return None
            offset = resets.pop(queue_id)
            if not resets:
                del self._resets[(group, topic)]
            return offset

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        """The group's offsets for a topic, committed with the pending ones over them (cloneOffset's copy)."""
        table = self.store.consumer_offsets.table.get(f"{topic}@{group}", {})
        out = {int(q): o for q, o in dict(table).items()}
        with self._lock:
            out.update(self._pending.get((group, topic), {}))
        return out

    def topics_of(self, group: str) -> list[str]:
        """whichTopicByConsumer: the topics the group has offsets for, committed or pending."""
        with self._lock:
            pending = {t for g, t in self._pending if g == group}
        return sorted(pending | set(self.store.consumer_offsets.groups().get(group, ())))

    def groups_of(self, topic: str) -> list[str]:
        """whichGroupByTopic: the groups with offsets for the topic, committed or pending."""
        with self._lock:
            pending = {g for g, t in self._pending if t == topic}
        committed = {g for g, topics in self.store.consumer_offsets.groups().items() if topic in topics}
        return sorted(pending | committed)

    def forget_topic(self, topic: str) -> None:
        """Pending commits for a topic being deleted are dropped (the flush would write them back)."""
        with self._lock:
            for table in (self._pending, self._resets):
                for key in [k for k in table if k[1] == topic]:
                    del table[key]

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for (group, topic), offsets in pending.items():
            try:
                self.store.consumer_offsets.commit(group, topic, offsets)
            except Exception:  # the offsets stay for the next flush
                log.exception("cannot persist the offsets of %s for %s", group, topic)
                with self._lock:
                    newer = self._pending.setdefault((group, topic), {})
                    for q, o in offsets.items():
                        newer.setdefault(q, o)

    async def flush_loop(self, interval_s: float = 5.0) -> None:
        while True:
            await asyncio.sleep(interval_s)
            if self._pending:
                await asyncio.to_thread(self.flush)

    # ------------------------------------------------------------------ requests
    async def query_consumer_offset(self, cmd, conn):
        h = headers.read(cmd, {"consumerGroup": "str", "topic": "str", "queueId": "int"},
                         {"setZeroIfNotFound": "bool"})  # fmt: skip
        offset = self.query(h["consumerGroup"], h["topic"], h["queueId"])
        if offset >= 0:
            return response_to(cmd, ResponseCode.SUCCESS, None, headers.write(offset=offset))
        if h["setZeroIfNotFound"] is False:
            return response_to(
                cmd, ResponseCode.QUERY_NOT_FOUND, "Not found, do not set to zero, maybe this group boot first"
            )
        topic, q = h["topic"], h["queueId"]
        # minOffset <= 0 and the message at offset 0 in memory (checkInMemByConsumeOffset): every message of the
        # queue is at hand, so a new group starts at 0; rocketstore has it when the queue holds offset 0
        if self.store.min_offset(topic, q) <= 0 and self.store.max_offset(topic, q) > 0:
            return response_to(cmd, ResponseCode.SUCCESS, None, headers.write(offset=0))
        return response_to(
            cmd, ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
        )

    async def update_consumer_offset(self, cmd, conn):
        h = headers.read(cmd, {"consumerGroup": "str", "topic": "str"}, {"queueId": "int", "commitOffset": "long"})
        group, topic = h["consumerGroup"], h["topic"]
        if group not in self.broker.subscription_groups:
            return response_to(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} not exist!")
        if self.broker.topics.get(topic) is None:
            return response_to(cmd, ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} not exist!")
        if h["queueId"] is None:
            return response_to(cmd, ResponseCode.INVALID_PARAMETER, f"QueueId is null, topic is {topic}")
        if h["commitOffset"] is None:
            return response_to(cmd, ResponseCode.INVALID_PARAMETER, f"Offset is null, topic is {topic}")
        if self.broker.settings.useServerSideResetOffset and self.has_reset(group, topic, h["queueId"]):
            log.info("Update consumer offset is rejected because of previous offset-reset. Group=%s, Topic=%s, "
                     "QueueId=%s, Offset=%s", group, topic, h["queueId"], h["commitOffset"])  # fmt: skip
            return response_to(cmd, ResponseCode.SUCCESS, "Offset has been previously reset")
        self.commit(group, topic, h["queueId"], h["commitOffset"])
        return response_to(cmd, ResponseCode.SUCCESS)

    async def max_offset(self, cmd, conn):
        h = headers.read(cmd, {"topic": "str", "queueId": "int"}, {"committed": "bool"})
        offset = await asyncio.to_thread(self.store.max_offset, h["topic"], h["queueId"])
        return response_to(cmd, ResponseCode.SUCCESS, None, headers.write(offset=offset))

    async def min_offset(self, cmd, conn):
        h = headers.read(cmd, {"topic": "str", "queueId": "int"})
        offset = await asyncio.to_thread(self.store.min_offset, h["topic"], h["queueId"])
        return response_to(cmd, ResponseCode.SUCCESS, None, headers.write(offset=offset))

    async def search_offset(self, cmd, conn):
        h = headers.read(cmd, {"topic": "str", "queueId": "int", "timestamp": "long"}, {"boundaryType": "str"})
        boundary = "upper" if (h["boundaryType"] or "").upper() == "UPPER" else "lower"
        offset = await asyncio.to_thread(self.store.offset_by_time, h["topic"], h["queueId"], h["timestamp"], boundary)
        return response_to(cmd, ResponseCode.SUCCESS, None, headers.write(offset=offset))

    async def earliest_time(self, cmd, conn):
        h = headers.read(cmd, {"topic": "str", "queueId": "int"})
        ts = await asyncio.to_thread(self.store.earliest_message_time, h["topic"], h["queueId"])
        return response_to(cmd, ResponseCode.SUCCESS, None, headers.write(timestamp=ts))
