"""Transactions over the remoting protocol, field by field against RocketMQ's source: a producer connection
(a test client that also reads the broker's requests) sends a prepared message as DefaultMQProducerImpl
.sendKernelImpl does (TRAN_MSG / PGROUP properties, sysFlag TRANSACTION_PREPARED_TYPE), ends it with
END_TRANSACTION as EndTransactionRequestHeader carries it, and answers CHECK_TRANSACTION_STATE as
ClientRemotingProcessor.checkTransactionState does; the store is read back record by record."""

import asyncio
import itertools
import json
import struct
import time
import zlib

from broker_fixtures import open_store, with_broker

from rocketstore import MessageStore, StoreConfig
from rocketstore.formats.record import host_to_bytes, make_msg_id, parse_msg_id
from rocketstore.remoting import frame
from rocketstore.remoting.broker import Broker, BrokerSettings
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R
from rocketstore.remoting.command import ONEWAY_FLAG, RemotingCommand
from rocketstore.broker.transaction import Transactions
from rocketstore.maintenance.verify import verify_store

# MessageSysFlag: TRANSACTION_PREPARED_TYPE 1 << 2, COMMIT 2 << 2, ROLLBACK 3 << 2, NOT 0
PREPARED, COMMIT, ROLLBACK, NOT_TYPE = 4, 8, 12, 0
HALF, OP, CHECK_MAX = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC"
MAGIC_V1 = -626843481  # MessageDecoder.MESSAGE_MAGIC_CODE (0xDAA320A7)
FAST = {"transactionTimeOut": "0", "transactionCheckInterval": "60000"}  # checked at once, then not again soon


