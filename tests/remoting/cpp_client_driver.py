"""Drives a remoting server with the C++-core Python client on PyPI (`rocketmq` 0.4.4, ctypes over its bundled
librocketmq.so). Run by the tests in that client's own virtual environment (its package name `rocketmq` is the
gRPC client's too), with HOME in the test's temporary directory: the C++ core logs under ~/logs/rocketmq-cpp.
Usage: cpp_client_driver.py SCENARIO NAMESRV JSON-ARGS; prints one JSON line."""

import json
import sys

import time

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer


def produce(namesrv, args):
    p = Producer(args.get("group", "cpp-producer"), timeout=args.get("timeout_ms", 3000))
    p.set_namesrv_addr(namesrv)
    p.start()
    out = []
    try:
        for spec in args["messages"]:
            m = Message(args["topic"])
            m.set_body(spec["body"])
            if spec.get("tag"):
                m.set_tags(spec["tag"])
            if spec.get("keys"):
                m.set_keys(spec["keys"])
            try:
                r = p.send_sync(m)
                out.append({"status": int(r.status), "msg_id": r.msg_id, "offset": r.offset})
            except Exception as e:  # the test asserts on the error the client reports
                out.append({"error": type(e).__name__, "message": str(e)})
    finally:
        p.shutdown()
    return out


def push_consume(namesrv, args):
    """A push consumer subscribed for `seconds`; the messages it got in order. 0.4.4's callback acknowledges by
    returning and asks for redelivery (RECONSUME_LATER) by raising."""
    got = []
    c = PushConsumer(args.get("group", "cpp-push"), orderly=args.get("orderly", False))
    c.set_namesrv_addr(namesrv)

    def on_message(msg):
        got.append({"body": msg.body.decode(), "queue": msg.queue_id, "offset": msg.queue_offset,
                    "reconsume": msg.reconsume_times})  # fmt: skip
        if msg.body.decode() in args.get("fail_bodies", ()):
            raise RuntimeError("consume later")

    c.subscribe(args["topic"], on_message, args.get("expression", "*"))
    c.start()
    time.sleep(args.get("seconds", 3))
    c.shutdown()
    return got


def pull_consume(namesrv, args):
    """A pull consumer reading every queue of the topic from offset 0 until nothing new."""
    c = PullConsumer(args.get("group", "cpp-pull"))
    c.set_namesrv_addr(namesrv)
    c.start()
    got = []
    try:
        for msg in c.pull(args["topic"], args.get("expression", "*")):
            got.append({"body": msg.body.decode(), "queue": msg.queue_id, "offset": msg.queue_offset})
    except Exception as e:  # the test asserts on the error the client reports
        got.append({"error": type(e).__name__, "message": str(e)})
    finally:
        c.shutdown()
    return got


SCENARIOS = {"produce": produce, "push": push_consume, "pull": pull_consume}

if __name__ == "__main__":
    scenario, namesrv, raw = sys.argv[1], sys.argv[2], sys.argv[3]
    print(json.dumps(SCENARIOS[scenario](namesrv, json.loads(raw))))
