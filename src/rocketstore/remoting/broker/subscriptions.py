"""Subscription groups (RocketMQ's SubscriptionGroupManager and SubscriptionGroupConfig): each consumer group's
settings, chiefly for send-back (retryQueueNums, retryMaxTimes) and pulls (consumeEnable, consumeBroadcastEnable,
groupSysFlag), persisted in config/subscriptionGroup.json as RocketMQ's broker writes it:
{"dataVersion":{...},"forbiddenTable":{...},"subscriptionGroupTable":{group: config}}.

The table starts with the groups RocketMQ's manager creates at start (TOOLS_CONSUMER, ...), then what the file
holds. `find` is findSubscriptionGroupConfig: an unknown group is created with the defaults when
autoCreateSubscriptionGroup is on (or it is a system group), as a consumer's heartbeat or pull does it.
Admin requests: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
DELETE_SUBSCRIPTIONGROUP (207)."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field, fields

from ...config.files import read_config, write_atomically
from .. import fastjson, headers
from ..codes import RequestCode, ResponseCode
from ..command import response_to
from ..errors import RemotingProtocolError
from .topics import FAQ

log = logging.getLogger("rocketstore.remoting.broker")

FILE_NAME = "subscriptionGroup.json"
GROUP_MAX_LENGTH = 120  # TopicValidator
SPLIT_METADATA_SIZE = 2000  # BrokerConfig.splitMetadataSize
_GROUP_CHARS = re.compile(r"[%|a-zA-Z0-9_-]+\Z")
SYS_GROUP_PREFIX = "CID_RMQ_SYS_"  # MixAll.CID_RMQ_SYS_PREFIX
# what SubscriptionGroupManager.init() puts in the table (the last four with consumeBroadcastEnable, which is
# the default anyway)
BUILT_IN_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
                   "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_RMQ_SYS_TRANS")  # fmt: skip


@dataclass
class SubscriptionGroupConfig:
    """SubscriptionGroupConfig's fields under their Java names, with RocketMQ 5's defaults. `other`: fields of a
    newer RocketMQ this one does not know, kept so that a file written by one survives a rewrite."""

    groupName: str
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    consumeMessageOrderly: bool = False
    retryQueueNums: int = 1
    retryMaxTimes: int = 16
    groupRetryPolicy: dict = field(default_factory=lambda: {"type": "CUSTOMIZED"})
    brokerId: int = 0  # MixAll.MASTER_ID
    whichBrokerWhenConsumeSlowly: int = 1
    notifyConsumerIdsChangedEnable: bool = True
    groupSysFlag: int = 0
    consumeTimeoutMinute: int = 15
    subscriptionDataSet: list | None = None
    attributes: dict = field(default_factory=dict)
    other: dict = field(default_factory=dict)

    def to_bean(self) -> fastjson.Bean:
        bean = fastjson.Bean(self.other)
        for f in fields(self):
            if f.name != "other":
                bean[f.name] = getattr(self, f.name)
        bean["groupRetryPolicy"] = _bean(self.groupRetryPolicy)
        if self.subscriptionDataSet is not None:
            bean["subscriptionDataSet"] = [_bean(s) for s in self.subscriptionDataSet]
        return bean

    @classmethod
    def from_json(cls, doc, what: str = "the subscription group") -> "SubscriptionGroupConfig":
        """From the JSON object fastjson would read into a SubscriptionGroupConfig; ValueError names a field of
        the wrong type."""
        if not isinstance(doc, dict):
            raise ValueError(f"{what} is not a JSON object")
        known = {f.name: f for f in fields(cls) if f.name != "other"}
        values, other = {}, {}
        for name, value in doc.items():
            f = known.get(name)
            if f is None:
                other[name] = value
            elif value is not None:
                values[name] = _typed(value, f.type, f"{what}'s {name}")
        if not isinstance(values.get("groupName"), str):
            raise ValueError(f"{what} has no groupName")
        return cls(**values, other=other)


def _bean(value):
    return fastjson.Bean(value) if isinstance(value, dict) else value


_INT_RANGE = (-(2**63), 2**63 - 1)


def _typed(value, kind: str, what: str):
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"  # fastjson reads "true"/"false" strings into booleans
    elif kind == "int":
        if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            return value
    elif kind == "str":
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    elif kind == "dict":
        if isinstance(value, dict):
            return value
    elif kind.startswith("list"):
        if isinstance(value, list):
            return value
    raise ValueError(f"{what} is not a {kind.split(' ')[0]}: {value!r}")


def group_problem(group: str | None) -> str | None:
    """TopicValidator.validateGroup's remark, or None for a valid group name."""
    if group is None or not group.strip():
        return "The specified group is blank."
    if not _GROUP_CHARS.match(group):
        return f"The specified group: {group}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(group) > GROUP_MAX_LENGTH:
        return f"The specified group: {group}, is longer than group max length: {GROUP_MAX_LENGTH}"
    return None


