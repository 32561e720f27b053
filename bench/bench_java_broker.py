#!/usr/bin/env python
"""RocketMQ 5.3.3's own benchmark tools against `rocketstore serve` and against RocketMQ 5.3.3's own Java broker,
in one sitting, alternating runs (issue #28).

    python bench/bench_java_broker.py [--seconds 25] [--warmup 8] [--runs 2] [--quick] [--only p8,p64,...]
                                      [--fill-seconds 35] [--tmpdir /tmp] [--markdown FILE] [--no-java-broker]
                                      [--sides java,rocketstore]

Rows (each one workload: one of the tools in example/benchmark, 128-byte bodies, its own fresh topic, against
the Java broker and then rocketstore, --runs times, default 2; --quick: 16 s runs, 5 s warm-up, 1 run):
  p8        Producer -w 8              synchronous sends from 8 threads, one message a send
  p64       Producer -w 64             the same from 64 threads
  keys      Producer -w 8 -k true -l 8 with a key (the send's second) and one of 8 tags on every message
  batch     BatchProducer -w 8 -b 32   batches of 32 messages from 8 threads (msgs/s is its Send MPS; RT is
                                       a batch's)
  consumer  Consumer                   a push consumer (20 threads, its own group) draining a topic filled
                                       beforehand by BatchProducer -w 8 -b 32 for --fill-seconds; Consumer sets
                                       no ConsumeFromWhere (CONSUME_FROM_LAST_OFFSET), and both brokers start a
                                       new group at offset 0 while the queue still holds offset 0, so it reads
                                       the topic from its start; RT is left out (its B2C/S2C RT is the age of
                                       the backlog)

Method. Each run starts a server on a fresh store under --tmpdir (removed after the run): RocketMQ's name
server and broker through start-broker.sh (ASYNC_FLUSH, 1 GB heap: RMQ_HEAP), or `python -m rocketstore.cli
serve STORE --no-grpc --namesrv ... --remoting ...` (one process holding both, ASYNC_FLUSH, its default); both
on loopback, the broker's fast channel on its port - 2. The tool runs (java -Xmx512m, the classpath of
classpath.sh client) with -ri 1000 for --seconds and is then stopped. The tools print, every second, the rate
and average RT over their last 10 one-second snapshots (9 s); a run's msgs/s and RT are the mean of the lines
whose 9 s lie after the warm-up, and the server's CPU seconds (utime + stime of every thread, /proc/PID/stat;
the broker's plus the name server's for Java) are taken over the same span, divided by the messages of the span
(mean rate x span). Failed: the tool's failure counters at its last line (Send Failed + Response Failed; Send
Message Failed for batches). RSS: peak resident memory (VmHWM, /proc/PID/status) of the server process(es) at
the end. The load average is taken as each run starts: the machine is shared, so rates are indicative; CPU per
message moves less with load than rates do. The consumer row stops at the line where the rate falls under 70%
of its peak (the backlog drained) and says so.

The table: per workload, the mean over runs for the Java broker and rocketstore, and ours / Java. Without the
RocketMQ jars (../shared/java/rocketmq-5.3.3, see its README) nothing can run (the tools live there); without
its broker jar or start-broker.sh, or with --no-java-broker, only the rocketstore rows run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from serve_process import ServeProcess, proc_cpu
from rocketstore.broker.address import free_port, free_port_pair

JAVA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "java" / "rocketmq-5.3.3"
TOOL_JVM = ["-Xmx512m"]
PKG = "org.apache.rocketmq.example.benchmark."
SIDES = ("java", "rocketstore")
SERVE_CONF = "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nflushDiskType=ASYNC_FLUSH\n"
SPAN = 9.0  # seconds covered by one report line: 10 snapshots a second apart
DRAINED = 0.7  # a consumer line under this share of the peak: the backlog is gone


@dataclass
class Workload:
    key: str
    label: str
    tool: str
    args: list[str]


WORKLOADS = [
    Workload("p8", "Producer -w 8", "Producer", ["-w", "8"]),
    Workload("p64", "Producer -w 64", "Producer", ["-w", "64"]),
    Workload("keys", "Producer -w 8 -k true -l 8", "Producer", ["-w", "8", "-k", "true", "-l", "8"]),
    Workload("batch", "BatchProducer -w 8 -b 32", "BatchProducer", ["-w", "8", "-b", "32"]),
    Workload("consumer", "Consumer (draining a filled topic)", "Consumer", []),
]
FILL = Workload("fill", "BatchProducer fill", "BatchProducer", ["-w", "8", "-b", "32"])


@dataclass
class Result:
    rate: float  # msgs/s
    rt: float | None  # ms
    failed: int
    cpu_us: float  # server CPU µs a message
    rss_mb: float
    load: float
    note: str = ""


# ------------------------------------------------------------------ the servers
def peak_rss_mb(pids) -> float:
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            total += next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return total / 1024


@contextmanager
def java_broker(java_dir: Path, root: str):
    """RocketMQ's name server and broker (start-broker.sh), stopped by stop-broker.sh whatever happens."""
    ns, br = free_port(), free_port_pair()
    logdir = os.path.join(root, f"rmqlogs-{ns}")
    try:
        r = subprocess.run(["bash", str(java_dir / "start-broker.sh"), os.path.join(root, "store"), str(ns), str(br)],
                           capture_output=True, text=True, timeout=180)  # fmt: skip
        if r.returncode != 0:
            raise RuntimeError(f"start-broker.sh failed:\n{r.stderr[-3000:]}")
        yield f"127.0.0.1:{ns}", [int(p) for p in r.stdout.split()]  # name server, broker
    finally:
        subprocess.run(["bash", str(java_dir / "stop-broker.sh"), logdir], timeout=120)


