"""`rocketstore serve`: transactional messages (commit, rollback, server-initiated check over Telemetry), FIFO
consumer groups (orderly pop under redelivery) and delay messages (delivery timestamp, also across a
restart), driven by the official RocketMQ 5 Python client."""

import importlib.util
import os

import pytest

from rocketstore import MessageStore
from rocketstore.config.store_config import StoreConfig
from rocketstore.formats import record as R
from rocketstore.broker.fifo import SubscriptionGroups

_spec = importlib.util.spec_from_file_location(
    "serve_conftest_txfd", os.path.join(os.path.dirname(__file__), "conftest.py")
)
_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conftest)
CONF, ServeProcess = _conftest.CONF, _conftest.ServeProcess

TX_CONF = CONF + "transactionTimeOut=1000\ntransactionCheckInterval=500\n"
HALF, OP = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"


def _serve(tmp_path, topics, fifo_groups=(), conf=TX_CONF):
    """A server over a store whose topics have the message types the client checks against."""
    s = ServeProcess(tmp_path)
    s.conf.write_text(conf)
    cfg = StoreConfig.from_properties(str(s.conf))
    with MessageStore.open(s.store, cfg) as store:
        for name, (queues, kind) in topics.items():
            store.create_topic(name, queues, {"message.type": kind})
    for g in fifo_groups:
        SubscriptionGroups(s.store).set_fifo(g)
    return s.start()


@pytest.fixture
def serve(tmp_path):
    started = []

    def make(topics, fifo_groups=(), conf=TX_CONF):
        s = _serve(tmp_path, topics, fifo_groups, conf)
        started.append(s)
        return s

    yield make
    for s in started:
        if s.proc is not None and s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(10)


def _bodies(got):
    return sorted(m["body"] for m in got)


# ---------------------------------------------------------------- transactions
def test_transaction_commit_rollback_and_server_check(serve):
    s = serve({"Tx": (4, "TRANSACTION")})
    out = s.run(
        "tx_produce",
        {
            "topic": "Tx",
            "messages": [
                {"body": "committed", "end": "commit"},
                {"body": "rolled-back", "end": "rollback"},
                {"body": "check-commit"},
                {"body": "check-rollback"},
            ],
            "answers": {"check-commit": "commit", "check-rollback": "rollback"},
            "expect_checks": ["check-commit", "check-rollback"],
            "wait": 10,
        },
    )
    sent = {m["body"]: m for m in out["sent"]}
    assert all(m["transaction_id"] == m["message_id"] for m in sent.values())  # the broker's: the UNIQ_KEY
    checked = {c["body"]: c for c in out["checks"]}
    # only the half messages left open were checked, with the real topic and message id
    assert set(checked) == {"check-commit", "check-rollback"}
    assert checked["check-commit"]["topic"] == "Tx"
    assert checked["check-commit"]["message_id"] == sent["check-commit"]["message_id"]
    got = s.run(
        "receive_some",
        {
            "topic": "Tx",
            "group": "txg",
            "count": 2,
            "invisible": 20,
            "deadline": 4,
            "ack": ["committed", "check-commit"],
        },
    )
    assert _bodies(got) == ["check-commit", "committed"]
    assert {m["message_id"] for m in got} == {sent["committed"]["message_id"], sent["check-commit"]["message_id"]}
    # nothing else comes: the rolled back ones are gone, the committed ones acked
    assert s.run("receive_some", {"topic": "Tx", "group": "txg", "count": 1, "invisible": 20, "deadline": 1.5}) == []
    assert s.stop() == 0
    with MessageStore.open(s.store, read_only=True) as store:
        # the half messages: in RMQ_SYS_TRANS_HALF_TOPIC, with their real topic and queue
        halves = store.get("x", HALF, 0, 0, max_count=32).messages
        assert sorted(m.body.decode() for m in halves) == sorted(sent)
        for h in halves:
            assert h.properties["REAL_TOPIC"] == "Tx" and h.properties["TRAN_MSG"] == "true"
            assert h.properties["__transactionId__"] == h.unique_key
            assert h.sys_flag & R.TRANSACTION_ROLLBACK_TYPE == R.TRANSACTION_NOT_TYPE
        # one op record ("d", the half queue offset) per ended half message
        ops = store.get("x", OP, 0, 0, max_count=32).messages
        assert sorted(int(o.body.decode().rstrip(",")) for o in ops) == sorted(h.queue_offset for h in halves)
        assert {o.tags for o in ops} == {"d"}
        # the committed records: on the real topic, COMMIT_TYPE, pointing at their half record
        by_phys = {h.physical_offset: h for h in halves}
        committed = [m for q in range(4) for m in store.get("x", "Tx", q, 0, max_count=32).messages]
        assert sorted(m.body.decode() for m in committed) == ["check-commit", "committed"]
        for m in committed:
            assert m.sys_flag & R.TRANSACTION_ROLLBACK_TYPE == R.TRANSACTION_COMMIT_TYPE
            half = by_phys[m.prepared_transaction_offset]
            assert half.body == m.body and half.unique_key == m.unique_key
            assert m.queue_id == int(half.properties["REAL_QID"])


