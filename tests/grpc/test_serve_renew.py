"""Automatic renewal of auto_renew receipt handles (serve/renew.py), with short ProxyConfig timings, through raw
gRPC calls against an in-process server."""

import time

import grpc
import pytest

from rocketstore.config.store_config import StoreConfig
from rocketstore.message import Message
from rocketstore.grpc.protocol import definition_pb2 as pb, service_pb2 as spb, service_pb2_grpc as sgrpc
from rocketstore.cli.server import Server

CONF = {
    "mappedFileSizeCommitLog": "10485760",
    "brokerName": "broker-test",
    "minInvisibleTimeMillsForRecv": "1000",
    "grpcClientConsumerMinLongPollingTimeoutMillis": "500",
    "defaultInvisibleTimeMills": "1500",
    "renewAheadTimeMillis": "700",
    "renewSliceTimeMillis": "1500",
    "renewSchedulePeriodMillis": "100",
    "invisibleTimeMillisWhenClear": "300",
    "channelExpiredTimeout": "2500",
}
TOPIC, GROUP = "Renew", "g"


@pytest.fixture
def srv(tmp_path):
    s = Server(str(tmp_path / "store"), "127.0.0.1:0", StoreConfig.from_properties(CONF))
    s.start()
    s.store.create_topic(TOPIC, 1)
    with grpc.insecure_channel(f"127.0.0.1:{s.port}") as ch:
        yield s, sgrpc.MessagingServiceStub(ch)
    s.stop()


def _put(s, body):
    r = s.store.put(Message(topic=TOPIC, body=body.encode(), properties={"UNIQ_KEY": "ID-" + body}), 0)
    assert r.ok


def _md(cid):
    return [("x-mq-client-id", cid)]


def _receive(stub, cid, auto_renew=False, polling_ms=500):
    req = spb.ReceiveMessageRequest(
        group=pb.Resource(name=GROUP),
        batch_size=8,
        auto_renew=auto_renew,
        message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
    )
    if not auto_renew:
        req.invisible_duration.FromMilliseconds(1000)
    req.long_polling_timeout.FromMilliseconds(polling_ms)
    return [p.message for p in stub.ReceiveMessage(req, metadata=_md(cid), timeout=5) if p.HasField("message")]


def _heartbeat(stub, cid):
    r = stub.Heartbeat(
        spb.HeartbeatRequest(group=pb.Resource(name=GROUP), client_type=pb.ClientType.PUSH_CONSUMER),
        metadata=_md(cid),
        timeout=5,
    )
    assert r.status.code == pb.Code.OK


def _hold(stub, cid, seconds, other="B"):
    """`cid` keeps heartbeating for `seconds` while `other` tries to receive: all `other` got."""
    got, end = [], time.time() + seconds
    while time.time() < end:
        _heartbeat(stub, cid)
        got += _receive(stub, other, polling_ms=500)
    return got


def test_renewal_keeps_message_invisible_and_original_handle_acks(srv):
    s, stub = srv
    _heartbeat(stub, "A")
    _put(s, "a")
    [m] = _receive(stub, "A", auto_renew=True)
    original = m.system_properties.receipt_handle
    assert m.body == b"a" and m.system_properties.invisible_duration.ToMilliseconds() == 1500
    # well past the initial 1.5 s invisible time: renewed, never delivered to B
    assert _hold(stub, "A", 4.0) == []
    assert s.service.renew.renewals >= 2
    ack = spb.AckMessageRequest(
        group=pb.Resource(name=GROUP),
        topic=pb.Resource(name=TOPIC),
        entries=[spb.AckMessageEntry(message_id=m.system_properties.message_id, receipt_handle=original)],
    )
    r = stub.AckMessage(ack, metadata=_md("A"), timeout=5)
    assert r.status.code == pb.Code.OK, r
    assert s.service.renew.count() == 0 and s.service.pop.inflight_count(GROUP, TOPIC) == 0
    assert _hold(stub, "A", 2.5) == []  # acked: never delivered again


def test_termination_stops_renewal_and_message_comes_back(srv):
    s, stub = srv
    _heartbeat(stub, "A")
    _put(s, "b")
    [m] = _receive(stub, "A", auto_renew=True)
    assert _hold(stub, "A", 2.5) == []
    assert s.service.renew.renewals >= 1
    r = stub.NotifyClientTermination(
        spb.NotifyClientTerminationRequest(group=pb.Resource(name=GROUP)), metadata=_md("A"), timeout=5
    )
    assert r.status.code == pb.Code.OK
    assert s.service.renew.count() == 0
    t0 = time.time()
    got = []
    while not got and time.time() - t0 < 3:
        got = _receive(stub, "B")
    assert [x.body for x in got] == [b"b"] and got[0].system_properties.delivery_attempt == 2
    assert time.time() - t0 < 1.5  # invisibleTimeMillisWhenClear (300 ms), not the 1.5 s slice


def test_silent_client_expires_and_change_invisible_and_dlq_use_newest_handle(srv):
    s, stub = srv
    _heartbeat(stub, "A")
    for b in ("c", "d", "e"):
        _put(s, b)
    got = _receive(stub, "A", auto_renew=True)
    assert sorted(x.body for x in got) == [b"c", b"d", b"e"]
    by = {x.body: x for x in got}
    assert _hold(stub, "A", 2.2) == []
    # ChangeInvisibleDuration with the original handle: acts on the renewed one, renewal stops
    c = by[b"c"]
    req = spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name=GROUP),
        topic=pb.Resource(name=TOPIC),
        receipt_handle=c.system_properties.receipt_handle,
        message_id=c.system_properties.message_id,
    )
    req.invisible_duration.FromMilliseconds(0)
    r = stub.ChangeInvisibleDuration(req, metadata=_md("A"), timeout=5)
    assert r.status.code == pb.Code.OK, r
    # ForwardMessageToDeadLetterQueue with the original handle
    d = by[b"d"]
    fwd = spb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name=GROUP),
        topic=pb.Resource(name=TOPIC),
        receipt_handle=d.system_properties.receipt_handle,
        message_id=d.system_properties.message_id,
        delivery_attempt=1,
        max_delivery_attempts=1,
    )
    assert stub.ForwardMessageToDeadLetterQueue(fwd, metadata=_md("A"), timeout=5).status.code == pb.Code.OK
    assert s.service.renew.count() == 1  # only "e" is still renewed
    again = []
    t0 = time.time()
    while b"c" not in [x.body for x in again] and time.time() - t0 < 3:
        _heartbeat(stub, "A")
        again += _receive(stub, "B")
    assert [x.body for x in again] == [b"c"]
    ack = spb.AckMessageRequest(
        group=pb.Resource(name=GROUP),
        topic=pb.Resource(name=TOPIC),
        entries=[
            spb.AckMessageEntry(
                message_id=again[0].system_properties.message_id,
                receipt_handle=again[0].system_properties.receipt_handle,
            )
        ],
    )
    assert stub.AckMessage(ack, metadata=_md("B"), timeout=5).status.code == pb.Code.OK
    # A goes silent: after channelExpiredTimeout (2.5 s) its "e" is cleared and comes back
    t0 = time.time()
    back = []
    while not back and time.time() - t0 < 6:
        back = _receive(stub, "B")
    assert [x.body for x in back] == [b"e"]
    assert 1.5 < time.time() - t0
    assert s.service.renew.count() == 0
