"""`rocketstore serve` driven by the official RocketMQ 5 Python client (rocketmq-python-client)."""

import os
import time

import grpc

from rocketstore import MessageStore
from rocketstore.grpc.protocol import definition_pb2 as pb, service_pb2 as spb, service_pb2_grpc as sgrpc

Code = pb.Code


def _messages(topic, bodies):
    return {
        "topic": topic,
        "messages": [
            {
                "body": b,
                "tag": "TagA" if i % 2 == 0 else "TagB",
                "keys": [f"key-{b}", f"order-{i}"],
                "properties": {"color": "red", "n": str(i)},
            }
            for i, b in enumerate(bodies)
        ],
    }


def test_sent_messages_are_readable_through_the_library(server):
    sent = server.run("produce", _messages("Orders", ["m0", "m1", "m2", "m3"]))
    assert len({s["message_id"] for s in sent}) == 4
    assert server.stop() == 0
    assert "stopped, store closed" in "".join(server.lines)
    assert not os.path.exists(os.path.join(server.store, "abort"))
    with MessageStore.open(server.store, read_only=True) as store:
        queues = set()
        for i, s in enumerate(sent):
            # the server picks the queue (the client's choice only says which endpoint to call)
            m = store.by_unique_key("Orders", s["message_id"])
            r = store.get("check", "Orders", m.queue_id, s["offset"], max_count=1)
            assert r.messages[0].unique_key == s["message_id"] and m.queue_offset == s["offset"]
            queues.add(m.queue_id)
            assert m.topic == "Orders" and m.body == f"m{i}".encode()
            assert m.tags == ("TagA" if i % 2 == 0 else "TagB")
            assert sorted(m.keys) == sorted([f"key-m{i}", f"order-{i}"])
            assert m.unique_key == s["message_id"]
            p = m.properties
            assert p["color"] == "red" and p["n"] == str(i)
            assert p["PGROUP"] == "Orders" and p["RECONSUME_TIME"] == "0"
            assert p["__BORNHOST"] and abs(int(p["BORN_TIMESTAMP"]) - time.time() * 1000) < 120_000
            assert m.born_timestamp == int(p["BORN_TIMESTAMP"])
            assert [x.body for x in store.query("Orders", f"key-m{i}")] == [m.body]
        assert len(queues) == 4  # round robin over the queues


def test_receive_ack_change_invisible_and_redelivery(server):
    server.run("produce", _messages("Flow", ["a", "b", "c", "d"]))
    out = server.run("consume_flow", {"topic": "Flow", "group": "g1", "count": 4, "ack": ["a", "b"], "shorten": "c"})
    first = {m["body"]: m for m in out["first"]}
    assert sorted(first) == ["a", "b", "c", "d"]
    assert all(m["attempt"] == 1 for m in first.values())
    assert first["a"]["tag"] == "TagA" and first["b"]["tag"] == "TagB"
    assert first["a"]["keys"] == ["key-a", "order-0"] and first["a"]["properties"] == {"color": "red", "n": "0"}
    # c's invisible time was cut to 1 s: it comes back (attempt 2), a and b were acked, d is still invisible
    assert [m["body"] for m in out["redelivered"]] == ["c"]
    assert out["redelivered"][0]["attempt"] == 2
    assert out["redelivered"][0]["message_id"] == first["c"]["message_id"]
    assert out["redelivered"][0]["handle"] != first["c"]["handle"]
    # not acked again: after its invisible time it comes back once more
    assert [(m["body"], m["attempt"]) for m in out["third"]] == [("c", 3)]
    assert out["stale_ack"] == "BadRequestException"  # INVALID_RECEIPT_HANDLE: that handle expired
    assert out["empty"] == [] and 0.8 < out["empty_s"] < 4


def test_long_polling(server):
    out = server.run("long_poll", {"topic": "Poll", "group": "g2", "await": 4, "send_after": 1.0, "messages": []})
    assert [m["body"] for m in out["woken"]] == ["late"]
    assert out["woken_s"] < 3.5  # woken by the send, not by the end of the long poll
    assert out["timeout"] == [] and 3.5 < out["timeout_s"] < 8


def test_restart_keeps_acked_and_in_flight_state(server):
    server.run("produce", _messages("Restart", ["a", "b", "c", "d"]))
    got = server.run("receive_some", {"topic": "Restart", "group": "g3", "count": 4, "invisible": 2, "ack": ["a", "b"]})
    assert sorted(m["body"] for m in got) == ["a", "b", "c", "d"]
    assert server.stop() == 0
    assert not os.path.exists(os.path.join(server.store, "abort"))
    server.start()
    again = server.run("receive_some", {"topic": "Restart", "group": "g3", "count": 2, "invisible": 30, "deadline": 8})
    assert sorted((m["body"], m["attempt"]) for m in again) == [("c", 2), ("d", 2)]
    none = server.run("receive_some", {"topic": "Restart", "group": "g3", "count": 1, "invisible": 30, "deadline": 1.5})
    assert none == []
    assert server.stop() == 0
    with MessageStore.open(server.store, read_only=True) as store:  # the group's offsets are committed
        committed = [store.consumer_offsets.query("g3", "Restart", q) for q in range(8)]
        # a and b acked; c and d, not acked in time, moved on to the group's retry topic (still in flight)
        assert sum(max(c, 0) for c in committed) == 4
        retry = "%RETRY%g3_Restart"
        bodies = [
            bytes(m.body)
            for q in store.topics().get(retry, [])
            for m in store.get("t", retry, q, 0, max_count=32).messages
        ]
        assert sorted(bodies) == [b"c", b"d"]