def attributes_problem(attributes: dict, create: bool) -> str | None:
    """AttributeUtil.alterCurrentAttributes' refusal of a request's attributes, or None. Keys are "+name" (add)
    or "-name" (delete); SubscriptionGroupAttributes.ALL is empty in RocketMQ 5, so a well-formed key is
    refused as unsupported (and no group has attributes to delete)."""
    for key in attributes:
        real = key[1:]
        if not real or "+" in real or "-" in real:
            return "kv string format wrong."
        if create and not key.startswith("+"):
            return f"only add attribute is supported while creating topic. key: {real}"
        if not create and not key.startswith(("+", "-")):
            return f"wrong format key: {real}"
        if key.startswith("-"):
            return f"attempt to delete a nonexistent key: {real}"
    return f"unsupported key: {next(iter(attributes))[1:]}" if attributes else None


def is_sys_group(group: str) -> bool:
    """MixAll.isSysConsumerGroup (created even without autoCreateSubscriptionGroup: enableCreateSysGroup)."""
    return group.startswith(SYS_GROUP_PREFIX)


def _parse_file(text: str) -> tuple[dict, dict, dict]:
    doc = fastjson.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("not a subscriptionGroup.json object")
    table = doc.get("subscriptionGroupTable") or {}
    forbidden = doc.get("forbiddenTable") or {}
    version = doc.get("dataVersion") or {}
    if not isinstance(table, dict) or not isinstance(forbidden, dict) or not isinstance(version, dict):
        raise ValueError("subscriptionGroupTable, forbiddenTable and dataVersion must be objects")
    groups = {name: SubscriptionGroupConfig.from_json(cfg, f"group {name}") for name, cfg in table.items()}
    return groups, forbidden, version


