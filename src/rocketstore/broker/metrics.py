"""The broker's metrics under RocketMQ 5's names (BrokerMetricsConstant, DefaultStoreMetricsConstant,
RemotingMetricsConstant in apache/rocketmq), for Prometheus through prometheus_client.

Two kinds, as RocketMQ has them:
- instruments the protocols increment as requests are answered (counters and histograms: messages and bytes in
  and out, message sizes, RPC latency): tallies of plain ints per label set, so a send or a pull pays a dict
  lookup and a few additions, exported by prometheus_client at scrape time; the store's put path itself pays
  nothing (the protocols count after the put answered);
- gauges computed when Prometheus scrapes (a custom collector over the store's public API and what the wiring
  hands it: topics, groups, lags, in-flight messages, storage and flush / dispatch behind, connections), so they
  cost nothing between scrapes.

Every sample carries RocketMQ's node labels: cluster (brokerClusterName), node_type ("broker") and node_id
(brokerName). No protocol is known here: grpc/ and remoting/ translate their requests into the calls below."""

from __future__ import annotations

import shutil
import time
from bisect import bisect_left
from collections.abc import Callable

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from .rules import SYSTEM_GROUP_PREFIX, is_system_topic

RETRY_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX
DLQ_PREFIX = "%DLQ%"  # MixAll.DLQ_GROUP_TOPIC_PREFIX

# BrokerMetricsManager's views: message sizes 1 KiB .. 4 MiB; RemotingMetricsManager's RPC latency 1 ms .. 3 s
MESSAGE_SIZE_BUCKETS = (1024.0, 4096.0, 512 * 1024.0, 1024 * 1024.0, 2 * 1024 * 1024.0, 4 * 1024 * 1024.0)
RPC_LATENCY_BUCKETS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
_FIRST_SIZE, _FIRST_MS = MESSAGE_SIZE_BUCKETS[0], RPC_LATENCY_BUCKETS_MS[0]

NODE_LABELS = ("cluster", "node_type", "node_id")
IN_LABELS = ("topic", "message_type", "is_system")
OUT_LABELS = ("topic", "consumer_group", "is_system")
RPC_LABELS = ("protocol_type", "request_code", "response_code")
LAG_LABELS = ("topic", "consumer_group", "is_retry", "is_system")

MESSAGE_TYPES = ("normal", "fifo", "delay", "transaction")  # TopicMessageType.getMetricsValue()


def is_retry_or_dlq(topic: str) -> bool:
    """BrokerMetricsManager.isRetryOrDlqTopic: such topics are not counted in or out."""
    return topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX)


def is_system_group(group: str) -> bool:
    return group.startswith(SYSTEM_GROUP_PREFIX)


def _flag(b: bool) -> str:
    return "true" if b else "false"


# the names getMessageType looks for: a message with none of them is "normal"
TYPED_NAMES = frozenset(("TRAN_MSG", "__SHARDINGKEY", "__STARTDELIVERTIME", "DELAY", "TIMER_DELIVER_MS",
                         "TIMER_DELAY_SEC", "TIMER_DELAY_MS"))  # fmt: skip


def message_type(properties: dict) -> str:
    """BrokerMetricsManager.getMessageType over a message's properties: transaction, fifo (a sharding key),
    delay (a delay level or a delivery time), else normal."""
    if TYPED_NAMES.isdisjoint(properties):  # the common message: a look at each of its few names
        return "normal"
    if str(properties.get("TRAN_MSG", "")).lower() == "true":
        return "transaction"
    if "__SHARDINGKEY" in properties:
        return "fifo"
    for name in ("__STARTDELIVERTIME", "DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"):
        if properties.get(name) is not None:
            return "delay"
    return "normal"


def new_tally_py(n: int, float_at: int = -1) -> list:
    """A tally of n numbers, all 0 (0.0 at float_at: a sum of milliseconds); the C side is a Counts of int64
    numbers and one double (src/native/meter.c), bumped in place by the remoting meter."""
    t = [0] * n
    if float_at >= 0:
        t[float_at] = 0.0
    return t


# the chosen twin (rocketstore.engine.TWINS); new_tally_py stays the reference
from ..engine import new_tally  # noqa: E402


