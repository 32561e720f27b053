"""`rocketstore serve` with its remoting side: the name server and the broker start with the gRPC endpoint (or
without it, --no-grpc), the broker is registered and answers at the address the routes give."""

import asyncio
import os
import signal
import subprocess
import sys
import threading

from remoting_client import Client


from rocketstore.remoting import fastjson
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.broker.address import free_port, free_port_pair


def serve(tmp_path, *args):
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketstore.cli", "serve", str(tmp_path / "store"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    lines, ready = [], threading.Event()

    def pump():
        for line in proc.stdout:
            lines.append(line)
            if "rocketstore serve: store" in line:
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    assert ready.wait(30), "".join(lines)
    return proc, lines


def ask(namesrv_port):
    async def main():
        c = await Client.connect(namesrv_port)
        route = await c.call(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}, version=401)
        await c.close()
        body = fastjson.loads(route.body)
        addr = body["brokerDatas"][0]["brokerAddrs"]["0"]
        b = await Client.connect(int(addr.rpartition(":")[2]))
        mx = await b.call(RC.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})
        await b.close()
        return addr, mx

    return asyncio.run(main())


def test_all_three_by_default(tmp_path):
    grpc_port, ns_port, broker_port = free_port(), free_port(), free_port()
    proc, lines = serve(tmp_path, "--listen", f"127.0.0.1:{grpc_port}", "--namesrv", f"127.0.0.1:{ns_port}",
                        "--remoting", f"127.0.0.1:{broker_port}")  # fmt: skip
    try:
        addr, mx = ask(ns_port)
        assert addr == f"127.0.0.1:{broker_port}"
        assert mx.code == 0 and mx.ext_fields == {"offset": "0"}
        first = next(x for x in lines if "rocketstore serve: store" in x)
        assert f"listening on 127.0.0.1:{grpc_port}" in first and f"name server on 127.0.0.1:{ns_port}" in first
        assert f"broker rocketstore on 127.0.0.1:{broker_port}" in first
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_no_grpc_and_an_advertised_broker(tmp_path):
    ns_port, broker_port = free_port(), free_port()
    proc, lines = serve(tmp_path, "--no-grpc", "--namesrv", f"127.0.0.1:{ns_port}", "--remoting",
                        f"127.0.0.1:{broker_port}", "--remoting-advertise", f"127.0.0.1:{broker_port}")  # fmt: skip
    try:
        addr, _ = ask(ns_port)
        assert addr == f"127.0.0.1:{broker_port}"
        assert "gRPC" not in "".join(lines)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_nothing_to_serve_is_a_usage_error(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", "serve", str(tmp_path / "s"), "--no-grpc", "--no-remoting",
         "--no-namesrv"], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "nothing to serve" in r.stderr
    assert not os.path.exists(tmp_path / "s")


def test_records_name_the_broker_as_their_store_host(tmp_path):
    # RocketMQ's broker writes its own address (brokerIP1:listenPort) into STOREHOST, and clients act on it: the
    # C++ core sends a failed message back to the host of its offset msgId. On a port other than 10911 too.
    ns_port, broker_port = free_port(), free_port()
    proc, _ = serve(tmp_path, "--no-grpc", "--namesrv", f"127.0.0.1:{ns_port}", "--remoting",
                    f"127.0.0.1:{broker_port}")  # fmt: skip

    async def send():
        b = await Client.connect(broker_port)
        ext = {"producerGroup": "pg", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
               "queueId": "0", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0",
               "properties": "UNIQ_KEY\x01U1\x02", "reconsumeTimes": "0"}  # fmt: skip
        r = await b.call(RC.SEND_MESSAGE, ext, b"hello")
        await b.close()
        return r

    try:
        r = asyncio.run(send())
        assert r.code == 0, r.remark
        # the offset msgId: store host (ip, port) then the commit log offset, upper-case hex
        assert r.ext_fields["msgId"] == f"7F000001{broker_port:08X}{0:016X}"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    from rocketstore import MessageStore

    with MessageStore.open(str(tmp_path / "store"), read_only=True) as s:
        m = s.get("g", "T", 0, 0, 1).messages[0]
        assert (m.body, m.store_host) == (b"hello", f"127.0.0.1:{broker_port}")


def test_broker_serves_its_fast_channel_too(tmp_path):
    # BrokerController's fastRemotingServer listens on listenPort - 2, where 4.x Java producers send by default
    # (sendMessageWithVIPChannel): the same requests are answered there
    ns_port, broker_port = free_port(), free_port_pair()
    proc, _ = serve(tmp_path, "--no-grpc", "--namesrv", f"127.0.0.1:{ns_port}", "--remoting",
                    f"127.0.0.1:{broker_port}")  # fmt: skip

    async def ask_fast():
        b = await Client.connect(broker_port - 2)
        mx = await b.call(RC.GET_MAX_OFFSET, {"topic": "T", "queueId": "0"})
        await b.close()
        return mx

    try:
        mx = asyncio.run(ask_fast())
        assert mx.code == 0 and mx.ext_fields == {"offset": "0"}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
