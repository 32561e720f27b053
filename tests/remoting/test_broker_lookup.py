"""VIEW_MESSAGE_BY_ID (33) and QUERY_MESSAGE (12) as QueryMessageProcessor answers them: the body is the stored
records' bytes (compared with the CommitLog segment read directly, and decoded field by field), the query's
response header carries indexLastUpdateTimestamp / indexLastUpdatePhyoffset, `_UNIQUE_KEY_QUERY` makes the broker
use its defaultQueryMaxNum. Then messages sent by the C++-core client are found by key and by msgId over the wire."""

import struct

import pytest
from broker_fixtures import open_store, with_broker
from remoting_client import Client

from rocketstore import Message
from rocketstore.formats.record import decode_record_py
from rocketstore.remoting.broker import Broker
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R
from rocketstore.remoting.namesrv import NameServer

LONG_MAX = 2**63 - 1


def segment_bytes(store, phys, size):
    with open(store.commitlog_position(phys)[0], "rb") as f:
        f.seek(phys % (16 << 20))
        return f.read(size)


def records(body: bytes) -> list:
    """The records of an answer's body, one after another (MessageDecoder.decodes)."""
    out, pos = [], 0
    while pos < len(body):
        size = struct.unpack_from(">i", body, pos)[0]
        out.append(body[pos : pos + size])
        pos += size
    assert pos == len(body)
    return out


def query_ext(key, topic="T", max_num=32, begin=0, end=LONG_MAX, **more):
    ext = {"topic": topic, "key": key, "maxNum": str(max_num), "beginTimestamp": str(begin),
           "endTimestamp": str(end)}  # fmt: skip
    ext.update(more)
    return ext


def test_view_message_by_offset_is_the_stored_record(tmp_path):
    async def scenario(broker, c, store):
        store.create_topic("T", 1)
        puts = [store.put(Message("T", f"body{i}".encode(), tags="tg", keys=f"k{i}", properties={"p": str(i)}), 0)
                for i in range(3)]  # fmt: skip
        store.wait_dispatched(10)
        out = {"puts": puts, "views": [await c.call(RC.VIEW_MESSAGE_BY_ID, {"offset": str(p.physical_offset)})
                                       for p in puts]}  # fmt: skip
        out["middle"] = await c.call(RC.VIEW_MESSAGE_BY_ID, {"offset": str(puts[0].physical_offset + 4)})
        out["past"] = await c.call(RC.VIEW_MESSAGE_BY_ID, {"offset": "99999999"})
        out["missing"] = await c.call(RC.VIEW_MESSAGE_BY_ID, {"topic": "T"})
        return out

    out, store = with_broker(tmp_path, scenario)
    for i, (p, v) in enumerate(zip(out["puts"], out["views"])):
        assert (v.code, v.remark) == (R.SUCCESS, None)
        assert v.body == segment_bytes(store, p.physical_offset, p.size)
        m = decode_record_py(v.body)
        assert (m.topic, m.body, m.tags, m.keys, m.properties["p"]) == (
            "T",
            f"body{i}".encode(),
            "tg",
            [f"k{i}"],
            str(i),
        )
        assert (m.physical_offset, m.queue_offset) == (p.physical_offset, i)
    offset = out["puts"][0].physical_offset + 4
    assert (out["middle"].code, out["middle"].remark) == (
        R.SYSTEM_ERROR,
        f"can not find message by the offset, {offset}",
    )
    assert (out["past"].code, out["past"].remark) == (R.SYSTEM_ERROR, "can not find message by the offset, 99999999")
    assert out["missing"].code == R.SYSTEM_ERROR and "the custom field <offset> is null" in out["missing"].remark
    store.close()


