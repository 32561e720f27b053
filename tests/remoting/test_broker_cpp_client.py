"""The C++-core Python client (`rocketmq` 0.4.4 from PyPI, unchanged) against rocketstore's name server and
broker over one store: its sends in every mode land in the store exactly (read back with store.get), its pull
consumer reads every message with the right offsets, its push consumer gets every message and its offsets are
committed to config/consumerOffset.json."""

import json
import os
import subprocess
import time

import pytest
from broker_fixtures import broker_on_loop, open_store, wait_until

from rocketstore.store.consumer import offsets_path, parse_offsets
from rocketstore.formats.inner_batch import decode_messages
from rocketstore.maintenance.verify import verify_store

DRIVER = os.path.join(os.path.dirname(__file__), "cpp_client_driver.py")


@pytest.fixture
def rocketstore_remoting(loop_thread, tmp_path):
    """A store, the name server and the broker (topic T with 4 queues), on the loop thread."""
    store = open_store(tmp_path)
    store.create_topic("T", 4)
    with broker_on_loop(loop_thread, store) as env:
        yield env


def stored(store, topic="T", queues=4):
    store.wait_dispatched(10)
    out = []
    for q in range(queues):
        off = 0
        while True:
            r = store.get("check", topic, q, off)
            if not r.messages:
                break
            out.extend(r.messages)
            off = r.next_begin_offset
    return out


MSGS = [{"body": f"m{i}", "tag": "A" if i % 2 == 0 else "B", "keys": f"k{i}", "arg": i,
         "properties": {"p": str(i)}} for i in range(6)]  # fmt: skip


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "orderly"])
def test_send_modes_land_in_the_store(cpp_client, rocketstore_remoting, mode):
    env = rocketstore_remoting
    out = cpp_client("produce", env["namesrv"], {"topic": "T", "mode": mode, "messages": MSGS})
    store = env["store"]
    if mode == "oneway":
        assert out == [{}] * 6
        deadline = time.monotonic() + 10
        while len(stored(store)) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
    got = stored(store)
    assert sorted(m.body for m in got) == [f"m{i}".encode() for i in range(6)]
    by_body = {m.body.decode(): m for m in got}
    for i, spec in enumerate(MSGS):
        m = by_body[spec["body"]]
        assert (m.tags, m.keys, m.properties["p"]) == (spec["tag"], [spec["keys"]], str(i))
        assert m.properties["CLUSTER"] == "DefaultCluster" and m.unique_key
    if mode != "oneway":
        for spec, r in zip(MSGS, out):
            m = by_body[spec["body"]]
            assert r["status"] == 0 and r["offset"] == m.queue_offset, (r, m)
            # the client's msg id is its own UNIQ_KEY (the offset msgId stays in the broker's answer)
            assert r["msg_id"] == m.unique_key
    if mode == "orderly":
        assert all(m.queue_id == i % 4 for i, m in ((int(m.body[1:]), m) for m in got))
    # what the broker wrote passes rocketstore verify (every record, CRC, queue unit, index entry)
    store.flush()
    report = verify_store(store.root, store.config)
    assert report["ok"], report["problems"][:5]


def test_batch_is_one_message_as_rocketmq_stores_it(cpp_client, rocketstore_remoting):
    """The C++ core sends a batch as SEND_MESSAGE with batch=1, and RocketMQ's broker reads that field with
    Boolean.parseBoolean: "1" is false, so it stores the batch as one message whose body is the encoded batch
    (apache/rocketmq-client-cpp #363, #447). rocketstore answers the same."""
    env = rocketstore_remoting
    (out,) = cpp_client("produce", env["namesrv"], {"topic": "T", "mode": "batch", "messages": MSGS[:3]})
    assert out.get("status") == 0, out
    (m,) = stored(env["store"])
    assert out["offset"] == m.queue_offset == 0
    inner = decode_messages(m.body)
    assert [i.body for i in inner] == [b"m0", b"m1", b"m2"]
    assert [i.properties["TAGS"] for i in inner] == ["A", "B", "A"]


