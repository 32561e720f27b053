"""Consumer offset resets and their admin relatives, as RocketMQ's AdminBrokerProcessor answers mqadmin:
INVOKE_BROKER_TO_RESET_OFFSET (222: `resetOffsetByTime`, `skipAccumulatedMessage` with timestamp -1),
CLONE_GROUP_OFFSET (314, `cloneGroupOffset`) and QUERY_CONSUME_TIME_SPAN (303, DefaultMQAdminExt's
queryConsumeTimeSpan).

A reset is answered as RocketMQ 5's broker answers it by default (useServerSideResetOffset=true,
AdminBrokerProcessor.resetOffsetInner): the topic and the subscription group must exist; every read queue's offset
for the timestamp (the queue's max offset for a negative one), or the one queue named (queueId, with its offset
checked against the queue's range, else the timestamp's: mqadmin resetOffsetByTime -b -q), is committed and kept
as the queue's pending reset (offsets.py), which its next pull answers with PULL_OFFSET_MOVED (pull.py); isForce
plays no part, and no consumer need be online. The answer is the ResetOffsetBody of the queues reset.

With useServerSideResetOffset=false (broker.conf) it is answered as Broker2Client.resetOffset does: each write
queue's offset for the timestamp (the maximum offset for -1; 0 for a queue with none), kept only where it moves
the group back unless `isForce`; the group's consumers told with a oneway RESET_CONSUMER_CLIENT_OFFSET carrying a
ResetOffsetBody (a ResetOffsetBodyForC when the admin speaks C++), and the same body answered. A group with no
committed offset for a queue answers SYSTEM_ERROR; a group with no consumer online answers CONSUMER_NOT_ONLINE, on
which mqadmin falls back to the old reset (GET_CONSUME_STATS, SEARCH_OFFSET_BY_TIMESTAMP, UPDATE_CONSUMER_OFFSET,
all served in offsets.py and admin.py). Beyond Broker2Client, the new offsets are also committed here at once: the
clients commit them again when they take the request, and a client that never does leaves the group's committed
offsets right all the same."""

from __future__ import annotations

import asyncio
import logging
import time

from .. import fastjson, headers
from ..codes import LanguageCode, RequestCode, ResponseCode
from ..command import RemotingCommand, response_to
from .admin_bodies import _object_keyed, _queue_key

log = logging.getLogger("rocketstore.remoting.broker")

V3_0_7_SNAPSHOT = 28  # MQVersion.Version's ordinal: clients from here take RESET_CONSUMER_CLIENT_OFFSET


def reset_offset_body(topic: str, broker_name: str, offsets: dict[int, int]) -> bytes:
    """ResetOffsetBody: offsetTable keyed by MessageQueue objects (fastjson's object keys)."""
    rows = [(_queue_key(topic, broker_name, q), o) for q, o in sorted(offsets.items())]
    return ('{"offsetTable":' + _object_keyed(rows) + "}").encode()


def reset_offset_body_for_c(topic: str, broker_name: str, offsets: dict[int, int]) -> bytes:
    """ResetOffsetBodyForC: offsetTable as a list of MessageQueueForC."""
    table = [
        fastjson.Bean(brokerName=broker_name, offset=o, queueId=q, topic=topic) for q, o in sorted(offsets.items())
    ]
    return fastjson.dumpb(fastjson.Bean(offsetTable=table))


