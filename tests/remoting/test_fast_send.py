"""The fast send (remoting/broker/fast_send.py, src/native/fastsend.c) against send.py: the same requests to two
brokers over two stores, one answering through the fast call (each engine's twin), the other through send.py's
handler alone. Every answer frame must be the same bytes, the stores' CommitLog and ConsumeQueue files the same
bytes, the metrics' counts the same; and the fast call must take exactly the requests built as plain ones (the
generator knows which: a configured topic, a queue id in range written plainly, sysFlag 0, no batch, properties
with UNIQ_KEY and none of the names send.py treats otherwise)."""

import asyncio
import filecmp
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import MessageStore, StoreConfig, engine
from rocketstore.remoting.broker import properties as BP
from rocketstore.broker.metrics import BrokerMetrics
from rocketstore.remoting.broker import Broker, BrokerSettings
from rocketstore.remoting.broker.fast_send import NOT_PLAIN, state_for
from rocketstore.remoting.broker.metered import RemotingMeter
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.command import RemotingCommand

TIME = 1_700_000_000_123
SHORT = {"producerGroup": "a", "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d", "queueId": "e",
         "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i", "reconsumeTimes": "j",
         "maxReconsumeTimes": "l", "batch": "m"}  # fmt: skip


def _engines():
    out = [pytest.param(engine.reference("fast_send"), id="pure")]
    if engine.EXTENSION is not None:
        out.append(pytest.param(engine.native_side("fast_send"), id="native"))
    else:
        out.append(pytest.param(None, id="native", marks=pytest.mark.skip(reason=f"no extension: {engine.REASON}")))
    return out


class Conn:
    """What the server's handler path writes to: the answer frames."""

    remote = "10.1.2.3:40000"

    def __init__(self):
        self.out = []

    def write_soon(self, data: bytes) -> None:
        self.out.append(data)


# ---------------------------------------------------------------- the requests
names = st.sampled_from(["TAGS", "KEYS", "a", "zz", "WAIT", "DELAY", "TRAN_MSG", "CLUSTER", "__SHARDINGKEY"])
values = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=0, max_size=6)


@st.composite
def requests(draw):
    """(code, ext_fields, body, (plain, topic, qid plain, qid)): a send, and whether it is one the fast call must
    take when its topic is configured with more queues than qid (the run knows)."""
    plain = True
    topic = draw(st.sampled_from(["T1", "T1", "T2", "Fresh", "%RETRY%g1"]))  # the retry topic: never fast
    qid = draw(st.sampled_from(["0", "1", "3", "-0", "4", "7", "+1", "01", " 1"]))
    qid_plain = qid in ("0", "1", "3", "-0", "01", "4", "7")  # written plainly; in range or not is the topic's
    sys_flag = draw(st.sampled_from(["0", "0", "0", "4"]))
    plain &= sys_flag == "0"
    batch = draw(st.sampled_from([None, None, "false", "FALSE", "true"]))
    plain &= batch is None or batch.lower() != "true"
    pairs = draw(st.lists(st.tuples(names, values), max_size=4))
    uniq = draw(st.sampled_from(["7F0000010001", "7F0000010002", 'q"uote', None]))
    if uniq is not None:
        pairs.insert(draw(st.integers(0, len(pairs))), ("UNIQ_KEY", uniq))
    seen = [n for n, _ in pairs]
    plain &= (
        uniq is not None
        and '"' not in uniq
        and len(set(seen)) == len(seen)
        and not NOT_PLAIN.intersection(seen)
        and all(v for _, v in pairs)
    )
    text = "".join(f"{n}\x01{v}\x02" for n, v in pairs)
    if draw(st.booleans()) and text:
        text = text[:-1]  # no final \x02
    ext = {"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
           "queueId": qid, "sysFlag": sys_flag, "bornTimestamp": str(draw(st.integers(0, 2**41))),
           "flag": str(draw(st.integers(-(2**31), 2**31 - 1))), "properties": text,
           "reconsumeTimes": draw(st.sampled_from(["0", "2"])), "unitMode": "false"}  # fmt: skip
    if batch is not None:
        ext["batch"] = batch
    code = draw(st.sampled_from([RC.SEND_MESSAGE_V2, RC.SEND_MESSAGE]))
    if code == RC.SEND_MESSAGE_V2:
        ext = {SHORT.get(k, k): v for k, v in ext.items()}
    body = draw(st.binary(max_size=40))
    return code, ext, body, (plain, topic, qid_plain, qid)


