"""The broker's sends over the wire: SEND_MESSAGE, SEND_MESSAGE_V2's short names, batches (SEND_BATCH_MESSAGE and
batch=true), what the store then holds (read back with store.get), and RocketMQ's refusals."""

import struct

import pytest
from broker_fixtures import open_store, with_broker
from remoting_client import send_header, v2

from rocketstore.formats.inner_batch import encode_messages
from rocketstore.formats.record import make_msg_id, host_to_bytes
from rocketstore.remoting.broker import properties as BP
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R


def send_ext(topic="T", queue_id=0, props="TAGS\x01A\x02KEYS\x01k1\x02UNIQ_KEY\x01U1\x02", **more):
    """A send's header with a tag, a key and a unique key, and flag 3 (read back from the store)."""
    return send_header(topic, queue_id, props, **{"flag": "3", **more})


def test_send_auto_creates_from_tbw102_and_the_store_holds_it(tmp_path):
    async def scenario(broker, c, store):
        r1 = await c.call(RC.SEND_MESSAGE, send_ext(queue_id=2), b"hello")
        r2 = await c.call(RC.SEND_MESSAGE_V2, v2(send_ext(queue_id=2, props="TAGS\x01B\x02")), b"world")
        return r1, r2, broker.routes.route("T")

    (r1, r2, route), store = with_broker(tmp_path, scenario)
    assert (r1.code, r1.remark) == (R.SUCCESS, None)
    assert r1.ext_fields["queueId"] == "2" and r1.ext_fields["queueOffset"] == "0"
    assert r1.ext_fields["transactionId"] == "U1"
    assert set(r1.ext_fields) == {"msgId", "queueId", "queueOffset", "transactionId", "MSG_REGION", "TRACE_ON"}
    assert (r1.ext_fields["MSG_REGION"], r1.ext_fields["TRACE_ON"]) == ("DefaultRegion", "true")
    assert r2.code == R.SUCCESS and r2.ext_fields["queueOffset"] == "1"
    # the created topic: min(4 asked, TBW102's 8) queues, registered with the name server
    assert store.topic_configs["T"]["writeQueueNums"] == 4
    assert [(q.broker_name, q.write_queue_nums, q.perm) for q in route.queue_datas] == [("rocketstore", 4, 6)]
    store.wait_dispatched(10)
    got = store.get("g", "T", 2, 0)
    assert [m.body for m in got.messages] == [b"hello", b"world"]
    m0 = got.messages[0]
    assert (
        r1.ext_fields["msgId"] == m0.msg_id == make_msg_id(host_to_bytes(store.config.store_host), m0.physical_offset)
    )
    assert (m0.flag, m0.born_timestamp, m0.tags, m0.keys) == (3, 1700000000000, "A", ["k1"])
    assert m0.properties["CLUSTER"] == "DefaultCluster" and m0.unique_key == "U1"
    # the broker's HashMap(128) order: bucket of each name's hash, then insertion order
    names = ["TAGS", "KEYS", "UNIQ_KEY", "CLUSTER"]
    assert m0.properties_raw.decode().startswith(BP.to_string({n: m0.properties[n] for n in names}))
    assert got.messages[1].unique_key and r2.ext_fields["transactionId"] == got.messages[1].unique_key
    store.close()


def test_hashmap_order_by_hand():
    # String.hashCode by hand: "TAGS" = 84*31^3 + 65*31^2 + 71*31 + 83 = 2567193, "KEYS" = 2303476;
    # buckets of a 128-slot HashMap, (h ^ h >>> 16) & 127: TAGS 25 ^ 39 = 62, KEYS 116 ^ 35 = 87
    from rocketstore.formats.javahash import java_string_hash

    assert java_string_hash("TAGS") == 2567193 and java_string_hash("KEYS") == 2303476
    assert BP.hashmap_order(["KEYS", "TAGS"]) == ["TAGS", "KEYS"]
    # a default 16-slot map would put KEYS (87 & 15 = 7) before TAGS (62 & 15 = 14)
    assert BP.hashmap_order(["TAGS", "KEYS"], capacity=16) == ["KEYS", "TAGS"]
    assert BP.to_string({"KEYS": "k", "TAGS": "t"}) == "TAGS\x01t\x02KEYS\x01k\x02"


