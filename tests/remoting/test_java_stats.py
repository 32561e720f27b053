"""mqadmin's statistics commands with RocketMQ 5.3.3's own tools and Java lite pull consumer against a real
`rocketstore serve` (remoting on loopback): java/StatsClients.java creates two groups with updateSubGroupList
(UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST), puts 10 messages in JStats, reads them with a DefaultLitePullConsumer
(GStatsLite) that commits them, asks consumerConnection (GET_CONSUMER_CONNECTION_LIST) and, as 5.3.3's mqadmin
does not register its getConsumerStatus command, DefaultMQAdminExt.getConsumeStatus (INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
which the broker hands to the consumer) about it, then runs statsAll
(VIEW_BROKER_STATS_DATA) and brokerConsumeStats (GET_BROKER_CONSUME_STATS); then updateTopicList
(UPDATE_AND_CREATE_TOPIC_LIST), producer (GET_ALL_PRODUCER_INFO), queryCq (QUERY_CONSUME_QUEUE, checked against
the store's queue read afterwards), deleteExpiredCommitLog and queryMsgByUniqueKey -g -d (CONSUME_MESSAGE_DIRECTLY:
the push consumer named consumes the message handed to it). One JVM. Skipped as
test_java_client.py is without the RocketMQ jars or a JDK."""

import json
import re

import pytest
from serve_harness import mqadmin_out, of, run_once

from rocketstore import MessageStore

TOPIC = "JStats"
GROUPS = [{"groupName": "GStatsA", "retryMaxTimes": 3}, {"groupName": "GStatsLite"}]
TOPICS = [{"topicName": "JStatsL1", "readQueueNums": 3, "writeQueueNums": 3, "perm": 6},
          {"topicName": "JStatsL2", "readQueueNums": 1, "writeQueueNums": 1, "perm": 4}]  # fmt: skip


@pytest.fixture(scope="module")
def stats_run(java_classpath, tmp_path_factory):
    """(events, server log, the units of JStats' queue 0 as (physical offset, size) read from the store after)"""
    root = tmp_path_factory.mktemp("java-stats")
    group_file, topic_file = root / "groups.json", root / "topics.json"
    group_file.write_text(json.dumps(GROUPS))
    topic_file.write_text(json.dumps(TOPICS))
    events, log = run_once(root, java_classpath, "StatsClients", str(group_file), str(topic_file))
    with MessageStore.open(str(root / "store"), read_only=True) as s:
        units = [(m.physical_offset, m.size) for m in s.get("test", TOPIC, 0, 0, 3).messages]
    return events, log, units


def test_update_sub_group_list_creates_the_groups(stats_run):
    events, *_ = stats_run
    out = mqadmin_out(events, "updateSubGroupList")
    addr = of(events, "setup", "broker")[0]["addr"]
    assert f"submit batch of group config to {addr} success" in out
    groups = {e["name"]: e for e in of(events, "setup", "group")}
    assert groups["GStatsA"]["retryMaxTimes"] == 3 and groups["GStatsA"]["consumeEnable"] is True
    assert groups["GStatsLite"]["retryMaxTimes"] == 16  # the default
    of(events, "setup", "done")


def test_lite_pull_group_connection_and_status(stats_run):
    events, *_ = stats_run
    consumed = of(events, "lite", "consumed")[0]
    assert consumed["got"] == 10 and consumed["committed"], consumed
    out = mqadmin_out(events, "consumerConnection")
    assert re.search(r"^\S+@\S+\s+127\.0\.0\.1:\d+\s+JAVA\s+V5_3_3\s*$", out, re.M), out
    assert re.search(r"^JStats\s+\*\s*$", out, re.M), out  # the subscription table
    assert "CONSUME_ACTIVELY" in out and "CLUSTERING" in out, out
    # one client, whose (lite pull) consumer answers an empty offset table, as it does to RocketMQ's broker
    (status,) = of(events, "lite", "status")
    assert list(status["clients"].values()) == [0], status
    assert re.search(rf"^{re.escape(next(iter(status['clients'])))}\s+127\.0\.0\.1:", out, re.M), out