def java_date(ms: int) -> str:
    """UtilAll.formatDate(new Date(ms), "yyyy-MM-dd HH:mm:ss,SSS") in the broker's time zone."""
    t = time.localtime(ms // 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", t) + f",{ms % 1000:03d}"


def time_span_body(topic: str, broker_name: str, rows: list[tuple[int, int, int, int, int]]) -> bytes:
    """QueryConsumeTimeSpanBody: consumeTimeSpanSet of QueueTimeSpan, with the getters fastjson writes too
    (minTimeStampStr, maxTimeStampStr, consumeTimeStampStr). rows: (queueId, min, max, consume, delayTime)."""
    spans = [
        fastjson.Bean(
            consumeTimeStamp=consume,
            consumeTimeStampStr=java_date(consume),
            delayTime=delay,
            maxTimeStamp=hi,
            maxTimeStampStr=java_date(hi),
            messageQueue=fastjson.Bean(brokerName=broker_name, queueId=q, topic=topic),
            minTimeStamp=lo,
            minTimeStampStr=java_date(lo),
        )
        for q, lo, hi, consume, delay in rows
    ]
    return fastjson.dumpb(fastjson.Bean(consumeTimeSpanSet=spans))


class ResetProcessor:
    def __init__(self, broker):
        self.broker = broker
        self.store = broker.store

    def handlers(self) -> dict:
        return {RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
                RequestCode.CLONE_GROUP_OFFSET: self.clone_group_offset,
                RequestCode.QUERY_CONSUME_TIME_SPAN: self.consume_time_span}  # fmt: skip

    # ------------------------------------------------------------------ INVOKE_BROKER_TO_RESET_OFFSET
    def _reset_table(self, group: str, topic: str, write_queues: int, timestamp: int, force: bool):
        """The offsets Broker2Client.resetOffset hands out, or None when the group has no offset for a queue."""
        table = {}
        for q in range(write_queues):
            consumer_offset = self.broker.offsets.query(group, topic, q)
            if consumer_offset == -1:
                return None
            if timestamp == -1:
                target = self.store.max_offset(topic, q)
            else:
                target = self.store.offset_by_time(topic, q, timestamp)
            target = max(target, 0)
            table[q] = target if force or target < consumer_offset else consumer_offset
        return table

    async def reset_offset(self, cmd, conn):
        h = headers.read(cmd, {"group": "str", "topic": "str", "timestamp": "long"},
                         {"isForce": "bool", "queueId": "int", "offset": "long"})  # fmt: skip
        group, topic, timestamp, force = h["group"], h["topic"], h["timestamp"], bool(h["isForce"])
        log.info("[reset-offset] reset offset started by %s. topic=%s, group=%s, timestamp=%s, isForce=%s",
                 conn.remote, topic, group, timestamp, force)  # fmt: skip
        if self.broker.settings.useServerSideResetOffset:
            queue_id = h["queueId"] if h["queueId"] is not None else -1
            return await self._reset_on_broker(cmd, group, topic, queue_id, timestamp, h["offset"])
        return await self._reset_by_clients(cmd, group, topic, timestamp, force)

    async def _reset_by_clients(self, cmd, group: str, topic: str, timestamp: int, force: bool):
        """Broker2Client.resetOffset: the offsets computed here, told to every consumer of the group online."""
        tc = self.broker.topics.get(topic)
        if tc is None:
            return response_to(
                cmd,
                ResponseCode.TOPIC_NOT_EXIST,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}",
            )
        table = await asyncio.to_thread(self._reset_table, group, topic, tc.write_queue_nums, timestamp, force)
        if table is None:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
        broker_name = self.broker.settings.brokerName
        g = self.broker.clients.consumers.get(group)
        channels = list(g.channels.values()) if g is not None else []
        if not channels:
            return response_to(
                cmd,
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} Timestamp: {timestamp}",
            )
        old = [ch for ch in channels if ch.version < V3_0_7_SNAPSHOT]
        if old:
            return response_to(
                cmd,
                ResponseCode.SYSTEM_ERROR,
                f"the client does not support this feature. version={old[0].version}",
            )
        for q, offset in table.items():
            self.broker.offsets.commit(group, topic, q, offset)
        self._tell_all(channels, group, topic, timestamp, table, cmd.language in (LanguageCode.CPP, "CPP"))
        return response_to(cmd, ResponseCode.SUCCESS, None, None, reset_offset_body(topic, broker_name, table))

    def _tell_all(self, channels, group: str, topic: str, timestamp: int, table: dict[int, int], for_c: bool):
        broker_name = self.broker.settings.brokerName
        if for_c:
            client_body = reset_offset_body_for_c(topic, broker_name, table)
        else:
            client_body = reset_offset_body(topic, broker_name, table)
        fields = headers.write(topic=topic, group=group, timestamp=timestamp, isForce=False)
        for ch in channels:
            req = RemotingCommand(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext_fields=dict(fields), body=client_body)
            self.broker.spawn(self._tell(ch, req, topic, group))

    def _target(self, topic: str, queue_id: int, timestamp: int) -> int:
        """searchOffsetByTimestamp: the queue's max offset for a negative timestamp, else the timestamp's."""
        if timestamp < 0:
            return self.store.max_offset(topic, queue_id)
        return self.store.offset_by_time(topic, queue_id, timestamp)

    async def _reset_on_broker(self, cmd, group: str, topic: str, queue_id: int, timestamp: int, offset: int | None):
        """resetOffsetInner: the queues' new offsets committed and kept for their next pulls (pull.py)."""
        tc = self.broker.topics.get(topic)
        if tc is None:
            log.warning("Reset offset failed, topic does not exist. topic=%s, group=%s", topic, group)
            return response_to(cmd, ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} does not exist")
        if group not in self.broker.subscription_groups:
            log.warning("Reset offset failed, group does not exist. topic=%s, group=%s", topic, group)
            return response_to(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} does not exist")
        store = self.store
        table = {}
        if queue_id >= 0:
            if offset is not None and offset != -1:
                lo = await asyncio.to_thread(store.min_offset, topic, queue_id)
                hi = await asyncio.to_thread(store.max_offset, topic, queue_id)
                if (lo >= 0 and offset < lo) or offset > hi + 1:
                    remark = f"Target offset {offset} not in consume queue range [{lo}-{hi}]"
                    return response_to(cmd, ResponseCode.SYSTEM_ERROR, remark)
            else:
                offset = await asyncio.to_thread(self._target, topic, queue_id, timestamp)
            table[queue_id] = offset
        else:
            for q in range(tc.read_queue_nums):
                table[q] = await asyncio.to_thread(self._target, topic, q, timestamp)
        if not table:
            log.warning("Reset offset aborted: no queues to reset")
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, "No queues to reset.")
        for q, o in table.items():
            if o >= 0:  # assignResetOffset refuses a negative offset
                self.broker.offsets.assign_reset(group, topic, q, o)
                self.broker.hold.release(topic, q, group)
        body = reset_offset_body(topic, self.broker.settings.brokerName, table)
        log.info("Reset offset, topic=%s, group=%s, queues=%s", topic, group, body.decode())
        return response_to(cmd, ResponseCode.SUCCESS, None, None, body)

    @staticmethod
    async def _tell(ch, req, topic: str, group: str) -> None:
        try:
            await ch.connection.oneway(req)
            log.info("[reset-offset] reset offset success. topic=%s, group=%s, clientId=%s", topic, group, ch.client_id)
        except Exception as e:  # a closed channel: the client is gone
            log.error("[reset-offset] reset offset exception. topic=%s, group=%s ,error=%s", topic, group, e)

    # ------------------------------------------------------------------ CLONE_GROUP_OFFSET
    def _clone(self, src: str, dest: str, topic: str | None, offline: bool) -> None:
        """cloneGroupOffset: RocketMQ loops over the source's topics when none is given but copies
        "<requestHeader.getTopic()>@src" each time, i.e. nothing without a topic; so does this."""
        if not (topic and topic.strip()):
            return
        if self.broker.topics.get(topic) is None:
            log.warning("[cloneGroupOffset], topic config not exist, %s", topic)
            return
        g = self.broker.clients.consumers.get(src)
        if not offline and g is not None and g.subscriptions and topic not in g.subscriptions:
            log.warning("cloneGroupOffset: topic does not exist in consumer group's subscription, topic=%s, "
                        "consumer group=%s", topic, src)  # fmt: skip
            return
        offsets = self.broker.offsets.offsets_of(src, topic)
        if offsets:  # the source's offsets for the topic, copied over the destination's
            for q, o in offsets.items():
                self.broker.offsets.commit(dest, topic, q, o)

    async def clone_group_offset(self, cmd, conn):
        h = headers.read(cmd, {"srcGroup": "str", "destGroup": "str"}, {"topic": "str", "offline": "bool"})
        await asyncio.to_thread(self._clone, h["srcGroup"], h["destGroup"], h["topic"], bool(h["offline"]))
        return response_to(cmd, ResponseCode.SUCCESS)

    # ------------------------------------------------------------------ QUERY_CONSUME_TIME_SPAN
    def _spans(self, group: str, topic: str, write_queues: int) -> list[tuple[int, int, int, int, int]]:
        rows, store = [], self.store
        now = int(time.time() * 1000)
        for q in range(write_queues):
            lo = store.earliest_message_time(topic, q)
            top = store.max_offset(topic, q)
            hi = store.store_timestamp_at(topic, q, top - 1)
            consumer_offset = self.broker.offsets.query(group, topic, q)
            consume = store.store_timestamp_at(topic, q, consumer_offset - 1) if consumer_offset > 0 else lo
            delay = 0
            if consumer_offset < top:
                delay = now - store.store_timestamp_at(topic, q, consumer_offset)
            rows.append((q, lo, hi, consume, delay))
        return rows

    async def consume_time_span(self, cmd, conn):
        h = headers.read(cmd, {"topic": "str", "group": "str"})
        topic = h["topic"]
        tc = self.broker.topics.get(topic)
        if tc is None:
            return response_to(cmd, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        rows = await asyncio.to_thread(self._spans, h["group"], topic, tc.write_queue_nums)
        body = time_span_body(topic, self.broker.settings.brokerName, rows)
        return response_to(cmd, ResponseCode.SUCCESS, None, None, body)