@contextmanager
def rocketstore_serve(root: str):
    ns, br = free_port(), free_port_pair()
    args = ["--no-grpc", "--namesrv", f"127.0.0.1:{ns}", "--remoting", f"127.0.0.1:{br}"]
    with ServeProcess(root, SERVE_CONF, args, "rocketstore serve: store") as server:
        yield f"127.0.0.1:{ns}", [server.proc.pid]


# ------------------------------------------------------------------ the tools
class Tool:
    """One benchmark tool in a JVM; its stdout lines kept with the (monotonic) time each arrived."""

    def __init__(self, cp: str, root: str, tool: str, args: list[str]):
        self.err_path = os.path.join(root, f"{tool}-{time.time_ns()}.stderr")
        cmd = ["java", *TOOL_JVM, f"-Duser.home={root}", f"-Djava.io.tmpdir={root}", "-cp", cp, PKG + tool, *args]
        self.t0 = time.monotonic()
        with open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=root)
        self.lines: list[tuple[float, str]] = []
        self.err_size = 0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.t0, line))

    def stop(self) -> None:
        self.err_size = os.path.getsize(self.err_path)  # what it logged before being stopped
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def errors(self) -> str:
        """How many ERROR lines the client logged before it was stopped, and the exception under the first (WARN
        lines: the route lookups of a new topic before the broker creates it, on both sides; after the stop:
        its interrupted threads)."""
        with open(self.err_path, errors="replace") as f:
            lines = f.read(self.err_size).splitlines()
        at = [i for i, line in enumerate(lines) if " ERROR [" in line]
        if not at:
            return ""
        first = lines[at[0] + 1] if at[0] + 1 < len(lines) else lines[at[0]]
        return f"{len(at)} ERROR lines from the client, the first: {first.strip()[:160]}"


def parse(line: str) -> dict | None:
    """A report line's rate, RT and failure count (None for other lines)."""
    rate = re.search(r"Send MPS: (\d+)", line) or re.search(r"(?:Send|Consume) TPS: (\d+)", line)
    if not rate or line.startswith("[Complete]"):
        return None
    rt = re.search(r"Average RT\(ms\):\s*([\d.]+)", line)
    failed = re.search(r"Send Message Failed: (\d+)", line)
    if failed:
        n = int(failed.group(1))
    else:
        n = sum(int(x) for x in re.findall(r"(?:Send|Response) Failed: (\d+)", line))
    return {"rate": int(rate.group(1)), "rt": float(rt.group(1)) if rt else None, "failed": n}


