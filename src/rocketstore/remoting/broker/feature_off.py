"""Admin requests for RocketMQ features this broker does not have, answered as RocketMQ 5.3.3's AdminBrokerProcessor
answers them with the feature off (a lone master, no controller, no authentication metadata provider), each answer
checked against RocketMQ's own broker run here:

- GET_BROKER_EPOCH_CACHE (1007, `mqadmin getBrokerEpoch`): without enableControllerMode, SYSTEM_ERROR
  "this request only for controllerMode ";
- RESET_MASTER_FLUSH_OFFSET (908, `mqadmin resetMasterFlushOffset`): SUCCESS; a master (brokerId 0) ignores the
  offset, a slave keeps it for its HA, and rocketstore has no HA to keep it for;
- GET_BROKER_HA_STATUS (907, `mqadmin haStatus`): a master's HARuntimeInfo with no slave connected (its CommitLog
  max offset, nothing in sync);
- the cold data flow control (2001-2003, `updateColdDataFlowCtrGroupConfig`, `removeColdDataFlowCtrGroupConfig`,
  `getColdDataFlowCtrInfo`): the groups' thresholds kept and shown, as ColdDataCgCtrService keeps them with
  coldDataFlowControlEnable off (nothing is ever throttled: no read here is counted as cold);
- the RocksDB metadata and ConsumeQueue (EXPORT_ROCKSDB_CONFIG_TO_JSON 355, `rocksDBConfigToJson`: SUCCESS
  "export done.", nothing to export from JSON config files; CHECK_ROCKSDB_CQ_WRITE_PROGRESS 354,
  `checkRocksdbCqWriteProgress`: CHECK_IN_PROGRESS, the check then finding no RocksDB ConsumeQueue);
- authentication and authorization 2.0 (AUTH_* 3001-3010, `createUser` ... `copyAcl`): with no metadata provider
  configured, RocketMQ's managers fail every call; the answers are its answers then (a blank username refused
  first, as its processor and manager check it).

SET_COMMITLOG_READ_MODE (2004, `setCommitLogReadAheadMode`) is served for real: madvise(MADV_NORMAL / MADV_RANDOM)
over the CommitLog's mapped segments, as CommitLog.scanFileAndSetReadMode does."""

from __future__ import annotations

import logging
import mmap

from ...formats.properties import java_hashmap_order
from .. import fastjson
from ..codes import RequestCode, ResponseCode
from ..command import response_to
from ..fastjson import Bean
from ..namesrv.processor import parse_properties

log = logging.getLogger("rocketstore.remoting.broker")

MADV_NORMAL, MADV_RANDOM = 0, 1  # LibC's values, the request's READ_AHEAD_MODE
AUTH_FAILED = "An system error occurred, please try again later."  # handleAuthException, any other exception
# what the authorization manager's uncaught IllegalStateException reads as (UtilAll.exceptionSimpleDesc: the
# message, then its first stack element); the list names the authentication provider too (RocketMQ's own text)
_NOT_CONFIGURED = "java.lang.IllegalStateException: The authenticationMetadataProvider is not configured., "
_AUTHZ = "org.apache.rocketmq.auth.authorization.manager.AuthorizationMetadataManagerImpl."
GET_ACL_FAILED = (
    _NOT_CONFIGURED + _AUTHZ + "getAuthenticationMetadataProvider(AuthorizationMetadataManagerImpl.java:273)"
)
LIST_ACL_FAILED = (
    _NOT_CONFIGURED + _AUTHZ + "getAuthorizationMetadataProvider(AuthorizationMetadataManagerImpl.java:280)"
)


def ha_runtime_info(commitlog_max_offset: int) -> bytes:
    """HARuntimeInfo of a master with no slave (DefaultHAService.getRuntimeInfo)."""
    client = Bean(lastReadTimestamp=0, lastWriteTimestamp=0, masterFlushOffset=0, maxOffset=0,
                  transferredByteInSecond=0)  # fmt: skip
    return fastjson.dumpb(Bean(haClientRuntimeInfo=client, haConnectionInfo=[], inSyncSlaveNums=0, master=True,
                               masterCommitLogMaxOffset=commitlog_max_offset))  # fmt: skip


def cold_data_info(config: dict[str, int], group_threshold: int, global_threshold: int) -> bytes:
    """ColdDataCgCtrService.getColdDataFlowCtrInfo: a fastjson2 JSONObject (insertion order), the config table a
    ConcurrentHashMap (its buckets' order)."""
    table = "{" + ",".join(f"{fastjson.quote(g)}:{config[g]}" for g in java_hashmap_order(list(config))) + "}"
    return (f'{{"runtimeTable":{{}},"configTable":{table},"cgColdReadThreshold":{group_threshold},'
            f'"globalColdReadThreshold":{global_threshold},"globalAcc":0}}').encode()  # fmt: skip


