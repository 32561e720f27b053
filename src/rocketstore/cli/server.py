"""The process of `rocketstore serve`: one MessageStore opened for writing, served by both protocols on one
event loop thread: RocketMQ 5's gRPC (grpc/server.py) and RocketMQ 4.x's remoting, a name server and a broker
(remoting_side.py). The two sides share messages, topics and consumer offsets through the store and the broker
core (rocketstore.broker) and never call each other. Stops cleanly on SIGINT/SIGTERM: no new calls, open ones
given a moment, then the store closed normally (no abort file left)."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
import threading

from ..broker import address
from ..config.store_config import StoreConfig
from ..grpc.auth import keys_from_broker_conf
from ..grpc.server import GrpcSide
from ..store.facade import MessageStore
from .remoting_side import RemotingSide


class Server:
    """start() opens the store and starts both sides on an event loop thread of its own; stop() stops the
    calls of both, then closes the store."""

    def __init__(
        self,
        store_path: str,
        listen: str = "127.0.0.1:8081",
        store_config: StoreConfig | None = None,
        access_keys: dict[str, str] | None = None,
        advertise: str | None = None,
        request_log_interval: float = 60.0,
        *,
        grpc_enabled: bool = True,
        namesrv: str | None = None,
        remoting: str | None = None,
        remoting_advertise: str | None = None,
        remoting_acl=None,
        namesrv_addr: str | None = None,
        http: str | None = None,
        http_optional: bool = False,
        **overrides,
    ):
        self.store_config = store_config or StoreConfig()
        self.store_path = store_path
        keys = {**keys_from_broker_conf(self.store_config.extra), **(access_keys or {})}
        # the gRPC side (RocketMQ 5 clients), None with --no-grpc
        self.grpc = GrpcSide(listen, advertise, keys, request_log_interval, overrides) if grpc_enabled else None
        # the remoting side (RocketMQ 4.x clients): a name server and a broker on the same loop and store
        self.remoting = RemotingSide(
            None,
            self.store_config,
            namesrv,
            remoting,
            remoting_advertise,
            acl=remoting_acl,
            namesrv_addr=namesrv_addr,
        )
        # the HTTP side (/metrics and the console), None with --no-http; HOST:PORT checked by serve's options
        self.http_listen = address.parse_host_port(http, "--http") if http else None
        self.http_optional = http_optional  # the default address: taken, it is a warning and no HTTP side
        self.http = None  # console.web.HttpSide once started
        self.metrics = None  # broker.metrics.BrokerMetrics once started with HTTP
        self.store: MessageStore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._stopped = threading.Event()

    @property
    def service(self):
        """The gRPC side's MessagingService (None before the start or with --no-grpc)."""
        return self.grpc.service if self.grpc is not None else None

    @property
    def port(self) -> int | None:
        """The gRPC port: the one bound once started."""
        return self.grpc.port if self.grpc is not None else None

    def start(self) -> int | None:
        if self.grpc is not None:
            self.grpc.check_bindable()
        self.remoting.check_bindable()
        if self.http_listen is not None:
            try:
                address.check_bindable(*self.http_listen)
            except address.ListenError as e:
                if not self.http_optional:
                    raise
                print(
                    f"rocketstore: warning: no HTTP side (/metrics, console): {e}; give --http HOST:PORT",
                    file=sys.stderr,
                )
                self.http_listen = None
        broker_host = self.remoting.store_host()
        if broker_host is not None and self.store_config.store_host == StoreConfig.store_host:
            # no storeHost of the operator's: the records name the broker, as RocketMQ's do
            self.store_config = dataclasses.replace(self.store_config, store_host=broker_host)
            self.remoting.store_config = self.store_config
        self.store = MessageStore.open(self.store_path, self.store_config)
        self.remoting.store = self.store
        try:
            if self.http_listen is not None:
                self._meter()
            self._loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(target=self._loop.run_forever, name="serve-loop", daemon=True)
            self._loop_thread.start()
            if self.grpc is not None:
                self.grpc.start(self.store, self.store_config, self._loop)
            asyncio.run_coroutine_threadsafe(self.remoting.start(), self._loop).result(60)
            if self.http_listen is not None:
                self._start_http()
        except BaseException:
            self._stopped.set()  # stop() has nothing left to do
            self._shut(None)
            raise
        return self.port

    def _meter(self) -> None:
        """The broker's metrics, counted by both protocols from their first request on."""
        from ..broker.metrics import BrokerMetrics
        from ..grpc.metered import GrpcMeter
        from ..remoting.broker.metered import RemotingMeter

        extra = self.store_config.extra or {}
        self.metrics = BrokerMetrics(
            self.store,
            str(extra.get("brokerClusterName") or "DefaultCluster"),
            str(extra.get("brokerName") or "rocketstore"),
        )
        if self.grpc is not None:
            self.grpc.meter = GrpcMeter(self.metrics)
        self.remoting.meter = RemotingMeter(self.metrics)
        self.metrics.clients = self.clients
        self.metrics.inflight = self.inflight
        self.metrics.committed = self.committed
        self.metrics.groups = self.pending_groups

    def clients(self) -> list[dict]:
        """Every connected client, both protocols."""
        out = list(self.remoting.clients())
        if self.grpc is not None and self.grpc.service is not None:
            out += self.grpc.service.connected_clients()
        return out

    def committed(self, group: str, topic: str, queue_id: int) -> int:
        """A group's newest committed offset: the remoting broker's (commits it has not flushed yet), else the store's."""
        broker = self.remoting.broker
        if broker is not None:
            return broker.offsets.query(group, topic, queue_id)
        return self.store.consumer_offsets.query(group, topic, queue_id)

    def pending_groups(self) -> dict[str, set[str]]:
        broker = self.remoting.broker
        return broker.offsets.pending_groups() if broker is not None else {}

    def inflight(self, group: str, topic: str) -> int:
        """Messages received over gRPC and not yet acked (the remoting side's pulls have none in flight)."""
        if self.grpc is None or self.grpc.service is None:
            return 0
        return self.grpc.service.pop.inflight_count(group, topic)

    def _start_http(self) -> None:
        from ..console.source import Hooks, LiveSource
        from ..console.web import Console, HttpSide

        protocols = []
        if self.grpc is not None:
            protocols.append(f"gRPC {self.grpc.describe()}")
        if self.remoting.describe():
            protocols.append(f"remoting: {self.remoting.describe()}")
        hooks = Hooks(
            clients=self.clients,
            inflight=self.inflight,
            reset=self.remoting.reset,
            committed=self.committed,
            groups=self.pending_groups,
            totals=self.metrics.totals,
            topic_changed=self._topic_changed,
            protocols=protocols,
        )
        console = Console(LiveSource(self.store), hooks, self.metrics.registry, self.store_config)
        self.http = HttpSide(*self.http_listen, console, self.metrics.registry)
        self.http.start()

    def _topic_changed(self) -> None:
        broker = self.remoting.broker
        if broker is not None:
            broker.register()

    def describe_http(self) -> str | None:
        return None if self.http is None else f"{self.http.url()} (console, /metrics)"

    def _shut(self, grace: float | None) -> None:
        if self.http is not None:
            self.http.stop()
            self.http = None
        if self.grpc is not None:
            self.grpc.stop(grace)
        if self._loop is not None:
            wait = 30 if grace is None else grace + 30
            asyncio.run_coroutine_threadsafe(self.remoting.close(), self._loop).result(wait)
        if self.grpc is not None:
            self.grpc.close()
        self._close_loop()
        self.store.close()

    def _close_loop(self) -> None:
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop_thread.join(10)
        self._loop.close()
        self._loop = None

    def stop(self, grace: float = 2.0) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self.store is not None:
            self._shut(grace)

    def wait(self) -> None:
        self._stopped.wait()


