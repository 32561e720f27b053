"""The gRPC server: one MessageStore opened for writing behind apache.rocketmq.v2.MessagingService, served by
grpc.aio (aio_service.py: streams and long polls cost no thread). Stops
cleanly on SIGINT/SIGTERM: no new calls, open ones given a moment, then the store closed normally (no abort
file left)."""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
import threading

import grpc
import grpc.aio
from .protocol import service_pb2_grpc as sgrpc

from ..config import StoreConfig
from ..store import MessageStore
from .aio_service import AsyncMessagingService
from .auth import AuthInterceptor, keys_from_broker_conf
from .service import MessagingService, ServeConfig

log = logging.getLogger("rocketstore.serve")


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen {listen!r}: expected HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    p = int(port)
    if not 0 <= p <= 65535:
        raise ValueError(f"--listen {listen!r}: port out of range")
    return host, p


class Server:
    """start() binds and serves (grpc.aio on an event loop thread of its own); stop() shuts down the gRPC
    server, then closes the store."""

    def __init__(self, store_path: str, listen: str = "127.0.0.1:8081", store_config: StoreConfig | None = None,
                 access_keys: dict[str, str] | None = None, **overrides):
        self.host, self.port = parse_listen(listen)
        self.store_config = store_config or StoreConfig()
        self.store_path = store_path
        self.overrides = overrides
        # access key -> secret key (auth.py); none: every request is accepted
        self.access_keys = {**keys_from_broker_conf(self.store_config.extra), **(access_keys or {})}
        self.store: MessageStore | None = None
        self.service: MessagingService | None = None
        self.aio_service: AsyncMessagingService | None = None
        self.grpc_server = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def start(self) -> int:
        self.store = MessageStore.open(self.store_path, self.store_config)
        try:
            config = ServeConfig.from_store_config(self.store_config, host=self.host, port=self.port,
                                                   **self.overrides)
            self.service = MessagingService(self.store, config)
            self._loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(target=self._loop.run_forever, name="serve-loop", daemon=True)
            self._loop_thread.start()
            self.port = asyncio.run_coroutine_threadsafe(self._start_grpc(config), self._loop).result(60)
        except BaseException:
            self._close_loop()
            if self.service is not None:
                self.service.stop()
            self.store.close()
            raise
        return self.port

    async def _start_grpc(self, config: ServeConfig) -> int:
        self.aio_service = AsyncMessagingService(self.service, self._loop)
        self.grpc_server = grpc.aio.server(
            interceptors=[AuthInterceptor(self.access_keys)] if self.access_keys else None,
            options=[("grpc.max_receive_message_length", config.max_message_size + 1024 * 1024),
                     ("grpc.max_send_message_length", -1)])
        sgrpc.add_MessagingServiceServicer_to_server(self.aio_service, self.grpc_server)
        address = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        bound = self.grpc_server.add_insecure_port(address)
        if bound == 0:
            raise OSError(f"cannot listen on {address}")
        if self.port == 0:   # an ephemeral port: say the real one in the routes
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
        if self.service is not None:
            self.service.stop()
        if self.aio_service is not None:
            self.aio_service.stop()        # long polls answer now
        if self.grpc_server is not None:
            asyncio.run_coroutine_threadsafe(self.grpc_server.stop(grace), self._loop).result(grace + 30)
        if self.aio_service is not None:
            self.aio_service.close()       # the thread pools, after their last call
        self._close_loop()
        if self.service is not None:
            self.service.pop.close()     # after the last request: snapshot written, offsets committed
        if self.store is not None:
            self.store.close()

    def wait(self) -> None:
        self._stopped.wait()


def serve_forever(store_path: str, listen: str, store_config: StoreConfig | None = None, echo=print,
                  access_keys: dict[str, str] | None = None) -> None:
    """Serve until SIGINT or SIGTERM, then stop cleanly."""
    server = Server(store_path, listen, store_config, access_keys=access_keys)
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        port = server.start()
        echo(f"rocketstore serve: store {server.store.root}, listening on {server.host}:{port} "
             f"(apache.rocketmq.v2.MessagingService, gRPC"
             f"{', authentication: %d access key(s)' % len(server.access_keys) if server.access_keys else ''})")
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
