"""The name server's route tables (RocketMQ's RouteInfoManager): which brokers a cluster has, which addresses a
broker name has (brokerId 0 is the master), which queues each broker serves for each topic, and when each broker
was last heard of. A broker registers remotely (REGISTER_BROKER) or, for rocketstore's built-in broker, by calling
`register_broker` directly; a broker registered with `timeout_ms=None` never expires."""

import threading
from dataclasses import dataclass, field

MASTER_ID = 0
PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 8, 4, 2, 1
DEFAULT_BROKER_TIMEOUT_MS = 120_000  # RouteInfoManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
FLAG_UNIT, FLAG_UNIT_SUB = 0x1, 0x2  # TopicSysFlag


@dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False

    def copy(self) -> "BrokerData":
        return BrokerData(self.cluster, self.broker_name, dict(self.broker_addrs), self.zone_name,
                          self.enable_acting_master)  # fmt: skip


@dataclass
class DataVersion:
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0


@dataclass
class BrokerLive:
    last_update_ms: int
    timeout_ms: int | None  # None: never expires (the built-in broker)
    data_version: DataVersion
    connection: int | None  # the connection id it registered over, if remote
    ha_server_addr: str | None


@dataclass
class TopicRoute:
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    filter_server_table: dict[str, list[str]]
    order_topic_conf: str | None = None


@dataclass
class RegisterResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None


