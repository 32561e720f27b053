"""StoredMessage.record(): the bytes a pull answers with, taken from the native get's copy of each record without
decoding the message; checked against the CommitLog's own bytes at the message's offset and size."""

from broker_fixtures import open_store

from rocketstore import Message, engine


def test_record_is_the_commitlog_record(tmp_path):
    store = open_store(tmp_path)
    try:
        for i in range(40):
            store.put(Message("T", b"body-%d" % i, tags="A", keys=[f"k{i}"]), 0)
        store.wait_dispatched(30)
        got = store.get("g", "T", 0, 0, 32, "*")
        assert len(got.messages) == 32
        records = [m.record() for m in got.messages]  # before anything decodes the messages
        for m, rec in zip(got.messages, records):
            on_disk = bytes(store.record_bytes(m.physical_offset, m.size))
            if engine.native is not None:
                assert rec == on_disk
            else:
                assert rec is None  # the Python get decodes as it reads: the caller reads the CommitLog
            assert m.record() is None  # decoded now: no copy kept
            assert m.body == b"body-%d" % m.queue_offset
    finally:
        store.close()
