"""Producers and consumers (RocketMQ's ProducerManager and ConsumerManager, ClientManageProcessor and
ConsumerManageProcessor.getConsumerListByGroup): HEART_BEAT registers a client's groups over its connection,
UNREGISTER_CLIENT and a closed connection take them out. When a consumer group gains or loses a client, every
client of the group is told with a oneway NOTIFY_CONSUMER_IDS_CHANGED (so push consumers rebalance at once).
A consumer's heartbeat finds (or auto-creates) its subscription group (subscriptions.py) and creates the group's
%RETRY% topic with the group's retryQueueNums, as the broker does. Producers are kept by group (the producerDataSet
of their heartbeats): a transaction check goes to one of them."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from .. import fastjson, headers
from ..codes import RequestCode, ResponseCode
from ..command import RemotingCommand, response_to
from ..errors import RemotingProtocolError

log = logging.getLogger("rocketstore.remoting.broker")


@dataclass
class ClientChannel:
    client_id: str
    connection: object  # server.Connection
    language: int
    version: int
    last_update_ms: int


@dataclass
class ConsumerGroup:
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None
    channels: dict[int, ClientChannel] = field(default_factory=dict)  # connection id -> channel
    subscriptions: dict[str, dict] = field(default_factory=dict)  # topic -> SubscriptionData

    def client_ids(self) -> list[str]:
        return [c.client_id for c in self.channels.values()]


BROADCASTING = ("BROADCASTING", 0)  # MessageModel by name (Java) or by number (the C++ core)


def _expressions(subs: dict) -> dict:
    return {t: (s.get("expressionType"), s.get("subString")) for t, s in subs.items()}


def _now() -> int:
    return int(time.time() * 1000)


class Clients:
    def __init__(self, broker):
        self.broker = broker
        self.consumers: dict[str, ConsumerGroup] = {}
        self.producers: dict[str, dict[int, ClientChannel]] = {}
        # topicGroupTable: topic -> the groups whose heartbeats subscribed it; a group stays until it has no
        # client left, under the topics it subscribes then (registerConsumer, clearTopicGroupTable)
        self.topic_groups: dict[str, dict[str, None]] = {}

    def handlers(self) -> dict:
        return {RequestCode.HEART_BEAT: self.heart_beat, RequestCode.UNREGISTER_CLIENT: self.unregister,
                RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list}  # fmt: skip

    # ------------------------------------------------------------------ requests
    async def heart_beat(self, cmd: RemotingCommand, conn):
        data = fastjson.loads(cmd.body or b"{}")
        if not isinstance(data, dict):
            raise RemotingProtocolError("heartbeat body is not an object")
        client_id = str(data.get("clientID") or "")
        now = _now()
        for cd in data.get("consumerDataSet") or ():
            group = cd.get("groupName")
            if not group:
                continue
            # findSubscriptionGroupConfig (auto-created); without a config the consumer is not registered
            sg = await asyncio.to_thread(self.broker.subscription_groups.find, group)
            if sg is None:
                continue
            await asyncio.to_thread(self.broker.send_back.retry_topic, group, sg.retryQueueNums)
            g = self.consumers.setdefault(group, ConsumerGroup())
            g.consume_type, g.message_model = cd.get("consumeType"), cd.get("messageModel")
            g.consume_from_where = cd.get("consumeFromWhere")
            subs = {s.get("topic"): s for s in cd.get("subscriptionDataSet") or () if s.get("topic")}
            for topic in subs:
                self.topic_groups.setdefault(topic, {})[group] = None
            changed_subs = _expressions(subs) != _expressions(g.subscriptions)
            g.subscriptions = subs
            new = conn.id not in g.channels
            g.channels[conn.id] = ClientChannel(client_id, conn, cmd.language, cmd.version, now)
            if new:
                log.info("consumer %s joined group %s from %s", client_id, group, conn.remote)
            # registerConsumer: a new channel or changed subscriptions tell the group, unless it broadcasts
            if (new or changed_subs) and g.message_model not in BROADCASTING:
                self._notify(group)
        for pd in data.get("producerDataSet") or ():
            group = pd.get("groupName")
            if group:
                self.producers.setdefault(group, {})[conn.id] = ClientChannel(
                    client_id, conn, cmd.language, cmd.version, now
                )
        # no isSupportHeartBeatV2 in the answer: clients keep sending full heartbeats (V1), which this reads
        return response_to(cmd, ResponseCode.SUCCESS)

    async def unregister(self, cmd: RemotingCommand, conn):
        h = headers.read(cmd, {"clientID": "str"}, {"producerGroup": "str", "consumerGroup": "str"})
        if h["producerGroup"]:
            self.producers.get(h["producerGroup"], {}).pop(conn.id, None)
        if h["consumerGroup"]:
            self._drop(h["consumerGroup"], conn.id)
        return response_to(cmd, ResponseCode.SUCCESS)

    async def consumer_list(self, cmd: RemotingCommand, conn):
        h = headers.read(cmd, {"consumerGroup": "str"})
        g = self.consumers.get(h["consumerGroup"])
        ids = g.client_ids() if g is not None else []
        if not ids:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h['consumerGroup']}")
        body = fastjson.dumpb(fastjson.Bean(consumerIdList=ids))
        return response_to(cmd, ResponseCode.SUCCESS, None, body=body)

    # ------------------------------------------------------------------ membership
    def groups_of(self, topic: str) -> list[str]:
        """queryTopicConsumeByWho: the groups the topic's subscribers belong to."""
        return list(self.topic_groups.get(topic, ()))

    def subscription(self, group: str, topic: str) -> dict | None:
        g = self.consumers.get(group)
        return None if g is None else g.subscriptions.get(topic)

    def connection_closed(self, conn) -> None:
        for group in [g for g, cg in self.consumers.items() if conn.id in cg.channels]:
            self._drop(group, conn.id)
        for chans in self.producers.values():
            chans.pop(conn.id, None)

    def _drop(self, group: str, conn_id: int) -> None:
        g = self.consumers.get(group)
        if g is None or g.channels.pop(conn_id, None) is None:
            return
        log.info("a consumer left group %s", group)
        if not g.channels:
            del self.consumers[group]
            for topic in g.subscriptions:
                groups = self.topic_groups.get(topic)
                if groups is not None:
                    groups.pop(group, None)
                    if not groups:
                        del self.topic_groups[topic]
        else:
            self._notify(group)

    def _notify(self, group: str) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every client of the group (notifyConsumerIdsChangedEnable)."""
        g = self.consumers.get(group)
        if g is None or not self.broker.settings.notifyConsumerIdsChangedEnable:
            return
        if not self.broker.subscription_groups.notify_enabled(group):  # the group's own switch
            return
        for ch in list(g.channels.values()):
            req = RemotingCommand(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ext_fields={"consumerGroup": group})
            self.broker.spawn(ch.connection.oneway(req))

    def producer_connection(self, group: str, turn: int):
        """ProducerManager.getAvailableChannel: a live connection of a producer of `group` (the `turn`-th,
        round robin, skipping closed ones), or None. Where a transaction check goes."""
        chans = [ch.connection for ch in list(self.producers.get(group, {}).values())]
        for i in range(len(chans)):
            conn = chans[(turn + i) % len(chans)]
            if not conn.closed:
                return conn
        return None

    def expire(self, timeout_ms: int) -> None:
        """Clients not heard of within channelExpiredTimeout (120 s) are taken out (scanNotActiveChannel)."""
        limit = _now() - timeout_ms
        for group, g in list(self.consumers.items()):
            for cid, ch in list(g.channels.items()):
                if ch.last_update_ms < limit:
                    self._drop(group, cid)
        for group, chans in list(self.producers.items()):
            for cid, ch in list(chans.items()):
                if ch.last_update_ms < limit:
                    del chans[cid]
            if not chans:
                del self.producers[group]
