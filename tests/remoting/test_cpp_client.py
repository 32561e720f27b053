"""The C++-core Python client (`rocketmq` 0.4.4 from PyPI, unchanged) against rocketstore's name server: it asks
for a route, gets it in fastjson's form (unquoted brokerAddrs keys), and goes to the broker the route names. The
broker here is a bare RemotingServer that records what the client sends: with no handlers it answers
REQUEST_CODE_NOT_SUPPORTED, with a stub SEND_MESSAGE handler a success; both are what the client must understand."""

import json
import struct
import time

import pytest

from rocketstore.remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType, Version
from rocketstore.remoting.command import response_to
from rocketstore.remoting.namesrv import NameServer
from rocketstore.remoting.namesrv.routes import DataVersion, TopicConfig
from rocketstore.remoting.server import RemotingServer


class Recorder:
    def __init__(self):
        self.requests = []

    def __call__(self, cmd, conn):
        self.requests.append(cmd)

    def codes(self):
        return [c.code for c in self.requests]


@pytest.fixture
def cluster(loop_thread):
    """A name server and a recording broker registered in it as broker-a (master) with topic T (4 queues)."""
    ns_seen, broker_seen = Recorder(), Recorder()
    ns = NameServer()
    ns.server.on_request = ns_seen
    handlers = {}
    broker = RemotingServer(handlers, name="broker", on_request=broker_seen)

    async def start():
        nport = await ns.start("127.0.0.1", 0)
        bport = await broker.start("127.0.0.1", 0)
        return nport, bport

    nport, bport = loop_thread.run(start())
    ns.routes.register_broker(
        "DefaultCluster", f"127.0.0.1:{bport}", "broker-a", 0, "", {"T": TopicConfig("T", 4, 4)},
        DataVersion(0, 1, 1), 0, timeout_ms=None, refuse_unregistered_single=False,
    )  # fmt: skip
    yield {"namesrv": f"127.0.0.1:{nport}", "ns_seen": ns_seen, "broker_seen": broker_seen, "handlers": broker.handlers}

    async def stop():
        await broker.close()
        await ns.close()

    loop_thread.run(stop())


def send_one(cpp_client, cluster, topic):
    msg = {"body": "hello", "tag": "TagA", "keys": "k1"}
    return cpp_client("produce", cluster["namesrv"], {"topic": topic, "messages": [msg]})


def test_route_lookup_then_broker_refuses_send(cpp_client, cluster):
    out = send_one(cpp_client, cluster, "T")
    assert out[0].get("error") == "ProducerSendSyncFailed", out
    route_asks = [c for c in cluster["ns_seen"].requests if c.code == RequestCode.GET_ROUTEINFO_BY_TOPIC]
    assert route_asks and route_asks[0].ext("topic") == "T"
    assert route_asks[0].language == LanguageCode.CPP and route_asks[0].serialize_type == SerializeType.JSON
    assert route_asks[0].version == Version.V3_1_8  # below V4_9_4: the route comes in fastjson's form
    # the route was understood: the client went to broker-a's address with its sends and heartbeat
    sends = [c for c in cluster["broker_seen"].requests if c.code == RequestCode.SEND_MESSAGE]
    assert sends, cluster["broker_seen"].codes()
    for s in sends:
        assert s.ext("topic") == "T" and s.ext("producerGroup") == "cpp-producer"
        assert 0 <= int(s.ext("queueId")) < 4 and s.body == b"hello"
        assert "TAGS\x01TagA" in s.ext("properties")
    # the heartbeat to the broker is sent by a background task (it may or may not come before the sends end);
    # the unregistration at shutdown always comes
    unreg = [c for c in cluster["broker_seen"].requests if c.code == RequestCode.UNREGISTER_CLIENT]
    assert unreg and unreg[0].ext("producerGroup") == "cpp-producer" and unreg[0].ext("clientID")