class Producer:
    """One producer connection: a reader task files responses by opaque and keeps the broker's requests."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.opaques = itertools.count(1000)
        self.responses: dict[int, asyncio.Future] = {}
        self.requests: asyncio.Queue = asyncio.Queue()
        self.task = asyncio.ensure_future(self._read())

    @classmethod
    async def connect(cls, port: int) -> "Producer":
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def _read(self):
        try:
            while True:
                length = frame.frame_length(await self.reader.readexactly(4))
                cmd = frame.decode(await self.reader.readexactly(length))
                if cmd.is_response:
                    fut = self.responses.setdefault(cmd.opaque, asyncio.get_running_loop().create_future())
                    fut.set_result(cmd)
                else:
                    await self.requests.put(cmd)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def send(self, code, ext, body=b"", oneway=False) -> int:
        cmd = RemotingCommand(code=code, ext_fields=ext, body=body, opaque=next(self.opaques))
        if oneway:
            cmd.flag |= ONEWAY_FLAG
        self.writer.write(frame.encode(cmd))
        await self.writer.drain()
        return cmd.opaque

    async def response(self, opaque, timeout=20) -> RemotingCommand:
        fut = self.responses.setdefault(opaque, asyncio.get_running_loop().create_future())
        return await asyncio.wait_for(fut, timeout)

    async def call(self, code, ext, body=b"") -> RemotingCommand:
        return await self.response(await self.send(code, ext, body))

    async def heartbeat(self, group="pg", client_id="127.0.0.1@tx"):
        # HeartbeatData: clientID, producerDataSet (ProducerData.groupName), consumerDataSet
        body = json.dumps({"clientID": client_id, "producerDataSet": [{"groupName": group}], "consumerDataSet": []})
        r = await self.call(RC.HEART_BEAT, None, body.encode())
        assert r.code == R.SUCCESS

    async def close(self):
        self.writer.close()
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def tx_send_ext(topic="T", queue_id=1, uniq="UNIQ0001", group="pg", born=None, more_props=""):
    # SendMessageRequestHeader as sendKernelImpl fills it for a prepared message; the properties string
    # holds TRAN_MSG=true and PGROUP (sendMessageInTransaction) besides the user's
    props = f"TAGS\x01tg\x02TRAN_MSG\x01true\x02PGROUP\x01{group}\x02UNIQ_KEY\x01{uniq}\x02{more_props}"
    return {"producerGroup": group, "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": str(queue_id), "sysFlag": str(PREPARED), "flag": "5",
            "bornTimestamp": str(born if born is not None else int(time.time() * 1000)),
            "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}  # fmt: skip


def end_ext(sent, kind, group="pg", from_check=False, **more):
    """EndTransactionRequestHeader as DefaultMQProducerImpl.endTransaction fills it from the SendResult:
    tranStateTableOffset = queueOffset, commitLogOffset decoded from the offset msgId, msgId = the UNIQ_KEY;
    topic and brokerName (RpcRequestHeader) too; fromTransactionCheck keeps its default, false."""
    ext = {"topic": "T", "brokerName": "rocketstore", "producerGroup": group,
           "tranStateTableOffset": sent.ext_fields["queueOffset"],
           "commitLogOffset": str(parse_msg_id(sent.ext_fields["msgId"])[1]), "commitOrRollback": str(kind),
           "fromTransactionCheck": "true" if from_check else "false", "msgId": sent.ext_fields["transactionId"],
           "transactionId": sent.ext_fields["transactionId"]}  # fmt: skip
    ext.update(more)
    return ext


async def poll(fn, timeout=30):
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        assert time.monotonic() < end, "condition not reached in time"
        await asyncio.sleep(0.05)


def messages(store, topic, queue_id=0):
    store.wait_dispatched(10)
    return store.get("test", topic, queue_id, 0, max_count=32).messages


def decode_check_body(body: bytes) -> dict:
    """MessageDecoder.encode's layout read by hand: sizes and order from the Java method, IPv4 hosts."""
    f = {}
    (f["size"], f["magic"], f["crc"], f["queue_id"], f["flag"], f["queue_offset"], f["phys"], f["sys_flag"],
     f["born"]) = struct.unpack_from(">iiiiiqqiq", body, 0)  # fmt: skip
    f["born_host"] = body[48:56]
    f["store_ts"] = struct.unpack_from(">q", body, 56)[0]
    f["store_host"] = body[64:72]
    f["reconsume"], f["prepared_offset"], body_len = struct.unpack_from(">iqi", body, 72)
    pos = 88
    f["body"] = body[pos : pos + body_len]
    pos += body_len
    topic_len = body[pos]
    f["topic"] = body[pos + 1 : pos + 1 + topic_len].decode()
    pos += 1 + topic_len
    (props_len,) = struct.unpack_from(">h", body, pos)
    raw = body[pos + 2 : pos + 2 + props_len].decode()
    f["props"] = dict(p.split("\x01") for p in raw.split("\x02") if p)
    f["end"] = pos + 2 + props_len
    return f


def verified(store):
    store.flush()
    report = verify_store(store.root, store.config)
    assert report["ok"], report["problems"][:5]


