#!/usr/bin/env python
"""`rocketstore serve`'s gRPC side (apache.rocketmq.v2.MessagingService) under a client cheaper than the server.

    python bench/bench_grpc.py [--messages N] [--body 128] [--procs 2] [--quick] [--runs R]
                               [--only send,batch,recv]

bench/bench_serve.py drives the gRPC side with the official Python client (rocketmq-python-client), whose own
logic is the bottleneck (~600 sends/s). Here the client is the generated apache.rocketmq.v2 stubs on grpc.aio
(rocketstore.grpc.protocol, the ones the server uses), with no client logic: requests are built before the
clock starts, K calls are kept in flight on one channel by K coroutines, each client process has one channel.

The server is `python -m rocketstore.cli serve STORE --listen 127.0.0.1:PORT --no-remoting --no-namesrv
--no-http` in a subprocess on a fresh store (a fresh server each run). Before the clock, each client process
registers as the official client does: QueryRoute of its topic, Heartbeat (PRODUCER, or SIMPLE_CONSUMER with
its group) and its settings on a Telemetry stream, every call with the x-mq-client-id / x-mq-language /
x-mq-protocol headers. Messages: --body bytes, tag TagA, one key, a client message id (34 hex digits) in the
system properties, NORMAL type, queues chosen by the server (round robin).

Rows (each on its own topic; --quick: 5,000 messages, 1 run; default 20,000, best of 3):
  send KxP      SendMessage, one message a call, K calls in flight on each of P client processes (1x1, 64x1,
                64xP); every entry must be OK
  batch KxP     SendMessage with 32 messages a call (the server puts a batch with one store.put_batch on one
                queue), K calls in flight on each of P processes
  recv KxP      ReceiveMessage (batch 32, invisible 60 s, long polling 0.5 s: the server's minimum is lowered
                to that in its broker.conf) then one AckMessage with every entry of what it got, K receive
                loops on each of P processes, one SimpleConsumer group (fresh for each row) draining the
                batch 8x1 row's topic (N messages) until all N are acked

Measured over the timed section (from the moment every client process is ready and told to go until the last
message is answered): messages/s; the server process's CPU seconds (utime + stime from /proc/PID/stat, all its
threads) per message, server µs/msg, the cost that stays put on a loaded machine; the client processes' CPU
(their own process_time, gRPC's threads included), client µs/msg. CPU s/s is a side's CPU over the wall time
(the client's: its busiest process): the bottleneck is the side closer to 1.0 (the server's Python runs under
one GIL, so about 1.0 is its limit; gRPC's C core threads can add a little); "neither CPU-bound" when both
sides are under 0.7 (the row waits on something else: latency, the disk). Where one client process is the
bottleneck, the KxP rows with P > 1 spread the load over P processes (--procs) to saturate the server. The
calls column counts SendMessage calls, or ReceiveMessage calls (each that got messages followed by one
AckMessage); "not OK" counts answers whose status (or an entry's) was not OK, and gRPC errors.

The Java peer: RocketMQ 5.3.3's gRPC side is its proxy (module `proxy`, org.apache.rocketmq.proxy.ProxyStartup,
in local mode inside the broker or cluster mode before it), which is not among the jars in
../shared/java/rocketmq-5.3.3 (broker, name server, client, tools, benchmark tools only), so the Java side of
these rows cannot be run here. Comparing would need the proxy built from RocketMQ 5.3.3's source with its
dependencies (grpc-java with grpc-netty-shaded, protobuf-java, rocketmq-proto 2.0.x, and what the proxy
pulls in), started in local mode on the same store settings, and this bench pointed at its gRPC port.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import multiprocessing as mp
import os
import shutil
import socket
import sys
import tempfile
import time

from serve_process import ServeProcess

from rocketstore.broker.address import free_port

GROUPS = ("send", "batch", "recv")
BATCH = 32  # messages a batch send; messages a receive asks for
INVISIBLE_S = 60  # long enough that no message comes back during a row
POLL_S = 0.5  # the long polling time a receive asks for
RECV_SOURCE = "batch_8x1"  # the row whose topic the receive rows drain
CONF = """mappedFileSizeCommitLog=134217728
brokerName=bench-broker
grpcClientConsumerMinLongPollingTimeoutMillis=500
"""


@dataclasses.dataclass
class Row:
    key: str
    kind: str  # send | batch | recv
    inflight: int
    procs: int

    @property
    def label(self) -> str:
        what = {"send": "SendMessage (1 msg)", "batch": f"SendMessage ({BATCH} msgs)",
                "recv": f"ReceiveMessage({BATCH}) + AckMessage"}[self.kind]  # fmt: skip
        return f"{what}, {self.inflight} in flight x {self.procs} proc"


def rows_for(procs: int) -> list[Row]:
    return [
        Row("send_1x1", "send", 1, 1),
        Row("send_64x1", "send", 64, 1),
        Row(f"send_64x{procs}", "send", 64, procs),
        Row("batch_8x1", "batch", 8, 1),
        Row(f"batch_8x{procs}", "batch", 8, procs),
        Row("recv_1x1", "recv", 1, 1),
        Row(f"recv_4x{procs}", "recv", 4, procs),
    ]


def Serve(root: str) -> ServeProcess:
    """`rocketstore serve` with only its gRPC endpoint, on a free port (`endpoint`)."""
    endpoint = f"127.0.0.1:{free_port()}"
    args = ["--listen", endpoint, "--no-remoting", "--no-namesrv", "--no-http"]
    server = ServeProcess(root, CONF, args, "listening on", ready_s=30)
    server.endpoint = endpoint
    return server


# ------------------------------------------------------------------ the client (in spawned processes)
def metadata(client_id: str) -> tuple:
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "GRPC_V2"))


def build_sends(pb, spb, topic: str, count: int, per_call: int, body: bytes, proc: int) -> list:
    """SendMessageRequests for `count` messages, `per_call` a request; ids unique over processes and runs."""
    host, now, prefix = socket.gethostname(), int(time.time() * 1000), f"01{proc:04X}{os.getpid() & 0xFFFF:04X}"
    out, msgs = [], []
    for i in range(count):
        m = pb.Message(topic=pb.Resource(name=topic), body=body)
        sp = m.system_properties
        sp.tag, sp.message_id, sp.born_host = "TagA", f"{prefix}{now:012X}{i:012X}", host
        sp.keys.append(f"k{proc}-{i}")
        sp.message_type, sp.body_encoding = pb.MessageType.NORMAL, pb.Encoding.IDENTITY
        sp.born_timestamp.FromMilliseconds(now)
        msgs.append(m)
        if len(msgs) == per_call or i == count - 1:
            out.append(spb.SendMessageRequest(messages=msgs))
            msgs = []
    return out


async def register(stub, pb, spb, md, topic: str, group: str | None) -> None:
    """What the official client does before its first send or receive: route, heartbeat, settings."""
    r = await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=md)
    check(r.status, pb, "QueryRoute")
    kind = pb.ClientType.SIMPLE_CONSUMER if group else pb.ClientType.PRODUCER
    hb = spb.HeartbeatRequest(client_type=kind)
    settings = pb.Settings(client_type=kind, user_agent=pb.UA(language=pb.Language.PYTHON, version="bench"))
    if group:
        hb.group.name = group
        settings.subscription.group.name = group
        settings.subscription.subscriptions.add(topic=pb.Resource(name=topic), expression=pb.FilterExpression(
            type=pb.FilterType.TAG, expression="*"))  # fmt: skip
    else:
        settings.publishing.topics.add(name=topic)
    check((await stub.Heartbeat(hb, metadata=md)).status, pb, "Heartbeat")
    call = stub.Telemetry(metadata=md)
    await call.write(spb.TelemetryCommand(settings=settings))
    check((await call.read()).status, pb, "Telemetry settings")
    await call.done_writing()


def check(status, pb, what: str) -> None:
    if status.code != pb.Code.OK:
        raise RuntimeError(f"{what}: {pb.Code.Name(status.code)} {status.message}")


class Tally:
    """A client process's answers: messages done, calls made, and the non-OK ones (first few kept)."""

    def __init__(self, shared, done, total: int):
        self.shared, self.done, self.total = shared, done, total
        self.messages = self.calls = self.bad = 0
        self.errors: list[str] = []

    def answered(self, messages: int, error: str | None = None) -> None:
        self.calls += 1
        self.messages += messages
        if error:
            self.bad += 1
            if len(self.errors) < 5:
                self.errors.append(error)
        with self.shared.get_lock():  # every process's count: the last message ends the timed section
            self.shared.value += messages
            if self.shared.value >= self.total:
                self.done.set()


