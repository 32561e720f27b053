"""The name server over the wire: a broker registers as RocketMQ's brokers do (RegisterBrokerBody JSON, or its
deflated form), clients get routes, cluster info, topic lists and KV config with RocketMQ's codes, remarks and body
JSON (written out here by hand from fastjson's rules)."""

import asyncio
import json
import signal
import socket
import subprocess
import sys
import struct
import zlib

import pytest
from remoting_client import Client

from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R
from rocketstore.remoting.namesrv import NameServer, NamesrvSettings
from rocketstore.remoting.namesrv.routes import DataVersion, TopicConfig

ADDR = "10.0.0.1:10911"
BROKER = {"brokerName": "broker-a", "brokerAddr": ADDR, "clusterName": "DefaultCluster",
          "haServerAddr": "10.0.0.1:10912", "brokerId": "0"}  # fmt: skip


def topic_config_json(name, queues=8, perm=6, sys_flag=0):
    return (
        f'{{"attributes":{{}},"order":false,"perm":{perm},"readQueueNums":{queues},"topicFilterType":"SINGLE_TAG",'
        f'"topicName":"{name}","topicSysFlag":{sys_flag},"writeQueueNums":{queues}}}'
    )


def register_body(*topics, counter=1, timestamp=1700000000000):
    # a RocketMQ 5 broker's RegisterBrokerBody (TopicConfigAndMappingSerializeWrapper carries mapping fields too)
    table = ",".join(f'"{t}":{topic_config_json(t)}' for t in topics)
    return (
        '{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":%d,"stateVersion":0,'
        '"timestamp":%d},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":0},'
        '"topicConfigTable":{%s},"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}'
        % (counter, timestamp, table)
    ).encode()


def compressed_body(*topics):
    # RegisterBrokerBody.encode(true): deflate of int-length-prefixed DataVersion JSON, topic count, compact
    # topic configs, filter server list JSON, and (V5_0_0 on) the queue mapping count
    def chunk(b):
        return struct.pack(">i", len(b)) + b

    raw = chunk(b'{"counter":1,"stateVersion":0,"timestamp":1700000000000}') + struct.pack(">i", len(topics))
    for t in topics:
        raw += chunk(f"{t} 8 8 6 SINGLE_TAG {{}}".encode())
    raw += chunk(b"[]") + struct.pack(">i", 0)
    return zlib.compress(raw, 9)


ROUTE_A = (
    '{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster",'
    '"enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
    '"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'
).encode()


def with_namesrv(scenario, settings=None):
    async def main():
        ns = NameServer(settings)
        port = await ns.start("127.0.0.1", 0)
        c = await Client.connect(port)
        try:
            return await scenario(ns, c, port)
        finally:
            await c.close()
            await ns.close()

    return asyncio.run(main())


async def register(c, body, **ext):
    return await c.call(RC.REGISTER_BROKER, {**BROKER, **ext}, body, version=479)


def test_register_then_route_in_fastjson_form():
    async def scenario(ns, c, port):
        reg = await register(c, register_body("TopicTest", "SELF_TEST_TOPIC"))
        old = await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, version=63)
        return reg, old

    reg, old = with_namesrv(scenario)
    assert reg.code == 0 and reg.ext_fields == {} and reg.body == b""
    assert old.code == 0 and old.remark is None
    assert old.body == ROUTE_A


def test_route_standard_json_from_v4_9_4_or_when_asked():
    async def scenario(ns, c, port):
        await register(c, register_body("TopicTest", "T2"))
        new = await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, version=401)
        asked = await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest", "acceptStandardJsonOnly": "true"})
        older = await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, version=400)
        return new, asked, older

    new, asked, older = with_namesrv(scenario)
    standard = ROUTE_A.replace(b"{0:", b'{"0":')
    assert new.body == asked.body == standard
    assert json.loads(standard)["brokerDatas"][0]["brokerAddrs"] == {"0": ADDR}
    assert older.body == ROUTE_A


def test_compressed_registration():
    async def scenario(ns, c, port):
        reg = await register(c, compressed_body("TopicTest", "T2"), compressed="true")
        return reg, await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})

    reg, route = with_namesrv(scenario)
    assert reg.code == 0 and route.body == ROUTE_A


def test_unknown_topic():
    async def scenario(ns, c, port):
        return await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})

    resp = with_namesrv(scenario)
    assert resp.code == R.TOPIC_NOT_EXIST == 17 and resp.body == b""
    assert resp.remark == (
        "No topic route info in name server for the topic: Nope"
        "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
    )


def test_missing_header_field_is_system_error():
    async def scenario(ns, c, port):
        return await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {})

    resp = with_namesrv(scenario)
    assert resp.code == R.SYSTEM_ERROR and "the custom field <topic> is null" in resp.remark