# ---------------------------------------------------------------- commit, rollback
def test_prepare_then_commit_as_end_transaction_processor(tmp_path):
    async def scenario(broker, c, store):
        p = await Producer.connect(broker.server.port)
        try:
            sent = await p.call(RC.SEND_MESSAGE, tx_send_ext(), b"pay 10")
            before = messages(store, "T", 1)
            half = messages(store, HALF)
            end = await p.call(RC.END_TRANSACTION, end_ext(sent, COMMIT))
            return sent, before, half, end
        finally:
            await p.close()

    (sent, before, half, end), store = with_broker(tmp_path, scenario)
    # the answer names the half record: its offset msgId and its queue offset in the half queue
    assert sent.code == R.SUCCESS and before == [] and len(half) == 1
    h = half[0]
    assert sent.ext_fields["msgId"] == make_msg_id(host_to_bytes(store.config.store_host), h.physical_offset)
    assert (sent.ext_fields["queueOffset"], sent.ext_fields["queueId"]) == ("0", "1")
    assert sent.ext_fields["transactionId"] == "UNIQ0001"
    # parseHalfMessageInner: queue 0 of the half topic, REAL_TOPIC / REAL_QID, __transactionId__, NOT_TYPE bits
    assert (h.queue_id, h.sys_flag & 0xC, h.body, h.flag) == (0, 0, b"pay 10", 5)
    assert h.properties["REAL_TOPIC"] == "T" and h.properties["REAL_QID"] == "1"
    assert h.properties["__transactionId__"] == "UNIQ0001" and h.properties["PGROUP"] == "pg"
    assert (end.code, end.remark) == (R.SUCCESS, None)
    got = messages(store, "T", 1)
    assert len(got) == 1
    m = got[0]
    # endMessageTransaction + resetTransactionValue(COMMIT) + preparedTransactionOffset = the half's offset
    assert (m.body, m.flag, m.born_timestamp, m.tags) == (b"pay 10", 5, h.born_timestamp, "tg")
    assert m.sys_flag & 0xC == COMMIT and m.prepared_transaction_offset == h.physical_offset
    assert m.properties["UNIQ_KEY"] == "UNIQ0001" and m.born_host == h.born_host
    # the properties string is the half's: the broker writes it before clearing REAL_TOPIC / REAL_QID / TRAN_MSG
    assert m.properties_raw == h.properties_raw
    # deletePrepareMessage: an op record, tag "d", body "<half queue offset>,"
    ops = messages(store, OP)
    assert [(o.body, o.tags) for o in ops] == [(b"0,", "d")]
    # nothing pending: the check offsets of CID_RMQ_SYS_TRANS moved past both
    assert store.consumer_offsets.query("CID_RMQ_SYS_TRANS", HALF, 0) == 1
    verified(store)
    store.close()


def test_rollback_is_never_seen(tmp_path):
    async def scenario(broker, c, store):
        p = await Producer.connect(broker.server.port)
        try:
            sent = await p.call(RC.SEND_MESSAGE, tx_send_ext(queue_id=0), b"undo me")
            end = await p.call(RC.END_TRANSACTION, end_ext(sent, ROLLBACK))
            again = await p.call(RC.END_TRANSACTION, end_ext(sent, COMMIT))  # ended already: nothing to do
            return end, again, broker.transactions.pending_ids()
        finally:
            await p.close()

    (end, again, pending), store = with_broker(tmp_path, scenario)
    assert (end.code, end.remark) == (R.SUCCESS, None) and again.code == R.SUCCESS
    assert pending == [] and all(messages(store, "T", q) == [] for q in range(4))
    assert [o.body for o in messages(store, OP)] == [b"0,"]
    verified(store)
    store.close()


def test_end_transaction_refusals(tmp_path):
    async def scenario(broker, c, store):
        p = await Producer.connect(broker.server.port)
        out = {}
        try:
            sent = await p.call(RC.SEND_MESSAGE, tx_send_ext(), b"x")
            out["group"] = await p.call(RC.END_TRANSACTION, end_ext(sent, COMMIT, group="other"))
            out["table"] = await p.call(RC.END_TRANSACTION, end_ext(sent, COMMIT, tranStateTableOffset="7"))
            out["where"] = await p.call(RC.END_TRANSACTION, end_ext(sent, COMMIT, commitLogOffset="3"))
            out["kind"] = await p.call(RC.END_TRANSACTION, end_ext(sent, 5))
            ext = end_ext(sent, COMMIT)
            del ext["producerGroup"]
            out["missing"] = await p.call(RC.END_TRANSACTION, ext)
            out["pending"] = broker.transactions.pending_ids()
            # NOT_TYPE: no answer at all (the processor returns null); the next request is answered
            unknown = await p.send(RC.END_TRANSACTION, end_ext(sent, NOT_TYPE))
            await p.heartbeat()
            await p.heartbeat()
            out["unknown_answered"] = unknown in p.responses
            return out
        finally:
            await p.close()

    out, store = with_broker(tmp_path, scenario)
    # checkPrepareMessage's remarks; lookMessageByOffset finding nothing; checkFields; a @CFNotNull field
    assert (out["group"].code, out["group"].remark) == (R.SYSTEM_ERROR, "The producer group wrong")
    assert (out["table"].code, out["table"].remark) == (R.SYSTEM_ERROR, "The transaction state table offset wrong")
    assert (out["where"].code, out["where"].remark) == (R.SYSTEM_ERROR, "Find prepared transaction message failed")
    assert out["kind"].code == R.SYSTEM_ERROR and "commitOrRollback field wrong" in out["kind"].remark
    assert out["missing"].code == R.SYSTEM_ERROR and "<producerGroup> is null" in out["missing"].remark
    assert out["pending"] == ["UNIQ0001"] and out["unknown_answered"] is False
    assert messages(store, "T", 1) == []
    store.close()


