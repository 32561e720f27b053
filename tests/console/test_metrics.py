"""GET /metrics of `rocketstore serve`: parsed with prometheus_client's parser and compared with what the test
itself sent (over the remoting protocol with the tests' raw client, and over gRPC with RocketMQ 5's Python client):
RocketMQ's metric names and labels, counts and bytes exact. --http / --no-http as the README says."""

import asyncio
import json
import os
import socket
import subprocess
import sys

import pytest
from console_harness import ServeHttp, free_port, value

from rocketstore.formats.inner_batch import encode_messages
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "remoting"))
from remoting_client import Client, send_header, v2  # noqa: E402

DRIVER = os.path.join(os.path.dirname(__file__), "..", "grpc", "client_driver.py")
NODE = {"cluster": "ConsoleCluster", "node_type": "broker", "node_id": "broker-console"}


def pull_ext(topic, group, queue_id, offset):
    return {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
            "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
            "subscription": "*", "subVersion": "0", "expressionType": "TAG"}  # fmt: skip


def test_remoting_sends_and_pulls_are_counted_under_rocketmqs_names(serve_http):
    s = serve_http.start("--no-grpc")
    plain = [f"order-{i}".encode() * (i + 1) for i in range(7)]  # 7 plain sends, queue 0
    fifo = [b"f" * 2000, b"g" * 3000, b"h" * 5000]  # 3 with a sharding key (V2 headers), queue 1
    batch = [(b"b1", "TAGS\x01A\x02", 0), (b"b22", "", 0), (b"b333", "", 0), (b"b4444", "", 0)]
    batch_body = encode_messages(batch)

    async def scenario():
        c = await Client.connect(s.remoting_port)
        try:
            for body in plain:
                r = await c.call(RC.SEND_MESSAGE, send_header("Orders", 0, "TAGS\x01A\x02"), body)
                assert r.code == R.SUCCESS, r.remark
            for body in fifo:
                r = await c.call(RC.SEND_MESSAGE_V2, v2(send_header("Orders", 1, "__SHARDINGKEY\x01k\x02")), body)
                assert r.code == R.SUCCESS, r.remark
            r = await c.call(RC.SEND_BATCH_MESSAGE, v2(send_header("Orders", 2)), batch_body)
            assert r.code == R.SUCCESS, r.remark
            # a delayed message and a half (prepared) one: counted under their topic by their kind
            r = await c.call(RC.SEND_MESSAGE, send_header("Kinds", 0, "DELAY\x012\x02"), b"later")
            assert r.code == R.SUCCESS, r.remark
            half = send_header("Kinds", 0, "TRAN_MSG\x01true\x02PGROUP\x01pg\x02", sysFlag="4")
            r = await c.call(RC.SEND_MESSAGE_V2, v2(half), b"half")
            assert r.code == R.SUCCESS, r.remark
            r = await c.call(RC.SEND_MESSAGE, send_header("rmq_sys_forbidden", 0), b"no")  # refused: not counted
            assert r.code == R.NO_PERMISSION
            pulled = await c.call(RC.PULL_MESSAGE, pull_ext("Orders", "g1", 0, 2))  # offsets 2..6 of queue 0
            assert pulled.code == R.SUCCESS, pulled.remark
            r = await c.call(RC.UPDATE_CONSUMER_OFFSET,
                             {"consumerGroup": "g1", "topic": "Orders", "queueId": "0", "commitOffset": "7"})  # fmt: skip
            assert r.code == R.SUCCESS, r.remark
            return pulled
        finally:
            await c.close()

    pulled = asyncio.run(scenario())
    m = s.metrics()
    orders = dict(topic="Orders", is_system="false", **NODE)
    assert value(m, "rocketmq_messages_in", message_type="normal", **orders) == 7 + 4
    assert value(m, "rocketmq_messages_in", message_type="fifo", **orders) == 3
    assert value(m, "rocketmq_throughput_in", message_type="normal", **orders) == sum(map(len, plain)) + len(batch_body)
    assert value(m, "rocketmq_throughput_in", message_type="fifo", **orders) == sum(map(len, fifo))
    # one size observation per send (a batch: its body over its count), in RocketMQ's buckets
    assert value(m, "rocketmq_message_size", "rocketmq_message_size_count", **orders) == 7 + 3 + 1
    assert value(m, "rocketmq_message_size", "rocketmq_message_size_bucket", le="1024.0", message_type="normal") == 8
    assert value(m, "rocketmq_message_size", "rocketmq_message_size_bucket", le="4096.0", message_type="fifo") == 2
    kinds = dict(topic="Kinds", is_system="false", **NODE)
    assert value(m, "rocketmq_messages_in", message_type="delay", **kinds) == 1
    assert value(m, "rocketmq_messages_in", message_type="transaction", **kinds) == 1
    assert value(m, "rocketmq_messages_in", message_type="normal", **kinds) == 0
    assert value(m, "rocketmq_messages_in", topic="rmq_sys_forbidden") == 0
    assert value(m, "rocketmq_messages_out", topic="Orders", consumer_group="g1") == 5
    assert value(m, "rocketmq_throughput_out", topic="Orders", consumer_group="g1") == len(pulled.body)
    rpc = dict(protocol_type="remoting", **NODE)
    assert value(m, "rocketmq_rpc_latency", "rocketmq_rpc_latency_count", request_code="send_message",
                 response_code="success", **rpc) == 7 + 1  # fmt: skip
    assert value(m, "rocketmq_rpc_latency", "rocketmq_rpc_latency_count", request_code="send_message_v2",
                 response_code="success", **rpc) == 3 + 1  # fmt: skip
    assert value(m, "rocketmq_rpc_latency", "rocketmq_rpc_latency_count", request_code="send_message",
                 response_code="no_permission", **rpc) == 1  # fmt: skip
    assert value(m, "rocketmq_rpc_latency", "rocketmq_rpc_latency_count", request_code="pull_message", **rpc) == 1
    # the gauges: a topic, the group's lag from the commit (queue 0 done; queues 1 and 2 from their start)
    assert value(m, "rocketmq_topic_number", **NODE) >= 1
    lag = dict(topic="Orders", consumer_group="g1", is_retry="false", is_system="false")
    assert value(m, "rocketmq_consumer_lag_messages", **lag) == 3 + 4
    assert value(m, "rocketmq_consumer_ready_messages", **lag) == 3 + 4
    assert value(m, "rocketmq_consumer_inflight_messages", **lag) == 0
    assert value(m, "rocketmq_consumer_lag_latency", **lag) > 0
    assert value(m, "rocketmq_storage_size", **NODE) > 0
    assert value(m, "rocketmq_storage_message_reserve_time", **NODE) >= 0
    assert "rocketmq_storage_flush_behind_bytes" in m and "rocketmq_storage_dispatch_behind_bytes" in m
    assert value(m, "rocketmq_producer_connections", protocol_type="remoting") == 0  # no heartbeat was sent
    assert s.stop() == 0