async def send_loop(stub, pb, md, requests: list, tally: Tally) -> None:
    import grpc

    while requests:
        req = requests.pop()
        try:
            r = await stub.SendMessage(req, metadata=md, timeout=30)
        except grpc.aio.AioRpcError as e:
            tally.answered(len(req.messages), f"SendMessage: {e.code().name} {e.details()}")
            continue
        bad = [e.status for e in r.entries if e.status.code != pb.Code.OK]
        if r.status.code != pb.Code.OK or len(r.entries) != len(req.messages) or bad:
            s = bad[0] if bad else r.status
            tally.answered(len(req.messages), f"SendMessage: {pb.Code.Name(s.code)} {s.message}")
        else:
            tally.answered(len(req.messages))


async def receive_once(stub, pb, spb, md, req) -> tuple[list, str | None]:
    """One ReceiveMessage: (its messages, an error or None); MESSAGE_NOT_FOUND is no error."""
    msgs, error = [], None
    async for r in stub.ReceiveMessage(req, metadata=md, timeout=POLL_S + 10):
        which = r.WhichOneof("content")
        if which == "message":
            msgs.append(r.message)
        elif which == "status" and r.status.code not in (pb.Code.OK, pb.Code.MESSAGE_NOT_FOUND):
            error = f"ReceiveMessage: {pb.Code.Name(r.status.code)} {r.status.message}"
    return msgs, error


