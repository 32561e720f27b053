"""The gRPC server: one MessageStore opened for writing behind apache.rocketmq.v2.MessagingService, served by
grpc.aio (aio_service.py: streams and long polls cost no thread). Stops
cleanly on SIGINT/SIGTERM: no new calls, open ones given a moment, then the store closed normally (no abort
file left). Listens on --listen, names --advertise (or this machine's address, address.py) in its routes."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import sys
import threading

import grpc
import grpc.aio

from ..config import StoreConfig
from ..store import MessageStore
from ..broker import address
from ..broker.address import ListenError
from .aio_service import AsyncMessagingService
from .auth import AuthInterceptor, keys_from_broker_conf
from .protocol import service_pb2_grpc as sgrpc
from .remoting_side import RemotingSide
from .request_log import RequestLog, describe_client
from .service import MessagingService, ServeConfig

log = logging.getLogger("rocketstore.serve")


def parse_listen(listen: str) -> tuple[str, int]:
    return address.parse_host_port(listen, "--listen")


class Server:
    """start() binds and serves (grpc.aio on an event loop thread of its own); stop() shuts down the gRPC
    server, then closes the store."""

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
        **overrides,
    ):
        self.host, self.port = parse_listen(listen)
        self.grpc_enabled = grpc_enabled
        # the remoting side (RocketMQ 4.x clients): a name server and a broker on the same loop and store
        self.remoting = RemotingSide(
            None,
            store_config or StoreConfig(),
            namesrv,
            remoting,
            remoting_advertise,
            acl=remoting_acl,
            namesrv_addr=namesrv_addr,
        )
        # what the routes name: --advertise, else the listen address (this machine's address for a wildcard)
        self.advertised: tuple[str, int] | None = address.parse_advertise(advertise) if advertise else None
        self.request_log_interval = request_log_interval
        self.store_config = store_config or StoreConfig()
        self.store_path = store_path
        self.overrides = overrides
        # access key -> secret key (auth.py); none: every request is accepted
        self.access_keys = {**keys_from_broker_conf(self.store_config.extra), **(access_keys or {})}
        self.store: MessageStore | None = None
        self.service: MessagingService | None = None
        self.aio_service: AsyncMessagingService | None = None
        self.requests: RequestLog | None = None
        self.grpc_server = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def start(self) -> int:
        if self.grpc_enabled:
            address.check_bindable(self.host, self.port)  # an address in use: one clear error, store untouched
        self.remoting.check_bindable()
        broker_host = self.remoting.store_host()
        if broker_host is not None and self.store_config.store_host == StoreConfig.store_host:
            # no storeHost of the operator's: the records name the broker, as RocketMQ's do
            self.store_config = dataclasses.replace(self.store_config, store_host=broker_host)
            self.remoting.store_config = self.store_config
        self.store = MessageStore.open(self.store_path, self.store_config)
        self.remoting.store = self.store
        try:
            host, port = self.advertised or (self.host, self.port)
            if self.advertised is None and address.is_wildcard(self.host):
                host = address.local_address()
                log.warning(
                    "--listen %s is no address to connect to: routes name this machine's %s instead; "
                    "give --advertise HOST:PORT for the address clients should use",
                    address.join(self.host, self.port),
                    host,
                )
            config = ServeConfig.from_store_config(self.store_config, host=host, port=port, **self.overrides)
            self._loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(target=self._loop.run_forever, name="serve-loop", daemon=True)
            self._loop_thread.start()
            if self.grpc_enabled:
                self.service = MessagingService(self.store, config)
                self.requests = RequestLog(
                    self.request_log_interval, config.channel_expired_ms / 1000.0, describe_client(self.service)
                )
                self.port = asyncio.run_coroutine_threadsafe(self._start_grpc(config), self._loop).result(60)
                self.requests.start()
            asyncio.run_coroutine_threadsafe(self.remoting.start(), self._loop).result(60)
        except BaseException:
            self._stopped.set()  # stop() has nothing left to do
            if self.grpc_server is not None and self._loop is not None:
                asyncio.run_coroutine_threadsafe(self.grpc_server.stop(None), self._loop).result(30)
            if self._loop is not None:
                asyncio.run_coroutine_threadsafe(self.remoting.close(), self._loop).result(30)
            self._close_loop()
            if self.aio_service is not None:
                self.aio_service.close()
            if self.service is not None:
                self.service.stop()
                self.service.pop.close()
            self.store.close()
            raise
        return self.port

    async def _start_grpc(self, config: ServeConfig) -> int:
        self.aio_service = AsyncMessagingService(self.service, self._loop, self.requests)
        self.grpc_server = grpc.aio.server(
            interceptors=[AuthInterceptor(self.access_keys)] if self.access_keys else None,
            options=[
                ("grpc.max_receive_message_length", config.max_message_size + 1024 * 1024),
                ("grpc.max_send_message_length", -1),
                # gRPC sets SO_REUSEPORT by default: a second server on the same port would bind too and
                # get half of the connections, for another store
                ("grpc.so_reuseport", 0),
            ],
        )
        sgrpc.add_MessagingServiceServicer_to_server(self.aio_service, self.grpc_server)
        listen = address.join(self.host, self.port)
        try:
            bound = self.grpc_server.add_insecure_port(listen)
        except RuntimeError:  # taken since check_bindable: gRPC does not say why
            bound = 0
        if bound == 0:
            raise ListenError(f"{listen}: cannot listen (address in use or not available)")
        if self.port == 0 and self.advertised is None:  # an ephemeral port: say the real one in the routes
            config.port = bound
        await self.grpc_server.start()
        return bound

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
        if self.requests is not None:
            self.requests.stop()  # the last summary
        if self.service is not None:
            self.service.stop()
        if self.aio_service is not None:
            self.aio_service.stop()  # long polls answer now
        if self.grpc_server is not None:
            asyncio.run_coroutine_threadsafe(self.grpc_server.stop(grace), self._loop).result(grace + 30)
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self.remoting.close(), self._loop).result(grace + 30)
        if self.aio_service is not None:
            self.aio_service.close()  # the thread pools, after their last call
        self._close_loop()
        if self.service is not None:
            self.service.pop.close()  # after the last request: snapshot written, offsets committed
        if self.store is not None:
            self.store.close()

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
    remoting_advertise, remoting_acl, namesrv_addr (Server's)."""
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
        port = server.start()
        parts = []
        if server.service is not None:
            routes = address.join(server.service.config.host, server.service.config.port)
            listening = address.join(server.host, port)
            parts.append(
                f"listening on {listening}{'' if routes == listening else f', routes name {routes}'} "
                f"(apache.rocketmq.v2.MessagingService, gRPC"
                f"{', authentication: %d access key(s)' % len(server.access_keys) if server.access_keys else ''})"
            )
        remoting = server.remoting.describe()
        if remoting:
            parts.append(f"{remoting} (RocketMQ remoting)")
        echo(f"rocketstore serve: store {server.store.root}, " + "; ".join(parts))
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