def test_unknown_topic_is_no_route(cpp_client, cluster):
    out = send_one(cpp_client, cluster, "Nope")
    assert out[0]["error"] == "ProducerSendSyncFailed"
    assert "No route info of this topic: Nope" in out[0]["message"]
    asked = {c.ext("topic") for c in cluster["ns_seen"].requests if c.code == RequestCode.GET_ROUTEINFO_BY_TOPIC}
    assert asked == {"Nope", "TBW102"}  # then the default topic, as RocketMQ's producers do
    assert not cluster["broker_seen"].requests


def send_stub(handlers):
    """A broker that takes every send: SUCCESS with queue offset 5 (SendMessageResponseHeader's fields)."""

    async def send(req, conn):
        ext = {"msgId": "7F00000100002A9F0000000000000000", "queueId": req.ext("queueId"), "queueOffset": "5"}
        return response_to(req, ResponseCode.SUCCESS, None, ext)

    async def ok(req, conn):
        return response_to(req, ResponseCode.SUCCESS)

    handlers.update({RequestCode.SEND_MESSAGE: send, RequestCode.HEART_BEAT: ok, RequestCode.UNREGISTER_CLIENT: ok})


def test_stub_send_success_reaches_the_client(cpp_client, cluster):
    send_stub(cluster["handlers"])
    out = send_one(cpp_client, cluster, "T")
    assert out[0].get("status") == 0 and out[0]["offset"] == 5, out


TWO = [
    {"body": "m1", "tag": "A", "keys": "k1", "arg": 7, "properties": {"p": "v"}},
    {"body": "m2", "tag": "B", "arg": 7},
]


def wait_for(probe, timeout: float = 10):
    """probe() once it is not None; None after `timeout` seconds (the assertion that follows then fails)."""
    deadline = time.monotonic() + timeout
    while (value := probe()) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return value


def sends(cluster):
    return [c for c in cluster["broker_seen"].requests if c.code == RequestCode.SEND_MESSAGE]


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "orderly"])
def test_send_modes(cpp_client, cluster, mode):
    send_stub(cluster["handlers"])
    out = cpp_client("produce", cluster["namesrv"], {"topic": "T", "mode": mode, "messages": TWO})
    if mode == "oneway":
        assert out == [{}, {}]
    else:
        assert [(r.get("status"), r.get("offset")) for r in out] == [(0, 5), (0, 5)], out
    got = sends(cluster)
    if mode == "oneway":
        # the driver returns once the client has written them; the broker thread may not have read them yet
        got = wait_for(lambda: sends(cluster) if len(sends(cluster)) == 2 else None) or sends(cluster)
    assert [s.body for s in got] == [b"m1", b"m2"]
    # SEND_MESSAGE (not V2) always, and without the oneway flag bit even for oneway sends
    assert all(s.flag == 0 and s.ext("batch") == "0" for s in got)
    assert "p\x01v\x02" in got[0].ext("properties") and "KEYS\x01k1\x02" in got[0].ext("properties")
    if mode == "orderly":
        assert [s.ext("queueId") for s in got] == ["3", "3"]  # hashing_queue_selector: 7 % 4 queues


def decode_batch(body: bytes) -> list[tuple[bytes, str]]:
    """MessageDecoder.encodeMessages: per message totalSize int, magic int, bodyCRC int, flag int, body length
    int + body, properties length short + properties."""
    out, pos = [], 0
    while pos < len(body):
        (total,) = struct.unpack_from(">i", body, pos)
        (blen,) = struct.unpack_from(">i", body, pos + 16)
        b = body[pos + 20 : pos + 20 + blen]
        (plen,) = struct.unpack_from(">h", body, pos + 20 + blen)
        props = body[pos + 22 + blen : pos + 22 + blen + plen].decode()
        assert total == 22 + blen + plen
        out.append((b, props))
        pos += total
    return out


