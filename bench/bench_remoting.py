#!/usr/bin/env python
"""`rocketstore serve`'s remoting side (the RocketMQ 4.x protocol) against the library's own rate, in one run.

    python bench/bench_remoting.py [--messages N] [--body 100] [--inflight 32] [--quick] [--runs R]
                                   [--only library,send,pull,cpp]

The server is `python -m rocketstore.cli serve STORE --no-grpc` in a subprocess (name server and broker on
127.0.0.1, a fresh store under a temporary directory), so the client's CPU and the server's are apart: every
row prints the wall time of its timed section, the server process's CPU seconds over it (utime + stime from
/proc/PID/stat) and the client's own, and names as the bottleneck the side whose CPU is closer to the wall
time (a side near 1.0 CPU s per wall s is saturated: the server is one asyncio loop). The µs/req columns are
each side's CPU over the requests of the row (a send is one message; a pull asks for up to 32), the cost that
stays put when the machine is loaded and the wall time does not.

Rows (each the best of --runs, default 3; --quick: 10,000 messages, 1 run; each send row on a fresh topic):
  library      put             store.put, one message a call, in this process on a fresh store (the peer of
                               the send rows)
               get(32)         store.get(max_count=32) over the 4 queues, following next_begin_offset (the
                               peer of the pull rows)
  remoting     send KxC        SEND_MESSAGE_V2 (short header names, JSON header, --body bytes, 4 queues round
                               robin, topic auto-created from TBW102) over C connections with K requests in
                               flight on each, responses matched by opaque; every one must be SUCCESS. The
                               client is asyncio in this process on rocketstore.remoting's codec (frame,
                               command); request frames are encoded before the clock starts, responses are
                               decoded inside it
               pull KxC        PULL_MESSAGE (maxMsgNums 32, subscription "*") of the send 32x1 row's messages,
                               each connection following nextBeginOffset over its own queues, K queues in
                               flight a connection
  C++ client   send sync       rocketmq 0.4.4 (the C++-core client the tests use, its own venv, see
                               tests/remoting/conftest.py), Producer.send_sync in a subprocess; timed from its
                               first send after a warm-up send (route lookup and connection excluded); its
                               CPU is the client process's own (C++ threads included)
The ratio column is each row's rate over its library peer measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from serve_process import ServeProcess

from rocketstore.broker.address import free_port
from rocketstore.remoting import frame
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R
from rocketstore.remoting.command import RemotingCommand

GROUPS = ("library", "send", "pull", "cpp")
QUEUES = 4
CONF = "mappedFileSizeCommitLog=134217728\nbrokerName=bench-broker\n"
CPP_VENV = os.environ.get(
    "ROCKETSTORE_CPP_CLIENT_VENV", os.path.join(os.path.expanduser("~"), ".cache", "rocketstore", "venv-rocketmq-0.4.4")
)
# the C++-core client in its own interpreter: prints "ready" after its warm-up send, then one JSON line
CPP_SCRIPT = r"""
import json, sys, time
from rocketmq.client import Message, Producer
namesrv, topic, count, body = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
p = Producer("bench-cpp-producer", timeout=10000)
p.set_namesrv_addr(namesrv)
p.start()
def msg():
    m = Message(topic)
    m.set_body(body)
    m.set_tags("TagA")
    return m