def test_pull_consumer_reads_every_message(cpp_client, rocketstore_remoting):
    env = rocketstore_remoting
    store = env["store"]
    for i in range(10):
        store.put(__import__("rocketstore").Message("T", f"b{i}".encode(), tags="A" if i < 7 else "C"), i % 4)
    store.wait_dispatched(10)
    got = cpp_client("pull", env["namesrv"], {"topic": "T", "group": "cpp-pull"})
    assert sorted((g["queue"], g["offset"], g["body"]) for g in got) == sorted(
        (i % 4, i // 4, f"b{i}") for i in range(10)
    )
    filtered = cpp_client("pull", env["namesrv"], {"topic": "T", "group": "cpp-pull2", "expression": "C"})
    assert sorted(g["body"] for g in filtered) == ["b7", "b8", "b9"]


def start_push(cpp_python, tmp_path, namesrv, args):
    home = tmp_path / "push-home"
    home.mkdir(exist_ok=True)
    return subprocess.Popen(
        [cpp_python, DRIVER, "push", namesrv, json.dumps(args)],
        env=dict(os.environ, HOME=str(home)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_push_consumer_gets_messages_sent_before_and_while_it_runs(
    cpp_python, cpp_client, rocketstore_remoting, tmp_path
):
    env = rocketstore_remoting
    store, broker = env["store"], env["broker"]
    before = cpp_client("produce", env["namesrv"], {"topic": "T", "messages": MSGS[:4]})
    assert all(r.get("status") == 0 for r in before), before
    push = start_push(cpp_python, tmp_path, env["namesrv"], {"topic": "T", "group": "cpp-push", "seconds": 8})
    try:
        # once it pulls from every queue, send more: long-polling pulls are woken by them
        assert wait_until(lambda: broker.clients.consumers.get("cpp-push") is not None)
        time.sleep(1.5)
        after = cpp_client("produce", env["namesrv"], {"topic": "T", "messages": MSGS[4:]})
        assert all(r.get("status") == 0 for r in after), after
        stdout, stderr = push.communicate(timeout=60)
    finally:
        if push.poll() is None:
            push.kill()
    assert push.returncode == 0, stderr
    got = json.loads(stdout.strip().splitlines()[-1])
    assert sorted(g["body"] for g in got) == [f"m{i}" for i in range(6)]
    by_body = {m.body.decode(): m for m in stored(store)}
    assert all((g["queue"], g["offset"]) == (by_body[g["body"]].queue_id, by_body[g["body"]].queue_offset) for g in got)
    # the consumer committed how far it got (UPDATE_CONSUMER_OFFSET, its last ones sent as it shut down: the
    # broker may read them a moment after the process ended), then persisted
    want = {q: store.max_offset("T", q) for q in range(4) if store.max_offset("T", q) > 0}
    assert wait_until(lambda: all(broker.offsets.query("cpp-push", "T", q) == o for q, o in want.items()))
    broker.offsets.flush()
    committed = parse_offsets(open(offsets_path(store.root)).read()).get("T@cpp-push", {})
    assert committed == want
    assert "%RETRY%cpp-push" in store.topic_configs  # created by its heartbeat


def test_orderly_push_consumer_locks_queues_and_gets_each_queue_in_order(cpp_client, rocketstore_remoting):
    env = rocketstore_remoting
    msgs = [{"body": f"o{i}", "arg": i % 2} for i in range(8)]
    out = cpp_client("produce", env["namesrv"], {"topic": "T", "mode": "orderly", "messages": msgs})
    assert all(r.get("status") == 0 for r in out), out
    got = cpp_client("push", env["namesrv"], {"topic": "T", "group": "cpp-orderly", "orderly": True, "seconds": 6})
    assert sorted(g["body"] for g in got) == sorted(m["body"] for m in msgs)
    for q in (0, 1):
        in_queue = [g for g in got if g["queue"] == q]
        assert [g["offset"] for g in in_queue] == list(range(4))
        assert [g["body"] for g in in_queue] == [f"o{i}" for i in range(q, 8, 2)]
    # the orderly consumer consumes only the queues it locked (LOCK_BATCH_MQ): it did lock them here
    assert "cpp-orderly" in env["broker"].locks.table


def test_topic_created_elsewhere_is_registered(rocketstore_remoting):
    env = rocketstore_remoting
    env["store"].create_topic("Later", 3)  # as the gRPC side or the CLI would
    ns_routes = env["broker"].routes
    assert wait_until(lambda: ns_routes.route("Later") is not None)
    assert [q.write_queue_nums for q in ns_routes.route("Later").queue_datas] == [3]
