"""SIGKILL of `rocketstore serve` (a real process; its remoting broker and name server on loopback ports) at random
instants (seeded) while remoting clients (broker_workload.py, a process of its own) send singly and in batches, a
pull consumer commits with UPDATE_CONSUMER_OFFSET, a push-style consumer long-polls with its consumed offset on
each pull, a transaction producer ends half messages (commits, rollbacks, some left for the check-back) and
DELAY-level messages wait, and the C++ client's push consumer (`rocketmq` 0.4.4, cpp_push_consumer.py) consumes the
delayed topic. Some kills fall during serve's start instead (recovery, the transaction state's rebuild, the first
delivery rounds). Serve restarts on the same store after each kill (on the same ports or new ones, at random), and
the clients start again, as applications do when their broker went away (the C++ consumer too: 0.4.4, kept running,
reconnected and rebalanced here but never pulled again; a reconnection problem reported as
rocketmq-client-cpp#204). What the clients recorded as acknowledged before each kill is checked against the store
and the restarted broker:

- every send answered SUCCESS is in the store at its queue offset with its body (a read-only open of the killed
  store, before the restart, and again at the end); pulls serve the acknowledged bodies;
- consumer offsets: after a restart a group's offset on a queue is one a client committed (or the one it started
  from), and is never older than the newest commit acknowledged more than OFFSET_WINDOW_S before the kill: the
  broker writes consumer offsets every flushConsumerOffsetInterval (broker.conf; RocketMQ's 5 s, 1 s here), so
  the commits of that last interval may be lost and their messages delivered again, RocketMQ's at-least-once;
  OFFSET_WINDOW_S is that interval plus GRACE_S for a busy machine's scheduling, and nothing older may be lost;
- transactions: END_TRANSACTION COMMIT answered: the message is in its topic exactly once; ROLLBACK answered: never;
  a half message whose end was not answered is checked back (CHECK_TRANSACTION_STATE to the producer group's
  connection after the restart) and ends as the producer answers: a rollback never delivered, a commit at least
  once (twice only if a kill fell between the commit's put and its op record, as RocketMQ's
  EndTransactionProcessor can); every pending one is resolved in the end (each half message has its op record);
- delayed messages: each acknowledged one is delivered to its topic, never before its level's delay from its
  born time, once; again only after a restart, when its delivery was among the last before the kill: those of the
  round whose progress config/delayOffset.json did not record yet (rocketstore writes it after each delivery
  round; no delivery before the kill that came later in the log is missing from the redelivered), and within
  DELAY_WINDOW_S of the kill (RocketMQ writes it every 10 s, flushDelayOffsetInterval);
- the C++ push consumer is given a message again after a restart only if it consumed it in the CPP_WINDOW_S
  before the kill (the client commits its offsets every 5 s, persistConsumerOffsetInterval; then the broker's
  flush and GRACE_S), never twice within one process;
- `rocketstore verify` finds the store sound after the last restart's recovery and a clean stop.

ROCKETSTORE_FAULT_SEED=N explores other instants; the default seed is what the suite runs."""

import bisect
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict

import pytest

from rocketstore import GetStatus, MessageStore, StoreConfig

from . import broker_workload as BW
from rocketstore.broker.address import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "broker_workload.py")
CPP_CHILD = os.path.join(HERE, "cpp_push_consumer.py")
CPP_VENV = os.path.join(os.path.expanduser("~"), ".cache", "rocketstore", "venv-rocketmq-0.4.4")
CPP_GROUP = "kcpp"
HALF, OP = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"
GRACE_S = 2.0
OFFSET_WINDOW_S = BW.FLUSH_OFFSETS_MS / 1000 + GRACE_S
DELAY_WINDOW_S = 10.0  # RocketMQ's flushDelayOffsetInterval
# the C++ client commits its consumed offsets every 5 s (persistConsumerOffsetInterval), the broker writes them
# every flushConsumerOffsetInterval
CPP_WINDOW_S = 5.0 + BW.FLUSH_OFFSETS_MS / 1000 + GRACE_S
KILLS = 5
SETTLE_S = 60  # the bound on waiting for due deliveries and checks after the last restart
SEED = int(os.environ.get("ROCKETSTORE_FAULT_SEED", "2511"))  # another seed explores other instants