def test_refused_registrations():
    async def scenario(ns, c, port):
        body = register_body("A", "B")
        crc = await register(c, body, bodyCrc32=str((zlib.crc32(body) & 0x7FFFFFFF) ^ 1))
        single = await register(c, register_body("Only"))  # one topic from a broker id not registered yet
        good_crc = await register(c, body, bodyCrc32=str(zlib.crc32(body) & 0x7FFFFFFF))
        single_after = await register(c, register_body("Only"))
        return crc, single, good_crc, single_after

    crc, single, good_crc, single_after = with_namesrv(scenario)
    assert (crc.code, crc.remark) == (R.SYSTEM_ERROR, "crc32 not match")
    assert (single.code, single.remark) == (R.SYSTEM_ERROR, "register broker failed")
    assert good_crc.code == 0 and single_after.code == 0


def test_cluster_info_and_topic_lists():
    async def scenario(ns, c, port):
        await register(c, register_body("TopicTest", "T2"))
        info = await c.call(RC.GET_BROKER_CLUSTER_INFO)
        topics = await c.call(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        by_cluster = await c.call(RC.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"})
        none = await c.call(RC.GET_TOPICS_BY_CLUSTER, {"cluster": "Other"})
        system = await c.call(RC.GET_SYSTEM_TOPIC_LIST_FROM_NS)
        return info, topics, by_cluster, none, system

    info, topics, by_cluster, none, system = with_namesrv(scenario)
    assert info.body == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster","enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
    )
    assert sorted(json.loads(topics.body)["topicList"]) == ["T2", "TopicTest"]
    assert sorted(json.loads(by_cluster.body)["topicList"]) == ["T2", "TopicTest"]
    assert none.body == b'{"topicList":[]}'
    assert system.body == b'{"brokerAddr":"10.0.0.1:10911","topicList":["DefaultCluster","broker-a"]}'


def test_topic_lists_can_be_disabled():
    async def scenario(ns, c, port):
        return await c.call(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)

    resp = with_namesrv(scenario, NamesrvSettings(enableAllTopicList=False))
    assert (resp.code, resp.remark) == (R.SYSTEM_ERROR, "disable")


def test_unregister_and_connection_close_remove_the_broker():
    async def scenario(ns, c, port):
        await register(c, register_body("TopicTest", "T2"))
        ext = {k: BROKER[k] for k in ("brokerName", "brokerAddr", "clusterName", "brokerId")}
        unreg = await c.call(RC.UNREGISTER_BROKER, ext)
        gone = await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        # registered over a second connection that then closes: onChannelDestroy unregisters it
        b = await Client.connect(port)
        await register(b, register_body("TopicTest", "T2"))
        back = await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        await b.close()
        for _ in range(200):
            if not ns.routes.live:
                break
            await asyncio.sleep(0.01)
        after_close = await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        info = await c.call(RC.GET_BROKER_CLUSTER_INFO)
        return unreg, gone, back, after_close, info

    unreg, gone, back, after_close, info = with_namesrv(scenario)
    assert unreg.code == 0 and gone.code == R.TOPIC_NOT_EXIST
    assert back.code == 0 and after_close.code == R.TOPIC_NOT_EXIST
    assert info.body == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'


def test_heartbeat_data_version_and_expiry():
    async def scenario(ns, c, port):
        await register(c, register_body("A", "B", counter=3))
        hb = await c.call(RC.BROKER_HEARTBEAT, {"clusterName": "DefaultCluster", "brokerAddr": ADDR,
                                                "brokerName": "broker-a"})  # fmt: skip
        ext = {k: BROKER[k] for k in ("brokerName", "brokerAddr", "clusterName", "brokerId")}
        same = await c.call(RC.QUERY_DATA_VERSION, ext, b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}')
        other = await c.call(RC.QUERY_DATA_VERSION, ext, b'{"counter":4,"stateVersion":0,"timestamp":1700000000000}')
        last = ns.routes.live[("DefaultCluster", ADDR)].last_update_ms
        kept = ns.routes.expire(last + 120_000)
        expired = ns.routes.expire(last + 120_001)
        return hb, same, other, kept, expired, ns.routes.route("A")

    hb, same, other, kept, expired, route = with_namesrv(scenario)
    assert hb.code == 0
    assert same.ext_fields == {"changed": "false"} and other.ext_fields == {"changed": "true"}
    assert same.body == b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}'
    assert kept == [] and expired == [("DefaultCluster", ADDR)] and route is None


