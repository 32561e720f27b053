"""The asyncio remoting server: dispatch by code, opaque echo, oneway, unknown codes, handler failures, limits, bad
frames, server-initiated requests."""

import asyncio
import struct

from remoting_client import Client

from rocketstore.remoting.codes import ResponseCode, SerializeType
from rocketstore.remoting.command import RemotingCommand, response_to
from rocketstore.remoting.errors import HeaderError
from rocketstore.remoting.server import OVERLOAD_REMARK, RemotingServer


def serve(handlers, scenario, **options):
    async def main():
        server = RemotingServer(handlers, **options)
        port = await server.start("127.0.0.1", 0)
        try:
            return await scenario(server, port)
        finally:
            await server.close()

    return asyncio.run(main())


async def echo(req, conn):
    return response_to(req, ResponseCode.SUCCESS, "echo", {"got": req.ext("x") or ""}, req.body)


def test_dispatch_echoes_opaque_and_marks_response():
    async def scenario(server, port):
        c = await Client.connect(port)
        resp = await c.call(10, {"x": "1"}, b"body")
        await c.close()
        return resp

    resp = serve({10: echo}, scenario, version=479)
    assert resp.code == 0 and resp.remark == "echo" and resp.ext_fields == {"got": "1"} and resp.body == b"body"
    assert resp.flag == 1 and resp.version == 479 and resp.serialize_type == SerializeType.JSON


def test_unknown_code_answers_request_code_not_supported():
    async def scenario(server, port):
        c = await Client.connect(port)
        resp = await c.call(4242)
        await c.close()
        return resp

    resp = serve({}, scenario)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED == 3
    assert resp.remark == " request type 4242 not supported"


def test_oneway_gets_no_answer():
    async def scenario(server, port):
        c = await Client.connect(port)
        await c.send(RemotingCommand(code=4242, opaque=1, flag=2))  # unknown, oneway: no answer
        await c.send(RemotingCommand(code=10, opaque=2, flag=2))  # handled, oneway: no answer
        resp = await c.call(10)
        await c.close()
        return resp

    assert serve({10: echo}, scenario).opaque == 100


def test_rocketmq_form_request_gets_json_answer():
    async def scenario(server, port):
        c = await Client.connect(port)
        resp = await c.call(10, {"x": "y"}, serialize_type=SerializeType.ROCKETMQ)
        await c.close()
        return resp

    resp = serve({10: echo}, scenario)
    assert resp.ext_fields == {"got": "y"} and resp.serialize_type == SerializeType.JSON


def test_handler_failures_answer_system_error():
    async def header(req, conn):
        raise HeaderError("the custom field <topic> is null")

    async def broken(req, conn):
        raise KeyError("boom")

    async def scenario(server, port):
        c = await Client.connect(port)
        out = [await c.call(1), await c.call(2), await c.call(10)]  # the connection survives both
        await c.close()
        return out

    a, b, ok = serve({1: header, 2: broken, 10: echo}, scenario)
    assert a.code == b.code == ResponseCode.SYSTEM_ERROR
    assert a.remark == "RemotingCommandException: the custom field <topic> is null"
    assert b.remark.startswith("KeyError") and ok.code == 0


