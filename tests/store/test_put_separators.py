"""Bad input to put answered with a status, nothing appended (issue #17, point 13).

A record's properties are `name \\x01 value \\x02` pairs (MessageDecoder.string2messageProperties), so a tag,
key, property name or value holding \\x01 or \\x02 would read back as other properties: a tag could forge
UNIQ_KEY or KEYS and make by_unique_key / query answer with the wrong message. RocketMQ's proxy refuses
control characters in all of them (GrpcValidator.containControlCharacter); the store answers
MESSAGE_ILLEGAL. A queue id is a Java int in the record, and the broker's msgCheck refuses one at or above
max(writeQueueNums, readQueueNums) of a configured topic."""

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.message import PutStatus

ILLEGAL = PutStatus.MESSAGE_ILLEGAL


def forged(sep: str, field: str) -> dict:
    """Message fields with `sep` inside a tag, a key, a property name or a property value; each spells a
    forged UNIQ_KEY / KEYS when the separators are read back."""
    text = f"x{sep}UNIQ_KEY\x01FORGED\x02KEYS\x01forged-key" if sep == "\x02" else f"x{sep}FORGED"
    return {
        "tag": {"tags": text},
        "key": {"keys": ["ok", text]},
        "key string": {"keys": text},
        "property name": {"properties": {text: "v"}},
        "property value": {"properties": {"p": text}},
        "tag and key": {"tags": "t", "keys": text},
    }[field]


FIELDS = ["tag", "key", "key string", "property name", "property value", "tag and key"]


def store(tmp_path, **cfg):
    s = MessageStore.open(str(tmp_path / "s"), StoreConfig(mapped_file_size_commit_log=1 << 20, **cfg))
    s.create_topic("B", queues=2, attributes={"queue.type": "BatchCQ"})
    # real messages first: the plain topic's fast path is cached, and a real UNIQ_KEY exists to forge
    assert s.put(Message("T", b"real", tags="t", properties={"UNIQ_KEY": "REAL"}), 0).ok
    assert s.put(Message("T", b"plain", tags="t"), 0).ok
    assert s.put_batch([Message("B", b"real")], 0).ok
    return s


def nothing_appended(s, before: int) -> bool:
    return s.max_physical_offset == before and s.max_offset("T", 0) == 2 and s.max_offset("B", 0) == 1


@pytest.mark.parametrize("dispatch", [True, False])
@pytest.mark.parametrize("sep", ["\x01", "\x02"])
@pytest.mark.parametrize("field", FIELDS)
def test_separators_are_refused_and_nothing_is_appended(tmp_path, field, sep, dispatch):
    with store(tmp_path, dispatch_in_put_path=dispatch) as s:
        before = s.max_physical_offset
        bad = forged(sep, field)
        good = Message("T", b"good", tags="t")
        assert s.put(Message("T", b"f", **bad), 0).status is ILLEGAL
        assert s.put_batch([Message("T", b"f", **bad)] * 3, 0).status is ILLEGAL
        assert s.put_batch([good, Message("T", b"f", **bad), good], 0).status is ILLEGAL  # all or nothing
        assert s.put(Message("B", b"f", **bad), 0).status is ILLEGAL  # batch-CQ topic
        assert s.put_batch([Message("B", b"f"), Message("B", b"f", **bad)], 0).status is ILLEGAL
        assert s.put(Message("T", b"f", **bad)).status is ILLEGAL  # store picks the queue
        assert s.wait_dispatched(5)
        assert nothing_appended(s, before)


@pytest.mark.parametrize("field", FIELDS)
def test_unique_key_and_keys_cannot_be_forged(tmp_path, field):
    root = tmp_path / "s"
    with store(tmp_path) as s:
        s.put(Message("T", b"f", **forged("\x02", field)), 0)
        s.put_batch([Message("T", b"f", **forged("\x02", field))], 0)
        assert s.wait_dispatched(5)
        assert s.by_unique_key("T", "FORGED") is None
        assert s.query("T", "forged-key") == []
        assert s.by_unique_key("T", "REAL").body == b"real"
    with MessageStore.open(str(root), read_only=True) as s:  # read back from the CommitLog by reput
        assert s.by_unique_key("T", "FORGED") is None and s.query("T", "forged-key") == []


