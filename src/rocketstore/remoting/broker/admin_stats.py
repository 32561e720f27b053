"""The broker's statistics and bulk admin requests, as RocketMQ's AdminBrokerProcessor answers them:
VIEW_BROKER_STATS_DATA (315, `mqadmin statsAll` asks TOPIC_PUT_NUMS <topic> and GROUP_GET_NUMS <topic@group>),
GET_BROKER_CONSUME_STATS (317, `mqadmin brokerConsumeStats`) and UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225,
`mqadmin updateSubGroupList`).

The stats items rocketstore keeps (stats.BrokerStats) are TOPIC_PUT_NUMS and GROUP_GET_NUMS; any other item, and
these before their first message, get RocketMQ's answer for an item it does not have: SYSTEM_ERROR "The stats
<name> <key> not exist". A put item's avgpt (messages per put call) is 0.0: puts come from every side of the store
and their calls are not counted."""

from __future__ import annotations

import asyncio
import logging

from ...formats.properties import java_hashmap_order
from .. import fastjson, headers
from ..codes import RequestCode, ResponseCode
from ..command import response_to
from ..errors import RemotingProtocolError
from . import admin_bodies as bodies
from .admin_bodies import java_double
from .subscriptions import SubscriptionGroupConfig, attributes_problem, group_problem

log = logging.getLogger(__name__)

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"  # BrokerStatsManager.Stats
GROUP_GET_NUMS = "GROUP_GET_NUMS"


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
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: self.update_group_list}  # fmt: skip

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
