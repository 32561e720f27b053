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
    return {
        "body": m.body.decode(),
        "tag": m.tag,
        "keys": sorted(m.keys),
        "properties": dict(m.properties),
        "message_id": m.message_id,
        "attempt": m.delivery_attempt,
        "handle": m.receipt_handle,
    }


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
                m.keys = k  # the client's setter adds one key per assignment
            for k, v in (spec.get("properties") or {}).items():
                m.add_property(k, v)
            r = p.send(m)
            out.append({"message_id": r.message_id, "offset": r.offset, "queue": r.message_queue.message_queue0().id})
    finally:
        p.shutdown()
    return out


def consumer(endpoint, args, await_s):
    c = SimpleConsumer(
        config(endpoint),
        args["group"],
        {args["topic"]: FilterExpression(args.get("tags", "*"))},
        await_duration=await_s,
    )
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
        except Exception as e:  # noqa: BLE001 - the client raises its own BadRequestException
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

# ---- retry / dead letter, PushConsumer, authentication (tests/serve/test_serve_retry_push_auth.py)


def receive_rounds(endpoint, args):
    """Receive for `seconds` (invisible 1 s, so unacked messages come back); ack a body once its attempt
    reaches ack_at[body]; stop early after `stop_after` deliveries. Returns every delivery."""
    c = consumer(endpoint, args, await_s=args.get("await", 1))
    out = []
    try:
        end = time.time() + args["seconds"]
        while time.time() < end and len(out) < args.get("stop_after", 10**9):
            for m in c.receive(32, args.get("invisible", 1)):
                info = msg_info(m)
                info["topic"] = m.topic
                out.append(info)
                if info["attempt"] >= args.get("ack_at", {}).get(info["body"], 10**9):
                    c.ack(m)
        return out
    finally:
        c.shutdown()


def push_consume(endpoint, args):
    """A PushConsumer: SUCCESS for every body except those in `fail` (FAILURE each time). Runs until every body
    in `expect` was consumed successfully and each failing body was tried `fail_attempts` times (or
    `seconds` pass), then lets the acks / forwards finish and shuts down."""
    from rocketmq import ConsumeResult, MessageListener, PushConsumer

    seen, lock = [], threading.Lock()

    class Listener(MessageListener):
        def consume(self, message):
            body = message.body.decode()
            with lock:
                seen.append(
                    {
                        "body": body,
                        "attempt": message.delivery_attempt,
                        "topic": message.topic,
                        "message_id": message.message_id,
                    }
                )
            return ConsumeResult.FAILURE if body in args.get("fail", ()) else ConsumeResult.SUCCESS

    c = PushConsumer(
        config(endpoint), args["group"], Listener(), {args["topic"]: FilterExpression("*")}, consumption_thread_count=4
    )
    c.startup()
    try:
        end = time.time() + args["seconds"]
        while time.time() < end:
            with lock:
                ok = {s["body"] for s in seen if s["body"] not in args.get("fail", ())}
                tries = [sum(1 for s in seen if s["body"] == b) for b in args.get("fail", ())]
            if ok >= set(args["expect"]) and all(t >= args.get("fail_attempts", 0) for t in tries):
                break
            time.sleep(0.1)
        time.sleep(args.get("linger", 1.5))  # the acks and the forward to the DLQ
    finally:
        c.shutdown()
    return seen


def auth_produce(endpoint, args):
    """A Producer signing with (ak, sk): sends one message. Returns ok or the exception's name and code."""
    from rocketmq import Credentials as Cred

    cfg = ClientConfiguration(endpoint, Cred(args["ak"], args["sk"]), request_timeout=3)
    p = Producer(cfg, (args["topic"],))
    try:
        p.startup()
        m = Message()
        m.topic = args["topic"]
        m.body = args["body"].encode()
        r = p.send(m)
        return {"ok": True, "message_id": r.message_id}
    except Exception as e:  # noqa: BLE001 - the client's UnauthorizedException, or whatever it raises
        # the client wraps a refused route query ("failed to fetch topic route"); its log has the code
        import os

        log = os.path.expanduser("~/logs/rocketmq_python/rocketmq_client.log")
        logged = (
            [ln.strip() for ln in open(log, errors="replace") if "[ERROR]" in ln and "raise exception, 4" in ln]
            if os.path.exists(log)
            else []
        )
        return {
            "ok": False,
            "error": type(e).__name__,
            "code": getattr(e, "code", None),
            "message": str(e),
            "logged": logged[-3:],
        }
    finally:
        try:
            p.shutdown()
        except Exception:  # noqa: BLE001 - a producer that never started
            pass


SCENARIOS.update({"receive_rounds": receive_rounds, "push_consume": push_consume, "auth_produce": auth_produce})

# ---- transactions, FIFO, delay (tests/serve/test_serve_tx_fifo_delay.py)


