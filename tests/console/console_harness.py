"""The console tests' harness (a module of its own name: a bare `from conftest import` finds another folder's
conftest when the whole suite runs). `rocketstore serve` with its HTTP side on free ports, in a subprocess, and
what the tests read back from it: /metrics parsed by prometheus_client's own parser, the console's pages."""

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from rocketstore.broker.address import free_port

CONF = """mappedFileSizeCommitLog=10485760
brokerName=broker-console
brokerClusterName=ConsoleCluster
minInvisibleTimeMillsForRecv=1000
grpcClientConsumerMinLongPollingTimeoutMillis=500
diskMaxUsedSpaceRatio=99
"""


def http_get(url: str, timeout: float = 30) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def http_post(url: str, form: dict, timeout: float = 30, headers: dict | None = None) -> tuple[int, str]:
    data = urllib.parse.urlencode(form).encode()
    req = urllib.request.Request(url, data=data, headers=headers or {}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class ServeHttp:
    """`rocketstore serve STORE --http 127.0.0.1:PORT` (every side on a free port) in a subprocess."""

    def __init__(self, tmp_path, store=None):
        self.tmp = tmp_path
        self.store = str(store or tmp_path / "store")
        self.conf = tmp_path / "broker.conf"
        self.conf.write_text(CONF)
        self.grpc_port, self.namesrv_port = free_port(), free_port()
        self.remoting_port, self.http_port = free_port(), free_port()
        self.endpoint = f"127.0.0.1:{self.grpc_port}"
        self.base = f"http://127.0.0.1:{self.http_port}"
        self.home = tmp_path / "home"
        self.home.mkdir(exist_ok=True)
        self.proc = None
        self.lines: list[str] = []

    def env(self):
        return dict(os.environ, HOME=str(self.home), PYTHONUNBUFFERED="1")

    def args(self, http: bool = True) -> list[str]:
        return [
            self.store, "-c", str(self.conf), "--listen", self.endpoint,
            "--namesrv", f"127.0.0.1:{self.namesrv_port}", "--remoting", f"127.0.0.1:{self.remoting_port}",
        ] + (["--http", f"127.0.0.1:{self.http_port}"] if http else [])  # fmt: skip

    def start(self, *more: str) -> "ServeHttp":
        cmd = [sys.executable, "-m", "rocketstore.cli", "serve", *self.args("--no-http" not in more), *more]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env())
        ready = threading.Event()

        def pump():
            for line in self.proc.stdout:
                self.lines.append(line)
                if line.startswith("rocketstore serve: store"):
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        assert ready.wait(60), "the server did not start"
        assert self.proc.poll() is None, "".join(self.lines)
        return self

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(30)
        time.sleep(0.05)
        return rc

    def get(self, path: str) -> tuple[int, str]:
        return http_get(self.base + path)

    def post(self, path: str, form: dict, **kw) -> tuple[int, str]:
        return http_post(self.base + path, form, **kw)

    def metrics(self) -> dict:
        """{metric family name: family} from GET /metrics, parsed by prometheus_client.parser."""
        status, text = self.get("/metrics")
        assert status == 200, text
        return {f.name: f for f in text_string_to_metric_families(text)}


def value(families: dict, family: str, sample: str | None = None, **labels) -> float:
    """The sum of a family's samples named `sample` (default: the family's own name, or name_total for a counter)
    whose labels include `labels`."""
    f = families[family]
    want = sample or (family + "_total" if f.type == "counter" else family)
    return sum(s.value for s in f.samples if s.name == want and all(s.labels.get(k) == v for k, v in labels.items()))


# ---------------------------------------------------------------- a store with known contents
ORDERS = 20  # messages in Orders, over 4 queues (5 each), keys order-0 .. order-19
COMMITTED = 2  # g1's committed offset in each queue of Orders: 8 consumed, a lag of 12
BINARY = bytes(range(256))


def make_store(path) -> dict:
    """Orders (4 queues, 20 keyed messages with a property), Binary (one message of bytes 0..255), group g1 at
    offset 2 of each Orders queue, and Orders' first message retried once in %RETRY%g1 and then in %DLQ%g1 (as
    the remoting broker's send-back writes them: RETRY_TOPIC, the same UNIQ_KEY). Returns what was put."""
    from rocketstore import Message, MessageStore, StoreConfig

    store = MessageStore.open(str(path), StoreConfig(mapped_file_size_commit_log=10 << 20).with_small_files())
    try:
        store.create_topic("Orders", 4)
        store.create_topic("Binary", 1)
        orders = []
        for i in range(ORDERS):
            uniq = f"C0A8000100002A9F{i:016X}"  # a client id, not an offset msgId
            m = Message("Orders", f"order body {i}".encode(), tags="TagA" if i % 2 == 0 else "TagB",
                        keys=[f"order-{i}"], properties={"color": "red", "UNIQ_KEY": uniq})  # fmt: skip
            r = store.put(m, i % 4)
            assert r.ok
            orders.append({"i": i, "uniq": uniq, "msg_id": r.msg_id, "queue": r.queue_id, "offset": r.queue_offset,
                           "phys": r.physical_offset})  # fmt: skip
        r = store.put(Message("Binary", BINARY, keys=["bin-1"]), 0)
        binary = {"msg_id": r.msg_id, "phys": r.physical_offset}
        first = orders[0]
        origin = {"RETRY_TOPIC": "Orders", "UNIQ_KEY": first["uniq"], "ORIGIN_MESSAGE_ID": first["msg_id"]}
        retry = store.put(Message("%RETRY%g1", b"order body 0", tags="TagA", keys=["order-0"],
                                  properties={**origin, "RECONSUME_TIME": "1"}, reconsume_times=1), 0)  # fmt: skip
        dlq = store.put(Message("%DLQ%g1", b"order body 0", tags="TagA", keys=["order-0"],
                                properties={**origin, "DLQ_ORIGIN_TOPIC": "Orders", "RECONSUME_TIME": "17"},
                                reconsume_times=17), 0)  # fmt: skip
        assert retry.ok and dlq.ok
        store.consumer_offsets.commit("g1", "Orders", {q: COMMITTED for q in range(4)})
        store.wait_dispatched(10)
        return {"orders": orders, "binary": binary, "dlq_phys": dlq.physical_offset, "dlq_msg_id": dlq.msg_id}
    finally:
        store.close()
