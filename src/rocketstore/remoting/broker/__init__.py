"""RocketMQ's broker over the remoting protocol (default port 10911), serving one MessageStore to RocketMQ 4.x
clients (Java DefaultMQProducer / DefaultMQPushConsumer, the C++ core and the clients built on it):
send (send.py), pull and lite pull with long polling (pull.py, hold.py), consumer offsets and queue offsets (offsets.py),
heartbeats and consumer lists (clients.py), delay levels (schedule.py), transactions (half messages,
END_TRANSACTION and the check-back to producers: transaction.py, over the store's pending state that the gRPC side
shares), and the topic table it registers with a name server (topics.py). The built-in name server's route table
is given as `routes`: the broker registers into it directly (never expiring) at start and whenever a topic is
created. Remote name servers (namesrvAddr, a cluster of brokers under one name server) are registered with over
remoting, at start, every registerNameServerPeriod and on every topic change, and unregistered from at close
(registration.py).

Queue locks for orderly consumers: locks.py. Send-back of failed messages (%RETRY%group, delay levels, %DLQ%group):
send_back.py, over the subscription groups (subscriptions.py, config/subscriptionGroup.json). Transactions: transaction.py
over the store's shared pending state (broker/transaction.py). mqadmin's requests: topic create/update/delete and topic
configs and stats (admin_topics.py), runtime info, broker config, connections and consume stats (admin.py, counting
in stats.py), lookups by msgId and key (lookup.py), offset resets, group offset clones and consume time spans (reset.py). With `acl` (a remoting.acl.PlainAcl, RocketMQ's aclEnable with a
plain_acl.yml) every request is checked before its handler."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, replace

from ...broker.transaction import Transactions
from ..acl import remoting_hook
from ..codes import RequestCode
from ..namesrv.routes import DataVersion
from ..server import RemotingServer
from .admin import BrokerAdmin
from .admin_stats import StatsAdmin
from .feature_off import FeatureOff
from .admin_topics import TopicAdmin
from .clients import Clients
from .hold import PullHold
from .locks import QueueLocks
from .lookup import Lookups
from .offsets import Offsets
from .pull import PullProcessor
from .registration import NameServerRegistration
from .reset import ResetProcessor
from .schedule import ScheduleService
from .send import SendProcessor
from .send_back import SendBack
from .stats import BrokerStats
from .store_admin import StoreAdmin
from .subscriptions import SubscriptionGroups
from .topics import RW, BrokerTopics
from .transaction import TransactionProcessor

log = logging.getLogger("rocketstore.remoting.broker")

DEFAULT_PORT = 10911
CHANNEL_EXPIRED_MS = 120_000
REGISTER_CHECK_S = 2.0  # ClientHousekeepingService: a client silent this long is dropped


@dataclass
class BrokerSettings:
    """The BrokerConfig options this broker honours, under RocketMQ's names and with its defaults (brokerName:
    rocketstore's, the name the gRPC side gives too)."""

    brokerClusterName: str = "DefaultCluster"
    brokerName: str = "rocketstore"
    brokerId: int = 0
    brokerIP1: str = "127.0.0.1"  # the address clients are given (advertised)
    listenPort: int = 0  # the advertised port; 0: the port bound
    brokerPermission: int = 6  # PermName.PERM_READ | PERM_WRITE
    autoCreateTopicEnable: bool = True
    defaultTopicQueueNums: int = 8
    longPollingEnable: bool = True
    notifyConsumerIdsChangedEnable: bool = True
    enablePropertyFilter: bool = False
    litePullMessageEnable: bool = True  # LITE_PULL_MESSAGE served (DefaultLitePullConsumer)
    useServerSideResetOffset: bool = True  # resets handed to the next pull (reset.py), not told to the clients
    rejectTransactionMessage: bool = False
    autoCreateSubscriptionGroup: bool = True
    flushConsumerOffsetInterval: int = 5000  # ms between writes of the consumer offsets (and at close)
    cgColdReadThreshold: int = 3 * 1024 * 1024  # shown by getColdDataFlowCtrInfo (feature_off.py)
    globalColdReadThreshold: int = 100 * 1024 * 1024
    maxHeldPulls: int = 16384  # rocketstore's own: pulls long polling at once (hold.py); more answer SYSTEM_BUSY
    # registration with remote name servers (registration.py)
    namesrvAddr: str = ""  # HOST:PORT;HOST:PORT
    registerNameServerPeriod: int = 30_000
    registerBrokerTimeoutMills: int = 24_000
    enableSlaveActingMaster: bool = False  # with it, heartbeatTimeoutMillis = brokerNotActiveTimeoutMillis is sent
    brokerNotActiveTimeoutMillis: int = 10_000
    brokerIP2: str = ""  # the HA address's host: brokerIP1 when not set
    haListenPort: int = 0  # 0: listenPort + 1, as BrokerStartup sets it

    @property
    def address(self) -> str:
        return f"{self.brokerIP1}:{self.listenPort}"

    @property
    def ha_server_addr(self) -> str:
        """BrokerController.getHAServerAddr: brokerIP2:haListenPort (rocketstore serves no HA; the name server
        requires the field and hands it to slaves)."""
        return f"{self.brokerIP2 or self.brokerIP1}:{self.haListenPort or self.listenPort + 1}"

    @classmethod
    def from_extra(cls, extra: dict, **overrides) -> "BrokerSettings":
        """Settings from a broker.conf's keys (StoreConfig.extra), then `overrides`; ValueError for a number that
        is none."""
        s = cls()
        for name, value in (extra or {}).items():
            if hasattr(s, name) and not name.startswith("_") and name != "address":
                current = getattr(s, name)
                if isinstance(current, bool):
                    value = str(value).strip().lower() == "true"
                elif isinstance(current, int):
                    try:
                        value = int(value)
                    except ValueError:
                        raise ValueError(f"broker.conf {name}={value!r}: not an integer") from None
                setattr(s, name, value)
        for name, value in overrides.items():
            setattr(s, name, value)
        return s


