"""The broker's registration with remote name servers (RocketMQ's BrokerController.registerBrokerAll over
BrokerOuterAPI): REGISTER_BROKER to every address of namesrvAddr at start, every registerNameServerPeriod
(forceRegister, RocketMQ's default: a full registration each time, so a name server that restarted learns the
broker again) and at once when a topic is created or updated; UNREGISTER_BROKER to each at a clean stop.

A registration is what BrokerOuterAPI.registerBrokerAll sends: a RegisterBrokerRequestHeader (brokerName,
brokerAddr, clusterName, haServerAddr, brokerId, enableActingMaster, compressed=false, bodyCrc32 = UtilAll.crc32
of the body, heartbeatTimeoutMillis = brokerNotActiveTimeoutMillis only with enableSlaveActingMaster) and a
RegisterBrokerBody as JSON (compressedRegister is false by default), its TopicConfigAndMappingSerializeWrapper
holding every topic and the topic table's data version.

Each name server keeps one connection open, as RocketMQ's broker does: a name server drops a broker whose
connection closes (the broker stopped or died), so the connection must outlive a registration. A name server
that does not answer is logged and tried again on the next period; it never stops the broker."""

from __future__ import annotations

import asyncio
import logging
import zlib

from ...broker.address import parse_host_port
from .. import fastjson
from ..client import RemotingClient
from ..codes import RequestCode, ResponseCode
from .admin_bodies import topic_config_wrapper_bean

log = logging.getLogger("rocketstore.remoting.broker")

START_WAIT_S = 5.0
UNREGISTER_TIMEOUT_S = 3.0  # BrokerOuterAPI.unregisterBroker's invokeSync timeout
MAX_PERIOD_MS = 60_000  # BrokerController schedules registerBrokerAll every min(registerNameServerPeriod, 60 s)
MIN_PERIOD_MS = 100  # RocketMQ's floor is 10 s; rocketstore takes shorter periods (tests) down to this


def parse_namesrv_addr(text: str, option: str = "namesrvAddr") -> list[tuple[str, int]]:
    """namesrvAddr's HOST:PORT;HOST:PORT (RocketMQ splits it on ';'), each an address to connect to."""
    out = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        host, port = parse_host_port(part, option)
        if port == 0:
            raise ValueError(f"{option} {part!r}: give the name server's port")
        out.append((host, port))
    if not out:
        raise ValueError(f"{option} {text!r}: expected HOST:PORT[;HOST:PORT...]")
    return out


def period_seconds(period_ms: int) -> float:
    return max(MIN_PERIOD_MS, min(int(period_ms), MAX_PERIOD_MS)) / 1000


def crc32(body: bytes) -> int:
    """UtilAll.crc32: the CRC-32 with the sign bit cleared."""
    return zlib.crc32(body) & 0x7FFFFFFF


