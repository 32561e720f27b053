"""The rest of mqadmin's served commands, run with RocketMQ 5.3.3's own mqadmin and Java clients against a real
`rocketstore serve` (java/TableClients.java, one JVM): printMsg, printMsgByQueue and consumeMessage read what a
producer with message tracing on sent (checked against its send results), queryMsgTraceById finds the trace that
producer wrote to RMQ_SYS_TRACE_TOPIC, sendMsgStatus and checkMsgSendRT send, updateOrderConf puts, gets and
deletes a topic's order config in the name server, consumerStatus asks a push consumer for its running info; and
the commands answered as RocketMQ answers with the feature off print the code and text RocketMQ's broker gives
(checked against it here): REQUEST_CODE_NOT_SUPPORTED for a broker container's and a controller's requests, auth
2.0 without a metadata provider. Skipped as test_java_client.py is without the RocketMQ jars or a JDK."""

import re

import pytest
from serve_harness import mqadmin_out, of, run_once

AUTH_FAILED = "CODE: 1  DESC: An system error occurred, please try again later."


@pytest.fixture(scope="module")
def table_run(java_classpath, tmp_path_factory):
    """(events, server log)"""
    return run_once(tmp_path_factory.mktemp("java-table"), java_classpath, "TableClients")


def sent(events) -> list[dict]:
    return of(events, "setup", "sent")


def failed(events, name) -> str:
    """The error mqadmin printed for a command that failed on the server's answer."""
    (run,) = [e for e in of(events, "mqadmin") if e["name"] == name]
    assert "SubCommandException" in run["stderr"], run
    return run["stderr"]


def test_print_and_consume_read_what_was_sent(table_run):
    events, _ = table_run
    done = of(events, "setup", "done")[0]
    msgs = sent(events)
    assert len(msgs) == 6
    out = mqadmin_out(events, "printMsg")
    for m in msgs:  # every message, by its unique key and its store's msgId
        assert f"MSGID: {m['msgId']}" in out and f"msgId={m['offsetMsgId']}" in out, m
        assert m["body"] in out
    queue0 = [m for m in msgs if m["queueId"] == 0]
    out = mqadmin_out(events, "printMsgByQueue")
    assert sorted(re.findall(r"^MSGID: (\w+)", out, re.M)) == sorted(m["msgId"] for m in queue0), out
    # -f true: the queue's messages counted by tag (even bodies were sent as TagA, odd ones as TagB)
    tags = [("TagA", "TagB")[int(m["body"].split("-")[1]) % 2] for m in queue0]
    counted = {t: int(n) for t, n in re.findall(r"^Tag: (\w+)\s+Count: (\d+)", out, re.M)}
    assert counted == {t: tags.count(t) for t in set(tags)}, out
    out = mqadmin_out(events, "consumeMessage")
    first_two = sorted((m for m in msgs if m["queueId"] == 1), key=lambda m: m["queueOffset"])[:2]
    assert re.findall(r"^MSGID: (\w+)", out, re.M) == [m["msgId"] for m in first_two], out
    assert done["brokerName"] == "rocketstore"


def test_trace_of_a_send_is_found(table_run):
    events, _ = table_run
    assert of(events, "setup", "done")[0]["traced"]
    out = mqadmin_out(events, "queryMsgTraceById")
    assert re.search(r"^Pub\s+PTable\s+\S+\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+\d+ms\s+success", out, re.M), out


def test_sends_through_mqadmin(table_run):
    events, _ = table_run
    out = mqadmin_out(events, "sendMsgStatus")
    assert out.count("sendStatus=SEND_OK") == 3, out
    assert "topic=rocketstore" in out  # the topic named after the broker
    out = mqadmin_out(events, "checkMsgSendRT")
    assert len(re.findall(r"^rocketstore\s+\d\s+true\s+\d+$", out, re.M)) == 5, out
    assert "Avg RT:" in out


def test_order_conf_in_the_name_server(table_run):
    events, _ = table_run
    assert "update orderConf success. topic=[JTable], orderConf=[rocketstore:2]" in mqadmin_out(
        events, "updateOrderConf.put"
    )
    assert "get orderConf success. topic=[JTable], orderConf=[rocketstore:2]" in mqadmin_out(
        events, "updateOrderConf.get"
    )
    assert "delete orderConf success. topic=[JTable]" in mqadmin_out(events, "updateOrderConf.delete")
    assert "CODE: 22  DESC: No config item, Namespace: ORDER_TOPIC_CONFIG Key: JTable" in failed(
        events, "updateOrderConf.gone"
    )


def test_consumer_status_asks_the_push_consumer(table_run):
    events, _ = table_run
    assert of(events, "consumerStatus", "consumed")[0]["all"]
    out = mqadmin_out(events, "consumerStatus")
    assert re.search(r"^1\s+\S+@\S+\s+V5_3_3\s+", out, re.M), out
    assert "Same subscription in the same group of consumer" in out and "Rebalance OK" in out


@pytest.mark.parametrize(
    "name, desc",
    [
        ("addBroker", "CODE: 3  DESC:  request type 902 not supported"),
        ("removeBroker", "CODE: 3  DESC:  request type 903 not supported"),
        ("getSyncStateSet", "CODE: 3  DESC:  request type 1005 not supported"),
        ("getControllerConfig", "CODE: 3  DESC:  request type 1010 not supported"),
        ("updateControllerConfig", "CODE: 3  DESC:  request type 1009 not supported"),
        ("electMaster", "CODE: 3  DESC:  request type 1005 not supported"),
        ("cleanBrokerMetadata", "CODE: 3  DESC:  request type 1005 not supported"),
        ("updateUser", AUTH_FAILED),
        ("deleteUser", AUTH_FAILED),
        ("getUser", AUTH_FAILED),
        ("listUser", AUTH_FAILED),
        ("copyUser", AUTH_FAILED),
        ("createAcl", AUTH_FAILED),
        ("updateAcl", AUTH_FAILED),
        ("deleteAcl", AUTH_FAILED),
        ("copyAcl", "CODE: 1  DESC: java.lang.IllegalStateException: The authenticationMetadataProvider is not"),
    ],
)
def test_features_off_answer_as_rocketmq(table_run, name, desc):
    events, _ = table_run
    assert desc in failed(events, name)


def test_rocksdb_commands_with_json_config_files(table_run):
    events, _ = table_run
    # each broker's "export done." is printed by the client's callback thread, outside the command's output
    out = mqadmin_out(events, "rocksDBConfigToJson")
    assert "Use [rpc mode]" in out and "Invalid args" not in out, out
    assert "rocketstore check doing" in mqadmin_out(events, "checkRocksdbCqWriteProgress")


def test_no_request_went_unanswered(table_run):
    _, log = table_run
    assert "Traceback" not in log
