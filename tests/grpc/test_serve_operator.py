"""What an operator meets running `rocketstore serve`: the address routes hand out (--advertise, wildcard
listen addresses), the request log (-v), a port already in use, the queues of topics it creates, and the
invisible-time limits (ProxyConfig's minInvisibleTimeMillsForRecv / maxInvisibleTimeMills)."""

import importlib.util
import ipaddress
import logging
import os
import re
import socket
import subprocess
import sys

import grpc
import pytest

from rocketstore import MessageStore
from rocketstore.config.store_config import StoreConfig
from rocketstore.broker import address
from rocketstore.grpc.protocol import definition_pb2 as pb
from rocketstore.grpc.protocol import service_pb2 as spb
from rocketstore.grpc.protocol import service_pb2_grpc as sgrpc
from rocketstore.grpc.request_log import MAX_CLIENT_LINES, RequestLog
from rocketstore.broker.address import ListenError
from rocketstore.cli.server import Server

# tests/serve/conftest.py by its path: a bare `import conftest` may find tests/conftest.py
_spec = importlib.util.spec_from_file_location(
    "serve_conftest_operator", os.path.join(os.path.dirname(__file__), "conftest.py")
)
_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conftest)
ServeProcess = _conftest.ServeProcess
free_port = _conftest.free_port
Code = pb.Code
SMALL = {"mappedFileSizeCommitLog": "10485760", "brokerName": "broker-test"}


def _route(endpoint: str, topic: str, client: str = "route-check"):
    with grpc.insecure_channel(endpoint) as ch:
        r = sgrpc.MessagingServiceStub(ch).QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=[("x-mq-client-id", client)], timeout=10
        )
    assert r.status.code == Code.OK, r.status
    return r


def _remoting_ports(args) -> list[str]:
    """Free ports for the name server and the broker unless the test names them (9876 and 10911 may be taken)."""
    out = []
    for option in ("--namesrv", "--remoting"):
        if option not in args:
            out += [option, f"127.0.0.1:{free_port()}"]
    return out


def _cli(*args, timeout=60):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("GRPC_VERBOSITY", None)
    return subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", "serve", *args, *_remoting_ports(args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


# ---------------------------------------------------------------- the address in the routes
def test_advertise_is_the_address_routes_give_and_clients_use(tmp_path):
    s = ServeProcess(tmp_path)
    s.listen = f"0.0.0.0:{s.port}"
    s.args = ["--advertise", f"127.0.0.5:{s.port}"]
    s.start()
    try:
        route = _route(s.endpoint, "Adv")
        endpoints = {
            (q.broker.endpoints.scheme, tuple((a.host, a.port) for a in q.broker.endpoints.addresses))
            for q in route.message_queues
        }
        assert endpoints == {(pb.AddressScheme.IPv4, (("127.0.0.5", s.port),))}
        # the official client sends where the route says: 127.0.0.5 (a loopback address 0.0.0.0 covers)
        sent = s.run("produce", {"topic": "Adv", "messages": [{"body": "x"}]})
        assert len(sent) == 1
        assert f"routes name 127.0.0.5:{s.port}" in "".join(s.lines)
        assert s.stop() == 0
    finally:
        if s.proc.poll() is None:
            s.proc.kill()


def test_wildcard_listen_without_advertise_routes_to_a_reachable_address(tmp_path):
    s = ServeProcess(tmp_path)
    s.listen = f"0.0.0.0:{s.port}"
    s.start()
    try:
        addrs = {
            (a.host, a.port) for q in _route(s.endpoint, "Wild").message_queues for a in q.broker.endpoints.addresses
        }
        assert len(addrs) == 1
        host, port = addrs.pop()
        assert port == s.port and not ipaddress.ip_address(host).is_unspecified
        with socket.create_connection((host, port), timeout=5):  # a client can connect there
            pass
        warnings = [x for x in s.lines if "WARNING" in x]
        assert len(warnings) == 1 and "--advertise" in warnings[0] and host in warnings[0]
        assert s.stop() == 0
    finally:
        if s.proc.poll() is None:
            s.proc.kill()


@pytest.mark.parametrize("bad", ["0.0.0.0:8081", "[::]:8081", "127.0.0.5:0", "127.0.0.5"])
def test_advertise_must_be_an_address_to_connect_to(tmp_path, bad):
    r = _cli(str(tmp_path / "store"), "--advertise", bad)
    # a usage error (exit status 2, with the pointer to -h), as the README promises for a bad option value
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--advertise" in r.stderr
    assert "(see 'rocketstore serve -h')" in r.stderr
    assert not (tmp_path / "store").exists()


