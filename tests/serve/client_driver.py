"""Drives `rocketstore serve` with the official RocketMQ 5 Python client (rocketmq-python-client). Run as a
subprocess by the tests, with HOME pointing into the test's temporary directory: the client writes its log
under ~/logs at import. Usage: client_driver.py SCENARIO ENDPOINT JSON-ARGS; prints one JSON line."""
import json
import sys
import threading
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer


def config(endpoint):
    return ClientConfiguration(endpoint, Credentials(), request_timeout=3)


def msg_info(m):
    return {"body": m.body.decode(), "tag": m.tag, "keys": sorted(m.keys), "properties": dict(m.properties),
            "message_id": m.message_id, "attempt": m.delivery_attempt, "handle": m.receipt_handle}


def produce(endpoint, args):
    p = Producer(config(endpoint), (args["topic"],))
    p.startup()
    out = []
    try:
        for i, spec in enumerate(args["messages"]):
            m = Message()
            m.topic = args["topic"]
            m.body = spec["body"].encode()
            if spec.get("tag"):
                m.tag = spec["tag"]
            for k in spec.get("keys") or ():
                m.keys = k          # the client's setter adds one key per assignment
            for k, v in (spec.get("properties") or {}).items():
                m.add_property(k, v)
            r = p.send(m)
            out.append({"message_id": r.message_id, "offset": r.offset, "queue": r.message_queue.message_queue0().id})
    finally:
        p.shutdown()
    return out


def consumer(endpoint, args, await_s):
    c = SimpleConsumer(config(endpoint), args["group"], {args["topic"]: FilterExpression(args.get("tags", "*"))},
                       await_duration=await_s)
    c.startup()
    return c


def receive_all(c, want, invisible, deadline_s=10):
    got = []
    end = time.time() + deadline_s
    while len(got) < want and time.time() < end:
        got += c.receive(32, invisible)
    return got


def consume_flow(endpoint, args):
    """receive all, ack some, change invisible duration of one, let another's invisible time end."""
    c = consumer(endpoint, args, await_s=1)
    out = {}
    try:
        n = args["count"]
        first = receive_all(c, n, invisible=20)
        out["first"] = [msg_info(m) for m in first]
        by_body = {m.body.decode(): m for m in first}
        for b in args["ack"]:
            c.ack(by_body[b])
        c.change_invisible_duration(by_body[args["shorten"]], 1)
        out["changed_handle"] = by_body[args["shorten"]].receipt_handle
        time.sleep(1.3)
        t = time.time()
        again = receive_all(c, 1, invisible=1, deadline_s=5)
        out["redelivered"] = [msg_info(m) for m in again]
        out["redelivered_s"] = time.time() - t
        # not acked: its 1 s invisible time ends, it comes back with attempt 3
        time.sleep(1.2)
        third = receive_all(c, 1, invisible=20, deadline_s=5)
        out["third"] = [msg_info(m) for m in third]
        for m in third:
            c.ack(m)
        # an ack with a handle that expired is refused
        try:
            c.ack(again[0])
            out["stale_ack"] = "accepted"
        except Exception as e:   # noqa: BLE001 - the client raises its own BadRequestException
            out["stale_ack"] = type(e).__name__
        t = time.time()
        out["empty"] = [msg_info(m) for m in c.receive(32, 20)]
        out["empty_s"] = time.time() - t
    finally:
        c.shutdown()
    return out


def long_poll(endpoint, args):
    """A receive that waits and is woken by a send; then one that times out with nothing."""
    c = consumer(endpoint, args, await_s=args["await"])
    out = {}
    try:
        def later():
            time.sleep(args["send_after"])
            produce(endpoint, {"topic": args["topic"], "messages": [{"body": "late"}]})
        th = threading.Thread(target=later)
        t = time.time()
        th.start()
        got = c.receive(32, 20)
        out["woken_s"] = time.time() - t
        out["woken"] = [msg_info(m) for m in got]
        th.join()
        for m in got:
            c.ack(m)
        t = time.time()
        out["timeout"] = [msg_info(m) for m in c.receive(32, 20)]
        out["timeout_s"] = time.time() - t
    finally:
        c.shutdown()
    return out


def receive_some(endpoint, args):
    """Receive `count` messages (invisible for `invisible` s), ack those whose body is in `ack`."""
    c = consumer(endpoint, args, await_s=args.get("await", 1))
    try:
        got = receive_all(c, args["count"], invisible=args["invisible"], deadline_s=args.get("deadline", 10))
        for m in got:
            if m.body.decode() in args.get("ack", ()):
                c.ack(m)
        return [msg_info(m) for m in got]
    finally:
        c.shutdown()


SCENARIOS = {"produce": produce, "consume_flow": consume_flow, "long_poll": long_poll, "receive_some": receive_some}

if __name__ == "__main__":
    result = SCENARIOS[sys.argv[1]](sys.argv[2], json.loads(sys.argv[3]))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    import os
    os._exit(0)   # the client's scheduler threads need not be waited for
