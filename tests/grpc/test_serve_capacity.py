"""Open Telemetry streams and long polls do not starve unary calls, and the configured limits answer clearly.
Many raw-stub clients (grpc.aio, in this process) against a `rocketstore serve` subprocess on loopback; every
call has a deadline, so nothing here can hang."""

import asyncio
import importlib.util
import os
import uuid

import grpc
import grpc.aio
import pytest

from rocketstore.grpc.protocol import definition_pb2 as pb, service_pb2 as spb, service_pb2_grpc as sgrpc

_spec = importlib.util.spec_from_file_location(
    "serve_conftest_capacity", os.path.join(os.path.dirname(__file__), "conftest.py")
)
_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conftest)
CONF, ServeProcess = _conftest.CONF, _conftest.ServeProcess
Code = pb.Code


def _settings(cid):
    s = pb.Settings(client_type=pb.ClientType.PRODUCER, access_point=pb.Endpoints())
    s.publishing.topics.add(name="Busy")
    return spb.TelemetryCommand(settings=s)


async def _open_stream(stub, cid, hold: asyncio.Event):
    """A producer's Telemetry stream: settings sent, the server's answer read, then held open until `hold`."""

    async def commands():
        yield _settings(cid)
        await hold.wait()

    call = stub.Telemetry(commands(), metadata=[("x-mq-client-id", cid)], timeout=60)
    first = await call.read()
    return call, first


async def _refused_stream(stub, cid, hold: asyncio.Event):
    """The error a new Telemetry stream ends with before the client sends anything, or None when the server
    answers it with its first command (a heartbeat-less stream: the settings are sent once it is accepted)."""
    sent = asyncio.Event()

    async def commands():
        await sent.wait()
        yield _settings(cid)
        await hold.wait()

    call = stub.Telemetry(commands(), metadata=[("x-mq-client-id", cid)], timeout=60)
    try:
        done, _ = await asyncio.wait([asyncio.ensure_future(call.code())], timeout=1.0)
        if done:
            return grpc.aio.AioRpcError(await call.code(), None, None, await call.details())
        sent.set()
        first = await call.read()
        assert first.status.code == Code.OK
        return None
    except grpc.aio.AioRpcError as e:
        return e


def _poll_request(group, polling_ms):
    req = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        batch_size=1,
        message_queue=pb.MessageQueue(topic=pb.Resource(name="Busy"), id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
    )
    req.invisible_duration.FromMilliseconds(30_000)
    req.long_polling_timeout.FromMilliseconds(polling_ms)
    return req


async def _poll(stub, group, polling_ms=20_000):
    parts = [
        p
        async for p in stub.ReceiveMessage(
            _poll_request(group, polling_ms), metadata=[("x-mq-client-id", group)], timeout=40
        )
    ]
    return parts[0].status, [p.message.body for p in parts if p.HasField("message")]


def _send(stub, body):
    msg = pb.Message(
        topic=pb.Resource(name="Busy"),
        body=body,
        system_properties=pb.SystemProperties(message_id="01" + uuid.uuid4().hex.upper()),
    )
    return stub.SendMessage(spb.SendMessageRequest(messages=[msg]), metadata=[("x-mq-client-id", "probe")], timeout=5)


@pytest.fixture
def serve(tmp_path):
    started = []

    def make(extra_conf=""):
        s = ServeProcess(tmp_path)
        s.conf.write_text(CONF + extra_conf)
        started.append(s.start())
        return s

    yield make
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(10)


def test_streams_and_long_polls_leave_unary_calls_answered(serve):
    s = serve()
    with grpc.insecure_channel(s.endpoint) as ch:
        probe = sgrpc.MessagingServiceStub(ch)
        assert probe.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Busy")), timeout=5).status.code == Code.OK

        async def scenario():
            channels = [grpc.aio.insecure_channel(s.endpoint) for _ in range(10)]
            stubs = [sgrpc.MessagingServiceStub(c) for c in channels]
            hold = asyncio.Event()
            try:
                # 300 clients' Telemetry streams, each answered (so each is open on the server)
                opened = await asyncio.gather(*[_open_stream(stubs[i % 10], f"producer-{i}", hold) for i in range(300)])
                assert all(first.status.code == Code.OK for _, first in opened)
                # 600 consumer groups long-polling an empty topic
                polls = [asyncio.ensure_future(_poll(stubs[i % 10], f"group{i}")) for i in range(600)]
                await asyncio.sleep(0)
                # meanwhile unary calls are answered within their 5 s deadline (a starved pool would time out)
                loop = asyncio.get_running_loop()
                for i in range(5):
                    route = await loop.run_in_executor(
                        None, lambda: probe.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Busy")), timeout=5)
                    )
                    assert route.status.code == Code.OK
                sent = await loop.run_in_executor(None, _send, probe, b"wake")
                assert sent.status.code == Code.OK
                # every one of the 600 polls was open: each group receives the message
                results = await asyncio.gather(*polls)
                assert [r for r in results if r != (results[0][0], [b"wake"])] == []
                assert results[0][0].code == Code.OK
                assert all(not call.done() for call, _ in opened)  # the streams stayed open throughout
            finally:
                hold.set()
                for c in channels:
                    await c.close()

        asyncio.run(scenario())


def test_limits_answer_resource_exhausted_and_polling_full(serve):
    s = serve("maxTelemetryStreams=3\nmaxPopPollingSize=4\n")

    async def scenario():
        async with grpc.aio.insecure_channel(s.endpoint) as ch:
            stub = sgrpc.MessagingServiceStub(ch)
            route = await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Busy")), timeout=5)
            assert route.status.code == Code.OK  # the topic exists now
            hold = asyncio.Event()
            opened = [await _open_stream(stub, f"p{i}", hold) for i in range(3)]
            assert all(first.status.code == Code.OK for _, first in opened)
            refused = await _refused_stream(stub, "p-too-many", hold)
            assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "maxTelemetryStreams" in refused.details()
            # four polls fill the polling capacity; one more is told so at once (as the broker's "polling full")
            polls = [None] * 4
            for _ in range(50):
                for i, p in enumerate(polls):  # (re)start any of the four that lost its place to the fifth
                    if p is None or p.done():
                        polls[i] = asyncio.ensure_future(_poll(stub, f"g{i}", polling_ms=20_000))
                await asyncio.sleep(0.01)
                status, got = await _poll(stub, "g-extra", polling_ms=500)
                if status.code == Code.TOO_MANY_REQUESTS:
                    break
            assert status.code == Code.TOO_MANY_REQUESTS and "polling full" in status.message and got == []
            # a closed stream frees its place
            opened[0][0].cancel()
            for _ in range(50):
                refused = await _refused_stream(stub, "p-again", hold)
                if refused is None:
                    break
                assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert refused is None
            hold.set()
            for p in polls:
                p.cancel()

    asyncio.run(scenario())
