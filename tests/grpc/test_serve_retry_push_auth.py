"""`rocketstore serve`: redelivery through %RETRY%<group>_<topic>, dead letter to %DLQ%<group>, the
PushConsumer (QueryAssignment, auto-renewed receive, ack, ForwardMessageToDeadLetterQueue) and optional
authentication, driven by the official RocketMQ 5 Python client."""

import json
import os
import subprocess
import sys
import time

import importlib.util

import pytest

from rocketstore import MessageStore

_spec = importlib.util.spec_from_file_location("serve_conftest", os.path.join(os.path.dirname(__file__), "conftest.py"))
_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conftest)
CONF, ServeProcess = _conftest.CONF, _conftest.ServeProcess


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "rocketstore.cli", *args], capture_output=True, text=True, timeout=60)


RETRY_CONF = CONF + "retryMaxTimes=2\n"  # max attempts 3 (retryMaxTimes + 1), then the DLQ


class Serve(ServeProcess):
    """ServeProcess with a broker.conf of our own and extra command-line arguments."""

    def __init__(self, tmp_path, conf=RETRY_CONF, args=()):
        super().__init__(tmp_path)
        self.conf.write_text(conf)
        self.args = list(args)


@pytest.fixture
def serve(tmp_path):
    made = []

    def make(**kw):
        s = Serve(tmp_path, **kw).start()
        made.append(s)
        return s

    yield make
    for s in made:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(10)


def _produce(s, topic, bodies):
    return s.run(
        "produce", {"topic": topic, "messages": [{"body": b, "tag": "TagA", "keys": [f"k-{b}"]} for b in bodies]}
    )


def test_retry_topic_attempts_restart_and_dead_letter(serve):
    s = serve()
    sent = {x["message_id"] for x in _produce(s, "Retry", ["keep", "acked"])}
    # attempt 1 of both; "acked" is acked on its 2nd attempt, "keep" never
    first = s.run(
        "receive_rounds", {"topic": "Retry", "group": "gr", "seconds": 6, "stop_after": 2, "ack_at": {"acked": 2}}
    )
    assert sorted((m["body"], m["attempt"]) for m in first) == [("acked", 1), ("keep", 1)]
    # the in-flight state survives a restart: both come back (through the retry topic) with attempt 2
    assert s.stop() == 0
    s.start()
    rest = s.run("receive_rounds", {"topic": "Retry", "group": "gr", "seconds": 7, "ack_at": {"acked": 2}})
    got = [(m["body"], m["attempt"]) for m in rest]
    assert sorted(got) == [("acked", 2), ("keep", 2), ("keep", 3)]  # max attempts 3, then the DLQ
    assert all(m["topic"] == "Retry" for m in rest)  # delivered under the original topic
    assert {m["message_id"] for m in first + rest} == sent  # the same message ids throughout
    assert s.stop() == 0
    with MessageStore.open(s.store, read_only=True) as store:
        retry = "%RETRY%gr_Retry"
        assert retry in store.topics() and "%DLQ%gr" in store.topics()
        r = store.get("check", retry, 0, 0, max_count=32)
        revived = sorted((m.body.decode(), m.reconsume_times, m.properties["RECONSUME_TIME"]) for m in r.messages)
        assert revived == [("acked", 1, "1"), ("keep", 1, "1"), ("keep", 2, "2"), ("keep", 3, "3")]
        assert all(
            m.properties["UNIQ_KEY"] in sent and m.tags == "TagA" and "1ST_POP_TIME" in m.properties for m in r.messages
        )
        d = store.get("check", "%DLQ%gr", 0, 0, max_count=32).messages
        assert [m.body for m in d] == [b"keep"]
        p = d[0].properties
        assert p["DLQ_ORIGIN_TOPIC"] == "Retry" and p["DLQ_ORIGIN_MESSAGE_ID"] in sent
        assert p["KEYS"] == "k-keep" and d[0].reconsume_times == 4
        # the group's offsets moved past both messages in the topic itself
        assert sum(max(store.consumer_offsets.query("gr", "Retry", q), 0) for q in range(8)) == 2
    # the dead letter is readable with the CLI too
    out = _cli("consume", s.store, "%DLQ%gr", "--group", "inspect")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "keep" in out.stdout