def test_requests_run_concurrently_and_in_flight_is_bounded():
    release = asyncio.Event()

    async def slow(req, conn):
        await release.wait()
        return response_to(req, ResponseCode.SUCCESS, "slow")

    async def scenario(server, port):
        release.clear()
        c = await Client.connect(port)
        await c.send(RemotingCommand(code=1, opaque=1))
        await c.send(RemotingCommand(code=1, opaque=2))
        busy = await c.read()  # the second exceeds max_in_flight=1: answered at once
        release.set()
        slow_resp = await c.read()
        after = await c.call(1)  # in flight is back to 0
        await c.close()
        return busy, slow_resp, after, server.in_flight

    busy, slow_resp, after, in_flight = serve({1: slow}, scenario, max_in_flight=1)
    assert (busy.opaque, busy.code, busy.remark) == (2, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
    assert (slow_resp.opaque, slow_resp.remark) == (1, "slow")
    assert after.code == 0 and in_flight == 0


def test_connection_limit():
    async def scenario(server, port):
        first = await Client.connect(port)
        await first.call(10)
        second = await Client.connect(port)
        refused = await second.closed_by_peer()
        ok = await first.call(10)
        await first.close()
        await second.close()
        return refused, ok.code

    assert serve({10: echo}, scenario, max_connections=1) == (True, 0)


def test_oversized_and_garbage_frames_close_the_connection():
    async def scenario(server, port):
        out = []
        for raw in (
            struct.pack(">i", 1 << 20) + b"x",  # above max_frame: refused before reading it
            struct.pack(">i", 2),  # shorter than the header length field
            struct.pack(">ii", 8, 4) + b"nope",  # not JSON
            struct.pack(">iI", 8, (7 << 24) | 4) + b"{}{}",  # unknown serialization type
        ):
            c = await Client.connect(port)
            await c.send_raw(raw)
            out.append(await c.closed_by_peer())
            await c.close()
        c = await Client.connect(port)  # the server still serves
        out.append((await c.call(10)).code)
        await c.close()
        return out

    assert serve({10: echo}, scenario, max_frame=4096) == [True, True, True, True, 0]


def test_split_writes_and_pipelined_frames():
    async def scenario(server, port):
        c = await Client.connect(port)
        from rocketstore.remoting import frame

        data = b"".join(frame.encode(RemotingCommand(code=10, opaque=i, ext_fields={"x": str(i)})) for i in range(5))
        for i in range(0, len(data), 7):  # dribbled out in 7-byte pieces
            await c.send_raw(data[i : i + 7])
        got = sorted([(r.opaque, r.ext_fields["got"]) for r in [await c.read() for _ in range(5)]])
        await c.close()
        return got

    assert serve({10: echo}, scenario) == [(i, str(i)) for i in range(5)]


def test_server_initiated_request_matched_by_opaque():
    async def scenario(server, port):
        c = await Client.connect(port)
        await c.call(10)
        (conn,) = server.connections.values()
        ask = asyncio.create_task(conn.request(RemotingCommand(code=39, ext_fields={"q": "?"}), timeout=10))
        req = await c.read()
        assert not req.is_response and req.ext("q") == "?"
        await c.send(RemotingCommand(code=0, opaque=req.opaque, flag=1, remark="answer"))
        resp = await ask
        await c.close()
        return resp

    assert serve({10: echo}, scenario).remark == "answer"


def test_on_close_called_with_the_connection():
    closed = []

    async def scenario(server, port):
        c = await Client.connect(port)
        await c.call(10)
        (conn_id,) = server.connections
        await c.close()
        for _ in range(100):
            if closed:
                break
            await asyncio.sleep(0.01)
        return conn_id

    conn_id = serve({10: echo}, scenario, on_close=lambda conn: closed.append(conn.id))
    assert closed == [conn_id]


def test_protocol_errors_are_rocketstore_errors():
    from rocketstore.errors import RocketStoreError
    from rocketstore.remoting import frame
    from rocketstore.remoting.errors import RemotingProtocolError

    try:
        frame.decode(b"\x00")
    except RemotingProtocolError as e:
        assert isinstance(e, RocketStoreError) and isinstance(e, ValueError)
    else:
        raise AssertionError("no error")
    assert issubclass(HeaderError, RocketStoreError)


def test_a_failing_hook_ends_only_its_connection():
    def hook(cmd, conn):
        if cmd.code == 66:
            raise RuntimeError("hook bug")

    async def scenario(server, port):
        bad = await Client.connect(port)
        await bad.send(RemotingCommand(code=66, opaque=1))
        closed = await bad.closed_by_peer()
        good = await Client.connect(port)
        resp = await good.call(10)
        await bad.close()
        await good.close()
        return closed, resp.code

    assert serve({10: echo}, scenario, on_request=hook) == (True, 0)


def test_oneway_to_a_lost_connection_is_a_warning_not_an_error(caplog):
    # a notification racing a client's disconnect (the transport lost before the read loop saw it): the write's
    # ConnectionResetError must not escape into a task nobody awaits (asyncio would log it with a traceback)
    async def scenario(server, port):
        c = await Client.connect(port)
        await c.call(10)
        (conn,) = server.connections.values()
        conn.writer.transport.abort()
        await conn.oneway(RemotingCommand(code=40, ext_fields={"consumerGroup": "g"}))
        await c.close()

    with caplog.at_level("WARNING", logger="rocketstore.remoting"):
        serve({10: echo}, scenario)
    assert any("oneway request 40 not sent, connection lost" in r.getMessage() for r in caplog.records)
