"""The broker's runtime and client admin requests, as RocketMQ's AdminBrokerProcessor answers mqadmin:
GET_BROKER_RUNTIME_INFO (28, the KVTable `mqadmin brokerStatus` prints and `clusterList` reads), GET_BROKER_CONFIG
(26), UPDATE_BROKER_CONFIG (25, the keys this broker can change while running), GET_CONSUMER_CONNECTION_LIST (203),
GET_PRODUCER_CONNECTION_LIST (204), GET_ALL_PRODUCER_INFO (328, `mqadmin producer`), GET_CONSUME_STATS (208,
`consumerProgress`), GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309, `queryMsgByUniqueKey -g -d`:
the message's record handed to one consumer, which consumes it and says how), both handed to the consumer as the
broker's callConsumer does, and QUERY_TOPIC_CONSUME_BY_WHO (300, the groups consuming a topic: the message track of
`queryMsgById` asks it)."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from dataclasses import fields

from ...formats.properties import java_hashmap_order
from ...formats.record import parse_msg_id
from .. import fastjson, headers
from ..codes import RequestCode, ResponseCode, Version
from ..command import RemotingCommand, response_to
from ..namesrv.processor import parse_properties
from . import admin_bodies as bodies

VERSION_DESC = Version.V5_3_3.name  # MQVersion.getVersionDesc(CURRENT_VERSION)
CONFIG_BLACK_LIST = frozenset(["brokerConfigPath", "rocketmqHome", "configBlackList"])
# what UPDATE_BROKER_CONFIG may change on the running broker: the settings read at each request
RUNTIME_KEYS = (
    "brokerPermission",
    "longPollingEnable",
    "notifyConsumerIdsChangedEnable",
    "enablePropertyFilter",
    "litePullMessageEnable",
)
CONSUMER_CALL_TIMEOUT_S = 5.0
MIN_CLIENT_VERSION = Version.V3_1_8  # MQVersion.Version.V3_1_8_SNAPSHOT's ordinal


def format_runtime(ms: int) -> str:
    """StoreStatsService.getFormatRuntime."""
    s = ms // 1000
    return f"[ {s // 86400} days, {s % 86400 // 3600} hours, {s % 3600 // 60} minutes, {s % 60} seconds ]"


def _text(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


class BrokerAdmin:
    def __init__(self, broker):
        self.broker = broker
        self.store = broker.store
        self.stats = broker.stats
        self.config_version = 0  # the Configuration's data version counter (bumped by each update)
        self.config_version_ms = self.stats.boot_ms

    def handlers(self) -> dict:
        return {RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info, RequestCode.GET_BROKER_CONFIG: self.config,
                RequestCode.UPDATE_BROKER_CONFIG: self.update_config,
                RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
                RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connections,
                RequestCode.GET_CONSUME_STATS: self.consume_stats,
                RequestCode.GET_ALL_PRODUCER_INFO: self.all_producers,
                RequestCode.GET_CONSUMER_RUNNING_INFO: self.consumer_running_info,
                RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_directly,
                RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.topic_consumed_by}  # fmt: skip

    # ------------------------------------------------------------------ runtime info
    async def runtime_info(self, cmd, conn):
        table = await asyncio.to_thread(self.runtime_table)
        return response_to(cmd, ResponseCode.SUCCESS, None, None, bodies.kv_table(table))

    def runtime_table(self) -> dict[str, str]:
        """prepareRuntimeInfo's keys that rocketstore can fill truthfully."""
        store, stats = self.store, self.stats
        stats.roll_day()
        now = int(time.time() * 1000)
        put, got = stats.put_total(), stats.got_total
        m = stats.morning
        t = {
            "bootTimestamp": str(stats.boot_ms),
            "runtime": format_runtime(now - stats.boot_ms),
            "brokerVersionDesc": VERSION_DESC,
            "msgPutTotalTodayNow": str(put),
            "msgPutTotalTodayMorning": str(m["put_today"]),
            "msgPutTotalYesterdayMorning": str(m["put_yesterday"]),
            "msgGetTotalTodayNow": str(got),
            "msgGetTotalTodayMorning": str(m["get_today"]),
            "msgGetTotalYesterdayMorning": str(m["get_yesterday"]),
            "putMessageTimesTotal": str(max(put, 1)),  # StoreStatsService says at least 1
            "putTps": stats.tps_text("put", put),
            "getTransferredTps": stats.tps_text("got", got),
            "commitLogMinOffset": str(store.min_physical_offset),
            "commitLogMaxOffset": str(store.max_physical_offset),
            "dispatchBehindBytes": str(store.dispatch_behind_bytes),
            "earliestMessageTimeStamp": str(self._earliest_time()),
            "startAcceptSendRequestTimeStamp": "0",
            # isSpecialServiceRunning: a master whose schedule service runs
            "brokerActive": "true",
            # no timer wheel: RocketMQ's answer when timerWheelEnable is off
            "timerReadBehind": "0",
            "timerOffsetBehind": "0",
            "timerCongestNum": "0",
            "timerEnqueueTps": "0.0",
            "timerDequeueTps": "0.0",
        }
        commitlog_dir = os.path.join(store.root, "commitlog")
        ratio = bodies.java_double(store.disk_ratio("commitlog"))
        t["commitLogDiskRatio"] = ratio
        t[f"commitLogDiskRatio_{commitlog_dir}"] = ratio
        t["consumeQueueDiskRatio"] = bodies.java_double(store.disk_ratio("consumequeue"))
        try:
            du = shutil.disk_usage(store.root)
            t["commitLogDirCapacity"] = f"Total : {bodies.human_bytes(du.total)}, Free : {bodies.human_bytes(du.free)}."
        except OSError:
            pass
        return t

    def _earliest_time(self) -> int:
        """getEarliestMessageTime: the store time of the CommitLog's first record, -1 without one."""
        m = self.store.look(self.store.min_physical_offset) if self.store.max_physical_offset > 0 else None
        return m.store_timestamp if m is not None else -1

    # ------------------------------------------------------------------ config
    def config_text(self) -> str:
        """The options this broker honours, key=value lines (Configuration.getAllConfigsFormatString)."""
        s = self.broker.settings
        lines = {f.name: _text(getattr(s, f.name)) for f in fields(s)}
        lines["storePathRootDir"] = self.store.root
        lines["storePathCommitLog"] = os.path.join(self.store.root, "commitlog")
        lines["mappedFileSizeCommitLog"] = str(self.store.config.mapped_file_size_commit_log)
        lines["flushDiskType"] = str(self.store.config.flush_disk_type)
        return "".join(f"{k}={v}\n" for k, v in sorted(lines.items()))

    async def config(self, cmd, conn):
        version = fastjson.dumps(
            fastjson.Bean(counter=self.config_version, stateVersion=0, timestamp=self.config_version_ms)
        )
        body = self.config_text().encode("utf-8")
        return response_to(cmd, ResponseCode.SUCCESS, None, headers.write(version=version), body)

    async def update_config(self, cmd, conn):
        if not cmd.body:
            return response_to(cmd, ResponseCode.SUCCESS)
        try:
            props = parse_properties(cmd.body.decode("utf-8"))
        except UnicodeDecodeError:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, "string2Properties error")
        if CONFIG_BLACK_LIST & props.keys():
            return response_to(cmd, ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        unknown = sorted(k for k in props if k not in RUNTIME_KEYS)
        if unknown:
            return response_to(
                cmd,
                ResponseCode.INVALID_PARAMETER,
                f"rocketstore's broker cannot change {', '.join(unknown)} while running; it changes only "
                f"{', '.join(RUNTIME_KEYS)}",
            )
        s = self.broker.settings
        values = {}
        for key, raw in props.items():
            current = getattr(s, key)
            if isinstance(current, bool):
                values[key] = raw.strip().lower() == "true"  # Boolean.parseBoolean
            else:
                try:
                    values[key] = int(raw.strip())
                except ValueError:
                    return response_to(cmd, ResponseCode.INVALID_PARAMETER, f"{key}={raw} is not a number")
        if "brokerPermission" in values and not 0 <= values["brokerPermission"] <= 15:
            return response_to(cmd, ResponseCode.INVALID_PARAMETER, "brokerPermission must be a PermName value")
        for key, value in values.items():
            setattr(s, key, value)
        self.config_version += 1
        self.config_version_ms = int(time.time() * 1000)
        if "brokerPermission" in values:  # the queues' permissions as the name server gives them change
            self.broker.register()
        return response_to(cmd, ResponseCode.SUCCESS)

    # ------------------------------------------------------------------ clients
    async def topic_consumed_by(self, cmd, conn):
        """queryTopicConsumeByWho: the groups whose heartbeats subscribed the topic (ConsumerManager's
        topicGroupTable), then those with offsets for it (whichGroupByTopic), as a GroupList in HashSet order."""
        topic = headers.read(cmd, {"topic": "str"})["topic"]
        groups = self.broker.clients.groups_of(topic)
        groups += [g for g in await asyncio.to_thread(self.broker.offsets.groups_of, topic) if g not in groups]
        body = fastjson.dumpb(fastjson.Bean(groupList=java_hashmap_order(groups)))
        return response_to(cmd, ResponseCode.SUCCESS, None, None, body)

    async def consumer_connections(self, cmd, conn):
        group = headers.read(cmd, {"consumerGroup": "str"})["consumerGroup"]
        g = self.broker.clients.consumers.get(group)
        if g is None:
            return response_to(cmd, ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        return response_to(cmd, ResponseCode.SUCCESS, None, None, bodies.consumer_connection(g))

    async def producer_connections(self, cmd, conn):
        group = headers.read(cmd, {"producerGroup": "str"})["producerGroup"]
        channels = self.broker.clients.producers.get(group)
        if channels is None:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        return response_to(cmd, ResponseCode.SUCCESS, None, None, bodies.producer_connection(channels.values()))

    async def all_producers(self, cmd, conn):
        return response_to(cmd, ResponseCode.SUCCESS, None, None, bodies.producer_table(self.broker.clients.producers))

    # ------------------------------------------------------------------ consume stats
    def _stats_topics(self, group: str, topic: str | None, topic_list: str | None) -> list[str]:
        """getTopicsForCollectingConsumeStats: the listed topics as they are; else the topic asked for, or every
        topic the group has offsets for, less those the group's online consumers do not subscribe."""
        listed = [t for t in (topic_list or "").split(";") if t]
        if listed:
            return sorted(set(listed))
        topics = {topic} if topic and topic.strip() else set(self.broker.offsets.topics_of(group))
        g = self.broker.clients.consumers.get(group)
        subscribed = set(g.subscriptions) if g is not None else set()
        if subscribed:
            topics &= subscribed
        return sorted(topics)

    def _consume_rows(self, group: str, topics: list[str]) -> list[tuple]:
        rows = []
        for topic in topics:
            tc = self.broker.topics.get(topic)
            if tc is None:
                continue
            for q in range(tc.read_queue_nums):
                broker_offset = max(self.store.max_offset(topic, q), 0)
                consumer_offset = max(self.broker.offsets.query(group, topic, q), 0)
                last = 0
                if consumer_offset - 1 >= 0:
                    ts = self.store.store_timestamp_at(topic, q, consumer_offset - 1)
                    last = ts if ts > 0 else 0
                # no pull offsets are kept apart from the commits: pullOffset is the consumer offset
                rows.append((topic, q, broker_offset, consumer_offset, consumer_offset, last))
        return rows

    async def consume_stats(self, cmd, conn):
        h = headers.read(cmd, {"consumerGroup": "str"}, {"topic": "str", "topicList": "str"})
        group = h["consumerGroup"]
        topics = self._stats_topics(group, h["topic"], h["topicList"])
        rows = await asyncio.to_thread(self._consume_rows, group, topics)
        tps = sum(self.stats.group_get_tps(group, t) for t in {r[0] for r in rows})
        body = bodies.consume_stats(self.broker.settings.brokerName, rows, tps)
        return response_to(cmd, ResponseCode.SUCCESS, None, None, body)

    # ------------------------------------------------------------------ a call to the consumer
    async def consumer_running_info(self, cmd, conn):
        h = headers.read(cmd, {"consumerGroup": "str", "clientId": "str"}, {"jstackEnable": "bool"})
        return await self._call_consumer(cmd, RequestCode.GET_CONSUMER_RUNNING_INFO, h["consumerGroup"], h["clientId"])

    async def consume_directly(self, cmd, conn):
        """The request gains brokerName, the topic's and group's sys flags and, as its body, the record at the
        offset msgId's offset; then it goes to the consumer named."""
        h = headers.read(cmd, {"consumerGroup": "str", "clientId": "str"}, {"msgId": "str", "topic": "str"})
        cmd.ext_fields = dict(cmd.ext_fields or {}, brokerName=self.broker.settings.brokerName)
        tc = self.broker.topics.get(h["topic"]) if h["topic"] else None
        if tc is not None:
            cmd.ext_fields["topicSysFlag"] = str(tc.topic_sys_flag)
        if h["consumerGroup"] and h["consumerGroup"] in self.broker.subscription_groups:
            cmd.ext_fields["groupSysFlag"] = str(self.broker.subscription_groups.group_sys_flag(h["consumerGroup"]))
        try:
            _, offset = parse_msg_id(h["msgId"] or "")
        except ValueError as e:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, str(e))
        record = await asyncio.to_thread(self._record_at, offset)
        if record is None:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        cmd.body = record
        return await self._call_consumer(cmd, RequestCode.CONSUME_MESSAGE_DIRECTLY, h["consumerGroup"], h["clientId"])

    def _record_at(self, offset: int) -> bytes | None:
        """selectOneMessageByOffset: the whole record starting at a CommitLog offset."""
        m = self.store.look(offset) if offset >= 0 else None
        if m is None or m.physical_offset != offset:
            return None
        view = self.store.record_bytes(m.physical_offset, m.size)
        return None if view is None else bytes(view)

    async def _call_consumer(self, cmd, code: int, group: str, client_id: str):
        """callConsumer: the request (its fields and body) asked of one consumer of the group, its answer passed
        back."""
        g = self.broker.clients.consumers.get(group)
        channel = next((c for c in g.channels.values() if c.client_id == client_id), None) if g else None
        if channel is None:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if channel.version < MIN_CLIENT_VERSION:
            return response_to(
                cmd,
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{client_id}> Version <{channel.version}> too low to finish, please upgrade it to "
                "V3_1_8_SNAPSHOT",
            )
        forward = RemotingCommand(code, ext_fields=dict(cmd.ext_fields or {}), body=cmd.body)
        try:
            answer = await channel.connection.request(forward, CONSUMER_CALL_TIMEOUT_S)
        except asyncio.TimeoutError:
            return response_to(
                cmd, ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: no answer in "
                f"{CONSUMER_CALL_TIMEOUT_S:g} s"
            )  # fmt: skip
        except ConnectionError as e:
            return response_to(
                cmd, ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {e}"
            )
        return response_to(cmd, answer.code, answer.remark, answer.ext_fields, answer.body)