def test_pending_transaction_survives_restart(serve):
    # a producer sends a half message and goes away without ending it; a long check interval keeps it quiet
    s = serve({"TxR": (2, "TRANSACTION")}, conf=CONF + "transactionTimeOut=1000\ntransactionCheckInterval=600000\n")
    out = s.run("tx_produce", {"topic": "TxR", "messages": [{"body": "orphan"}, {"body": "done", "end": "commit"}]})
    assert out["checks"] == []
    assert s.stop() == 0
    s.conf.write_text(TX_CONF)
    s.start()
    # after the restart a new producer of the topic is asked about it, commits it, and it is consumed
    out = s.run(
        "tx_produce", {"topic": "TxR", "answers": {"orphan": "commit"}, "expect_checks": ["orphan"], "wait": 10}
    )
    assert [c["body"] for c in out["checks"]][:1] == ["orphan"]
    got = s.run(
        "receive_some",
        {"topic": "TxR", "group": "g", "count": 2, "invisible": 20, "deadline": 4, "ack": ["orphan", "done"]},
    )
    assert _bodies(got) == ["done", "orphan"]


# ---------------------------------------------------------------- FIFO
def test_fifo_group_order_under_redelivery(serve):
    s = serve({"Fifo": (4, "FIFO")}, fifo_groups=["fg"])
    msgs = [{"body": f"a{i}", "group": "A"} for i in range(5)] + [{"body": f"b{i}", "group": "B"} for i in range(3)]
    s.run("typed_produce", {"topic": "Fifo", "messages": msgs})
    log = s.run(
        "fifo_flow",
        {"topic": "Fifo", "group": "fg", "count": 8, "batch": 2, "invisible": 2, "skip": ["a1"], "seconds": 20},
    )
    seq_a = [(m["body"], m["attempt"]) for m in log if m["group"] == "A"]
    seq_b = [(m["body"], m["attempt"]) for m in log if m["group"] == "B"]
    # a1 was not acked: nothing after it in group A came until it came back (attempt 2) and was acked
    assert seq_a == [("a0", 1), ("a1", 1), ("a1", 2), ("a2", 1), ("a3", 1), ("a4", 1)]
    assert seq_b == [("b0", 1), ("b1", 1), ("b2", 1)]
    first_a1 = next(m["t"] for m in log if m["body"] == "a1")
    again_a1 = next(m["t"] for m in log if m["body"] == "a1" and m["attempt"] == 2)
    assert again_a1 - first_a1 >= 1.5  # its invisible time (2 s) ran out first
    # a group that is not FIFO gets everything at once, whatever is in flight
    log2 = s.run(
        "fifo_flow",
        {"topic": "Fifo", "group": "plain", "count": 8, "batch": 32, "invisible": 20, "skip": [], "seconds": 5},
    )
    assert sorted(m["body"] for m in log2) == sorted(m["body"] for m in msgs)


