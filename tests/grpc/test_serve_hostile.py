"""Hostile clients against a `rocketstore serve` subprocess, through raw gRPC stubs: system topics are refused
as RocketMQ's proxy refuses them (GrpcValidator over TopicValidator), dead-letter topics stay readable, and no
message field can plant the property separators \\x01 / \\x02 or a system property."""

import uuid

import grpc
import pytest

from rocketstore.grpc.protocol import definition_pb2 as pb, service_pb2 as spb, service_pb2_grpc as sgrpc

Code = pb.Code
MD = [("x-mq-client-id", "hostile-test")]
# TopicValidator.SYSTEM_TOPIC_SET, NOT_ALLOWED_SEND_TOPIC_SET and the rmq_sys_ prefix (the timer topic)
SYSTEM_TOPICS = [
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "rmq_sys_wheel_timer",
    "SCHEDULE_TOPIC_XXXX",
    "TBW102",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "rmq_sys_anything",
]


def new_id():
    return "01" + uuid.uuid4().hex.upper()  # a RocketMQ 5 client's message id: version 01 and 16 bytes


def message(topic, body=b"b", **system):
    system.setdefault("message_id", new_id())
    user = system.pop("user", {})
    return pb.Message(
        topic=pb.Resource(name=topic), body=body, user_properties=user, system_properties=pb.SystemProperties(**system)
    )


def send(stub, msg):
    return stub.SendMessage(spb.SendMessageRequest(messages=[msg]), metadata=MD, timeout=5)


def receive(stub, topic, group, invisible_ms=5000, polling_ms=500, batch=32):
    req = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        batch_size=batch,
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
    )
    req.invisible_duration.FromMilliseconds(invisible_ms)
    req.long_polling_timeout.FromMilliseconds(polling_ms)
    parts = list(stub.ReceiveMessage(req, metadata=MD, timeout=10))
    return parts[0].status, [p.message for p in parts if p.HasField("message")]


@pytest.fixture
def stub(server):
    with grpc.insecure_channel(server.endpoint) as ch:
        yield sgrpc.MessagingServiceStub(ch)


def test_a_transaction_cannot_be_read_or_forged_through_the_system_topics(stub):
    # a producer's transactional message waits as a half message
    tx = message("Orders", b"uncommitted", message_type=pb.MessageType.TRANSACTION)
    sent = send(stub, tx)
    assert sent.status.code == Code.OK, sent
    # another client can neither receive it from the half topic...
    status, got = receive(stub, "RMQ_SYS_TRANS_HALF_TOPIC", "spy")
    assert status.code == Code.ILLEGAL_TOPIC and got == [] and status.message
    # ...nor write an op record saying it is done
    forged = send(stub, message("RMQ_SYS_TRANS_OP_HALF_TOPIC", b"0,", tag="d"))
    assert forged.status.code == Code.ILLEGAL_TOPIC
    # the producer's commit still finds it, and it is delivered
    end = stub.EndTransaction(
        spb.EndTransactionRequest(
            topic=pb.Resource(name="Orders"),
            message_id=tx.system_properties.message_id,
            transaction_id=sent.entries[0].transaction_id,
            resolution=pb.TransactionResolution.COMMIT,
            source=pb.TransactionSource.SOURCE_CLIENT,
        ),
        metadata=MD,
        timeout=5,
    )
    assert end.status.code == Code.OK, end
    status, got = receive(stub, "Orders", "reader")
    assert status.code == Code.OK and [m.body for m in got] == [b"uncommitted"]


@pytest.mark.parametrize("topic", SYSTEM_TOPICS)
def test_every_call_naming_a_system_topic_is_refused(stub, topic):
    assert send(stub, message(topic)).status.code == Code.ILLEGAL_TOPIC
    route = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=MD, timeout=5)
    assert route.status.code == Code.ILLEGAL_TOPIC and not route.message_queues
    assert receive(stub, topic, "g")[0].code == Code.ILLEGAL_TOPIC
    assignment = stub.QueryAssignment(
        spb.QueryAssignmentRequest(topic=pb.Resource(name=topic), group=pb.Resource(name="g")), metadata=MD, timeout=5
    )
    assert assignment.status.code == Code.ILLEGAL_TOPIC


def test_system_consumer_groups_are_refused(stub):
    assert send(stub, message("Plain")).status.code == Code.OK
    status, got = receive(stub, "Plain", "CID_RMQ_SYS_TRANS")
    assert status.code == Code.ILLEGAL_CONSUMER_GROUP and got == []


