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


def make_handlers(ns) -> dict:  # noqa: C901 - past the ceiling, to be split
    """Handlers bound to a NameServer (`ns.routes`, `ns.kv`, `ns.settings`)."""
    routes, kv, settings = ns.routes, ns.kv, ns.settings

    async def put_kv(req, conn):
        h = headers.read(req, {"namespace": "str", "key": "str", "value": "str"})
        kv.put(h["namespace"], h["key"], h["value"])
        return _ok(req)

    async def get_kv(req, conn):
        h = headers.read(req, {"namespace": "str", "key": "str"})
        value = kv.get(h["namespace"], h["key"])
        if value is not None:
            return _ok(req, ext=headers.write(value=value))
        remark = f"No config item, Namespace: {h['namespace']} Key: {h['key']}"
        return response_to(req, ResponseCode.QUERY_NOT_FOUND, remark, {})

    async def delete_kv(req, conn):
        h = headers.read(req, {"namespace": "str", "key": "str"})
        kv.delete(h["namespace"], h["key"])
        return _ok(req)

    async def kv_list(req, conn):
        h = headers.read(req, {"namespace": "str"})
        table = kv.namespace(h["namespace"])
        if table is None:
            return response_to(req, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h['namespace']}")
        return _ok(req, fastjson.dumpb(bodies.kv_table_bean(table)))

    async def register_broker(req, conn: Connection):
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
        result = routes.register_broker(
            h["clusterName"], h["brokerAddr"], h["brokerName"], h["brokerId"], h["haServerAddr"], configs, version,
            _now_ms(), zone_name=req.ext("zoneName"),
            timeout_ms=h["heartbeatTimeoutMillis"] or ns.settings.broker_timeout_ms,
            enable_acting_master=h["enableActingMaster"], filter_servers=filters, connection=conn.id,
        )  # fmt: skip
        if result is None:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "register broker failed", {})
        body = b""
        if settings.return_order_topic_config_to_broker:
            table = kv.namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
            body = fastjson.dumpb(bodies.kv_table_bean(table)) if table is not None else b""
        ext = headers.write(haServerAddr=result.ha_server_addr, masterAddr=result.master_addr)
        return _ok(req, body, ext)

    async def unregister_broker(req, conn):
        h = headers.read(req, {"brokerName": "str", "brokerAddr": "str", "clusterName": "str", "brokerId": "long"})
        routes.unregister_broker(h["clusterName"], h["brokerAddr"], h["brokerName"], h["brokerId"])
        return _ok(req)

    async def broker_heartbeat(req, conn):
        h = headers.read(req, {"clusterName": "str", "brokerAddr": "str", "brokerName": "str"})
        routes.heartbeat(h["clusterName"], h["brokerAddr"], _now_ms())
        return _ok(req)

    async def query_data_version(req, conn):
        h = headers.read(req, {"brokerName": "str", "brokerAddr": "str", "clusterName": "str", "brokerId": "long"})
        theirs = bodies.parse_data_version(fastjson.loads(req.body)) if req.body else None
        ours = routes.data_version(h["clusterName"], h["brokerAddr"])
        changed = ours is None or ours != theirs
        routes.heartbeat(h["clusterName"], h["brokerAddr"], _now_ms())
        body = fastjson.dumpb(bodies.data_version_bean(ours)) if ours is not None else b""
        return _ok(req, body, headers.write(changed=changed))

    async def route_by_topic(req, conn):
        h = headers.read(req, {"topic": "str"}, {"acceptStandardJsonOnly": "bool"})
        route = routes.route(h["topic"])
        if route is None:
            remark = f"No topic route info in name server for the topic: {h['topic']}" + suggest_todo(FAQ_URL)
            return response_to(req, ResponseCode.TOPIC_NOT_EXIST, remark)
        if settings.order_message_enable:
            route.order_topic_conf = kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, h["topic"])
        standard = req.version >= Version.V4_9_4 or bool(h["acceptStandardJsonOnly"])
        return _ok(req, fastjson.dumpb(bodies.route_bean(route), standard=standard))

    async def cluster_info(req, conn):
        with routes.lock:
            bean = bodies.cluster_info_bean(routes.brokers, routes.clusters)
            body = fastjson.dumpb(bean)
        return _ok(req, body)

    def _topic_list(req, topics, enabled: bool = True, broker_addr=None):
        if not enabled:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "disable")
        return _ok(req, fastjson.dumpb(bodies.topic_list_bean(topics, broker_addr)))

    async def all_topics(req, conn):
        return _topic_list(req, routes.topics(), settings.enable_all_topic_list)

    async def topics_by_cluster(req, conn):
        if not settings.enable_topic_list:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "disable")
        h = headers.read(req, {"cluster": "str"})
        return _topic_list(req, routes.topics_of_cluster(h["cluster"]))

    async def system_topics(req, conn):
        names, addr = routes.system_topics()
        return _topic_list(req, names, True, addr)

    async def unit_topics(req, conn):
        return _topic_list(req, routes.topics_with_flag(1), settings.enable_topic_list)

    async def unit_sub_topics(req, conn):
        return _topic_list(req, routes.topics_with_flag(2), settings.enable_topic_list)

    async def unit_sub_ununit_topics(req, conn):
        return _topic_list(req, routes.topics_with_flag(2, exclude=1), settings.enable_topic_list)

    async def delete_topic(req, conn):
        h = headers.read(req, {"topic": "str"}, {"clusterName": "str"})
        routes.delete_topic(h["topic"], h["clusterName"])
        return _ok(req)

    async def register_topic(req, conn):
        h = headers.read(req, {"topic": "str"})
        data = fastjson.loads(req.body) if req.body else {}
        qds = []
        for q in (data or {}).get("queueDatas") or []:
            qds.append(QueueData(str(q.get("brokerName")), int(q.get("readQueueNums", 0)),
                                 int(q.get("writeQueueNums", 0)), int(q.get("perm", 0)), int(q.get("topicSysFlag", 0))))  # fmt: skip
        routes.register_topic(h["topic"], qds)
        return _ok(req)

    async def wipe_write_perm(req, conn):
        h = headers.read(req, {"brokerName": "str"})
        return _ok(req, ext=headers.write(wipeTopicCount=routes.set_write_perm(h["brokerName"], False)))

    async def add_write_perm(req, conn):
        h = headers.read(req, {"brokerName": "str"})
        return _ok(req, ext=headers.write(addTopicCount=routes.set_write_perm(h["brokerName"], True)))

    async def member_group(req, conn):
        h = headers.read(req, {"clusterName": "str", "brokerName": "str"})
        addrs = routes.member_group(h["clusterName"], h["brokerName"])
        group = fastjson.Bean(brokerAddrs=dict(sorted(addrs.items())), brokerName=h["brokerName"],
                              cluster=h["clusterName"])  # fmt: skip
        return _ok(req, fastjson.dumpb(fastjson.Bean(brokerMemberGroup=group)))

    async def get_config(req, conn):
        return _ok(req, settings.properties_text().encode("utf-8"))

    async def update_config(req, conn):
        if req.body:
            try:
                props = parse_properties(req.body.decode("utf-8"))
            except UnicodeDecodeError:
                return response_to(req, ResponseCode.SYSTEM_ERROR, "string2Properties error")
            if CONFIG_BLACKLIST & props.keys():
                return response_to(req, ResponseCode.NO_PERMISSION, "Can not update config in black list.")
            settings.update(props)
        return _ok(req)

    return {
        RC.PUT_KV_CONFIG: put_kv,
        RC.GET_KV_CONFIG: get_kv,
        RC.DELETE_KV_CONFIG: delete_kv,
        RC.GET_KVLIST_BY_NAMESPACE: kv_list,
        RC.QUERY_DATA_VERSION: query_data_version,
        RC.REGISTER_BROKER: register_broker,
        RC.UNREGISTER_BROKER: unregister_broker,
        RC.BROKER_HEARTBEAT: broker_heartbeat,
        RC.GET_BROKER_MEMBER_GROUP: member_group,
        RC.GET_BROKER_CLUSTER_INFO: cluster_info,
        RC.WIPE_WRITE_PERM_OF_BROKER: wipe_write_perm,
        RC.ADD_WRITE_PERM_OF_BROKER: add_write_perm,
        RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: all_topics,
        RC.DELETE_TOPIC_IN_NAMESRV: delete_topic,
        RC.REGISTER_TOPIC_IN_NAMESRV: register_topic,
        RC.GET_TOPICS_BY_CLUSTER: topics_by_cluster,
        RC.GET_SYSTEM_TOPIC_LIST_FROM_NS: system_topics,
        RC.GET_UNIT_TOPIC_LIST: unit_topics,
        RC.GET_HAS_UNIT_SUB_TOPIC_LIST: unit_sub_topics,
        RC.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: unit_sub_ununit_topics,
        RC.UPDATE_NAMESRV_CONFIG: update_config,
        RC.GET_NAMESRV_CONFIG: get_config,
        RC.GET_ROUTEINFO_BY_TOPIC: route_by_topic,
    }


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