class Proc:
    """A child process whose stdout lines are collected by a thread."""

    live: list["Proc"] = []  # every child started, for the fixture that kills what a failing test left running

    def __init__(self, args, env=None):
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        Proc.live.append(self)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(iter(self.p.stdout.readline, "")))
        self.reader.start()

    def wait_line(self, prefix: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(x.startswith(prefix) for x in list(self.lines)):
            if self.p.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"no {prefix!r} line: {''.join(self.lines)[-2000:]}{self.p.stderr.read()}")
            time.sleep(0.02)

    def kill(self, sig=signal.SIGKILL) -> str:
        if self.p.poll() is None:
            self.p.send_signal(sig)
        self.p.wait(30)
        self.reader.join(10)
        return self.p.stderr.read()

    def complete_lines(self) -> list[str]:
        """The lines written whole (a kill may cut the last one)."""
        return [x.rstrip("\n") for x in self.lines if x.endswith("\n")]


def start_serve(root: str, conf: str, namesrv_port: int, port: int, wait: bool = True) -> Proc:
    args = [sys.executable, "-m", "rocketstore.cli", "serve", "--store", root, "-c", conf, "--no-grpc",
            "--namesrv", f"127.0.0.1:{namesrv_port}", "--remoting", f"127.0.0.1:{port}"]  # fmt: skip
    serve = Proc(args, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    if wait:
        serve.wait_line("rocketstore serve: store")
    return serve


def kill_while_starting(root: str, conf: str, rng: random.Random) -> int:
    """SIGKILL of serve at a random instant of its start (recovery, the transaction state's rebuild, the first
    delivery rounds of due delayed messages); the kill's wall-clock time."""
    serve = start_serve(root, conf, free_port(), free_port(), wait=False)
    time.sleep(rng.uniform(0.05, 1.5))
    serve.kill()
    return int(time.time() * 1000)  # after the kill: everything that serve stored is older


def start_clients(port: int, seed: int, mode: str) -> Proc:
    clients = Proc([sys.executable, CHILD, str(port), str(seed), mode])
    clients.wait_line("ready")
    return clients


class Record:
    """What the clients recorded, round by round."""

    def __init__(self):
        self.acked: dict[tuple[str, int, int], str] = {}
        self.delays: dict[str, int] = {}  # key -> level
        self.halves: set[str] = set()
        self.ends: dict[str, str] = {}
        self.checked: dict[str, list[int]] = defaultdict(list)  # key -> rounds it was checked in
        self.half_round: dict[str, int] = {}
        self.kills_wall_ms: list[int] = []
        self.kills_mono: list[float] = []
        self.cpp: dict[tuple[int, int], list[tuple[int, float]]] = defaultdict(list)  # (q, offset) -> [(round, t)]
        self.cpp_keys: set[str] = set()
        self.redelivered = 0
        self.floors = 0  # restarts whose offset had a commit older than the window to keep

    def add(self, lines: list[str], rnd: int) -> dict:
        """Files one round's lines; returns that round's offsets: (group, q) -> restored, commits [(o, t)], wants."""
        offsets = defaultdict(lambda: {"restored": None, "commits": [], "wants": set()})
        for ln in lines:
            kind, *f = ln.split()
            if kind == "ack":
                self.acked[(f[0], int(f[1]), int(f[2]))] = f[3]
            elif kind == "delay":
                self.delays[f[0]] = int(f[1])
            elif kind == "half":
                self.halves.add(f[0])
                self.half_round[f[0]] = rnd
            elif kind == "end":
                self.ends[f[0]] = f[1]
            elif kind == "checked":
                self.checked[f[0]].append(rnd)
            elif kind == "restored":
                offsets[(f[0], int(f[1]))]["restored"] = int(f[2])
            elif kind == "want":
                offsets[(f[0], int(f[1]))]["wants"].add(int(f[2]))
            elif kind == "commit":
                offsets[(f[0], int(f[1]))]["commits"].append((int(f[2]), float(f[3])))
        return offsets


def check_got(lines: list[str], acked: dict) -> None:
    """The consumers were served the acknowledged bodies."""
    for ln in lines:
        if ln.startswith("got "):
            _, _group, q, off, h = ln.split()
            want = acked.get((BW.SEND_TOPIC, int(q), int(off)))
            assert want in (None, h), f"a pull served another body at {BW.SEND_TOPIC}/{q}@{off}"


def check_offsets(before: dict, after: dict, t_kill: float, rec: Record) -> None:
    """A restart's offsets against the round killed before it (see the module's docstring)."""
    for group in BW.GROUPS:
        for q in range(BW.QUEUES):
            b, now = before.get((group, q)), after[(group, q)]["restored"]
            assert now is not None, f"{group}/{q}: no offset query after the restart"
            if b is None:
                continue
            start = b["restored"] if b["restored"] is not None else -1
            allowed = b["wants"] | {start}
            assert now in allowed, f"{group}/{q}: offset {now} after the restart was never committed ({allowed})"
            settled = [o for o, t in b["commits"] if t <= t_kill - OFFSET_WINDOW_S]
            floor = max(settled + [start])
            assert now >= floor, (
                f"{group}/{q}: offset {now} after the restart, but {floor} was committed and acknowledged more than "
                f"{OFFSET_WINDOW_S} s before the kill"
            )
            rec.floors += floor > max(start, 0)
            acked_before = max([o for o, _t in b["commits"]] + [start])
            rec.redelivered += max(acked_before - max(now, 0), 0)


def read_queue(s: MessageStore, topic: str, q: int) -> list:
    out, off = [], s.min_offset(topic, q)
    end = s.max_offset(topic, q)
    while off < end:
        g = s.get("fault-check", topic, q, off, 32)
        assert g.status is GetStatus.FOUND, (topic, q, off, g.status)
        out.extend(g.messages)
        off = g.next_begin_offset
    return out


def check_sends(s: MessageStore, acked: dict) -> None:
    got = {}
    for q in range(BW.QUEUES):
        if s.consume_queue(BW.SEND_TOPIC, q) is not None:
            got.update({(BW.SEND_TOPIC, q, m.queue_offset): BW.sha1(m.body) for m in read_queue(s, BW.SEND_TOPIC, q)})
    for k, h in acked.items():
        assert got.get(k) == h, f"acknowledged send {k} lost or changed after the kill"


def by_key(s: MessageStore, topic: str) -> dict[str, list]:
    out = defaultdict(list)
    for q in range(BW.QUEUES):
        if s.consume_queue(topic, q) is not None:
            for m in read_queue(s, topic, q):
                out[m.body.split(b"|", 1)[0].decode()].append(m)
    return out


def unresolved_halves(s: MessageStore) -> list[int]:
    """Half messages (queue offsets) without an op record."""
    if s.consume_queue(HALF, 0) is None:
        return []
    done = set()
    if s.consume_queue(OP, 0) is not None:
        for m in read_queue(s, OP, 0):
            done.update(int(x) for x in m.body.decode().split(",") if x)
    return [m.queue_offset for m in read_queue(s, HALF, 0) if m.queue_offset not in done]


def settled(root: str, rec: Record, cpp: Proc) -> bool:
    """Every acknowledged delayed message delivered (and consumed by the C++ push consumer) and no half message
    left pending (a read-only look at the live store)."""
    seen = rec.cpp_keys | {ln.split()[1] for ln in cpp.complete_lines() if ln.startswith("got ")}
    if not set(rec.delays) <= seen:
        return False
    with MessageStore.open(root, StoreConfig(), read_only=True) as s:
        delivered = by_key(s, BW.DELAY_TOPIC)
        return all(k in delivered for k in rec.delays) and not unresolved_halves(s)


def check_transactions(s: MessageStore, rec: Record) -> dict:
    delivered = by_key(s, BW.TX_TOPIC)
    seen = {"checked after a restart": 0, "delivered twice": 0}
    for key, copies in delivered.items():
        assert BW.check_decision(key) == "C", f"transaction {key} was rolled back, yet delivered"
        assert len(copies) <= 2, f"transaction {key} delivered {len(copies)} times"
    for key in rec.halves:
        n = len(delivered.get(key, ()))
        if key in rec.ends:
            want = 1 if rec.ends[key] == "C" else 0
            assert n == want, f"transaction {key} ended {rec.ends[key]} (answered), delivered {n} times"
        elif BW.check_decision(key) == "C":
            assert n in (1, 2), f"transaction {key}, checked back as committed, delivered {n} times"
        if key.endswith("-P"):
            assert [r for r in rec.checked[key] if r >= rec.half_round[key]], f"pending {key} never checked back"
        seen["checked after a restart"] += any(r > rec.half_round[key] for r in rec.checked[key])
        seen["delivered twice"] += n == 2
    assert not unresolved_halves(s), "half messages left unresolved"
    return seen


def check_delays(s: MessageStore, rec: Record) -> int:
    """Every acknowledged delayed message delivered, never early. A copy followed by another is one whose delivery
    round had not been recorded when serve was killed: the next copy comes after the restart, the copy is one of
    the last deliveries before that kill (those of one round: no delivery recorded before the kill may come after
    it in the log), and within RocketMQ's DELAY_WINDOW_S of it."""
    delivered = by_key(s, BW.DELAY_TOPIC)
    kills = sorted(rec.kills_wall_ms)

    def life(m) -> int:  # which life of serve stored it: the number of kills before it
        return bisect.bisect_left(kills, m.store_timestamp)

    for key, level in rec.delays.items():
        assert delivered.get(key), f"delayed {key} (level {level}) acknowledged, never delivered"
        for m in delivered[key]:
            due = m.born_timestamp + BW.DELAY_LEVELS_S[level - 1] * 1000
            assert m.store_timestamp >= due, f"delayed {key} delivered {due - m.store_timestamp} ms early"
    again = defaultdict(list)  # life -> physical offsets of its copies delivered again later
    kept = defaultdict(list)  # life -> physical offsets of its copies not delivered again
    for key, copies in delivered.items():
        copies = sorted(copies, key=lambda m: m.physical_offset)
        for m, later in zip(copies, copies[1:] + [None]):
            if later is None:
                kept[life(m)].append(m.physical_offset)
                continue
            n = life(m)
            assert n < len(kills) and life(later) > n, f"delayed {key} delivered twice by one life of serve"
            assert m.store_timestamp >= kills[n] - DELAY_WINDOW_S * 1000, (
                f"delayed {key} delivered {kills[n] - m.store_timestamp} ms before a kill, and again after it"
            )
            again[n].append(m.physical_offset)
    for n, offsets in again.items():
        assert min(offsets) > max(kept[n], default=-1), (
            f"deliveries before kill {n + 1} came again after it while later ones did not: not one round's"
        )
    return sum(map(len, again.values()))


def check_cpp_deliveries(rec: Record) -> int:
    """The C++ push consumer's deliveries: none twice to one consumer process; one delivered again after a restart
    only if its earlier delivery came in the last CPP_WINDOW_S before the kill that ended that process's round."""
    again = 0
    for (q, off), deliveries in rec.cpp.items():
        rounds = [r for r, _t in deliveries]
        assert len(set(rounds)) == len(rounds), f"{BW.DELAY_TOPIC}/{q}@{off} delivered twice to one C++ consumer"
        for (r1, t1), (_r2, _t2) in zip(deliveries, deliveries[1:]):
            kill = rec.kills_mono[r1 - 1]
            assert t1 >= kill - CPP_WINDOW_S, (
                f"{BW.DELAY_TOPIC}/{q}@{off} delivered to the C++ consumer {kill - t1:.1f} s before kill {r1}, and "
                f"again after the restart (allowed: {CPP_WINDOW_S} s)"
            )
            again += 1
    return again


@pytest.fixture(autouse=True)
def no_child_left():
    """A failed assertion leaves no serve or client process of this test running."""
    yield
    while Proc.live:
        p = Proc.live.pop()
        if p.p.poll() is None:
            p.kill()


@pytest.fixture(scope="module")
def cpp_python():
    """The C++-core client's own virtual environment (tests/remoting/conftest.py makes the same one): made and
    pip-installed on first use; the test fails when it cannot be made (PyPI is reachable where the tests run)."""
    venv = os.environ.get("ROCKETSTORE_CPP_CLIENT_VENV", CPP_VENV)
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        r = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"cannot make a venv for the C++-core client: {r.stderr[-300:]}"
    probe = [python, "-c", "import rocketmq.client"]
    if subprocess.run(probe, capture_output=True, timeout=60).returncode != 0:
        r = subprocess.run([python, "-m", "pip", "install", "-q", "rocketmq==0.4.4"], capture_output=True, text=True,
                           timeout=600)  # fmt: skip
        assert r.returncode == 0, f"cannot install rocketmq==0.4.4: {r.stderr[-300:]}"
    return python


class Round:
    """One life of serve: serve, the Python clients, the C++ push consumer; on the name server and broker ports
    given (those of the serve killed before it), else on free ones."""

    def __init__(self, root, conf, cpp_python, home, seed: int, mode: str, ports: tuple[int, int] | None = None):
        namesrv, self.port = ports or (free_port(), free_port())
        self.ports = (namesrv, self.port)
        self.serve = start_serve(root, conf, namesrv, self.port)
        self.clients = start_clients(self.port, seed, mode)
        args = [cpp_python, CPP_CHILD, f"127.0.0.1:{namesrv}", CPP_GROUP, BW.DELAY_TOPIC]
        self.cpp = Proc(args, env=dict(os.environ, HOME=home))
        self.cpp.wait_line("started")

    def crash(self) -> tuple[float, int]:
        """SIGKILL of serve, then of the clients once they saw it (nothing can be acknowledged any more). The
        monotonic time just before the kill (what the clients' times are compared with), the wall-clock time just
        after it (everything this serve stored is older)."""
        t_kill = time.monotonic()
        self.serve.kill()
        wall = int(time.time() * 1000)
        time.sleep(0.3)
        for p in (self.clients, self.cpp):
            err = p.kill()
            assert p.p.returncode == -signal.SIGKILL, f"a client stopped by itself: {err[-3000:]}"
        return t_kill, wall

    def file_cpp(self, rec: Record, rnd: int) -> None:
        for ln in self.cpp.complete_lines():
            if ln.startswith("got "):
                _, key, q, off, t = ln.split()
                rec.cpp[(int(q), int(off))].append((rnd, float(t)))
                rec.cpp_keys.add(key)


def test_kills_of_serve_lose_nothing_the_remoting_clients_were_told(tmp_path, cpp_python):
    root = str(tmp_path / "store")
    conf = str(tmp_path / "broker.conf")
    with open(conf, "w") as f:
        f.write(BW.BROKER_CONF)
    home = str(tmp_path / "cpp-home")
    os.mkdir(home)
    rng = random.Random(SEED)
    rec = Record()
    previous, ports, reused = None, None, 0
    for rnd in range(1, KILLS + 1):
        if rnd > 1 and rng.random() < 0.5:
            rec.kills_wall_ms.append(kill_while_starting(root, conf, rng))
        same_ports = ports if rng.random() < 0.5 else None  # the clients come back to the same address, or not
        r = Round(root, conf, cpp_python, home, SEED * 100 + rnd, "work", same_ports)
        ports, reused = r.ports, reused + (same_ports is not None)
        time.sleep(rng.uniform(0.3, 5.0))
        t_kill, wall = r.crash()
        rec.kills_mono.append(t_kill)
        rec.kills_wall_ms.append(wall)
        lines = r.clients.complete_lines()
        offsets = rec.add(lines, rnd)
        r.file_cpp(rec, rnd)
        if previous is not None:
            check_offsets(previous[0], offsets, previous[1], rec)
        previous = (offsets, t_kill)
        check_got(lines, rec.acked)
        with MessageStore.open(root, StoreConfig(), read_only=True) as s:  # recovery in memory, nothing written
            check_sends(s, rec.acked)
    assert len(rec.acked) > 200 and len(rec.delays) > 20 and len(rec.halves) > 20, "too little acknowledged"

    # the last restart: checks come back to a producer of the group, delayed messages fall due and reach the C++
    # push consumer
    r = Round(root, conf, cpp_python, home, SEED * 100 + KILLS + 1, "drain", ports)
    try:
        deadline = time.monotonic() + SETTLE_S
        while not settled(root, rec, r.cpp):
            assert time.monotonic() < deadline, "delayed messages or pending transactions not settled in time"
            time.sleep(1.0)
    finally:
        r.serve.kill(signal.SIGTERM)
        assert r.serve.p.returncode == 0, r.serve.complete_lines()[-5:]
        r.clients.kill()
        r.cpp.kill()
    check_offsets(previous[0], rec.add(r.clients.complete_lines(), KILLS + 1), previous[1], rec)
    r.file_cpp(rec, KILLS + 1)
    cpp_again = check_cpp_deliveries(rec)

    with MessageStore.open(root, StoreConfig(), read_only=True) as s:
        check_sends(s, rec.acked)
        tx = check_transactions(s, rec)
        delays_twice = check_delays(s, rec)
    v = subprocess.run([sys.executable, "-m", "rocketstore.cli", "verify", root, "-c", conf], capture_output=True,
                       text=True)  # fmt: skip
    assert v.returncode == 0, v.stdout[-3000:] + v.stderr[-2000:]
    print(
        f"{len(rec.acked)} sends, {len(rec.delays)} delayed, {len(rec.halves)} transactions acknowledged; "
        f"{rec.redelivered} messages within the offsets' window pulled again, {rec.floors} offsets held to a "
        f"commit acknowledged before the window; transactions {tx}; "
        f"{delays_twice} delayed delivered again; {cpp_again} delivered again to the C++ push consumer; "
        f"{reused} restarts on the same ports"
    )
