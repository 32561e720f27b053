"""Requests for features this broker does not have, answered as RocketMQ 5.3.3's broker answers them with the
feature off (the codes and remarks below are what its broker answered mqadmin here): GET_BROKER_HA_STATUS (907, a
master without slaves), the cold data flow control (2001-2003), authentication and authorization 2.0 with no
metadata provider (3001-3010), and SET_COMMITLOG_READ_MODE (2004), which madvises the CommitLog's segments."""

import json
import mmap

from broker_fixtures import with_broker
from test_broker_admin_runtime import QUIET

from rocketstore import Message
from rocketstore.remoting.codes import RequestCode as RC
from rocketstore.remoting.codes import ResponseCode as R

FAILED = "An system error occurred, please try again later."


def test_ha_status_of_a_master_without_slaves(tmp_path):
    async def scenario(broker, admin, store):
        store.create_topic("T", 1)
        for i in range(3):
            assert store.put(Message("T", b"x" * 50), 0).ok
        return await admin.call(RC.GET_BROKER_HA_STATUS), store.max_physical_offset

    (resp, end), store = with_broker(tmp_path, scenario, QUIET)
    assert end > 150
    assert resp.code == R.SUCCESS
    assert resp.body == (
        b'{"haClientRuntimeInfo":{"lastReadTimestamp":0,"lastWriteTimestamp":0,"masterFlushOffset":0,"maxOffset":0,'
        b'"transferredByteInSecond":0},"haConnectionInfo":[],"inSyncSlaveNums":0,"master":true,'
        b'"masterCommitLogMaxOffset":' + str(end).encode() + b"}"
    )
    store.close()


def test_cold_data_flow_control_thresholds_are_kept_and_shown(tmp_path):
    async def scenario(broker, admin, store):
        out = [await admin.call(RC.GET_COLD_DATA_FLOW_CTR_INFO)]
        await admin.call(RC.UPDATE_COLD_DATA_FLOW_CTR_CONFIG, body=b"G1=1000\nG2=2000\nBad=x\n")
        out.append(await admin.call(RC.GET_COLD_DATA_FLOW_CTR_INFO))
        out.append(await admin.call(RC.REMOVE_COLD_DATA_FLOW_CTR_CONFIG, body=b"G1"))
        out.append(await admin.call(RC.GET_COLD_DATA_FLOW_CTR_INFO))
        return out

    (empty, two, removed, one), store = with_broker(tmp_path, scenario, QUIET)
    assert empty.body == (
        b'{"runtimeTable":{},"configTable":{},"cgColdReadThreshold":3145728,"globalColdReadThreshold":104857600,'
        b'"globalAcc":0}'
    )
    assert json.loads(two.body)["configTable"] == {"G1": 1000, "G2": 2000}  # "Bad" is no number: skipped
    assert (removed.code, removed.remark) == (R.SUCCESS, None)
    assert b'"configTable":{"G2":2000}' in one.body
    store.close()


