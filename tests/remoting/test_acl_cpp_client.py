"""The C++-core Python client (`rocketmq` 0.4.4, its own ClientRPCHook: AccessKey + OnsChannel + HMAC-SHA1
Signature) against a name server and a broker with RocketMQ's plain ACL: the right keys send and consume, a wrong
secret or no keys are refused as RocketMQ's broker refuses them (SYSTEM_ERROR, AclException remark), an account
without SUB on the topic gets nothing."""

import json
import os
import signal
import subprocess

import pytest
from broker_fixtures import broker_on_loop, open_store

from rocketstore import Message
from rocketstore.remoting.acl import PlainAcl

DRIVER = os.path.join(os.path.dirname(__file__), "cpp_client_driver.py")
ACL = {
    "accounts": [
        {"accessKey": "producer1", "secretKey": "secret-p1", "topicPerms": ["T=PUB"]},
        {
            "accessKey": "consumer1",
            "secretKey": "secret-c1",
            "topicPerms": ["T=SUB"],
            "groupPerms": ["cg=SUB", "cg2=SUB"],
        },
        {"accessKey": "pubonly1", "secretKey": "secret-o1", "topicPerms": ["T=PUB"], "groupPerms": ["cg=SUB"]},
    ]
}
PRODUCER = {"access_key": "producer1", "secret_key": "secret-p1", "channel": "ALIYUN"}
CONSUMER = {"access_key": "consumer1", "secret_key": "secret-c1", "channel": "ALIYUN"}
PUB_ONLY = {"access_key": "pubonly1", "secret_key": "secret-o1", "channel": "ALIYUN"}
MSGS = [{"body": f"m{i}"} for i in range(4)]


def record_refusals(env) -> list:
    """Every refusal of the broker or the name server, recorded as (server, request code, code, remark)."""
    refused = []
    for name, server in (("namesrv", env["ns"].server), ("broker", env["broker"].server)):
        check = server.before_request
        if check is not None:

            def recording(cmd, conn, check=check, name=name):
                answer = check(cmd, conn)
                if answer is not None:
                    refused.append((name, cmd.code, answer.code, answer.remark))
                return answer

            server.before_request = recording
    return refused


@pytest.fixture
def acl_env(loop_thread, tmp_path, request):
    """A store with topic T (2 queues), a broker with the ACL and a name server with it (param True) or, as
    RocketMQ's own name server, without; its refusals in env["refused"]."""
    store = open_store(tmp_path)
    store.create_topic("T", 2)
    acl = PlainAcl()
    acl.add_data(ACL)
    namesrv_acl = acl if getattr(request, "param", False) else None
    with broker_on_loop(loop_thread, store, acl=acl, namesrv_acl=namesrv_acl) as env:
        env["refused"] = record_refusals(env)
        yield env


def refusals(env):
    """The refusals but those of UNREGISTER_CLIENT: the C++ core unregisters a producer with consumerGroup "",
    whose retry topic "%RETRY%" RocketMQ's ACL checks as a group too ("No default permission for group:")."""
    return [r for r in env["refused"] if r[1] != 35]


def stored_bodies(store, topic="T"):
    store.wait_dispatched(10)
    out = []
    for q in range(2):
        r = store.get("check", topic, q, 0)
        out.extend(m.body.decode() for m in r.messages)
    return sorted(out)


@pytest.mark.parametrize("acl_env", [False, True], indirect=True, ids=["plain-namesrv", "acl-namesrv"])
def test_producer_with_its_keys_sends(cpp_client, acl_env):
    out = cpp_client("produce", acl_env["namesrv"], {"topic": "T", "messages": MSGS, "credentials": PRODUCER})
    assert all(r.get("status") == 0 for r in out), out
    assert stored_bodies(acl_env["store"]) == ["m0", "m1", "m2", "m3"]
    assert refusals(acl_env) == []