# ------------------------------------------------------------------ one run
def sample_cpu(pids, until: float, t0: float, tool: Tool) -> list[tuple[float, float]]:
    """The servers' CPU seconds every 0.25 s until `until` s after t0 (or the tool's exit)."""
    samples = []
    while (now := time.monotonic() - t0) < until and tool.proc.poll() is None:
        samples.append((now, sum(proc_cpu(p) for p in pids)))
        time.sleep(0.25)
    samples.append((time.monotonic() - t0, sum(proc_cpu(p) for p in pids)))
    return samples


def cpu_at(samples, t: float) -> float:
    return min(samples, key=lambda s: abs(s[0] - t))[1]


def window(tool: Tool, warmup: float, seconds: float, drain: bool):
    """The report lines whose 9 s follow the warm-up, cut where a draining consumer's rate falls off."""
    lines = [(t, p) for t, line in tool.lines if (p := parse(line))]
    kept, peak, drained = [], 0, False
    for t, p in lines:
        if drain and peak and p["rate"] < DRAINED * peak:
            drained = True
            break
        peak = max(peak, p["rate"])
        if warmup + SPAN <= t <= seconds + 0.5:
            kept.append((t, p))
    return lines, kept, drained


def measure(cp, root, pids, w: Workload, ns: str, topic: str, seconds: float, warmup: float, load: float) -> Result:
    args = ["-n", ns, "-t", topic, "-ri", "1000", *w.args]
    args += ["-g", f"bench_cg_{topic}"] if w.tool == "Consumer" else ["-s", "128"]
    tool = Tool(cp, root, w.tool, args)
    try:
        samples = sample_cpu(pids, seconds + 0.5, tool.t0, tool)
        rss = peak_rss_mb(pids)
    finally:
        tool.stop()
    lines, kept, drained = window(tool, warmup, seconds, w.tool == "Consumer")
    if not kept:
        raise RuntimeError(f"{w.label}: no report line in the measuring window ({len(lines)} lines in all); "
                           f"stderr: {tool.err_path}")  # fmt: skip
    start, end = kept[0][0] - SPAN, kept[-1][0]
    rate = sum(p["rate"] for _, p in kept) / len(kept)
    rts = [p["rt"] for _, p in kept if p["rt"] is not None]
    cpu = cpu_at(samples, end) - cpu_at(samples, start)
    note = f"drained at ~{end:.0f} s" if drained else ""
    if errors := tool.errors():
        note = f"{note}; {errors}" if note else errors
    return Result(rate, None if w.tool == "Consumer" or not rts else sum(rts) / len(rts), lines[-1][1]["failed"],
                  1e6 * cpu / max(rate * (end - start), 1), rss, load, note)  # fmt: skip


def fill(cp, root, ns, topic, seconds) -> None:
    """BatchProducer on `topic` for `seconds` (the consumer row's backlog)."""
    tool = Tool(cp, root, FILL.tool, ["-n", ns, "-t", topic, "-ri", "1000", "-s", "128", *FILL.args])
    try:
        time.sleep(seconds)
    finally:
        tool.stop()
    rates = [p["rate"] for _, line in tool.lines if (p := parse(line))]
    print(f"    filled {topic} for {seconds:.0f} s (~{rates[-1] if rates else 0:,} msgs/s)", flush=True)
    time.sleep(2)  # the brokers' dispatch catches up