steps = st.lists(st.one_of(requests(), st.just("shrink")), min_size=1, max_size=25)


# ---------------------------------------------------------------- two brokers
def _open(path):
    # small files (a default IndexFile is 420 MB): a hypothesis run opens two stores an example
    config = StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 1000,
                         max_hash_slot_num=1000, max_index_num=4000, clock=lambda: TIME)  # fmt: skip
    store = MessageStore.open(str(path / "store"), config)
    store._cleanup.disk_usage = lambda path: 0.0  # the shared machine's disk may be above RocketMQ's warning
    store._cleanup.check_disk_full()
    for t in ("T1", "T2"):
        store.create_topic(t, 4)
    return store


async def _run(tmp, fast_send, steps, monkeypatch):
    stores = [_open(tmp / "fast"), _open(tmp / "plain")]
    brokers, meters = [], []
    for store in stores:
        metrics = BrokerMetrics(store, "DefaultCluster", "rocketstore")
        meter = RemotingMeter(metrics)
        broker = Broker(store, BrokerSettings(), meter=meter, on_response=meter.observe)
        await broker.start("127.0.0.1", 0)
        brokers.append(broker)
        meters.append(meter)
    fast, plain = brokers
    state = state_for(fast, fast.sends.answer, meters[0].state)
    answers, limits, opaque = [], {"T1": 4, "T2": 4}, 0
    try:
        for step in steps:
            if step == "shrink":  # a topic's config changes under the permits: they are made anew
                for store in stores:
                    store.create_topic("T2", 2)
                limits["T2"] = 2
                continue
            code, ext, body, (is_plain, topic, qid_plain, qid) = step
            opaque += 1
            # a send without UNIQ_KEY gets one from send.py: the same for both brokers
            monkeypatch.setattr(BP, "new_uniq_id", lambda n=opaque: f"GENERATED{n}")
            frames = []
            for i, broker in enumerate(brokers):
                cmd = RemotingCommand(code, opaque=opaque, ext_fields=dict(ext), body=body)
                data = fast_send(state, cmd, Conn.remote) if i == 0 else None
                expect_fast = is_plain and qid_plain and int(qid) < limits.get(topic, 0)
                if i == 0:
                    assert (data is not None) == expect_fast, (ext, data)
                if data is None:  # the server's handler path (send.py), metered by its on_response
                    conn = Conn()
                    broker.server.in_flight += 1
                    await broker.server._handle(cmd, conn)
                    (data,) = conn.out
                frames.append(data)
            answers.append(frames)
            if "Fresh" in stores[0].topic_configs:  # a handler made it from TBW102 (4 queues): configured now
                limits["Fresh"] = 4
    finally:
        for broker in brokers:
            await broker.close()
    return stores, meters, answers


def _counts(meter):
    m = meter.metrics
    rpc = {k: (t[0],) for k, t in m.tally_rpc.items()}
    ins = {k: tuple(list(t)) for k, t in m.tally_in.items()}
    return rpc, ins


def _same_files(a, b, sub):
    da, db = os.path.join(a.root, sub), os.path.join(b.root, sub)
    assert os.path.isdir(da) == os.path.isdir(db)
    if not os.path.isdir(da):  # nothing stored in either
        return
    for root, _dirs, files in os.walk(da):
        for f in files:
            pa = os.path.join(root, f)
            pb = os.path.join(db, os.path.relpath(pa, da))
            assert filecmp.cmp(pa, pb, shallow=False), pa
    assert sorted(os.listdir(da)) == sorted(os.listdir(db))


@pytest.mark.parametrize("fast_send", _engines())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
def test_fast_send_answers_and_stores_as_send_py(tmp_path_factory, monkeypatch, fast_send, steps):
    tmp = tmp_path_factory.mktemp("fast")
    with monkeypatch.context() as m:
        stores, meters, answers = asyncio.run(_run(tmp, fast_send, steps, m))
    try:
        for fast_frame, plain_frame in answers:
            assert fast_frame == plain_frame
        for store in stores:
            store.flush()
        _same_files(stores[0], stores[1], "commitlog")
        _same_files(stores[0], stores[1], "consumequeue")
        assert _counts(meters[0]) == _counts(meters[1])
    finally:
        for store in stores:
            store.close()
        shutil.rmtree(tmp, ignore_errors=True)  # each example's two stores: the run's disk stays small