def test_auth_requests_without_a_metadata_provider(tmp_path):
    async def scenario(broker, admin, store):
        calls = {
            "create_user": (RC.AUTH_CREATE_USER, {"username": "alice"}),
            "create_blank": (RC.AUTH_CREATE_USER, {"username": ""}),
            "update_user": (RC.AUTH_UPDATE_USER, {"username": "alice"}),
            "delete_user": (RC.AUTH_DELETE_USER, {"username": "alice"}),
            "delete_blank": (RC.AUTH_DELETE_USER, {"username": ""}),
            "get_user": (RC.AUTH_GET_USER, {"username": "alice"}),
            "get_blank": (RC.AUTH_GET_USER, {"username": " "}),
            "list_user": (RC.AUTH_LIST_USER, {}),
            "create_acl": (RC.AUTH_CREATE_ACL, {"subject": "User:alice"}),
            "update_acl": (RC.AUTH_UPDATE_ACL, {"subject": "User:alice"}),
            "delete_acl": (RC.AUTH_DELETE_ACL, {"subject": "User:alice", "resource": "Topic:t"}),
            "get_acl": (RC.AUTH_GET_ACL, {"subject": "User:alice"}),
            "list_acl": (RC.AUTH_LIST_ACL, {}),
        }
        return {name: await admin.call(code, ext, body=b"{}") for name, (code, ext) in calls.items()}

    got, store = with_broker(tmp_path, scenario, QUIET)
    answers = {name: (r.code, r.remark) for name, r in got.items()}
    not_configured = "java.lang.IllegalStateException: The authenticationMetadataProvider is not configured., "
    impl = "org.apache.rocketmq.auth.authorization.manager.AuthorizationMetadataManagerImpl."
    assert answers == {
        "create_user": (R.SYSTEM_ERROR, FAILED),
        "create_blank": (R.INVALID_PARAMETER, "The username is blank"),
        "update_user": (R.SYSTEM_ERROR, FAILED),
        "delete_user": (R.SYSTEM_ERROR, FAILED),
        "delete_blank": (R.NO_PERMISSION, "username can not be blank"),
        "get_user": (R.SYSTEM_ERROR, FAILED),
        "get_blank": (R.INVALID_PARAMETER, "The username is blank"),
        "list_user": (R.SYSTEM_ERROR, FAILED),
        "create_acl": (R.SYSTEM_ERROR, FAILED),
        "update_acl": (R.SYSTEM_ERROR, FAILED),
        "delete_acl": (R.SYSTEM_ERROR, FAILED),
        "get_acl": (
            R.SYSTEM_ERROR,
            not_configured + impl + "getAuthenticationMetadataProvider(AuthorizationMetadataManagerImpl.java:273)",
        ),
        "list_acl": (
            R.SYSTEM_ERROR,
            not_configured + impl + "getAuthorizationMetadataProvider(AuthorizationMetadataManagerImpl.java:280)",
        ),
    }
    store.close()


def test_commitlog_read_mode_advises_the_segments(tmp_path, monkeypatch):
    advised = []

    async def scenario(broker, admin, store):
        store.create_topic("T", 1)
        assert store.put(Message("T", b"x"), 0).ok
        segments = list(store._commitlog.files.files)
        assert segments

        class Spy:  # stands in for each segment's mmap, recording the advice
            def __init__(self, real):
                self.real = real

            def madvise(self, advice, *args):
                advised.append(advice)
                return self.real.madvise(advice, *args)

        for mf in segments:
            monkeypatch.setattr(mf, "mm", Spy(mf.mm))
        out = {m: await admin.call(RC.SET_COMMITLOG_READ_MODE, {"READ_AHEAD_MODE": m}) for m in ("1", "0", "7")}
        out["none"] = await admin.call(RC.SET_COMMITLOG_READ_MODE)
        for mf in segments:
            monkeypatch.setattr(mf, "mm", mf.mm.real)
        return out, len(segments)

    (out, n), store = with_broker(tmp_path, scenario, QUIET)
    assert (out["1"].code, out["1"].remark) == (R.SUCCESS, "set commitlog readahead mode success, mode: 1")
    assert (out["0"].code, out["0"].remark) == (R.SUCCESS, "set commitlog readahead mode success, mode: 0")
    assert (out["7"].code, out["7"].remark) == (R.INVALID_PARAMETER, "set commitlog readahead mode param value error")
    assert (out["none"].code, out["none"].remark) == (R.SYSTEM_ERROR, "set commitlog readahead mode param error")
    assert advised == [mmap.MADV_RANDOM] * n + [mmap.MADV_NORMAL] * n
    store.close()


def test_rocksdb_requests_with_json_config_files(tmp_path):
    async def scenario(broker, admin, store):
        export = await admin.call(RC.EXPORT_ROCKSDB_CONFIG_TO_JSON, {"configType": "topics;subscriptionGroups"})
        check = await admin.call(RC.CHECK_ROCKSDB_CQ_WRITE_PROGRESS, {"topic": "", "checkStoreTime": "0"})
        return export, check

    (export, check), store = with_broker(tmp_path, scenario, QUIET)
    assert (export.code, export.remark) == (R.SUCCESS, "export done.")
    assert (check.code, check.body) == (R.SUCCESS, b'{"checkStatus":2}')  # CheckStatus.CHECK_IN_PROGRESS
    store.close()