def test_reject_transaction_message_and_immunity_time(tmp_path):
    async def scenario(broker, c, store):
        p = await Producer.connect(broker.server.port)
        try:
            broker.settings.rejectTransactionMessage = True
            refused = await p.call(RC.SEND_MESSAGE, tx_send_ext(), b"x")
            broker.settings.rejectTransactionMessage = False
            # CHECK_IMMUNITY_TIME_IN_SECONDS=1, born 30 s ago: the producer's own end comes too late
            old = int(time.time() * 1000) - 30_000
            ext = tx_send_ext(born=old, more_props="CHECK_IMMUNITY_TIME_IN_SECONDS\x011\x02")
            sent = await p.call(RC.SEND_MESSAGE, ext, b"y")
            late = await p.call(RC.END_TRANSACTION, end_ext(sent, COMMIT))
            from_check = await p.call(RC.END_TRANSACTION, end_ext(sent, COMMIT, from_check=True))
            return refused, late, from_check
        finally:
            await p.close()

    (refused, late, from_check), store = with_broker(tmp_path, scenario, BrokerSettings(brokerIP1="10.1.2.3"))
    assert (refused.code, refused.remark) == (
        R.NO_PERMISSION,
        "the broker[10.1.2.3] sending transaction message is forbidden",
    )
    # rejectCommitOrRollback: ILLEGAL_OPERATION, no remark; a check's answer is taken
    assert (late.code, late.remark) == (R.ILLEGAL_OPERATION, None)
    assert (from_check.code, from_check.remark) == (R.SUCCESS, None)
    assert [m.body for m in messages(store, "T", 1)] == [b"y"]
    store.close()


