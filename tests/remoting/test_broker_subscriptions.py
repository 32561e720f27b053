"""Subscription groups against RocketMQ's SubscriptionGroupManager / SubscriptionGroupConfig: auto-creation by a
heartbeat or a pull, config/subscriptionGroup.json in RocketMQ's layout (loaded at start, a 4.x broker's file too),
the admin requests UPDATE_AND_CREATE_SUBSCRIPTIONGROUP / GET_ALL_SUBSCRIPTIONGROUP_CONFIG / DELETE_SUBSCRIPTIONGROUP,
and the group checks of pulls and heartbeats."""

import json
import os

import pytest
from broker_fixtures import open_store, with_broker

from rocketstore.errors import StoreOpenError
from rocketstore.remoting import fastjson
from rocketstore.remoting.broker import Broker, BrokerSettings
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R
from rocketstore.remoting.command import RemotingCommand

FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
# SubscriptionGroupManager.init(): the groups a broker starts with
BUILT_IN = {"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PULL",
            "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_RMQ_SYS_TRANS"}  # fmt: skip


def defaults(group):
    """A new SubscriptionGroupConfig as fastjson writes it: its getters' names sorted, null ones left out
    (subscriptionDataSet), GroupRetryPolicy with only its type."""
    return {"attributes": {}, "brokerId": 0, "consumeBroadcastEnable": True, "consumeEnable": True,
            "consumeFromMinEnable": True, "consumeMessageOrderly": False, "consumeTimeoutMinute": 15,
            "groupName": group, "groupRetryPolicy": {"type": "CUSTOMIZED"}, "groupSysFlag": 0,
            "notifyConsumerIdsChangedEnable": True, "retryMaxTimes": 16, "retryQueueNums": 1,
            "whichBrokerWhenConsumeSlowly": 1}  # fmt: skip


def heartbeat(group, model="CLUSTERING"):
    return json.dumps({"clientID": "c1", "producerDataSet": [], "consumerDataSet": [
        {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": model,
         "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
         "subscriptionDataSet": [{"topic": "T", "subString": "*", "expressionType": "TAG", "tagsSet": [],
                                  "codeSet": [], "subVersion": 1}]}]}).encode()  # fmt: skip


def pull_ext(group, sys_flag=4):
    return {"consumerGroup": group, "topic": "T", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
            "subVersion": "0", "expressionType": "TAG"}  # fmt: skip


async def heart_beat(c, body):
    """A heartbeat's answer; the NOTIFY_CONSUMER_IDS_CHANGED a new consumer gets too is skipped."""
    cmd = RemotingCommand(RC.HEART_BEAT, opaque=next(c.opaques), body=body)
    await c.send(cmd)
    while True:
        frame = await c.read()
        if frame.is_response and frame.opaque == cmd.opaque:
            return frame


def file_path(store):
    return os.path.join(store.root, "config", "subscriptionGroup.json")


def test_heartbeat_creates_the_group_and_rocketmqs_file(tmp_path):
    async def scenario(broker, c, store):
        await c.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=fastjson.dumpb({"groupName": "g3",
                                                                                  "retryQueueNums": 3}))  # fmt: skip
        beat = await heart_beat(c, heartbeat("cg"))
        beat3 = await heart_beat(c, heartbeat("g3"))
        return beat, beat3

    (beat, beat3), store = with_broker(tmp_path, scenario)
    assert beat.code == beat3.code == R.SUCCESS
    doc = json.load(open(file_path(store)))  # SubscriptionGroupWrapper's fields
    assert set(doc) == {"dataVersion", "forbiddenTable", "subscriptionGroupTable"}
    assert set(doc["dataVersion"]) == {"counter", "stateVersion", "timestamp"}
    assert doc["dataVersion"]["counter"] == 2 and doc["forbiddenTable"] == {}  # two groups created, one each
    assert set(doc["subscriptionGroupTable"]) == BUILT_IN | {"cg", "g3"}
    assert doc["subscriptionGroupTable"]["cg"] == defaults("cg")
    # the heartbeat creates %RETRY%group with the group's retryQueueNums queues
    assert store.topic_configs["%RETRY%cg"]["writeQueueNums"] == 1
    assert store.topic_configs["%RETRY%g3"]["writeQueueNums"] == 3
    store.close()


