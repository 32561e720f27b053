"""Both protocols over one store, as `rocketstore serve` runs them: the gRPC endpoint, the name server and the
remoting broker in one Server. A RocketMQ 5 gRPC producer's messages are pulled by the C++-core client (remoting),
and the C++ client's messages are received by a gRPC consumer."""

import json
import os
import subprocess
import sys

import pytest

from rocketstore import MessageStore, StoreConfig

CONF = {
    "mappedFileSizeCommitLog": "16777216",
    "minInvisibleTimeMillsForRecv": "1000",
    "grpcClientConsumerMinLongPollingTimeoutMillis": "500",
}  # fmt: skip (as tests/grpc's)
GRPC_DRIVER = os.path.join(os.path.dirname(__file__), "..", "grpc", "client_driver.py")


@pytest.fixture
def serve_all(tmp_path):
    pytest.importorskip("grpc")
    from rocketstore.cli.server import Server

    path = str(tmp_path / "store")
    with MessageStore.open(path) as store:
        store.create_topic("Mix", 2)
    conf = StoreConfig.from_properties(CONF)
    s = Server(path, "127.0.0.1:0", conf, namesrv="127.0.0.1:0", remoting="127.0.0.1:0")
    s.start()
    # the shared test machine's disk is above RocketMQ's 90 % cap: measure it as empty
    s.store._cleanup.disk_usage = lambda p: 0.0
    s.store._cleanup.check_disk_full()
    yield s
    s.stop()


def grpc_run(tmp_path, endpoint, scenario, args):
    home = tmp_path / "grpc-home"
    home.mkdir(exist_ok=True)
    r = subprocess.run(
        [sys.executable, GRPC_DRIVER, scenario, endpoint, json.dumps(args)],
        env=dict(os.environ, HOME=str(home)),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_grpc_producer_remoting_consumer(serve_all, cpp_client, tmp_path):
    s = serve_all
    msgs = [{"body": f"g{i}", "tag": "T1"} for i in range(5)]
    sent = grpc_run(tmp_path, f"127.0.0.1:{s.port}", "produce", {"topic": "Mix", "messages": msgs})
    got = cpp_client("pull", f"127.0.0.1:{s.remoting.namesrv_port}", {"topic": "Mix", "group": "mix-pull"})
    store = s.store
    store.wait_dispatched(10)
    held = [m for q in (0, 1) for m in store.get("check", "Mix", q, 0).messages]
    assert sorted((g["body"], g["queue"], g["offset"]) for g in got) == sorted(
        (m.body.decode(), m.queue_id, m.queue_offset) for m in held
    )
    assert sorted(g["body"] for g in got) == [m["body"] for m in msgs]
    assert sorted(r["message_id"] for r in sent) == sorted(m.unique_key for m in held)


def test_remoting_producer_grpc_consumer(serve_all, cpp_client, tmp_path):
    s = serve_all
    msgs = [{"body": f"r{i}", "tag": "T2"} for i in range(4)]
    out = cpp_client("produce", f"127.0.0.1:{s.remoting.namesrv_port}", {"topic": "Mix", "messages": msgs})
    assert all(r.get("status") == 0 for r in out), out
    got = grpc_run(
        tmp_path, f"127.0.0.1:{s.port}", "receive_some",
        {"topic": "Mix", "group": "mix-grpc", "count": 4, "invisible": 30, "ack": [m["body"] for m in msgs]},
    )  # fmt: skip
    assert sorted(g["body"] for g in got) == ["r0", "r1", "r2", "r3"]
    assert all(g["tag"] == "T2" for g in got)
    # the client's message id (its UNIQ_KEY) is the one the gRPC consumer sees
    assert sorted(g["message_id"] for g in got) == sorted(r["msg_id"] for r in out)
