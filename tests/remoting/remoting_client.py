"""A minimal asyncio remoting client for the tests: frames written by rocketstore's codec (or raw bytes), responses
matched by opaque; and the header of a send as RocketMQ's Java producer fills it, in either form."""

import asyncio
import itertools

from rocketstore.remoting import frame
from rocketstore.remoting.command import RemotingCommand


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.opaques = itertools.count(100)

    @classmethod
    async def connect(cls, port: int) -> "Client":
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def send(self, cmd: RemotingCommand) -> None:
        self.writer.write(frame.encode(cmd))
        await self.writer.drain()

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read(self, timeout: float = 10) -> RemotingCommand:
        async def one():
            length = frame.frame_length(await self.reader.readexactly(4))
            return frame.decode(await self.reader.readexactly(length))

        return await asyncio.wait_for(one(), timeout)

    async def call(self, code: int, ext: dict | None = None, body: bytes = b"", **fields) -> RemotingCommand:
        cmd = RemotingCommand(code=code, ext_fields=ext, body=body, opaque=next(self.opaques), **fields)
        await self.send(cmd)
        resp = await self.read()
        assert resp.opaque == cmd.opaque and resp.is_response
        return resp

    async def closed_by_peer(self, timeout: float = 10) -> bool:
        return await asyncio.wait_for(self.reader.read(), timeout) == b""

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass


def send_header(topic: str = "T", queue_id: int = 0, props: str = "", **more) -> dict:
    """SendMessageRequestHeader's fields as DefaultMQProducerImpl.sendKernelImpl fills them; `more` replaces any."""
    ext = {"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
           "queueId": str(queue_id), "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0",
           "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}  # fmt: skip
    ext.update(more)
    return ext


# SendMessageRequestHeaderV2's one-letter names (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE)
V2 = dict(zip("abcdefghijkm", ["producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
                               "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode",
                               "batch"]))  # fmt: skip


def v2(ext: dict) -> dict:
    """A send header under V2's short names."""
    back = {v: k for k, v in V2.items()}
    return {back[k]: v for k, v in ext.items()}
