"""The broker's statistics and bulk admin requests, as RocketMQ's AdminBrokerProcessor answers them:
VIEW_BROKER_STATS_DATA (315, `mqadmin statsAll` asks TOPIC_PUT_NUMS <topic> and GROUP_GET_NUMS <topic@group>),
GET_BROKER_CONSUME_STATS (317, `mqadmin brokerConsumeStats`), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225,
`mqadmin updateSubGroupList`), INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, DefaultMQAdminExt.getConsumeStatus; 5.3.3's
mqadmin does not register its getConsumerStatus command: the broker asks each of the group's consumers GET_CONSUMER_STATUS_FROM_CLIENT, 221, and gathers their offset tables;
a Java lite pull or push-less consumer answers an empty one, as it does to a RocketMQ broker) and
GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305, which `mqadmin exportMetadata` and `exportMetrics` ask first).

The stats items rocketstore keeps (stats.BrokerStats) are TOPIC_PUT_NUMS and GROUP_GET_NUMS; any other item, and
these before their first message, get RocketMQ's answer for an item it does not have: SYSTEM_ERROR "The stats
<name> <key> not exist". A put item's avgpt (messages per put call) is 0.0: puts come from every side of the store
and their calls are not counted."""

from __future__ import annotations

import asyncio
import logging

from ...formats.properties import java_hashmap_order
from .. import fastjson, headers
from ..codes import RequestCode, ResponseCode, Version
from ..command import RemotingCommand, response_to
from ..errors import RemotingProtocolError
from . import admin_bodies as bodies
from .admin_bodies import java_double
from .subscriptions import SubscriptionGroupConfig, attributes_problem, group_problem

log = logging.getLogger(__name__)

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"  # BrokerStatsManager.Stats
GROUP_GET_NUMS = "GROUP_GET_NUMS"
# TopicValidator's SYSTEM_TOPIC_SET as its static block fills it
STATIC_SYSTEM_TOPICS = ("TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
                        "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
                        "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC")  # fmt: skip
CLIENT_CALL_TIMEOUT_S = 5.0  # Broker2Client.getConsumeStatus's invokeSync timeout


def version_desc(version: int) -> str:
    """MQVersion.getVersionDesc for the versions named in codes.Version (the ordinal otherwise)."""
    try:
        return Version(version).name + "_SNAPSHOT"
    except ValueError:
        return str(version)


def top_level_raw(text: str, name: str) -> str | None:
    """The raw JSON text of a top-level field of a fastjson object (whose maps may have object keys, which a
    JSON parser refuses); None without it."""
    depth, i, n = 0, 0, len(text)
    key_start = value_start = None
    key = None
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if depth == 1 and value_start is None:
                key_start, key = i, text[i + 1 : j]
            i = j + 1
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0 and value_start is not None:
                return text[value_start:i].strip() if key == name else None
        elif ch == ":" and depth == 1 and key_start is not None and value_start is None:
            value_start = i + 1
        elif ch == "," and depth == 1:
            if value_start is not None and key == name:
                return text[value_start:i].strip()
            key_start = value_start = key = None
        i += 1
    return None


def stats_item_json(sum_: int, tps: float, avgpt: float) -> str:
    """BrokerStatsItem (avgpt, sum, tps)."""
    return f'{{"avgpt":{java_double(avgpt)},"sum":{sum_},"tps":{java_double(tps)}}}'


def broker_stats_data(minute, hour, day) -> bytes:
    """BrokerStatsData: statsDay, statsHour, statsMinute, each a (sum, tps, avgpt)."""
    return (
        f'{{"statsDay":{stats_item_json(*day)},"statsHour":{stats_item_json(*hour)},'
        f'"statsMinute":{stats_item_json(*minute)}}}'
    ).encode()


