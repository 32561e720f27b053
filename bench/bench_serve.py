#!/usr/bin/env python
"""`rocketstore serve` under the official RocketMQ 5 Python client (rocketmq-python-client): messages/s sent by
1 and 8 producer clients and received by 1 and 4 SimpleConsumer clients, each client in its own process, with
end-to-end latency percentiles; against the library in-process, measured in the same run.

    python bench/bench_serve.py [--messages N] [--body 128] [--quick] [--only 1x1,8x4,...]

Each scenario PxC uses a fresh topic on one server (`python -m rocketstore.cli serve` in a subprocess on
127.0.0.1, a fresh store under a temporary directory). P producer processes send N messages between them
(Producer.send, synchronous, one message a call) while C consumer processes of one group receive
(SimpleConsumer.receive(32, 30 s), long polling 1 s) and ack every message (one AckMessage a message, as the
client does). All clients start up first and then begin together. Each message carries the wall clock of its
send in a user property; its latency is the receiving process's wall clock when receive() returned it minus
that (all processes on one machine, one clock).

  sent/s      N / (last send returned - first send started), over all producers
  received/s  N / (last message received - first send started), over all consumers: it includes waiting for
              the producers, so it cannot beat sent/s; with consumers faster than producers both agree
  p50/p90/p99 end-to-end latency (send started -> receive returned), ms

Peer (the upper bound: no gRPC, no client, no process boundary): the library in the bench's own process on a
fresh store, with the same bodies and properties: store.put one message a call, then store.get(max_count=32)
over every queue; and a latency row where one thread puts and another long-polls get(wait_ms) on the same
queue. --quick: 2,000 messages and only the 1x1 and 8x4 scenarios.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import threading
import time

from serve_process import ServeProcess
from rocketstore.broker.address import free_port

TOPIC_PREFIX = "BenchServe"
GROUP = "bench-serve-group"
STAMP = "bench_sent_ns"
CONF = """mappedFileSizeCommitLog=134217728
brokerName=bench-broker
grpcClientConsumerMinLongPollingTimeoutMillis=500
"""


# ------------------------------------------------------------------ client processes (spawned)
def _config(endpoint):
    from rocketmq import ClientConfiguration, Credentials

    return ClientConfiguration(endpoint, Credentials(), request_timeout=10)


def producer_proc(endpoint, topic, count, body_size, index, ready, go, results):
    try:
        from rocketmq import Message, Producer

        p = Producer(_config(endpoint), (topic,))
        p.startup()
        pad = b"x" * body_size
        ready.put(index)
        go.wait()
        first = time.time()
        for i in range(count):
            m = Message()
            m.topic = topic
            m.body = pad
            m.tag = "TagA"
            m.keys = f"p{index}-{i}"
            m.add_property(STAMP, str(time.time_ns()))
            p.send(m)
        last = time.time()
        results.put(("producer", index, first, last, count, None))
        p.shutdown()
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        results.put(("producer", index, 0, 0, 0, repr(e)))
    finally:
        os._exit(0)  # the client's scheduler threads need not be waited for


def consumer_proc(endpoint, topic, total, index, received, ready, go, stop, results):
    try:
        from rocketmq import FilterExpression, SimpleConsumer

        c = SimpleConsumer(_config(endpoint), GROUP, {topic: FilterExpression("*")}, await_duration=1)
        c.startup()
        ready.put(index)
        go.wait()
        lat_ms = []
        ids = set()
        last = 0.0
        t_recv = t_ack = 0.0
        calls = 0
        while not stop.is_set():
            t0 = time.perf_counter()
            got = c.receive(32, 30)
            t_recv += time.perf_counter() - t0
            calls += 1
            now_ns = time.time_ns()
            if not got:
                if received.value >= total:
                    break
                continue
            last = now_ns / 1e9
            for m in got:
                if m.message_id not in ids:
                    ids.add(m.message_id)
                    lat_ms.append((now_ns - int(m.properties[STAMP])) / 1e6)
                t0 = time.perf_counter()
                c.ack(m)
                t_ack += time.perf_counter() - t0
            with received.get_lock():
                received.value += len(got)
                if received.value >= total:
                    stop.set()
        if os.environ.get("BENCH_SERVE_DEBUG"):
            print(
                f"consumer {index}: {calls} receive calls, {t_recv:.2f} s in receive, {t_ack:.2f} s in ack "
                f"({len(ids)} messages)",
                file=sys.stderr,
                flush=True,
            )
        results.put(("consumer", index, last, lat_ms, len(ids), None))
        c.shutdown()
    except BaseException as e:  # noqa: BLE001
        results.put(("consumer", index, 0, [], 0, repr(e)))
    finally:
        os._exit(0)


# ------------------------------------------------------------------ the server
def Serve(root: str) -> ServeProcess:
    """`rocketstore serve` with its gRPC endpoint on a free port (`endpoint`)."""
    endpoint = f"127.0.0.1:{free_port()}"
    server = ServeProcess(root, CONF, ["--listen", endpoint], "listening on", ready_s=30)
    server.endpoint = endpoint
    return server


def percentiles(values):
    if not values:
        return (float("nan"),) * 3
    v = sorted(values)

    def pick(q):
        return v[min(len(v) - 1, int(q * len(v)))]

    return pick(0.50), pick(0.90), pick(0.99)


def run_scenario(endpoint, n, body, producers, consumers, tag):
    ctx = mp.get_context("spawn")
    topic = f"{TOPIC_PREFIX}_{tag}"
    ready, results = ctx.Queue(), ctx.Queue()
    go, stop = ctx.Event(), ctx.Event()
    received = ctx.Value("q", 0)
    share = [n // producers + (1 if i < n % producers else 0) for i in range(producers)]
    procs = [
        ctx.Process(target=consumer_proc, args=(endpoint, topic, n, i, received, ready, go, stop, results))
        for i in range(consumers)
    ]
    procs += [
        ctx.Process(target=producer_proc, args=(endpoint, topic, share[i], body, i, ready, go, results))
        for i in range(producers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    go.set()
    out = [results.get(timeout=max(600, n / 20)) for _ in procs]
    for p in procs:
        p.join(30)
    errors = [o[5] for o in out if o[5]]
    if errors:
        raise SystemExit(f"{tag}: client errors: {errors}")
    prod = [o for o in out if o[0] == "producer"]
    cons = [o for o in out if o[0] == "consumer"]
    start = min(o[2] for o in prod)
    sent_end = max(o[3] for o in prod)
    recv_end = max(o[2] for o in cons)
    unique = sum(o[4] for o in cons)
    lat = [x for o in cons for x in o[3]]
    p50, p90, p99 = percentiles(lat)
    return {
        "scenario": f"{producers} producer{'s' if producers > 1 else ''} x {consumers} consumer"
        f"{'s' if consumers > 1 else ''}",
        "sent_s": n / (sent_end - start),
        "recv_s": n / (recv_end - start),
        "unique": unique,
        "deliveries": received.value,
        "p50": p50,
        "p90": p90,
        "p99": p99,
    }


# ------------------------------------------------------------------ the peer: the library in-process
def run_peer(root, n, body):
    from rocketstore import GetStatus, Message, MessageStore, StoreConfig

    cfg = StoreConfig.from_properties({"mappedFileSizeCommitLog": "134217728"})
    pad = b"x" * body
    msgs = [Message("PeerTopic", pad, tags="TagA", keys=[f"k{i}"], properties={STAMP: "0"}) for i in range(n)]
    rows = []
    with MessageStore.open(os.path.join(root, "peer"), cfg) as store:
        t = time.perf_counter()
        for i, m in enumerate(msgs):
            store.put(m, queue_id=i % 8)
        put_s = n / (time.perf_counter() - t)
        t = time.perf_counter()
        got = 0
        for q in range(8):
            off = 0
            while True:
                r = store.get("peer-group", "PeerTopic", q, off, max_count=32)
                if r.status != GetStatus.FOUND:
                    break
                got += len(r.messages)
                off = r.next_begin_offset
        get_s = n / (time.perf_counter() - t)
        assert got == n, got
        rows.append(
            {
                "scenario": "library put / get(32), 1 thread",
                "sent_s": put_s,
                "recv_s": get_s,
                "unique": got,
                "deliveries": got,
                "p50": float("nan"),
                "p90": float("nan"),
                "p99": float("nan"),
            }
        )
        # latency: one thread puts (stamping the time), another long-polls get(wait_ms) on the same queue
        m_lat = min(n, 5000)
        lat = []

        def reader():
            off = 0
            while off < m_lat:
                r = store.get("peer-lat", "PeerLatency", 0, off, max_count=32, wait_ms=1000)
                now = time.time_ns()
                for m in r.messages:
                    lat.append((now - int(m.properties[STAMP])) / 1e6)
                if r.messages:
                    off = r.next_begin_offset

        th = threading.Thread(target=reader)
        th.start()
        t = time.perf_counter()
        for i in range(m_lat):
            store.put(
                Message("PeerLatency", pad, tags="TagA", keys=[f"k{i}"], properties={STAMP: str(time.time_ns())}),
                queue_id=0,
            )
        put_s = m_lat / (time.perf_counter() - t)
        th.join()
        recv_s = m_lat / (time.perf_counter() - t)
        p50, p90, p99 = percentiles(lat)
        rows.append(
            {
                "scenario": f"library put || get(wait_ms), 2 threads ({m_lat:,} msgs)",
                "sent_s": put_s,
                "recv_s": recv_s,
                "unique": len(lat),
                "deliveries": len(lat),
                "p50": p50,
                "p90": p90,
                "p99": p99,
            }
        )
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--body", type=int, default=128, help="body bytes (default 128)")
    ap.add_argument("--quick", action="store_true", help="2,000 messages; scenarios 1x1 and 8x4")
    ap.add_argument("--only", default=None, help="scenarios PxC, comma-separated (default 1x1,8x1,1x4,8x4)")
    args = ap.parse_args(argv)
    n = 2_000 if args.quick and args.messages == 20_000 else args.messages
    only = args.only or ("1x1,8x4" if args.quick else "1x1,8x1,1x4,8x4")
    scenarios = [tuple(int(x) for x in s.split("x")) for s in only.split(",")]
    root = tempfile.mkdtemp(prefix="bench_serve_")
    # the client writes its log under ~/logs at import: keep it out of the real home
    os.environ["HOME"] = os.path.join(root, "home")
    os.makedirs(os.environ["HOME"])
    import rocketstore

    print(
        f"rocketstore {getattr(rocketstore, '__version__', '?')} serve, {n:,} messages of {args.body} B, "
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs",
        flush=True,
    )
    rows = []
    try:
        with Serve(root) as server:
            for producers, consumers in scenarios:
                r = run_scenario(server.endpoint, n, args.body, producers, consumers, f"{producers}x{consumers}")
                rows.append(r)
                print(
                    f"  {r['scenario']}: {r['sent_s']:,.0f} sent/s, {r['recv_s']:,.0f} received/s, "
                    f"p50 {r['p50']:.1f} ms p90 {r['p90']:.1f} ms p99 {r['p99']:.1f} ms",
                    flush=True,
                )
        peer = run_peer(root, n, args.body)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    print("| scenario | sent msg/s | received msg/s | received (unique / deliveries) | p50 ms | p90 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows + peer:
        lat = " | ".join("-" if r[k] != r[k] else f"{r[k]:.1f}" for k in ("p50", "p90", "p99"))
        print(
            f"| {r['scenario']} | {r['sent_s']:,.0f} | {r['recv_s']:,.0f} | {r['unique']:,} / "
            f"{r['deliveries']:,} | {lat} |"
        )
    bad = [r["scenario"] for r in rows if r["unique"] != n]
    if bad:
        print(f"\nNOT ALL MESSAGES RECEIVED in: {bad}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
