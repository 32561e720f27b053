"""mqadmin's requests for producers, one message's direct consumption, a ConsumeQueue's units, topic lists and
expired files, over the wire: GET_ALL_PRODUCER_INFO (328, `mqadmin producer`), CONSUME_MESSAGE_DIRECTLY (309,
`queryMsgByUniqueKey -g -d`), QUERY_CONSUME_QUEUE (321, `queryCq`), UPDATE_AND_CREATE_TOPIC_LIST (18,
`updateTopicList`) and DELETE_EXPIRED_COMMITLOG (329, `deleteExpiredCommitLog`). Expected bodies are written out
by hand from the Java beans (fastjson: fields sorted by name) and from the ConsumeQueue file's 20-byte units read
directly (position, size, tagsCode, big-endian)."""

import asyncio
import json
import struct
from pathlib import Path

from broker_fixtures import with_broker
from remoting_client import Client
from test_broker_admin_runtime import QUIET, admin_port, heartbeat, local_addr

from rocketstore import Message
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R
from rocketstore.remoting.command import RESPONSE_FLAG, RemotingCommand


def test_all_producer_info_lists_each_producer_group(tmp_path):
    async def scenario(broker, admin, store):
        producer = await Client.connect(admin_port(admin))
        try:
            hb = heartbeat(client_id="p1", producer="PG", subs=())
            assert (await producer.call(RC.HEART_BEAT, body=hb, language=0, version=479)).code == 0
            return await admin.call(RC.GET_ALL_PRODUCER_INFO, {}), local_addr(producer)
        finally:
            await producer.close()

    (resp, addr), store = with_broker(tmp_path, scenario, QUIET)
    assert resp.code == R.SUCCESS
    doc = json.loads(resp.body)
    assert list(doc) == ["data"] and list(doc["data"]) == ["PG"]
    (info,) = doc["data"]["PG"]
    assert list(info) == ["clientId", "language", "lastUpdateTimestamp", "remoteIP", "version"]
    assert (info["clientId"], info["language"], info["remoteIP"], info["version"]) == ("p1", "JAVA", "/" + addr, 479)
    assert info["lastUpdateTimestamp"] > 0
    store.close()


def record_bytes(store, phys: int, size: int) -> bytes:
    with open(store.commitlog_position(phys)[0], "rb") as f:
        f.seek(phys % (16 << 20))
        return f.read(size)


def test_consume_message_directly_hands_the_record_to_the_consumer(tmp_path):
    async def scenario(broker, admin, store):
        store.create_topic("T", 1)
        r = store.put(Message("T", b"direct", tags="A"), 0)
        assert r.ok
        store.wait_dispatched(10)
        consumer = await Client.connect(admin_port(admin))
        try:
            hb = heartbeat(producer=None)
            assert (await consumer.call(RC.HEART_BEAT, body=hb, language=0, version=479)).code == 0
            ext = {"consumerGroup": "g", "clientId": "cid", "msgId": r.msg_id, "topic": "T"}
            asked = asyncio.ensure_future(admin.call(RC.CONSUME_MESSAGE_DIRECTLY, ext))
            forwarded = await consumer.read()
            answer_body = b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":1}'
            await consumer.send(RemotingCommand(0, opaque=forwarded.opaque, flag=RESPONSE_FLAG, body=answer_body))
            answer = await asked
            bad_id = await admin.call(RC.CONSUME_MESSAGE_DIRECTLY, {**ext, "msgId": "XYZ"})
            offline = await admin.call(RC.CONSUME_MESSAGE_DIRECTLY, {**ext, "clientId": "nope"})
            return r, forwarded, answer, answer_body, bad_id, offline
        finally:
            await consumer.close()

    (r, forwarded, answer, answer_body, bad_id, offline), store = with_broker(tmp_path, scenario, QUIET)
    assert forwarded.code == RC.CONSUME_MESSAGE_DIRECTLY and not forwarded.is_response
    assert forwarded.ext_fields == {"consumerGroup": "g", "clientId": "cid", "msgId": r.msg_id, "topic": "T",
                                    "brokerName": "rocketstore", "topicSysFlag": "0", "groupSysFlag": "0"}  # fmt: skip
    # the whole record, as the CommitLog holds it: its first 4 bytes are its size
    size = struct.unpack(">i", record_bytes(store, r.physical_offset, 4))[0]
    assert forwarded.body == record_bytes(store, r.physical_offset, size)
    assert (answer.code, answer.body) == (R.SUCCESS, answer_body)
    assert bad_id.code == R.SYSTEM_ERROR and "XYZ" in bad_id.remark
    assert (offline.code, offline.remark) == (R.SYSTEM_ERROR, "The Consumer <g> <nope> not online")
    store.close()


def cq_units(store, topic: str, queue_id: int) -> list[tuple[int, int, int]]:
    """The ConsumeQueue file's units, read directly: 20 bytes each (long position, int size, long tagsCode)."""
    path = Path(store.root) / "consumequeue" / topic / str(queue_id) / f"{0:020d}"
    data = path.read_bytes()
    units = [struct.unpack_from(">qiq", data, i) for i in range(0, len(data), 20)]
    return [u for u in units if u != (0, 0, 0)]


