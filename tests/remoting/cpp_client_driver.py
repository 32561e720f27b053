"""Drives a remoting server with the C++-core Python client on PyPI (`rocketmq` 0.4.4, ctypes over its bundled
librocketmq.so). Run by the tests in that client's own virtual environment (its package name `rocketmq` is the
gRPC client's too), with HOME in the test's temporary directory: the C++ core logs under ~/logs/rocketmq-cpp.
Usage: cpp_client_driver.py SCENARIO NAMESRV JSON-ARGS; prints one JSON line."""

import json
import sys

from rocketmq.client import Message, Producer


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


SCENARIOS = {"produce": produce}

if __name__ == "__main__":
    scenario, namesrv, raw = sys.argv[1], sys.argv[2], sys.argv[3]
    print(json.dumps(SCENARIOS[scenario](namesrv, json.loads(raw))))
