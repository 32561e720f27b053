"""mqadmin's topic requests over the wire: UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215),
GET_ALL_TOPIC_CONFIG (21), GET_TOPIC_CONFIG (351) and GET_TOPIC_STATS_INFO (202). Headers as MQClientAPIImpl sends
them (CreateTopicRequestHeader ...), answers and remarks as AdminBrokerProcessor gives them, bodies written out by
hand from the Java beans (fastjson: fields sorted by name; TopicStatsTable's MessageQueue keys as objects)."""

import json
import os

from broker_fixtures import with_broker

from rocketstore import Message
from rocketstore.remoting import fastjson
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R
from rocketstore.config.topics import topics_path


def create_ext(topic="A", read=4, write=2, perm=6, attributes="", **more):
    """What MQClientAPIImpl.createTopic puts in the header for `mqadmin updateTopic -t A -r 4 -w 2 -p 6`."""
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(read), "writeQueueNums": str(write),
           "perm": str(perm), "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
           "attributes": attributes}  # fmt: skip
    ext.update(more)
    return ext


def topics_json(store):
    with open(topics_path(store.root)) as f:
        return json.load(f)["topicConfigTable"]


def test_update_topic_writes_every_field_and_registers(tmp_path):
    async def scenario(broker, c, store):
        out = {"create": await c.call(RC.UPDATE_AND_CREATE_TOPIC, create_ext(attributes="+message.type=NORMAL"))}
        out["route"] = broker.routes.route("A")
        out["config"] = await c.call(RC.GET_TOPIC_CONFIG, {"topic": "A"})
        out["again"] = await c.call(RC.UPDATE_AND_CREATE_TOPIC, create_ext(attributes="+message.type=NORMAL"))
        out["read_only"] = await c.call(RC.UPDATE_AND_CREATE_TOPIC, create_ext(perm=4, read=8, write=8))
        out["route2"] = broker.routes.route("A")
        out["missing"] = await c.call(RC.GET_TOPIC_CONFIG, {"topic": "Nope"})
        return out

    out, store = with_broker(tmp_path, scenario)
    assert (out["create"].code, out["create"].remark) == (R.SUCCESS, None)
    qd = out["route"].queue_datas[0]
    assert (qd.broker_name, qd.read_queue_nums, qd.write_queue_nums, qd.perm) == ("rocketstore", 4, 2, 6)
    # TopicConfigAndQueueMapping of the first version (mappingDetail null: left out)
    assert out["config"].code == R.SUCCESS
    assert out["config"].body == (
        b'{"attributes":{"message.type":"NORMAL"},"order":false,"perm":6,"readQueueNums":4,'
        b'"topicFilterType":"SINGLE_TAG","topicName":"A","topicSysFlag":0,"writeQueueNums":2}'
    )
    assert (out["again"].code, out["again"].remark) == (R.SUCCESS, None)
    assert out["read_only"].code == R.SUCCESS
    qd = out["route2"].queue_datas[0]
    assert (qd.read_queue_nums, qd.write_queue_nums, qd.perm) == (8, 8, 4)
    # config/topics.json as TopicConfigManager persists it: the update kept the attribute
    assert topics_json(store)["A"] == {
        "topicName": "A", "readQueueNums": 8, "writeQueueNums": 8, "perm": 4, "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0, "order": False, "attributes": {"message.type": "NORMAL"},
    }  # fmt: skip
    assert (out["missing"].code, out["missing"].remark) == (R.TOPIC_NOT_EXIST, "No topic in this broker. topic: Nope")
    store.close()