async def receive_loop(stub, pb, spb, md, topic: str, group: str, tally: Tally) -> None:
    import grpc

    req = spb.ReceiveMessageRequest(group=pb.Resource(name=group), batch_size=BATCH)
    req.message_queue.topic.name = topic
    req.filter_expression.type, req.filter_expression.expression = pb.FilterType.TAG, "*"
    req.invisible_duration.FromSeconds(INVISIBLE_S)
    req.long_polling_timeout.FromMilliseconds(int(POLL_S * 1000))
    while not tally.done.is_set():
        try:
            msgs, error = await receive_once(stub, pb, spb, md, req)
            if error or not msgs:
                tally.answered(0, error)
                continue
            ack = spb.AckMessageRequest(group=req.group, topic=req.message_queue.topic)
            for m in msgs:
                ack.entries.add(message_id=m.system_properties.message_id,
                                receipt_handle=m.system_properties.receipt_handle)  # fmt: skip
            r = await stub.AckMessage(ack, metadata=md, timeout=30)
        except grpc.aio.AioRpcError as e:
            tally.answered(0, f"{e.code().name} {e.details()}")
            continue
        bad = sum(e.status.code != pb.Code.OK for e in r.entries)
        tally.answered(len(msgs), f"AckMessage: {bad} entries not OK, {r.status.message}" if bad else None)