# ---------------------------------------------------------------- delay
def test_delay_message_not_delivered_before_its_time(serve):
    s = serve({"Later": (2, "DELAY"), "Now": (2, "NORMAL")})
    sent = s.run(
        "typed_produce",
        {"topic": "Later", "messages": [{"body": "d1", "deliver_in": 2}, {"body": "d2", "deliver_in": 3}]},
    )
    at = {m["body"]: m["deliver_at"] for m in sent}
    got = s.run("timed_receive", {"topic": "Later", "group": "dg", "count": 2, "seconds": 12})
    assert _bodies(got) == ["d1", "d2"]
    for m in got:
        assert m["t"] >= at[m["body"]], m  # never before its time
        assert m["t"] - at[m["body"]] < 3, m  # and not much later
        assert m["delivery_timestamp"] == at[m["body"]] * 1000
    assert s.stop() == 0
    with MessageStore.open(s.store, read_only=True) as store:
        for q in range(2):
            for m in store.get("x", "Later", q, 0, max_count=32).messages:
                assert m.store_timestamp >= int(m.properties["TIMER_DELIVER_MS"])
        timer = store.get("x", "rmq_sys_wheel_timer", 0, 0, max_count=32).messages
        assert sorted(m.body.decode() for m in timer) == ["d1", "d2"]
        assert {m.properties["REAL_TOPIC"] for m in timer} == {"Later"}


def test_delay_message_survives_restart(serve):
    s = serve({"LaterR": (2, "DELAY")})
    sent = s.run(
        "typed_produce",
        {
            "topic": "LaterR",
            "messages": [{"body": "soon", "deliver_in": 0.5}, {"body": "after-restart", "deliver_in": 4}],
        },
    )
    at = {m["body"]: m["deliver_at"] for m in sent}
    got = s.run("timed_receive", {"topic": "LaterR", "group": "dg", "count": 1, "seconds": 6})
    assert _bodies(got) == ["soon"]
    assert s.stop() == 0
    s.start()
    got = s.run("timed_receive", {"topic": "LaterR", "group": "dg", "count": 1, "seconds": 8})
    # the one delivered before the restart is not delivered again; the other comes at its time
    assert _bodies(got) == ["after-restart"]
    assert got[0]["t"] >= at["after-restart"]


# ---------------------------------------------------------------- in process (no client)
def _store(tmp_path):
    return MessageStore.open(str(tmp_path / "inproc"), StoreConfig(mapped_file_size_commit_log=1 << 20))


def test_pop_orderly_blocks_redelivers_and_dead_letters(tmp_path):
    from rocketstore.message import Message
    from rocketstore.broker.pop import PopState

    with _store(tmp_path) as store:
        store.create_topic("F", 1)
        for i in range(3):
            assert store.put(Message(topic="F", body=f"m{i}".encode()), 0).ok
        store.wait_dispatched(5)
        ps = PopState(store, "b")
        dead = []
        pop = lambda: ps.pop_orderly("g", "F", [0], 2, 1000, max_attempts=2, dead_letter=dead.append)  # noqa: E731
        first = pop()
        assert [p.message.body for p in first] == [b"m0", b"m1"] and [p.attempt for p in first] == [1, 1]
        assert pop() == []  # in flight: the queue gives nothing more
        assert ps.ack("g", "F", first[0].handle)
        assert pop() == []  # m1 still in flight
        for h in (first[1].handle,):
            h.retrieve_time -= 1000  # let its invisible time end
            ps.table["F@g"]["0"]["inflight"][str(h.offset)][0] -= 1000
        again = pop()
        assert [(p.message.body, p.attempt) for p in again] == [(b"m1", 2)]
        ps.table["F@g"]["0"]["inflight"][str(again[0].handle.offset)][0] -= 1000
        # attempt 3 would pass max attempts 2: dead-lettered, and the queue moves on
        assert pop() == [] and [m.body for m in dead] == [b"m1"]
        assert [p.message.body for p in pop()] == [b"m2"]


def test_settings_say_fifo_for_an_orderly_group(tmp_path):
    from rocketstore.grpc.protocol import definition_pb2 as pb
    from rocketstore.grpc.service import MessagingService, ServeConfig

    with _store(tmp_path) as store:
        SubscriptionGroups(store.root).set_fifo("orderly")
        svc = MessagingService(store, ServeConfig())
        try:
            for group, fifo in (("orderly", True), ("plain", False)):
                s = pb.Settings()
                s.subscription.group.name = group
                assert svc._merged_settings(s).subscription.fifo is fifo
        finally:
            svc.stop()


