"""The server's request path: handlers that never wait are answered on the connection's reader without a task of
their own, handlers that wait go on in a task from their first wait; the answers of one pass of the event loop go
out in one write, byte for byte what each frame is alone; a client that does not read its answers stops being
read; answers made before a connection ends are still sent."""

import asyncio
import struct

from remoting_client import Client

from rocketstore.remoting.codes import ResponseCode
from rocketstore.remoting.command import RemotingCommand, response_to
from rocketstore.remoting.server import RemotingServer


def serve(handlers, scenario, **options):
    async def main():
        server = RemotingServer(handlers, version=479, **options)
        port = await server.start("127.0.0.1", 0)
        try:
            return await scenario(server, port)
        finally:
            await server.close()

    return asyncio.run(main())


async def echo(req, conn):
    return response_to(req, ResponseCode.SUCCESS, "echo", {"got": req.ext("x") or ""})


def echo_frame(i: int) -> bytes:
    # RemotingCommand.encode of the answer, by hand: fastjson's sorted bean fields, the response flag, version 479
    header = (
        b'{"code":0,"extFields":{"got":"%d"},"flag":1,"language":"JAVA","opaque":%d,"remark":"echo",'
        b'"serializeTypeCurrentRPC":"JSON","version":479}' % (i, i)
    )
    return struct.pack(">ii", 4 + len(header), len(header)) + header


async def read_exactly(c: Client, n: int) -> bytes:
    return await asyncio.wait_for(c.reader.readexactly(n), 30)


def test_pipelined_inline_answers_are_the_same_bytes_in_order():
    async def scenario(server, port):
        c = await Client.connect(port)
        from rocketstore.remoting import frame

        n = 200
        await c.send_raw(b"".join(frame.encode(RemotingCommand(code=10, opaque=i, ext_fields={"x": str(i)}))
                                  for i in range(n)))  # fmt: skip
        expected = b"".join(echo_frame(i) for i in range(n))
        got = await read_exactly(c, len(expected))
        await c.close()
        return got == expected, server.in_flight, server.waiting_requests

    # never waiting, the echoes are answered in the order asked and leave no task behind
    assert serve({10: echo}, scenario) == (True, 0, 0)


def test_handlers_that_wait_go_on_in_a_task():
    after_wait = []

    async def waits_on_thread(req, conn):
        value = await asyncio.to_thread(lambda: req.ext("x") * 2)
        after_wait.append(value)
        return response_to(req, ResponseCode.SUCCESS, value)

    async def yields_once(req, conn):
        await asyncio.sleep(0)
        return response_to(req, ResponseCode.SUCCESS, "slept")

    async def fails_after_wait(req, conn):
        await asyncio.sleep(0)
        raise KeyError("late")

    async def scenario(server, port):
        c = await Client.connect(port)
        codes = [10, 20, 30, 40] * 25
        for i, code in enumerate(codes):
            await c.send(RemotingCommand(code=code, opaque=i, ext_fields={"x": str(i)}))
        answers = {}
        while len(answers) < len(codes):
            r = await c.read(30)
            answers[r.opaque] = r
        for _ in range(500):  # the done-callbacks run a pass after the answer is queued
            if not server.waiting_requests:
                break
            await asyncio.sleep(0.01)
        await c.close()
        return codes, answers, server.in_flight, server.waiting_requests

    codes, answers, in_flight, tasks = serve({10: echo, 20: waits_on_thread, 30: yields_once, 40: fails_after_wait},
                                             scenario)  # fmt: skip
    assert in_flight == 0 and tasks == 0
    for i, code in enumerate(codes):
        r = answers[i]
        assert r.is_response
        if code == 10:
            assert (r.code, r.ext_fields) == (0, {"got": str(i)})
        elif code == 20:
            assert (r.code, r.remark) == (0, str(i) * 2)
        elif code == 30:
            assert (r.code, r.remark) == (0, "slept")
        else:
            assert r.code == ResponseCode.SYSTEM_ERROR and r.remark.startswith("KeyError")
    assert sorted(after_wait) == sorted(str(i) * 2 for i, code in enumerate(codes) if code == 20)


def test_close_cancels_a_waiting_handler_inside_its_own_code():
    seen = []

    async def held(req, conn):
        try:
            await asyncio.sleep(3600)  # a long poll
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return response_to(req, ResponseCode.SUCCESS)

    async def scenario(server, port):
        c = await Client.connect(port)
        await c.send(RemotingCommand(code=11, opaque=1))
        for _ in range(1000):
            if server.in_flight:
                break
            await asyncio.sleep(0.01)
        await server.close()
        await c.close()
        return server.in_flight

    assert serve({11: held}, scenario) == 0
    assert seen == ["cancelled"]


def test_a_client_that_does_not_read_is_not_read_either():
    handled = []
    big = b"x" * (1 << 20)

    async def large(req, conn):
        handled.append(req.opaque)
        return response_to(req, ResponseCode.SUCCESS, body=big)

    async def scenario(server, port):
        c = await Client.connect(port)
        n = 64  # 64 MiB of answers: more than the socket buffers and the transport's limit hold
        for i in range(n):
            await c.send(RemotingCommand(code=10, opaque=i))
        seen, stable = -1, 0
        while stable < 20:  # until the server has stopped taking requests for a while
            await asyncio.sleep(0.05)
            stable = stable + 1 if len(handled) == seen else 0
            seen = len(handled)
        stopped_at = len(handled)
        got = []
        for _ in range(n):  # reading the answers lets the server read the rest
            r = await c.read(60)
            got.append((r.opaque, len(r.body)))
        await c.close()
        return stopped_at, got

    stopped_at, got = serve({10: large}, scenario)
    assert stopped_at < 64
    assert sorted(got) == [(i, 1 << 20) for i in range(64)]


def test_answers_made_before_the_client_half_closes_are_sent():
    async def scenario(server, port):
        c = await Client.connect(port)
        from rocketstore.remoting import frame

        c.writer.write(frame.encode(RemotingCommand(code=10, opaque=5, ext_fields={"x": "5"})))
        c.writer.write_eof()  # the request and then the end of what the client sends
        data = await asyncio.wait_for(c.reader.read(), 30)
        await c.close()
        return data

    assert serve({10: echo}, scenario) == echo_frame(5)
