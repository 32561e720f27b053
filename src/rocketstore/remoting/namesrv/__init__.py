"""RocketMQ's name server over the remoting protocol (default port 9876): brokers register their topics, clients
ask for routes. `NameServer.routes` is the data model the built-in broker registers into directly
(`routes.register_broker(..., timeout_ms=None)`). With `acl` (a remoting.acl.PlainAcl) every request is checked
as RocketMQ 5's proxy checks the route queries it answers; RocketMQ's own name server checks none."""

import asyncio
import logging
import time
from dataclasses import dataclass, fields

from ..acl import remoting_hook
from ..server import RemotingServer
from .kv import KVConfig
from .processor import make_handlers
from .routes import DEFAULT_BROKER_TIMEOUT_MS, RouteTable

log = logging.getLogger("rocketstore.remoting.namesrv")

DEFAULT_PORT = 9876


@dataclass
class NamesrvSettings:
    """The NamesrvConfig options rocketstore's name server honours, under RocketMQ's names."""

    orderMessageEnable: bool = False
    returnOrderTopicConfigToBroker: bool = True
    enableAllTopicList: bool = True
    enableTopicList: bool = True
    deleteTopicWithBrokerRegistration: bool = False
    scanNotActiveBrokerInterval: int = 5000
    kvConfigPath: str = ""

    @property
    def order_message_enable(self) -> bool:
        return self.orderMessageEnable

    @property
    def return_order_topic_config_to_broker(self) -> bool:
        return self.returnOrderTopicConfigToBroker

    @property
    def enable_all_topic_list(self) -> bool:
        return self.enableAllTopicList

    @property
    def enable_topic_list(self) -> bool:
        return self.enableTopicList

    broker_timeout_ms = DEFAULT_BROKER_TIMEOUT_MS

    def properties_text(self) -> str:
        return "".join(f"{f.name}={_text(getattr(self, f.name))}\n" for f in fields(self))

    def update(self, props: dict[str, str]) -> None:
        """UPDATE_NAMESRV_CONFIG: known keys take the new value; others are ignored (RocketMQ keeps them)."""
        for f in fields(self):
            if f.name in props:
                raw = props[f.name]
                if f.type in (bool, "bool"):
                    setattr(self, f.name, raw.strip().lower() == "true")
                elif f.type in (int, "int"):
                    try:
                        setattr(self, f.name, int(raw))
                    except ValueError:
                        pass
                else:
                    setattr(self, f.name, raw)


def _text(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


class NameServer:
    def __init__(self, settings: NamesrvSettings | None = None, acl=None, **server_options):
        self.settings = settings or NamesrvSettings()
        if acl is not None:
            server_options["before_request"] = remoting_hook(acl)
        self.routes = RouteTable(self.settings.deleteTopicWithBrokerRegistration)
        self.kv = KVConfig(self.settings.kvConfigPath or None)
        self.server = RemotingServer(
            make_handlers(self),
            name="namesrv",
            on_close=lambda conn: self.routes.connection_closed(conn.id),
            **server_options,
        )
        self._scan: asyncio.Task | None = None

    async def start(self, host: str = "0.0.0.0", port: int = DEFAULT_PORT) -> int:
        port = await self.server.start(host, port)
        self._scan = asyncio.create_task(self._scan_loop())
        log.info("name server listening on %s:%d", host, port)
        return port

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.scanNotActiveBrokerInterval / 1000)
            for cluster, addr in self.routes.expire(int(time.time() * 1000)):
                log.warning("broker %s of cluster %s expired", addr, cluster)

    async def close(self) -> None:
        if self._scan is not None:
            self._scan.cancel()
        await self.server.close()
