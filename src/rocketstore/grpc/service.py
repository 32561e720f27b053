"""apache.rocketmq.v2.MessagingService on top of one MessageStore, answering as RocketMQ's proxy does
(proxy/grpc/v2: RouteActivity, SendMessageActivity, ReceiveMessageActivity, AckMessageActivity,
ChangeInvisibleDurationActivity, ClientActivity)."""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import threading
import time

from .protocol import definition_pb2 as pb
from .protocol import service_pb2 as spb
from .protocol import service_pb2_grpc as sgrpc


from ..config.topics import DEFAULT_QUEUE_NUMS
from ..errors import RocketStoreError
from ..filter import FilterSyntaxError
from . import convert as C
from . import validator as rules
from ..broker.pop import HandleError, Handle, OffsetFlush, PopState, now_ms
from . import assignment as _assignment
from .retry import RetryManager
from .renew import RenewManager
from ..broker.transaction import Transactions
from .transactions_grpc import end_transaction, grpc_checker
from ..broker.delay import DelayService
from ..broker.fifo import SubscriptionGroups
from ..engine import java_string_hash

log = logging.getLogger("rocketstore.serve")
Code = pb.Code

MESSAGE_TYPES = {
    "NORMAL": [pb.MessageType.NORMAL],
    "FIFO": [pb.MessageType.FIFO],
    "DELAY": [pb.MessageType.DELAY],
    "TRANSACTION": [pb.MessageType.TRANSACTION],
    "MIXED": [pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION],
}
PERM_READ, PERM_WRITE = 4, 2
DEFAULT_INVISIBLE_MS = 60_000  # ProxyConfig.defaultInvisibleTimeMills (auto renew)
EXPIRED = "receipt handle is expired"  # an ack's answer for a handle whose invisible time ended


