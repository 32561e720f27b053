"""The remoting side of `rocketstore serve`: the name server and the broker (rocketstore.remoting) on serve's
event loop, over the store the gRPC side serves, so both protocols share messages, topics and consumer offsets.
The broker registers into the built-in name server; the advertised broker address (what routes name) is
--remoting-advertise, else broker.conf's brokerIP1 with the --remoting port, else the --remoting address (this
machine's address for a wildcard one). With `acl` (remoting.acl.PlainAcl) both check every request, and its
files are reloaded when they change."""

from __future__ import annotations

import asyncio
import logging

from . import address

log = logging.getLogger("rocketstore.serve")


class RemotingSide:
    def __init__(
        self, store, store_config, namesrv: str | None, remoting: str | None, advertise: str | None = None, acl=None
    ):
        self.store = store
        self.acl = acl
        self._acl_watch = None
        self.store_config = store_config
        self.namesrv_listen = address.parse_host_port(namesrv, "--namesrv") if namesrv else None
        self.remoting_listen = address.parse_host_port(remoting, "--remoting") if remoting else None
        self.advertised = address.parse_advertise(advertise) if advertise else None
        self.namesrv = None
        self.broker = None
        self.namesrv_port = None
        self.broker_port = None

    def check_bindable(self) -> None:
        for listen in (self.namesrv_listen, self.remoting_listen):
            if listen is not None:
                address.check_bindable(*listen)

    async def start(self) -> None:
        from ..remoting.acl_files import watch_files
        from ..remoting.broker import Broker, BrokerSettings
        from ..remoting.namesrv import NameServer

        if self.acl is not None and self.acl.paths:
            self._acl_watch = asyncio.ensure_future(watch_files(self.acl))

        options = self.server_options()
        if self.namesrv_listen is not None:
            self.namesrv = NameServer(acl=self.acl, **options)
            self.namesrv_port = await self.namesrv.start(*self.namesrv_listen)
        if self.remoting_listen is not None:
            host, port = self.remoting_listen
            ip, adv_port = self.broker_address()
            settings = BrokerSettings.from_extra(self.store_config.extra, brokerIP1=ip, listenPort=adv_port)
            routes = self.namesrv.routes if self.namesrv is not None else None
            self.broker = Broker(self.store, settings, routes=routes, acl=self.acl, **options)
            # RocketMQ's fast channel, listenPort - 2 (BrokerController's fastRemotingServer), for a fixed port
            fast = port - 2 if port > 2 else None
            self.broker_port = await self.broker.start(host, port, fast_port=fast)

    def server_options(self) -> dict:
        """The connection limits of both servers (remoting/server.py) from broker.conf: NettyServerConfig's
        serverChannelMaxIdleTimeSeconds (120; a fraction of a second allowed), rocketstore's own
        serverMaxConnectionsPerAddress (128)."""
        extra = self.store_config.extra or {}
        options = {}
        if extra.get("serverChannelMaxIdleTimeSeconds") not in (None, ""):
            options["idle_timeout_s"] = float(extra["serverChannelMaxIdleTimeSeconds"])
        if extra.get("serverMaxConnectionsPerAddress") not in (None, ""):
            options["max_connections_per_address"] = int(extra["serverMaxConnectionsPerAddress"])
        return options

    def broker_address(self) -> tuple[str, int]:
        """The address the broker is advertised at (brokerIP1:listenPort): --remoting-advertise, else broker.conf's
        brokerIP1, else the listen host (this machine's address for a wildcard one), with the --remoting port (0:
        the port bound, known only after the start)."""
        if self.advertised is not None:
            return self.advertised
        host, port = self.remoting_listen
        ip = (self.store_config.extra or {}).get("brokerIP1") or (
            address.local_address() if address.is_wildcard(host) else host
        )
        return ip, port

    def store_host(self) -> str | None:
        """What the store should write as STOREHOST: the broker's address, as RocketMQ's broker writes its own
        (a consumer sends failed messages back, and mqadmin looks messages up, at the address in their offset
        msgId); None without a broker or before its port is known."""
        if self.remoting_listen is None:
            return None
        ip, port = self.broker_address()
        return address.join(ip, port) if port else None

    async def close(self) -> None:
        if self._acl_watch is not None:
            self._acl_watch.cancel()
        if self.broker is not None:
            await self.broker.close()
        if self.namesrv is not None:
            await self.namesrv.close()

    def describe(self) -> str:
        parts = []
        if self.namesrv is not None:
            parts.append(f"name server on {address.join(self.namesrv_listen[0], self.namesrv_port)}")
        if self.broker is not None:
            parts.append(
                f"broker {self.broker.settings.brokerName} on {address.join(self.remoting_listen[0], self.broker_port)}"
                f" (routes name {self.broker.settings.address})"
            )
        if parts and self.acl is not None:
            parts.append(f"ACL: {len(self.acl.accounts)} account(s)")
        return ", ".join(parts)