# ---------------------------------------------------------------- a port in use
def test_port_in_use_is_one_line_and_exit_1(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = _cli(str(tmp_path / "store"), "--listen", f"127.0.0.1:{port}")
    assert r.returncode == 1
    assert r.stderr == f"rocketstore: error: 127.0.0.1:{port}: address already in use\n"
    assert r.stdout == ""
    assert not (tmp_path / "store").exists()  # checked before the store is opened


def test_second_serve_on_a_running_serve_port_is_refused(server, tmp_path):
    # gRPC binds with SO_REUSEPORT unless told not to: a second server would share the port (and its
    # clients) with the first, each over its own store
    r = _cli(str(tmp_path / "other"), "--listen", server.endpoint, timeout=30)
    assert r.returncode == 1
    assert r.stderr == f"rocketstore: error: {server.endpoint}: address already in use\n"
    assert server.stop() == 0


def test_a_bind_lost_after_the_check_closes_the_store_cleanly(tmp_path, monkeypatch):
    """The port is taken between our check and gRPC's bind: one ListenError naming the address, the store
    closed normally (no abort file; it opens again for writing)."""
    monkeypatch.setattr(address, "check_bindable", lambda host, port: None)
    store = str(tmp_path / "store")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        s = Server(store, f"127.0.0.1:{port}", StoreConfig.from_properties(SMALL))
        with pytest.raises(ListenError, match=rf"^127\.0\.0\.1:{port}: cannot listen"):
            s.start()
    s.stop()  # nothing left to do
    assert not os.path.exists(os.path.join(store, "abort"))
    MessageStore.open(store, StoreConfig.from_properties(SMALL)).close()


# ---------------------------------------------------------------- the request log
def test_request_log_at_v_names_clients_and_their_calls(tmp_path):
    s = ServeProcess(tmp_path)
    s.args = ["-v"]
    s.start()
    try:
        s.run("produce", {"topic": "Logged", "messages": [{"body": b} for b in ("a", "b", "c")]})
        got = s.run(
            "receive_some", {"topic": "Logged", "group": "lg", "count": 3, "invisible": 30, "ack": ["a", "b", "c"]}
        )
        assert len(got) == 3
        assert s.stop() == 0
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
    log = [x for x in s.lines if "rocketstore.serve.requests" in x]
    appeared = [
        re.search(r"client (\S+) appeared from ipv4:127\.0\.0\.1:\d+ \(PYTHON [\d.]+\): first call (\w+)", x)
        for x in log
        if "appeared" in x
    ]
    assert len(appeared) == 2 and all(appeared), log  # the producer, then the consumer
    producer, consumer = (m.group(1) for m in appeared)
    assert producer != consumer
    calls = "".join(x for x in log if producer in x or consumer in x)
    # each client's calls by kind: three sends, three acks (one message per ack call)
    assert re.search(rf"client {re.escape(producer)} left .*SendMessage 3\b", calls), log
    assert re.search(rf"client {re.escape(consumer)}\b.*AckMessage 3\b", calls), log
    assert re.search(rf"client {re.escape(consumer)}\b.*ReceiveMessage \d+", calls), log


def test_request_log_is_off_by_default(server):
    server.run("produce", {"topic": "Quiet", "messages": [{"body": "a"}]})
    assert server.stop() == 0
    assert not [x for x in server.lines if "rocketstore.serve.requests" in x]


def test_request_log_counts_and_answers_of_a_raw_client(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="rocketstore.serve.requests")
    s = Server(str(tmp_path / "store"), "127.0.0.1:0", StoreConfig.from_properties(SMALL))
    s.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{s.port}") as ch:
            stub = sgrpc.MessagingServiceStub(ch)
            md = [("x-mq-client-id", "raw-client"), ("x-mq-language", "GOLANG"), ("x-mq-client-version", "9.9")]
            for _ in range(2):
                stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Raw")), metadata=md, timeout=5)
            empty = stub.SendMessage(
                spb.SendMessageRequest(
                    messages=[
                        pb.Message(topic=pb.Resource(name="Raw"), system_properties=pb.SystemProperties(message_id="X"))
                    ]
                ),
                metadata=md,
                timeout=5,
            )
            assert empty.status.code == Code.MESSAGE_BODY_EMPTY
            stub.Heartbeat(spb.HeartbeatRequest(), metadata=md, timeout=5)
    finally:
        s.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "rocketstore.serve.requests"]
    assert lines[0].startswith("client raw-client appeared from ipv4:127.0.0.1:")
    assert lines[0].endswith("(GOLANG 9.9): first call QueryRoute")
    assert re.fullmatch(r"requests in the last \d+ s: 4 call\(s\) from 1 client\(s\)", lines[1]), lines
    assert re.fullmatch(
        r"client raw-client \(ipv4:127\.0\.0\.1:\d+\): "
        r"QueryRoute 2, SendMessage 1 \(MESSAGE_BODY_EMPTY 1\), Heartbeat 1",
        lines[2],
    ), lines


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_request_log_summaries_per_interval(caplog):
    caplog.set_level(logging.INFO, logger="rocketstore.serve.requests")
    clock = _Clock()
    rl = RequestLog(interval_s=60, idle_s=120, clock=clock, describe=lambda c: "PRODUCER of T" if c == "c0" else "")
    md = lambda c: [("x-mq-client-id", c)]
    for i in range(MAX_CLIENT_LINES + 3):  # client i makes i + 1 calls
        for _ in range(i + 1):
            rl.record(md(f"c{i}"), f"ipv4:10.0.0.{i}:1", "SendMessage", Code.OK)
    rl.record(md("c0"), "ipv4:10.0.0.0:1", "ReceiveMessage", Code.MESSAGE_NOT_FOUND)
    caplog.clear()
    clock.now += 60
    rl.summarize()
    lines = [r.getMessage() for r in caplog.records]
    n = MAX_CLIENT_LINES + 3
    assert lines[0] == f"requests in the last 60 s: {n * (n + 1) // 2 + 1} call(s) from {n} client(s)"
    assert lines[1] == f"client c{n - 1} (ipv4:10.0.0.{n - 1}:1): SendMessage {n}"  # the busiest first
    assert len(lines) == 1 + MAX_CLIENT_LINES + 1
    # the three quietest (c0: 2 calls, c1: 2, c2: 3) are summed up in one line
    assert lines[-1] == "and 3 more client(s): 7 call(s)"
    # an interval without calls says nothing; a client quiet for longer than idle_s is forgotten ...
    caplog.clear()
    clock.now += 60
    rl.summarize()
    assert caplog.records == []
    clock.now += 61
    rl.summarize()
    rl.record(md("c0"), "ipv4:10.0.0.0:2", "Heartbeat", Code.OK)
    assert [r.getMessage() for r in caplog.records] == ["client c0 appeared from ipv4:10.0.0.0:2: first call Heartbeat"]
    caplog.clear()
    clock.now += 1
    rl.summarize()
    assert [r.getMessage() for r in caplog.records][1] == "client c0 (ipv4:10.0.0.0:2, PRODUCER of T): Heartbeat 1"


