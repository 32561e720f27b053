"""The remoting side of `rocketstore serve`: the name server and the broker (rocketstore.remoting) on serve's
event loop, over the store the gRPC side serves, so both protocols share messages, topics and consumer offsets.
The broker registers into the built-in name server; the advertised broker address (what routes name) is
--remoting-advertise, else broker.conf's brokerIP1 with the --remoting port, else the --remoting address (this
machine's address for a wildcard one). With `acl` (remoting.acl.PlainAcl) both check every request, and its
files are reloaded when they change.

Brokers of a cluster (each its own serve and store, usually with --no-namesrv) register with remote name servers:
`namesrv_addr` (--namesrv-addr), else broker.conf's namesrvAddr, HOST:PORT;HOST:PORT. An address that is the
built-in name server's own is left out (the broker is in its routes already): a broker.conf copied from RocketMQ
names 127.0.0.1:9876, where serve's own name server listens by default."""

from __future__ import annotations

import asyncio
import logging

from ..broker import address

log = logging.getLogger("rocketstore.serve")


class RemotingSide:
    def __init__(
        self,
        store,
        store_config,
        namesrv: str | None,
        remoting: str | None,
        advertise: str | None = None,
        acl=None,
        namesrv_addr: str | None = None,
    ):
        self.store = store
        self.acl = acl
        self._acl_watch = None
        self.store_config = store_config
        self.namesrv_listen = address.parse_host_port(namesrv, "--namesrv") if namesrv else None
        self.remoting_listen = address.parse_host_port(remoting, "--remoting") if remoting else None
        self.advertised = address.parse_advertise(advertise) if advertise else None
        self.namesrv_addr = namesrv_addr
        self.namesrv = None
        self.broker = None
        self.namesrv_port = None
        self.broker_port = None
        self.meter = None  # the metrics' RemotingMeter (remoting/broker/metered.py), set by the wiring

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
            if self.namesrv_addr:
                settings.namesrvAddr = self.namesrv_addr
            routes = self.namesrv.routes if self.namesrv is not None else None
            remote = self.remote_namesrvs(settings.namesrvAddr)
            self.broker = Broker(self.store, settings, routes=routes, acl=self.acl, namesrv_addresses=remote,
                                 meter=self.meter, **options)  # fmt: skip
            # RocketMQ's fast channel, listenPort - 2 (BrokerController's fastRemotingServer), for a fixed port
            fast = port - 2 if port > 2 else None
            self.broker_port = await self.broker.start(host, port, fast_port=fast)

    def remote_namesrvs(self, namesrv_addr: str) -> list[tuple[str, int]]:
        """The name servers to register with over remoting: namesrvAddr's, less the built-in one's address."""
        from ..remoting.broker.registration import parse_namesrv_addr

        if not namesrv_addr:
            return []
        remote = parse_namesrv_addr(namesrv_addr)
        if self.namesrv is not None:
            own_host, _ = self.namesrv_listen
            own = [(h, p) for h, p in remote if p == self.namesrv_port and is_local(h, own_host)]
            for h, p in own:
                log.info("namesrvAddr %s is the built-in name server: the broker is in its routes already",
                         address.join(h, p))  # fmt: skip
            remote = [a for a in remote if a not in own]
        return remote

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
        if self.meter is not None:  # each answered request counted
            options["on_response"] = self.meter.observe
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

    def clients(self) -> list[dict]:
        """The broker's connected clients (heartbeats: producers and consumers by group), for the console and the
        connection gauges."""
        from ..remoting.codes import LanguageCode

        if self.broker is None:
            return []
        out = []
        c = self.broker.clients
        for kind, table in (("producer", dict(c.producers)), ("consumer", dict(c.consumers))):
            for group, entry in table.items():
                channels = entry.channels if kind == "consumer" else entry
                for ch in list(channels.values()):
                    try:
                        language = LanguageCode(ch.language).name.lower()
                    except ValueError:
                        language = str(ch.language)
                    out.append({"protocol": "remoting", "id": ch.client_id, "kind": kind, "group": group,
                                "language": language, "version": str(ch.version)})  # fmt: skip
        return out

    def reset(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """An offset reset the broker hands to the group's next pulls (assignResetOffset), committed at once."""
        if self.broker is None:
            self.store.consumer_offsets.commit(group, topic, offsets)
            return
        for q, off in offsets.items():
            self.broker.offsets.assign_reset(group, topic, q, off)
        self.store.consumer_offsets.commit(group, topic, offsets)

    def describe(self) -> str:
        parts = []
        if self.namesrv is not None:
            parts.append(f"name server on {address.join(self.namesrv_listen[0], self.namesrv_port)}")
        if self.broker is not None:
            parts.append(
                f"broker {self.broker.settings.brokerName} on {address.join(self.remoting_listen[0], self.broker_port)}"
                f" (routes name {self.broker.settings.address})"
            )
            if self.broker.registration is not None:
                names = ";".join(address.join(h, p) for h, p in self.broker.registration.addresses)
                parts.append(f"registering with the name server {names} as {self.broker.settings.brokerName} "
                             f"of cluster {self.broker.settings.brokerClusterName}")  # fmt: skip
        if parts and self.acl is not None:
            parts.append(f"ACL: {len(self.acl.accounts)} account(s)")
        return ", ".join(parts)


def is_local(host: str, listen_host: str) -> bool:
    """Whether `host` names the machine the built-in name server listens on `listen_host`: that host itself, a
    loopback address or, for a wildcard listen, this machine's address."""
    import ipaddress

    if host == listen_host or host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or (address.is_wildcard(listen_host) and host == address.local_address())
