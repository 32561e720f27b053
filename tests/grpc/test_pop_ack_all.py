"""An AckMessage's entries acked as one durable change: one journal sync for the call however many entries
(32 acks were 32 fdatasyncs, each writing the group's whole in-flight table), each entry answered as a single
ack would be, and every ack still there after a crash (the state reloaded from the files, not closed)."""

import os

from rocketstore.broker import journal as J
from rocketstore.broker.pop import PopState
from rocketstore.config.store_config import StoreConfig
from rocketstore.message import Message
from rocketstore.store.facade import MessageStore


def _popped(tmp_path, topics: dict[str, int]):
    store = MessageStore.open(str(tmp_path / "store"), StoreConfig(mapped_file_size_commit_log=1 << 20))
    for topic, n in topics.items():
        store.create_topic(topic, 1)
        for i in range(n):
            assert store.put(Message(topic=topic, body=f"{topic}{i}".encode()), 0).ok
    store.wait_dispatched(5)
    ps = PopState(store, "b")
    popped = {t: ps.pop("g", t, [0], 32, 60_000) for t in topics}
    assert {t: len(p) for t, p in popped.items()} == topics
    return store, ps, popped


def _counting_syncs(monkeypatch) -> list:
    syncs = []
    real = os.fdatasync
    monkeypatch.setattr(J.os, "fdatasync", lambda fd: (syncs.append(fd), real(fd))[1])
    return syncs


def test_one_sync_for_an_ack_call_and_the_acks_survive_a_crash(tmp_path, monkeypatch):
    store, ps, popped = _popped(tmp_path, {"Jobs": 6, "Other": 2})
    try:
        p = popped["Jobs"]
        expired = p[5].handle
        expired.invisible_time = 0  # its invisible time ended: retrieve time + 0 is past
        syncs = _counting_syncs(monkeypatch)
        acks = [("Jobs", x.handle) for x in p[:4]] + [("Jobs", expired), ("Other", popped["Other"][0].handle)]
        assert ps.ack_all("g", acks) == [True, True, True, True, False, True]
        assert len(syncs) == 1  # two groups' lines (Jobs@g, Other@g), one append, one sync
        assert ps.ack_all("g", acks[:2]) == [True, True] and len(syncs) == 1  # acked already: nothing to sync
        # a crash: the state as the files hold it, read by a new PopState without close()
        again = PopState(store, "b")
        assert sorted(int(o) for o in again.table["Jobs@g"]["0"]["inflight"]) == [4, 5]
        assert sorted(int(o) for o in again.table["Other@g"]["0"]["inflight"]) == [1]
    finally:
        store.close()


def test_ack_is_ack_all_of_one(tmp_path, monkeypatch):
    store, ps, popped = _popped(tmp_path, {"Jobs": 2})
    try:
        syncs = _counting_syncs(monkeypatch)
        h = popped["Jobs"][0].handle
        assert ps.ack("g", "Jobs", h) is True and len(syncs) == 1
        assert ps.ack("g", "Jobs", h) is True and len(syncs) == 1  # again: acked already
        h2 = popped["Jobs"][1].handle
        h2.invisible_time = 0
        assert ps.ack("g", "Jobs", h2) is False and len(syncs) == 1
        assert list(PopState(store, "b").table["Jobs@g"]["0"]["inflight"]) == ["1"]
    finally:
        store.close()


def test_ack_message_answers_each_entry(tmp_path):
    # over gRPC: two live handles and one that does not parse, in one AckMessage: each entry its own status,
    # the call MULTIPLE_RESULTS (as RocketMQ's proxy answers a mixed batch), the two acked durably
    import grpc

    from rocketstore.cli.server import Server
    from rocketstore.grpc.protocol import definition_pb2 as pb, service_pb2 as spb, service_pb2_grpc as sgrpc

    conf = StoreConfig.from_properties({"mappedFileSizeCommitLog": "1048576"})
    s = Server(str(tmp_path / "store"), "127.0.0.1:0", conf)
    s.start()
    try:
        s.store.create_topic("Jobs", 1)
        for i in range(3):
            assert s.store.put(Message(topic="Jobs", body=b"job%d" % i, properties={"UNIQ_KEY": f"01{i:032X}"}), 0).ok
        md = [("x-mq-client-id", "ack-all-test")]
        with grpc.insecure_channel(f"127.0.0.1:{s.port}") as ch:
            stub = sgrpc.MessagingServiceStub(ch)
            req = spb.ReceiveMessageRequest(
                group=pb.Resource(name="g"),
                batch_size=32,
                message_queue=pb.MessageQueue(topic=pb.Resource(name="Jobs"), id=-1),
                filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"),
            )
            req.invisible_duration.FromMilliseconds(60_000)
            req.long_polling_timeout.FromMilliseconds(1000)
            got = [p.message for p in stub.ReceiveMessage(req, metadata=md, timeout=10) if p.HasField("message")]
            assert sorted(m.body for m in got) == [b"job0", b"job1", b"job2"]
            by_body = {m.body: m.system_properties for m in got}
            entries = [
                spb.AckMessageEntry(message_id=by_body[b].message_id, receipt_handle=by_body[b].receipt_handle)
                for b in (b"job0", b"job2")
            ] + [spb.AckMessageEntry(message_id="01" + "0" * 32, receipt_handle="not a handle")]
            r = stub.AckMessage(
                spb.AckMessageRequest(group=pb.Resource(name="g"), topic=pb.Resource(name="Jobs"), entries=entries),
                metadata=md,
                timeout=5,
            )
        assert r.status.code == pb.Code.MULTIPLE_RESULTS
        assert [e.status.code for e in r.entries] == [pb.Code.OK, pb.Code.OK, pb.Code.INVALID_RECEIPT_HANDLE]
        assert [e.receipt_handle for e in r.entries] == [x.receipt_handle for x in entries]
        assert list(PopState(s.store, "b").table["Jobs@g"]["0"]["inflight"]) == ["1"]  # job1, from the files
    finally:
        s.stop()