def test_push_consumer_consumes_acks_and_dead_letters(serve):
    s = serve(conf=CONF + "retryMaxTimes=1\n")  # max attempts 2
    _produce(s, "Push", ["p0", "p1", "p2", "p3", "bad"])
    seen = s.run(
        "push_consume",
        {
            "topic": "Push",
            "group": "gp",
            "seconds": 20,
            "expect": ["p0", "p1", "p2", "p3"],
            "fail": ["bad"],
            "fail_attempts": 2,
        },
    )
    ok = sorted(x["body"] for x in seen if x["body"] != "bad")
    assert ok == ["p0", "p1", "p2", "p3"]  # each consumed once: acked, not redelivered
    assert [x["attempt"] for x in seen if x["body"] == "bad"] == [1, 2]
    assert all(x["topic"] == "Push" for x in seen)
    # "bad" was nacked twice (ChangeInvisibleDuration by the client's backoff: 1 s, then 5 s); once its
    # invisible time ends it has no attempt left and goes to the DLQ instead of to a consumer
    left = s.run("receive_rounds", {"topic": "Push", "group": "gp", "seconds": 6.5, "invisible": 30})
    assert left == []
    assert s.stop() == 0
    with MessageStore.open(s.store, read_only=True) as store:
        d = store.get("check", "%DLQ%gp", 0, 0, max_count=32).messages
        assert [m.body for m in d] == [b"bad"] and d[0].properties["DLQ_ORIGIN_TOPIC"] == "Push"


def test_query_assignment_raw(serve):
    import grpc
    from rocketstore.grpc.protocol import definition_pb2 as pb, service_pb2 as spb, service_pb2_grpc as sgrpc

    s = serve()
    _produce(s, "Assign", ["x"])
    with grpc.insecure_channel(s.endpoint) as ch:
        stub = sgrpc.MessagingServiceStub(ch)
        md = [("x-mq-client-id", "raw")]
        r = stub.QueryAssignment(
            spb.QueryAssignmentRequest(topic=pb.Resource(name="Assign"), group=pb.Resource(name="g")),
            metadata=md,
            timeout=5,
        )
        assert r.status.code == pb.Code.OK and len(r.assignments) == 1
        q = r.assignments[0].message_queue
        assert q.id == -1 and q.topic.name == "Assign" and q.permission == pb.Permission.READ_WRITE
        assert q.broker.name == "broker-test" and q.broker.id == 0 and q.broker.endpoints.addresses[0].port == s.port
        r = stub.QueryAssignment(
            spb.QueryAssignmentRequest(topic=pb.Resource(name="Nope"), group=pb.Resource(name="g")),
            metadata=md,
            timeout=5,
        )
        assert r.status.code == pb.Code.TOPIC_NOT_FOUND
        fwd = spb.ForwardMessageToDeadLetterQueueRequest(
            topic=pb.Resource(name="Assign"), group=pb.Resource(name="g"), receipt_handle="junk"
        )
        r = stub.ForwardMessageToDeadLetterQueue(fwd, metadata=md, timeout=5)
        assert r.status.code == pb.Code.INVALID_RECEIPT_HANDLE
        # ForwardMessageToDeadLetterQueue of a received message: into %DLQ%g, acked, not delivered again
        req = spb.ReceiveMessageRequest(
            group=pb.Resource(name="g"),
            message_queue=q,
            batch_size=8,
            filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
        )
        req.invisible_duration.FromMilliseconds(2000)
        req.long_polling_timeout.FromMilliseconds(1000)
        got = [p.message for p in stub.ReceiveMessage(req, metadata=md, timeout=5) if p.HasField("message")]
        assert [m.body for m in got] == [b"x"]
        fwd.receipt_handle = got[0].system_properties.receipt_handle
        fwd.message_id = got[0].system_properties.message_id
        fwd.delivery_attempt, fwd.max_delivery_attempts = 1, 1
        assert stub.ForwardMessageToDeadLetterQueue(fwd, metadata=md, timeout=5).status.code == pb.Code.OK
        assert (
            stub.ForwardMessageToDeadLetterQueue(fwd, metadata=md, timeout=5).status.code
            == pb.Code.INVALID_RECEIPT_HANDLE
        )  # done with: acked by the forward
        time.sleep(2.1)
        parts = list(stub.ReceiveMessage(req, metadata=md, timeout=5))
        assert parts[0].status.code == pb.Code.MESSAGE_NOT_FOUND
    assert s.stop() == 0
    with MessageStore.open(s.store, read_only=True) as store:
        d = store.get("check", "%DLQ%g", 0, 0, max_count=8).messages
        assert [m.body for m in d] == [b"x"]
        assert d[0].properties["DLQ_ORIGIN_MESSAGE_ID"] == fwd.message_id and d[0].reconsume_times == 1