def tx_produce(endpoint, args):
    """A transactional Producer: sends each spec's body as a half message, then commits, rolls back or leaves
    it ("end": commit / rollback / none). Its TransactionChecker answers server checks from `answers`
    (body -> commit / rollback / unknown). Waits until every body in `expect_checks` was checked (or
    `wait` seconds pass), then a little longer for the EndTransaction calls. Returns sends and checks."""
    from rocketmq import Transaction, TransactionChecker, TransactionResolution  # noqa: F401

    checks, lock = [], threading.Lock()
    answers = args.get("answers", {})

    class Checker(TransactionChecker):
        def check(self, message):
            body = message.body.decode()
            with lock:
                checks.append(
                    {"body": body, "message_id": message.message_id, "topic": message.topic, "t": time.time()}
                )
            a = answers.get(body, "unknown")
            return {"commit": TransactionResolution.COMMIT, "rollback": TransactionResolution.ROLLBACK}.get(
                a, TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED
            )

    p = Producer(config(endpoint), (args["topic"],), checker=Checker())
    p.startup()
    sent = []
    try:
        for spec in args.get("messages", ()):
            m = Message()
            m.topic = args["topic"]
            m.body = spec["body"].encode()
            tx = p.begin_transaction()
            r = p.send(m, transaction=tx)
            info = {"body": spec["body"], "message_id": r.message_id, "transaction_id": r.transaction_id}
            end = spec.get("end", "none")
            if end == "commit":
                tx.commit()
            elif end == "rollback":
                tx.rollback()
            info["end"] = end
            sent.append(info)
        deadline = time.time() + args.get("wait", 0)
        want = set(args.get("expect_checks", ()))
        while time.time() < deadline:
            with lock:
                if want <= {c["body"] for c in checks}:
                    break
            time.sleep(0.05)
        if want:
            time.sleep(args.get("linger", 0.5))  # the checker's EndTransaction calls
    finally:
        p.shutdown()
    with lock:
        return {"sent": sent, "checks": list(checks)}


def typed_produce(endpoint, args):
    """A Producer sending FIFO (spec "group") and delay (spec "deliver_in": seconds from now, rounded up to
    the client's whole seconds) messages. Returns per message: id, offset, and the delivery time asked."""
    p = Producer(config(endpoint), (args["topic"],))
    p.startup()
    out = []
    try:
        for spec in args["messages"]:
            m = Message()
            m.topic = args["topic"]
            m.body = spec["body"].encode()
            if spec.get("group"):
                m.message_group = spec["group"]
            at = None
            if spec.get("deliver_in") is not None:
                at = int(time.time() + spec["deliver_in"]) + 1
                m.delivery_timestamp = at
            r = p.send(m)
            out.append(
                {
                    "body": spec["body"],
                    "message_id": r.message_id,
                    "offset": r.offset,
                    "deliver_at": at,
                    "sent_at": time.time(),
                }
            )
    finally:
        p.shutdown()
    return out


def fifo_flow(endpoint, args):
    """Receive until every body was acked (or `seconds` pass), batch `batch`, invisible `invisible` s; the
    first delivery of each body in `skip` is not acked (its invisible time ends, it comes back). Returns the
    deliveries in order, with the time of each receive."""
    c = consumer(endpoint, args, await_s=args.get("await", 1))
    log, acked = [], set()
    try:
        end = time.time() + args["seconds"]
        want = args["count"]
        while time.time() < end and len(acked) < want:
            got = c.receive(args.get("batch", 32), args.get("invisible", 2))
            t = time.time()
            for m in got:
                info = msg_info(m)
                info["group"] = m.message_group
                info["t"] = t
                log.append(info)
                if info["body"] in args.get("skip", ()) and info["attempt"] == 1:
                    continue
                c.ack(m)
                acked.add(info["body"])
    finally:
        c.shutdown()
    return log


def timed_receive(endpoint, args):
    """Receive (acking everything) until `count` messages came or `seconds` pass; the time of each."""
    c = consumer(endpoint, args, await_s=args.get("await", 1))
    out = []
    try:
        end = time.time() + args["seconds"]
        while time.time() < end and len(out) < args["count"]:
            for m in c.receive(32, 20):
                info = msg_info(m)
                info["t"] = time.time()
                info["delivery_timestamp"] = m.delivery_timestamp
                out.append(info)
                c.ack(m)
    finally:
        c.shutdown()
    return out


SCENARIOS.update(
    {"tx_produce": tx_produce, "typed_produce": typed_produce, "fifo_flow": fifo_flow, "timed_receive": timed_receive}
)

if __name__ == "__main__":
    result = SCENARIOS[sys.argv[1]](sys.argv[2], json.loads(sys.argv[3]))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    import os

    os._exit(0)  # the client's scheduler threads need not be waited for