class Broker:
    def __init__(
        self, store, settings: BrokerSettings | None = None, routes=None, acl=None, namesrv_addresses=(),
        meter=None, **server_options,
    ):  # fmt: skip
        """`routes`: the built-in name server's RouteTable to register into directly; `namesrv_addresses`: the
        (host, port) of remote name servers to register with over remoting (registration.py); `meter`: the
        metrics' RemotingMeter, whose tallies the fast sends bump (the server's on_response counts the rest)."""
        self.store = store
        self.settings = settings or BrokerSettings()
        self.routes = routes  # the built-in name server's RouteTable, or None
        self.registration = NameServerRegistration(self, namesrv_addresses) if namesrv_addresses else None
        self.subscription_groups = SubscriptionGroups(self)  # `group in` it: containsSubscriptionGroup
        self.topics = BrokerTopics(store, self.settings, on_change=self.register)
        self.clients = Clients(self)
        self.offsets = Offsets(self)
        self.hold = PullHold(store, self.settings.maxHeldPulls)
        self.schedule = ScheduleService(store, self.arrived)
        self.locks = QueueLocks()
        self.transactions = None  # the store's shared pending state (broker/transaction.py), from start()
        self.txp = TransactionProcessor(self)
        self.send_back = SendBack(self)
        self.stats = BrokerStats(store)
        self.topic_admin = TopicAdmin(self)
        self.meter = meter
        self.sends = SendProcessor(self)
        handlers = {}
        for part in (self.sends, PullProcessor(self), self.offsets, self.clients, self.locks, self.txp,
                     self.send_back, self.subscription_groups, self.topic_admin, BrokerAdmin(self),
                     Lookups(self), ResetProcessor(self), StatsAdmin(self), StoreAdmin(self), FeatureOff(self)):  # fmt: skip
            handlers.update(part.handlers())
        for code in (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE):
            handlers[code] = self.stats.count_pull(handlers[code])
        if acl is not None:
            server_options["before_request"] = remoting_hook(acl)
        self.server = RemotingServer(handlers, name="broker", on_close=self.clients.connection_closed, **server_options)
        self._tasks: set[asyncio.Task] = set()
        self._version = DataVersion(0, int(time.time() * 1000), 0)
        self.mapping_version = DataVersion(0, self._version.timestamp, 0)  # no static topics: never changes
        self._rand = random.Random()

    async def start(self, host: str = "0.0.0.0", port: int = DEFAULT_PORT, fast_port: int | None = None) -> int:
        """Listen on host:port and, with `fast_port`, there too: RocketMQ's broker also serves on its listen port
        - 2 (fastRemotingServer), where 4.x Java clients send with sendMessageWithVIPChannel (their default).
        A fast port that cannot be bound is logged, not fatal (only those clients miss it)."""
        self.transactions = await asyncio.to_thread(Transactions.shared, self.store, self.store.config.extra)
        self.txp.start(self.transactions)
        port = await self.server.start(host, port)
        if fast_port is not None:
            try:
                await self.server.listen_also(host, fast_port)
            except OSError as e:
                log.warning("the broker's fast channel (port %d, where 4.x Java clients send by default) is not "
                            "served: %s; such clients need setVipChannelEnabled(false)", fast_port, e)  # fmt: skip
        if not self.settings.listenPort:  # advertise the port bound
            self.settings.listenPort = port
        self.server.fast = self._fast_sends(acl_on=self.server.before_request is not None)
        self.hold.start()
        self.schedule.start()
        self.spawn(self.offsets.flush_loop(self.settings.flushConsumerOffsetInterval / 1000))
        self.spawn(self._housekeeping())
        self.register()
        if self.registration is not None:
            await self.registration.start()
        if self.store.config.store_host != self.settings.address:  # what the C++ core sends failed messages back to
            log.info("the store writes %s as its messages' STOREHOST, not the broker's address %s: clients that "
                        "send failed messages back to it will miss the broker", self.store.config.store_host,
                        self.settings.address)  # fmt: skip
        log.info("broker %s listening on %s:%d, advertised as %s", self.settings.brokerName, host, port,
                 self.settings.address)  # fmt: skip
        return port

    async def close(self) -> None:
        if self.registration is not None:  # first, as RocketMQ's shutdown: routes stop naming it while it serves
            await self.registration.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.server.close()
        self.hold.stop()
        self.schedule.stop()
        if self.transactions is not None:
            self.txp.stop()
            await asyncio.to_thread(self.transactions.release)
            self.transactions = None
        await asyncio.to_thread(self.offsets.flush)
        if self.routes is not None:
            s = self.settings
            self.routes.unregister_broker(s.brokerClusterName, s.address, s.brokerName, s.brokerId)

    def _fast_sends(self, acl_on: bool) -> dict:
        """The server's fast calls: the plain sends answered in one call (fast_send.py), where sends are put on
        the event loop (not SYNC_FLUSH) and no ACL checks each request."""
        if acl_on or not self.sends.inline:
            return {}
        from ...engine import fast_send
        from .fast_send import state_for

        state = state_for(self, self.sends.answer, None if self.meter is None else self.meter.state)

        def send(cmd, conn):
            return fast_send(state, cmd, conn.remote)

        return {RequestCode.SEND_MESSAGE_V2: send, RequestCode.SEND_MESSAGE: send}

    # ------------------------------------------------------------------ helpers for the processors
    def spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def arrived(self, topic: str | None = None, queue_id: int | None = None, put=None) -> None:
        """A put went through, to topic's queue queue_id (or somewhere: None; `put`: its PutResult): the pulls
        held on it look again (callable from any thread)."""
        self.hold.arrived_threadsafe(topic, queue_id, put)

    def random_queue(self, count: int) -> int:
        return self._rand.randrange(max(count, 1))

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)

    @property
    def data_version(self) -> DataVersion:
        """The topic table's data version (bumped by each registration)."""
        return self._version

    def registered_topics(self) -> dict:
        """Every topic as registered: a broker not readable or not writable (brokerPermission) registers each
        topic's perm masked by its own."""
        topics = self.topics.all()
        mask = self.settings.brokerPermission
        if mask & RW != RW:
            topics = {n: replace(tc, perm=tc.perm & mask) for n, tc in topics.items()}
        return topics

    def register(self) -> None:
        """registerBrokerAll, a new data version: into the built-in name server directly, and a registration now
        with the remote ones (callable from any thread)."""
        s = self.settings
        self._version = DataVersion(0, int(time.time() * 1000), self._version.counter + 1)
        if self.registration is not None:
            self.registration.register_soon()
        if self.routes is None:
            return
        self.routes.register_broker(
            s.brokerClusterName, s.address, s.brokerName, s.brokerId, s.address, self.registered_topics(),
            DataVersion(self._version.state_version, self._version.timestamp, self._version.counter),
            int(time.time() * 1000), timeout_ms=None, refuse_unregistered_single=False,
        )  # fmt: skip

    def _topics_signature(self) -> tuple:
        return tuple(sorted((n, c.get("readQueueNums"), c.get("writeQueueNums"), c.get("perm"))
                            for n, c in list(self.store.topic_configs.items())))  # fmt: skip

    async def _housekeeping(self) -> None:
        """Every few seconds: clients not heard of are dropped; topics another side created (gRPC, the CLI on
        a stopped store) are registered (RocketMQ's broker registers every 30 s)."""
        registered = self._topics_signature()
        while True:
            await asyncio.sleep(REGISTER_CHECK_S)
            self.clients.expire(CHANNEL_EXPIRED_MS)
            now = self._topics_signature()
            if now != registered:
                registered = now
                self.register()