class BrokerMetrics:
    """One broker's instruments and its registry (one per `rocketstore serve`, so tests can run several).

    The instruments are tallies: per label set a small sequence of numbers (count, bytes, histogram buckets, sum;
    new_tally: a C Counts, a list with the pure engine) that the protocols bump as they answer, exported as
    prometheus_client metric families when Prometheus scrapes. Every bump happens on serve's event loop thread
    (both protocols answer there), so the tallies take no lock; a scrape (another thread) copies each with
    list(), in one step under the GIL for a Counts.
    Label texts (a request code's name) are made at scrape time too.

    `store`: the MessageStore (read at scrape time only). The wiring sets the optional callables:
    `inflight(group, topic) -> int` (popped, not acked), `clients() -> list[dict]` (each with protocol, kind
    "producer"/"consumer", group, language, version), `groups() -> {group: topics}` (commits the broker holds
    and has not written to the store yet), `committed(group, topic, queue)` (the broker's newest offsets), and
    `code_names[protocol] = (request names, response names)`: dicts from the codes the meters pass to texts."""

    def __init__(self, store, cluster: str = "DefaultCluster", node_id: str = "broker-a"):
        self.store = store
        self.node = (cluster, "broker", node_id)
        self.registry = CollectorRegistry(auto_describe=False)
        self.inflight: Callable[[str, str], int] | None = None
        self.clients: Callable[[], list[dict]] | None = None
        self.groups: Callable[[], dict[str, set[str]]] | None = None
        self.committed: Callable[[str, str, int], int] | None = None  # the broker's newest committed offsets
        self.code_names: dict[str, tuple[dict, dict]] = {}
        # (topic, message type) -> [messages, bytes, size sum, size buckets (6 bounds + Inf)...]
        self.tally_in: dict[tuple[str, str], list] = {}
        # (topic, group) -> [messages, bytes]
        self.tally_out: dict[tuple[str, str], list] = {}
        # (protocol, request code, response code) -> [calls, milliseconds sum, latency buckets (9 + Inf)...]
        self.tally_rpc: dict[tuple, list] = {}
        self.registry.register(TallyCollector(self))
        self.registry.register(StoreCollector(self))

    # ------------------------------------------------------------------ what the protocols call
    def message_in(self, topic: str, kind: str, size: int, count: int = 1) -> None:
        """`count` messages of `size` bytes in all stored in `topic` by a client's send (SendMessageProcessor's
        messagesInTotal / throughputInTotal / messageSize: one size observation of size/count). Retry and
        dead-letter topics are tallied and left out of the export, as RocketMQ counts neither."""
        add_in(self.in_tally(topic, kind), size, count)

    def message_out(self, topic: str, group: str, count: int, size: int) -> None:
        """`count` messages, `size` bytes, handed to `group` by a pull or a receive (messagesOutTotal /
        throughputOutTotal)."""
        t = self.out_tally(topic, group)
        t[0] += count
        t[1] += size

    def rpc(self, protocol: str, request_code, response_code, millis: float) -> None:
        """One request answered (rocketmq_rpc_latency, in milliseconds as RocketMQ records it); the codes as the
        protocol has them (named at scrape time through code_names)."""
        add_rpc(self.rpc_tally(protocol, request_code, response_code), millis)

    # the tallies themselves, for a meter that keeps them at hand (remoting/broker/metered.py): found or made once
    # per label set, then bumped by add_in / add_rpc (or in C: src/native/meter.c)
    def in_tally(self, topic: str, kind: str) -> list:
        t = self.tally_in.get((topic, kind))
        if t is None:
            t = self.tally_in[(topic, kind)] = new_tally(3 + len(MESSAGE_SIZE_BUCKETS) + 1)
        return t

    def out_tally(self, topic: str, group: str) -> list:
        t = self.tally_out.get((topic, group))
        if t is None:
            t = self.tally_out[(topic, group)] = new_tally(2)
        return t

    def rpc_tally(self, protocol: str, request_code, response_code) -> list:
        t = self.tally_rpc.get((protocol, request_code, response_code))
        if t is None:
            t = self.tally_rpc[(protocol, request_code, response_code)] = new_tally(
                2 + len(RPC_LATENCY_BUCKETS_MS) + 1, 1
            )
        return t

    # ------------------------------------------------------------------ sums (the console's live chart)
    def totals(self) -> tuple[int, int]:
        """(messages in, messages out) since the start, as exported (retry and dead-letter topics left out)."""
        tin = sum(t[0] for (topic, _), t in list(self.tally_in.items()) if not is_retry_or_dlq(topic))
        tout = sum(t[0] for (topic, _), t in list(self.tally_out.items()) if not is_retry_or_dlq(topic))
        return tin, tout


def add_in(t: list, size: int, count: int) -> None:
    """`count` messages of `size` bytes in all into an in_tally (one size observation: size / count)."""
    each = size // count if count > 1 else size
    t[0] += count
    t[1] += size
    t[2] += each
    # the first bucket (up to 1 KiB) is the common one: a comparison, not a search
    t[3 if each <= _FIRST_SIZE else 3 + bisect_left(MESSAGE_SIZE_BUCKETS, each)] += 1


