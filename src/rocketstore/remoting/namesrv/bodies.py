"""The name server's request and response bodies, as RocketMQ's RemotingSerializable classes are written by
fastjson (beans with sorted fields, see ..fastjson): TopicRouteData, ClusterInfo, TopicList, KVTable, DataVersion,
and the broker's RegisterBrokerBody (JSON, or the deflated form a broker sends with compressed=true)."""

import struct
import zlib

from .. import fastjson
from ..errors import RemotingProtocolError
from .routes import BrokerData, DataVersion, QueueData, TopicConfig, TopicRoute

Bean = fastjson.Bean


def queue_data_bean(qd: QueueData) -> Bean:
    return Bean(brokerName=qd.broker_name, perm=qd.perm, readQueueNums=qd.read_queue_nums,
                topicSysFlag=qd.topic_sys_flag, writeQueueNums=qd.write_queue_nums)  # fmt: skip


def broker_data_bean(bd: BrokerData) -> Bean:
    # brokerAddrs is a HashMap<Long, String>: integer keys, written unquoted by default
    return Bean(brokerAddrs=dict(sorted(bd.broker_addrs.items())), brokerName=bd.broker_name, cluster=bd.cluster,
                enableActingMaster=bd.enable_acting_master, zoneName=bd.zone_name)  # fmt: skip


def route_bean(route: TopicRoute) -> Bean:
    return Bean(
        brokerDatas=[broker_data_bean(b) for b in route.broker_datas],
        filterServerTable=route.filter_server_table,
        orderTopicConf=route.order_topic_conf,
        queueDatas=[queue_data_bean(q) for q in route.queue_datas],
    )


def cluster_info_bean(brokers: dict[str, BrokerData], clusters: dict[str, set[str]]) -> Bean:
    return Bean(
        brokerAddrTable={name: broker_data_bean(b) for name, b in brokers.items()},
        clusterAddrTable={c: sorted(names) for c, names in clusters.items()},
    )


def topic_list_bean(topics, broker_addr: str | None = None) -> Bean:
    return Bean(brokerAddr=broker_addr, topicList=list(topics))


def kv_table_bean(table: dict[str, str]) -> Bean:
    return Bean(table=dict(table))


def data_version_bean(v: DataVersion) -> Bean:
    return Bean(counter=v.counter, stateVersion=v.state_version, timestamp=v.timestamp)


def _int(obj: dict, name: str, default: int = 0) -> int:
    value = obj.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RemotingProtocolError(f"{name} is not an integer: {value!r}")
    return value


def _object(value, what: str) -> dict:
    if not isinstance(value, dict):
        raise RemotingProtocolError(f"{what} is not a JSON object")
    return value


def parse_data_version(obj) -> DataVersion:
    obj = _object(obj if obj is not None else {}, "dataVersion")
    return DataVersion(_int(obj, "stateVersion"), _int(obj, "timestamp"), _int(obj, "counter"))


def parse_topic_config(obj) -> TopicConfig:
    obj = _object(obj, "topicConfig")
    name = obj.get("topicName")
    if not isinstance(name, str):
        raise RemotingProtocolError("topicConfig without topicName")
    attributes = obj.get("attributes") or {}
    return TopicConfig(
        topic_name=name,
        read_queue_nums=_int(obj, "readQueueNums", 16),
        write_queue_nums=_int(obj, "writeQueueNums", 16),
        perm=_int(obj, "perm", 6),
        topic_filter_type=str(obj.get("topicFilterType", "SINGLE_TAG")),
        topic_sys_flag=_int(obj, "topicSysFlag"),
        order=bool(obj.get("order", False)),
        attributes={str(k): str(v) for k, v in _object(attributes, "attributes").items()},
    )


def parse_topic_config_line(text: str) -> TopicConfig:
    """TopicConfig.encode's compact form: "name read write perm filterType [attributes JSON]"."""
    parts = text.split(" ", 5)
    if len(parts) < 5:
        raise RemotingProtocolError(f"compact topic config has {len(parts)} fields: {text[:80]!r}")
    try:
        read, write, perm = int(parts[1]), int(parts[2]), int(parts[3])
    except ValueError:
        raise RemotingProtocolError(f"compact topic config numbers do not parse: {text[:80]!r}") from None
    attributes = fastjson.loads(parts[5]) if len(parts) > 5 and parts[5] else {}
    tc = TopicConfig(parts[0], read, write, perm, parts[4])
    tc.attributes = {str(k): str(v) for k, v in _object(attributes, "attributes").items()}
    return tc


def _wrapper(obj) -> tuple[DataVersion, dict[str, TopicConfig]]:
    obj = _object(obj if obj is not None else {}, "topicConfigSerializeWrapper")
    table = _object(obj.get("topicConfigTable") or {}, "topicConfigTable")
    configs = {}
    for tc in (parse_topic_config(v) for v in table.values()):
        configs[tc.topic_name] = tc
    return parse_data_version(obj.get("dataVersion")), configs


class _Inflated:
    def __init__(self, data: bytes, limit: int):
        try:
            # bounded: a small deflate stream must not inflate into gigabytes
            d = zlib.decompressobj()
            self.data = d.decompress(data, limit)
            if d.unconsumed_tail:
                raise RemotingProtocolError(f"compressed broker body inflates beyond {limit} bytes")
        except zlib.error as e:
            raise RemotingProtocolError(f"compressed broker body: {e}") from None
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RemotingProtocolError("compressed broker body truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def chunk(self) -> bytes:
        return self.take(self.int())


def parse_register_body(
    body: bytes, compressed: bool, version: int, limit: int = 64 << 20
) -> tuple[DataVersion, dict[str, TopicConfig], list[str]]:
    """RegisterBrokerBody (DefaultRequestProcessor.extractRegisterBrokerBodyFromRequest): the data version, the
    topic configs and the filter server list. Brokers before V3_0_11 send a bare TopicConfigSerializeWrapper."""
    from ..codes import Version

    if not body:
        return DataVersion(), {}, []
    if version < Version.V3_0_11:
        dv, configs = _wrapper(fastjson.loads(body))
        return dv, configs, []
    if not compressed:
        obj = _object(fastjson.loads(body), "RegisterBrokerBody")
        dv, configs = _wrapper(obj.get("topicConfigSerializeWrapper"))
        filters = obj.get("filterServerList") or []
        return dv, configs, [str(f) for f in filters]
    r = _Inflated(body, limit)
    dv = parse_data_version(fastjson.loads(r.chunk()))
    configs = {}
    for _ in range(r.int()):
        try:
            tc = parse_topic_config_line(r.chunk().decode("utf-8"))
        except UnicodeDecodeError:
            raise RemotingProtocolError("compact topic config is not UTF-8") from None
        configs[tc.topic_name] = tc
    filters = fastjson.loads(r.chunk()) or []
    # from V5_0_0 the topic queue mappings of static topics follow; rocketstore does not route static topics
    return dv, configs, [str(f) for f in filters]
