"""A cluster: rocketstore's name server alone (python -m rocketstore.remoting.namesrv) and three `rocketstore serve`
brokers (each its own store and brokerName, --no-namesrv, registering with --namesrv-addr), driven by RocketMQ
5.3.3's own Java client and mqadmin (java/ClusterClients.java, one JVM): updateTopic -c puts the topic on every
broker, the producer spreads its sends over all three, a push consumer group of two splits the twelve queues, a
lite pull consumer reads everything. Then one broker is stopped (SIGTERM) and another killed (SIGKILL), each
started again afterwards: the route drops the broker and takes it back, the sends go to the brokers there are,
the consumers get every message sent. The program asks for each stop and start over stdin/stdout. And two
rocketstore brokers under RocketMQ's own name server (NamesrvStartup, from the jars' broker classpath): it takes
their registrations, and the same client sends and consumes through it.

Checked against what the producer was told (each send's broker) and what each broker's store holds afterwards
(opened read-only once every server stopped). Skipped, saying why, without the RocketMQ jars or a JDK."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from serve_harness import JAVA_DIR, JVM_OPTIONS, Serve, events_of, mqadmin_out, of

from rocketstore import MessageStore
from rocketstore.config.store_config import SMALL_FILE_SIZES
from rocketstore.broker.address import free_port_pair

CLUSTER = "JavaCluster"
BROKERS = ["broker-a", "broker-b", "broker-c"]  # broker-c is stopped and restarted, broker-b killed and restarted
TOPIC = "JCluster"
QUEUES = 4
STEPS = {"all": 60, "stopped": 30, "restarted": 36, "killed": 30, "recovered": 36}


class NameServerAlone:
    """rocketstore's name server in a process of its own."""

    def __init__(self, root: Path):
        self.port = free_port_pair()
        self.log = open(root / "namesrv.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rocketstore.remoting.namesrv", "--listen", f"127.0.0.1:{self.port}"],
            stdout=subprocess.PIPE, stderr=self.log, text=True,
        )  # fmt: skip
        line = self.proc.stdout.readline()
        assert line.startswith("name server listening on"), line

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(30)
        self.log.close()


class ClusterBroker(Serve):
    """One broker of CLUSTER: its own store and brokerName, no name server of its own, registered with `namesrv`."""

    def __init__(self, root: Path, name: str, namesrv: str):
        root.mkdir()
        self.root, self.proc, self.lines = root, None, []
        self.name, self.namesrv_addr, self.broker_port = name, namesrv, free_port_pair()
        # small files: five stores of RocketMQ's default sizes take gigabytes of the shared disk
        small = "".join(f"{k}={v}\n" for k, v in SMALL_FILE_SIZES.items())
        (root / "broker.conf").write_text(f"brokerClusterName={CLUSTER}\nbrokerName={name}\n{small}")

    def command(self) -> list[str]:
        return [sys.executable, "-m", "rocketstore.cli", "serve", str(self.root / "store"), "-c",
                str(self.root / "broker.conf"), "--no-grpc", "--no-namesrv", "--remoting", self.broker,
                "--namesrv-addr", self.namesrv_addr, "--log-level", "INFO"]  # fmt: skip

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(60)


class RocketMQNameServer:
    """RocketMQ 5.3.3's own NamesrvStartup in a JVM (as ../shared/java's start-broker.sh starts it)."""

    def __init__(self, root: Path):
        cp = subprocess.run(["bash", str(JAVA_DIR / "classpath.sh"), "broker"], capture_output=True, text=True)
        missing = [p for p in cp.stdout.strip().split(":") if not Path(p).exists()]
        if cp.returncode != 0 or missing:
            pytest.skip(f"RocketMQ's name server cannot run here: {cp.stderr.strip() or missing[:3]}")
        self.port, home = free_port_pair(), root / "rmq-home"
        (home / "conf").mkdir(parents=True)
        (root / "namesrv.conf").write_text(
            f"listenPort={self.port}\nbindAddress=127.0.0.1\nrocketmqHome={home}\n"
            f"kvConfigPath={home}/namesrv/kvConfig.json\nconfigStorePath={home}/namesrv/namesrv.properties\n"
        )
        self.log_path = root / "rocketmq-namesrv.log"
        self.proc = subprocess.Popen(
            ["java", *JVM_OPTIONS, "-Dtls.server.mode=disabled", f"-Drocketmq.home.dir={home}", f"-Duser.home={home}",
             "-cp", cp.stdout.strip(), "rmqharness.BrokerMain", "namesrv", "-c", str(root / "namesrv.conf")],
            stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT, cwd=root,
            env={**os.environ, "ROCKETMQ_HOME": str(home)},
        )  # fmt: skip
        end = time.monotonic() + 60
        while "The Name Server boot success" not in self.log_path.read_text():
            assert self.proc.poll() is None and time.monotonic() < end, self.log_path.read_text()[-3000:]
            time.sleep(0.2)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)


