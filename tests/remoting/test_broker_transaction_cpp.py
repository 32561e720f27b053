"""Transactions from the real C++ core: rocketmq::TransactionMQProducer inside the librocketmq.so of the PyPI
client `rocketmq` 0.4.4 (no Python API for it), driven by cpp_txn_producer.cpp, compiled here against that
library. It sends a half message through the name server's route, ends it with its own END_TRANSACTION, and
answers the broker's CHECK_TRANSACTION_STATE from its listener's checkLocalTransaction."""

import json
import os
import queue
import subprocess
import threading

import pytest
from broker_fixtures import broker_on_loop, open_store, wait_until

from rocketstore.maintenance.verify import verify_store

SOURCE = os.path.join(os.path.dirname(__file__), "cpp_txn_producer.cpp")
HALF, OP = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"
COMMIT = 8  # MessageSysFlag.TRANSACTION_COMMIT_TYPE


@pytest.fixture(scope="session")
def cpp_txn_producer(cpp_python, tmp_path_factory):
    """The program, built with g++ against the client's librocketmq.so (old std::string ABI, as it was built)."""
    probe = subprocess.run(
        [cpp_python, "-c", "import os, rocketmq; print(os.path.dirname(rocketmq.__file__))"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    lib = probe.stdout.strip()
    if probe.returncode != 0 or not os.path.exists(os.path.join(lib, "librocketmq.so")):
        pytest.fail(f"no librocketmq.so in the C++-core client's venv: {probe.stderr.strip()[-300:]}")
    binary = str(tmp_path_factory.mktemp("cpp-txn") / "cpp_txn_producer")
    cmd = ["g++", "-std=c++17", "-O1", "-D_GLIBCXX_USE_CXX11_ABI=0", SOURCE, "-o", binary, f"-L{lib}",
           "-lrocketmq", f"-Wl,-rpath,{lib}", "-pthread"]  # fmt: skip
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        pytest.fail("g++ is needed to build cpp_txn_producer.cpp")
    if r.returncode != 0:
        pytest.fail(f"cannot build cpp_txn_producer.cpp: {r.stderr.strip()[-1500:]}")
    return binary


@pytest.fixture
def remoting(loop_thread, tmp_path):
    """A store (checks due at once, every half second, never given up), the name server and the broker, on the
    loop thread."""
    extra = {"transactionTimeOut": "0", "transactionCheckInterval": "500", "transactionCheckMax": "100000"}
    store = open_store(tmp_path, extra=extra)
    store.create_topic("T", 4)
    with broker_on_loop(loop_thread, store) as env:
        yield env


class Running:
    """The producer process: its JSON lines in a queue (a reader thread), stopped by closing its stdin."""

    def __init__(self, binary, namesrv, execute, check, home):
        self.p = subprocess.Popen(
            [binary, namesrv, "T", "cpp-tx", execute, check],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, HOME=str(home)),
        )  # fmt: skip
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            line = line.strip()
            if line.startswith("{"):
                self.lines.put(json.loads(line))

    def next(self, timeout=60) -> dict:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            raise AssertionError(f"no output from the producer; stderr: {self.p.stderr.read()[-2000:]}") from None

    def stop(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)


def poll(fn, timeout=60):
    """fn's answer once true; fails when the time is up."""
    v = wait_until(fn, timeout)
    assert v, "condition not reached in time"
    return v


def halves(store):
    store.wait_dispatched(10)
    return store.get("check", HALF, 0, 0).messages


def on_topic(store):
    store.wait_dispatched(10)
    return [m for q in range(4) for m in store.get("check", "T", q, 0, max_count=32).messages]


@pytest.mark.parametrize(
    "execute, check, committed",
    [("commit", "unknown", True), ("rollback", "unknown", False), ("unknown", "commit", True),
     ("unknown", "rollback", False)],
)  # fmt: skip
def test_cpp_transaction_producer(cpp_txn_producer, remoting, tmp_path, execute, check, committed):
    store, broker = remoting["store"], remoting["broker"]
    home = tmp_path / "cpp-home"
    home.mkdir()
    run = Running(cpp_txn_producer, remoting["namesrv"], execute, check, home)
    try:
        sent = run.next()
        assert sent.get("status") == 0, sent  # SEND_OK for the half message
        half = poll(lambda: halves(store))[0]
        # the C++ core's msg id is its UNIQ_KEY; its offset msg id and queue offset are the half record's
        assert sent["msg_id"] == half.properties["UNIQ_KEY"] == half.properties["__transactionId__"]
        assert sent["offset_msg_id"] == half.msg_id and sent["queue_offset"] == half.queue_offset
        assert half.properties["PGROUP"] == "cpp-tx" and half.properties["TRAN_MSG"] == "true"
        if execute == "unknown":  # no end from the producer: the broker's check-back asks its listener
            c = run.next()
            assert (c["check"], c["topic"], c["body"]) == (1, "T", "transactional body")
            # checks made before the producer's heartbeat reached the broker count too (needDiscard)
            assert c["uniq_key"] == sent["msg_id"] and int(c["check_times"]) >= 1
            # MQDecoder::decode: the message named by its UNIQ_KEY, its offset msg id from the store host and
            # commit log offset of the body, the real queue, the half record's queue offset
            # (its createMessageId writes the in-memory sin_addr as a big-endian int: on x86 the address bytes
            # come out reversed, 127.0.0.1 as 0100007F; port and offset as RocketMQ's)
            ip = bytes.fromhex(half.msg_id[:8])[::-1].hex().upper()
            assert c["msg_id"] == sent["msg_id"] and c["offset_msg_id"] == ip + half.msg_id[8:]
            assert (c["queue_id"], c["queue_offset"], c["commit_log_offset"]) == (
                int(half.properties["REAL_QID"]), half.queue_offset, half.physical_offset)  # fmt: skip
        poll(lambda: broker.transactions.pending_ids() == [])
    finally:
        run.stop()
    got = on_topic(store)
    if committed:
        assert len(got) == 1
        m = got[0]
        assert (m.body, m.tags, m.sys_flag & 0xC) == (b"transactional body", "txtag", COMMIT)
        assert m.prepared_transaction_offset == half.physical_offset and m.unique_key == sent["msg_id"]
    else:
        assert got == []
    store.wait_dispatched(10)
    assert [o.body for o in store.get("check", OP, 0, 0).messages] == [f"{half.queue_offset},".encode()]
    store.flush()
    report = verify_store(store.root, store.config)
    assert report["ok"], report["problems"][:5]
