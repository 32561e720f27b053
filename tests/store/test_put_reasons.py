"""A refused put says why (PutResult.reason, PutBatchResult.reason) beside RocketMQ's status (issue #24):
the limits named are RocketMQ's (maxMessageSize 1024 * 1024 * 4, properties length a Java short)."""

import pytest

from rocketstore import Message, MessageStore, PutStatus, StoreConfig

MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # MessageStoreConfig.maxMessageSize's default
FIVE_MIB = 5 * 1024 * 1024


@pytest.fixture
def store(tmp_path):
    with MessageStore.open(str(tmp_path / "s"), StoreConfig(mapped_file_size_commit_log=1 << 23)) as s:
        s.create_topic("T", 2)
        yield s


@pytest.mark.parametrize(
    "msg, queue, status, words",
    [
        (Message("T", b"x" * FIVE_MIB), 0, "MESSAGE_ILLEGAL", ["5242880 bytes", "maxMessageSize", "4194304"]),
        (Message("T", b"x" * FIVE_MIB, keys=["k"]), 0, "MESSAGE_ILLEGAL", ["5242880 bytes", "maxMessageSize"]),
        (Message("T", b"x" * FIVE_MIB, properties={"a": "b"}), 1, "MESSAGE_ILLEGAL", ["maxMessageSize"]),
        (Message("T", b"x" * (MAX_MESSAGE_SIZE + 1)), 0, "MESSAGE_ILLEGAL", ["4194305 bytes"]),
        (Message("bad topic", b"x"), 0, "MESSAGE_ILLEGAL", ["'bad topic'", "illegal characters"]),
        (Message("T", b"x"), 2, "MESSAGE_ILLEGAL", ["queue id 2", "(0..1)"]),
        (Message("T", b"x"), -1, "MESSAGE_ILLEGAL", ["queue id -1"]),
        # 1 + 1 + 40000 + 1 bytes: "a", \x01, the value, \x02; the length field is a short (32767)
        (Message("T", b"x", properties={"a": "v" * 40000}), 0, "PROPERTIES_SIZE_EXCEEDED", ["40003 bytes", "32767"]),
        (Message("T", None), 0, "MESSAGE_ILLEGAL", ["no body"]),
        (Message("T", "text"), 0, "MESSAGE_ILLEGAL", ["bytes, not str"]),
        (Message("T", b"x", flag=1 << 31), 0, "MESSAGE_ILLEGAL", ["flag 2147483648", "Java int"]),
        (Message("T", b"x", tags="a\x01b"), 0, "MESSAGE_ILLEGAL", ["tags", "\\x01"]),
        (Message("T", b"x", properties={"k": "v\x02"}), 0, "MESSAGE_ILLEGAL", ["property 'k'"]),
    ],
)
def test_a_refusal_names_its_reason(store, msg, queue, status, words):
    r = store.put(msg, queue)
    assert r.status is PutStatus[status] and not r.ok
    assert r.reason is not None
    for w in words:
        assert w in r.reason, r.reason
    assert repr(r.reason) in repr(r)


def test_an_accepted_put_has_no_reason(store):
    for _ in range(3):  # the first put of a topic, then the fast paths (the put lane when native)
        assert store.put(Message("T", b"x"), 0).reason is None
        assert store.put(Message("T", b"x", keys=["k"], properties={"a": "b"}), 1).reason is None
    assert store.put_batch([Message("T", b"x"), Message("T", b"y")], 0).reason is None


def test_batch_refusals_name_their_reason(store):
    r = store.put_batch([Message("T", b"x" * FIVE_MIB)], 0)
    assert r.status is PutStatus.MESSAGE_ILLEGAL and "maxMessageSize" in r.reason
    r = store.put_batch([Message("T", b"x")], 7)
    assert r.status is PutStatus.MESSAGE_ILLEGAL and "queue id 7" in r.reason
    # 1000 messages of 4200 bytes: each fits, the batch (22 bytes a message + bodies) does not
    r = store.put_batch([Message("T", b"x" * 4200) for _ in range(1000)], 0)
    assert r.status is PutStatus.MESSAGE_ILLEGAL and "4222000 bytes" in r.reason


def test_a_raised_limit_accepts_the_body(tmp_path):
    cfg = StoreConfig.from_properties({"maxMessageSize": str(6 * 1024 * 1024), "mappedFileSizeCommitLog": str(1 << 23)})
    with MessageStore.open(str(tmp_path / "s"), cfg) as s:
        r = s.put(Message("T", b"x" * FIVE_MIB), 0)
        assert r.ok and r.reason is None
