"""A store, the name server and the broker on it, started inside a coroutine (with_broker) for socket tests."""

import asyncio

from remoting_client import Client

from rocketstore import MessageStore, StoreConfig
from rocketstore.remoting.broker import Broker, BrokerSettings
from rocketstore.remoting.namesrv import NameServer


def open_store(tmp_path, **more) -> MessageStore:
    """Small segments; the disk measured as empty, so puts go on when the shared test machine's disk is above
    RocketMQ's 90 % warning level."""
    store = MessageStore.open(str(tmp_path / "store"), StoreConfig(mapped_file_size_commit_log=16 << 20, **more))
    store.cleanup.disk_usage = lambda path: 0.0
    store.cleanup.check_disk_full()
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