def serve_forever(
    store_path: str,
    listen: str,
    store_config: StoreConfig | None = None,
    echo=print,
    access_keys: dict[str, str] | None = None,
    advertise: str | None = None,
    request_log_interval: float = 60.0,
    **sides,
) -> None:
    """Serve until SIGINT or SIGTERM, then stop cleanly. `sides`: grpc_enabled, namesrv, remoting,
    remoting_advertise, remoting_acl, namesrv_addr, http (Server's)."""
    server = Server(
        store_path,
        listen,
        store_config,
        access_keys=access_keys,
        advertise=advertise,
        request_log_interval=request_log_interval,
        **sides,
    )
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        parts = [server.grpc.describe()] if server.grpc is not None else []
        remoting = server.remoting.describe()
        if remoting:
            parts.append(f"{remoting} (RocketMQ remoting)")
        http = server.describe_http()
        if http:
            parts.append(f"HTTP on {http}")
        echo(f"rocketstore serve: store {server.store.root}, " + "; ".join(parts))
        cfg = server.store.config
        if cfg.archive_enable:  # serve archives nothing itself (no Spark in the broker's process): say who does
            echo(
                f"rocketstore serve: cleanup waits for the archive at {cfg.archive_path}: keep "
                f"`rocketstore archive {server.store.root} --to {cfg.archive_path} --watch` running beside it"
            )
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
        echo("rocketstore serve: stopping")
        sys.stdout.flush()
    finally:
        server.stop()
        for s, h in previous.items():
            signal.signal(s, h)
    echo("rocketstore serve: stopped, store closed")
    sys.stdout.flush()