def test_query_consume_queue_lists_units_from_an_index(tmp_path):
    async def scenario(broker, admin, store):
        store.create_topic("T", 1)
        for i in range(5):
            assert store.put(Message("T", f"m{i}".encode(), tags="A" if i % 2 == 0 else "B"), 0).ok
        store.wait_dispatched(10)
        ext = {"topic": "T", "queueId": "0", "index": "1", "count": "3"}
        plain = await admin.call(RC.QUERY_CONSUME_QUEUE, ext)
        offline_group = await admin.call(RC.QUERY_CONSUME_QUEUE, {**ext, "consumerGroup": "g"})
        past = await admin.call(RC.QUERY_CONSUME_QUEUE, {**ext, "index": "9"})
        missing = await admin.call(RC.QUERY_CONSUME_QUEUE, {**ext, "queueId": "3"})
        return plain, offline_group, past, missing

    (plain, offline_group, past, missing), store = with_broker(tmp_path, scenario, QUIET)
    units = cq_units(store, "T", 0)
    assert len(units) == 5
    assert plain.code == R.SUCCESS
    doc = json.loads(plain.body)
    assert list(doc) == ["maxQueueIndex", "minQueueIndex", "queueData"]
    assert (doc["minQueueIndex"], doc["maxQueueIndex"]) == (0, 5)
    assert doc["queueData"] == [
        {"eval": False, "physicOffset": pos, "physicSize": size, "tagsCode": tags} for pos, size, tags in units[1:4]
    ]
    assert json.loads(offline_group.body)["filterData"] == "g@T is not online!"
    assert (past.code, past.remark, past.body) == (R.SUCCESS, "Index 9 of 0@T is not exist!", b"")
    assert (missing.code, missing.remark) == (R.SYSTEM_ERROR, "3@T is not exist!")
    store.close()


def topic_config(name: str, queues: int, perm: int = 6, **more) -> dict:
    """A TopicConfig as fastjson writes it."""
    return {"attributes": {}, "order": False, "perm": perm, "readQueueNums": queues, "topicFilterType": "SINGLE_TAG",
            "topicName": name, "topicSysFlag": 0, "writeQueueNums": queues, **more}  # fmt: skip


def test_update_topic_list_creates_every_topic(tmp_path):
    async def scenario(broker, admin, store):
        body = json.dumps({"topicConfigList": [topic_config("L1", 2), topic_config("L2", 3, perm=4)]}).encode()
        created = await admin.call(RC.UPDATE_AND_CREATE_TOPIC_LIST, body=body)
        bad = json.dumps({"topicConfigList": [topic_config("L3", 1), topic_config("bad/name", 1)]}).encode()
        refused = await admin.call(RC.UPDATE_AND_CREATE_TOPIC_LIST, body=bad)
        system = json.dumps({"topicConfigList": [topic_config("SCHEDULE_TOPIC_XXXX", 1)]}).encode()
        conflict = await admin.call(RC.UPDATE_AND_CREATE_TOPIC_LIST, body=system)
        # an unchanged topic first ends the request there: L4 after it is not created (RocketMQ's answer)
        same = json.dumps({"topicConfigList": [topic_config("L1", 2), topic_config("L4", 1)]}).encode()
        unchanged = await admin.call(RC.UPDATE_AND_CREATE_TOPIC_LIST, body=same)
        garbage = await admin.call(RC.UPDATE_AND_CREATE_TOPIC_LIST, body=b"not json")
        return created, refused, conflict, unchanged, garbage, sorted(store.topic_configs)

    (created, refused, conflict, unchanged, garbage, topics), store = with_broker(tmp_path, scenario, QUIET)
    assert created.code == R.SUCCESS
    assert store.topic_configs["L1"]["readQueueNums"] == 2
    assert (store.topic_configs["L2"]["writeQueueNums"], store.topic_configs["L2"]["perm"]) == (3, 4)
    assert refused.code == R.INVALID_PARAMETER and "L3" not in topics  # checked all before any is saved
    assert (conflict.code, conflict.remark) == (
        R.INVALID_PARAMETER,
        "The topic[SCHEDULE_TOPIC_XXXX] is conflict with system topic.",
    )
    assert unchanged.code == R.SUCCESS and "L4" not in topics
    assert garbage.code == R.SYSTEM_ERROR and "topic config list" in garbage.remark
    store.close()


def test_delete_expired_commitlog_arms_the_manual_deletes(tmp_path):
    async def scenario(broker, admin, store):
        before = store._cleanup.commitlog.manual_delete_times
        resp = await admin.call(RC.DELETE_EXPIRED_COMMITLOG, {})
        return before, resp, store._cleanup.commitlog.manual_delete_times

    (before, resp, after), store = with_broker(tmp_path, scenario, QUIET)
    assert (before, resp.code, resp.remark) == (0, R.SUCCESS, None)
    assert after == 20  # DefaultMessageStore.MAX_MANUAL_DELETE_FILE_TIMES: the next rounds delete expired files
    store.close()
