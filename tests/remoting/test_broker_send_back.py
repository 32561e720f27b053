"""CONSUMER_SEND_MSG_BACK and sends to %RETRY%group over the wire, against RocketMQ's
AbstractSendMessageProcessor.consumerSendMsgBack and SendMessageProcessor.handleRetryAndDLQ: where the copy goes
(SCHEDULE_TOPIC_XXXX's queue delayLevel - 1, %RETRY%group, %DLQ%group), its properties and reconsume times as
RocketMQ's broker writes them, and the codes and remarks of the refusals."""

import time

from broker_fixtures import open_store, with_broker
from remoting_client import send_header

from rocketstore import Message
from rocketstore.remoting import fastjson
from rocketstore.remoting.broker import BrokerSettings
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R
from rocketstore.maintenance.verify import verify_store

FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."  # FAQUrl.suggestTodo
SCHEDULE = "SCHEDULE_TOPIC_XXXX"
ORIGINAL_PROPS = "TAGS\x01A\x02KEYS\x01k1\x02UNIQ_KEY\x01U1\x02"


def java_hash(s: str) -> int:
    """java.lang.String.hashCode (the test's own, for the HashMap order the broker writes properties in)."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h


def hashmap_string(pairs: list[tuple[str, str]]) -> str:
    """messageProperties2String over a HashMap(128) filled in `pairs` order: by bucket, then insertion."""

    def bucket(name):
        h = java_hash(name)
        return (h ^ (h >> 16)) & 127

    order = sorted(range(len(pairs)), key=lambda i: (bucket(pairs[i][0]), i))
    return "".join(f"{pairs[i][0]}\x01{pairs[i][1]}\x02" for i in order)


def put_original(store, reconsume=0, topic="T", queue=1):
    if topic not in store.topic_configs:
        store.create_topic(topic, 2)
    m = Message(topic, b"hello", flag=3, born_timestamp=1700000000000, born_host="10.0.0.7:5555",
                reconsume_times=reconsume, raw_properties=ORIGINAL_PROPS)  # fmt: skip
    r = store.put(m, queue)
    assert r.ok
    store.wait_dispatched(10)
    return store.get("check", topic, queue, r.queue_offset).messages[0]


def back_ext(offset, group="g", delay=0, **more):
    ext = {"offset": str(offset), "group": group, "delayLevel": str(delay), "originMsgId": "X", "originTopic": "T"}
    ext.update(more)
    return ext


def queue_messages(store, topic, q):
    store.wait_dispatched(10)
    return store.get("check", topic, q, 0, 32).messages


def assert_verifies(store):
    store.flush()
    report = verify_store(store.root, store.config)
    assert report["ok"], report["problems"][:5]


def test_send_back_goes_to_the_retry_topic_through_delay_level_3(tmp_path):
    async def scenario(broker, c, store):
        orig = put_original(store)
        r = await c.call(RC.CONSUMER_SEND_MSG_BACK, back_ext(orig.physical_offset))
        return orig, r, broker.routes.route("%RETRY%g")

    (orig, r, route), store = with_broker(tmp_path, scenario)
    assert (r.code, r.remark, r.ext_fields or {}) == (R.SUCCESS, None, {})
    # delayLevel 0 from the client: 3 + reconsumeTimes (0), so SCHEDULE_TOPIC_XXXX's queue 2
    (m,) = queue_messages(store, SCHEDULE, 2)
    assert (m.body, m.flag, m.born_timestamp, m.born_host) == (b"hello", 3, 1700000000000, "10.0.0.7:5555")
    assert m.reconsume_times == 1
    # the looked-up message's properties in their order, then what consumerSendMsgBack puts (RETRY_TOPIC, WAIT,
    # DELAY, ORIGIN_MESSAGE_ID: the first copy's offset msgId), then transformDelayLevelMessage's REAL_*
    pairs = [("TAGS", "A"), ("KEYS", "k1"), ("UNIQ_KEY", "U1"), ("RETRY_TOPIC", "T"), ("WAIT", "false"),
             ("DELAY", "3"), ("ORIGIN_MESSAGE_ID", orig.msg_id), ("REAL_TOPIC", "%RETRY%g"), ("REAL_QID", "0")]  # fmt: skip
    assert bytes(m.properties_raw).decode() == hashmap_string(pairs)
    # createTopicInSendMessageBackMethod: %RETRY%g with retryQueueNums (1) queues, read-write, registered
    cfg = store.topic_configs["%RETRY%g"]
    assert (cfg["readQueueNums"], cfg["writeQueueNums"], cfg["perm"]) == (1, 1, 6)
    assert [(q.write_queue_nums, q.perm) for q in route.queue_datas] == [(1, 6)]
    assert_verifies(store)
    store.close()


def wait_for(probe, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.05)
    return probe()


def test_retried_message_is_delivered_and_sent_back_again_with_the_same_origin(tmp_path):
    store = open_store(tmp_path, message_delay_level=" ".join(["1s"] * 18))

    async def scenario(broker, c, store):
        import asyncio

        orig = put_original(store)
        first = await c.call(RC.CONSUMER_SEND_MSG_BACK, back_ext(orig.physical_offset))
        delivered = await asyncio.to_thread(wait_for, lambda: queue_messages(store, "%RETRY%g", 0))
        again = await c.call(RC.CONSUMER_SEND_MSG_BACK, back_ext(delivered[0].physical_offset))
        return orig, first, delivered, again

    (orig, first, delivered, again), store = with_broker(tmp_path, scenario, store=store)
    assert first.code == R.SUCCESS and again.code == R.SUCCESS
    (d,) = delivered
    # ScheduleMessageService.messageTimeUp: DELAY cleared, REAL_TOPIC / REAL_QID kept, to the real queue
    assert d.topic == "%RETRY%g" and d.queue_id == 0 and d.reconsume_times == 1
    assert "DELAY" not in d.properties
    assert {k: d.properties[k] for k in ("RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "REAL_TOPIC", "WAIT")} == {
        "RETRY_TOPIC": "T", "ORIGIN_MESSAGE_ID": orig.msg_id, "REAL_TOPIC": "%RETRY%g", "WAIT": "false"}  # fmt: skip
    # the second send-back: level 3 + 1, RETRY_TOPIC and ORIGIN_MESSAGE_ID kept from the first copy
    (m,) = queue_messages(store, SCHEDULE, 3)
    assert m.reconsume_times == 2
    assert (m.properties["DELAY"], m.properties["RETRY_TOPIC"]) == ("4", "T")
    assert m.properties["ORIGIN_MESSAGE_ID"] == orig.msg_id != d.msg_id
    assert_verifies(store)
    store.close()


def group_body(group="g", **fields):
    return fastjson.dumpb({"groupName": group, **fields})


def test_past_max_reconsume_times_or_negative_level_goes_to_the_dlq(tmp_path):
    async def scenario(broker, c, store):
        out = {"update": await c.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group_body(retryMaxTimes=2))}
        at_max = put_original(store, reconsume=2)
        below = put_original(store, reconsume=1)
        fresh = put_original(store, reconsume=0)
        out["at_max"] = await c.call(RC.CONSUMER_SEND_MSG_BACK, back_ext(at_max.physical_offset))
        out["below"] = await c.call(RC.CONSUMER_SEND_MSG_BACK, back_ext(below.physical_offset))
        out["negative"] = await c.call(RC.CONSUMER_SEND_MSG_BACK, back_ext(fresh.physical_offset, delay=-1))
        return out, at_max, fresh

    (out, at_max, fresh), store = with_broker(tmp_path, scenario)
    assert all(r.code == R.SUCCESS for r in out.values()), {k: (r.code, r.remark) for k, r in out.items()}
    dlq = queue_messages(store, "%DLQ%g", 0)
    assert [(m.reconsume_times, m.body) for m in dlq] == [(3, b"hello"), (1, b"hello")]
    pairs = [("TAGS", "A"), ("KEYS", "k1"), ("UNIQ_KEY", "U1"), ("RETRY_TOPIC", "T"), ("WAIT", "false"),
             ("DELAY", "0"), ("ORIGIN_MESSAGE_ID", at_max.msg_id)]  # fmt: skip
    assert bytes(dlq[0].properties_raw).decode() == hashmap_string(pairs)
    assert dlq[1].properties["ORIGIN_MESSAGE_ID"] == fresh.msg_id
    cfg = store.topic_configs["%DLQ%g"]  # DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ (RocketMQ 5)
    assert (cfg["readQueueNums"], cfg["writeQueueNums"], cfg["perm"]) == (1, 1, 6)
    # one below the group's retryMaxTimes still retries: level 3 + 1
    (m,) = queue_messages(store, SCHEDULE, 3)
    assert (m.reconsume_times, m.properties["REAL_TOPIC"]) == (2, "%RETRY%g")
    assert_verifies(store)
    store.close()


def test_header_max_reconsume_times_counts_from_version_3_4_9(tmp_path):
    async def scenario(broker, c, store):
        m = put_original(store, reconsume=1)
        ext = back_ext(m.physical_offset, maxReconsumeTimes="1")
        old = await c.call(RC.CONSUMER_SEND_MSG_BACK, ext, version=120)  # V3_4_9_SNAPSHOT: the group's 16
        new = await c.call(RC.CONSUMER_SEND_MSG_BACK, ext, version=121)  # V3_4_9: the header's 1
        return old, new

    (old, new), store = with_broker(tmp_path, scenario)
    assert old.code == new.code == R.SUCCESS
    assert [m.reconsume_times for m in queue_messages(store, SCHEDULE, 3)] == [2]
    assert [m.reconsume_times for m in queue_messages(store, "%DLQ%g", 0)] == [2]
    store.close()


def test_send_back_refusals(tmp_path):
    async def scenario(broker, c, store):
        m = put_original(store)
        out = {
            "bad_group": await c.call(RC.CONSUMER_SEND_MSG_BACK, back_ext(m.physical_offset, group="bad group")),
            "no_message": await c.call(RC.CONSUMER_SEND_MSG_BACK, back_ext(5_000_000)),  # past the written end
            "no_offset": await c.call(RC.CONSUMER_SEND_MSG_BACK, {"group": "g", "delayLevel": "0"}),
        }
        await c.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group_body("none", retryQueueNums=0))
        out["no_retry_queues"] = await c.call(RC.CONSUMER_SEND_MSG_BACK, back_ext(m.physical_offset, group="none"))
        broker.settings.autoCreateSubscriptionGroup = False
        out["unknown"] = await c.call(RC.CONSUMER_SEND_MSG_BACK, back_ext(m.physical_offset, group="g2"))
        broker.settings.brokerPermission = 4  # read only
        out["read_only"] = await c.call(RC.CONSUMER_SEND_MSG_BACK, back_ext(m.physical_offset))
        return out

    out, store = with_broker(tmp_path, scenario)
    got = {k: (r.code, r.remark) for k, r in out.items()}
    assert got["bad_group"] == (R.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group not exist, bad group " + FAQ)
    assert got["unknown"] == (R.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group not exist, g2 " + FAQ)
    assert got["no_message"] == (R.SYSTEM_ERROR, "look message by offset failed, 5000000")
    assert got["no_offset"][0] == R.SYSTEM_ERROR and "the custom field <offset> is null" in got["no_offset"][1]
    assert got["read_only"] == (R.NO_PERMISSION, "the broker[127.0.0.1] sending message is forbidden")
    # retryQueueNums 0: the group retries nothing, the answer is SUCCESS and nothing is written
    assert got["no_retry_queues"] == (R.SUCCESS, None)
    assert "%RETRY%none" not in store.topic_configs and "%RETRY%g2" not in store.topic_configs
    assert all(not queue_messages(store, SCHEDULE, q) for q in range(18))
    store.close()


def retry_send_ext(reconsume, group="g", props="DELAY\x015\x02UNIQ_KEY\x01U9\x02", **more):
    """A consumer's own send of a retry copy to %RETRY%group (its inner producer's header)."""
    fields = {"producerGroup": "CLIENT_INNER_PRODUCER", "reconsumeTimes": str(reconsume), **more}
    return send_header("%RETRY%" + group, 0, props, **fields)


def test_a_clients_own_retry_send_goes_to_the_dlq_past_the_max(tmp_path):
    """What a Java consumer does when its send-back fails: it sends the copy to %RETRY%group itself with
    reconsumeTimes + 1, MAX_RECONSUME_TIMES and DELAY 3 + reconsumeTimes (handleRetryAndDLQ: > max is DLQ)."""

    async def scenario(broker, c, store):
        out = {
            "at_max": await c.call(RC.SEND_MESSAGE, retry_send_ext(16), b"a"),  # 16 > 16 is false: retried
            "past_max": await c.call(RC.SEND_MESSAGE, retry_send_ext(17), b"b"),
            # the header's maxReconsumeTimes counts from V3_4_9 (ordinal 121) on
            "header_max": await c.call(RC.SEND_MESSAGE, retry_send_ext(4, maxReconsumeTimes="3"), b"c", version=121),
        }
        # a group holding live orderly queue locks: to the DLQ at once
        lock = {"consumerGroup": "og", "clientId": "c1", "mqSet": [{"topic": "T", "brokerName": "b", "queueId": 0}]}
        await c.call(RC.LOCK_BATCH_MQ, body=fastjson.dumpb(lock))
        out["locked"] = await c.call(RC.SEND_MESSAGE, retry_send_ext(1, group="og"), b"d")
        broker.settings.autoCreateSubscriptionGroup = False
        out["unknown"] = await c.call(RC.SEND_MESSAGE, retry_send_ext(1, group="nope"), b"e")
        return out

    out, store = with_broker(tmp_path, scenario)
    assert (out["unknown"].code, out["unknown"].remark) == (
        R.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group not exist, nope " + FAQ)  # fmt: skip
    for k in ("at_max", "past_max", "header_max", "locked"):
        assert out[k].code == R.SUCCESS and out[k].ext_fields["queueId"] == "0", (k, out[k].remark)
    (retried,) = queue_messages(store, SCHEDULE, 4)  # DELAY 5: queue 4, for %RETRY%g
    assert (retried.body, retried.reconsume_times, retried.properties["REAL_TOPIC"]) == (b"a", 16, "%RETRY%g")
    dlq = queue_messages(store, "%DLQ%g", 0)
    assert [(m.body, m.reconsume_times, m.properties["DELAY"]) for m in dlq] == [(b"b", 17, "-1"), (b"c", 4, "-1")]
    assert "REAL_TOPIC" not in dlq[0].properties
    assert [m.body for m in queue_messages(store, "%DLQ%og", 0)] == [b"d"]
    assert_verifies(store)
    store.close()


def test_settings_take_auto_create_subscription_group_from_broker_conf():
    s = BrokerSettings.from_extra({"autoCreateSubscriptionGroup": "false"})
    assert s.autoCreateSubscriptionGroup is False and BrokerSettings().autoCreateSubscriptionGroup is True


def test_delay_level_past_the_configured_levels_is_the_last_one(tmp_path):
    """transformDelayLevelMessage: a level above ScheduleMessageService.maxDelayLevel (the number of
    messageDelayLevel entries) becomes the last level; DELAY is rewritten to it."""
    store = open_store(tmp_path, message_delay_level="1s 2s 3s")

    async def scenario(broker, c, store):
        m = put_original(store, reconsume=1)  # level 3 + 1 = 4 > 3 levels
        return await c.call(RC.CONSUMER_SEND_MSG_BACK, back_ext(m.physical_offset))

    r, store = with_broker(tmp_path, scenario, store=store)
    assert r.code == R.SUCCESS
    (m,) = queue_messages(store, SCHEDULE, 2)
    assert (m.properties["DELAY"], m.properties["REAL_TOPIC"], m.reconsume_times) == ("3", "%RETRY%g", 2)
    assert not queue_messages(store, SCHEDULE, 3)
    assert_verifies(store)
    store.close()