def add_rpc(t: list, millis: float) -> None:
    """One request of `millis` milliseconds into an rpc_tally."""
    t[0] += 1
    t[1] += millis
    t[2 if millis <= _FIRST_MS else 2 + bisect_left(RPC_LATENCY_BUCKETS_MS, millis)] += 1


def _buckets(bounds, counts) -> list[tuple[str, int]]:
    """Cumulative (le, count) pairs from per-bucket counts (the last one +Inf)."""
    out, running = [], 0
    for bound, n in zip([*bounds, float("inf")], counts):
        running += n
        out.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
    return out


class TallyCollector:
    """The protocols' tallies as prometheus_client metric families (counters and histograms)."""

    def __init__(self, metrics: BrokerMetrics):
        self.m = metrics

    def describe(self):
        return []

    def collect(self):
        m, node = self.m, list(self.m.node)
        labels_in = list(NODE_LABELS + IN_LABELS)
        n_in = CounterMetricFamily("rocketmq_messages_in", "Total number of incoming messages", labels=labels_in)
        b_in = CounterMetricFamily(
            "rocketmq_throughput_in", "Total traffic of incoming messages (bytes)", labels=labels_in
        )
        h_in = HistogramMetricFamily("rocketmq_message_size", "Incoming messages size", labels=labels_in)
        for (topic, kind), t in sorted(list(m.tally_in.items())):
            if is_retry_or_dlq(topic):
                continue
            labels = node + [topic, kind, _flag(is_system_topic(topic))]
            t = list(t)
            n_in.add_metric(labels, t[0])
            b_in.add_metric(labels, t[1])
            h_in.add_metric(labels, _buckets(MESSAGE_SIZE_BUCKETS, t[3:]), t[2])
        yield from (n_in, b_in, h_in)
        labels_out = list(NODE_LABELS + OUT_LABELS)
        n_out = CounterMetricFamily("rocketmq_messages_out", "Total number of outgoing messages", labels=labels_out)
        b_out = CounterMetricFamily(
            "rocketmq_throughput_out", "Total traffic of outgoing messages (bytes)", labels=labels_out
        )
        for (topic, group), t in sorted(list(m.tally_out.items())):
            if is_retry_or_dlq(topic):
                continue
            labels = node + [topic, group, _flag(is_system_topic(topic) or is_system_group(group))]
            t = list(t)  # one copy: its messages and bytes from the same moment
            n_out.add_metric(labels, t[0])
            b_out.add_metric(labels, t[1])
        yield from (n_out, b_out)
        rpc = HistogramMetricFamily(
            "rocketmq_rpc_latency", "Rpc latency (milliseconds)", labels=list(NODE_LABELS + RPC_LABELS)
        )
        for (protocol, req, resp), t in list(m.tally_rpc.items()):
            requests, responses = m.code_names.get(protocol, ({}, {}))
            t = list(t)
            labels = node + [protocol, str(requests.get(req, req)), str(responses.get(resp, resp))]
            rpc.add_metric(labels, _buckets(RPC_LATENCY_BUCKETS_MS, t[2:]), t[1])
        yield rpc


def queue_groups(store, more=None) -> dict[str, list[str]]:
    """group -> its topics with committed offsets (config/consumerOffset.json), and those `more()` names (the
    broker's commits not yet written there)."""
    out = {g: set(ts) for g, ts in store.consumer_offsets.groups().items()}
    for g, ts in (more() if more is not None else {}).items():
        out.setdefault(g, set()).update(ts)
    return {g: sorted(ts) for g, ts in out.items()}


def lag_rows(store, group: str, topic: str, committed_of=None) -> list[dict]:
    """Per queue of `topic`: the max offset, the group's committed offset (-1: none), the lag and the store time
    of the first message not consumed (0 when there is none). `committed_of(group, topic, queue)`: where the
    broker has the newest commits (its own table before they are flushed), else the store's."""
    rows = []
    query = committed_of or store.consumer_offsets.query
    for q in store.topics().get(topic, []):
        hi = store.max_offset(topic, q)
        committed = query(group, topic, q)
        start = max(committed, store.min_offset(topic, q), 0)
        lag = max(hi - start, 0) if committed >= 0 else max(hi - max(store.min_offset(topic, q), 0), 0)
        first = store.store_timestamp_at(topic, q, start) if lag > 0 else 0
        rows.append({"queue": q, "max": hi, "committed": committed, "lag": lag, "first_unconsumed_ms": max(first, 0)})
    return rows


