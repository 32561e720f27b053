"""A store, the name server and the broker on it, started inside a coroutine (with_broker) for socket tests, or
on the tests' loop thread (broker_on_loop) for clients in other processes (the C++ client's tests)."""

import asyncio
import contextlib
import time

from remoting_client import Client

from rocketstore import MessageStore, StoreConfig
from rocketstore.remoting.broker import Broker, BrokerSettings
from rocketstore.remoting.namesrv import NameServer


def open_store(tmp_path, **more) -> MessageStore:
    """Small segments; the disk measured as empty, so puts go on when the shared test machine's disk is above
    RocketMQ's 90 % warning level."""
    store = MessageStore.open(str(tmp_path / "store"), StoreConfig(mapped_file_size_commit_log=16 << 20, **more))
    store._cleanup.disk_usage = lambda path: 0.0
    store._cleanup.check_disk_full()
    return store


def with_broker(tmp_path, scenario, settings=None, store=None):
    """scenario(broker, client, store) in a fresh loop; the store stays open for the caller to read back."""
    store = store or open_store(tmp_path)

    async def main():
        ns = NameServer()
        await ns.start("127.0.0.1", 0)
        broker = Broker(store, settings or BrokerSettings(), routes=ns.routes)
        port = await broker.start("127.0.0.1", 0)
        c = await Client.connect(port)
        try:
            return await scenario(broker, c, store)
        finally:
            await c.close()
            await broker.close()
            await ns.close()

    return asyncio.run(main()), store


@contextlib.contextmanager
def broker_on_loop(loop_thread, store, *, port: int = 0, acl=None, namesrv_acl=None, settings=None):
    """The name server (with `namesrv_acl`, if any) and a broker over `store` (with `acl`) on the loop thread,
    closed with the store afterwards: yields {"namesrv": its address, "store", "broker", "ns", "loop"}."""
    ns = NameServer(acl=namesrv_acl)
    broker = Broker(store, settings or BrokerSettings(), routes=ns.routes, acl=acl)

    async def start():
        nport = await ns.start("127.0.0.1", 0)
        await broker.start("127.0.0.1", port)
        return nport

    nport = loop_thread.run(start())
    try:
        yield {"namesrv": f"127.0.0.1:{nport}", "store": store, "broker": broker, "ns": ns, "loop": loop_thread}
    finally:

        async def stop():
            await broker.close()
            await ns.close()

        loop_thread.run(stop())
        store.close()


def wait_until(probe, timeout: float = 30):
    """The probe's last answer, once true or when the time is up (the caller asserts on it)."""
    deadline = time.monotonic() + timeout
    while not probe() and time.monotonic() < deadline:
        time.sleep(0.05)
    return probe()