def run_one(side, w: Workload, cfg, run: int) -> Result:
    """One workload against one side, on a fresh store removed afterwards."""
    root = tempfile.mkdtemp(prefix=f"{side}-{w.key}-", dir=cfg.root)
    topic = f"Bench_{w.key}_{run}"
    load = os.getloadavg()[0]
    try:
        server = java_broker(cfg.java_dir, root) if side == "java" else rocketstore_serve(root)
        with server as (ns, pids):
            if w.tool == "Consumer":
                fill(cfg.cp, root, ns, topic, cfg.fill_seconds)
            return measure(cfg.cp, root, pids, w, ns, topic, cfg.seconds, cfg.warmup, load)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------ report
def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def table(w: Workload, results: dict) -> str:
    """One workload's markdown table: Java broker | rocketstore | ours / Java, means over the runs."""
    j, r = results.get("java", []), results.get("rocketstore", [])
    rows = [("msgs/s", "rate", ",.0f"), ("avg RT ms", "rt", ".2f"), ("failed msgs (sum)", "failed", ",d"),
            ("server CPU µs/msg", "cpu_us", ",.0f"), ("server peak RSS MB", "rss_mb", ",.0f"),
            ("load average at start", "load", ".1f")]  # fmt: skip
    out = [f"**{w.label}**", "", "| | Java broker | rocketstore | ours / Java |", "|---|---:|---:|---:|"]
    for name, attr, spec in rows:
        if attr == "failed":
            a, b = (sum(getattr(x, attr) for x in rs) if rs else None for rs in (j, r))
        else:
            a, b = (mean([getattr(x, attr) for x in rs]) for rs in (j, r))
        ratio = f"{b / a:.2f}x" if a and b is not None and attr not in ("failed", "load") else ""
        out.append(f"| {name} | {fmt(a, spec)} | {fmt(b, spec)} | {ratio} |")
    notes = [f"{side} run {i + 1}: {x.note}" for side, rs in results.items() for i, x in enumerate(rs) if x.note]
    runs = "; ".join(f"{side} " + " / ".join(f"{x.rate:,.0f}" for x in rs) for side, rs in results.items() if rs)
    out += ["", f"runs (msgs/s): {runs}" + ("" if not notes else "; " + "; ".join(notes))]
    return "\n".join(out)


# ------------------------------------------------------------------ setup
def java_setup(java_dir: Path, no_broker: bool):
    """(client classpath, why the Java broker is left out or None); exits when the tools cannot run."""
    if not java_dir.is_dir():
        raise SystemExit(f"skipped: no RocketMQ 5.3.3 jars at {java_dir} (a bare clone): its benchmark tools are "
                         "what this bench runs; see that directory's README")  # fmt: skip
    if shutil.which("java") is None:
        raise SystemExit(f"skipped: no java on PATH (see {java_dir / 'README.md'})")
    r = subprocess.run(["bash", str(java_dir / "classpath.sh"), "client"], capture_output=True, text=True)
    missing = [p for p in r.stdout.strip().split(":") if not os.path.exists(p)]
    if r.returncode or missing:
        raise SystemExit(f"skipped: the client classpath is incomplete: {r.stderr or ', '.join(missing[:3])}")
    why = None
    if no_broker:
        why = "--no-java-broker"
    elif not (java_dir / "start-broker.sh").exists() or not (java_dir / "rocketmq-broker-namesrv-5.3.3.jar").exists():
        why = f"no broker jar or start-broker.sh in {java_dir}"
    return r.stdout.strip(), why


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, help="each tool run's length (default 25; --quick 16)")
    ap.add_argument("--warmup", type=float, help="seconds left out at the start (default 8; --quick 5)")
    ap.add_argument("--fill-seconds", type=float, help="the consumer row's fill (default 35; --quick 20)")
    ap.add_argument("--runs", type=int, help="runs per side and workload, alternating (default 2; --quick 1)")
    ap.add_argument("--quick", action="store_true", help="16 s runs, 5 s warm-up, 20 s fill, 1 run")
    ap.add_argument("--only", help="comma list of: " + ", ".join(w.key for w in WORKLOADS) + " (default: all)")
    ap.add_argument("--tmpdir", default=tempfile.gettempdir(), help="where the stores go (default %(default)s)")
    ap.add_argument("--markdown", help="also write the tables to this file")
    ap.add_argument("--java-dir", type=Path, default=JAVA_DIR, help="default %(default)s")
    ap.add_argument("--no-java-broker", action="store_true", help="rocketstore rows only")
    ap.add_argument("--sides", default=",".join(SIDES), help="comma list of: java, rocketstore (default: both)")
    args = ap.parse_args(argv)
    q = args.quick
    args.seconds = args.seconds or (16 if q else 25)
    args.warmup = args.warmup if args.warmup is not None else (5 if q else 8)
    args.fill_seconds = args.fill_seconds or (20 if q else 35)
    args.runs = args.runs or (1 if q else 2)
    keys = args.only.split(",") if args.only else [w.key for w in WORKLOADS]
    if set(keys) - {w.key for w in WORKLOADS}:
        ap.error(f"--only: unknown {sorted(set(keys) - {w.key for w in WORKLOADS})}")
    args.workloads = [w for w in WORKLOADS if w.key in keys]
    if set(args.sides.split(",")) - set(SIDES):
        ap.error(f"--sides: unknown {sorted(set(args.sides.split(',')) - set(SIDES))}")
    if args.seconds < args.warmup + SPAN + 1:
        ap.error(f"--seconds must be at least --warmup + {SPAN + 1:.0f}: a report line covers {SPAN:.0f} s")
    return args


