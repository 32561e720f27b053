"""Send-back of messages a consumer failed (RocketMQ's AbstractSendMessageProcessor.consumerSendMsgBack and
SendMessageProcessor.handleRetryAndDLQ).

CONSUMER_SEND_MSG_BACK (36) names a message by its commit log offset. The broker reads it back and writes a copy
to the group's retry topic %RETRY%group (created on demand with the group's retryQueueNums queues) with
reconsumeTimes + 1, RETRY_TOPIC (the topic it was first sent to), ORIGIN_MESSAGE_ID (the first copy's offset
msgId) and WAIT=false, delayed by a delay level: the client's, or 3 + reconsumeTimes when it gives 0. The delay
goes through SCHEDULE_TOPIC_XXXX as any delayed message's (schedule.py delivers it, the levels are the store's
messageDelayLevel). A message already retried maxReconsumeTimes times (the header's, from clients of 3.4.9 on,
else the group's retryMaxTimes), or sent back with a negative delay level, goes to %DLQ%group (one queue, read
and write permission as RocketMQ 5 creates it) with DELAY=0 instead.

When the send-back fails, a Java client sends the copy itself to %RETRY%group with the reconsume times in the
send header; `route_send` (called by send.py) does what handleRetryAndDLQ does with it: past the max (or while
the group holds orderly queue locks) the message goes to %DLQ%group, DELAY=-1."""

from __future__ import annotations

import asyncio
import logging
import random
import time

from ...formats import properties as P
from ...message import Message, PutStatus
from .. import headers
from ..codes import RequestCode, ResponseCode, Version
from ..command import response_to
from . import properties as BP
from .locks import LOCK_MAX_LIVE_MS
from .topics import DLQ_PREFIX, FAQ, RETRY_PREFIX, SCHEDULE_QUEUES, SCHEDULE_TOPIC

log = logging.getLogger("rocketstore.remoting.broker")

REQUIRED = {"offset": "long", "group": "str", "delayLevel": "int"}
OPTIONAL = {"originMsgId": "str", "originTopic": "str", "unitMode": "bool", "maxReconsumeTimes": "int"}

RETRY_TOPIC = "RETRY_TOPIC"  # MessageConst.PROPERTY_RETRY_TOPIC
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
WAIT = "WAIT"  # PROPERTY_WAIT_STORE_MSG_OK
REAL_TOPIC, REAL_QID = "REAL_TOPIC", "REAL_QID"
DLQ_QUEUES = 1  # DLQ_NUMS_PER_GROUP
PERM_WRITE = 2


def max_delay_level(store) -> int:
    """ScheduleMessageService.maxDelayLevel: the number of messageDelayLevel entries (the schedule topic has a
    queue for each of RocketMQ's 18)."""
    return min(len(store.config.delay_levels()), SCHEDULE_QUEUES)


def to_schedule(props: dict, topic: str, queue_id: int, level: int, max_level: int) -> tuple[str, int]:
    """HookUtils.transformDelayLevelMessage: a level past the last one becomes the last, the real topic and
    queue go into REAL_TOPIC / REAL_QID; the message goes to SCHEDULE_TOPIC_XXXX's queue level - 1."""
    if level > max_level:
        level = max_level
        props[P.DELAY] = str(level)
    props[REAL_TOPIC] = topic
    props[REAL_QID] = str(queue_id)
    return SCHEDULE_TOPIC, level - 1


