"""Drives a remoting server with the C++-core Python client on PyPI (`rocketmq` 0.4.4, ctypes over its bundled
librocketmq.so). Run by the tests in that client's own virtual environment (its package name `rocketmq` is the
gRPC client's too), with HOME in the test's temporary directory: the C++ core logs under ~/logs/rocketmq-cpp.
Usage: cpp_client_driver.py SCENARIO NAMESRV JSON-ARGS; prints one JSON line. Every scenario takes an optional
"credentials": {"access_key", "secret_key", "channel"} that the client signs its requests with (ACL)."""

import json
import sys
import threading
import time

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer


def _message(topic, spec):
    m = Message(topic)
    m.set_body(spec["body"])
    if spec.get("tag"):
        m.set_tags(spec["tag"])
    if spec.get("keys"):
        m.set_keys(spec["keys"])
    for k, v in (spec.get("properties") or {}).items():
        m.set_property(k, v)
    if spec.get("delay_level"):
        m.set_delay_time_level(spec["delay_level"])
    return m


def _credentials(client, args):
    c = args.get("credentials")
    if c:
        client.set_session_credentials(c["access_key"], c["secret_key"], c.get("channel", "ALIYUN"))


def _result(r):
    return {"status": int(r.status), "msg_id": r.msg_id, "offset": r.offset}


def _send_async(p, m):
    done = threading.Event()
    box = {}

    def ok(r):
        box["r"] = _result(r)
        done.set()

    def failed(e):
        box["r"] = {"error": type(e).__name__, "message": str(e)}
        done.set()

    p.send_async(m, ok, failed)
    if not done.wait(30):
        return {"error": "Timeout", "message": "no async callback in 30 s"}
    return box["r"]


def produce(namesrv, args):
    """Send args["messages"] to args["topic"] one by one with args["mode"]: sync (default), async, oneway, orderly
    (queue chosen by the spec's "arg"), or batch (all of them in one batch)."""
    p = Producer(args.get("group", "cpp-producer"), timeout=args.get("timeout_ms", 3000))
    p.set_namesrv_addr(namesrv)
    _credentials(p, args)
    p.start()
    mode = args.get("mode", "sync")
    out = []
    try:
        msgs = [_message(args["topic"], spec) for spec in args["messages"]]
        if mode == "batch":
            # the C++ core retries a failed single send (retryTimesWhenSendFailed) but not a batch, and under load
            # its first connection can lose a race for its transport lock ("get timed_mutex timeout"): three tries
            for attempt in range(3):
                try:
                    return [dict(_result(p.send_batch(msgs)), attempts=attempt + 1)]
                except Exception as e:  # the test asserts on the error the client reports
                    failure = {"error": type(e).__name__, "message": str(e)}
            return [failure]
        for spec, m in zip(args["messages"], msgs):
            try:
                if mode == "sync":
                    out.append(_result(p.send_sync(m)))
                elif mode == "async":
                    out.append(_send_async(p, m))
                elif mode == "oneway":
                    p.send_oneway(m)
                    out.append({})
                elif mode == "orderly":
                    out.append(_result(p.send_orderly(m, spec.get("arg", 0))))
                else:
                    raise ValueError(f"unknown mode {mode}")
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
    _credentials(c, args)

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
    _credentials(c, args)
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


class StatusPushConsumer(PushConsumer):
    """A PushConsumer whose listener returns the C ConsumeStatus itself. 0.4.4's own subscribe asks for
    RECONSUME_LATER when the listener raises, but then raises again inside the ctypes callback, whose return
    value is then whatever the stack held."""

    def subscribe_status(self, topic, listener, expression="*"):
        from rocketmq.client import RecvMessage
        from rocketmq.exceptions import ffi_check
        from rocketmq.ffi import dll

        def on_message(consumer, msg):
            return listener(RecvMessage(msg)).value

        ffi_check(dll.Subscribe(self._handle, topic.encode(), expression.encode()))
        self._register_callback(on_message)


def push_retry(namesrv, args):
    """A push consumer answering RECONSUME_LATER for every delivery of the bodies in args["fail"] and for the
    first delivery of those in args["fail_once"], CONSUME_SUCCESS otherwise. It runs until args["deliveries"]
    deliveries were seen (or args["seconds"] passed), then args["linger"] seconds more (to see any delivery that
    should not come). Each delivery: body, topic (as the client restores it), reconsume times, msg id."""
    from rocketmq.ffi import _CConsumeStatus

    got = []
    seen = {}
    lock = threading.Lock()
    enough = threading.Event()
    c = StatusPushConsumer(args["group"])
    c.set_namesrv_addr(namesrv)

    def listener(msg):
        body = msg.body.decode()
        with lock:
            got.append({"body": body, "topic": msg.topic, "reconsume": msg.reconsume_times, "msg_id": msg.id,
                        "retry_topic": (msg.get_property("RETRY_TOPIC") or b"").decode()})  # fmt: skip
            seen[body] = seen.get(body, 0) + 1
            if len(got) >= args.get("deliveries", 1 << 30):
                enough.set()
            first = seen[body] == 1
        if body in args.get("fail", ()) or (first and body in args.get("fail_once", ())):
            return _CConsumeStatus.RECONSUME_LATER
        return _CConsumeStatus.CONSUME_SUCCESS

    c.subscribe_status(args["topic"], listener)
    c.start()
    enough.wait(args.get("seconds", 60))
    time.sleep(args.get("linger", 0))
    c.shutdown()
    with lock:
        return list(got)


SCENARIOS = {"produce": produce, "push": push_consume, "pull": pull_consume, "push_retry": push_retry}

if __name__ == "__main__":
    scenario, namesrv, raw = sys.argv[1], sys.argv[2], sys.argv[3]
    print(json.dumps(SCENARIOS[scenario](namesrv, json.loads(raw))))