def test_batch_is_send_message_with_batch_flag(cpp_client, cluster):
    send_stub(cluster["handlers"])
    out = cpp_client("produce", cluster["namesrv"], {"topic": "T", "mode": "batch", "messages": TWO})
    assert out[0].get("status") == 0, out
    req = sends(cluster)[-1]  # the one that succeeded
    # the C++ core sends a batch as SEND_MESSAGE with batch=true, not SEND_BATCH_MESSAGE: the broker must look
    # at the header's batch field, as RocketMQ's SendMessageProcessor does
    assert req.ext("batch") == "1"
    msgs = decode_batch(req.body)
    assert [m[0] for m in msgs] == [b"m1", b"m2"]
    assert "TAGS\x01A\x02" in msgs[0][1] and "TAGS\x01B\x02" in msgs[1][1]


def consumer_stub(handlers):
    """Just enough of a broker for the consumers to get to pulling: heartbeats accepted, the group's consumer
    list is every client that sent one, no committed offset (QUERY_NOT_FOUND), max offset 0, no messages."""
    clients = []

    async def heartbeat(req, conn):
        clients.append(json.loads(req.body)["clientID"])
        return response_to(req, ResponseCode.SUCCESS)

    async def consumer_list(req, conn):
        return response_to(
            req, ResponseCode.SUCCESS, body=json.dumps({"consumerIdList": sorted(set(clients))}).encode()
        )

    async def no_offset(req, conn):
        return response_to(
            req, ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
        )

    async def offset_zero(req, conn):
        return response_to(req, ResponseCode.SUCCESS, None, {"offset": "0"})

    async def pull(req, conn):
        ext = {"nextBeginOffset": "0", "minOffset": "0", "maxOffset": "0", "suggestWhichBrokerId": "0"}
        return response_to(req, ResponseCode.PULL_NOT_FOUND, "no new message", ext)

    async def ok(req, conn):
        return response_to(req, ResponseCode.SUCCESS)

    handlers.update({RequestCode.HEART_BEAT: heartbeat, RequestCode.GET_CONSUMER_LIST_BY_GROUP: consumer_list,
                     RequestCode.QUERY_CONSUMER_OFFSET: no_offset, RequestCode.GET_MAX_OFFSET: offset_zero,
                     RequestCode.GET_MIN_OFFSET: offset_zero, RequestCode.PULL_MESSAGE: pull,
                     RequestCode.UPDATE_CONSUMER_OFFSET: ok, RequestCode.UNREGISTER_CLIENT: ok})  # fmt: skip


def test_pull_consumer_pulls_every_queue(cpp_client, cluster):
    consumer_stub(cluster["handlers"])
    assert cpp_client("pull", cluster["namesrv"], {"topic": "T", "group": "cpp-pull"}) == []
    pulls = [c for c in cluster["broker_seen"].requests if c.code == RequestCode.PULL_MESSAGE]
    assert sorted(int(p.ext("queueId")) for p in pulls) == [0, 1, 2, 3]
    for p in pulls:
        assert (p.ext("topic"), p.ext("consumerGroup"), p.ext("queueOffset"), p.ext("subscription")) == (
            "T",
            "cpp-pull",
            "0",
            "*",
        )
        assert p.ext("sysFlag") == "4"  # PullSysFlag: subscription only (no commit offset, no suspend)


def test_push_consumer_registers_and_rebalances(cpp_client, cluster):
    consumer_stub(cluster["handlers"])
    assert cpp_client("push", cluster["namesrv"], {"topic": "T", "group": "cpp-push", "seconds": 3}) == []
    seen = cluster["broker_seen"]
    beats = [json.loads(c.body) for c in seen.requests if c.code == RequestCode.HEART_BEAT]
    assert beats, seen.codes()
    (data,) = beats[0]["consumerDataSet"]
    assert data["groupName"] == "cpp-push" and data["messageModel"] == 1 and data["consumeType"] == 1
    assert {s["topic"] for s in data["subscriptionDataSet"]} == {"T", "%RETRY%cpp-push"}
    assert RequestCode.GET_CONSUMER_LIST_BY_GROUP in seen.codes()