def test_a_dead_letter_topic_stays_readable(stub):
    assert send(stub, message("Work", b"poison")).status.code == Code.OK
    status, [m] = receive(stub, "Work", "workers")
    dlq = stub.ForwardMessageToDeadLetterQueue(
        spb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name="workers"),
            topic=pb.Resource(name="Work"),
            receipt_handle=m.system_properties.receipt_handle,
            message_id=m.system_properties.message_id,
            delivery_attempt=1,
            max_delivery_attempts=1,
        ),
        metadata=MD,
        timeout=5,
    )
    assert dlq.status.code == Code.OK, dlq
    status, got = receive(stub, "%DLQ%workers", "reprocess")
    assert status.code == Code.OK and [x.body for x in got] == [b"poison"]
    assert got[0].system_properties.message_id == m.system_properties.message_id


FORGERIES = [  # (what a client plants, the code RocketMQ's rules answer)
    (dict(trace_context="00-ab-cd-01\x02TRAN_MSG\x01true"), Code.BAD_REQUEST),
    (dict(trace_context="t\x02DLQ_ORIGIN_TOPIC\x01Payments\x02DLQ_ORIGIN_MESSAGE_ID\x01X"), Code.BAD_REQUEST),
    (dict(message_id="01" + "A" * 32 + "\x02KEYS\x01order-1"), Code.ILLEGAL_MESSAGE_ID),
    (dict(message_id="not-a-client-id"), Code.ILLEGAL_MESSAGE_ID),
    (dict(born_host="host\x02TAGS\x01Secret"), Code.BAD_REQUEST),
    (dict(tag="A||B"), Code.ILLEGAL_MESSAGE_TAG),
    (dict(tag="A\x01B"), Code.ILLEGAL_MESSAGE_TAG),
    (dict(tag="A\nB"), Code.ILLEGAL_MESSAGE_TAG),  # Java's isISOControl: newline included
    (dict(keys=["k\x02UNIQ_KEY\x01dup"]), Code.ILLEGAL_MESSAGE_KEY),
    (dict(keys=["k\tx"]), Code.ILLEGAL_MESSAGE_KEY),
    (dict(message_group="g\x02x"), Code.ILLEGAL_MESSAGE_GROUP),
    (dict(message_group="g" * 64), Code.ILLEGAL_MESSAGE_GROUP),  # maxMessageGroupSize 64
    (dict(user={"UNIQ_KEY": "u"}), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
    (dict(user={"DLQ_ORIGIN_TOPIC": "Payments"}), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
    (dict(user={"TRAN_MSG": "true"}), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),  # would make it transactional
    (dict(user={"a": "v\x01w"}), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
    (dict(user={"a\x02b": "v"}), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
    (dict(user={f"p{i}": "v" for i in range(129)}), Code.MESSAGE_PROPERTIES_TOO_LARGE),  # userPropertyMaxNum
    (dict(user={"big": "v" * (16 * 1024)}), Code.MESSAGE_PROPERTIES_TOO_LARGE),  # maxUserPropertySize
]


def test_no_field_can_forge_a_property(stub):
    for fields, code in FORGERIES:
        r = send(stub, message("Forge", b"forged", **fields))
        assert r.status.code == code, (fields, r.status)
        assert r.status.message
    honest = message(
        "Forge",
        b"honest",
        tag="TagA",
        keys=["order-1"],
        trace_context="00-abc-def-01",
        born_host="client-host.example",
        message_group="",
        user={"color": "red"},
    )
    assert send(stub, honest).status.code == Code.OK
    status, got = receive(stub, "Forge", "g")
    assert status.code == Code.OK and [m.body for m in got] == [b"honest"]
    sp = got[0].system_properties
    assert (sp.tag, list(sp.keys), sp.message_id, sp.message_type, sp.trace_context, sp.born_host) == (
        "TagA",
        ["order-1"],
        honest.system_properties.message_id,
        pb.MessageType.NORMAL,
        "00-abc-def-01",
        "client-host.example",
    )
    # GrpcConverter.buildUserAttributes: every property outside STRING_HASH_SET, TRACE_CONTEXT included
    assert dict(got[0].user_properties) == {"color": "red", "TRACE_CONTEXT": "00-abc-def-01"}
    assert not sp.HasField("dead_letter_queue")