# ---------------------------------------------------------------- the check-back
def test_unknown_then_check_back_commits(tmp_path):
    store = open_store(tmp_path, extra=FAST)

    async def scenario(broker, c, store):
        p = await Producer.connect(broker.server.port)
        try:
            await p.heartbeat("pg")
            sent = await p.call(RC.SEND_MESSAGE, tx_send_ext(), b"maybe")
            await p.send(RC.END_TRANSACTION, end_ext(sent, NOT_TYPE), oneway=True)
            check = await asyncio.wait_for(p.requests.get(), 30)
            # the producer's answer: END_TRANSACTION oneway from the check's header (checkTransactionStateImpl)
            e = check.ext_fields
            await p.send(RC.END_TRANSACTION, {
                "producerGroup": "pg", "tranStateTableOffset": e["tranStateTableOffset"],
                "commitLogOffset": e["commitLogOffset"], "commitOrRollback": str(COMMIT),
                "fromTransactionCheck": "true", "msgId": e["msgId"], "transactionId": e["transactionId"]},
                oneway=True)  # fmt: skip
            got = await poll(lambda: messages(store, "T", 1))
            return sent, check, got
        finally:
            await p.close()

    (sent, check, got), store = with_broker(tmp_path, scenario, store=store)
    half = store.get("test", HALF, 0, 0).messages[0]
    # Broker2Client.checkProducerTransactionState: oneway CHECK_TRANSACTION_STATE
    assert check.code == RC.CHECK_TRANSACTION_STATE and check.is_oneway
    assert check.ext_fields == {
        "topic": HALF,  # the check listener names the message's topic before setting the real one
        "tranStateTableOffset": "0",
        "commitLogOffset": str(half.physical_offset),
        "msgId": "UNIQ0001",
        "transactionId": "UNIQ0001",
        "offsetMsgId": sent.ext_fields["msgId"],
        "brokerName": "rocketstore",
    }
    f = decode_check_body(check.body)
    assert f["end"] == len(check.body) == f["size"] and f["magic"] == MAGIC_V1
    assert f["crc"] == zlib.crc32(b"maybe") & 0x7FFFFFFF  # UtilAll.crc32
    assert (f["topic"], f["queue_id"], f["queue_offset"], f["phys"]) == ("T", 1, 0, half.physical_offset)
    assert (f["body"], f["flag"], f["sys_flag"] & 0xC, f["born"]) == (b"maybe", 5, 0, half.born_timestamp)
    assert f["store_ts"] == half.store_timestamp and f["reconsume"] == 0 and f["prepared_offset"] == 0
    assert f["born_host"] == host_to_bytes(half.born_host) and f["store_host"] == host_to_bytes(half.store_host)
    # needDiscard put the check count on the message; the rest are the half's properties
    assert f["props"] == {**half.properties, "TRANSACTION_CHECK_TIMES": "1"}
    assert [(m.body, m.sys_flag & 0xC, m.prepared_transaction_offset) for m in got] == [
        (b"maybe", COMMIT, half.physical_offset)
    ]
    verified(store)
    store.close()


def test_check_max_gives_up_to_trans_check_max_time_topic(tmp_path):
    store = open_store(tmp_path, extra={"transactionTimeOut": "0", "transactionCheckInterval": "100",
                                        "transactionCheckMax": "2"})  # fmt: skip

    async def scenario(broker, c, store):
        p = await Producer.connect(broker.server.port)  # registers, then never answers
        try:
            await p.heartbeat("pg")
            await p.call(RC.SEND_MESSAGE, tx_send_ext(), b"lost")
            discarded = await poll(lambda: messages(store, CHECK_MAX))
            checks = [await asyncio.wait_for(p.requests.get(), 30) for _ in range(2)]
            return discarded, checks, broker.transactions.pending_ids(), p.requests.qsize()
        finally:
            await p.close()

    (discarded, checks, pending, more), store = with_broker(tmp_path, scenario, store=store)
    counts = [decode_check_body(c.body)["props"]["TRANSACTION_CHECK_TIMES"] for c in checks]
    assert counts == ["1", "2"] and more == 0 and pending == []
    # resolveDiscardMsg: the half message, its check count on it, queue 0 of TRANS_CHECK_MAX_TIME_TOPIC
    d = discarded[0]
    assert (d.body, d.properties["TRANSACTION_CHECK_TIMES"], d.properties["REAL_TOPIC"]) == (b"lost", "2", "T")
    assert all(messages(store, "T", q) == [] for q in range(4))
    assert [o.body for o in messages(store, OP)] == [b"0,"]
    verified(store)
    store.close()