def test_not_plain_names_are_the_c_ones():
    if engine.EXTENSION is None:
        pytest.skip(f"no extension: {engine.REASON}")
    assert set(engine.EXTENSION.FAST_SEND_NOT_PLAIN) == NOT_PLAIN


@pytest.mark.parametrize("fast_send", _engines())
def test_a_put_refused_is_answered_as_send_py_answers_it(tmp_path, monkeypatch, fast_send):
    """A full disk (SERVICE_NOT_AVAILABLE) and a body past maxMessageSize (MESSAGE_ILLEGAL): the fast call puts,
    sees the status and answers with send.py's own answer, counted under its response code; nothing stored."""
    ext = {"a": "pg", "b": "T1", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "5", "h": "0",
           "i": "KEYS\x01k\x02UNIQ_KEY\x01AB01\x02"}  # fmt: skip

    async def main():
        stores = [_open(tmp_path / "fast"), _open(tmp_path / "plain")]
        frames, meters = [], []
        for i, store in enumerate(stores):
            meter = RemotingMeter(BrokerMetrics(store, "DefaultCluster", "rocketstore"))
            meters.append(meter)
            broker = Broker(store, BrokerSettings(), meter=meter, on_response=meter.observe)
            await broker.start("127.0.0.1", 0)
            state = state_for(broker, broker.sends.answer, meter.state)
            try:
                store._cleanup.disk_usage = lambda path: 0.99
                store._cleanup.check_disk_full()
                big = b"x" * (store.config.max_message_size + 1)
                for opaque, body in ((1, b"hello"), (2, big)):
                    if opaque == 2:  # room again: the size is what refuses it
                        store._cleanup.disk_usage = lambda path: 0.0
                        store._cleanup.check_disk_full()
                    cmd = RemotingCommand(RC.SEND_MESSAGE_V2, opaque=opaque, ext_fields=dict(ext), body=body)
                    if i == 0:
                        data = fast_send(state, cmd, Conn.remote)
                        assert data is not None
                    else:
                        conn = Conn()
                        broker.server.in_flight += 1
                        await broker.server._handle(cmd, conn)
                        (data,) = conn.out
                    frames.append(data)
            finally:
                await broker.close()
        return stores, frames, meters

    stores, frames, meters = asyncio.run(main())
    try:
        assert frames[:2] == frames[2:]
        assert b'"code":14' in frames[0] and b'"code":13' in frames[1]  # SERVICE_NOT_AVAILABLE, MESSAGE_ILLEGAL
        rpc = [{k: t[0] for k, t in m.metrics.tally_rpc.items()} for m in meters]
        assert rpc[0] == rpc[1] == {("remoting", RC.SEND_MESSAGE_V2, 14): 1, ("remoting", RC.SEND_MESSAGE_V2, 13): 1}
        assert all(not m.metrics.tally_in for m in meters)
        assert all(s.max_offset("T1", 1) == 0 for s in stores)
    finally:
        for store in stores:
            store.close()


@pytest.mark.parametrize("fast_send", _engines())
def test_a_bad_cached_order_is_an_error_not_a_bad_record(tmp_path, fast_send):
    """The order cache is the state's (a dict anyone could write): an order that is not a permutation of the
    names and CLUSTER is refused before anything is put (the C sizes the stored text by the pairs)."""

    async def main():
        store = _open(tmp_path)
        broker = Broker(store, BrokerSettings())
        await broker.start("127.0.0.1", 0)
        state = state_for(broker, broker.sends.answer)
        state.orders[b"KEYS\x01UNIQ_KEY"] = (0, 0, 0)
        ext = {"a": "pg", "b": "T1", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "5", "h": "0",
               "i": "KEYS\x01k\x02UNIQ_KEY\x01AB01\x02"}  # fmt: skip
        try:
            with pytest.raises(TypeError, match="permutation"):
                fast_send(state, RemotingCommand(RC.SEND_MESSAGE_V2, opaque=1, ext_fields=ext, body=b"x"), Conn.remote)
        finally:
            await broker.close()
        return store

    store = asyncio.run(main())
    try:
        assert store.max_offset("T1", 1) == 0
    finally:
        store.close()
