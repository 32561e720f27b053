"""Admin requests for RocketMQ features this broker does not have, answered as RocketMQ's AdminBrokerProcessor
answers them with the feature off (a lone master, no controller):

- GET_BROKER_EPOCH_CACHE (1007, `mqadmin getBrokerEpoch`): without enableControllerMode, SYSTEM_ERROR
  "this request only for controllerMode ";
- RESET_MASTER_FLUSH_OFFSET (908, `mqadmin resetMasterFlushOffset`): SUCCESS; a master (brokerId 0) ignores the
  offset, a slave keeps it for its HA, and rocketstore has no HA to keep it for."""

from __future__ import annotations

from ..codes import RequestCode, ResponseCode
from ..command import response_to


class FeatureOff:
    def __init__(self, broker):
        self.broker = broker

    def handlers(self) -> dict:
        return {RequestCode.GET_BROKER_EPOCH_CACHE: self.epoch_cache,
                RequestCode.RESET_MASTER_FLUSH_OFFSET: self.reset_master_flush_offset}  # fmt: skip

    async def epoch_cache(self, cmd, conn):
        return response_to(cmd, ResponseCode.SYSTEM_ERROR, "this request only for controllerMode ")

    async def reset_master_flush_offset(self, cmd, conn):
        return response_to(cmd, ResponseCode.SUCCESS)