def test_stats_all_and_broker_consume_stats(stats_run):
    events, *_ = stats_run
    out = mqadmin_out(events, "statsAll")
    row = re.search(r"^JStats\s+GStatsLite\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)\s*$", out, re.M)
    assert row, out
    accumulation, in_tps, out_tps, in_24h, out_24h = row.groups()
    assert (int(accumulation), int(in_24h), int(out_24h)) == (0, 10, 10), out
    assert float(in_tps) > 0 and float(out_tps) > 0
    out = mqadmin_out(events, "brokerConsumeStats")
    rows = re.findall(r"^JStats\s+GStatsLite\s+rocketstore\s+(\d)\s+(\d+)\s+(\d+)\s+(-?\d+)\s+\S+ \S+\s*$", out, re.M)
    # the producer's round robin put 5 in each queue; all consumed: broker offset == consumer offset, diff 0
    assert sorted(int(q) for q, *_ in rows) == [0, 1], out
    assert sum(int(b) for _, b, _, _ in rows) == 10 and all(b == c and d == "0" for _, b, c, d in rows), out
    assert "Diff Total: 0" in out


def test_topic_list_producers_queue_units_and_manual_deletes(stats_run):
    events, _, units = stats_run
    addr = of(events, "setup", "broker")[0]["addr"]
    assert f"submit batch of topic config to {addr} success" in mqadmin_out(events, "updateTopicList")
    topics = {e["name"]: (e["read"], e["write"], e["perm"]) for e in of(events, "more", "topic")}
    assert topics == {t["topicName"]: (t["readQueueNums"], t["writeQueueNums"], t["perm"]) for t in TOPICS}
    # served, but 5.3.3's mqadmin cannot read ProducerTableInfo (no default constructor for fastjson): it fails
    # so against RocketMQ's own broker too; an error answer would fail earlier, as an MQBrokerException
    run = mqadmin_run(events, "producer")
    assert (
        "default constructor not found. class org.apache.rocketmq.remoting.protocol.body.ProducerTableInfo"
        in (run["stderr"])
    ), run
    assert "MQBrokerException" not in run["stderr"], run
    out = mqadmin_out(events, "queryCq")
    assert "max: " in out and "min: 0" in out, out
    shown = [(int(p), int(s)) for p, s in re.findall(r"physicOffset=(\d+), physicSize=(\d+)", out)]
    assert len(units) == 3 and shown == units, out
    assert mqadmin_out(events, "deleteExpiredCommitLog").strip() == "success"


def test_query_by_unique_key_hands_the_message_to_a_push_consumer(stats_run):
    events, *_ = stats_run
    first = of(events, "setup", "first")[0]["msgId"]
    run = mqadmin_run(events, "queryMsgByUniqueKey.direct")
    assert "consumeResult=CR_SUCCESS" in run["stdout"], run
    # mqadmin first reads the unique key as an offset msgId and warns (a client-side stack trace, as against
    # RocketMQ's broker), then looks it up by key: nothing else may have gone wrong
    warned = "the msgId maybe created by new client"
    assert run["stderr"].count("Exception") == run["stderr"].count(warned) <= 1, run
    (direct,) = of(events, "more", "direct")
    assert direct["consumed"] == [f"{first} m0"], direct


def mqadmin_run(events, name) -> dict:
    (run,) = [e for e in of(events, "mqadmin") if e["name"] == name]
    return run


def test_feature_off_answers_as_rocketmq_gives_them(stats_run):
    """What mqadmin prints against RocketMQ 5.3.3's own broker (run here) for the same commands."""
    events, *_ = stats_run
    out = mqadmin_out(events, "haStatus")
    assert re.search(r"^#MasterAddr\s+127\.0\.0\.1:\d+$", out, re.M) and "#SlaveNum\t0" in out, out
    assert re.search(r"^#MasterCommitLogMaxOffset\s+[1-9]\d*$", out, re.M), out  # messages were put
    assert "updateColdDataFlowCtrGroupConfig success" in mqadmin_out(events, "updateColdDataFlowCtrGroupConfig")
    out = mqadmin_out(events, "getColdDataFlowCtrInfo")
    assert '"cgColdReadThreshold":3145728' in out and '"GCold":1000' in out and '"globalAcc":0' in out, out
    assert "remove broker cold read threshold success" in mqadmin_out(events, "removeColdDataFlowCtrGroupConfig")
    out = mqadmin_out(events, "setCommitLogReadAheadMode")
    assert "set commitlog readahead mode success, mode: 1" in out, out
    for name, desc in [
        ("createUser", "CODE: 1  DESC: An system error occurred, please try again later."),
        (
            "getAcl",
            "CODE: 1  DESC: java.lang.IllegalStateException: The authenticationMetadataProvider is not configured.",
        ),
        (
            "listAcl",
            "CODE: 1  DESC: java.lang.IllegalStateException: The authenticationMetadataProvider is not configured.",
        ),
    ]:
        assert desc in mqadmin_run(events, name)["stderr"], name