def test_query_by_key_and_by_unique_key(tmp_path):
    async def scenario(broker, c, store):
        store.create_topic("T", 2)
        store.create_topic("Other", 1)
        puts = [
            store.put(Message("T", b"a", keys="k1"), 0),
            store.put(Message("Other", b"b", keys="k1"), 0),  # same key, another topic
            store.put(Message("T", b"c", keys=["k2", "k1"]), 1),
            store.put(Message("T", b"d", keys="k2", properties={"UNIQ_KEY": "0A0B0C0D0E0F"}), 1),
        ]
        store.wait_dispatched(10)
        out = {"puts": puts}
        out["k1"] = await c.call(RC.QUERY_MESSAGE, query_ext("k1"))
        out["late"] = await c.call(RC.QUERY_MESSAGE, query_ext("k1", begin=puts[-1].store_timestamp + 60_000))
        out["one"] = await c.call(RC.QUERY_MESSAGE, query_ext("k2", max_num=1))
        # with the unique-key flag the broker takes defaultQueryMaxNum (32), whatever maxNum says
        out["flag"] = await c.call(RC.QUERY_MESSAGE, query_ext("k2", max_num=1, _UNIQUE_KEY_QUERY="true"))
        out["uniq"] = await c.call(RC.QUERY_MESSAGE, query_ext("0A0B0C0D0E0F", _UNIQUE_KEY_QUERY="true"))
        out["missing"] = await c.call(RC.QUERY_MESSAGE, {"topic": "T", "key": "k1"})
        return out

    out, store = with_broker(tmp_path, scenario)
    puts = out["puts"]

    def stored(i):
        return segment_bytes(store, puts[i].physical_offset, puts[i].size)

    r = out["k1"]
    assert (r.code, r.remark) == (R.SUCCESS, None)
    assert records(r.body) == [stored(0), stored(2)]  # CommitLog order, topic T only
    # the index's newest entry: the last message put (IndexHeader endTimestamp / endPhyOffset)
    assert int(r.ext_fields["indexLastUpdateTimestamp"]) == puts[-1].store_timestamp
    assert int(r.ext_fields["indexLastUpdatePhyoffset"]) == puts[-1].physical_offset
    assert (out["late"].code, out["late"].remark) == (
        R.QUERY_NOT_FOUND,
        "can not find message, maybe time range not correct",
    )
    assert len(records(out["one"].body)) == 1
    assert records(out["flag"].body) == [stored(2), stored(3)]
    assert records(out["uniq"].body) == [stored(3)]
    assert out["missing"].code == R.SYSTEM_ERROR and "the custom field <maxNum> is null" in out["missing"].remark
    store.close()


@pytest.fixture
def remoting_env(loop_thread, tmp_path):
    store = open_store(tmp_path)
    store.create_topic("T", 4)
    ns = NameServer()
    broker = Broker(store, routes=ns.routes)

    async def start():
        nport = await ns.start("127.0.0.1", 0)
        return nport, await broker.start("127.0.0.1", 0)

    nport, bport = loop_thread.run(start())
    yield {"namesrv": f"127.0.0.1:{nport}", "port": bport, "store": store, "loop": loop_thread}

    async def stop():
        await broker.close()
        await ns.close()

    loop_thread.run(stop())
    store.close()


SENT = [{"body": f"cpp-{i}", "tag": "TagA", "keys": f"order-{i}", "properties": {"shop": f"s{i}"}} for i in range(3)]


def test_cpp_client_messages_found_by_key_and_msg_id(cpp_client, remoting_env):
    env = remoting_env
    out = cpp_client("produce", env["namesrv"], {"topic": "T", "mode": "sync", "messages": SENT})
    assert all(r.get("status") == 0 for r in out), out
    env["store"].wait_dispatched(10)

    async def lookups():
        c = await Client.connect(env["port"])
        try:
            answers = []
            for spec, sent in zip(SENT, out):
                by_key = await c.call(RC.QUERY_MESSAGE, query_ext(spec["keys"]))
                # the client's msg id is its UNIQ_KEY: viewMessage by unique key sends the flag
                by_uniq = await c.call(RC.QUERY_MESSAGE, query_ext(sent["msg_id"], _UNIQUE_KEY_QUERY="true"))
                (record,) = records(by_key.body)
                # the offset msgId (store host + CommitLog offset) the client decodes for VIEW_MESSAGE_BY_ID
                offset = int(decode_record_py(record).msg_id[-16:], 16)
                by_id = await c.call(RC.VIEW_MESSAGE_BY_ID, {"topic": "T", "offset": str(offset)})
                answers.append((by_key, by_uniq, by_id))
            return answers
        finally:
            await c.close()

    answers = env["loop"].run(lookups())
    for spec, sent, (by_key, by_uniq, by_id) in zip(SENT, out, answers):
        assert by_key.code == by_uniq.code == by_id.code == R.SUCCESS
        assert by_key.body == by_uniq.body == by_id.body
        m = decode_record_py(by_id.body)
        assert (m.topic, m.body.decode(), m.tags, m.keys) == ("T", spec["body"], spec["tag"], [spec["keys"]])
        assert m.properties["shop"] == spec["properties"]["shop"]
        assert m.unique_key == sent["msg_id"] and m.queue_offset == sent["offset"]
