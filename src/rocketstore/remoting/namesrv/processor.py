"""The name server's request handlers (RocketMQ's DefaultRequestProcessor and ClientRequestProcessor): codes,
header fields, answers and remarks as RocketMQ's namesrv gives them."""

import time
import zlib

from .. import fastjson, headers
from ..codes import RequestCode as RC
from ..codes import ResponseCode, Version
from ..command import RemotingCommand, response_to
from ..errors import RemotingProtocolError
from ..server import Connection
from . import bodies
from .routes import QueueData

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
CONFIG_BLACKLIST = {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"}


def suggest_todo(url: str) -> str:
    return f"\nSee {url} for further details."


def _ok(req: RemotingCommand, body: bytes = b"", ext: dict | None = None) -> RemotingCommand:
    return response_to(req, ResponseCode.SUCCESS, None, ext, body)


def _now_ms() -> int:
    return int(time.time() * 1000)


class NamesrvProcessor:
    """One method per request, over a NameServer's routes, KV config and settings."""

    def __init__(self, ns):
        self.routes, self.kv, self.settings = ns.routes, ns.kv, ns.settings

    async def put_kv(self, req, conn):
        h = headers.read(req, {"namespace": "str", "key": "str", "value": "str"})
        self.kv.put(h["namespace"], h["key"], h["value"])
        return _ok(req)

    async def get_kv(self, req, conn):
        h = headers.read(req, {"namespace": "str", "key": "str"})
        value = self.kv.get(h["namespace"], h["key"])
        if value is not None:
            return _ok(req, ext=headers.write(value=value))
        remark = f"No config item, Namespace: {h['namespace']} Key: {h['key']}"
        return response_to(req, ResponseCode.QUERY_NOT_FOUND, remark, {})

    async def delete_kv(self, req, conn):
        h = headers.read(req, {"namespace": "str", "key": "str"})
        self.kv.delete(h["namespace"], h["key"])
        return _ok(req)

    async def kv_list(self, req, conn):
        h = headers.read(req, {"namespace": "str"})
        table = self.kv.namespace(h["namespace"])
        if table is None:
            return response_to(req, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h['namespace']}")
        return _ok(req, fastjson.dumpb(bodies.kv_table_bean(table)))

    async def register_broker(self, req, conn: Connection):
        h = headers.read(
            req,
            {"brokerName": "str", "brokerAddr": "str", "clusterName": "str", "haServerAddr": "str", "brokerId": "long"},
            {"heartbeatTimeoutMillis": "long", "enableActingMaster": "bool", "compressed": "bool", "bodyCrc32": "int"},
        )
        crc = h["bodyCrc32"] or 0
        if crc != 0 and crc != zlib.crc32(req.body) & 0x7FFFFFFF:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "crc32 not match", {})
        try:
            version, configs, filters = bodies.parse_register_body(req.body, bool(h["compressed"]), req.version)
        except RemotingProtocolError as e:
            raise RemotingProtocolError(f"Failed to decode RegisterBrokerBody: {e}") from None
        result = self.routes.register_broker(
            h["clusterName"], h["brokerAddr"], h["brokerName"], h["brokerId"], h["haServerAddr"], configs, version,
            _now_ms(), zone_name=req.ext("zoneName"),
            timeout_ms=h["heartbeatTimeoutMillis"] or self.settings.broker_timeout_ms,
            enable_acting_master=h["enableActingMaster"], filter_servers=filters, connection=conn.id,
        )  # fmt: skip
        if result is None:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "register broker failed", {})
        body = b""
        if self.settings.return_order_topic_config_to_broker:
            table = self.kv.namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
            body = fastjson.dumpb(bodies.kv_table_bean(table)) if table is not None else b""
        ext = headers.write(haServerAddr=result.ha_server_addr, masterAddr=result.master_addr)
        return _ok(req, body, ext)

    async def unregister_broker(self, req, conn):
        h = headers.read(req, {"brokerName": "str", "brokerAddr": "str", "clusterName": "str", "brokerId": "long"})
        self.routes.unregister_broker(h["clusterName"], h["brokerAddr"], h["brokerName"], h["brokerId"])
        return _ok(req)

    async def broker_heartbeat(self, req, conn):
        h = headers.read(req, {"clusterName": "str", "brokerAddr": "str", "brokerName": "str"})
        self.routes.heartbeat(h["clusterName"], h["brokerAddr"], _now_ms())
        return _ok(req)

    async def query_data_version(self, req, conn):
        h = headers.read(req, {"brokerName": "str", "brokerAddr": "str", "clusterName": "str", "brokerId": "long"})
        theirs = bodies.parse_data_version(fastjson.loads(req.body)) if req.body else None
        ours = self.routes.data_version(h["clusterName"], h["brokerAddr"])
        changed = ours is None or ours != theirs
        self.routes.heartbeat(h["clusterName"], h["brokerAddr"], _now_ms())
        body = fastjson.dumpb(bodies.data_version_bean(ours)) if ours is not None else b""
        return _ok(req, body, headers.write(changed=changed))

    async def route_by_topic(self, req, conn):
        h = headers.read(req, {"topic": "str"}, {"acceptStandardJsonOnly": "bool"})
        route = self.routes.route(h["topic"])
        if route is None:
            remark = f"No topic route info in name server for the topic: {h['topic']}" + suggest_todo(FAQ_URL)
            return response_to(req, ResponseCode.TOPIC_NOT_EXIST, remark)
        if self.settings.order_message_enable:
            route.order_topic_conf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, h["topic"])
        standard = req.version >= Version.V4_9_4 or bool(h["acceptStandardJsonOnly"])
        return _ok(req, fastjson.dumpb(bodies.route_bean(route), standard=standard))

    async def cluster_info(self, req, conn):
        with self.routes.lock:
            bean = bodies.cluster_info_bean(self.routes.brokers, self.routes.clusters)
            body = fastjson.dumpb(bean)
        return _ok(req, body)

    def _topic_list(self, req, topics, enabled: bool = True, broker_addr=None):
        if not enabled:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "disable")
        return _ok(req, fastjson.dumpb(bodies.topic_list_bean(topics, broker_addr)))

    async def all_topics(self, req, conn):
        return self._topic_list(req, self.routes.topics(), self.settings.enable_all_topic_list)

    async def topics_by_cluster(self, req, conn):
        if not self.settings.enable_topic_list:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "disable")
        h = headers.read(req, {"cluster": "str"})
        return self._topic_list(req, self.routes.topics_of_cluster(h["cluster"]))

    async def system_topics(self, req, conn):
        names, addr = self.routes.system_topics()
        return self._topic_list(req, names, True, addr)

    async def unit_topics(self, req, conn):
        return self._topic_list(req, self.routes.topics_with_flag(1), self.settings.enable_topic_list)

    async def unit_sub_topics(self, req, conn):
        return self._topic_list(req, self.routes.topics_with_flag(2), self.settings.enable_topic_list)

    async def unit_sub_ununit_topics(self, req, conn):
        return self._topic_list(req, self.routes.topics_with_flag(2, exclude=1), self.settings.enable_topic_list)

    async def delete_topic(self, req, conn):
        h = headers.read(req, {"topic": "str"}, {"clusterName": "str"})
        self.routes.delete_topic(h["topic"], h["clusterName"])
        return _ok(req)

    async def register_topic(self, req, conn):
        h = headers.read(req, {"topic": "str"})
        data = fastjson.loads(req.body) if req.body else {}
        qds = []
        for q in (data or {}).get("queueDatas") or []:
            qds.append(QueueData(str(q.get("brokerName")), int(q.get("readQueueNums", 0)),
                                 int(q.get("writeQueueNums", 0)), int(q.get("perm", 0)), int(q.get("topicSysFlag", 0))))  # fmt: skip
        self.routes.register_topic(h["topic"], qds)
        return _ok(req)

    async def wipe_write_perm(self, req, conn):
        h = headers.read(req, {"brokerName": "str"})
        return _ok(req, ext=headers.write(wipeTopicCount=self.routes.set_write_perm(h["brokerName"], False)))

    async def add_write_perm(self, req, conn):
        h = headers.read(req, {"brokerName": "str"})
        return _ok(req, ext=headers.write(addTopicCount=self.routes.set_write_perm(h["brokerName"], True)))

    async def member_group(self, req, conn):
        h = headers.read(req, {"clusterName": "str", "brokerName": "str"})
        addrs = self.routes.member_group(h["clusterName"], h["brokerName"])
        group = fastjson.Bean(brokerAddrs=dict(sorted(addrs.items())), brokerName=h["brokerName"],
                              cluster=h["clusterName"])  # fmt: skip
        return _ok(req, fastjson.dumpb(fastjson.Bean(brokerMemberGroup=group)))

    async def get_config(self, req, conn):
        return _ok(req, self.settings.properties_text().encode("utf-8"))

    async def update_config(self, req, conn):
        if req.body:
            try:
                props = parse_properties(req.body.decode("utf-8"))
            except UnicodeDecodeError:
                return response_to(req, ResponseCode.SYSTEM_ERROR, "string2Properties error")
            if CONFIG_BLACKLIST & props.keys():
                return response_to(req, ResponseCode.NO_PERMISSION, "Can not update config in black list.")
            self.settings.update(props)
        return _ok(req)

    def handlers(self) -> dict:
        return {
            RC.PUT_KV_CONFIG: self.put_kv,
            RC.GET_KV_CONFIG: self.get_kv,
            RC.DELETE_KV_CONFIG: self.delete_kv,
            RC.GET_KVLIST_BY_NAMESPACE: self.kv_list,
            RC.QUERY_DATA_VERSION: self.query_data_version,
            RC.REGISTER_BROKER: self.register_broker,
            RC.UNREGISTER_BROKER: self.unregister_broker,
            RC.BROKER_HEARTBEAT: self.broker_heartbeat,
            RC.GET_BROKER_MEMBER_GROUP: self.member_group,
            RC.GET_BROKER_CLUSTER_INFO: self.cluster_info,
            RC.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RC.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.all_topics,
            RC.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RC.REGISTER_TOPIC_IN_NAMESRV: self.register_topic,
            RC.GET_TOPICS_BY_CLUSTER: self.topics_by_cluster,
            RC.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.system_topics,
            RC.GET_UNIT_TOPIC_LIST: self.unit_topics,
            RC.GET_HAS_UNIT_SUB_TOPIC_LIST: self.unit_sub_topics,
            RC.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.unit_sub_ununit_topics,
            RC.UPDATE_NAMESRV_CONFIG: self.update_config,
            RC.GET_NAMESRV_CONFIG: self.get_config,
            RC.GET_ROUTEINFO_BY_TOPIC: self.route_by_topic,
        }


def make_handlers(ns) -> dict:
    """Handlers bound to a NameServer (`ns.routes`, `ns.kv`, `ns.settings`)."""
    return NamesrvProcessor(ns).handlers()


def parse_properties(text: str) -> dict[str, str]:
    """key=value lines (MixAll.string2Properties, without Java's escapes): blank lines and # or ! comments skipped."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out