def drive(classpath: str, home: Path, namesrv: str, brokers: dict[str, ClusterBroker], mode: str) -> list[dict]:
    """ClusterClients run once in `mode`; its requests to stop, kill and start brokers carried out as they come."""
    proc = subprocess.Popen(
        ["java", *JVM_OPTIONS, f"-Duser.home={home}", f"-Djava.io.tmpdir={home}", "-cp", classpath,
         "ClusterClients", namesrv, CLUSTER, mode, *brokers],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(home / "java.stderr", "w"), text=True, cwd=home,
    )  # fmt: skip
    watchdog = threading.Timer(600, proc.kill)  # a hung run fails instead of hanging the suite
    watchdog.start()
    out = []
    try:
        for line in proc.stdout:
            out.append(line)
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if event["scenario"] == "control":
                broker = brokers[event["broker"]]
                {"stop": broker.stop, "kill": broker.kill, "start": broker.start}[event["action"]]()
                proc.stdin.write("done\n")
                proc.stdin.flush()
        proc.wait(60)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    (home / "java.stdout").write_text("".join(out))
    return events_of(subprocess.CompletedProcess(proc.args, proc.returncode, "".join(out), ""))


def stored_keys(path: Path) -> list[str]:
    """The KEYS of every message of TOPIC in a broker's store."""
    keys = []
    with MessageStore.open(str(path), read_only=True) as s:
        for q in range(QUEUES):
            offset = 0
            while True:
                r = s.get("test", TOPIC, q, offset, 64)
                if not r.messages:
                    break
                keys += [m.properties.get("KEYS") for m in r.messages]
                offset = r.next_begin_offset
    return keys


@pytest.fixture(scope="module")
def cluster_run(java_classpath, tmp_path_factory):
    """(the program's events, each broker's stored keys, each broker's log, each broker's address)"""
    root = tmp_path_factory.mktemp("java-cluster")
    home = root / "home"
    home.mkdir()
    ns = NameServerAlone(root)
    brokers = {name: ClusterBroker(root / name, name, ns.address) for name in BROKERS}
    try:
        for b in brokers.values():
            b.start()
        events = drive(java_classpath, home, ns.address, brokers, "full")
    finally:
        for b in brokers.values():
            if b.proc is not None and b.proc.poll() is None:
                b.stop()
        ns.stop()
    logs = {name: "".join(b.lines) for name, b in brokers.items()}
    for name, log in logs.items():
        (root / f"{name}.log").write_text(log)
    addresses = {name: b.broker for name, b in brokers.items()}
    return events, {name: stored_keys(root / name / "store") for name in BROKERS}, logs, addresses


def sent(events, step) -> dict[str, str]:
    """key -> the broker the producer was told it went to, every send SEND_OK."""
    (e,) = of(events, step, "sent")
    assert set(e["status"].values()) == {"SEND_OK"}
    assert len(e["brokers"]) == STEPS[step]
    return e["brokers"]


def test_update_topic_on_the_cluster_reaches_every_broker(cluster_run):
    events, _, _, addresses = cluster_run
    of(events, "cluster")  # no error
    out = mqadmin_out(events, "updateTopic")
    assert sorted(re.findall(r"create topic to (\S+) success", out)) == sorted(addresses.values())
    (route,) = of(events, "all", "route")
    assert route["brokers"] == BROKERS and route["producer"] == BROKERS


def test_cluster_list_names_every_broker(cluster_run):
    events, _, _, _ = cluster_run
    for run in ("clusterList", "clusterList.end"):
        out = mqadmin_out(events, run)
        rows = [line.split() for line in out.splitlines()[1:] if line.strip()]
        assert sorted((r[0], r[1]) for r in rows) == [(CLUSTER, b) for b in BROKERS], out