async def client_main(job: dict, shared, ready, go, done) -> dict:
    import grpc

    from rocketstore.grpc.protocol import definition_pb2 as pb
    from rocketstore.grpc.protocol import service_pb2 as spb
    from rocketstore.grpc.protocol import service_pb2_grpc as sgrpc

    md = metadata(f"bench-{job['kind']}-{job['index']}@{os.getpid()}")
    tally = Tally(shared, done, job["total"])
    async with grpc.aio.insecure_channel(job["endpoint"]) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        await register(stub, pb, spb, md, job["topic"], job.get("group"))
        if job["kind"] == "recv":
            loops = [receive_loop(stub, pb, spb, md, job["topic"], job["group"], tally) for _ in range(job["inflight"])]
        else:
            per_call = BATCH if job["kind"] == "batch" else 1
            reqs = build_sends(pb, spb, job["topic"], job["count"], per_call, b"x" * job["body"], job["index"])
            reqs.reverse()  # popped from the end: sent in order
            loops = [send_loop(stub, pb, md, reqs, tally) for _ in range(job["inflight"])]
        ready.put(job["index"])
        await asyncio.get_running_loop().run_in_executor(None, go.wait)
        c0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*loops)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall": wall, "cpu": cpu, "messages": tally.messages, "calls": tally.calls, "bad": tally.bad,
            "errors": tally.errors}  # fmt: skip