def test_update_topic_refusals(tmp_path):
    cases = {
        "blank": (create_ext(topic=" "), R.INVALID_PARAMETER, "The specified topic is blank."),
        "chars": (
            create_ext(topic="a b"),
            R.INVALID_PARAMETER,
            "The specified topic: a b, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        ),
        "long": (
            create_ext(topic="x" * 128),
            R.INVALID_PARAMETER,
            f"The specified topic: {'x' * 128}, is longer than topic max length: 127",
        ),
        "tbw": (create_ext(topic="TBW102"), R.INVALID_PARAMETER, "The topic[TBW102] is conflict with system topic."),
        "sys_prefix": (
            create_ext(topic="rmq_sys_x"),
            R.INVALID_PARAMETER,
            "The topic[rmq_sys_x] is conflict with system topic.",
        ),
        "cluster": (
            create_ext(topic="DefaultCluster"),
            R.INVALID_PARAMETER,
            "The topic[DefaultCluster] is conflict with system topic.",
        ),
        "broker": (
            create_ext(topic="rocketstore"),
            R.INVALID_PARAMETER,
            "The topic[rocketstore] is conflict with system topic.",
        ),
        "filter": (
            create_ext(topicFilterType="ANY"),
            R.SYSTEM_ERROR,
            "No enum constant org.apache.rocketmq.common.TopicFilterType.ANY",
        ),
        "unknown_attr": (create_ext(attributes="+colour=red"), R.SYSTEM_ERROR, "unsupported key: colour"),
        "delete_on_create": (
            create_ext(attributes="-message.type"),
            R.SYSTEM_ERROR,
            "only add attribute is supported while creating topic. key: message.type",
        ),
        "mixed": (
            create_ext(attributes="+message.type=MIXED"),
            R.INVALID_PARAMETER,
            "MIXED message type is not supported.",
        ),
        # QUEUE_TYPE_ATTRIBUTE's values: Guava's Sets.newHashSet of two is a 4-bucket HashSet, SimpleCQ's first
        "bad_value": (
            create_ext(attributes="+queue.type=Other"),
            R.SYSTEM_ERROR,
            "value is not in set: [SimpleCQ, BatchCQ]",
        ),
    }

    async def scenario(broker, c, store):
        out = {name: await c.call(RC.UPDATE_AND_CREATE_TOPIC, ext) for name, (ext, _, _) in cases.items()}
        ext = create_ext()
        del ext["perm"]
        out["no_perm"] = await c.call(RC.UPDATE_AND_CREATE_TOPIC, ext)
        # queue.type cannot change once the topic exists (an unchangeable TopicAttributes entry)
        out["simple"] = await c.call(
            RC.UPDATE_AND_CREATE_TOPIC, create_ext(topic="Q", attributes="+queue.type=SimpleCQ")
        )
        out["to_batch"] = await c.call(
            RC.UPDATE_AND_CREATE_TOPIC, create_ext(topic="Q", attributes="+queue.type=BatchCQ")
        )
        return out

    out, store = with_broker(tmp_path, scenario)
    for name, (_, code, remark) in cases.items():
        assert (out[name].code, out[name].remark) == (code, remark), name
    assert out["no_perm"].code == R.SYSTEM_ERROR and "the custom field <perm> is null" in out["no_perm"].remark
    assert out["simple"].code == R.SUCCESS
    assert (out["to_batch"].code, out["to_batch"].remark) == (
        R.SYSTEM_ERROR,
        "attempt to update an unchangeable attribute. key: queue.type",
    )
    assert set(topics_json(store)) == {"Q"}  # no refused topic was written
    store.close()


def test_delete_topic_removes_config_queues_and_offsets(tmp_path):
    async def scenario(broker, c, store):
        store.create_topic("T", 2)
        store.create_topic("Keep", 1)
        for i in range(3):
            assert store.put(Message("T", b"x"), i % 2).ok
        assert store.put(Message("Keep", b"y"), 0).ok
        store.wait_dispatched(10)
        store.consumer_offsets.commit("g", "T", {0: 1})
        store.consumer_offsets.commit("g", "Keep", {0: 1})
        out = {"delete": await c.call(RC.DELETE_TOPIC_IN_BROKER, {"topic": "T"})}
        out["stats"] = await c.call(RC.GET_TOPIC_STATS_INFO, {"topic": "T"})
        out["system"] = await c.call(RC.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"})
        out["blank"] = await c.call(RC.DELETE_TOPIC_IN_BROKER, {"topic": "  "})
        out["unknown"] = await c.call(RC.DELETE_TOPIC_IN_BROKER, {"topic": "Never"})
        return out

    out, store = with_broker(tmp_path, scenario)
    assert (out["delete"].code, out["delete"].remark) == (R.SUCCESS, None)
    assert "T" not in topics_json(store) and "Keep" in topics_json(store)
    assert not os.path.exists(os.path.join(store.root, "consumequeue", "T"))
    groups = store.consumer_offsets.groups()
    groups.pop("CID_RMQ_SYS_TRANS", None)  # the transaction service's own offsets on its half and op queues
    assert groups == {"g": ["Keep"]}  # cleanOffsetByTopic
    assert (out["stats"].code, out["stats"].remark) == (R.TOPIC_NOT_EXIST, "topic[T] not exist")
    assert (out["system"].code, out["system"].remark) == (
        R.INVALID_PARAMETER,
        "The topic[SCHEDULE_TOPIC_XXXX] is conflict with system topic.",
    )
    assert (out["blank"].code, out["blank"].remark) == (R.INVALID_PARAMETER, "The specified topic is blank.")
    assert out["unknown"].code == R.SUCCESS  # deleteTopicConfig of an unknown topic only logs
    store.close()


def test_all_topic_config_is_the_wrapper_with_the_system_topics(tmp_path):
    async def scenario(broker, c, store):
        store.create_topic("T", 3)
        return await c.call(RC.GET_ALL_TOPIC_CONFIG)  # mqadmin sends no header at all

    r, store = with_broker(tmp_path, scenario)
    assert r.code == R.SUCCESS
    text = r.body.decode()
    doc = fastjson.loads(r.body)
    # TopicConfigAndMappingSerializeWrapper's getters in fastjson's order
    assert list(doc) == [
        "dataVersion", "mappingDataVersion", "topicConfigTable", "topicQueueMappingDetailMap",
        "topicQueueMappingInfoMap",
    ]  # fmt: skip
    assert list(doc["dataVersion"]) == ["counter", "stateVersion", "timestamp"]
    table = doc["topicConfigTable"]
    assert int(r.ext_fields["totalTopicNum"]) == len(table)
    # TopicConfigManager's constructor (autoCreateTopicEnable on, defaultTopicQueueNums 8)
    assert table["TBW102"] == {"attributes": {}, "order": False, "perm": 7, "readQueueNums": 8,
                               "topicFilterType": "SINGLE_TAG", "topicName": "TBW102", "topicSysFlag": 0,
                               "writeQueueNums": 8}  # fmt: skip
    assert (table["SELF_TEST_TOPIC"]["readQueueNums"], table["SELF_TEST_TOPIC"]["perm"]) == (1, 6)
    assert (table["DefaultCluster"]["readQueueNums"], table["DefaultCluster"]["perm"]) == (16, 7)
    assert table["SCHEDULE_TOPIC_XXXX"]["readQueueNums"] == 18
    assert (table["T"]["readQueueNums"], table["T"]["writeQueueNums"], table["T"]["perm"]) == (3, 3, 6)
    assert '"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}' in text
    store.close()


def test_topic_stats_table_bytes(tmp_path):
    async def scenario(broker, c, store):
        store.create_topic("T", 2)
        puts = [store.put(Message("T", f"m{i}".encode()), 0) for i in range(3)]
        store.wait_dispatched(10)
        return puts, await c.call(RC.GET_TOPIC_STATS_INFO, {"topic": "T"})

    (puts, r), store = with_broker(tmp_path, scenario)
    assert r.code == R.SUCCESS
    last = puts[-1].store_timestamp  # getMessageStoreTimeStamp(topic, 0, max - 1)
    assert (
        r.body
        == (
            '{"offsetTable":{'
            '{"brokerName":"rocketstore","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":%d,"maxOffset":3,"minOffset":0},'
            '{"brokerName":"rocketstore","queueId":1,"topic":"T"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}'
            '},"topicPutTps":0.0}' % last
        ).encode()
    )
    store.close()