@dataclasses.dataclass
class ServeConfig:
    """The proxy's settings that matter here, under ProxyConfig's / BrokerConfig's names in broker.conf."""

    host: str = "127.0.0.1"
    port: int = 8081
    broker_name: str = "rocketstore"  # brokerName
    max_message_size: int = 4 * 1024 * 1024  # maxMessageSize (the store's)
    min_invisible_ms_for_recv: int = 10_000  # minInvisibleTimeMillsForRecv
    max_invisible_ms: int = 12 * 3600 * 1000  # maxInvisibleTimeMills
    min_long_polling_ms: int = 5_000  # grpcClientConsumerMinLongPollingTimeoutMillis
    max_long_polling_ms: int = 20_000  # grpcClientConsumerMaxLongPollingTimeoutMillis
    long_polling_batch_size: int = 32  # grpcClientConsumerLongPollingBatchSize
    producer_max_attempts: int = 3  # grpcClientProducerMaxAttempts
    producer_backoff_initial_ms: int = 10  # grpcClientProducerBackoffInitialMillis
    producer_backoff_max_ms: int = 1000  # grpcClientProducerBackoffMaxMillis
    producer_backoff_multiplier: int = 2  # grpcClientProducerBackoffMultiplier
    enable_topic_message_type_check: bool = True  # enableTopicMessageTypeCheck
    retry_max_times: int = 16  # SubscriptionGroupConfig.retryMaxTimes
    auto_create_topic_enable: bool = True  # autoCreateTopicEnable
    default_topic_queue_nums: int = DEFAULT_QUEUE_NUMS  # defaultTopicQueueNums (the library's one default)
    # capacity (aio_service.py): streams and long polls are coroutines, unary calls and poll attempts run on
    # two separate thread pools, so no number of open streams or polls can take the unary calls' threads
    grpc_threads: int = 16 + 2 * (os.cpu_count() or 1)  # grpcThreadPoolNums: threads for unary calls
    grpc_queue_capacity: int = 100_000  # grpcThreadPoolQueueCapacity: unary calls waiting
    max_telemetry_streams: int = 10_000  # open Telemetry streams (rocketstore's own limit)
    max_long_polls: int = 10_000  # maxPopPollingSize: ReceiveMessage calls polling
    long_polling_threads: int = 4  # threads trying pops for the long polls
    # receipt handle renewal for auto_renew receives (renew.py)
    enable_proxy_auto_renew: bool = True  # enableProxyAutoRenew
    default_invisible_ms: int = DEFAULT_INVISIBLE_MS  # defaultInvisibleTimeMills
    renew_ahead_ms: int = 10_000  # renewAheadTimeMillis
    renew_slice_ms: int = 0  # renewSliceTimeMillis (0: RenewStrategyPolicy)
    renew_max_ms: int = 3 * 3600 * 1000  # renewMaxTimeMillis
    renew_schedule_period_ms: int = 5_000  # renewSchedulePeriodMillis
    invisible_ms_when_clear: int = 1_000  # invisibleTimeMillisWhenClear
    max_renew_retry_times: int = 3  # maxRenewRetryTimes
    channel_expired_ms: int = 120_000  # channelExpiredTimeout
    flush_consumer_offset_ms: int = 5_000  # flushConsumerOffsetInterval: pop groups' offsets to the file

    KEYS = {
        "brokerName": "broker_name",
        "maxMessageSize": "max_message_size",
        "minInvisibleTimeMillsForRecv": "min_invisible_ms_for_recv",
        "maxInvisibleTimeMills": "max_invisible_ms",
        "grpcClientConsumerMinLongPollingTimeoutMillis": "min_long_polling_ms",
        "grpcClientConsumerMaxLongPollingTimeoutMillis": "max_long_polling_ms",
        "grpcClientConsumerLongPollingBatchSize": "long_polling_batch_size",
        "grpcClientProducerMaxAttempts": "producer_max_attempts",
        "grpcClientProducerBackoffInitialMillis": "producer_backoff_initial_ms",
        "grpcClientProducerBackoffMaxMillis": "producer_backoff_max_ms",
        "grpcClientProducerBackoffMultiplier": "producer_backoff_multiplier",
        "enableTopicMessageTypeCheck": "enable_topic_message_type_check",
        "retryMaxTimes": "retry_max_times",
        "autoCreateTopicEnable": "auto_create_topic_enable",
        "defaultTopicQueueNums": "default_topic_queue_nums",
        "grpcThreadPoolNums": "grpc_threads",
        "grpcThreadPoolQueueCapacity": "grpc_queue_capacity",
        "maxTelemetryStreams": "max_telemetry_streams",
        "maxPopPollingSize": "max_long_polls",
        "longPollingThreadPoolNums": "long_polling_threads",
        "enableProxyAutoRenew": "enable_proxy_auto_renew",
        "defaultInvisibleTimeMills": "default_invisible_ms",
        "renewAheadTimeMillis": "renew_ahead_ms",
        "renewSliceTimeMillis": "renew_slice_ms",
        "renewMaxTimeMillis": "renew_max_ms",
        "renewSchedulePeriodMillis": "renew_schedule_period_ms",
        "invisibleTimeMillisWhenClear": "invisible_ms_when_clear",
        "maxRenewRetryTimes": "max_renew_retry_times",
        "channelExpiredTimeout": "channel_expired_ms",
        "flushConsumerOffsetInterval": "flush_consumer_offset_ms",
    }

    @classmethod
    def from_store_config(cls, store_config, **overrides) -> "ServeConfig":
        values: dict = {"max_message_size": store_config.max_message_size}
        for key, raw in (store_config.extra or {}).items():
            name = cls.KEYS.get(key)
            if name is None:
                continue
            text = str(raw).strip()
            if name in ("enable_topic_message_type_check", "auto_create_topic_enable", "enable_proxy_auto_renew"):
                values[name] = text.lower() == "true"
            elif name == "broker_name":
                values[name] = text
            else:
                values[name] = int(text)
        values.update(overrides)
        return cls(**values)


def _status(code: int, message: str | None = None) -> pb.Status:
    return pb.Status(code=code, message=message if message is not None else Code.Name(code))


class _Client:
    """What the server knows of one client (by x-mq-client-id): its settings and its Telemetry stream."""

    def __init__(self, client_id: str):
        self.client_id = client_id
        self.settings: pb.Settings | None = None
        self.outbox: queue.Queue = queue.Queue()
        self.last_seen = time.monotonic()