def client_proc(job, shared, ready, go, done, results) -> None:
    try:
        results.put(asyncio.run(client_main(job, shared, ready, go, done)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        ready.put(-1)  # if it failed before it was ready
        done.set()  # if it failed while timed: the parent need not wait for messages that will never come
        results.put({"fatal": f"client {job['index']}: {e!r}"})


# ------------------------------------------------------------------ the parent: one row
def run_row(server, row: Row, n: int, body: int, topic: str, group: str | None) -> dict:
    """Starts the row's client processes, times them from `go` to the last message answered."""
    ctx = mp.get_context("spawn")
    ready, results, go, done = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Event()
    shared = ctx.Value("q", 0)
    share = [n // row.procs + (i < n % row.procs) for i in range(row.procs)]
    procs = []
    for i in range(row.procs):
        job = {"kind": row.kind, "index": i, "endpoint": server.endpoint, "topic": topic, "group": group,
               "count": share[i], "total": n, "inflight": row.inflight, "body": body}  # fmt: skip
        procs.append(ctx.Process(target=client_proc, args=(job, shared, ready, go, done, results)))
        procs[-1].start()
    if any(ready.get(timeout=120) < 0 for _ in procs):
        go.set()
        raise SystemExit(f"{row.key}: {[results.get(timeout=30) for _ in procs]}")
    s0, t0 = server.cpu(), time.perf_counter()
    go.set()
    finished = done.wait(max(300, n / 50))
    t1, s1 = time.perf_counter(), server.cpu()
    outs = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    fatal = [o["fatal"] for o in outs if "fatal" in o]
    if fatal or not finished:
        raise SystemExit(f"{row.key}: {fatal or 'not every message was answered in time'}")
    return summarize(outs, t1 - t0, s1 - s0)


def summarize(outs: list[dict], wall: float, scpu: float) -> dict:
    return {
        "wall": wall,
        "server_cpu": scpu,
        "client_cpu": sum(o["cpu"] for o in outs),
        "client_load": max(o["cpu"] / o["wall"] for o in outs if o["wall"] > 0),
        "messages": sum(o["messages"] for o in outs),
        "calls": sum(o["calls"] for o in outs),
        "bad": sum(o["bad"] for o in outs),
        "errors": [e for o in outs for e in o["errors"]],
    }


# ------------------------------------------------------------------ report
def report(best: dict, rows: list[Row]) -> str:
    lines = [
        "| row | msgs/s | calls | wall s | server CPU s | client CPU s | server µs/msg | client µs/msg "
        "| server CPU s/s | client CPU s/s | bottleneck | not OK |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for row in rows:
        r = best.get(row.key)
        if r is None:
            continue
        n, wall = r["messages"], r["wall"]
        server_load = r["server_cpu"] / wall
        neck = "server" if abs(1 - server_load) <= abs(1 - r["client_load"]) else "client"
        if max(server_load, r["client_load"]) < 0.7:  # the row waits on something other than CPU (I/O, latency)
            neck += ", neither CPU-bound"
        lines.append(
            f"| {row.label} | {n / wall:,.0f} | {r['calls']:,} | {wall:.2f} | {r['server_cpu']:.2f} "
            f"| {r['client_cpu']:.2f} | {1e6 * r['server_cpu'] / n:.0f} | {1e6 * r['client_cpu'] / n:.0f} "
            f"| {server_load:.2f} | {r['client_load']:.2f} | {neck} | {r['bad']} |"
        )
    return "\n".join(lines)


def print_errors(best: dict) -> None:
    for key, r in best.items():
        if r["bad"]:
            print(f"{key}: {r['bad']} answers not OK, e.g. {r['errors'][:3]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=None, help="messages per row (default 20,000; --quick 5,000)")
    ap.add_argument("--body", type=int, default=128, help="body bytes (default 128)")
    ap.add_argument("--procs", type=int, default=2, help="client processes of the xP rows (default 2)")
    ap.add_argument("--quick", action="store_true", help="5,000 messages, 1 run")
    ap.add_argument("--runs", type=int, default=None, help="runs per row, best taken (default 3, --quick 1)")
    ap.add_argument("--only", default=None, help="comma list of: " + ", ".join(GROUPS) + " (default: all)")
    args = ap.parse_args(argv)
    n = args.messages or (5_000 if args.quick else 20_000)
    runs = args.runs or (1 if args.quick else 3)
    want = set(args.only.split(",")) if args.only else set(GROUPS)
    if want - set(GROUPS):
        ap.error(f"--only: unknown {sorted(want - set(GROUPS))}")
    rows = [r for r in rows_for(args.procs) if r.kind in want]
    if "recv" in want and "batch" not in want:  # the receives drain what the batch 8x1 row wrote
        rows.insert(0, next(r for r in rows_for(args.procs) if r.key == RECV_SOURCE))
    print(header(n, args.body), flush=True)
    t_start = time.perf_counter()
    best = bench(rows, n, args.body, runs)
    print()
    print(report(best, rows))
    print_errors(best)
    print(f"\nload {' '.join(f'{x:.1f}' for x in os.getloadavg())}; wall time {time.perf_counter() - t_start:.0f} s")
    return 0


def header(n: int, body: int) -> str:
    import grpc

    import rocketstore
    import rocketstore.engine

    return (
        f"rocketstore {rocketstore.__version__} ({rocketstore.engine.describe()}), gRPC, {n:,} messages of {body} B, "
        f"grpcio {grpc.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )


def bench(rows: list[Row], n: int, body: int, runs: int) -> dict:
    """Every row `runs` times, a fresh server and store each run; the fastest of each row kept."""
    best: dict[str, dict] = {}
    root = tempfile.mkdtemp(prefix="bench_grpc_")
    try:
        for run in range(runs):
            print(f"run {run + 1} of {runs} ...", flush=True)
            os.makedirs(os.path.join(root, f"serve{run}"))
            with Serve(os.path.join(root, f"serve{run}")) as server:
                for row in rows:
                    topic = f"BenchGrpc_{RECV_SOURCE if row.kind == 'recv' else row.key}"
                    group = f"bench-{row.key}" if row.kind == "recv" else None
                    r = run_row(server, row, n, body, topic, group)
                    print(f"  {row.key}: {r['messages'] / r['wall']:,.0f} msgs/s, {r['wall']:.2f} s wall, server "
                          f"{r['server_cpu']:.2f} s CPU, client {r['client_cpu']:.2f} s CPU, {r['bad']} not OK",
                          flush=True)  # fmt: skip
                    if row.key not in best or r["wall"] < best[row.key]["wall"]:
                        best[row.key] = r
            shutil.rmtree(os.path.join(root, f"serve{run}"), ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return best


if __name__ == "__main__":
    sys.exit(main())
