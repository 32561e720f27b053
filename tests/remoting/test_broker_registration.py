"""Brokers registering with a remote name server over remoting (remoting/broker/registration.py), as RocketMQ's
BrokerOuterAPI.registerBrokerAll does: what REGISTER_BROKER carries (read back off the wire), routes naming
several brokers of one cluster, a topic change registered at once, UNREGISTER_BROKER at close, a restarted or
late name server learning the broker again on the next period (registerNameServerPeriod, short here)."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import zlib

import pytest
from broker_fixtures import open_store

from test_serve_remoting_cli import serve

from rocketstore.config.store_config import SMALL_FILE_SIZES
from rocketstore.remoting.broker import Broker, BrokerSettings
from rocketstore.remoting.broker.registration import parse_namesrv_addr, period_seconds
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.namesrv import NameServer
from rocketstore.broker.address import free_port_pair

CLUSTER = "Pond"


def settings(name: str, **more) -> BrokerSettings:
    return BrokerSettings(brokerClusterName=CLUSTER, brokerName=name, **more)


async def until(check, what: str, limit_s: float = 10.0):
    """check() once it is truthy (polled; bounded so a failure is an assertion, not a hang)."""
    end = time.monotonic() + limit_s
    while not (value := check()):
        assert time.monotonic() < end, f"never happened: {what}"
        await asyncio.sleep(0.05)
    return value


def route_brokers(ns: NameServer, topic: str) -> set[str]:
    route = ns.routes.route(topic)
    return set() if route is None else {q.broker_name for q in route.queue_datas}


def test_register_broker_is_what_register_broker_all_sends(tmp_path):
    store = open_store(tmp_path)
    seen = []

    async def main():
        ns = NameServer()
        ns.server.on_request = lambda cmd, conn: seen.append(cmd)
        port = await ns.start("127.0.0.1", 0)
        broker = Broker(store, settings("broker-a"), namesrv_addresses=[("127.0.0.1", port)])
        broker_port = await broker.start("127.0.0.1", 0)
        broker.topics.create("Orders", 3)
        await until(lambda: route_brokers(ns, "Orders"), "Orders registered")
        await broker.close()
        await ns.close()
        return broker_port

    broker_port = asyncio.run(main())
    store.close()
    registers = [c for c in seen if c.code == RC.REGISTER_BROKER]
    last = registers[-1]
    addr = f"127.0.0.1:{broker_port}"
    assert last.ext_fields == {
        "brokerName": "broker-a", "brokerAddr": addr, "clusterName": CLUSTER, "haServerAddr": f"127.0.0.1:{broker_port + 1}",
        "brokerId": "0", "enableActingMaster": "false", "compressed": "false",
        "bodyCrc32": str(zlib.crc32(last.body) & 0x7FFFFFFF),
    }  # fmt: skip
    assert last.version == 479  # MQVersion.CURRENT_VERSION of 5.3.3: the namesrv reads a RegisterBrokerBody
    body = json.loads(last.body)
    assert body["filterServerList"] == []
    wrapper = body["topicConfigSerializeWrapper"]
    assert set(wrapper) == {"dataVersion", "mappingDataVersion", "topicConfigTable", "topicQueueMappingDetailMap",
                            "topicQueueMappingInfoMap"}  # fmt: skip
    assert wrapper["topicConfigTable"]["Orders"] == {
        "attributes": {}, "order": False, "perm": 6, "readQueueNums": 3, "topicFilterType": "SINGLE_TAG",
        "topicName": "Orders", "topicSysFlag": 0, "writeQueueNums": 3,
    }  # fmt: skip
    assert {"TBW102", CLUSTER, "broker-a"} <= wrapper["topicConfigTable"].keys()
    # the topic created changed the data version the name server compares
    first = json.loads(registers[0].body)["topicConfigSerializeWrapper"]["dataVersion"]
    assert wrapper["dataVersion"]["counter"] > first["counter"]
    unregisters = [c for c in seen if c.code == RC.UNREGISTER_BROKER]
    assert [u.ext_fields for u in unregisters] == [
        {"brokerName": "broker-a", "brokerAddr": addr, "clusterName": CLUSTER, "brokerId": "0"}
    ]


def test_acting_master_sends_its_heartbeat_timeout(tmp_path):
    """heartbeatTimeoutMillis goes out only with enableSlaveActingMaster (doRegisterBrokerAll); the name server
    expires the broker after it."""
    store = open_store(tmp_path)
    seen = []

    async def main():
        ns = NameServer()
        ns.server.on_request = lambda cmd, conn: seen.append(cmd)
        port = await ns.start("127.0.0.1", 0)
        s = settings("broker-a", enableSlaveActingMaster=True, brokerNotActiveTimeoutMillis=4000)
        broker = Broker(store, s, namesrv_addresses=[("127.0.0.1", port)])
        await broker.start("127.0.0.1", 0)
        live = dict(ns.routes.live)
        await broker.close()
        await ns.close()
        return live

    live = asyncio.run(main())
    store.close()
    register = next(c for c in seen if c.code == RC.REGISTER_BROKER)
    assert register.ext_fields["heartbeatTimeoutMillis"] == "4000"
    assert register.ext_fields["enableActingMaster"] == "true"
    assert [v.timeout_ms for v in live.values()] == [4000]


def test_brokers_of_a_cluster_share_a_route_and_leave_it_at_close(tmp_path):
    stores = {n: open_store(tmp_path / n) for n in ("broker-a", "broker-b", "broker-c")}

    async def main():
        ns = NameServer()
        port = await ns.start("127.0.0.1", 0)
        brokers = {}
        for name, store in stores.items():
            brokers[name] = Broker(store, settings(name), namesrv_addresses=[("127.0.0.1", port)])
            await brokers[name].start("127.0.0.1", 0)
        for b in brokers.values():
            b.topics.create("Shared", 4)
        await until(lambda: route_brokers(ns, "Shared") == set(stores), "Shared on every broker")
        route = ns.routes.route("Shared")
        addrs = {bd.broker_name: bd.broker_addrs for bd in route.broker_datas}
        clusters = {n: set(v) for n, v in ns.routes.clusters.items()}
        await brokers["broker-b"].close()
        after_close = route_brokers(ns, "Shared")
        for name in ("broker-a", "broker-c"):
            await brokers[name].close()
        left = ns.routes.route("Shared")
        await ns.close()
        return brokers, addrs, clusters, after_close, left

    brokers, addrs, clusters, after_close, left = asyncio.run(main())
    for s in stores.values():
        s.close()
    assert addrs == {n: {0: b.settings.address} for n, b in brokers.items()}
    assert clusters == {CLUSTER: set(stores)}
    assert after_close == {"broker-a", "broker-c"}  # UNREGISTER_BROKER at close: gone at once
    assert left is None


def test_a_restarted_name_server_learns_the_broker_again(tmp_path):
    store = open_store(tmp_path)

    async def main():
        ns = NameServer()
        port = await ns.start("127.0.0.1", 0)
        broker = Broker(store, settings("broker-a", registerNameServerPeriod=200),
                        namesrv_addresses=[("127.0.0.1", port)])  # fmt: skip
        await broker.start("127.0.0.1", 0)
        broker.topics.create("Kept", 2)
        await until(lambda: route_brokers(ns, "Kept"), "Kept registered")
        await ns.close()
        ns2 = NameServer()  # a new name server on the same address: empty routes
        await ns2.start("127.0.0.1", port)
        assert ns2.routes.route("Kept") is None
        await until(lambda: route_brokers(ns2, "Kept") == {"broker-a"}, "the broker registered again")
        await broker.close()
        await ns2.close()

    asyncio.run(main())
    store.close()


def test_a_name_server_down_at_start_does_not_stop_the_broker(tmp_path):
    """The first registrations fail (nothing listens): the broker serves anyway and registers once the name
    server is up."""
    store = open_store(tmp_path)

    async def main():
        probe = NameServer()
        port = await probe.start("127.0.0.1", 0)  # a port that was free, closed again
        await probe.close()
        broker = Broker(store, settings("broker-a", registerNameServerPeriod=200),
                        namesrv_addresses=[("127.0.0.1", port)])  # fmt: skip
        await broker.start("127.0.0.1", 0)
        broker.topics.create("Late", 1)
        ns = NameServer()
        await ns.start("127.0.0.1", port)
        await until(lambda: route_brokers(ns, "Late") == {"broker-a"}, "registered once the name server is up")
        await broker.close()
        await ns.close()

    asyncio.run(main())
    store.close()


def serve_broker(tmp_path, name: str, namesrv_port: int):
    """`rocketstore serve` as one broker of CLUSTER (broker.conf) registering with the name server at
    --namesrv-addr: (the process, its output lines, its broker address)."""
    root = tmp_path / name
    root.mkdir()
    small = "".join(f"{k}={v}\n" for k, v in SMALL_FILE_SIZES.items())  # not gigabytes of the shared disk
    (root / "broker.conf").write_text(f"brokerClusterName={CLUSTER}\nbrokerName={name}\n{small}")
    port = free_port_pair()
    proc, lines = serve(root, "-c", str(root / "broker.conf"), "--no-grpc", "--no-namesrv", "--remoting",
                        f"127.0.0.1:{port}", "--namesrv-addr", f"127.0.0.1:{namesrv_port}")  # fmt: skip
    assert proc.poll() is None, "".join(lines)
    return proc, lines, f"127.0.0.1:{port}"


def test_serve_brokers_register_and_leave_when_stopped_or_killed(tmp_path, loop_thread):
    """Two `rocketstore serve` brokers with --namesrv-addr: both in the cluster's route; one stopped (SIGTERM:
    UNREGISTER_BROKER) is gone when it has exited, one killed (SIGKILL: its connection closes) soon after."""
    ns = NameServer()
    port = loop_thread.run(ns.start("127.0.0.1", 0))
    procs = {}
    try:
        for name in ("broker-a", "broker-b"):
            procs[name] = serve_broker(tmp_path, name, port)
        first = next(x for x in procs["broker-a"][1] if "rocketstore serve: store" in x)
        assert f"registering with the name server 127.0.0.1:{port} as broker-a of cluster {CLUSTER}" in first
        loop_thread.run(until(lambda: route_brokers(ns, CLUSTER) == set(procs), "both brokers registered"))
        addrs = {bd.broker_name: bd.broker_addrs for bd in ns.routes.route(CLUSTER).broker_datas}
        assert addrs == {n: {0: addr} for n, (_, _, addr) in procs.items()}

        proc = procs["broker-a"][0]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert route_brokers(ns, CLUSTER) == {"broker-b"}

        proc = procs["broker-b"][0]
        proc.kill()
        proc.wait(30)
        loop_thread.run(until(lambda: ns.routes.route(CLUSTER) is None, "the killed broker dropped"))
        assert ns.routes.clusters == {}
    finally:
        for proc, _, _ in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
        loop_thread.run(ns.close())


def test_namesrv_addr_errors_are_usage_errors(tmp_path):
    for args, problem in [
        (["--namesrv-addr", "nowhere"], "--namesrv-addr 'nowhere': expected HOST:PORT"),
        (["--namesrv-addr", "127.0.0.1:9876", "--no-remoting"], "it needs the broker"),
    ]:
        r = subprocess.run([sys.executable, "-m", "rocketstore.cli", "serve", str(tmp_path / "s"), "--no-grpc", *args],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
        assert r.returncode == 2 and problem in r.stderr, r.stderr
        assert not os.path.exists(tmp_path / "s")


def test_a_bad_namesrv_addr_in_broker_conf_is_an_error(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("namesrvAddr=10.0.0.1:9876;10.0.0.2\n")
    r = subprocess.run([sys.executable, "-m", "rocketstore.cli", "serve", str(tmp_path / "s"), "-c", str(conf)],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert f"{conf}: namesrvAddr '10.0.0.2': expected HOST:PORT" in r.stderr


@pytest.mark.parametrize(
    "text, problem",
    [("", "expected HOST:PORT"), (";", "expected HOST:PORT"), ("host", "expected HOST:PORT"),
     ("a:1;b:x", "expected HOST:PORT"), ("a:0", "give the name server's port"), ("a:70000", "out of range")],
)  # fmt: skip
def test_a_bad_namesrv_addr_is_named(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_namesrv_addr(text)


def test_namesrv_addr_lists_and_periods():
    assert parse_namesrv_addr("10.0.0.1:9876; 10.0.0.2:9877;") == [("10.0.0.1", 9876), ("10.0.0.2", 9877)]
    assert period_seconds(30_000) == 30.0
    assert period_seconds(600_000) == 60.0  # RocketMQ's cap
    assert period_seconds(1) == 0.1


def test_namesrv_addr_naming_the_built_in_name_server_is_left_out(tmp_path):
    """A broker.conf copied from RocketMQ names 127.0.0.1:9876; where that is serve's own name server, the broker
    is in its routes already and does not register with it over remoting too."""
    ns_port, broker_port = free_port_pair(), free_port_pair()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=broker-a\nnamesrvAddr=127.0.0.1:{ns_port}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketstore.cli", "serve", str(tmp_path / "store"), "-c", str(conf), "--no-grpc",
         "--namesrv", f"127.0.0.1:{ns_port}", "--remoting", f"127.0.0.1:{broker_port}", "--log-level", "INFO"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )  # fmt: skip
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "rocketstore serve: store" in line:
            break
    proc.send_signal(signal.SIGTERM)
    lines += proc.stdout.readlines()
    assert proc.wait(30) == 0, "".join(lines)
    log = "".join(lines)
    assert f"namesrvAddr 127.0.0.1:{ns_port} is the built-in name server" in log
    assert "registering with" not in log and "unregistering" not in log


def test_a_registration_period_that_is_no_number_is_an_error(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("registerNameServerPeriod=30s\n")
    r = subprocess.run([sys.executable, "-m", "rocketstore.cli", "serve", str(tmp_path / "s"), "-c", str(conf)],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip() == "rocketstore: error: broker.conf registerNameServerPeriod='30s': not an integer"
