#!/usr/bin/env python
"""`rocketstore serve` with its metrics on (--http: /metrics and the console) against off (--no-http), in one run:
what counting every request costs the put and get paths of the broker.

    python bench/bench_metrics.py [--messages N] [--body 100] [--runs R] [--quick]

Each run starts two servers in turn (off, then on; the order swapped every other run), each a fresh store, and
times the same remoting rows as bench_remoting.py on both: sends (SEND_MESSAGE_V2, 32 in flight on one connection,
and one at a time: the put path) and pulls (PULL_MESSAGE of 32, 4 queues in flight: the get path). With metrics on
every send is counted in (messages, bytes, a size observation, an RPC latency observation) and every pull out;
the gauges cost nothing until Prometheus scrapes, and the bench scrapes /metrics once after the rows (its time is
printed, and its counts are checked against what was sent). The rows print the best of --runs (default 3;
--quick: 10,000 messages, 1 run): wall time and rate, and the server's CPU per request (utime + stime from /proc),
the figure that stays put on a loaded machine, as the median of the runs; the last column is metrics on over off."""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request

from bench_remoting import CONF, Serve, run_pull, run_send
from rocketstore.broker.address import free_port

RC_SEND_V2 = 310  # RequestCode.SEND_MESSAGE_V2

ROWS = (("send 32 in flight", "send", 32), ("send 1 at a time", "send", 1), ("pull(32), 4 queues in flight", "pull", 4))


def one_server(root: str, metrics: bool, n: int, body: bytes, opaques) -> dict:
    server = Serve(root)
    http_port = free_port()
    server.args += ["--http", f"127.0.0.1:{http_port}"] if metrics else ["--no-http"]
    out = {}
    with server:
        for name, kind, k in ROWS:
            topic = f"Bench_{k}" if kind == "send" else "Bench_32"
            if kind == "send":
                out[name] = run_send(server, topic, n, body, k, 1, opaques)
            else:
                out[name] = run_pull(server, topic, n, k, 1, opaques)
        if metrics:
            t0 = time.perf_counter()
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=60) as r:
                text = r.read().decode()
            out["scrape_s"] = time.perf_counter() - t0
            from prometheus_client.parser import text_string_to_metric_families

            counted = sum(
                s.value
                for f in text_string_to_metric_families(text)
                for s in f.samples
                if s.name == "rocketmq_messages_in_total"
            )
            if counted != 2 * n:
                raise SystemExit(f"/metrics counted {counted} messages in, {2 * n} were sent")
    return out


def meter_alone(rounds: int = 200_000) -> float:
    """Microseconds the remoting meter takes for one counted send (an RPC latency observation, the message type
    from the properties, a message in), in this process: what metrics add to each send's server CPU."""
    import timeit

    from rocketstore.broker.metrics import BrokerMetrics
    from rocketstore.remoting.broker.metered import RemotingMeter
    from rocketstore.remoting.command import RemotingCommand

    class NoStore:  # the meter never reads the store (only a scrape does)
        pass

    meter = RemotingMeter(BrokerMetrics(NoStore()))
    cmd = RemotingCommand(code=RC_SEND_V2, body=b"x" * 100)
    answer = RemotingCommand(code=0, ext_fields={"msgId": "7F00000100002A9F0000000000000000"})
    # what the send processor hangs on its answer: the topic, the message's properties, one message
    answer.stored = ("Bench", {"TAGS": "TagA", "KEYS": "k1", "UNIQ_KEY": "7F000001000000000000000000000001"}, 1)
    clock = time.perf_counter
    counted = min(timeit.repeat(lambda: meter(cmd, answer, clock()), number=rounds, repeat=3))
    bare = min(timeit.repeat(lambda: clock(), number=rounds, repeat=3))
    return (counted - bare) / rounds * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=None, help="messages per row (default 50,000; --quick 10,000)")
    ap.add_argument("--body", type=int, default=100, help="body bytes (default 100)")
    ap.add_argument("--runs", type=int, default=None, help="runs, best taken (default 3, --quick 1)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    n = args.messages or (10_000 if args.quick else 50_000)
    runs = args.runs or (1 if args.quick else 3)
    import rocketstore
    import rocketstore.engine

    print(
        f"rocketstore {rocketstore.__version__} ({rocketstore.engine.describe()}), metrics on vs off, {n:,} messages "
        f"of {args.body} B a row, {runs} run(s), {os.cpu_count()} CPUs, load "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}",
        flush=True,
    )
    assert CONF
    body = b"x" * args.body
    opaques = itertools.count(1)
    best: dict[tuple[str, bool], tuple] = {}
    cpu: dict[tuple[str, bool], list[float]] = {}  # server µs per request of every run
    scrapes = []
    root = tempfile.mkdtemp(prefix="bench_metrics_")
    try:
        for run in range(runs):
            for metrics in (False, True) if run % 2 == 0 else (True, False):
                where = os.path.join(root, f"run{run}-{'on' if metrics else 'off'}")
                os.makedirs(where)
                out = one_server(where, metrics, n, body, opaques)
                shutil.rmtree(where, ignore_errors=True)
                if "scrape_s" in out:
                    scrapes.append(out.pop("scrape_s"))
                for name, res in out.items():
                    print(f"  run {run + 1} metrics {'on ' if metrics else 'off'} {name}: {res[0]:.2f} s wall, "
                          f"server {res[1]:.2f} s CPU, {res[3]} requests", flush=True)  # fmt: skip
                    key = (name, metrics)
                    cpu.setdefault(key, []).append(res[1] / res[3] * 1e6)
                    if key not in best or res[0] < best[key][0]:
                        best[key] = res
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    head = "| row | off: msg/s | on: msg/s | off: server µs/req | on: server µs/req | on / off |"
    print(head)
    print("|---|---|---|---|---|---|")
    for name, _, _ in ROWS:
        off, on = best[(name, False)], best[(name, True)]
        rate_off, rate_on = n / off[0], n / on[0]
        us_off, us_on = statistics.median(cpu[(name, False)]), statistics.median(cpu[(name, True)])
        print(f"| {name} | {rate_off:,.0f} | {rate_on:,.0f} | {us_off:.1f} | {us_on:.1f} | "
              f"{rate_on / rate_off:.2f}x rate (best); {us_on / us_off:.2f}x CPU (median) |")  # fmt: skip
    if scrapes:
        print(f"\nGET /metrics after the rows: {min(scrapes) * 1000:.0f} ms (best of {len(scrapes)})")
    print(f"the remoting meter alone, per counted send (in this process): {meter_alone():.2f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
