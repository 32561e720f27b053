"""Topic administration over remoting, as RocketMQ's AdminBrokerProcessor answers mqadmin: UPDATE_AND_CREATE_TOPIC
(17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21), GET_TOPIC_CONFIG (351) and GET_TOPIC_STATS_INFO (202).

A topic created or updated here is written to the store's config/topics.json with every TopicConfig field the
request gives (read and write queue counts, perm, filter type, sysFlag, order, attributes), so a RocketMQ broker
taking the store over reads the same table; the broker then registers its topics again. Deleting a topic is
deleteTopicInBroker: its config, its consume queues and the groups' offsets for it (store.delete_topic), plus the
POP retry topics of the groups that had offsets for it (clearRetryTopicWhenDeleteTopic)."""

from __future__ import annotations

import asyncio
import logging

from ...config import topics as TC
from ...broker.rules import is_system_topic
from .. import fastjson, headers
from ..codes import ResponseCode
from ..command import response_to
from ..namesrv.routes import DataVersion
from . import admin_bodies as bodies
from .topics import RETRY_PREFIX, from_store

log = logging.getLogger("rocketstore.remoting.broker")

TOPIC_MAX_LENGTH, RETRY_OR_DLQ_MAX_LENGTH = 127, 255
MAX_QUEUES = 1024  # rocketstore's limit on a topic's queues (RocketMQ sets none)
FILTER_TYPES = ("SINGLE_TAG", "MULTI_TAG")
_VALID = frozenset("%|-_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

# TopicAttributes.ALL: name -> (the allowed values in the order Java's HashSet gives them, as the refusal prints
# the set; changeable after creation). Guava's Sets.newHashSet sizes the table for the values: 4 buckets for
# two, 16 for six.
ATTRIBUTES = {
    TC.QUEUE_TYPE: (("SimpleCQ", "BatchCQ"), False),
    "cleanup.policy": (("DELETE", "COMPACTION"), False),
    "message.type": (("UNSPECIFIED", "MIXED", "TRANSACTION", "FIFO", "DELAY", "NORMAL"), True),
    "reserve.time": ((), True),  # tiered storage only
}
NOT_SERVED = {
    ("cleanup.policy", "COMPACTION"): "rocketstore does not compact topics: cleanup.policy COMPACTION is not served",
}

CREATE_HEADER = {"topic": "str", "defaultTopic": "str", "readQueueNums": "int", "writeQueueNums": "int",
                 "perm": "int", "topicFilterType": "str", "order": "bool"}  # fmt: skip


class TopicRefused(Exception):
    """A topic request RocketMQ refuses: the response code and its remark."""

    def __init__(self, code: int, remark: str):
        super().__init__(remark)
        self.code = code


def validate_topic(topic: str | None) -> str | None:
    """TopicValidator.validateTopic: None, or the remark of the refusal."""
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if any(c not in _VALID for c in topic):
        return f"The specified topic: {topic}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if topic.startswith(RETRY_PREFIX) or topic.startswith("%DLQ%"):
        if len(topic) > RETRY_OR_DLQ_MAX_LENGTH:
            return (f"The specified topic is DLQ or Retry topic: {topic}, and it's longer than topic max length: "
                    f"{RETRY_OR_DLQ_MAX_LENGTH}")  # fmt: skip
    elif len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic: {topic}, is longer than topic max length: {TOPIC_MAX_LENGTH}"
    return None


def parse_attributes(text: str | None) -> dict[str, str]:
    """AttributeParser.parseToMap: "+k=v,-k2" -> {"+k": "v", "-k2": ""}."""
    out: dict[str, str] = {}
    if not text:
        return out
    for kv in text.split(","):
        if "=" in kv:
            key, _, value = kv.partition("=")
            if "+" not in key:
                raise TopicRefused(ResponseCode.SYSTEM_ERROR, f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if "-" not in key:
                raise TopicRefused(ResponseCode.SYSTEM_ERROR, f"delete attribute format is wrong: {key}")
        if key in out:
            raise TopicRefused(ResponseCode.SYSTEM_ERROR, f"key duplication: {key}")
        out[key] = value
    return out


def alter_attributes(create: bool, current: dict[str, str], changes: dict[str, str]) -> dict[str, str]:
    """AttributeUtil.alterCurrentAttributes: a new topic takes only "+" keys; an existing one adds, updates
    ("+") and deletes ("-"), never an unchangeable attribute. Refusals are RocketMQ's RuntimeException texts."""

    def refuse(text: str):
        raise TopicRefused(ResponseCode.SYSTEM_ERROR, text)

    final = dict(current)
    seen: set[str] = set()
    for key, value in changes.items():
        real = key[1:]  # realKey: the first character is the operation's sign
        if not real or "+" in real or "-" in real:
            refuse("kv string format wrong.")
        if real in seen:
            refuse(f"alter duplication key. key: {real}")
        seen.add(real)
        if create and not key.startswith("+"):
            refuse(f"only add attribute is supported while creating topic. key: {real}")
        if not key.startswith(("+", "-")):
            refuse(f"wrong format key: {real}")
        if key.startswith("-") and real not in current:
            refuse(f"attempt to delete a nonexistent key: {real}")
        known = ATTRIBUTES.get(real)
        if known is None:
            refuse(f"unsupported key: {real}")
        allowed, changeable = known
        if not create and not changeable:
            refuse(f"attempt to update an unchangeable attribute. key: {real}")
        if key.startswith("-"):
            final.pop(real, None)
            continue
        if real == "reserve.time":  # updateTieredStoreTopicMetadata on a store that is not tiered
            refuse("Update topic reserveTime not supported")
        if value not in allowed:
            refuse(f"value is not in set: [{', '.join(allowed)}]")
        if (real, value) in NOT_SERVED:
            refuse(NOT_SERVED[(real, value)])
        final[real] = value
    return final


def save_topic_config(store, tc) -> None:
    """A full TopicConfig into the store's config/topics.json (MessageStore.update_topic_config)."""
    store.update_topic_config(
        tc.topic_name,
        tc.read_queue_nums,
        tc.write_queue_nums,
        tc.perm,
        topic_filter_type=tc.topic_filter_type,
        topic_sys_flag=tc.topic_sys_flag,
        order=tc.order,
        attributes=dict(tc.attributes),
    )


class TopicAdmin:
    def __init__(self, broker):
        self.broker = broker
        self.store = broker.store
        self.lock = asyncio.Lock()  # RocketMQ's processor methods are synchronized
        self.version = DataVersion(0, 0, 0)

    def handlers(self) -> dict:
        from ..codes import RequestCode as RC

        return {RC.UPDATE_AND_CREATE_TOPIC: self.update_topic, RC.UPDATE_AND_CREATE_TOPIC_LIST: self.update_topic_list,
                RC.DELETE_TOPIC_IN_BROKER: self.delete_topic,
                RC.GET_ALL_TOPIC_CONFIG: self.all_topic_config, RC.GET_TOPIC_CONFIG: self.topic_config,
                RC.GET_TOPIC_STATS_INFO: self.topic_stats}  # fmt: skip

    def is_system_topic(self, topic: str) -> bool:
        """TopicValidator.isSystemTopic, with the names TopicConfigManager adds at start (the cluster's, the
        broker's and the cluster's reply topic)."""
        s = self.broker.settings
        own = (s.brokerClusterName, s.brokerName, f"{s.brokerClusterName}_REPLY_TOPIC")
        return is_system_topic(topic) or topic in own

    def _conflict(self, cmd, topic: str):
        return response_to(cmd, ResponseCode.INVALID_PARAMETER, f"The topic[{topic}] is conflict with system topic.")

    def _changed(self) -> None:
        self.version = DataVersion(0, self.broker.now_ms(), self.version.counter + 1)
        self.broker.register()

    # ------------------------------------------------------------------ create / update
    async def update_topic(self, cmd, conn):
        h = headers.read(cmd, CREATE_HEADER, {"topicSysFlag": "int", "attributes": "str", "force": "bool"})
        refused = self._name_refusal(cmd, h["topic"])
        if refused is not None:
            return refused
        try:
            tc = self._requested(h)
        except TopicRefused as e:
            return response_to(cmd, e.code, str(e))
        async with self.lock:
            try:
                current = self._current_with_attributes(tc)
            except TopicRefused as e:
                return response_to(cmd, e.code, str(e))
            if tc == current:  # nothing changes: idempotent, as RocketMQ answers it
                return response_to(cmd, ResponseCode.SUCCESS)
            try:
                await asyncio.to_thread(save_topic_config, self.store, tc)
            except ValueError as e:  # the store refuses (a queue type change)
                return response_to(cmd, ResponseCode.SYSTEM_ERROR, str(e))
            self._changed()
        return response_to(cmd, ResponseCode.SUCCESS)

    async def update_topic_list(self, cmd, conn):
        """UPDATE_AND_CREATE_TOPIC_LIST (`mqadmin updateTopicList`): a CreateTopicListRequestBody of TopicConfigs,
        each checked as one topic's request is, then all saved and registered once. As RocketMQ answers it, a
        topic whose config would not change ends the request there with SUCCESS (the ones after it untouched)."""
        try:
            doc = fastjson.loads(cmd.body or b"{}")
            listed = doc.get("topicConfigList") or []
            if not isinstance(listed, list) or not all(isinstance(t, dict) for t in listed):
                raise ValueError("topicConfigList is not a list of TopicConfig objects")
        except (ValueError, AttributeError) as e:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, f"cannot read the topic config list: {e}")
        names = "".join(f"{t.get('topicName')};" for t in listed)
        log.info("AdminBrokerProcessor#updateAndCreateTopicList: topicNames: %s, called by %s", names, conn.remote)
        async with self.lock:
            wanted = []
            for t in listed:
                topic = t.get("topicName")
                refused = self._name_refusal(cmd, topic)
                if refused is not None:
                    return refused
                try:
                    h = {"topic": topic, "readQueueNums": _int(t, "readQueueNums", 16),
                         "writeQueueNums": _int(t, "writeQueueNums", 16), "perm": _int(t, "perm", 6),
                         "topicFilterType": t.get("topicFilterType") or "SINGLE_TAG",
                         "topicSysFlag": _int(t, "topicSysFlag", 0), "order": bool(t.get("order", False)),
                         "attributes": None}  # fmt: skip
                    tc = self._requested(h)
                    tc.attributes = {str(k): str(v) for k, v in (t.get("attributes") or {}).items()}
                    if tc.attributes.get("+message.type") == "MIXED":
                        raise TopicRefused(ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported.")
                    current = self._current_with_attributes(tc)
                except TopicRefused as e:
                    return response_to(cmd, e.code, str(e))
                if tc == current:
                    return response_to(cmd, ResponseCode.SUCCESS)
                wanted.append(tc)
            try:
                for tc in wanted:
                    await asyncio.to_thread(save_topic_config, self.store, tc)
            except ValueError as e:
                return response_to(cmd, ResponseCode.SYSTEM_ERROR, str(e))
            finally:
                if wanted:
                    self._changed()
        return response_to(cmd, ResponseCode.SUCCESS)

    def _name_refusal(self, cmd, topic: str | None):
        """The answer to a topic name that may not be created or updated (invalid, or a system topic's), or None."""
        remark = validate_topic(topic)
        if remark:
            return response_to(cmd, ResponseCode.INVALID_PARAMETER, remark)
        if self.is_system_topic(topic):
            return self._conflict(cmd, topic)
        return None

    def _current_with_attributes(self, tc):
        """The topic's current config (None for a new one), and the request's attribute changes applied to the
        current attributes in `tc` (AttributeUtil.alterCurrentAttributes); TopicRefused for a bad change."""
        current = self.broker.topics.get(tc.topic_name) if tc.topic_name in self.store.topic_configs else None
        tc.attributes = alter_attributes(current is None, current.attributes if current else {}, tc.attributes)
        return current

    def _requested(self, h):
        """The TopicConfig a create request describes (attributes still as the request's +/- changes)."""
        if h["topicFilterType"] not in FILTER_TYPES:
            raise TopicRefused(
                ResponseCode.SYSTEM_ERROR,
                f"No enum constant org.apache.rocketmq.common.TopicFilterType.{h['topicFilterType']}",
            )
        changes = parse_attributes(h["attributes"])
        if changes.get("+message.type") == "MIXED":  # enableMixedMessageType is off
            raise TopicRefused(ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported.")
        r, w = h["readQueueNums"], h["writeQueueNums"]
        if not (0 <= r <= MAX_QUEUES and 0 <= w <= MAX_QUEUES and max(r, w) > 0):
            raise TopicRefused(
                ResponseCode.INVALID_PARAMETER,
                f"readQueueNums {r} and writeQueueNums {w}: each must be between 0 and {MAX_QUEUES}, "
                "and one above 0 (rocketstore's limit)",
            )
        if not 0 <= h["perm"] <= 15:
            raise TopicRefused(ResponseCode.INVALID_PARAMETER, f"perm {h['perm']} is not a PermName combination")
        return from_store(
            h["topic"],
            {"readQueueNums": r, "writeQueueNums": w, "perm": h["perm"], "topicFilterType": h["topicFilterType"],
             "topicSysFlag": h["topicSysFlag"] or 0, "order": h["order"], "attributes": changes},
        )  # fmt: skip

    # ------------------------------------------------------------------ delete
    async def delete_topic(self, cmd, conn):
        topic = headers.read(cmd, {"topic": "str"})["topic"]
        if not topic.strip():
            return response_to(cmd, ResponseCode.INVALID_PARAMETER, "The specified topic is blank.")
        if self.is_system_topic(topic):
            return self._conflict(cmd, topic)
        doomed = [topic]
        # clearRetryTopicWhenDeleteTopic: the POP retry topics (V2 "group+topic", V1 "group_topic") of the
        # groups with offsets for the topic
        for group, topics in self.store.consumer_offsets.groups().items():
            if topic in topics:
                for retry in (f"{RETRY_PREFIX}{group}+{topic}", f"{RETRY_PREFIX}{group}_{topic}"):
                    if retry in self.store.topic_configs:
                        doomed.append(retry)
        async with self.lock:
            try:
                for name in doomed:
                    self.broker.offsets.forget_topic(name)
                    await asyncio.to_thread(self.store.delete_topic, name)
            except Exception as e:  # a file that cannot be removed
                return response_to(cmd, ResponseCode.SYSTEM_ERROR, str(e))
            self._changed()
        return response_to(cmd, ResponseCode.SUCCESS)

    # ------------------------------------------------------------------ reads
    async def all_topic_config(self, cmd, conn):
        # the whole table in one answer (enableSplitMetadata is off), whatever paging fields the request has
        configs = self.broker.topics.all()
        body = bodies.topic_config_wrapper(configs, self.broker.data_version, self.version)
        return response_to(cmd, ResponseCode.SUCCESS, None, headers.write(totalTopicNum=len(configs)), body)

    async def topic_config(self, cmd, conn):
        topic = headers.read(cmd, {"topic": "str"}, {"lo": "bool"})["topic"]
        tc = self.broker.topics.get(topic)
        if tc is None:
            return response_to(cmd, ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        # TopicConfigAndQueueMapping: the config's fields, no static-topic mapping (mappingDetail null, left out)
        from .. import fastjson

        return response_to(cmd, ResponseCode.SUCCESS, None, None, fastjson.dumpb(bodies.topic_config_bean(tc)))

    async def topic_stats(self, cmd, conn):
        topic = headers.read(cmd, {"topic": "str"})["topic"]
        tc = self.broker.topics.get(topic)
        if tc is None:
            return response_to(cmd, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        rows = await asyncio.to_thread(self._stats_rows, topic, max(tc.write_queue_nums, tc.read_queue_nums))
        tps = self.broker.stats.topic_put_tps(topic)
        body = bodies.topic_stats_table(topic, self.broker.settings.brokerName, rows, tps)
        return response_to(cmd, ResponseCode.SUCCESS, None, None, body)

    def _stats_rows(self, topic: str, queues: int) -> list[tuple[int, int, int, int]]:
        store = self.store
        rows = []
        for q in range(queues):
            lo = max(store.min_offset(topic, q), 0)
            hi = max(store.max_offset(topic, q), 0)
            ts = store.store_timestamp_at(topic, q, hi - 1) if hi > 0 else 0
            rows.append((q, lo, hi, ts))
        return rows


def _int(bean: dict, name: str, default: int) -> int:
    value = bean.get(name, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise TopicRefused(ResponseCode.INVALID_PARAMETER, f"{name} {value!r} is not a number") from None