def header(cfg) -> str:
    import rocketstore
    import rocketstore.engine

    la = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"rocketstore {rocketstore.__version__} ({rocketstore.engine.describe()}) vs RocketMQ 5.3.3 "
            f"(java broker: {cfg.java_why or 'yes'}), {cfg.seconds:.0f} s runs, {cfg.warmup:.0f} s warm-up, "
            f"{cfg.runs} run(s), {os.cpu_count()} CPUs, python {sys.version.split()[0]}, load {la}")  # fmt: skip


def main(argv=None) -> int:
    cfg = parse_args(argv)
    cfg.cp, cfg.java_why = java_setup(cfg.java_dir, cfg.no_java_broker)
    free_gb = shutil.disk_usage(cfg.tmpdir).free / 1e9
    if free_gb < 6:
        raise SystemExit(f"only {free_gb:.1f} GB free under {cfg.tmpdir}: a run needs up to ~3 GB (1 GB CommitLog)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally blocks stop every server
    sides = [s for s in SIDES if s in cfg.sides.split(",") and (s != "java" or not cfg.java_why)]
    print(header(cfg), flush=True)
    cfg.root = tempfile.mkdtemp(prefix="bench_java_broker_", dir=cfg.tmpdir)
    tables, t_start = [], time.monotonic()
    try:
        for w in cfg.workloads:
            results = {s: [] for s in sides}
            for run in range(cfg.runs):
                for side in sides:
                    try:
                        res = run_one(side, w, cfg, run)
                    except RuntimeError as e:
                        print(f"  {w.label} {side} run {run + 1} FAILED: {e}", flush=True)
                        continue
                    results[side].append(res)
                    print(f"  {w.label:36} {side:11} run {run + 1}: {res.rate:9,.0f} msgs/s, RT {fmt(res.rt, '.2f')} "
                          f"ms, failed {res.failed}, {res.cpu_us:,.0f} µs CPU/msg, {res.rss_mb:,.0f} MB, load "
                          f"{res.load:.1f} {res.note}", flush=True)  # fmt: skip
            tables.append(table(w, results))
            print("\n" + tables[-1] + "\n", flush=True)
    finally:
        shutil.rmtree(cfg.root, ignore_errors=True)
    la = " ".join(f"{x:.2f}" for x in os.getloadavg())
    footer = f"load at the end {la}; wall time {time.monotonic() - t_start:.0f} s"
    print("\n\n".join(tables) + "\n\n" + footer)
    if cfg.markdown:
        Path(cfg.markdown).write_text(header(cfg) + "\n\n" + "\n\n".join(tables) + "\n\n" + footer + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