def test_restart_keeps_pending_half_messages(tmp_path):
    async def first(broker, c, store):
        p = await Producer.connect(broker.server.port)
        try:
            a = await p.call(RC.SEND_MESSAGE, tx_send_ext(uniq="A1"), b"a")
            b = await p.call(RC.SEND_MESSAGE, tx_send_ext(uniq="B2"), b"b")
            c3 = await p.call(RC.SEND_MESSAGE, tx_send_ext(uniq="C3"), b"c")
            assert (await p.call(RC.END_TRANSACTION, end_ext(a, ROLLBACK))).code == R.SUCCESS
            return b, c3
        finally:
            await p.close()

    (b, c3), store = with_broker(tmp_path, first)
    store.close()
    # checked every 200 ms: a check made before the producer is online is made again soon
    store = open_store(tmp_path, extra={"transactionTimeOut": "0", "transactionCheckInterval": "200",
                                        "transactionCheckMax": "100000"})  # fmt: skip

    async def second(broker, c, store):
        pending = broker.transactions.pending_ids()
        p = await Producer.connect(broker.server.port)
        try:
            assert (await p.call(RC.END_TRANSACTION, end_ext(b, COMMIT))).code == R.SUCCESS
            await p.heartbeat("pg")  # C3 is still pending: checked with the producer that is online now
            check = await asyncio.wait_for(p.requests.get(), 30)
            return pending, check
        finally:
            await p.close()

    (pending, check), store = with_broker(tmp_path, second, store=store)
    assert pending == ["B2", "C3"]
    assert check.ext_fields["transactionId"] == "C3" and check.ext_fields["tranStateTableOffset"] == "2"
    assert [m.body for m in messages(store, "T", 1)] == [b"b"]
    verified(store)
    store.close()


# ---------------------------------------------------------------- one state for both protocols
def test_one_pending_state_for_both_protocols(tmp_path):
    from rocketstore import Message
    from rocketstore.grpc.protocol import definition_pb2 as pb
    from rocketstore.grpc.transactions_grpc import end_transaction

    async def scenario(broker, c, store):
        shared = Transactions.shared(store)  # what the gRPC side gets while the broker runs
        try:
            assert shared is broker.transactions
            # a half message as the gRPC side prepares it (the proxy's producer group is the topic) ...
            grpc_half = shared.prepare(
                Message("T", b"from grpc", sys_flag=PREPARED,
                        properties={"UNIQ_KEY": "G1", "PGROUP": "T", "TRAN_MSG": "true"}), 2)  # fmt: skip
            p = await Producer.connect(broker.server.port)
            try:
                # ... ended over remoting; and one sent over remoting ended as gRPC's EndTransaction does
                e = {"producerGroup": "T", "tranStateTableOffset": str(grpc_half.queue_offset),
                     "commitLogOffset": str(grpc_half.physical_offset), "commitOrRollback": str(COMMIT),
                     "fromTransactionCheck": "false", "msgId": "G1", "transactionId": "G1"}  # fmt: skip
                by_remoting = await p.call(RC.END_TRANSACTION, e)
                await p.call(RC.SEND_MESSAGE, tx_send_ext(uniq="R1", queue_id=3), b"from remoting")
            finally:
                await p.close()
            by_grpc = end_transaction(shared, "T", "R1", pb.TransactionResolution.COMMIT, False)
            return by_remoting, by_grpc, shared.pending_ids()
        finally:
            shared.release()

    (by_remoting, by_grpc, pending), store = with_broker(tmp_path, scenario)
    assert by_remoting.code == R.SUCCESS and by_grpc == (pb.Code.OK, "OK") and pending == []
    assert [m.body for m in messages(store, "T", 2)] == [b"from grpc"]
    assert [m.body for m in messages(store, "T", 3)] == [b"from remoting"]
    verified(store)
    store.close()


def test_broker_close_stops_the_checks_it_started(tmp_path):
    import threading

    store = open_store(tmp_path)

    async def main():
        broker = Broker(store, BrokerSettings())
        await broker.start("127.0.0.1", 0)
        running = "transaction-check" in {t.name for t in threading.enumerate()}
        await broker.close()
        return running

    assert asyncio.run(main()) is True
    assert "transaction-check" not in {t.name for t in threading.enumerate()}
    store.close()
    # a store reopened after the close starts with nothing pending
    with MessageStore.open(str(tmp_path / "store"), StoreConfig(mapped_file_size_commit_log=16 << 20)) as s:
        assert Transactions(s).pending_ids() == []