def test_wrong_secret_is_refused(cpp_client, acl_env):
    bad = dict(PRODUCER, secret_key="not-the-secret")
    out = cpp_client("produce", acl_env["namesrv"], {"topic": "T", "messages": MSGS[:1], "credentials": bad})
    assert "error" in out[0], out
    assert stored_bodies(acl_env["store"]) == []
    sends = [r for r in acl_env["refused"] if r[1] in (10, 310)]  # SEND_MESSAGE(_V2)
    assert sends and set(r[2:] for r in sends) == {
        (1, "org.apache.rocketmq.acl.common.AclException: Check signature failed for accessKey=producer1")
    }


def test_no_keys_are_refused_by_the_broker(cpp_client, acl_env):
    out = cpp_client("produce", acl_env["namesrv"], {"topic": "T", "messages": MSGS[:1]})
    assert "error" in out[0], out
    assert stored_bodies(acl_env["store"]) == []
    sends = [r for r in acl_env["refused"] if r[1] in (10, 310)]
    assert sends and {r[0] for r in sends} == {"broker"}
    # the C++ core signs every request: given no credentials, with an empty AccessKey that names no account
    assert {r[3] for r in sends} == {"org.apache.rocketmq.acl.common.AclException: No acl config for "}


@pytest.mark.parametrize("acl_env", [True], indirect=True)
def test_no_keys_get_no_route_from_a_name_server_with_acl(cpp_client, acl_env):
    out = cpp_client("produce", acl_env["namesrv"], {"topic": "T", "messages": MSGS[:1]})
    assert "error" in out[0], out
    routes = [r for r in acl_env["refused"] if r[1] == 105]  # GET_ROUTEINFO_BY_TOPIC
    assert routes and {r[0] for r in routes} == {"namesrv"}


def push_denied(cpp_python, tmp_path, namesrv, args):
    """The push scenario for a consumer whose heartbeats are refused: what it consumed, or None when the C++ core
    aborted in its shutdown ("terminate called after throwing an instance of 'boost::thread_interrupted'", now and
    then after refused heartbeats: the client's own fault, the refusals are checked on the server's side)."""
    home = tmp_path / "denied-home"
    home.mkdir(exist_ok=True)
    r = subprocess.run([cpp_python, DRIVER, "push", namesrv, json.dumps(args)], env=dict(os.environ, HOME=str(home)),
                       capture_output=True, text=True, timeout=90)  # fmt: skip
    if r.returncode == -signal.SIGABRT and "boost::thread_interrupted" in r.stderr:
        return None
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_consumers_with_sub_permission_read_and_others_do_not(cpp_python, cpp_client, acl_env, tmp_path):
    store = acl_env["store"]
    for i in range(6):
        store.put(Message("T", f"b{i}".encode()), i % 2)
    store.wait_dispatched(10)
    got = cpp_client("pull", acl_env["namesrv"], {"topic": "T", "group": "cg", "credentials": CONSUMER})
    assert sorted(g.get("body") for g in got) == [f"b{i}" for i in range(6)], got
    assert refusals(acl_env) == []
    pushed = cpp_client(
        "push", acl_env["namesrv"], {"topic": "T", "group": "cg2", "seconds": 4, "credentials": CONSUMER}
    )
    assert sorted(g["body"] for g in pushed) == [f"b{i}" for i in range(6)]
    assert refusals(acl_env) == []
    # an account with SUB on the group but only PUB on T: its heartbeat is refused, so it never gets a queue (a
    # refused pull would leave the C++ PullConsumer retrying for good: the push consumer stops after its seconds)
    denied = push_denied(cpp_python, tmp_path, acl_env["namesrv"], {"topic": "T", "group": "cg", "seconds": 3,
                                                                    "credentials": PUB_ONLY})  # fmt: skip
    assert denied in ([], None)
    beats = [r for r in acl_env["refused"] if r[1] == 34]  # HEART_BEAT
    assert beats and {r[3] for r in beats} == {"org.apache.rocketmq.acl.common.AclException: No permission for topic:T"}
