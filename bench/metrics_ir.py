#!/usr/bin/env python
"""Instructions per request of `rocketstore serve` with its metrics on (--http) and off (--no-http): the remoting
rows of bench_metrics.py counted by callgrind in the server, so a loaded machine's noise does not enter.

    python bench/metrics_ir.py [--messages 3000] [--runs 1]

The server runs under `valgrind --tool=callgrind --instr-atstart=no`: counting is switched on
(`callgrind_control -i on`) only around each row, and the row's instructions, less what the server spends idle
for as long (measured first, per server), are divided by its requests. The rows: sends (SEND_MESSAGE_V2, 100 B, 32 in flight on one connection) and pulls of 32 (4 queues in flight)."""

from __future__ import annotations

import argparse
import glob
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_remoting import Serve, run_pull, run_send
from rocketstore.broker.address import free_port

ROWS = ("send 32 in flight", "pull(32), 4 queues in flight")
IDLE_S = 10.0


def collected(pid: int, out_dir: str) -> int:
    """The instructions callgrind counted in `pid` since the last call (its dump, then removed)."""
    subprocess.run(["callgrind_control", "-d", str(pid)], capture_output=True, check=False)
    time.sleep(0.5)
    total = 0
    for path in glob.glob(os.path.join(out_dir, f"cg.{pid}*")):
        with open(path) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    total = max(total, int(line.split()[1]))
        os.remove(path)
    return total


def one_server(metrics: bool, n: int) -> dict[str, float]:
    root = tempfile.mkdtemp(prefix="rs-metrics-ir-")
    server = Serve(root)
    server.ready_s = 600  # valgrind starts Python slowly
    server.launcher = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={root}/cg.%p"]
    server.args += ["--http", f"127.0.0.1:{free_port()}"] if metrics else ["--no-http"]
    opaques = itertools.count(1)
    rows_done: list[int] = []
    rows = {
        ROWS[0]: lambda: run_send(server, "Bench_32", n, b"x" * 100, 32, 1, opaques),
        ROWS[1]: lambda: run_pull(server, "Bench_32", n, 4, 1, opaques),
    }
    out = {}
    try:
        with server:
            pid = server.proc.pid
            # what the server does with no request in a second (its services' rounds, the console's sampler),
            # taken out of each row by the row's length: under valgrind a row lasts 50 times as long
            idle_s, idle = counted(pid, root, lambda: time.sleep(IDLE_S))
            for name, run in rows.items():
                seconds, n_instr = counted(pid, root, lambda: rows_done.append(run()[3]))
                out[name] = (n_instr - idle / idle_s * seconds) / rows_done[-1]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def counted(pid: int, out_dir: str, work) -> tuple[float, int]:
    """(seconds, instructions) of the server while `work()` runs."""
    collected(pid, out_dir)
    subprocess.run(["callgrind_control", "-z", str(pid)], capture_output=True, check=False)
    subprocess.run(["callgrind_control", "-i", "on", str(pid)], capture_output=True, check=False)
    t0 = time.perf_counter()
    work()
    seconds = time.perf_counter() - t0
    subprocess.run(["callgrind_control", "-i", "off", str(pid)], capture_output=True, check=False)
    return seconds, collected(pid, out_dir)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=3000, help="messages per row (default 3,000)")
    ap.add_argument("--runs", type=int, default=1, help="runs, the median taken (default 1)")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("metrics_ir.py needs valgrind (callgrind and callgrind_control) on PATH", file=sys.stderr)
        return 2
    got: dict[bool, list[dict]] = {False: [], True: []}
    for r in range(args.runs):
        for metrics in (False, True) if r % 2 == 0 else (True, False):
            got[metrics].append(one_server(metrics, args.messages))
            print(f"  run {r + 1} metrics {'on ' if metrics else 'off'} "
                  + ", ".join(f"{k}: {v:,.0f}" for k, v in got[metrics][-1].items()), flush=True)  # fmt: skip
    print(f"\n{args.messages:,} messages a row, {args.runs} run(s): instructions per request in the server, its idle"
          " rate taken out")  # fmt: skip
    print("| row | off | on | on / off |\n|---|---|---|---|")
    for name in ROWS:
        off = statistics.median(x[name] for x in got[False])
        on = statistics.median(x[name] for x in got[True])
        print(f"| {name} | {off:,.0f} | {on:,.0f} | {on / off:.3f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