class StatsAdmin:
    def __init__(self, broker):
        self.broker = broker
        self.store = broker.store
        self.stats = broker.stats

    def handlers(self) -> dict:
        return {RequestCode.VIEW_BROKER_STATS_DATA: self.view_stats,
                RequestCode.GET_BROKER_CONSUME_STATS: self.broker_consume_stats,
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: self.update_group_list,
                RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.consumer_status,
                RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.system_topics}  # fmt: skip

    # ------------------------------------------------------------------ GET_SYSTEM_TOPIC_LIST_FROM_BROKER
    async def system_topics(self, cmd, conn):
        """TopicValidator.getSystemTopicSet(): the static set and the system topics TopicConfigManager adds (those
        this broker creates: its cluster's and its own name among them), a TopicList in HashSet order."""
        topics = set(STATIC_SYSTEM_TOPICS) | set(self.broker.topics.system)
        body = fastjson.dumpb(fastjson.Bean(topicList=java_hashmap_order(list(topics))))
        return response_to(cmd, ResponseCode.SUCCESS, None, None, body)

    # ------------------------------------------------------------------ VIEW_BROKER_STATS_DATA
    async def view_stats(self, cmd, conn):
        h = headers.read(cmd, {"statsName": "str", "statsKey": "str"})
        name, key = h["statsName"], h["statsKey"]
        item = None
        if name == TOPIC_PUT_NUMS:
            item = await asyncio.to_thread(self.stats.topic_put_item, key)
        elif name == GROUP_GET_NUMS and "@" in key:
            topic, group = key.split("@", 1)
            item = self.stats.group_get_item(topic, group)
        if item is None:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        minute, hour, day = self.stats.snapshots((name, key), *item)
        return response_to(cmd, ResponseCode.SUCCESS, None, None, broker_stats_data(minute, hour, day))

    # ------------------------------------------------------------------ GET_BROKER_CONSUME_STATS
    def consume_stats_list(self, is_order: bool) -> bytes:
        """fetchAllConsumeStatsInBroker: for each subscription group (the table's HashMap order), a ConsumeStats
        per topic it has offsets for (less unknown topics, non-order topics when isOrder, and topics its online
        consumers do not subscribe while they subscribe some), every write queue; pullOffset stays 0, so
        totalInflightDiff is minus the consumer offsets, as RocketMQ's is."""
        broker = self.broker
        broker_name = broker.settings.brokerName
        total_diff = total_inflight = 0
        entries = []
        for group in java_hashmap_order(list(broker.subscription_groups.table)):
            stats = []
            online = broker.clients.consumers.get(group)
            subscribed = set(online.subscriptions) if online is not None else set()
            for topic in java_hashmap_order(broker.offsets.topics_of(group)):
                tc = broker.topics.get(topic)
                if tc is None or (is_order and not tc.order):
                    continue
                if subscribed and topic not in subscribed:
                    continue
                rows = []
                for q in range(tc.write_queue_nums):
                    broker_offset = max(self.store.max_offset(topic, q), 0)
                    consumer_offset = max(broker.offsets.query(group, topic, q), 0)
                    last = 0
                    if consumer_offset - 1 >= 0:
                        ts = self.store.store_timestamp_at(topic, q, consumer_offset - 1)
                        last = ts if ts > 0 else 0
                    rows.append((topic, q, broker_offset, consumer_offset, 0, last))
                    total_diff += broker_offset - consumer_offset
                    total_inflight += 0 - consumer_offset
                tps = self.stats.group_get_tps(group, topic)
                stats.append(bodies.consume_stats(broker_name, rows, tps).decode())
            entries.append(f"{{{fastjson.dumps(group)}:[{','.join(stats)}]}}")
        return (
            f'{{"brokerAddr":{fastjson.dumps(broker.settings.address)},"consumeStatsList":[{",".join(entries)}],'
            f'"totalDiff":{total_diff},"totalInflightDiff":{total_inflight}}}'
        ).encode()

    async def broker_consume_stats(self, cmd, conn):
        is_order = headers.read(cmd, {"isOrder": "bool"})["isOrder"]
        body = await asyncio.to_thread(self.consume_stats_list, is_order)
        return response_to(cmd, ResponseCode.SUCCESS, None, None, body)

    # ------------------------------------------------------------------ UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST
    async def update_group_list(self, cmd, conn):
        """updateSubscriptionGroupConfigList: each config put as UPDATE_AND_CREATE_SUBSCRIPTIONGROUP puts one,
        then one persist. An empty list changes nothing. The configs are all checked before any is put."""
        doc = fastjson.loads(cmd.body) if cmd.body else {}
        if not isinstance(doc, dict):
            raise RemotingProtocolError("the SubscriptionGroupList body is not an object")
        configs = doc.get("groupConfigList") or []
        if not isinstance(configs, list):
            raise RemotingProtocolError("groupConfigList must be an array")
        parsed = []
        try:
            for i, raw in enumerate(configs):
                parsed.append(SubscriptionGroupConfig.from_json(raw, f"groupConfigList[{i}]"))
        except ValueError as e:
            raise RemotingProtocolError(str(e)) from None
        groups = self.broker.subscription_groups
        for cfg in parsed:
            problem = group_problem(cfg.groupName)
            if problem:
                return response_to(cmd, ResponseCode.INVALID_PARAMETER, problem)
            problem = attributes_problem(cfg.attributes, create=groups.get(cfg.groupName) is None)
            if problem:
                return response_to(cmd, ResponseCode.SYSTEM_ERROR, problem)
        if parsed:
            log.info("create or update subscription groups %s", ";".join(c.groupName for c in parsed))
            await asyncio.to_thread(groups.update_all, parsed)
        return response_to(cmd, ResponseCode.SUCCESS)

    # ------------------------------------------------------------------ INVOKE_BROKER_TO_GET_CONSUMER_STATUS
    async def consumer_status(self, cmd, conn):
        """Broker2Client.getConsumeStatus: GET_CONSUMER_STATUS_FROM_CLIENT to each consumer of the group (or the one
        named by clientAddr, which is a client id), the answers' messageQueueTable gathered by client id in a
        GetConsumerStatusBody; a consumer that fails or does not answer in 5 s is left out, as RocketMQ leaves it.
        (A group without consumers: RocketMQ 5.3.3 fails on a null and answers SYSTEM_ERROR
        "java.lang.NullPointerException"; here the remark says why.)"""
        h = headers.read(cmd, {"topic": "str", "group": "str"}, {"clientAddr": "str"})
        topic, group, origin = h["topic"], h["group"], (h["clientAddr"] or "").strip()
        g = self.broker.clients.consumers.get(group)
        channels = list(g.channels.values()) if g is not None else []
        if not channels:
            remark = f"No Any Consumer online in the consumer group: [{group}]"
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, remark)
        tables: dict[str, str] = {}
        for channel in channels:
            if channel.version < Version.V3_0_7:
                remark = f"the client does not support this feature. version={version_desc(channel.version)}"
                return response_to(cmd, ResponseCode.SYSTEM_ERROR, remark)
            if origin and origin != channel.client_id:
                continue
            ask = RemotingCommand(
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ext_fields={"topic": topic, "group": group}
            )
            try:
                answer = await channel.connection.request(ask, CLIENT_CALL_TIMEOUT_S)
            except (asyncio.TimeoutError, ConnectionError) as e:
                log.warning("[get-consumer-status] %s of %s: %r", channel.client_id, group, e)
                answer = None
            if answer is not None and answer.code == ResponseCode.SUCCESS and answer.body:
                raw = top_level_raw(answer.body.decode("utf-8", "replace"), "messageQueueTable")
                tables[channel.client_id] = raw if raw and raw != "null" else "{}"
            if origin:
                break
        inner = ",".join(f"{fastjson.dumps(c)}:{tables[c]}" for c in java_hashmap_order(list(tables)))
        body = f'{{"consumerTable":{{{inner}}},"messageQueueTable":{{}}}}'.encode()
        return response_to(cmd, ResponseCode.SUCCESS, None, None, body)