# ---------------------------------------------------------------- the check body, any message
def test_check_body_reads_back_by_message_decoder_layout():
    from types import SimpleNamespace

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from rocketstore.remoting.broker.transaction import encode_check_body

    text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=8)

    @settings(max_examples=60, deadline=None)
    @given(
        body=st.binary(max_size=300),
        flag=st.integers(-(2**31), 2**31 - 1),
        queue_id=st.integers(0, 255),
        offsets=st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)),
        times=st.tuples(st.integers(0, 2**42), st.integers(0, 2**42)),
        props=st.dictionaries(text, text, max_size=4),
        topic=st.text(st.characters(min_codepoint=0x41, max_codepoint=0x7A), min_size=1, max_size=40),
    )
    def check(body, flag, queue_id, offsets, times, props, topic):
        half = SimpleNamespace(
            body=body, flag=flag, sys_flag=0, born_timestamp=times[0], born_host="10.0.0.7:4242",
            store_timestamp=times[1], store_host="127.0.0.1:10911", reconsume_times=0, prepared_transaction_offset=0,
            queue_offset=offsets[0], physical_offset=offsets[1], body_crc=zlib.crc32(body) & 0x7FFFFFFF,
        )  # fmt: skip
        raw = "".join(f"{k}\x01{v}\x02" for k, v in props.items())
        data = encode_check_body(half, topic, queue_id, raw)
        f = decode_check_body(data)
        assert f["end"] == len(data) == f["size"] and f["magic"] == MAGIC_V1
        assert (f["topic"], f["queue_id"], f["body"], f["flag"], f["props"]) == (topic, queue_id, body, flag, props)
        assert (f["queue_offset"], f["phys"], f["born"], f["store_ts"]) == (*offsets, *times)
        # hosts: 4 address bytes and the port as an int (InetSocketAddress in encode)
        assert f["born_host"] == bytes([10, 0, 0, 7]) + struct.pack(">i", 4242)
        assert f["store_host"] == bytes([127, 0, 0, 1]) + struct.pack(">i", 10911)

    check()


def test_rocketstore_serve_gives_both_protocols_one_pending_state(tmp_path):
    import threading

    from rocketstore.cli.server import Server

    s = Server(str(tmp_path / "served"), "127.0.0.1:0", StoreConfig(), namesrv="127.0.0.1:0", remoting="127.0.0.1:0")
    s.start()
    try:
        assert s.service.tx is s.remoting.broker.transactions and s.service.tx.running
    finally:
        s.stop()
    # the last of the two users stopped the checks
    assert "transaction-check" not in {t.name for t in threading.enumerate()}


def test_checks_go_to_live_producers_of_the_group_only(tmp_path):
    async def scenario(broker, c, store):
        a, b = await Producer.connect(broker.server.port), await Producer.connect(broker.server.port)
        try:
            await a.heartbeat("pg", "a@1")
            await b.heartbeat("pg", "b@2")
            picked = {broker.clients.producer_connection("pg", turn).id for turn in range(4)}
            await b.close()  # ProducerManager drops a closed channel
            await poll(lambda: len(broker.clients.producers.get("pg", {})) == 1)
            left = broker.clients.producer_connection("pg", 1)
            # a producer not heard of within channelExpiredTimeout is dropped (scanNotActiveChannel)
            for ch in broker.clients.producers["pg"].values():
                ch.last_update_ms -= 200_000
            broker.clients.expire(120_000)
            return (
                len(picked),
                left is not None,
                broker.clients.producer_connection("pg", 0),
                broker.clients.producer_connection("other", 0),  # a group with no producer
            )
        finally:
            await a.close()

    (picked, left, after_expiry, other), store = with_broker(tmp_path, scenario)
    assert (picked, left, after_expiry, other) == (2, True, None, None)
    store.close()
