"""Which thread answers a unary gRPC call: with ASYNC_FLUSH a send never waits on the disk and is answered on
serve's event loop (no pool hand-over); with SYNC_FLUSH it waits for its flush on a pool thread, and an ack,
which syncs the pop journal, always does (the loop must never wait on the disk)."""

import threading
import uuid

import grpc
import pytest

from rocketstore.cli.server import Server
from rocketstore.config.store_config import StoreConfig
from rocketstore.grpc.protocol import definition_pb2 as pb, service_pb2 as spb, service_pb2_grpc as sgrpc
from rocketstore.grpc.service import MessagingService

MD = [("x-mq-client-id", "inline-test")]


@pytest.mark.parametrize("flush, send_on", [("ASYNC_FLUSH", "serve-loop"), ("SYNC_FLUSH", "grpc")])
def test_sends_on_the_loop_only_when_they_cannot_wait_on_the_disk(tmp_path, monkeypatch, flush, send_on):
    seen = {}
    for name in ("SendMessage", "AckMessage", "QueryRoute"):
        real = getattr(MessagingService, name)

        def spy(self, request, context, real=real, name=name):
            seen[name] = threading.current_thread().name
            return real(self, request, context)

        monkeypatch.setattr(MessagingService, name, spy)
    conf = StoreConfig.from_properties({"mappedFileSizeCommitLog": "1048576", "flushDiskType": flush})
    s = Server(str(tmp_path / "store"), "127.0.0.1:0", conf)
    s.start()
    try:
        s.store.create_topic("T", 1)
        with grpc.insecure_channel(f"127.0.0.1:{s.port}") as ch:
            stub = sgrpc.MessagingServiceStub(ch)
            route = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="T")), metadata=MD, timeout=5)
            assert route.status.code == pb.Code.OK
            msg = pb.Message(
                topic=pb.Resource(name="T"),
                body=b"x",
                system_properties=pb.SystemProperties(message_id="01" + uuid.uuid4().hex.upper()),
            )
            r = stub.SendMessage(spb.SendMessageRequest(messages=[msg]), metadata=MD, timeout=5)
            assert r.status.code == pb.Code.OK
            ack = spb.AckMessageRequest(group=pb.Resource(name="g"), topic=pb.Resource(name="T"))
            ack.entries.add(message_id="01" + "0" * 32, receipt_handle="not a handle")
            assert stub.AckMessage(ack, metadata=MD, timeout=5).status.code == pb.Code.INVALID_RECEIPT_HANDLE
    finally:
        s.stop()
    assert seen["QueryRoute"] == "serve-loop"
    assert seen["SendMessage"].startswith(send_on)
    assert seen["AckMessage"].startswith("grpc")