@pytest.mark.parametrize(
    "bad",
    [
        {"tags": 5},
        {"tags": ["t"]},
        {"keys": [1]},
        {"keys": 7},
        {"keys": b"k"},
        {"properties": {"a": 1}},
        {"properties": {1: "a"}},
        {"properties": ["a"]},
    ],
)
def test_tags_keys_and_properties_that_are_not_strings(tmp_path, bad):
    with store(tmp_path) as s:
        before = s.max_physical_offset
        assert s.put(Message("T", b"f", **bad), 0).status is ILLEGAL
        assert s.put_batch([Message("T", b"f", **bad)], 0).status is ILLEGAL
        assert s.put(Message("B", b"f", **bad), 0).status is ILLEGAL
        assert nothing_appended(s, before)


def test_legal_text_still_goes_in_and_reads_back_the_same(tmp_path):
    """Control characters other than the two separators are stored and read back unchanged."""
    with store(tmp_path) as s:
        m = Message("T", b"ok", tags="a\tb", keys=["k\x03", "k2"], properties={"p\x7f": "v\x00w"})
        r = s.put(m, 0)
        assert r.ok
        got = s.look(r.physical_offset)
        assert got.tags == "a\tb" and got.keys == ["k\x03", "k2"] and got.properties["p\x7f"] == "v\x00w"


@pytest.mark.parametrize("queue_id", [2**31, 2**32, 2**63, -1, -(2**31) - 1, 1.0, "0", None])
def test_queue_ids_outside_a_java_int_are_illegal(tmp_path, queue_id):
    with store(tmp_path) as s:
        before = s.max_physical_offset
        if queue_id is None:  # None means "pick one": not illegal
            assert s.put(Message("T", b"x"), queue_id).ok
            return
        assert s.put(Message("T", b"x"), queue_id).status is ILLEGAL  # the cached fast path
        assert s.put(Message("T", b"x", keys="k"), queue_id).status is ILLEGAL  # the general path
        assert s.put_batch([Message("T", b"x")] * 2, queue_id).status is ILLEGAL
        assert s.put(Message("B", b"x"), queue_id).status is ILLEGAL
        assert s.put_batch([Message("B", b"x")], queue_id).status is ILLEGAL
        assert s.max_physical_offset == before


def test_the_largest_java_int_is_a_queue_id(tmp_path):
    with store(tmp_path) as s:
        r = s.put(Message("T", b"x"), 2**31 - 1)
        assert r.ok and s.look(r.physical_offset).queue_id == 2**31 - 1


def test_a_configured_topic_takes_only_its_queues(tmp_path):
    """msgCheck: queueId < max(writeQueueNums, readQueueNums); the batch-CQ topic B has 2 queues."""
    with store(tmp_path) as s:
        s.create_topic("C", queues=3)
        assert s.put(Message("C", b"x"), 2).ok and s.put_batch([Message("C", b"x")], 2).ok
        before = s.max_physical_offset
        assert s.put(Message("C", b"x"), 3).status is ILLEGAL
        assert s.put(Message("C", b"x", keys="k"), 3).status is ILLEGAL
        assert s.put_batch([Message("C", b"x")], 3).status is ILLEGAL
        assert s.put(Message("B", b"x"), 2).status is ILLEGAL
        assert s.put_batch([Message("B", b"x")], 2).status is ILLEGAL
        assert s.max_physical_offset == before
        s.create_topic("C", queues=4)  # more queues: the new one is accepted at once
        assert s.put(Message("C", b"x"), 3).ok


@pytest.mark.parametrize("topic", [["T"], None, 5, ""])
def test_a_topic_that_is_not_a_name(tmp_path, topic):
    with store(tmp_path) as s:
        before = s.max_physical_offset
        for q in (0, None):
            assert s.put(Message(topic, b"x"), q).status is ILLEGAL
            assert s.put_batch([Message(topic, b"x")], q).status is ILLEGAL
        assert s.max_physical_offset == before