class NameServerRegistration:
    """Registers `broker` (its settings, `broker.registered_topics()` and `broker.data_version`) with the name
    servers at `addresses`. start() registers once (waiting at most for one attempt) and keeps registering on
    serve's loop; register_soon() (any thread) asks for a registration now; stop() unregisters and closes."""

    def __init__(self, broker, addresses: list[tuple[str, int]]):
        self.broker = broker
        self.addresses = list(addresses)
        settings = broker.settings
        self.period_s = period_seconds(settings.registerNameServerPeriod)
        self.timeout_s = settings.registerBrokerTimeoutMills / 1000
        self._clients: dict[tuple[str, int], RemotingClient] = {}
        self._failing: set[tuple[str, int]] = set()
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        """Registers at once and every period on; waits for the first round at most START_WAIT_S (a name server
        that accepts but never answers must not hold the broker's start for registerBrokerTimeoutMills)."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        first_round = asyncio.Event()
        self._task = asyncio.ensure_future(self._run(first_round))
        try:
            await asyncio.wait_for(first_round.wait(), START_WAIT_S)
        except asyncio.TimeoutError:
            log.warning("broker %s: no answer from the name servers yet, still trying",
                        self.broker.settings.brokerName)  # fmt: skip

    def register_soon(self) -> None:
        """A registration now (the topics changed); callable from any thread."""
        if self._loop is not None and self._wake is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake.set)

    async def _run(self, first_round: asyncio.Event) -> None:
        await self._register_logged()
        first_round.set()
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.period_s)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()  # before registering: a change during it asks for another
            await self._register_logged()

    async def _register_logged(self) -> None:
        """register_all, whose unforeseen failure (a topic table that does not encode) is logged, not the end of
        the registrations: the next period tries again."""
        try:
            await self.register_all()
        except Exception:
            log.exception("broker %s: registering with the name servers failed", self.broker.settings.brokerName)

    # ------------------------------------------------------------------ the requests
    def register_request(self) -> tuple[dict[str, str], bytes]:
        """REGISTER_BROKER's header fields and body, as BrokerOuterAPI.registerBrokerAll writes them."""
        s = self.broker.settings
        version = self.broker.data_version
        wrapper = topic_config_wrapper_bean(self.broker.registered_topics(), version, self.broker.mapping_version)
        body = fastjson.dumpb(fastjson.Bean(filterServerList=[], topicConfigSerializeWrapper=wrapper))
        header = self.identity()
        header.update(
            haServerAddr=s.ha_server_addr,
            enableActingMaster="true" if s.enableSlaveActingMaster else "false",
            compressed="false",
            bodyCrc32=str(crc32(body)),
        )
        if s.enableSlaveActingMaster:
            header["heartbeatTimeoutMillis"] = str(s.brokerNotActiveTimeoutMillis)
        return header, body

    def identity(self) -> dict[str, str]:
        """The fields REGISTER_BROKER and UNREGISTER_BROKER share."""
        s = self.broker.settings
        return {"brokerName": s.brokerName, "brokerAddr": s.address, "clusterName": s.brokerClusterName,
                "brokerId": str(s.brokerId)}  # fmt: skip

    async def register_all(self) -> None:
        header, body = self.register_request()
        await asyncio.gather(*(self._register(addr, header, body) for addr in self.addresses))

    async def _register(self, addr: tuple[str, int], header: dict[str, str], body: bytes) -> None:
        where = f"{addr[0]}:{addr[1]}"
        try:
            client = await self._client(addr)
            answer = await client.invoke(RequestCode.REGISTER_BROKER, header, body, self.timeout_s)
            if answer.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"refused (code {answer.code}): {answer.remark}")
        except (OSError, asyncio.TimeoutError, RuntimeError) as e:
            # the first failure of a run is a warning, the repeats debug lines: a name server down for an hour
            # is one line in the log, not one every period
            level = logging.DEBUG if addr in self._failing else logging.WARNING
            log.log(level, "registering broker %s with the name server %s failed (tried again in %.1f s): %s",
                    self.broker.settings.brokerName, where, self.period_s, e or type(e).__name__)  # fmt: skip
            self._failing.add(addr)
            return
        if addr in self._failing:
            self._failing.discard(addr)
            log.warning("broker %s registered with the name server %s again", self.broker.settings.brokerName, where)
        else:
            log.debug("broker %s registered with the name server %s", self.broker.settings.brokerName, where)

    async def _client(self, addr: tuple[str, int]) -> RemotingClient:
        client = self._clients.get(addr)
        if client is None or client.closed:
            client = self._clients[addr] = await RemotingClient.connect(*addr)
        return client

    # ------------------------------------------------------------------ the stop
    async def stop(self) -> None:
        """No more registrations; UNREGISTER_BROKER to every name server (failures logged), connections closed."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await asyncio.gather(*(self._unregister(addr) for addr in self.addresses))
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
        self._loop = None

    async def _unregister(self, addr: tuple[str, int]) -> None:
        try:
            client = await self._client(addr)
            answer = await client.invoke(RequestCode.UNREGISTER_BROKER, self.identity(), timeout=UNREGISTER_TIMEOUT_S)
            if answer.code != ResponseCode.SUCCESS:
                log.warning("unregistering from the name server %s:%d refused: %s", *addr, answer.remark)
        except (OSError, asyncio.TimeoutError) as e:
            log.warning("unregistering from the name server %s:%d failed: %s", *addr, e or type(e).__name__)
