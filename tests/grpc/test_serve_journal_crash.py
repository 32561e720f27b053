"""Acked messages stay acked across crashes of `rocketstore serve` (SIGKILL of the real subprocess) even when
the first crash tore the last line of the pop-state journal, and an ack the journal cannot hold (a full disk:
a real small tmpfs under the store's config/) is not answered OK."""

import os
import signal
import subprocess
import uuid

import grpc
import pytest

from rocketstore.config.store_config import StoreConfig
from rocketstore.message import Message
from rocketstore.grpc.protocol import definition_pb2 as pb, service_pb2 as spb, service_pb2_grpc as sgrpc
from rocketstore.cli.server import Server

Code = pb.Code
MD = [("x-mq-client-id", "journal-test")]
TOPIC, GROUP = "Jobs", "workers"


def _send(stub, body):
    msg = pb.Message(
        topic=pb.Resource(name=TOPIC),
        body=body.encode(),
        system_properties=pb.SystemProperties(message_id="01" + uuid.uuid4().hex.upper()),
    )
    r = stub.SendMessage(spb.SendMessageRequest(messages=[msg]), metadata=MD, timeout=5)
    assert r.status.code == Code.OK, r


def _receive(stub, invisible_ms, polling_ms=1000):
    req = spb.ReceiveMessageRequest(
        group=pb.Resource(name=GROUP),
        batch_size=32,
        message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
    )
    req.invisible_duration.FromMilliseconds(invisible_ms)
    req.long_polling_timeout.FromMilliseconds(polling_ms)
    return [p.message for p in stub.ReceiveMessage(req, metadata=MD, timeout=10) if p.HasField("message")]


def _receive_bodies(stub, want: set, invisible_ms=1000, tries=20):
    """Receive until every body in `want` has come (in-flight ones come back after their invisible time): each
    body's latest delivery, whose receipt handle is the one an ack must name (a redelivery supersedes the
    earlier handles)."""
    got = {}
    for _ in range(tries):
        for m in _receive(stub, invisible_ms):
            got[m.body.decode()] = m
        if want <= set(got):
            break
    return got


def _ack(stub, m):
    r = stub.AckMessage(
        spb.AckMessageRequest(
            group=pb.Resource(name=GROUP),
            topic=pb.Resource(name=TOPIC),
            entries=[
                spb.AckMessageEntry(
                    message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle
                )
            ],
        ),
        metadata=MD,
        timeout=5,
    )
    return r.status


def test_acks_survive_two_crashes_after_a_torn_journal_line(server):
    journal = os.path.join(server.store, "config", "popState.json.journal")
    with grpc.insecure_channel(server.endpoint) as ch:
        stub = sgrpc.MessagingServiceStub(ch)
        for i in range(6):
            _send(stub, f"m{i}")
        first = _receive_bodies(stub, {f"m{i}" for i in range(6)}, invisible_ms=1000)
        assert set(first) == {f"m{i}" for i in range(6)}
        assert [_ack(stub, first[b]).code for b in ("m0", "m1")] == [Code.OK, Code.OK]
    server.stop(signal.SIGKILL)
    with open(journal, "ab") as fh:  # the crash tore the line being appended
        fh.write(b'{"k":"Jobs@workers","v":{"0":{"next":3,"infl')
    server.start()
    with grpc.insecure_channel(server.endpoint) as ch:
        stub = sgrpc.MessagingServiceStub(ch)
        again = _receive_bodies(stub, {"m2", "m3", "m4", "m5"}, invisible_ms=3000)  # time for the acks below
        assert set(again) == {"m2", "m3", "m4", "m5"}  # acked m0, m1 not among them
        assert [_ack(stub, again[b]).code for b in ("m2", "m3")] == [Code.OK, Code.OK]
    server.stop(signal.SIGKILL)
    server.start()
    with grpc.insecure_channel(server.endpoint) as ch:
        stub = sgrpc.MessagingServiceStub(ch)
        last = _receive_bodies(stub, {"m4", "m5"})
        more = _receive(stub, 1000, polling_ms=1500)  # anything else due by now comes too
        assert set(last) | {m.body.decode() for m in more} == {"m4", "m5"}


@pytest.fixture
def small_config_dir(tmp_path):
    config = tmp_path / "store" / "config"
    config.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(config)], check=True)
    yield config
    subprocess.run(["umount", "-l", str(config)], check=True)


def test_an_ack_the_full_disk_cannot_journal_is_not_answered_ok(tmp_path, small_config_dir):
    conf = StoreConfig.from_properties(
        {
            "mappedFileSizeCommitLog": "10485760",
            "minInvisibleTimeMillsForRecv": "1000",
            "grpcClientConsumerMinLongPollingTimeoutMillis": "500",
        }
    )
    s = Server(str(tmp_path / "store"), "127.0.0.1:0", conf)
    s.start()
    try:
        s.store.create_topic(TOPIC, 1)
        # 150 in flight: each change of the group is a journal line of ~6 KB, more than a page (4 KB), so it
        # cannot fit in what the journal's last page has left once the file system is full
        for i in range(150):
            assert s.store.put(Message(topic=TOPIC, body=b"job%d" % i, properties={"UNIQ_KEY": f"01{i:032X}"}), 0).ok
        with grpc.insecure_channel(f"127.0.0.1:{s.port}") as ch:
            stub = sgrpc.MessagingServiceStub(ch)
            inflight = []
            while len(inflight) < 150:
                inflight += _receive(stub, 30_000)
            m = inflight[0]
            filler = small_config_dir / "filler"
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
            try:
                while os.write(fd, b"x" * 4096) > 0:
                    pass
            except OSError:
                pass
            os.close(fd)
            status = _ack(stub, m)
            assert status.code == Code.INTERNAL_SERVER_ERROR and "popState.json.journal" in status.message
            os.remove(filler)
            assert _ack(stub, m).code == Code.OK  # space again: the ack is made durable
    finally:
        s.stop()
    s = Server(str(tmp_path / "store"), "127.0.0.1:0", conf)
    s.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{s.port}") as ch:
            stub = sgrpc.MessagingServiceStub(ch)
            for other in inflight[1:]:  # the others were still in flight, with their handles
                assert _ack(stub, other).code == Code.OK
            assert _receive(stub, 1000, polling_ms=500) == []
    finally:
        s.stop()