def test_authentication(serve, tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"FILEAK": "file-secret"}))
    s = serve(args=["--access-key", "AK", "--secret-key", "SK", "--access-keys-file", str(keys)])
    assert "authentication: 2 access key(s)" in "".join(s.lines)
    good = s.run("auth_produce", {"ak": "AK", "sk": "SK", "topic": "Auth", "body": "hello"})
    assert good["ok"], good
    assert s.run("auth_produce", {"ak": "FILEAK", "sk": "file-secret", "topic": "Auth", "body": "two"})["ok"]
    for ak, sk in (("AK", "wrong"), ("NOBODY", "SK"), ("", "")):
        bad = s.run("auth_produce", {"ak": ak, "sk": sk, "topic": "Auth", "body": "nope"})
        assert not bad["ok"], (ak, sk, bad)
        # Code.UNAUTHORIZED (40100) came back: the client logs it before wrapping it up
        assert bad["code"] == 40100 or any("40100" in x for x in bad["logged"]), bad
    # raw: the RPC's own response carries Code.UNAUTHORIZED
    import grpc
    from rocketstore.grpc.protocol import definition_pb2 as pb, service_pb2 as spb, service_pb2_grpc as sgrpc
    from rocketstore.grpc.auth import sign

    with grpc.insecure_channel(s.endpoint) as ch:
        stub = sgrpc.MessagingServiceStub(ch)
        req = spb.QueryRouteRequest(topic=pb.Resource(name="Auth"))
        assert stub.QueryRoute(req, timeout=5).status.code == pb.Code.UNAUTHORIZED
        dt = "20240101T000000Z"
        md = [
            ("x-mq-date-time", dt),
            (
                "authorization",
                f"MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature={sign('SK', dt)}",
            ),
        ]
        assert stub.QueryRoute(req, metadata=md, timeout=5).status.code == pb.Code.OK
        rq = spb.ReceiveMessageRequest(group=pb.Resource(name="g"))
        parts = list(stub.ReceiveMessage(rq, timeout=5))
        assert parts[0].status.code == pb.Code.UNAUTHORIZED
    assert s.stop() == 0
    with MessageStore.open(s.store, read_only=True) as store:
        bodies = sorted(m.body for q in range(8) for m in store.get("c", "Auth", q, 0, max_count=8).messages)
        assert bodies == [b"hello", b"two"]


def test_authentication_from_broker_conf(serve):
    conf = CONF + 'authenticationEnabled=true\ninitAuthenticationUser={"username":"rocketmq","password":"12345678"}\n'
    s = serve(conf=conf)
    assert s.run("auth_produce", {"ak": "rocketmq", "sk": "12345678", "topic": "A2", "body": "x"})["ok"]
    assert not s.run("auth_produce", {"ak": "rocketmq", "sk": "nope", "topic": "A2", "body": "x"})["ok"]


def test_serve_cli_rejects_unpaired_keys(tmp_path):
    out = _cli("serve", "--store", str(tmp_path / "s"), "--access-key", "AK")
    assert out.returncode == 1 and "--secret-key" in out.stderr
