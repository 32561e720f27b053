"""Lookups given a malformed id: a RocketStoreError naming the id and what is wrong (issue #24), while a
well-formed id that names no message is None."""

import pytest

from rocketstore import Message, MessageStore, RocketStoreError, StoreConfig
from rocketstore.errors import InvalidMessageIdError


@pytest.fixture
def store(tmp_path):
    with MessageStore.open(str(tmp_path / "s"), StoreConfig(mapped_file_size_commit_log=1 << 20)) as s:
        s.create_topic("T", 1)
        r = s.put(Message("T", b"x", properties={"UNIQ_KEY": "AC11000100002A9F0000000000000001"}), 0)
        assert r.ok
        yield s, r


@pytest.mark.parametrize(
    "msg_id, problem",
    [
        ("x", "1 character,"),
        ("", "0 characters,"),
        ("7F00000100002A9F00000000000000", "30 characters,"),  # 15 bytes: neither 16 (IPv4) nor 28 (IPv6)
        ("7F00000100002A9F000000000000000G", "not hexadecimal: 'G'"),
        ("7F00000100002A9F 000000000000000", "not hexadecimal: ' '"),  # bytes.fromhex would skip the blank
    ],
)
def test_malformed_msg_id_raises_naming_it(store, msg_id, problem):
    s, _ = store
    with pytest.raises(RocketStoreError) as e:
        s.by_msg_id(msg_id)
    assert isinstance(e.value, InvalidMessageIdError) and isinstance(e.value, ValueError)  # ValueError as before
    assert repr(msg_id) in str(e.value) and problem in str(e.value)


def test_well_formed_ids_answer_a_message_or_none(store):
    s, r = store
    # 127.0.0.1:10911 (the default store host: 7F000001, port 0x2A9F), offset 0: the one record
    assert r.msg_id == "7F00000100002A9F0000000000000000"
    assert s.by_msg_id("7F00000100002A9F0000000000000000").body == b"x"
    assert s.by_msg_id("7f00000100002a9f0000000000000000").body == b"x"  # hex in either case
    assert s.by_msg_id("7F00000100002A9F0000000000001000") is None  # no record starts there
    assert s.by_msg_id("7F00000100002A9FFFFFFFFFFFFFFFFF") is None  # offset -1
    assert s.by_msg_id("0A00000100002A9F0000000000000000") is None  # another store host
    assert s.by_unique_key("T", "AC11000100002A9F0000000000000001").body == b"x"
    assert s.by_unique_key("T", "x") is None and s.by_unique_key("Nope", "x") is None
    assert s.look(-5) is None and s.look(1 << 70) is None


def test_a_msg_id_of_another_type_is_a_type_error(store):
    s, _ = store
    with pytest.raises(TypeError):
        s.by_msg_id(None)