class FeatureOff:
    def __init__(self, broker):
        self.broker = broker
        self.cold_thresholds: dict[str, int] = {}  # cgColdThresholdMapConfig

    def handlers(self) -> dict:
        RC = RequestCode
        return {RC.GET_BROKER_EPOCH_CACHE: self.epoch_cache, RC.RESET_MASTER_FLUSH_OFFSET: self.reset_master_flush_offset,
                RC.GET_BROKER_HA_STATUS: self.ha_status, RC.UPDATE_COLD_DATA_FLOW_CTR_CONFIG: self.update_cold,
                RC.REMOVE_COLD_DATA_FLOW_CTR_CONFIG: self.remove_cold, RC.GET_COLD_DATA_FLOW_CTR_INFO: self.cold_info,
                RC.SET_COMMITLOG_READ_MODE: self.read_mode, RC.EXPORT_ROCKSDB_CONFIG_TO_JSON: self.rocksdb_export,
                RC.CHECK_ROCKSDB_CQ_WRITE_PROGRESS: self.rocksdb_cq_check,
                RC.AUTH_CREATE_USER: self.user_checked, RC.AUTH_UPDATE_USER: self.user_checked,
                RC.AUTH_DELETE_USER: self.delete_user, RC.AUTH_GET_USER: self.get_user,
                RC.AUTH_LIST_USER: self.auth_failed, RC.AUTH_CREATE_ACL: self.auth_failed,
                RC.AUTH_UPDATE_ACL: self.auth_failed, RC.AUTH_DELETE_ACL: self.auth_failed,
                RC.AUTH_GET_ACL: self.get_acl, RC.AUTH_LIST_ACL: self.list_acl}  # fmt: skip

    async def epoch_cache(self, cmd, conn):
        return response_to(cmd, ResponseCode.SYSTEM_ERROR, "this request only for controllerMode ")

    async def reset_master_flush_offset(self, cmd, conn):
        return response_to(cmd, ResponseCode.SUCCESS)

    async def ha_status(self, cmd, conn):
        body = ha_runtime_info(self.broker.store.max_physical_offset)
        return response_to(cmd, ResponseCode.SUCCESS, None, None, body)

    async def rocksdb_export(self, cmd, conn):
        return response_to(cmd, ResponseCode.SUCCESS, "export done.")

    async def rocksdb_cq_check(self, cmd, conn):
        log.info("checkRocksdbCqWriteProgress: no RocksDB ConsumeQueue in this store, nothing to compare")
        return response_to(cmd, ResponseCode.SUCCESS, None, None, b'{"checkStatus":2}')  # CHECK_IN_PROGRESS

    # ------------------------------------------------------------------ cold data flow control
    async def update_cold(self, cmd, conn):
        """Properties text, consumer group = threshold; an entry that is not a number is skipped (and logged)."""
        for group, value in parse_properties((cmd.body or b"").decode("utf-8", "replace")).items():
            try:
                self.cold_thresholds[group] = int(value.strip())
            except ValueError:
                log.error("updateColdDataFlowCtrGroupConfig properties on entry error, key: %s, val: %s", group, value)
        return response_to(cmd, ResponseCode.SUCCESS)

    async def remove_cold(self, cmd, conn):
        if cmd.body is not None:
            self.cold_thresholds.pop(cmd.body.decode("utf-8", "replace"), None)
        return response_to(cmd, ResponseCode.SUCCESS)

    async def cold_info(self, cmd, conn):
        s = self.broker.settings
        body = cold_data_info(self.cold_thresholds, s.cgColdReadThreshold, s.globalColdReadThreshold)
        return response_to(cmd, ResponseCode.SUCCESS, None, None, body)

    # ------------------------------------------------------------------ read-ahead
    async def read_mode(self, cmd, conn):
        if not cmd.ext_fields:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode param error")
        try:
            mode = int(cmd.ext_fields.get("READ_AHEAD_MODE", ""))
        except ValueError:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode failed")
        if mode not in (MADV_NORMAL, MADV_RANDOM):
            return response_to(cmd, ResponseCode.INVALID_PARAMETER, "set commitlog readahead mode param value error")
        advice = mmap.MADV_NORMAL if mode == MADV_NORMAL else mmap.MADV_RANDOM
        try:
            self.broker.store.advise_commitlog(advice)
        except (OSError, ValueError):
            log.exception("set commitlog readahead mode failed")
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode failed")
        return response_to(cmd, ResponseCode.SUCCESS, f"set commitlog readahead mode success, mode: {mode}")

    # ------------------------------------------------------------------ auth 2.0, no metadata provider
    async def auth_failed(self, cmd, conn):
        return response_to(cmd, ResponseCode.SYSTEM_ERROR, AUTH_FAILED)

    async def user_checked(self, cmd, conn):
        if not (cmd.ext_fields or {}).get("username"):
            return response_to(cmd, ResponseCode.INVALID_PARAMETER, "The username is blank")
        return response_to(cmd, ResponseCode.SYSTEM_ERROR, AUTH_FAILED)

    async def get_user(self, cmd, conn):
        if not ((cmd.ext_fields or {}).get("username") or "").strip():  # isBlank here, isEmpty on create / update
            return response_to(cmd, ResponseCode.INVALID_PARAMETER, "The username is blank")
        return response_to(cmd, ResponseCode.SYSTEM_ERROR, AUTH_FAILED)

    async def delete_user(self, cmd, conn):
        if not ((cmd.ext_fields or {}).get("username") or "").strip():  # the manager's validate, before the provider
            return response_to(cmd, ResponseCode.NO_PERMISSION, "username can not be blank")
        return response_to(cmd, ResponseCode.SYSTEM_ERROR, AUTH_FAILED)

    async def get_acl(self, cmd, conn):
        return response_to(cmd, ResponseCode.SYSTEM_ERROR, GET_ACL_FAILED)

    async def list_acl(self, cmd, conn):
        return response_to(cmd, ResponseCode.SYSTEM_ERROR, LIST_ACL_FAILED)
