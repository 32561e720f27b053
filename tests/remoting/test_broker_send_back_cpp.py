"""Send-back with the real C++-core client (`rocketmq` 0.4.4, unchanged): a push consumer whose listener returns
RECONSUME_LATER. The C++ core sends CONSUMER_SEND_MSG_BACK (delayLevel 0) to the address in the message's
STOREHOST, so the store is opened with the broker's own address as its store host, as a RocketMQ broker's is.
The delay levels are all "1s" (messageDelayLevel) so that the retries come within seconds."""

import pytest
from broker_fixtures import broker_on_loop, open_store, wait_until

from rocketstore.remoting.broker.subscriptions import SubscriptionGroupConfig
from rocketstore.maintenance.verify import verify_store
from rocketstore.broker.address import free_port


@pytest.fixture
def retry_env(loop_thread, tmp_path):
    port = free_port()  # the broker's own address goes into the store (STOREHOST), so it is chosen first
    store = open_store(tmp_path, message_delay_level=" ".join(["1s"] * 18), store_host=f"127.0.0.1:{port}")
    store.create_topic("T", 2)
    with broker_on_loop(loop_thread, store, port=port) as env:
        yield env


def queue(store, topic, q=0):
    store.wait_dispatched(10)
    return store.get("check", topic, q, 0, 32).messages


def produce(cpp_client, env, bodies):
    out = cpp_client("produce", env["namesrv"], {"topic": "T", "messages": [{"body": b} for b in bodies]})
    assert all(r.get("status") == 0 for r in out), out
    return out


def test_failing_message_is_retried_then_lands_in_the_dlq(cpp_client, retry_env):
    env = retry_env
    store, broker = env["store"], env["broker"]
    # the group gives up after 2 retries (SubscriptionGroupConfig.retryMaxTimes; the C++ core sends no
    # maxReconsumeTimes): deliveries with reconsume times 0, 1, 2, then %DLQ%
    broker.subscription_groups.update(SubscriptionGroupConfig("cpp-retry", retryMaxTimes=2))
    # the group's retry topic exists before the consumer starts, as for a group that ran before: a new one is
    # created by the first heartbeat, and the C++ core would see its route only at its next 30 s route update
    broker.send_back.retry_topic("cpp-retry", 1)
    produce(cpp_client, env, ["bad", "good"])
    args = {"topic": "T", "group": "cpp-retry", "fail": ["bad"], "deliveries": 4, "seconds": 90, "linger": 3}
    got = cpp_client("push_retry", env["namesrv"], args, timeout=150)

    bad = [g for g in got if g["body"] == "bad"]
    good = [g for g in got if g["body"] == "good"]
    assert [g["reconsume"] for g in good] == [0]
    assert [g["reconsume"] for g in bad] == [0, 1, 2], got
    # the client puts the original topic back from RETRY_TOPIC (resetRetryTopic); the first delivery has none
    assert [g["topic"] for g in bad] == ["T", "T", "T"]
    assert [g["retry_topic"] for g in bad] == ["", "T", "T"]

    (original,) = [m for q in (0, 1) for m in queue(store, "T", q) if m.body == b"bad"]
    assert wait_until(lambda: queue(store, "%DLQ%cpp-retry"))
    (dead,) = queue(store, "%DLQ%cpp-retry")
    assert (dead.body, dead.reconsume_times) == (b"bad", 3)
    p = dead.properties
    assert (p["RETRY_TOPIC"], p["ORIGIN_MESSAGE_ID"], p["DELAY"], p["WAIT"]) == ("T", original.msg_id, "0", "false")
    assert p["UNIQ_KEY"] == original.unique_key
    # the retries went through the retry topic, one copy each (reconsume times 1 and 2)
    assert [m.reconsume_times for m in queue(store, "%RETRY%cpp-retry")] == [1, 2]
    store.flush()
    report = verify_store(store.root, store.config)
    assert report["ok"], report["problems"][:5]


def test_message_consumed_on_the_second_try_is_not_redelivered(cpp_client, retry_env):
    env = retry_env
    store = env["store"]
    env["broker"].send_back.retry_topic("cpp-once", 1)
    produce(cpp_client, env, ["flaky"])
    # two deliveries expected; the linger would show a third
    args = {"topic": "T", "group": "cpp-once", "fail_once": ["flaky"], "deliveries": 2, "seconds": 60, "linger": 5}
    got = cpp_client("push_retry", env["namesrv"], args, timeout=120)
    assert [(g["body"], g["reconsume"], g["topic"]) for g in got] == [("flaky", 0, "T"), ("flaky", 1, "T")]
    assert [m.reconsume_times for m in queue(store, "%RETRY%cpp-once")] == [1]
    assert not queue(store, "%DLQ%cpp-once")