@dataclasses.dataclass
class ReceivePlan:
    """A checked ReceiveMessage request: what to pop, for how long to poll."""

    group: str
    topic: str
    queue_ids: list
    batch: int
    invisible: int
    tags: str | None
    sql: str | None
    polling_ms: int
    client_id: str | None  # auto_renew: the client whose handles are renewed


class MessagingService(sgrpc.MessagingServiceServicer):
    def __init__(self, store, config: ServeConfig):
        self.store = store
        self.config = config
        self.pop = PopState(store, config.broker_name)
        self.retry = RetryManager(store, self.pop)  # retry topic, revive, dead letter (retry.py)
        self._put_lock = threading.Lock()
        self._rr: dict[str, int] = {}
        self._clients: dict[str, _Client] = {}
        self._clients_lock = threading.Lock()
        self.stopping = threading.Event()
        extra = getattr(store.config, "extra", None) or {}
        # half messages and their checks (transaction.py): one state per store, shared with the remoting broker
        self.tx = Transactions.shared(store, extra)
        self._tx_checker = self.tx.add_checker(grpc_checker(self.producer_outboxes))
        self.delay = DelayService(store, extra)  # delivery timestamps (delay.py)
        self.groups = SubscriptionGroups(store.root)  # FIFO groups (fifo.py)
        self.delay.start()
        self.renew = RenewManager(  # auto_renew handles (renew.py)
            lambda group, topic, h, ms: self.pop.change_invisible(group, self.retry.topic_of(group, topic, h), h, ms),
            self._client_alive,
            config,
        )
        self.renew.start()
        # the pop groups' offsets to consumerOffset.json on the broker's schedule (and at close: PopState.close)
        self.offset_flush = OffsetFlush(self.pop, config.flush_consumer_offset_ms / 1000.0)
        self.offset_flush.start()

    def _client_alive(self, client_id: str) -> bool:
        """The consumer manager's view: registered and heard of within channelExpiredTimeout."""
        with self._clients_lock:
            c = self._clients.get(client_id)
            return c is not None and (time.monotonic() - c.last_seen) * 1000 < self.config.channel_expired_ms

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _metadata(context) -> dict[str, str]:
        return {k: v for k, v in (context.invocation_metadata() or ())}

    def client_of(self, context) -> _Client | None:
        """The calling client (by its x-mq-client-id; registered on its first call), heard of now; None for a
        call without a client id."""
        cid = self._metadata(context).get("x-mq-client-id")
        if not cid:
            return None
        with self._clients_lock:
            c = self._clients.get(cid)
            if c is None:
                c = self._clients[cid] = _Client(cid)
            c.last_seen = time.monotonic()
            return c

    def client_settings(self, client_id: str) -> pb.Settings | None:
        """The settings a client sent on its Telemetry stream, or None (unknown client, or none sent yet)."""
        with self._clients_lock:
            c = self._clients.get(client_id)
            return c.settings if c is not None else None

    def connected_clients(self) -> list[dict]:
        """The clients heard of within channelExpiredTimeout, for the console and the connection gauges: id,
        kind (producer / consumer, from the settings sent on Telemetry), group (a consumer's)."""
        with self._clients_lock:
            clients = list(self._clients.values())
        out = []
        for c in clients:
            if (time.monotonic() - c.last_seen) * 1000 >= self.config.channel_expired_ms:
                continue
            s = c.settings
            kind, group = "producer", ""
            if s is not None and s.HasField("subscription"):
                kind, group = "consumer", s.subscription.group.name
            language = pb.Language.Name(s.user_agent.language).lower() if s is not None else ""
            version = s.user_agent.version if s is not None else ""
            out.append({"protocol": "grpc", "id": c.client_id, "kind": kind, "group": group,
                        "language": language, "version": version})  # fmt: skip
        return out

    def producer_outboxes(self, topic: str) -> list:
        """The Telemetry outboxes of the clients whose settings publish `topic`, newest first: where a
        transaction check goes."""
        with self._clients_lock:
            clients = list(self._clients.values())
        out = []
        for c in sorted(clients, key=lambda c: c.last_seen, reverse=True):
            s = c.settings
            if s is not None and s.HasField("publishing") and any(t.name == topic for t in s.publishing.topics):
                out.append(c.outbox)
        return out

    def _endpoints(self) -> pb.Endpoints:
        host = self.config.host
        scheme = pb.AddressScheme.IPv6 if ":" in host else pb.AddressScheme.IPv4
        if not _is_ip(host):
            scheme = pb.AddressScheme.DOMAIN_NAME
        return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=self.config.port)])

    def _topic_exists(self, topic: str) -> bool:
        return topic in self.store.topic_configs or topic in self.store.topics()

    def _ensure_topic(self, topic: str) -> tuple[int, str] | None:
        """(code, why) to answer when a client may not use the topic, else None (auto-creating it when
        allowed)."""
        refusal = rules.topic_refusal(topic)
        if refusal:
            return refusal
        if self._topic_exists(topic):
            return None
        if not self.config.auto_create_topic_enable:
            return Code.TOPIC_NOT_FOUND, f"topic {topic!r} not found"
        with self._put_lock:
            if not self._topic_exists(topic):
                self.store.create_topic(topic, self.config.default_topic_queue_nums)
        return None

    @staticmethod
    def _topic_and_group_refusal(topic: str, group: str) -> tuple[int, str] | None:
        """GrpcValidator.validateTopicAndConsumerGroup."""
        return rules.topic_refusal(topic) or rules.group_refusal(group)

    def _queue_nums(self, topic: str) -> tuple[int, int, int]:
        """(readQueueNums, writeQueueNums, perm) of a topic."""
        cfg = self.store.topic_configs.get(topic)
        if cfg:
            r = int(cfg.get("readQueueNums") or 0)
            w = int(cfg.get("writeQueueNums") or 0)
            perm = int(cfg.get("perm") or 6)
            if r or w:
                return r, w, perm
        n = self.store.queue_count(topic)
        return n, n, 6

    def _accept_types(self, topic: str) -> list[int]:
        cfg = self.store.topic_configs.get(topic) or {}
        kind = (cfg.get("attributes") or {}).get("message.type", "NORMAL")
        return MESSAGE_TYPES.get(str(kind).upper(), [pb.MessageType.MESSAGE_TYPE_UNSPECIFIED])

    # ------------------------------------------------------------------ route
    def QueryRoute(self, request, context):
        topic = request.topic.name
        problem = self._ensure_topic(topic)
        if problem is not None:
            return spb.QueryRouteResponse(status=_status(*problem))
        r, w, perm = self._queue_nums(topic)
        broker = pb.Broker(name=self.config.broker_name, id=0, endpoints=self._endpoints())
        types = self._accept_types(topic)
        queues = []
        readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
        if readable and writable:
            rw = min(r, w)
            kinds = [pb.Permission.READ] * (r - rw) + [pb.Permission.WRITE] * (w - rw) + [pb.Permission.READ_WRITE] * rw
        elif writable:
            kinds = [pb.Permission.WRITE] * w
        elif readable:
            kinds = [pb.Permission.READ] * r
        else:
            kinds = [pb.Permission.NONE] * max(1, r, w)
        for i, p in enumerate(kinds):
            queues.append(
                pb.MessageQueue(topic=request.topic, id=i, permission=p, broker=broker, accept_message_types=types)
            )
        return spb.QueryRouteResponse(status=_status(Code.OK), message_queues=queues)

    # ------------------------------------------------------------------ client lifecycle
    def Heartbeat(self, request, context):
        self.client_of(context)
        return spb.HeartbeatResponse(status=_status(Code.OK))

    def NotifyClientTermination(self, request, context):
        cid = self._metadata(context).get("x-mq-client-id")
        with self._clients_lock:
            c = self._clients.pop(cid, None) if cid else None
        if c is not None:
            c.outbox.put(None)
        if cid:
            self.renew.client_gone(cid)  # CLIENT_UNREGISTER -> clearGroup: its messages come back soon
        return spb.NotifyClientTerminationResponse(status=_status(Code.OK))

    def _merged_settings(self, settings: pb.Settings) -> pb.Settings:
        """GrpcClientSettingsManager: the client's settings with the server's publishing / subscription
        values, backoff policy and metric switch."""
        s = pb.Settings()
        s.CopyFrom(settings)
        cfg = self.config
        if settings.HasField("publishing"):
            s.backoff_policy.max_attempts = cfg.producer_max_attempts
            eb = s.backoff_policy.exponential_backoff
            eb.initial.FromMilliseconds(cfg.producer_backoff_initial_ms)
            eb.max.FromMilliseconds(cfg.producer_backoff_max_ms)
            eb.multiplier = cfg.producer_backoff_multiplier
            s.publishing.validate_message_type = cfg.enable_topic_message_type_check
            s.publishing.max_body_size = cfg.max_message_size
        elif settings.HasField("subscription"):
            s.subscription.receive_batch_size = cfg.long_polling_batch_size
            s.subscription.long_polling_timeout.FromMilliseconds(cfg.max_long_polling_ms)
            s.subscription.fifo = self.groups.is_fifo(settings.subscription.group.name)
            s.backoff_policy.max_attempts = cfg.retry_max_times + 1
            # SubscriptionGroupConfig's default CUSTOMIZED retry policy: 1s 5s 10s 30s 1m 2m 3m ... 2h
            nxt = s.backoff_policy.customized_backoff.next
            del nxt[:]
            for sec in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200):
                d = nxt.add()
                d.seconds = sec
        s.metric.on = False
        return s

    def telemetry_command(self, client: _Client | None, cmd) -> spb.TelemetryCommand | None:
        """The answer to one command a client sends on its Telemetry stream (ClientActivity), or None. The
        stream itself is served by aio_service.py."""
        if cmd.WhichOneof("command") != "settings":
            return None  # thread stack traces, verify-message results: nothing asked for them yet
        settings = cmd.settings
        if not (settings.HasField("publishing") or settings.HasField("subscription")):
            return spb.TelemetryCommand(
                status=_status(Code.BAD_REQUEST, "there is no publishing or subscription data in settings")
            )
        refusal = None
        if settings.HasField("publishing"):
            for t in settings.publishing.topics:
                refusal = refusal or rules.topic_refusal(t.name)
        else:
            refusal = rules.group_refusal(settings.subscription.group.name)
        if refusal:
            return spb.TelemetryCommand(status=_status(*refusal))
        if client is not None:
            client.settings = settings
        return spb.TelemetryCommand(status=_status(Code.OK), settings=self._merged_settings(settings))

    # ------------------------------------------------------------------ send
    def _select_queue(self, topic: str, msg: pb.Message, single: bool) -> int:
        _, w, _ = self._queue_nums(topic)
        w = max(w, 1)
        group = msg.system_properties.message_group
        if single and group:
            return C.consistent_hash(java_string_hash(group), w)
        turn = self._rr.get(topic, 0)
        self._rr[topic] = turn + 1
        return turn % w

    def SendMessage(self, request, context):
        if not request.messages:
            return spb.SendMessageResponse(status=_status(Code.BAD_REQUEST, "no message to send"))
        topic = request.messages[0].topic.name
        if any(m.topic.name != topic for m in request.messages):
            return spb.SendMessageResponse(
                status=_status(Code.MESSAGE_CORRUPTED, "messages of one request must have the same topic")
            )
        problem = self._ensure_topic(topic)
        if problem is not None:
            return spb.SendMessageResponse(status=_status(*problem))
        try:
            for m in request.messages:
                C.check_delivery_time(m, self.delay.max_delay_ms)
            msgs = [C.to_store(m, self.config.max_message_size, context.peer()) for m in request.messages]
        except C.ConvertError as e:
            return spb.SendMessageResponse(status=_status(e.code, str(e)))
        entries = []
        with self._put_lock:
            qid = self._select_queue(topic, request.messages[0], len(request.messages) == 1)
            if len(msgs) == 1:
                results = [self._put_routed(msgs[0], qid)]
            elif any(m.sys_flag & C.TRANSACTION_PREPARED_TYPE or self.delay.is_delayed(m) for m in msgs):
                results = [self._put_routed(m, qid) for m in msgs]
            else:
                batch = self.store.put_batch(msgs, qid)
                results = list(batch.results) if batch.ok else [batch] * len(msgs)
        codes = set()
        for pbm, r in zip(request.messages, results):
            if r.ok:
                e = spb.SendResultEntry(
                    status=_status(Code.OK), message_id=pbm.system_properties.message_id, offset=r.queue_offset
                )
                if pbm.system_properties.message_type == pb.MessageType.TRANSACTION:
                    e.transaction_id = pbm.system_properties.message_id  # the broker's: the UNIQ_KEY
            else:
                name = r.status.name
                code = {
                    "FLUSH_DISK_TIMEOUT": Code.MASTER_PERSISTENCE_TIMEOUT,
                    "FLUSH_SLAVE_TIMEOUT": Code.SLAVE_PERSISTENCE_TIMEOUT,
                    "SLAVE_NOT_AVAILABLE": Code.HA_NOT_AVAILABLE,
                    "MESSAGE_ILLEGAL": Code.BAD_REQUEST,
                    "PROPERTIES_SIZE_EXCEEDED": Code.MESSAGE_PROPERTIES_TOO_LARGE,
                }.get(name, Code.INTERNAL_SERVER_ERROR)
                e = spb.SendResultEntry(status=_status(code, f"send message failed, sendStatus={name}"))
            entries.append(e)
            codes.add(e.status.code)
        if len(codes) > 1:
            status = _status(Code.MULTIPLE_RESULTS)
        else:
            status = _status(codes.pop())
        return spb.SendMessageResponse(status=status, entries=entries)

    def _put_routed(self, msg, qid: int):
        """A transactional message becomes a half message (transaction.py), a delay message whose time is ahead
        waits in the timer topic (delay.py); anything else is put as it is."""
        if msg.sys_flag & C.TRANSACTION_PREPARED_TYPE:
            return self.tx.prepare(msg, qid)
        return self.delay.put(msg, qid)

    # ------------------------------------------------------------------ transactions
    def EndTransaction(self, request, context):
        """EndTransactionActivity + EndTransactionProcessor: COMMIT puts the half message on its topic, ROLLBACK
        drops it, UNKNOWN leaves it to the next check."""
        topic = request.topic.name
        refusal = rules.topic_refusal(topic)
        if refusal:
            return spb.EndTransactionResponse(status=_status(*refusal))
        if not request.transaction_id.strip():
            return spb.EndTransactionResponse(
                status=_status(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
            )
        code, text = end_transaction(
            self.tx,
            topic,
            request.transaction_id,
            request.resolution,
            request.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
        )
        return spb.EndTransactionResponse(status=_status(code, text))

    # ------------------------------------------------------------------ receive
    def receive_plan(self, request, context) -> "ReceivePlan | list":
        """ReceiveMessageActivity's checks: the plan of a long poll, or the responses that refuse it. The poll
        itself (receive_attempt until something is found or the polling time ends) is run by aio_service.py."""

        def refuse(code, message=None):
            return [spb.ReceiveMessageResponse(status=_status(code, message)), self._delivery_timestamp()]

        remaining = context.time_remaining()
        remaining_ms = int(remaining * 1000) if remaining is not None else 3_600_000
        cfg = self.config
        if request.HasField("long_polling_timeout"):
            polling = request.long_polling_timeout.ToMilliseconds()
        else:
            polling = remaining_ms - 1500
        polling = min(max(polling, cfg.min_long_polling_ms), cfg.max_long_polling_ms)
        if polling > remaining_ms:
            if remaining_ms >= cfg.min_long_polling_ms:
                polling = remaining_ms
            else:
                return refuse(
                    Code.ILLEGAL_POLLING_TIME,
                    "The deadline time remaining is not enough for polling, please check network condition",
                )
        topic = request.message_queue.topic.name
        group = request.group.name
        refusal = self._topic_and_group_refusal(topic, group)
        if refusal:
            return refuse(*refusal)
        if not self._topic_exists(topic):
            return refuse(Code.TOPIC_NOT_FOUND, f"topic {topic!r} not found")
        invisible = request.invisible_duration.ToMilliseconds()
        renewing = request.auto_renew and cfg.enable_proxy_auto_renew
        if renewing:  # enableProxyAutoRenew: the PushConsumer asks, defaultInvisibleTimeMills applies
            invisible = cfg.default_invisible_ms
        elif invisible < cfg.min_invisible_ms_for_recv:
            return refuse(
                Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {cfg.min_invisible_ms_for_recv}"
            )
        if cfg.max_invisible_ms > 0 and invisible > cfg.max_invisible_ms:
            return refuse(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {cfg.max_invisible_ms}")
        fe = request.filter_expression
        tags = sql = None
        if fe.type == pb.FilterType.SQL:
            sql = fe.expression
        else:
            tags = fe.expression or "*"
        batch = request.batch_size if request.batch_size > 0 else cfg.long_polling_batch_size
        r, _, perm = self._queue_nums(topic)
        queue_ids = list(range(r)) if perm & PERM_READ else []
        client = self.client_of(context) if renewing else None
        return ReceivePlan(
            group,
            topic,
            queue_ids,
            batch,
            invisible,
            tags,
            sql,
            polling,
            client.client_id if client is not None else None,
        )

    def receive_attempt(self, plan: "ReceivePlan") -> tuple[list | None, int | None]:
        """One try of a long poll: (the responses to send, None) when it found messages or failed, else
        (None, when the earliest in-flight message of the group becomes visible again, or None)."""
        cfg = self.config
        group, topic = plan.group, plan.topic
        try:
            popped = (
                self.pop.pop_orderly(
                    group,
                    topic,
                    plan.queue_ids,
                    plan.batch,
                    plan.invisible,
                    tags=plan.tags,
                    sql=plan.sql,
                    max_attempts=cfg.retry_max_times + 1,
                    dead_letter=lambda m: self.retry.to_dlq(group, topic, m),
                )
                if self.groups.is_fifo(group)
                else self.retry.pop(
                    group,
                    topic,
                    plan.queue_ids,
                    plan.batch,
                    plan.invisible,
                    tags=plan.tags,
                    sql=plan.sql,
                    max_attempts=cfg.retry_max_times + 1,
                )
            )
        except FilterSyntaxError as e:
            return self.receive_finish(Code.ILLEGAL_FILTER_EXPRESSION, str(e)), None
        except (RocketStoreError, OSError) as e:  # the pop state could not be made durable
            log.error("receive %s/%s: %s", group, topic, e)
            return self.receive_finish(Code.INTERNAL_SERVER_ERROR, f"receive failed: {e}"), None
        if not popped:
            return None, self.pop.next_due_ms(group, topic)
        out = [C.to_v2(p.message, topic, p.handle.encode(), p.attempt, p.invisible_ms) for p in popped]
        if plan.client_id is not None:  # the proxy's addReceiptHandle: renewed until acked or the client goes
            for p, m in zip(popped, out):
                self.renew.add(
                    plan.client_id,
                    group,
                    topic,
                    m.system_properties.message_id,
                    m.system_properties.receipt_handle,
                    p.message.reconsume_times,
                )
        return (
            [spb.ReceiveMessageResponse(status=_status(Code.OK))]
            + [spb.ReceiveMessageResponse(message=m) for m in out]
            + [self._delivery_timestamp()]
        ), None

    def receive_finish(self, code: int, message: str | None = None) -> list:
        return [spb.ReceiveMessageResponse(status=_status(code, message)), self._delivery_timestamp()]

    @staticmethod
    def _delivery_timestamp():
        r = spb.ReceiveMessageResponse()
        r.delivery_timestamp.FromMilliseconds(now_ms())
        return r

    # ------------------------------------------------------------------ ack, change invisible duration
    def AckMessage(self, request, context):
        topic, group = request.topic.name, request.group.name
        refusal = self._topic_and_group_refusal(topic, group)
        if refusal:
            return spb.AckMessageResponse(status=_status(*refusal))
        statuses, acks = [], []
        for e in request.entries:
            try:  # an auto-renewed message: its newest handle
                h = Handle.decode(self.renew.take(group, e.message_id, e.receipt_handle) or e.receipt_handle)
            except HandleError as err:
                statuses.append(_status(Code.INVALID_RECEIPT_HANDLE, str(err)))
            else:
                statuses.append(None)  # its ack's answer, below
                acks.append((self.retry.topic_of(group, topic, h), h))
        # the entries acked as one durable change of the group: one journal sync for the call, not one each
        answers = iter(self.pop.ack_all(group, acks) if acks else ())
        entries = []
        for e, st in zip(request.entries, statuses):
            if st is None:
                st = _status(Code.OK) if next(answers) else _status(Code.INVALID_RECEIPT_HANDLE, EXPIRED)
            entries.append(
                spb.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=st)
            )
        codes = {x.status.code for x in entries}
        if not codes:
            status = _status(Code.INTERNAL_SERVER_ERROR, "ack message result is empty")
        elif len(codes) > 1:
            status = _status(Code.MULTIPLE_RESULTS)
        else:
            status = entries[0].status
        return spb.AckMessageResponse(status=status, entries=entries)

    def ChangeInvisibleDuration(self, request, context):
        topic, group = request.topic.name, request.group.name
        refusal = self._topic_and_group_refusal(topic, group)
        if refusal:
            return spb.ChangeInvisibleDurationResponse(status=_status(*refusal))
        invisible = request.invisible_duration.ToMilliseconds()
        # GrpcValidator.validateInvisibleTime(invisibleTime): no minimum here (minInvisibleTimeMillsForRecv is
        # ReceiveMessage's), maxInvisibleTimeMills
        if invisible < 0:
            return spb.ChangeInvisibleDurationResponse(
                status=_status(Code.ILLEGAL_INVISIBLE_TIME, "the invisibleTime is too small. min is 0")
            )
        if self.config.max_invisible_ms > 0 and invisible > self.config.max_invisible_ms:
            return spb.ChangeInvisibleDurationResponse(
                status=_status(
                    Code.ILLEGAL_INVISIBLE_TIME,
                    f"the invisibleTime is too large. max is {self.config.max_invisible_ms}",
                )
            )
        try:  # an auto-renewed message: its newest handle, no longer renewed
            h = Handle.decode(
                self.renew.take(group, request.message_id, request.receipt_handle) or request.receipt_handle
            )
        except HandleError as err:
            return spb.ChangeInvisibleDurationResponse(status=_status(Code.INVALID_RECEIPT_HANDLE, str(err)))
        new = self.pop.change_invisible(group, self.retry.topic_of(group, topic, h), h, invisible)
        if new is None:
            return spb.ChangeInvisibleDurationResponse(
                status=_status(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired, acked or superseded")
            )
        return spb.ChangeInvisibleDurationResponse(status=_status(Code.OK), receipt_handle=new.encode())

    # ------------------------------------------------------------------ not implemented yet
    def _unsupported(name, response):
        def rpc(self, request, context):
            return response(status=_status(Code.NOT_IMPLEMENTED, f"{name} is not implemented by rocketstore serve yet"))

        rpc.__name__ = name
        return rpc

    QueryAssignment = _assignment.query_assignment

    def ForwardMessageToDeadLetterQueue(self, request, context):
        current = self.renew.take(request.group.name, request.message_id, request.receipt_handle)
        if current is not None:  # an auto-renewed message: its newest handle
            request = spb.ForwardMessageToDeadLetterQueueRequest.FromString(request.SerializeToString())
            request.receipt_handle = current
        return _assignment.forward_message_to_dead_letter_queue(self, request, context)

    UpdateOffset = _unsupported("UpdateOffset", spb.UpdateOffsetResponse)
    GetOffset = _unsupported("GetOffset", spb.GetOffsetResponse)
    QueryOffset = _unsupported("QueryOffset", spb.QueryOffsetResponse)
    RecallMessage = _unsupported("RecallMessage", spb.RecallMessageResponse)
    SyncLiteSubscription = _unsupported("SyncLiteSubscription", spb.SyncLiteSubscriptionResponse)
    del _unsupported

    # ------------------------------------------------------------------ shutdown
    def stop(self) -> None:
        self.stopping.set()
        self.renew.stop()  # the renewal thread; in-flight auto-renew messages cleared (come back soon)
        self.offset_flush.stop()
        if self._tx_checker is not None:  # once: the shared state counts its users
            self.tx.remove_checker(self._tx_checker)
            self._tx_checker = None
            self.tx.release()
        self.delay.stop()
        with self._clients_lock:
            for c in self._clients.values():
                c.outbox.put(None)


def _is_ip(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False
