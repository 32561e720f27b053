"""The gRPC server: one MessageStore opened for writing behind apache.rocketmq.v2.MessagingService. Stops
cleanly on SIGINT/SIGTERM: no new calls, open ones given a moment, then the store closed normally (no abort
file left)."""
from __future__ import annotations

import logging
import signal
import sys
import threading
from concurrent import futures

import grpc
from .protocol import service_pb2_grpc as sgrpc

from ..config import StoreConfig
from ..store import MessageStore
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
    """start() binds and serves; stop() shuts down the gRPC server, then closes the store."""

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
        self.grpc_server = None
        self._stopped = threading.Event()

    def start(self) -> int:
        self.store = MessageStore.open(self.store_path, self.store_config)
        try:
            config = ServeConfig.from_store_config(self.store_config, host=self.host, port=self.port,
                                                   **self.overrides)
            self.service = MessagingService(self.store, config)
            self.grpc_server = grpc.server(
                futures.ThreadPoolExecutor(max_workers=config.grpc_threads, thread_name_prefix="grpc"),
                maximum_concurrent_rpcs=None,
                interceptors=[AuthInterceptor(self.access_keys)] if self.access_keys else None,
                options=[("grpc.max_receive_message_length", config.max_message_size + 1024 * 1024),
                         ("grpc.max_send_message_length", -1)])
            sgrpc.add_MessagingServiceServicer_to_server(self.service, self.grpc_server)
            address = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
            bound = self.grpc_server.add_insecure_port(address)
            if bound == 0:
                raise OSError(f"cannot listen on {address}")
            if self.port == 0:   # an ephemeral port: say the real one in the routes
                self.port = config.port = bound
            self.grpc_server.start()
        except BaseException:
            self.store.close()
            raise
        return self.port

    def stop(self, grace: float = 2.0) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self.service is not None:
            self.service.stop()
        if self.grpc_server is not None:
            self.grpc_server.stop(grace).wait()
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