class StoreCollector:
    """The gauges, computed at scrape time from the store's public API (and the wiring's callables)."""

    def __init__(self, metrics: BrokerMetrics):
        self.m = metrics

    def describe(self):
        return []

    def _gauge(self, name: str, doc: str, labels=()) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=list(NODE_LABELS) + list(labels))

    def collect(self):
        m, store = self.m, self.m.store
        node = list(m.node)
        now = int(time.time() * 1000)
        g = self._gauge("rocketmq_topic_number", "Active topic number")
        g.add_metric(node, len(set(store.topic_configs) | set(store.topics())))
        yield g
        offsets = queue_groups(store, m.groups)
        g = self._gauge("rocketmq_consumer_group_number", "Active subscription group number")
        g.add_metric(node, len(set(offsets)))
        yield g
        known = store.topics()
        yield from self._lags(node, now, offsets, known)
        yield self._dlq(node, known)
        yield from self._storage(node, now)
        yield from self._connections(node)

    def _lags(self, node: list, now: int, offsets: dict, known: dict):
        """Lag, lag latency, in-flight and ready messages of each group on each topic it has offsets in."""
        m, store = self.m, self.m.store
        lag = self._gauge("rocketmq_consumer_lag_messages", "Consumer lag messages", LAG_LABELS)
        latency = self._gauge("rocketmq_consumer_lag_latency", "Consumer lag time (milliseconds)", LAG_LABELS)
        inflight = self._gauge("rocketmq_consumer_inflight_messages", "Consumer inflight messages", LAG_LABELS)
        ready = self._gauge("rocketmq_consumer_ready_messages", "Consumer ready messages", LAG_LABELS)
        for group in sorted(offsets):
            for topic in sorted(t for t in offsets[group] if t in known):
                rows = lag_rows(store, group, topic, m.committed)
                labels = node + [
                    topic,
                    group,
                    _flag(topic.startswith(RETRY_PREFIX)),
                    _flag(is_system_topic(topic) or is_system_group(group)),
                ]
                total = sum(r["lag"] for r in rows)
                firsts = [r["first_unconsumed_ms"] for r in rows if r["first_unconsumed_ms"] > 0]
                flying = m.inflight(group, topic) if m.inflight is not None else 0
                lag.add_metric(labels, total)
                latency.add_metric(labels, now - min(firsts) if firsts else 0)
                inflight.add_metric(labels, flying)
                ready.add_metric(labels, max(total - flying, 0))
        yield from (lag, latency, inflight, ready)

    def _dlq(self, node: list, known: dict) -> CounterMetricFamily:
        store = self.m.store
        dlq = CounterMetricFamily(
            "rocketmq_send_to_dlq_messages",
            "Consumer send to DLQ messages (counted from each %DLQ%group topic's queues)",
            labels=list(NODE_LABELS) + ["topic", "consumer_group", "is_system"],
        )
        for topic, queues in known.items():
            if topic.startswith(DLQ_PREFIX):
                group = topic[len(DLQ_PREFIX) :]
                n = sum(max(store.max_offset(topic, q), 0) for q in queues)
                dlq.add_metric(node + [topic, group, _flag(is_system_group(group))], n)
        return dlq

    def _storage(self, node: list, now: int):
        store = self.m.store
        g = self._gauge("rocketmq_storage_size", "Broker storage size (bytes used on the store's file system)")
        try:
            usage = shutil.disk_usage(store.root)
            g.add_metric(node, usage.total - usage.free)
        except OSError:
            pass
        yield g
        g = self._gauge("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes")
        g.add_metric(node, store.flush_behind_bytes)
        yield g
        g = self._gauge("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes")
        g.add_metric(node, store.dispatch_behind_bytes)
        yield g
        g = self._gauge("rocketmq_storage_message_reserve_time", "Broker message reserve time (milliseconds)")
        earliest = store.earliest_store_time()
        if earliest > 0:
            g.add_metric(node, now - earliest)
        yield g

    def _connections(self, node: list):
        clients = self.m.clients() if self.m.clients is not None else []
        producers: dict[tuple, int] = {}
        consumers: dict[tuple, int] = {}
        for c in clients:
            lang, version, protocol = (
                str(c.get("language", "")).lower(),
                str(c.get("version", "")).lower(),
                c["protocol"],
            )
            if c.get("kind") == "consumer":
                group = c.get("group") or ""
                key = (group, lang, version, protocol, _flag(is_system_group(group)))
                consumers[key] = consumers.get(key, 0) + 1
            else:
                key = (lang, version, protocol)
                producers[key] = producers.get(key, 0) + 1
        g = self._gauge(
            "rocketmq_producer_connections", "Producer connections", ("language", "version", "protocol_type")
        )
        for key, n in sorted(producers.items()):
            g.add_metric(node + list(key), n)
        yield g
        g = self._gauge(
            "rocketmq_consumer_connections",
            "Consumer connections",
            ("consumer_group", "language", "version", "protocol_type", "is_system"),
        )
        for key, n in sorted(consumers.items()):
            g.add_metric(node + list(key), n)
        yield g