def test_raw_protocol_answers(server):
    with grpc.insecure_channel(server.endpoint) as ch:
        stub = sgrpc.MessagingServiceStub(ch)
        md = [("x-mq-client-id", "raw-client")]
        route = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Raw")), metadata=md, timeout=5)
        assert route.status.code == Code.OK and len(route.message_queues) == 8
        q = route.message_queues[0]
        assert q.permission == pb.Permission.READ_WRITE and q.broker.id == 0 and q.broker.name == "broker-test"
        assert q.broker.endpoints.addresses[0].port == server.port
        assert list(q.accept_message_types) == [pb.MessageType.NORMAL]
        r = stub.SendMessage(
            spb.SendMessageRequest(
                messages=[
                    pb.Message(topic=pb.Resource(name="Raw"), system_properties=pb.SystemProperties(message_id="X"))
                ]
            ),
            metadata=md,
            timeout=5,
        )
        assert r.status.code == Code.MESSAGE_BODY_EMPTY
        r = stub.SendMessage(
            spb.SendMessageRequest(
                messages=[
                    pb.Message(
                        topic=pb.Resource(name="Raw"),
                        body=b"x",
                        user_properties={"UNIQ_KEY": "u"},
                        system_properties=pb.SystemProperties(message_id="X"),
                    )
                ]
            ),
            metadata=md,
            timeout=5,
        )
        assert r.status.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
        r = stub.SendMessage(
            spb.SendMessageRequest(
                messages=[
                    pb.Message(
                        topic=pb.Resource(name="Raw"), body=b"raw", system_properties=pb.SystemProperties(message_id=M1)
                    )
                ]
            ),
            metadata=md,
            timeout=5,
        )
        assert r.status.code == Code.OK and r.entries[0].message_id == M1
        # requests without a topic are refused as the proxy refuses them, by their topic
        codes = [
            call(req, metadata=md, timeout=5).status.code
            for call, req in (
                (stub.QueryAssignment, spb.QueryAssignmentRequest()),
                (stub.EndTransaction, spb.EndTransactionRequest()),
                (stub.ForwardMessageToDeadLetterQueue, spb.ForwardMessageToDeadLetterQueueRequest()),
            )
        ]
        assert codes == [Code.ILLEGAL_TOPIC] * 3
        ack = stub.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name="g"),
                topic=pb.Resource(name="Raw"),
                entries=[spb.AckMessageEntry(message_id=M1, receipt_handle="garbage")],
            ),
            metadata=md,
            timeout=5,
        )
        assert ack.status.code == Code.INVALID_RECEIPT_HANDLE
        req = spb.ReceiveMessageRequest(
            group=pb.Resource(name="g"),
            message_queue=q,
            batch_size=8,
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        )
        req.invisible_duration.FromMilliseconds(500)  # below minInvisibleTimeMillsForRecv
        req.long_polling_timeout.FromMilliseconds(500)
        parts = list(stub.ReceiveMessage(req, metadata=md, timeout=5))
        assert parts[0].status.code == Code.ILLEGAL_INVISIBLE_TIME and parts[-1].HasField("delivery_timestamp")
        req.invisible_duration.FromMilliseconds(5000)
        parts = list(stub.ReceiveMessage(req, metadata=md, timeout=5))
        # the proxy's stream: the status first, then the messages, then the delivery timestamp
        assert [p.WhichOneof("content") for p in parts] == ["status", "message", "delivery_timestamp"]
        assert parts[0].status.code == Code.OK
        m = parts[1].message
        assert m.body == b"raw" and m.system_properties.message_id == M1
        assert m.system_properties.delivery_attempt == 1 and m.system_properties.body_digest.type == pb.DigestType.MD5
        parts = list(stub.ReceiveMessage(req, metadata=md, timeout=5))
        assert [p.WhichOneof("content") for p in parts] == ["status", "delivery_timestamp"]
        assert parts[0].status.code == Code.MESSAGE_NOT_FOUND
    assert server.stop(signal_int()) == 0
    assert not os.path.exists(os.path.join(server.store, "abort"))


M1 = "01" + "56F7E71C361B21BC024CCDBE00000001"  # a RocketMQ 5 client message id: version 01, 16 bytes


def signal_int():
    import signal

    return signal.SIGINT