def test_admin_requests_and_a_restart(tmp_path):
    async def scenario(broker, c, store):
        out = {}
        body = {"groupName": "g", "retryMaxTimes": 3, "consumeBroadcastEnable": False, "brokerId": 1,
                "fieldOfANewerRocketMQ": "x"}  # fmt: skip
        out["update"] = await c.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=fastjson.dumpb(body))
        out["bad_name"] = await c.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"a b"}')
        out["long_name"] = await c.call(
            RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=fastjson.dumpb({"groupName": "x" * 121})
        )
        out["attr"] = await c.call(
            RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"h","attributes":{"+k":"v"}}'
        )
        out["attr_no_plus"] = await c.call(
            RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"h","attributes":{"kk":"v"}}'
        )
        out["bad_type"] = await c.call(
            RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"h","retryMaxTimes":"x"}'
        )
        out["all"] = await c.call(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        store.consumer_offsets.commit("gone", "T", {0: 5})
        store.consumer_offsets.commit("kept", "T", {0: 6})
        await c.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"gone"}')
        await c.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"kept"}')
        out["delete"] = await c.call(RC.DELETE_SUBSCRIPTIONGROUP, {"groupName": "gone", "cleanOffset": "true"})
        out["delete_kept"] = await c.call(RC.DELETE_SUBSCRIPTIONGROUP, {"groupName": "kept"})
        out["delete_none"] = await c.call(RC.DELETE_SUBSCRIPTIONGROUP, {"groupName": "never"})
        out["after"] = await c.call(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        return out

    out, store = with_broker(tmp_path, scenario)
    got = {k: (r.code, r.remark) for k, r in out.items()}
    assert got["update"] == got["delete"] == got["delete_kept"] == got["delete_none"] == (R.SUCCESS, None)
    assert got["bad_name"] == (
        R.INVALID_PARAMETER,
        "The specified group: a b, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
    )
    assert got["long_name"] == (
        R.INVALID_PARAMETER, f"The specified group: {'x' * 121}, is longer than group max length: 120")  # fmt: skip
    assert got["attr"] == (R.SYSTEM_ERROR, "unsupported key: k")  # SubscriptionGroupAttributes.ALL is empty
    assert got["attr_no_plus"] == (R.SYSTEM_ERROR, "only add attribute is supported while creating topic. key: k")
    assert got["bad_type"][0] == R.SYSTEM_ERROR and "retryMaxTimes" in got["bad_type"][1]
    # GetAllSubscriptionGroupResponseHeader.totalGroupNum, the body a SubscriptionGroupWrapper
    assert out["all"].ext_fields == {"totalGroupNum": str(len(BUILT_IN) + 1)}
    wrapper = fastjson.loads(out["all"].body)
    g = wrapper["subscriptionGroupTable"]["g"]
    want = dict(defaults("g"), retryMaxTimes=3, consumeBroadcastEnable=False, brokerId=1, fieldOfANewerRocketMQ="x")
    assert g == want
    after = fastjson.loads(out["after"].body)["subscriptionGroupTable"]
    assert "gone" not in after and "kept" not in after and "g" in after
    # cleanOffset removes the group's committed offsets; without it they stay
    assert store.consumer_offsets.query("gone", "T", 0) < 0 and store.consumer_offsets.query("kept", "T", 0) == 6

    # a new broker on the store reads the file back
    broker = Broker(store, BrokerSettings())
    assert broker.subscription_groups.get("g").retryMaxTimes == 3
    assert broker.subscription_groups.get("g").to_bean()["fieldOfANewerRocketMQ"] == "x"
    assert broker.subscription_groups.get("gone") is None
    store.close()


def test_a_rocketmq_4_file_loads_and_a_broken_one_falls_back_to_the_bak(tmp_path):
    store = open_store(tmp_path)
    # ConfigManager.persist writes encode(true): fastjson's pretty format, tabs; a 4.9 config has fewer fields
    text = (
        '{\n\t"dataVersion":{\n\t\t"counter":7,\n\t\t"timestamp":1700000000000\n\t},\n'
        '\t"subscriptionGroupTable":{\n\t\t"old":{\n\t\t\t"brokerId":0,\n\t\t\t"consumeBroadcastEnable":true,\n'
        '\t\t\t"consumeEnable":false,\n\t\t\t"consumeFromMinEnable":true,\n\t\t\t"groupName":"old",\n'
        '\t\t\t"notifyConsumerIdsChangedEnable":true,\n\t\t\t"retryMaxTimes":5,\n\t\t\t"retryQueueNums":2,\n'
        '\t\t\t"whichBrokerWhenConsumeSlowly":1\n\t\t}\n\t}\n}'
    )
    os.makedirs(os.path.dirname(file_path(store)), exist_ok=True)
    with open(file_path(store) + ".bak", "w") as f:
        f.write(text)
    with open(file_path(store), "w") as f:
        f.write('{"subscriptionGroupTable":{"old":{"groupName":"old","retryMaxTimes":')  # cut short by a crash
    groups = Broker(store, BrokerSettings()).subscription_groups
    old = groups.get("old")
    assert (old.consumeEnable, old.retryMaxTimes, old.retryQueueNums) == (False, 5, 2)
    assert groups.version["counter"] == 7 and BUILT_IN <= set(groups.table)
    # neither usable: the broker does not start (ConfigManager.load fails BrokerController.initialize)
    with open(file_path(store) + ".bak", "w") as f:
        f.write('{"subscriptionGroupTable":{"x":{"groupName":"x","retryMaxTimes":true}}}')
    with pytest.raises(StoreOpenError) as e:
        Broker(store, BrokerSettings())
    assert "subscriptionGroup.json.bak" in str(e.value) and "retryMaxTimes" in str(e.value)
    store.close()


def test_pull_and_heartbeat_group_checks(tmp_path):
    async def scenario(broker, c, store):
        store.create_topic("T", 1)
        out = {}
        await c.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"off","consumeEnable":false}')
        out["disabled"] = await c.call(RC.PULL_MESSAGE, pull_ext("off"))
        await c.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"bg","consumeBroadcastEnable":false}')
        await heart_beat(c, heartbeat("bg", model="BROADCASTING"))
        out["broadcast"] = await c.call(RC.PULL_MESSAGE, pull_ext("bg", sys_flag=0))
        out["auto"] = await c.call(RC.PULL_MESSAGE, pull_ext("newgroup"))
        await c.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"flagged","groupSysFlag":3}')
        out["flagged"] = await c.call(RC.PULL_MESSAGE, pull_ext("flagged"))
        broker.settings.autoCreateSubscriptionGroup = False
        out["unknown"] = await c.call(RC.PULL_MESSAGE, pull_ext("other"))
        out["beat"] = await heart_beat(c, heartbeat("other"))
        out["list"] = await c.call(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "other"})
        # a system group is created even then (MixAll.isSysConsumerGroup, enableCreateSysGroup)
        out["sys"] = await c.call(RC.PULL_MESSAGE, pull_ext("CID_RMQ_SYS_X"))
        return out

    out, store = with_broker(tmp_path, scenario)
    got = {k: (r.code, r.remark) for k, r in out.items()}
    assert got["disabled"] == (R.NO_PERMISSION, "subscription group no permission, off")
    assert got["broadcast"] == (R.NO_PERMISSION, "the consumer group[bg] can not consume by broadcast way")
    assert got["auto"][0] == R.PULL_NOT_FOUND and out["auto"].ext_fields["groupSysFlag"] == "0"
    # composeResponseHeader: the group's groupSysFlag
    assert got["flagged"][0] == R.PULL_NOT_FOUND and out["flagged"].ext_fields["groupSysFlag"] == "3"
    assert got["unknown"] == (R.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [other] does not exist, {FAQ}")
    # the heartbeat answers SUCCESS but registers no consumer of a group without a config
    assert got["beat"] == (R.SUCCESS, None)
    assert got["list"] == (R.SYSTEM_ERROR, "no consumer for this group, other")
    assert "%RETRY%other" not in store.topic_configs
    assert got["sys"][0] == R.PULL_NOT_FOUND
    store.close()


def test_offsets_of_a_group_known_only_from_the_store_can_be_updated(tmp_path):
    """A group that committed through the gRPC side (the store's shared offsets table) counts as existing for
    UPDATE_CONSUMER_OFFSET (containsSubscriptionGroup) even before it has a config."""

    async def scenario(broker, c, store):
        store.create_topic("T", 1)
        store.consumer_offsets.commit("grpc-group", "T", {0: 1})
        ext = {"consumerGroup": "grpc-group", "topic": "T", "queueId": "0", "commitOffset": "2"}
        ok = await c.call(RC.UPDATE_CONSUMER_OFFSET, ext)
        missing = await c.call(RC.UPDATE_CONSUMER_OFFSET, dict(ext, consumerGroup="nobody"))
        return ok, missing

    (ok, missing), store = with_broker(tmp_path, scenario)
    assert (ok.code, missing.code, missing.remark) == (
        R.SUCCESS,
        R.SUBSCRIPTION_GROUP_NOT_EXIST,
        "Group nobody not exist!",
    )
    store.close()


def test_get_all_pages_with_group_seq_and_data_version(tmp_path):
    """enableSplitMetadata (on by default): SubscriptionGroupManager.subGroupTable's page of the name-sorted
    table; a dataVersion other than the table's starts the page at 0 again."""

    async def scenario(broker, c, store):
        for g in ("a1", "a2", "a3"):
            await c.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=fastjson.dumpb({"groupName": g}))
        first = await c.call(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {"groupSeq": "0", "maxGroupNum": "4"})
        version = json.dumps(fastjson.loads(first.body)["dataVersion"])
        second = await c.call(
            RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {"groupSeq": "8", "maxGroupNum": "4", "dataVersion": version}
        )
        stale = await c.call(
            RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
            {"groupSeq": "8", "maxGroupNum": "4", "dataVersion": '{"counter":99,"stateVersion":0,"timestamp":1}'},
        )
        no_seq = await c.call(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {"maxGroupNum": "4"})
        return first, second, stale, no_seq

    (first, second, stale, no_seq), store = with_broker(tmp_path, scenario)
    names = sorted(BUILT_IN | {"a1", "a2", "a3"})  # Java's String order; the upper-case built-ins first
    assert first.ext_fields == second.ext_fields == {"totalGroupNum": "11"}
    assert sorted(fastjson.loads(first.body)["subscriptionGroupTable"]) == names[:4]
    assert sorted(fastjson.loads(second.body)["subscriptionGroupTable"]) == names[8:] == ["a1", "a2", "a3"]
    assert sorted(fastjson.loads(stale.body)["subscriptionGroupTable"]) == names[:4]
    assert no_seq.code == R.SYSTEM_ERROR and "the custom field <groupSeq> is null" in no_seq.remark
    store.close()