def test_write_perm_wipe_and_add():
    async def scenario(ns, c, port):
        await register(c, register_body("A", "B"))
        wipe = await c.call(RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        perm_wiped = ns.routes.route("A").queue_datas[0].perm
        add = await c.call(RC.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        return wipe, perm_wiped, add, ns.routes.route("A").queue_datas[0].perm

    wipe, perm_wiped, add, perm = with_namesrv(scenario)
    assert wipe.ext_fields == {"wipeTopicCount": "2"} and perm_wiped == 4
    assert add.ext_fields == {"addTopicCount": "2"} and perm == 6


def test_kv_config():
    async def scenario(ns, c, port):
        put = await c.call(RC.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"})
        get = await c.call(RC.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
        listed = await c.call(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"})
        deleted = await c.call(RC.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"})
        missing = await c.call(RC.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
        no_ns = await c.call(RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "other"})
        no_value = await c.call(RC.PUT_KV_CONFIG, {"namespace": "ns", "key": "k"})
        return put, get, listed, deleted, missing, no_ns, no_value

    put, get, listed, deleted, missing, no_ns, no_value = with_namesrv(scenario)
    assert put.code == 0 and get.code == 0 and get.ext_fields == {"value": "v"}
    assert listed.body == b'{"table":{"k":"v"}}' and deleted.code == 0
    assert (missing.code, missing.remark) == (R.QUERY_NOT_FOUND, "No config item, Namespace: ns Key: k")
    assert (no_ns.code, no_ns.remark) == (R.QUERY_NOT_FOUND, "No config item, Namespace: other")
    assert no_value.code == R.SYSTEM_ERROR


def test_kv_config_persists(tmp_path):
    path = str(tmp_path / "namesrv" / "kvConfig.json")

    async def put(ns, c, port):
        await c.call(RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"})

    async def get(ns, c, port):
        reg = await register(c, register_body("A", "B"))  # returnOrderTopicConfigToBroker
        return (await c.call(RC.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"})), reg

    with_namesrv(put, NamesrvSettings(kvConfigPath=path))
    got, reg = with_namesrv(get, NamesrvSettings(kvConfigPath=path))
    assert got.ext_fields == {"value": "broker-a:4"}
    assert reg.body == b'{"table":{"T":"broker-a:4"}}'


def test_order_topic_conf_in_route_when_enabled():
    async def scenario(ns, c, port):
        await register(c, register_body("A", "B"))
        await c.call(RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "A", "value": "broker-a:8"})
        return await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "A"})

    resp = with_namesrv(scenario, NamesrvSettings(orderMessageEnable=True))
    assert json.loads(resp.body.replace(b"{0:", b'{"0":'))["orderTopicConf"] == "broker-a:8"


def test_namesrv_config_get_and_update():
    async def scenario(ns, c, port):
        before = await c.call(RC.GET_NAMESRV_CONFIG)
        upd = await c.call(RC.UPDATE_NAMESRV_CONFIG, body=b"enableTopicList=false\n")
        black = await c.call(RC.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/x\n")
        after = await c.call(RC.GET_UNIT_TOPIC_LIST)
        return before, upd, black, after

    before, upd, black, after = with_namesrv(scenario)
    assert b"enableTopicList=true\n" in before.body
    assert upd.code == 0 and (black.code, black.remark) == (R.NO_PERMISSION, "Can not update config in black list.")
    assert (after.code, after.remark) == (R.SYSTEM_ERROR, "disable")


def test_delete_and_register_topic():
    async def scenario(ns, c, port):
        await register(c, register_body("A", "B"))
        await c.call(RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "A"})
        deleted = await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "A"})
        body = (
            b'{"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}'
        )
        await c.call(RC.REGISTER_TOPIC_IN_NAMESRV, {"topic": "C"}, body)
        bad = b'{"queueDatas":[{"brokerName":"nobody","perm":6,"readQueueNums":2,"writeQueueNums":2}]}'
        await c.call(RC.REGISTER_TOPIC_IN_NAMESRV, {"topic": "D"}, bad)
        return deleted, ns.routes.route("C"), ns.routes.route("D")

    deleted, c_route, d_route = with_namesrv(scenario)
    assert deleted.code == R.TOPIC_NOT_EXIST
    assert c_route.queue_datas[0].read_queue_nums == 2 and d_route is None


def test_direct_registration_for_the_built_in_broker():
    async def scenario(ns, c, port):
        ns.routes.register_broker("DefaultCluster", ADDR, "broker-a", 0, None, {"TopicTest": TopicConfig("TopicTest", 8, 8)},
                                  DataVersion(0, 1, 1), 0, timeout_ms=None, refuse_unregistered_single=False)  # fmt: skip
        route = await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        return route, ns.routes.expire(10**15)

    route, expired = with_namesrv(scenario)
    assert route.body == ROUTE_A and expired == []


@pytest.mark.parametrize("body", [b"{", b"[]", b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"x":{}}}}'])
def test_bad_register_bodies_fail(body):
    async def scenario(ns, c, port):
        return await register(c, body), await c.call(RC.GET_BROKER_CLUSTER_INFO)

    resp, info = with_namesrv(scenario)
    assert resp.code == R.SYSTEM_ERROR and resp.remark.startswith(
        "RemotingCommandException: Failed to decode RegisterBrokerBody: "
    )
    assert info.body == b'{"brokerAddrTable":{},"clusterAddrTable":{}}'  # nothing registered


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_standalone_name_server_stops_on_a_signal_with_clients_connected(sig):
    """`python -m rocketstore.remoting.namesrv` closes its connections and exits 0 on Ctrl-C or SIGTERM, even
    sent the moment it says it listens."""
    p = subprocess.Popen([sys.executable, "-m", "rocketstore.remoting.namesrv", "--listen", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    try:
        line = p.stdout.readline()
        assert line.startswith("name server listening on 127.0.0.1:"), line
        client = socket.create_connection(("127.0.0.1", int(line.strip().rsplit(":", 1)[1])))
        p.send_signal(sig)
        assert p.wait(30) == 0
        assert client.recv(1) == b""  # its connection closed by the server
        client.close()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