class SendBack:
    def __init__(self, broker):
        self.broker = broker
        self.store = broker.store
        self._rand = random.Random()

    def handlers(self) -> dict:
        return {RequestCode.CONSUMER_SEND_MSG_BACK: self.send_back}

    # ------------------------------------------------------------------ CONSUMER_SEND_MSG_BACK
    async def send_back(self, cmd, conn):
        h = headers.read(cmd, REQUIRED, OPTIONAL)
        group = h["group"]
        settings = self.broker.settings
        sg = await asyncio.to_thread(self.broker.subscription_groups.find, group)
        if sg is None:
            remark = f"subscription group not exist, {group} {FAQ}"
            return response_to(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark)
        if not settings.brokerPermission & PERM_WRITE:
            remark = f"the broker[{settings.brokerIP1}] sending message is forbidden"
            return response_to(cmd, ResponseCode.NO_PERMISSION, remark)
        if sg.retryQueueNums <= 0:  # the group retries nothing: the message is dropped as consumed
            return response_to(cmd, ResponseCode.SUCCESS)
        topic = RETRY_PREFIX + group
        queue_id = self._rand.randrange(sg.retryQueueNums)
        tc = await asyncio.to_thread(self._topic, topic, sg.retryQueueNums)
        if not tc.perm & PERM_WRITE:
            return response_to(cmd, ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        stored = await asyncio.to_thread(self.store.look, h["offset"])
        if stored is None:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h['offset']}")

        props = dict(stored.properties)
        props.pop(P.CRC32, None)  # the store appends its own property CRC when configured to
        props.setdefault(RETRY_TOPIC, stored.topic)
        props[WAIT] = "false"
        max_times = sg.retryMaxTimes
        if cmd.version >= Version.V3_4_9 and h["maxReconsumeTimes"] is not None:
            max_times = h["maxReconsumeTimes"]
        level = h["delayLevel"]
        to_dlq = stored.reconsume_times >= max_times or level < 0
        if to_dlq:
            topic = DLQ_PREFIX + group
            queue_id = self._rand.randrange(DLQ_QUEUES)
            await asyncio.to_thread(self._topic, topic, DLQ_QUEUES)
            level = 0
        elif level == 0:
            level = 3 + stored.reconsume_times
        props[P.DELAY] = str(level)
        props.setdefault(ORIGIN_MESSAGE_ID, stored.msg_id)
        put_topic, put_queue = topic, queue_id
        if level > 0:
            put_topic, put_queue = to_schedule(props, topic, queue_id, level, max_delay_level(self.store))
        msg = Message(
            put_topic,
            bytes(stored.body or b""),
            flag=stored.flag,
            sys_flag=stored.sys_flag,
            born_timestamp=stored.born_timestamp,
            born_host=stored.born_host,
            reconsume_times=stored.reconsume_times + 1,
            raw_properties=BP.to_string(props),
        )
        r = await asyncio.to_thread(self.store.put, msg, put_queue)
        if r.status is not PutStatus.PUT_OK:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, r.status.name)
        self.broker.arrived()
        if to_dlq:
            log.info("send msg to DLQ %s, originalTopic=%s, consumerId=%s, msgUniqKey=%s", topic,
                     h["originTopic"], group, props.get(P.UNIQ_KEY))  # fmt: skip
        return response_to(cmd, ResponseCode.SUCCESS)

    def retry_topic(self, group: str, queues: int):
        """%RETRY%group, created with `queues` queues when missing (a consumer's heartbeat)."""
        return self._topic(RETRY_PREFIX + group, queues)

    def _topic(self, name: str, queues: int):
        """createTopicInSendMessageBackMethod: the topic's config, created (read and write) when missing."""
        return self.broker.topics.get(name) or self.broker.topics.create(name, queues)

    # ------------------------------------------------------------------ a send to %RETRY%group
    def route_send(self, cmd, h: dict, props: dict, queue_id: int):
        """handleRetryAndDLQ for a single send: (refusal, None, None), or (None, topic, queue id) to put the
        message at; `props` (the message's) gets DELAY=-1 when it goes to %DLQ%group."""
        topic = h["topic"]
        if not topic.startswith(RETRY_PREFIX):
            return None, topic, queue_id
        group = topic[len(RETRY_PREFIX) :]
        sg = self.broker.subscription_groups.find(group)
        if sg is None:
            remark = f"subscription group not exist, {group} {FAQ}"
            return response_to(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark), None, None
        max_times = sg.retryMaxTimes
        if cmd.version >= Version.V3_4_9 and h["maxReconsumeTimes"] is not None:
            max_times = h["maxReconsumeTimes"]
        reconsume = h["reconsumeTimes"] or 0
        # a group holding live queue locks consumes orderly: its retried messages go to the DLQ at once
        if reconsume > max_times or self._holds_locks(group):
            props[P.DELAY] = "-1"
            dlq = DLQ_PREFIX + group
            self._topic(dlq, DLQ_QUEUES)
            return None, dlq, self._rand.randrange(DLQ_QUEUES)
        return None, topic, queue_id

    def _holds_locks(self, group: str) -> bool:
        """RebalanceLockManager.isLockAllExpired, negated."""
        now = int(time.time() * 1000)
        locks = self.broker.locks.table.get(group) or {}
        return any(now - last <= LOCK_MAX_LIVE_MS for _client, last in list(locks.values()))