def test_sends_spread_over_all_brokers_and_land_in_their_stores(cluster_run):
    events, stores, _, _ = cluster_run
    everything = {}
    for step in STEPS:
        everything.update(sent(events, step))
    first = Counter(sent(events, "all").values())
    assert first == {b: 60 // len(BROKERS) for b in BROKERS}  # round robin over 3 x 4 queues
    for broker in BROKERS:
        expected = sorted(k for k, b in everything.items() if b == broker)
        assert sorted(stores[broker]) == expected  # each message once, in the store the producer was told


def test_the_push_group_splits_the_queues_of_the_brokers_there_are(cluster_run):
    events, _, _, _ = cluster_run
    for step, gone in (("all", None), ("stopped", "broker-c"), ("restarted", None), ("killed", "broker-b"),
                       ("recovered", None)):  # fmt: skip
        brokers = [b for b in BROKERS if b != gone]
        (a,) = of(events, step, "assigned")
        assert a["settled"], a
        one, two = set(a["push-1"]), set(a["push-2"])
        assert not one & two and len(one) == len(two) == QUEUES * len(brokers) // 2, a
        assert one | two == {f"{b}/{q}" for b in brokers for q in range(QUEUES)}


def test_consumers_receive_every_message_through_every_change(cluster_run):
    events, _, _, _ = cluster_run
    total = 0
    for step, n in STEPS.items():
        total += n
        (r,) = of(events, step, "received")
        assert r["sent"] == total
        assert r["push_missing"] == [] and r["lite_missing"] == [], r


def test_a_stopped_or_killed_broker_leaves_the_routes_and_sends_go_to_the_others(cluster_run):
    events, _, _, _ = cluster_run
    for step, gone in (("stopped", "broker-c"), ("killed", "broker-b")):
        (route,) = of(events, step, "route")
        others = [b for b in BROKERS if b != gone]
        assert route["brokers"] == others and route["producer"] == others, route
        assert set(sent(events, step).values()) == set(others)


def test_a_restarted_broker_rejoins(cluster_run):
    events, _, logs, _ = cluster_run
    for step in ("restarted", "recovered"):
        (route,) = of(events, step, "route")
        assert route["brokers"] == BROKERS and route["producer"] == BROKERS, route
        assert Counter(sent(events, step).values()) == {b: 36 // len(BROKERS) for b in BROKERS}
    for name in ("broker-b", "broker-c"):
        assert logs[name].count("rocketstore serve: store") == 2  # started twice


def test_the_brokers_logged_no_failure(cluster_run):
    _, _, logs, _ = cluster_run
    for name, log in logs.items():
        assert "Traceback" not in log and " ERROR " not in log and "not supported" not in log, name


# ---------------------------------------------------------------------------------------------- RocketMQ's namesrv
RMQ_BROKERS = ["broker-a", "broker-b"]


@pytest.fixture(scope="module")
def rocketmq_namesrv_run(java_classpath, tmp_path_factory):
    """Two rocketstore brokers registered with RocketMQ's own name server, ClusterClients' "sends" through it:
    (events, each broker's stored keys)."""
    root = tmp_path_factory.mktemp("java-rocketmq-namesrv")
    home = root / "home"
    home.mkdir()
    ns = RocketMQNameServer(root)
    brokers = {name: ClusterBroker(root / name, name, ns.address) for name in RMQ_BROKERS}
    try:
        for b in brokers.values():
            b.start()
        events = drive(java_classpath, home, ns.address, brokers, "sends")
    finally:
        for b in brokers.values():
            if b.proc is not None and b.proc.poll() is None:
                b.stop()
        ns.stop()
    return events, {name: stored_keys(root / name / "store") for name in RMQ_BROKERS}


def test_rocketmq_name_server_takes_rocketstore_brokers(rocketmq_namesrv_run):
    events, stores = rocketmq_namesrv_run
    of(events, "cluster")
    (route,) = of(events, "all", "route")
    assert route["brokers"] == RMQ_BROKERS and route["producer"] == RMQ_BROKERS
    out = mqadmin_out(events, "clusterList")
    rows = [line.split() for line in out.splitlines()[1:] if line.strip()]
    assert sorted((r[0], r[1]) for r in rows) == [(CLUSTER, b) for b in RMQ_BROKERS], out
    (e,) = of(events, "all", "sent")
    assert set(e["status"].values()) == {"SEND_OK"} and len(e["brokers"]) == 5 * QUEUES * len(RMQ_BROKERS)
    for broker in RMQ_BROKERS:
        assert sorted(stores[broker]) == sorted(k for k, b in e["brokers"].items() if b == broker)
        assert stores[broker]
    (r,) = of(events, "all", "received")
    assert r["push_missing"] == [] and r["lite_missing"] == [], r
    (a,) = of(events, "all", "assigned")
    assert a["settled"] and set(a["push-1"]) | set(a["push-2"]) == {f"{b}/{q}" for b in RMQ_BROKERS for q in range(4)}