def test_refusals(tmp_path):
    async def scenario(broker, c, store):
        out = {}
        out["bad_name"] = await c.call(RC.SEND_MESSAGE, send_ext(topic="a b"), b"x")
        out["forbidden"] = await c.call(RC.SEND_MESSAGE, send_ext(topic="SCHEDULE_TOPIC_XXXX"), b"x")
        out["no_default"] = await c.call(RC.SEND_MESSAGE, send_ext(topic="U", defaultTopic="Other"), b"x")
        out["queue"] = await c.call(RC.SEND_MESSAGE, send_ext(queue_id=9), b"x")
        out["too_big"] = await c.call(RC.SEND_MESSAGE, send_ext(), b"x" * (4 * 1024 * 1024 + 1))
        out["missing"] = await c.call(RC.SEND_MESSAGE, {"topic": "T"}, b"x")
        out["tx"] = await c.call(RC.SEND_MESSAGE, send_ext(props="TRAN_MSG\x01true\x02"), b"x")
        return out

    out, store = with_broker(tmp_path, scenario)
    store.close()
    assert out["bad_name"].code == R.INVALID_PARAMETER
    # a refusal after the header parsed carries the region too (preSend); one before it does not
    assert out["bad_name"].ext_fields == {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
    assert not out["missing"].ext_fields
    assert (out["forbidden"].code, out["forbidden"].remark) == (
        R.NO_PERMISSION, "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.")  # fmt: skip
    assert out["no_default"].code == R.TOPIC_NOT_EXIST
    assert out["no_default"].remark == (
        "topic[U] not exist, apply first please!\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for "
        "further details."
    )
    assert out["queue"].code == R.INVALID_PARAMETER and out["queue"].remark.startswith("request queueId[9] is illegal")
    assert out["too_big"].code == R.MESSAGE_ILLEGAL
    assert "msg body length limit 4194304B" in out["too_big"].remark
    assert (out["missing"].code, out["missing"].remark) == (
        R.SYSTEM_ERROR, "RemotingCommandException: the custom field <producerGroup> is null")  # fmt: skip
    # a prepared message is a half message now (refused only with rejectTransactionMessage:
    # test_broker_transaction.py)
    assert out["tx"].code == R.SUCCESS and out["tx"].ext_fields["queueOffset"] == "0"


@pytest.mark.parametrize("how", ["batch_code", "batch_flag"])
def test_batch(tmp_path, how):
    body = encode_messages(
        [(b"m1", "TAGS\x01A\x02UNIQ_KEY\x01X1\x02", 0), (b"m2", "TAGS\x01B\x02UNIQ_KEY\x01X2\x02", 5)]
    )

    async def scenario(broker, c, store):
        await c.call(RC.SEND_MESSAGE, send_ext(queue_id=1), b"first")
        if how == "batch_code":
            return await c.call(RC.SEND_BATCH_MESSAGE, v2(send_ext(queue_id=1, props="")), body)
        return await c.call(RC.SEND_MESSAGE, send_ext(queue_id=1, props="", batch="true"), body)

    r, store = with_broker(tmp_path, scenario)
    assert r.code == R.SUCCESS and r.ext_fields["queueOffset"] == "1" and r.ext_fields["queueId"] == "1"
    store.wait_dispatched(10)
    got = store.get("g", "T", 1, 1).messages
    assert [(m.body, m.tags, m.flag, m.unique_key) for m in got] == [(b"m1", "A", 0, "X1"), (b"m2", "B", 5, "X2")]
    assert r.ext_fields["msgId"] == ",".join(m.msg_id for m in got)
    assert "transactionId" not in r.ext_fields
    store.close()


def test_delay_level_goes_to_the_schedule_topic(tmp_path):
    async def scenario(broker, c, store):
        return await c.call(RC.SEND_MESSAGE, send_ext(queue_id=3, props="DELAY\x013\x02UNIQ_KEY\x01D1\x02"), b"later")

    r, store = with_broker(tmp_path, scenario)
    assert r.code == R.SUCCESS and r.ext_fields["queueId"] == "3"
    store.wait_dispatched(10)
    (m,) = store.get("g", "SCHEDULE_TOPIC_XXXX", 2, 0).messages  # level 3 -> queue 2
    assert (m.properties["REAL_TOPIC"], m.properties["REAL_QID"], m.properties["DELAY"]) == ("T", "3", "3")
    # its unit's tagsCode is the delivery time: store time + level 3's 10 s
    assert store.queue_unit("SCHEDULE_TOPIC_XXXX", 2, 0)[2] == m.store_timestamp + 10_000
    assert store.max_offset("T", 3) == 0
    store.close()


def test_delay_level_past_the_configured_ones_is_the_last(tmp_path):
    # HookUtils.transformDelayLevelMessage caps at ScheduleMessageService.maxDelayLevel: the number of
    # messageDelayLevel entries (here 3), and the DELAY property says the level it got
    async def scenario(broker, c, store):
        return await c.call(RC.SEND_MESSAGE, send_ext(queue_id=1, props="DELAY\x0117\x02UNIQ_KEY\x01D2\x02"), b"x")

    store = open_store(tmp_path, message_delay_level="1s 2s 3s")
    r, store = with_broker(tmp_path, scenario, store=store)
    assert r.code == R.SUCCESS
    store.wait_dispatched(10)
    (m,) = store.get("g", "SCHEDULE_TOPIC_XXXX", 2, 0).messages  # level 3 -> queue 2
    assert (m.properties["DELAY"], m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == ("3", "T", "1")
    assert store.queue_unit("SCHEDULE_TOPIC_XXXX", 2, 0)[2] == m.store_timestamp + 3_000
    store.close()


def test_schedule_delivers_when_due(tmp_path):
    from rocketstore.remoting.broker.schedule import ScheduleService

    async def scenario(broker, c, store):
        return await c.call(RC.SEND_MESSAGE, send_ext(queue_id=0, props="DELAY\x011\x02TAGS\x01Z\x02"), b"soon")

    r, store = with_broker(tmp_path, scenario)
    store.wait_dispatched(10)
    s = ScheduleService(store)
    (m,) = store.get("g", "SCHEDULE_TOPIC_XXXX", 0, 0).messages
    assert s.deliver_due(m.store_timestamp + 999) == 0
    assert s.deliver_due(m.store_timestamp + 1000) == 1
    store.wait_dispatched(10)
    (d,) = store.get("g", "T", 0, 0).messages
    assert (d.body, d.tags, d.topic, d.queue_id) == (b"soon", "Z", "T", 0)
    assert "DELAY" not in d.properties and d.properties["REAL_TOPIC"] == "T"
    assert ScheduleService(store).offsets == {1: 1}  # config/delayOffset.json read back
    assert open(store.root + "/config/delayOffset.json").read() == '{"offsetTable":{1:1}}'
    store.close()


def _unused():
    return struct