p.send_sync(msg())
msgs = [msg() for _ in range(count)]
print("ready", flush=True)
sys.stdin.readline()
c0, t0 = time.process_time(), time.perf_counter()
bad = sum(int(p.send_sync(m).status) != 0 for m in msgs)
t1, c1 = time.perf_counter(), time.process_time()
print(json.dumps({"wall": t1 - t0, "cpu": c1 - c0, "bad": bad}), flush=True)
p.shutdown()
"""


def Serve(root: str) -> ServeProcess:
    """`rocketstore serve --no-grpc`: name server and broker on free ports."""
    server = ServeProcess(root, CONF, [], "rocketstore serve: store")
    server.namesrv = f"127.0.0.1:{free_port()}"
    server.broker_port = free_port()
    server.args = ["--no-grpc", "--namesrv", server.namesrv, "--remoting", f"127.0.0.1:{server.broker_port}"]
    return server


# ------------------------------------------------------------------ the asyncio remoting client
async def read_frame(reader) -> RemotingCommand:
    return frame.decode(await reader.readexactly(frame.frame_length(await reader.readexactly(4))))


def send_frames(topic, n, body, opaques):
    """SEND_MESSAGE_V2 frames, queues round robin (field names: SendMessageRequestHeaderV2's short ones), each
    with its UNIQ_KEY, as RocketMQ's producers send (MessageClientIDSetter.setUniqID in sendKernelImpl)."""
    out = []
    for i in range(n):
        uniq = f"7F000001{os.getpid() & 0xFFFF:04X}{i:020X}"
        ext = {"a": "bench-pg", "b": topic, "c": "TBW102", "d": str(QUEUES), "e": str(i % QUEUES), "f": "0",
               "g": str(int(time.time() * 1000)), "h": "0",
               "i": f"TAGS\x01TagA\x02KEYS\x01k{i}\x02UNIQ_KEY\x01{uniq}\x02",
               "j": "0", "k": "false", "m": "false"}  # fmt: skip
        cmd = RemotingCommand(code=RC.SEND_MESSAGE_V2, ext_fields=ext, body=body, opaque=next(opaques))
        out.append(frame.encode(cmd))
    return out


async def send_conn(port, frames, inflight):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    window = asyncio.Semaphore(inflight)
    bad = 0

    async def responses():
        nonlocal bad
        for _ in frames:
            r = await read_frame(reader)
            bad += r.code != R.SUCCESS
            window.release()

    task = asyncio.create_task(responses())
    for f in frames:
        await window.acquire()
        writer.write(f)
        await writer.drain()
    await task
    writer.close()
    return bad


async def pull_conn(port, topic, queues, opaques):
    """Pulls each of `queues` to its end, one request in flight per queue: (messages pulled, requests made)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    pending: dict[int, tuple[int, int]] = {}  # opaque -> (queue, offset asked)
    got = asked = 0

    def ask(q, offset):
        nonlocal asked
        asked += 1
        ext = {"consumerGroup": "bench-cg", "topic": topic, "queueId": str(q), "queueOffset": str(offset),
               "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
               "subscription": "*", "subVersion": "0", "expressionType": "TAG"}  # fmt: skip
        op = next(opaques)
        pending[op] = (q, offset)
        writer.write(frame.encode(RemotingCommand(code=RC.PULL_MESSAGE, ext_fields=ext, opaque=op)))

    for q in queues:
        ask(q, 0)
    while pending:
        r = await read_frame(reader)
        q, offset = pending.pop(r.opaque)
        if r.code == R.SUCCESS:
            nxt = int(r.ext_fields["nextBeginOffset"])
            got += nxt - offset  # no filter: every ConsumeQueue unit in the range is a message in the body
            ask(q, nxt)
        elif r.code != R.PULL_NOT_FOUND:
            raise SystemExit(f"pull {topic}/{q}@{offset}: code {r.code} {r.remark}")
    writer.close()
    return got, asked


def timed(server, fn):
    """(wall s, server CPU s, client CPU s, result) of fn()."""
    s0, c0, t0 = server.cpu(), time.process_time(), time.perf_counter()
    out = fn()
    t1, c1, s1 = time.perf_counter(), time.process_time(), server.cpu()
    return t1 - t0, s1 - s0, c1 - c0, out


def run_send(server, topic, n, body, inflight, conns, opaques):
    share = [n // conns + (i < n % conns) for i in range(conns)]
    frames = send_frames(topic, n, body, opaques)
    parts = list(itertools.accumulate(share, initial=0))
    chunks = [frames[parts[i] : parts[i + 1]] for i in range(conns)]

    async def go():
        return sum(await asyncio.gather(*(send_conn(server.broker_port, c, inflight) for c in chunks)))

    wall, scpu, ccpu, bad = timed(server, lambda: asyncio.run(go()))
    if bad:
        raise SystemExit(f"{topic}: {bad} sends not SUCCESS")
    return wall, scpu, ccpu, n


def run_pull(server, topic, n, inflight, conns, opaques):
    queue_sets = [list(range(QUEUES))[i::conns] for i in range(conns)]

    async def go():
        outs = []
        for qs in queue_sets:  # inflight queues at a time on each connection
            outs.append(pull_conn_batched(server.broker_port, topic, qs, inflight, opaques))
        return [sum(x) for x in zip(*await asyncio.gather(*outs))]

    wall, scpu, ccpu, (got, asked) = timed(server, lambda: asyncio.run(go()))
    if got != n:
        raise SystemExit(f"{topic}: pulled {got} of {n}")
    return wall, scpu, ccpu, asked


async def pull_conn_batched(port, topic, queues, inflight, opaques):
    got = asked = 0
    for i in range(0, len(queues), inflight):
        g, a = await pull_conn(port, topic, queues[i : i + inflight], opaques)
        got, asked = got + g, asked + a
    return got, asked


def run_cpp(server, root, topic, n, body):
    python = os.path.join(CPP_VENV, "bin", "python")
    home = os.path.join(root, "cpp-home")  # the C++ core logs under ~/logs/rocketmq-cpp
    os.makedirs(home, exist_ok=True)
    p = subprocess.Popen(
        [python, "-c", CPP_SCRIPT, server.namesrv, topic, str(n), "x" * body],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, HOME=home),
    )  # fmt: skip
    try:
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"C++ client did not start: {p.stderr.read()[-500:]}")
        s0 = server.cpu()
        p.stdin.write("go\n")
        p.stdin.flush()
        line = p.stdout.readline()
        s1 = server.cpu()
        if not line:
            raise SystemExit(f"C++ client failed: {p.stderr.read()[-500:]}")
        r = json.loads(line)
    finally:
        p.stdin.close()
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if r["bad"]:
        raise SystemExit(f"C++ client: {r['bad']} sends not SEND_OK")
    return r["wall"], s1 - s0, r["cpu"], n


# ------------------------------------------------------------------ the peer: the library in this process
def run_library(root, n, body, run):
    from rocketstore import GetStatus, Message, MessageStore, StoreConfig

    cfg = StoreConfig.from_properties({"mappedFileSizeCommitLog": "134217728"})
    msgs = [Message("PeerTopic", body, tags="TagA", keys=[f"k{i}"]) for i in range(n)]
    path = os.path.join(root, f"peer{run}")
    try:
        with MessageStore.open(path, cfg) as store:
            c0, t0 = time.process_time(), time.perf_counter()
            for i, m in enumerate(msgs):
                store.put(m, queue_id=i % QUEUES)
            put = (time.perf_counter() - t0, 0.0, time.process_time() - c0, n)
            store.wait_dispatched(30)
            c0, t0, got, calls = time.process_time(), time.perf_counter(), 0, 0
            for q in range(QUEUES):
                off = 0
                while True:
                    r = store.get("peer-group", "PeerTopic", q, off, max_count=32)
                    calls += 1
                    if r.status != GetStatus.FOUND:
                        break
                    got += len(r.messages)
                    off = r.next_begin_offset
            get = (time.perf_counter() - t0, 0.0, time.process_time() - c0, calls)
            assert got == n, got
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return put, get


# ------------------------------------------------------------------ report
def report(best, n, cpp_n, order):
    peer_of = {"send": "lib_put", "pull": "lib_get", "cpp": "lib_put"}
    lines = [
        "| row | msgs/s | vs library | wall s | server CPU s | client CPU s | server µs/req | client µs/req "
        "| bottleneck |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for key, label in order:
        if key not in best:
            continue
        wall, scpu, ccpu, requests = best[key]
        count = cpp_n if key.startswith("cpp") else n
        rate = count / wall
        peer = peer_of.get(key.split("_")[0])
        ratio = f"{rate / (n / best[peer][0]):.2f}x" if peer in best else ""
        per_client = f"{1e6 * ccpu / requests:.0f}"
        if key.startswith("lib"):
            neck, server, per_server = "in-process (1 CPU)", "-", "-"
        else:
            neck = "server" if scpu >= ccpu else "client"
            neck += f" ({max(scpu, ccpu) / wall:.2f} CPU s/s)"
            server, per_server = f"{scpu:.2f}", f"{1e6 * scpu / requests:.0f}"
        lines.append(
            f"| {label} | {rate:,.0f} | {ratio} | {wall:.3f} | {server} | {ccpu:.2f} | {per_server} | {per_client} "
            f"| {neck} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=None, help="messages per row (default 50,000; --quick 10,000)")
    ap.add_argument("--cpp-messages", type=int, default=None, help="C++ client sends (default 5,000; --quick 1,000)")
    ap.add_argument("--body", type=int, default=100, help="body bytes (default 100)")
    ap.add_argument("--inflight", type=int, default=32, help="requests in flight a connection (default 32)")
    ap.add_argument("--quick", action="store_true", help="10,000 messages (1,000 for the C++ client), 1 run")
    ap.add_argument("--runs", type=int, default=None, help="runs per row, best taken (default 3, --quick 1)")
    ap.add_argument("--only", default=None, help="comma list of: " + ", ".join(GROUPS) + " (default: all)")
    args = ap.parse_args(argv)
    n = args.messages or (10_000 if args.quick else 50_000)
    cpp_n = args.cpp_messages or (1_000 if args.quick else 5_000)
    runs = args.runs or (1 if args.quick else 3)
    want = set(args.only.split(",")) if args.only else set(GROUPS)
    if want - set(GROUPS):
        ap.error(f"--only: unknown {sorted(want - set(GROUPS))}")
    if "pull" in want:
        want.add("send")  # the pulls read what the send rows wrote
    cpp_ok = os.path.exists(os.path.join(CPP_VENV, "bin", "python"))
    if "cpp" in want and not cpp_ok:
        print(f"no C++-core client venv at {CPP_VENV} (run tests/remoting/test_cpp_client.py once): row left out")
        want.discard("cpp")

    import rocketstore
    import rocketstore.engine

    print(
        f"rocketstore {rocketstore.__version__} ({rocketstore.engine.describe()}), remoting, {n:,} messages of "
        f"{args.body} B, python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
        flush=True,
    )
    t_start = time.perf_counter()
    body = b"x" * args.body
    k = args.inflight
    send_rows = [(f"send_{k}x1", k, 1), (f"send_{k}x4", k, 4), ("send_1x1", 1, 1)]
    pull_rows = [("pull_1x1", 1, 1), (f"pull_{QUEUES}x1", QUEUES, 1), ("pull_1x4", 1, 4)]
    order = [("lib_put", "library store.put (1/call)"), ("lib_get", "library store.get(32)")]
    order += [(key, f"remoting send, {c} conn x {i} in flight") for key, i, c in send_rows]
    order += [(key, f"remoting pull(32), {c} conn x {i} queue(s) in flight") for key, i, c in pull_rows]
    order += [("cpp_sync", f"C++ client send_sync ({cpp_n:,} msgs)")]
    best: dict[str, tuple] = {}

    def keep(key, res):
        print(f"  {key}: {res[0]:.2f} s wall, server {res[1]:.2f} s CPU, client {res[2]:.2f} s CPU, {res[3]} requests",
              flush=True)  # fmt: skip
        if key not in best or res[0] < best[key][0]:
            best[key] = res

    root = tempfile.mkdtemp(prefix="bench_remoting_")
    opaques = itertools.count(1)
    try:
        for run in range(runs):
            print(f"run {run + 1} of {runs} ...", flush=True)
            if "library" in want:
                put, get = run_library(root, n, body, run)
                keep("lib_put", put)
                keep("lib_get", get)
            if not want & {"send", "pull", "cpp"}:
                continue
            os.makedirs(os.path.join(root, f"serve{run}"))
            with Serve(os.path.join(root, f"serve{run}")) as server:
                for key, inflight, conns in send_rows if "send" in want else ():
                    keep(key, run_send(server, f"Bench_{key}", n, body, inflight, conns, opaques))
                if "pull" in want:
                    for key, inflight, conns in pull_rows:
                        keep(key, run_pull(server, f"Bench_send_{k}x1", n, inflight, conns, opaques))
                if "cpp" in want:
                    keep("cpp_sync", run_cpp(server, root, "Bench_cpp", cpp_n, args.body))
            shutil.rmtree(os.path.join(root, f"serve{run}"), ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    print(report(best, n, cpp_n, order))
    print(f"\nload {' '.join(f'{x:.1f}' for x in os.getloadavg())}; wall time {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