class SubscriptionGroups:
    def __init__(self, broker):
        self.broker = broker
        self.store = broker.store
        self.path = os.path.join(self.store.root, "config", FILE_NAME)
        self.lock = threading.Lock()
        self._persist_lock = threading.Lock()
        self.table: dict[str, SubscriptionGroupConfig] = {g: SubscriptionGroupConfig(g) for g in BUILT_IN_GROUPS}
        self.forbidden: dict[str, dict] = {}
        self.version = {"counter": 0, "stateVersion": 0, "timestamp": _now()}
        # ConfigManager.load: the file, else its .bak; neither usable fails the start (StoreOpenError naming
        # both), as a RocketMQ broker refuses to start rather than forget the groups' settings
        loaded = read_config(self.path, _parse_file, FILE_NAME)
        if loaded is not None:
            groups, self.forbidden, version = loaded
            self.table.update(groups)
            self.version.update({k: v for k, v in version.items() if isinstance(v, int)})

    # ------------------------------------------------------------------ the table
    def __contains__(self, group: str) -> bool:
        """containsSubscriptionGroup; groups that committed offsets through the gRPC side count too (they
        share the store's offsets table)."""
        return bool(group) and (group in self.table or group in self.store.consumer_offsets.groups())

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.table.get(group)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """findSubscriptionGroupConfig: the group's config, created with the defaults when auto-creation
        (autoCreateSubscriptionGroup, or a system group) allows it and the name is valid; else None."""
        cfg = self.table.get(group)
        if cfg is not None:
            return cfg
        settings = self.broker.settings
        if not (settings.autoCreateSubscriptionGroup or is_sys_group(group)) or group_problem(group):
            return None
        with self.lock:
            cfg = self.table.setdefault(group, SubscriptionGroupConfig(group))
            self._next_version()
        log.info("auto create a subscription group %s", group)
        self.persist()
        return cfg

    def update(self, cfg: SubscriptionGroupConfig) -> None:
        """updateSubscriptionGroupConfig: put (replacing the whole config), then persist."""
        with self.lock:
            self.table[cfg.groupName] = cfg
            self._next_version()
        self.persist()

    def update_all(self, configs: list[SubscriptionGroupConfig]) -> None:
        """updateSubscriptionGroupConfigList: each put (a data version each), one persist."""
        with self.lock:
            for cfg in configs:
                self.table[cfg.groupName] = cfg
                self._next_version()
        self.persist()

    def delete(self, group: str) -> bool:
        with self.lock:
            old = self.table.pop(group, None)
            self.forbidden.pop(group, None)
            if old is not None:
                self._next_version()
        if old is not None:
            self.persist()
        return old is not None

    def _next_version(self) -> None:
        # DataVersion.nextVersion: a new timestamp and the counter one up
        self.version = {**self.version, "counter": self.version["counter"] + 1, "timestamp": _now()}

    def wrapper(self) -> fastjson.Bean:
        """SubscriptionGroupWrapper (the manager serializes to the same three fields)."""
        with self.lock:
            table = {name: cfg.to_bean() for name, cfg in sorted(self.table.items())}
            return fastjson.Bean(dataVersion=fastjson.Bean(self.version), forbiddenTable=dict(self.forbidden),
                                 subscriptionGroupTable=table)  # fmt: skip

    def persist(self) -> None:
        # one writer at a time: heartbeats persist from worker threads, pulls from the loop, and
        # write_atomically's temp file is one per path
        with self._persist_lock:
            write_atomically(self.path, fastjson.dumps(self.wrapper()))

    # ------------------------------------------------------------------ checks for the processors
    def group_sys_flag(self, group: str) -> int:
        cfg = self.table.get(group)
        return 0 if cfg is None else cfg.groupSysFlag

    def notify_enabled(self, group: str) -> bool:
        cfg = self.table.get(group)
        return cfg is None or cfg.notifyConsumerIdsChangedEnable

    def pull_refusal(self, cmd, group: str):
        """PullMessageProcessor's group checks: SUBSCRIPTION_GROUP_NOT_EXIST, or NO_PERMISSION when the group
        may not consume; None when the pull may go on."""
        cfg = self.find(group)
        if cfg is None:
            remark = f"subscription group [{group}] does not exist, {FAQ}"
            return response_to(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark)
        if not cfg.consumeEnable:
            return response_to(cmd, ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        return None

    def broadcast_refusal(self, cmd, group: str, message_model):
        """A broadcasting consumer of a group with consumeBroadcastEnable off gets NO_PERMISSION."""
        cfg = self.table.get(group)
        if cfg is not None and not cfg.consumeBroadcastEnable and message_model in ("BROADCASTING", 0):
            remark = f"the consumer group[{group}] can not consume by broadcast way"
            return response_to(cmd, ResponseCode.NO_PERMISSION, remark)
        return None

    # ------------------------------------------------------------------ admin requests (AdminBrokerProcessor)
    def handlers(self) -> dict:
        return {RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create,
                RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all,
                RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_request}  # fmt: skip

    async def update_and_create(self, cmd, conn):
        doc = fastjson.loads(cmd.body) if cmd.body else None
        if doc is None:  # RocketMQ decodes no body to null and answers SUCCESS without a change
            return response_to(cmd, ResponseCode.SUCCESS)
        try:
            cfg = SubscriptionGroupConfig.from_json(doc, "the SubscriptionGroupConfig body")
        except ValueError as e:
            raise RemotingProtocolError(str(e)) from None
        problem = group_problem(cfg.groupName)
        if problem:
            return response_to(cmd, ResponseCode.INVALID_PARAMETER, problem)
        old = self.table.get(cfg.groupName)
        problem = attributes_problem(cfg.attributes, create=old is None)
        if problem:  # RocketMQ's AttributeUtil throws; the remoting layer answers SYSTEM_ERROR with the message
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, problem)
        log.info("%s subscription group %s", "update" if old else "create", cfg.groupName)
        self.update(cfg)
        return response_to(cmd, ResponseCode.SUCCESS)

    async def get_all(self, cmd, conn):
        """The whole table, or with groupSeq / maxGroupNum / dataVersion (enableSplitMetadata, on by default)
        a page of it: the groups sorted by name from groupSeq (from 0 when the dataVersion given is not the
        table's), at most min(maxGroupNum, splitMetadataSize 2000) of them."""
        # decodeCommandCustomHeader checks @CFNotNull groupSeq only when the request has extFields at all
        h = (
            headers.read(cmd, {"groupSeq": "int"}, {"dataVersion": "str", "maxGroupNum": "int"})
            if cmd.ext_fields
            else {}
        )
        wrapper = self.wrapper()
        if h:
            begin = h["groupSeq"]
            if not (h["dataVersion"] or "").strip() or not self._same_version(h["dataVersion"]):
                begin = 0
            count = min(SPLIT_METADATA_SIZE, h["maxGroupNum"] if h["maxGroupNum"] is not None else 1 << 31)
            names = sorted(wrapper["subscriptionGroupTable"])[max(begin, 0) : max(begin, 0) + max(count, 0)]
            page = {n: wrapper["subscriptionGroupTable"][n] for n in names}
            wrapper["subscriptionGroupTable"] = page
            wrapper["forbiddenTable"] = {g: t for g, t in wrapper["forbiddenTable"].items() if g in page}
        ext = headers.write(totalGroupNum=len(self.table))
        return response_to(cmd, ResponseCode.SUCCESS, None, ext, fastjson.dumpb(wrapper))

    def _same_version(self, text: str) -> bool:
        """DataVersion.equals: stateVersion, timestamp and counter."""
        try:
            other = fastjson.loads(text)
        except RemotingProtocolError:
            return False
        names = ("stateVersion", "timestamp", "counter")
        return isinstance(other, dict) and all(other.get(k, 0) == self.version.get(k, 0) for k in names)

    async def delete_request(self, cmd, conn):
        h = headers.read(cmd, {"groupName": "str"}, {"cleanOffset": "bool"})
        group = h["groupName"]
        if not self.delete(group):
            log.warning("delete subscription group %s: not there", group)
        if h["cleanOffset"]:
            self.broker.offsets.flush()  # commits still in memory would come back after the removal
            self.store.consumer_offsets.remove_group(group)
        return response_to(cmd, ResponseCode.SUCCESS)


def _now() -> int:
    return int(time.time() * 1000)