class RouteTable:
    def __init__(self, delete_topic_with_broker_registration: bool = False):
        self.lock = threading.RLock()
        self.topic_queues: dict[str, dict[str, QueueData]] = {}
        self.brokers: dict[str, BrokerData] = {}
        self.clusters: dict[str, set[str]] = {}
        self.live: dict[tuple[str, str], BrokerLive] = {}
        self.filter_servers: dict[tuple[str, str], list[str]] = {}
        self.delete_topic_with_broker_registration = delete_topic_with_broker_registration

    # -- registration ------------------------------------------------------------------------------------------

    def register_broker(
        self,
        cluster: str,
        addr: str,
        name: str,
        broker_id: int,
        ha_server_addr: str | None,
        topic_configs: dict[str, TopicConfig],
        data_version: DataVersion,
        now_ms: int,
        *,
        zone_name: str | None = None,
        timeout_ms: int | None = DEFAULT_BROKER_TIMEOUT_MS,
        enable_acting_master: bool | None = None,
        filter_servers: list[str] | None = None,
        connection: int | None = None,
        refuse_unregistered_single: bool = True,
    ) -> RegisterResult | None:
        """None when RocketMQ's namesrv refuses ("register broker failed"): a registration of exactly one topic
        (a broker's registerSingleTopicAll) from a broker id not registered yet. A direct caller that registers
        its first topic alone passes refuse_unregistered_single=False."""
        with self.lock:
            result = RegisterResult()
            self.clusters.setdefault(cluster, set()).add(name)
            broker = self.brokers.get(name)
            first = broker is None
            if broker is None:
                broker = self.brokers[name] = BrokerData(cluster, name)
            old_version_broker = enable_acting_master is None
            broker.enable_acting_master = bool(enable_acting_master)
            broker.zone_name = zone_name
            addrs = broker.broker_addrs
            # one address has one broker id: a slave turned master drops its old id
            for bid in [b for b, a in addrs.items() if a == addr and b != broker_id]:
                del addrs[bid]
            old_addr = addrs.get(broker_id)
            if old_addr is not None and old_addr != addr:
                old_live = self.live.get((cluster, old_addr))
                if old_live is not None and old_live.data_version.state_version > data_version.state_version:
                    self.live.pop((cluster, addr), None)
                    return result
            if refuse_unregistered_single and broker_id not in addrs and len(topic_configs) == 1:
                return None
            previous = addrs.get(broker_id)
            addrs[broker_id] = addr
            first = first or not previous
            is_master = broker_id == MASTER_ID
            is_prime_slave = not old_version_broker and not is_master and broker_id == min(addrs)
            if is_master or is_prime_slave:
                read_only = is_prime_slave and broker.enable_acting_master
                self._take_topics(cluster, addr, name, topic_configs, data_version, first, read_only)
            self.live[(cluster, addr)] = BrokerLive(now_ms, timeout_ms, data_version, connection, ha_server_addr)
            if filter_servers is not None:
                if filter_servers:
                    self.filter_servers[(cluster, addr)] = list(filter_servers)
                else:
                    self.filter_servers.pop((cluster, addr), None)
            if not is_master:
                self._tell_master(result, cluster, addrs.get(MASTER_ID))
            return result

    def _take_topics(self, cluster, addr, name, topic_configs, data_version, first: bool, read_only: bool) -> None:
        """A master's (or an acting prime slave's, read-only) topics into the routes: all of them when the broker
        is new or its data version changed, else the ones the routes lack; with deleteTopicWithBrokerRegistration,
        the broker's topics it no longer names out."""
        if self.delete_topic_with_broker_registration:
            for topic in [t for t, q in self.topic_queues.items() if name in q and t not in topic_configs]:
                self._remove_queue(topic, name)
        changed = self._version_changed(cluster, addr, data_version)
        for tc in topic_configs.values():
            if first or changed or name not in self.topic_queues.get(tc.topic_name, {}):
                self._put_queue(name, tc, tc.perm & ~PERM_WRITE if read_only else tc.perm)

    def _tell_master(self, result: RegisterResult, cluster: str, master: str | None) -> None:
        """A slave's answer names its master and the master's HA address, when the master is live."""
        master_live = self.live.get((cluster, master)) if master else None
        if master_live is not None:
            result.ha_server_addr = master_live.ha_server_addr
            result.master_addr = master

    def _version_changed(self, cluster: str, addr: str, version: DataVersion) -> bool:
        live = self.live.get((cluster, addr))
        return live is None or live.data_version != version

    def _put_queue(self, broker_name: str, tc: TopicConfig, perm: int) -> None:
        qd = QueueData(broker_name, tc.read_queue_nums, tc.write_queue_nums, perm, tc.topic_sys_flag)
        self.topic_queues.setdefault(tc.topic_name, {})[broker_name] = qd

    def _remove_queue(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queues.get(topic)
        if queues is not None:
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queues[topic]

    def unregister_broker(self, cluster: str, addr: str, name: str, broker_id: int) -> None:
        with self.lock:
            self.live.pop((cluster, addr), None)
            self.filter_servers.pop((cluster, addr), None)
            broker = self.brokers.get(name)
            removed_name = False
            if broker is not None:
                for bid in [b for b, a in broker.broker_addrs.items() if a == addr]:
                    del broker.broker_addrs[bid]
                if not broker.broker_addrs:
                    del self.brokers[name]
                    removed_name = True
            if removed_name:
                names = self.clusters.get(cluster)
                if names is not None:
                    names.discard(name)
                    if not names:
                        del self.clusters[cluster]
                for topic in list(self.topic_queues):
                    self._remove_queue(topic, name)
            elif broker is not None and broker.enable_acting_master and min(broker.broker_addrs) > MASTER_ID:
                for queues in self.topic_queues.values():
                    if name in queues:
                        queues[name].perm &= ~PERM_WRITE

    def heartbeat(self, cluster: str, addr: str, now_ms: int) -> None:
        with self.lock:
            live = self.live.get((cluster, addr))
            if live is not None:
                live.last_update_ms = now_ms

    def data_version(self, cluster: str, addr: str) -> DataVersion | None:
        with self.lock:
            live = self.live.get((cluster, addr))
            return None if live is None else live.data_version

    def _unregister_addr(self, key: tuple[str, str]) -> None:
        cluster, addr = key
        for broker in list(self.brokers.values()):
            if broker.cluster != cluster:
                continue
            for bid, a in list(broker.broker_addrs.items()):
                if a == addr:
                    self.unregister_broker(cluster, addr, broker.broker_name, bid)
                    return
        self.live.pop(key, None)

    def expire(self, now_ms: int) -> list[tuple[str, str]]:
        """Unregister the brokers not heard of within their timeout (scanNotActiveBroker)."""
        with self.lock:
            gone = [
                k for k, v in self.live.items() if v.timeout_ms is not None and v.last_update_ms + v.timeout_ms < now_ms
            ]
            for key in gone:
                self._unregister_addr(key)
            return gone

    def connection_closed(self, connection: int) -> None:
        """A broker's registering connection closed: unregister it (onChannelDestroy)."""
        with self.lock:
            for key in [k for k, v in self.live.items() if v.connection == connection]:
                self._unregister_addr(key)

    # -- queries -----------------------------------------------------------------------------------------------

    def route(self, topic: str) -> TopicRoute | None:
        with self.lock:
            queues = self.topic_queues.get(topic)
            if not queues:
                return None
            brokers = [self.brokers[n].copy() for n in sorted(queues) if n in self.brokers]
            if not brokers:
                return None
            filters: dict[str, list[str]] = {}
            if self.filter_servers:
                for b in brokers:
                    for addr in b.broker_addrs.values():
                        filters[addr] = list(self.filter_servers.get((b.cluster, addr)) or [])
            qds = [QueueData(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
                   for _, q in sorted(queues.items())]  # fmt: skip
            return TopicRoute(qds, brokers, filters)

    def topics(self) -> list[str]:
        with self.lock:
            return list(self.topic_queues)

    def topics_of_cluster(self, cluster: str) -> list[str]:
        with self.lock:
            names = self.clusters.get(cluster) or set()
            return [t for t, q in self.topic_queues.items() if names & q.keys()]

    def topics_with_flag(self, include: int, exclude: int = 0) -> list[str]:
        """Topics whose queue data on some broker has every `include` bit and none of `exclude`."""
        with self.lock:
            out = []
            for topic, queues in self.topic_queues.items():
                for qd in queues.values():
                    if qd.topic_sys_flag & include == include and not qd.topic_sys_flag & exclude:
                        out.append(topic)
                        break
            return out

    def system_topics(self) -> tuple[list[str], str | None]:
        """Cluster and broker names (each is a system topic) and one broker address (getSystemTopicList)."""
        with self.lock:
            names: list[str] = []
            for cluster, brokers in self.clusters.items():
                names.append(cluster)
                names.extend(sorted(brokers))
            addr = next((next(iter(b.broker_addrs.values())) for b in self.brokers.values() if b.broker_addrs), None)
            return names, addr

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        with self.lock:
            if not cluster:
                self.topic_queues.pop(topic, None)
                return
            for name in self.clusters.get(cluster) or ():
                self._remove_queue(topic, name)

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV: every broker named must be registered, else nothing changes."""
        with self.lock:
            if not queue_datas or any(qd.broker_name not in self.brokers for qd in queue_datas):
                return
            queues = self.topic_queues.setdefault(topic, {})
            for qd in queue_datas:
                queues[qd.broker_name] = qd

    def set_write_perm(self, broker_name: str, writable: bool) -> int:
        """WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER: the number of topics changed."""
        with self.lock:
            count = 0
            for queues in self.topic_queues.values():
                qd = queues.get(broker_name)
                if qd is not None:
                    qd.perm = PERM_READ | PERM_WRITE if writable else qd.perm & ~PERM_WRITE
                    count += 1
            return count

    def member_group(self, cluster: str, broker_name: str) -> dict[int, str]:
        with self.lock:
            broker = self.brokers.get(broker_name)
            return dict(broker.broker_addrs) if broker is not None else {}
