"""`rocketstore serve` driven by the official RocketMQ 5 Node.js client (rocketmq-client-nodejs, pinned in
tests/serve/node/package-lock.json): its Producer sends, its SimpleConsumer receives and acks, and the
messages are the same ones the library reads from the store, and the other way round."""

import base64
import json
import os
import shutil
import subprocess
import time

import pytest

from rocketstore import Message, MessageStore, StoreConfig

NODE_DIR = os.path.join(os.path.dirname(__file__), "node")
SCRIPT = os.path.join(NODE_DIR, "produce_consume.mjs")
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None,
    reason="no `node` on PATH: the Node.js client test needs Node.js (18 or later; CI machines have node 20)",
)


@pytest.fixture(scope="module")
def node_modules():
    """tests/serve/node/node_modules, installed from the lock file (npm ci) when missing."""
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "rocketmq-client-nodejs")):
        npm = shutil.which("npm")
        assert npm, "node is here but npm is not: cannot install tests/serve/node's locked dependencies"
        r = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, capture_output=True, text=True, timeout=600
        )
        assert r.returncode == 0, f"npm ci failed in {NODE_DIR}:\n{r.stdout}\n{r.stderr}"
    return os.path.join(NODE_DIR, "node_modules")


def run_node(server, args: dict, timeout: float = 90) -> dict:
    # HOME in the test's directory: the Node client would put its log under ~/logs
    env = dict(os.environ, HOME=str(server.home))
    r = subprocess.run(
        [NODE, SCRIPT, server.endpoint, json.dumps(args)],
        cwd=NODE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert r.returncode == 0, (
        f"node exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}\nserver:\n{''.join(server.lines)}"
    )
    return json.loads(r.stdout.strip().splitlines()[-1])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def spec(i: int) -> dict:
    body = f"node-{i}:".encode() + bytes(range(256)) + "ünïcødé".encode()  # binary and UTF-8 bytes
    return {
        "body": body,
        "tag": "TagA" if i % 2 == 0 else "TagB",
        "keys": [f"nk-{i}", f"order-{i // 2}"],
        "properties": {"n": str(i), "color": "blue" if i % 3 else "green"},
    }


def test_node_producer_and_simple_consumer_match_the_library(node_modules, server):
    n = 12
    specs = [spec(i) for i in range(n)]
    out = run_node(
        server,
        {
            "topic": "NodeOrders",
            "group": "node-g1",
            "receive": n,
            "check_empty": True,
            "invisible_ms": 20000,
            "await_ms": 1000,
            "send": [
                {"body_b64": b64(s["body"]), "tag": s["tag"], "keys": s["keys"], "properties": s["properties"]}
                for s in specs
            ],
        },
    )
    sent = out["sent"]
    assert len(sent) == n and len({s["message_id"] for s in sent}) == n
    # every message came back through gRPC, once, intact, and was acked
    got = {m["message_id"]: m for m in out["received"]}
    assert len(out["received"]) == n and set(got) == {s["message_id"] for s in sent}
    assert out["acked"] == n
    for s, receipt in zip(specs, sent):
        m = got[receipt["message_id"]]
        assert m["topic"] == "NodeOrders"
        assert base64.b64decode(m["body_b64"]) == s["body"] and not m["corrupted"]  # body digest verified
        assert m["tag"] == s["tag"] and m["keys"] == sorted(s["keys"])
        assert m["properties"] == s["properties"]  # only the user's properties come back
        assert m["attempt"] == 1 and m["born_host"]
        assert abs(m["born_ms"] - time.time() * 1000) < 120_000
    # acked: nothing is delivered again
    assert out["after_ack"] == []

    assert server.stop() == 0
    assert not os.path.exists(os.path.join(server.store, "abort"))
    with MessageStore.open(server.store, read_only=True) as store:
        queues = set()
        for s, receipt in zip(specs, sent):
            m = store.by_unique_key("NodeOrders", receipt["message_id"])
            assert m is not None, receipt
            queues.add(m.queue_id)
            assert m.queue_offset == receipt["offset"]
            assert m.topic == "NodeOrders" and m.body == s["body"]
            assert m.tags == s["tag"] and sorted(m.keys) == sorted(s["keys"])
            assert m.unique_key == receipt["message_id"]
            p = m.properties
            assert p["n"] == s["properties"]["n"] and p["color"] == s["properties"]["color"]
            assert p["__BORNHOST"] and m.born_timestamp == got[receipt["message_id"]]["born_ms"]
            assert [x.body for x in store.query("NodeOrders", s["keys"][0])] == [s["body"]]
        assert len(queues) > 1  # spread over the topic's queues
        # the acks moved the group's offsets to the end of every queue
        committed = {q: store.consumer_offsets.query("node-g1", "NodeOrders", q) for q in queues}
        assert all(committed[q] == store.max_offset("NodeOrders", q) for q in queues), committed


def test_library_messages_reach_the_node_consumer(node_modules, server):
    assert server.stop() == 0  # the library writes while no server holds the store
    n = 6
    bodies = [f"lib-{i}".encode() + b"\x00\xff" for i in range(n)]
    with MessageStore.open(server.store, StoreConfig.from_properties(str(server.conf))) as store:
        for i, body in enumerate(bodies):
            r = store.put(
                Message(
                    "LibTopic",
                    body,
                    tags="TagA" if i % 2 == 0 else "TagB",
                    keys=[f"lk-{i}", "lib"],
                    properties={"i": str(i)},
                ),
                queue_id=i % 3,
            )
            assert r.ok
    server.start()
    # a tag subscription sees only its tag
    only_a = run_node(
        server,
        {
            "topic": "LibTopic",
            "group": "node-tag",
            "tag_filter": "TagA",
            "receive": 3,
            "check_empty": True,
            "await_ms": 1000,
        },
    )
    assert sorted(base64.b64decode(m["body_b64"]) for m in only_a["received"]) == bodies[0::2]
    assert only_a["after_ack"] == []
    # another group gets everything
    out = run_node(
        server, {"topic": "LibTopic", "group": "node-all", "receive": n, "check_empty": True, "await_ms": 1000}
    )
    assert out["acked"] == n and out["after_ack"] == []
    got = {base64.b64decode(m["body_b64"]): m for m in out["received"]}
    assert sorted(got) == sorted(bodies)
    for i, body in enumerate(bodies):
        m = got[body]
        assert m["topic"] == "LibTopic" and not m["corrupted"]
        assert m["tag"] == ("TagA" if i % 2 == 0 else "TagB")
        assert m["keys"] == sorted([f"lk-{i}", "lib"])
        assert m["properties"] == {"i": str(i)}
        assert m["attempt"] == 1 and m["message_id"]
    assert len({m["message_id"] for m in out["received"]}) == n
    assert server.stop() == 0
    with MessageStore.open(server.store, read_only=True) as store:
        for group in ("node-all", "node-tag"):
            assert [store.consumer_offsets.query(group, "LibTopic", q) for q in range(3)] == [2, 2, 2]