def test_grpc_sends_and_receives_are_counted(serve_http):
    s = serve_http.start("--no-remoting", "--no-namesrv")

    def run(scenario, args):
        r = subprocess.run([sys.executable, DRIVER, scenario, s.endpoint, json.dumps(args)], env=s.env(),
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])

    bodies = [f"grpc-{i}" for i in range(5)]
    run("produce", {"topic": "G", "messages": [{"body": b, "tag": "T"} for b in bodies]})
    got = run("receive_some", {"topic": "G", "group": "gg", "count": 5, "invisible": 30, "ack": bodies})
    assert sorted(m["body"] for m in got) == bodies
    m = s.metrics()
    assert value(m, "rocketmq_messages_in", topic="G", message_type="normal", **NODE) == 5
    assert value(m, "rocketmq_throughput_in", topic="G") == sum(map(len, bodies))
    assert value(m, "rocketmq_messages_out", topic="G", consumer_group="gg") == 5
    assert value(m, "rocketmq_throughput_out", topic="G", consumer_group="gg") == sum(map(len, bodies))
    assert value(m, "rocketmq_rpc_latency", "rocketmq_rpc_latency_count", protocol_type="grpc",
                 request_code="SendMessage", response_code="ok") == 5  # fmt: skip
    assert value(m, "rocketmq_rpc_latency", "rocketmq_rpc_latency_count", protocol_type="grpc",
                 request_code="AckMessage", response_code="ok") == 5  # fmt: skip
    assert s.stop() == 0


def test_no_http_leaves_the_port_closed(tmp_path):
    s = ServeHttp(tmp_path).start("--no-http", "--no-grpc", "--no-namesrv")
    try:
        assert "HTTP on" not in "".join(s.lines)
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", s.http_port), timeout=2).close()
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--http", "nowhere"], "--http 'nowhere': expected HOST:PORT"),
        (["--http", "127.0.0.1:1", "--no-http"], "--http and --no-http together"),
    ],
)
def test_bad_http_options_are_usage_errors(tmp_path, args, message):
    r = subprocess.run([sys.executable, "-m", "rocketstore.cli", "serve", str(tmp_path / "s"), *args],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert message in r.stderr


def test_an_http_port_in_use_is_one_error_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        s = ServeHttp(tmp_path)
        s.http_port = port
        r = subprocess.run([sys.executable, "-m", "rocketstore.cli", "serve", *s.args(), "--no-grpc"],
                           capture_output=True, text=True, timeout=60, env=s.env())  # fmt: skip
    assert r.returncode == 1
    assert r.stderr.strip() == f"rocketstore: error: 127.0.0.1:{port}: address already in use"
    assert not os.path.exists(s.store)  # refused before the store was made


def test_the_default_port_taken_is_a_warning(tmp_path):
    """Without --http serve takes 127.0.0.1:8082; when something holds that port (here the test, or another
    serve), it says so on stderr and serves on without HTTP."""
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 8082))
        holder.listen()
    except OSError:  # already held by something else on this machine: the same case
        holder.close()
        holder = None
    try:
        s = ServeHttp(tmp_path)
        port = free_port()
        cmd = [sys.executable, "-m", "rocketstore.cli", "serve", s.store, "--no-grpc", "--no-namesrv",
               "--remoting", f"127.0.0.1:{port}"]  # fmt: skip
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=s.env())
        line = p.stdout.readline()
        p.send_signal(15)
        out, err = p.communicate(timeout=30)
    finally:
        if holder is not None:
            holder.close()
    assert line.startswith("rocketstore serve: store") and "HTTP on" not in line
    assert "rocketstore: warning: no HTTP side (/metrics, console): 127.0.0.1:8082" in err
    assert p.returncode == 0
