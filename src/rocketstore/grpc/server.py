"""The gRPC side of `rocketstore serve`: apache.rocketmq.v2.MessagingService over one open store, served by
grpc.aio on the process's event loop (aio_service.py: streams and long polls cost no thread). Listens on --listen,
names --advertise (or this machine's address, broker/address.py) in its routes. The process that runs it beside
the remoting side, over the same store and loop, is cli/server.py."""

from __future__ import annotations

import asyncio
import logging

import grpc
import grpc.aio

from ..broker import address
from ..broker.address import ListenError
from .aio_service import AsyncMessagingService
from .auth import AuthInterceptor
from .protocol import service_pb2_grpc as sgrpc
from .request_log import RequestLog, describe_client
from .service import MessagingService, ServeConfig

log = logging.getLogger("rocketstore.serve")


def parse_listen(listen: str) -> tuple[str, int]:
    return address.parse_host_port(listen, "--listen")


class GrpcSide:
    """start() binds and serves on a running loop (of another thread); stop() ends the calls, close() releases
    the thread pools and the pop state after the last request of either protocol."""

    def __init__(
        self,
        listen: str,
        advertise: str | None,
        access_keys: dict[str, str],
        request_log_interval: float,
        overrides: dict,
    ):
        self.host, self.port = parse_listen(listen)
        # what the routes name: --advertise, else the listen address (this machine's address for a wildcard)
        self.advertised: tuple[str, int] | None = address.parse_advertise(advertise) if advertise else None
        self.access_keys = access_keys  # access key -> secret key (auth.py); none: every request is accepted
        self.request_log_interval = request_log_interval
        self.overrides = overrides
        self.service: MessagingService | None = None
        self.aio_service: AsyncMessagingService | None = None
        self.requests: RequestLog | None = None
        self.grpc_server = None
        self.meter = None  # metered.GrpcMeter, set by the wiring before start() (None: no metrics)
        self._loop: asyncio.AbstractEventLoop | None = None

    def check_bindable(self) -> None:
        address.check_bindable(self.host, self.port)  # an address in use: one clear error, store untouched

    def start(self, store, store_config, loop: asyncio.AbstractEventLoop) -> int:
        """Serve `store` on `loop`; the port bound."""
        host, port = self.advertised or (self.host, self.port)
        if self.advertised is None and address.is_wildcard(self.host):
            host = address.local_address()
            log.warning(
                "--listen %s is no address to connect to: routes name this machine's %s instead; "
                "give --advertise HOST:PORT for the address clients should use",
                address.join(self.host, self.port),
                host,
            )
        config = ServeConfig.from_store_config(store_config, host=host, port=port, **self.overrides)
        self._loop = loop
        self.service = MessagingService(store, config)
        self.requests = RequestLog(
            self.request_log_interval, config.channel_expired_ms / 1000.0, describe_client(self.service)
        )
        self.port = asyncio.run_coroutine_threadsafe(self._start(config), loop).result(60)
        self.requests.start()
        return self.port

    async def _start(self, config: ServeConfig) -> int:
        self.aio_service = AsyncMessagingService(self.service, self._loop, self.requests)
        self.aio_service.meter = self.meter
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

    def stop(self, grace: float | None) -> None:
        """No new calls; open ones are given `grace` seconds (None: none), long polls answer now."""
        if self.requests is not None:
            self.requests.stop()  # the last summary
        if self.service is not None:
            self.service.stop()
        if self.aio_service is not None:
            self.aio_service.stop()
        if self.grpc_server is not None:
            wait = 30 if grace is None else grace + 30
            asyncio.run_coroutine_threadsafe(self.grpc_server.stop(grace), self._loop).result(wait)

    def close(self) -> None:
        """After the last request of either protocol, while the loop still runs: the thread pools (their
        callbacks go to the loop), then the pop state (snapshot written, offsets committed)."""
        if self.aio_service is not None:
            self.aio_service.close()
        if self.service is not None:
            self.service.pop.close()

    def describe(self) -> str:
        routes = address.join(self.service.config.host, self.service.config.port)
        listening = address.join(self.host, self.port)
        keys = f", authentication: {len(self.access_keys)} access key(s)" if self.access_keys else ""
        return (
            f"listening on {listening}{'' if routes == listening else f', routes name {routes}'} "
            f"(apache.rocketmq.v2.MessagingService, gRPC{keys})"
        )
