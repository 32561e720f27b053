"""A real `rocketstore serve` (remoting on loopback ports, no gRPC) and RocketMQ 5.3.3's Java test programs
(java/*.java, which share java/Harness.java) run against it: what test_java_client.py, test_java_reset.py,
test_java_stats.py and test_java_cluster.py share. The programs are compiled once per session (conftest.py's java_classpath); each prints
JSON lines ({"scenario": ..., "event": ...}), read here into events.

Skipped, saying why, without the RocketMQ jars beside the repository (../shared/java/rocketmq-5.3.3, see its
README) or without a JDK (javac)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rocketstore.broker.address import free_port_pair

REPO = Path(__file__).resolve().parents[2]
JAVA_DIR = REPO.parent / "shared" / "java" / "rocketmq-5.3.3"
SOURCES = Path(__file__).resolve().parent / "java"
JVM_OPTIONS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
BROKER_CONF = "transactionTimeOut=1000\ntransactionCheckInterval=1000\n"  # check-backs after 1 s, not 6 + 30


# ---------------------------------------------------------------------------------------------- the JVM side
def classpath() -> str:
    """The RocketMQ client's and tools' jars (skips when they or a JDK are not here)."""
    if not JAVA_DIR.is_dir():
        pytest.skip(f"no RocketMQ Java client here: {JAVA_DIR} is absent (a bare clone; see shared/java's README)")
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool} on PATH (a JDK 17: openjdk-17-jdk-headless, see {JAVA_DIR / 'README.md'})")
    cp = subprocess.run(["bash", str(JAVA_DIR / "classpath.sh"), "client"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    missing = [p for p in cp.stdout.strip().split(":") if not os.path.exists(p)]
    if missing:
        pytest.skip(f"the Debian packages of {JAVA_DIR / 'README.md'} are not installed: {', '.join(missing[:3])} ...")
    return cp.stdout.strip()


def compile_programs(out: Path) -> str:
    """Every java/*.java compiled into `out`: the classpath to run them with."""
    cp = classpath()
    sources = sorted(str(p) for p in SOURCES.glob("*.java"))
    r = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", cp, "-d", str(out), *sources],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, f"javac failed:\n{r.stderr}"
    return f"{cp}:{out}"


class JavaTimeout(AssertionError):
    """A Java program still running after its time: the message holds its last events and its threads' stacks."""


def run_java(classpath: str, home: Path, main: str, *args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    """One JVM running `main` with args, its user.home, tmpdir and working directory `home`. One that has not ended
    after `timeout` seconds raises JavaTimeout with its thread dump (SIGQUIT) and the last lines it printed."""
    cmd = ["java", *JVM_OPTIONS, f"-Duser.home={home}", f"-Djava.io.tmpdir={home}", "-cp", classpath, main, *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=home)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGQUIT)  # the JVM prints every thread's stack to stdout and goes on
        time.sleep(3)
        proc.kill()
        out, err = proc.communicate()
        (home / "java.timeout.out").write_text(out + "\n--- stderr ---\n" + err)
        events = [line for line in out.splitlines() if EVENT in line]
        threads = [t for t in out.split("\n\n") if t.startswith(('"main"', '"lane-'))]  # the program's own
        raise JavaTimeout(f"{main} {' '.join(args)} still running after {timeout} s (all it printed: "
                          f"{home / 'java.timeout.out'}); its last events:\n" + "\n".join(events[-30:])
                          + "\nits threads:\n" + "\n\n".join(threads))  # fmt: skip
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


EVENT = '{"scenario":'


def events_of(r: subprocess.CompletedProcess) -> list[dict]:
    """The JSON lines of a program that exited 0 and printed its last line, {"scenario": "main", "event": "exit"}."""
    assert r.returncode == 0, f"java exited {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    # a line may start with what a client's own thread printed without a newline ("broker export done.")
    events = [json.loads(line[line.index(EVENT) :]) for line in r.stdout.splitlines() if EVENT in line]
    assert events and events[-1] == {"scenario": "main", "event": "exit"}, r.stdout[-3000:]
    return events


def of(events, scenario, event=None):
    """The scenario's events (of one kind), none of its events an error."""
    errors = [e for e in events if e["scenario"] == scenario and e["event"] == "error"]
    assert not errors, "\n".join(e["trace"] for e in errors)
    return [e for e in events if e["scenario"] == scenario and (event is None or e["event"] == event)]


def mqadmin_out(events, name) -> str:
    """The stdout of the one mqadmin run named `name`, which printed no exception and no failure."""
    runs = [e for e in of(events, "mqadmin") if e["name"] == name]
    assert len(runs) == 1, name
    assert "Exception" not in runs[0]["stderr"] and "failed" not in runs[0]["stdout"], runs[0]
    return runs[0]["stdout"]


# ---------------------------------------------------------------------------------------------- the server


class Serve:
    def __init__(self, root: Path, conf: str = ""):
        self.root, self.proc, self.lines = root, None, []
        self.ns_port, self.broker_port = free_port_pair(), free_port_pair()
        (root / "broker.conf").write_text(BROKER_CONF + conf)

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "rocketstore.cli", "serve", str(self.root / "store"), "-c",
                str(self.root / "broker.conf"), "--no-grpc", "--namesrv", self.namesrv, "--remoting",
                self.broker, "--log-level", "INFO"]  # fmt: skip

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )  # fmt: skip
        ready = threading.Event()

        def pump(proc):
            for line in proc.stdout:
                self.lines.append(line)
                if "rocketstore serve: store" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=pump, args=(self.proc,), daemon=True).start()
        assert ready.wait(60) and self.proc.poll() is None, "".join(self.lines)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(60) == 0, "".join(self.lines[-50:])


def run_once(root: Path, classpath: str, main: str, *args: str, conf: str = "") -> tuple[list[dict], str]:
    """`main` run once (NAMESRV, then args) against a server on root/store (`conf`: more broker.conf lines),
    stopped afterwards: (its events, the server's log). The log goes to root/serve.log, the JVM's stderr to
    root/java.stderr."""
    home = root / "home"
    home.mkdir()
    serve = Serve(root, conf)
    serve.start()
    try:
        r = run_java(classpath, home, main, serve.namesrv, *args)
    finally:
        serve.stop()
    log = "".join(serve.lines)
    (root / "serve.log").write_text(log)
    (root / "java.stderr").write_text(r.stderr)
    return events_of(r), log


def queue_messages(s, topics, queues: int = 18) -> dict:
    """Every message of the topics in an open store, by (topic, queue id): queues with none left out."""
    messages = {}
    for topic in topics:
        for q in range(queues):
            got, offset = [], s.min_offset(topic, q)
            for _ in range(100):
                r = s.get("test", topic, q, offset, 64)
                if not r.messages:
                    break
                got += r.messages
                offset = r.next_begin_offset
            if got:
                messages[(topic, q)] = got
    return messages
