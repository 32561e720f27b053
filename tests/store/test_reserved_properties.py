"""The one rule for property names a user may set (rocketstore.validation): RocketMQ's system properties
(MessageConst.STRING_HASH_SET) are refused at the user-facing entry points (the CLI's --property, the Spark
sink), while MessageStore.put keeps taking them, as a broker takes them from a client library."""

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.validation import property_name_problem

# a few of MessageConst's names, by their values in RocketMQ's source (PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
# PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_DELAY_TIME_LEVEL, PROPERTY_WAIT_STORE_MSG_OK, PROPERTY_REAL_TOPIC,
# PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED, PROPERTY_PRODUCER_GROUP, PROPERTY_RECONSUME_TIME,
# PROPERTY_MAX_RECONSUME_TIMES, PROPERTY_MESSAGE_TYPE, PROPERTY_TIMER_DELIVER_MS, PROPERTY_BORN_TIMESTAMP,
# PROPERTY_CRC32, PROPERTY_INNER_NUM)
SYSTEM = [
    "UNIQ_KEY",
    "KEYS",
    "TAGS",
    "DELAY",
    "WAIT",
    "REAL_TOPIC",
    "REAL_QID",
    "TRAN_MSG",
    "PGROUP",
    "RECONSUME_TIME",
    "MAX_RECONSUME_TIMES",
    "MSG_TYPE",
    "TIMER_DELIVER_MS",
    "BORN_TIMESTAMP",
    "__CRC32#",
    "INNER_NUM",
]


@pytest.mark.parametrize("name", SYSTEM)
def test_system_properties_are_refused_naming_them(name):
    problem = property_name_problem(name)
    assert problem is not None and repr(name) in problem and "reserved" in problem


@pytest.mark.parametrize("name", ["color", "order-id", "__SHARDINGKEY", "uniq_key", "a b"])
def test_user_properties_are_allowed(name):
    assert property_name_problem(name) is None  # __SHARDINGKEY picks the queue; names are case-sensitive


@pytest.mark.parametrize("name", ["", "__RMQ.TRANSIENT.x", "a\x01b"])
def test_other_names_a_store_cannot_keep(name):
    assert property_name_problem(name) is not None


def test_the_library_put_still_takes_a_client_libraries_system_properties(tmp_path):
    # a RocketMQ client sets UNIQ_KEY itself; golden replays put such messages as they were sent
    with MessageStore.open(str(tmp_path / "s"), StoreConfig(mapped_file_size_commit_log=1 << 20)) as s:
        r = s.put(Message("T", b"x", properties={"UNIQ_KEY": "AC11000100002A9F0000000000000001", "WAIT": "true"}), 0)
        assert r.ok
        assert s.look(r.physical_offset).unique_key == "AC11000100002A9F0000000000000001"


def test_the_spark_sink_uses_the_same_rule():
    pytest.importorskip("pyarrow")
    from rocketstore import validation
    from rocketstore.spark import sink_rows

    assert sink_rows.RESERVED_PROPERTIES is validation.RESERVED_PROPERTIES
    assert "reserved" in sink_rows.property_name_problem("UNIQ_KEY")
    assert "tags / keys columns" in sink_rows.property_name_problem("TAGS")
