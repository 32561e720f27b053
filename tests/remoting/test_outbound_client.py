"""rocketstore.remoting.client: answers matched by opaque, a silent peer a TimeoutError, a peer that goes away a
ConnectionError for every request waiting."""

import asyncio

import pytest

from rocketstore.remoting import frame
from rocketstore.remoting.client import RemotingClient
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.command import response_to
from rocketstore.remoting.namesrv import NameServer


async def silent_server(hang_up: asyncio.Event):
    """A server that reads requests and answers none; it closes each connection once `hang_up` is set."""

    async def handle(reader, writer):
        await hang_up.wait()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_answers_come_back_to_their_requests():
    async def main():
        ns = NameServer()
        port = await ns.start("127.0.0.1", 0)
        ns.kv.put("NS", "k", "v")
        c = await RemotingClient.connect("127.0.0.1", port)
        found, missing = await asyncio.gather(
            c.invoke(RC.GET_KV_CONFIG, {"namespace": "NS", "key": "k"}),
            c.invoke(RC.GET_KV_CONFIG, {"namespace": "NS", "key": "nope"}),
        )
        await c.close()
        await ns.close()
        return found, missing

    found, missing = asyncio.run(main())
    assert (found.code, found.ext_fields) == (0, {"value": "v"})
    assert missing.code == 22 and missing.remark == "No config item, Namespace: NS Key: nope"  # QUERY_NOT_FOUND


def test_a_silent_peer_times_out_and_the_connection_is_closed():
    async def main():
        hang_up = asyncio.Event()
        server = await silent_server(hang_up)
        c = await RemotingClient.connect("127.0.0.1", server.sockets[0].getsockname()[1])
        with pytest.raises(asyncio.TimeoutError, match="no answer from"):
            await c.invoke(RC.GET_BROKER_CLUSTER_INFO, timeout=0.2)
        closed = c.closed
        hang_up.set()
        server.close()
        return closed

    assert asyncio.run(main())


def test_a_peer_that_goes_away_fails_every_waiting_request():
    async def main():
        hang_up = asyncio.Event()
        server = await silent_server(hang_up)
        c = await RemotingClient.connect("127.0.0.1", server.sockets[0].getsockname()[1])
        waiting = [asyncio.ensure_future(c.invoke(RC.GET_BROKER_CLUSTER_INFO, timeout=10)) for _ in range(3)]
        await asyncio.sleep(0.1)
        hang_up.set()
        results = await asyncio.gather(*waiting, return_exceptions=True)
        server.close()
        with pytest.raises(ConnectionError, match="is closed"):
            await c.invoke(RC.GET_BROKER_CLUSTER_INFO)
        return results

    results = asyncio.run(main())
    assert [type(r) for r in results] == [ConnectionError] * 3


def test_an_answer_frame_is_read_whole():
    """The client reads a response split over several TCP writes as one command."""

    async def main():
        async def handle(reader, writer):
            length = frame.frame_length(await reader.readexactly(4))
            request = frame.decode(await reader.readexactly(length))
            data = frame.encode(response_to(request, 0, "split", body=b"x" * 1000))
            for i in range(0, len(data), 7):
                writer.write(data[i : i + 7])
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        c = await RemotingClient.connect("127.0.0.1", server.sockets[0].getsockname()[1])
        answer = await c.invoke(RC.GET_BROKER_CLUSTER_INFO)
        await c.close()
        server.close()
        return answer

    answer = asyncio.run(main())
    assert (answer.code, answer.remark, answer.body) == (0, "split", b"x" * 1000)