# ---------------------------------------------------------------- topics and invisible times
def test_topic_created_through_serve_gets_the_default_queue_count(server):
    route = _route(server.endpoint, "Made")
    assert len(route.message_queues) == 8
    assert server.stop() == 0
    with MessageStore.open(server.store, read_only=True) as store:
        cfg = store.topic_configs["Made"]
        assert (int(cfg["readQueueNums"]), int(cfg["writeQueueNums"])) == (8, 8)  # RocketMQ's defaultTopicQueueNums


def test_invisible_time_limits(tmp_path):
    """ProxyConfig's defaults: ReceiveMessage needs at least minInvisibleTimeMillsForRecv (10 s);
    ChangeInvisibleDuration has no minimum but 0; both at most maxInvisibleTimeMills (12 h)."""
    s = Server(str(tmp_path / "store"), "127.0.0.1:0", StoreConfig.from_properties(SMALL))
    s.start()
    try:
        s.store.create_topic("Inv", 1)
        with grpc.insecure_channel(f"127.0.0.1:{s.port}") as ch:
            stub = sgrpc.MessagingServiceStub(ch)
            md = [("x-mq-client-id", "inv")]
            q = pb.MessageQueue(topic=pb.Resource(name="Inv"), id=0)
            req = spb.ReceiveMessageRequest(
                group=pb.Resource(name="g"),
                message_queue=q,
                batch_size=1,
                filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
            )
            req.long_polling_timeout.FromMilliseconds(5000)
            answers = {}
            for ms in (9_999, 12 * 3600 * 1000 + 1):
                req.invisible_duration.FromMilliseconds(ms)
                answers[ms] = next(iter(stub.ReceiveMessage(req, metadata=md, timeout=10))).status
            assert (answers[9_999].code, answers[9_999].message) == (
                Code.ILLEGAL_INVISIBLE_TIME,
                "the invisibleTime is too small. min is 10000",
            )
            assert answers[12 * 3600 * 1000 + 1].message == "the invisibleTime is too large. max is 43200000"
            change = spb.ChangeInvisibleDurationRequest(
                group=pb.Resource(name="g"), topic=pb.Resource(name="Inv"), receipt_handle="x", message_id="m"
            )
            for ms, text in (
                (-1, "the invisibleTime is too small. min is 0"),
                (12 * 3600 * 1000 + 1, "the invisibleTime is too large. max is 43200000"),
            ):
                change.invisible_duration.FromMilliseconds(ms)
                st = stub.ChangeInvisibleDuration(change, metadata=md, timeout=5).status
                assert (st.code, st.message) == (Code.ILLEGAL_INVISIBLE_TIME, text)
    finally:
        s.stop()


def test_a_free_port_pair_leaves_both_of_a_brokers_ports_bindable():
    """free_port_pair: the port and its fast channel (port - 2) both bind afterwards (tests and benchmarks start
    brokers on them)."""
    import socket

    for _ in range(5):
        p = address.free_port_pair()
        assert p > 1026
        for port in (p, p - 2):
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))  # raises when taken