def test_transactions_rebuilt_from_half_and_op_queues(tmp_path):
    import queue

    from rocketstore.message import Message
    from rocketstore.grpc.protocol import definition_pb2 as pb
    from rocketstore.broker.transaction import Transactions
    from rocketstore.grpc.transactions_grpc import end_transaction, grpc_checker

    outbox = queue.Queue()
    extra = {"transactionTimeOut": "0", "transactionCheckInterval": "0", "transactionCheckMax": "2"}
    with _store(tmp_path) as store:
        tx = Transactions(store, extra)
        tx.add_checker(grpc_checker(lambda topic: [outbox]))
        for i in range(3):
            m = Message(
                topic="T",
                body=f"t{i}".encode(),
                sys_flag=R.TRANSACTION_PREPARED_TYPE,
                properties={"UNIQ_KEY": f"ID{i}", "PGROUP": "T", "TRAN_MSG": "true"},
                born_timestamp=1,
            )
            assert tx.prepare(m, i % 2).ok
        assert end_transaction(tx, "T", "ID0", pb.TransactionResolution.ROLLBACK, False)[0] == pb.Code.OK
        assert (
            end_transaction(tx, "T", "ID0", pb.TransactionResolution.COMMIT, False)[0] == pb.Code.INVALID_TRANSACTION_ID
        )
        store.wait_dispatched(5)
    with _store(tmp_path) as store:
        tx = Transactions(store, extra)
        tx.add_checker(grpc_checker(lambda topic: [outbox]))
        assert tx.pending_ids() == ["ID1", "ID2"]
        assert tx.check_once() == 2
        cmd = outbox.get_nowait().recover_orphaned_transaction_command
        assert cmd.transaction_id == "ID1" and cmd.message.topic.name == "T" and cmd.message.body == b"t1"
        assert end_transaction(tx, "T", "ID1", pb.TransactionResolution.COMMIT, True)[0] == pb.Code.OK
        assert tx.check_once() == 1  # ID2: second check
        assert tx.check_once() == 0 and tx.pending_ids() == []  # check max reached: given up
        store.wait_dispatched(5)
        assert [m.body for m in store.get("x", "T", 1, 0).messages] == [b"t1"]
        assert [m.body for m in store.get("x", "TRANS_CHECK_MAX_TIME_TOPIC", 0, 0).messages] == [b"t2"]


def test_transactions_taken_over_with_rocketmq_check_copies(tmp_path):
    """A half queue as RocketMQ's broker leaves it when stopped mid check round: the half message, then the copy
    its check wrote (TRANSACTION_CHECK_TIMES 2), the check offset not yet past the first. Only the copy is
    pending, with its two checks counted towards transactionCheckMax."""
    import queue

    from rocketstore.message import Message
    from rocketstore.broker.transaction import Transactions
    from rocketstore.grpc.transactions_grpc import grpc_checker

    outbox = queue.Queue()
    extra = {"transactionTimeOut": "0", "transactionCheckInterval": "0", "transactionCheckMax": "3"}
    props = {"UNIQ_KEY": "ID0", "__transactionId__": "ID0", "PGROUP": "G", "REAL_TOPIC": "T", "REAL_QID": "0"}
    with _store(tmp_path) as store:
        for extra_props in ({}, {"TRANSACTION_CHECK_TIMES": "2"}):
            m = Message(topic=HALF, body=b"t0", properties={**props, **extra_props}, born_timestamp=1)
            assert store.put(m, 0).ok
        store.wait_dispatched(5)
    with _store(tmp_path) as store:
        tx = Transactions(store, extra)
        tx.add_checker(grpc_checker(lambda topic: [outbox]))
        assert [(h.half_offset, h.checks) for h in tx.pending.values()] == [(1, 2)]
        assert store.consumer_offsets.query("CID_RMQ_SYS_TRANS", HALF, 0) == 1
        assert tx.check_once() == 1 and outbox.qsize() == 1  # the third check
        assert tx.check_once() == 0 and tx.pending_ids() == []  # then given up
        store.wait_dispatched(5)
        assert [m.body for m in store.get("x", "TRANS_CHECK_MAX_TIME_TOPIC", 0, 0).messages] == [b"t0"]
