"""Requests about the store's own files, as RocketMQ's AdminBrokerProcessor answers them: QUERY_CONSUME_QUEUE (321,
`mqadmin queryCq`: a stretch of one ConsumeQueue's units, with what a group's subscription makes of each) and
DELETE_EXPIRED_COMMITLOG (329, `mqadmin deleteExpiredCommitLog`: the expired CommitLog files deleted on the
cleanup service's next rounds, whatever the hour, as executeDeleteFilesManually does)."""

from __future__ import annotations

import asyncio
import base64
import logging

from ...formats import cq_ext
from .. import fastjson, headers
from ..codes import RequestCode, ResponseCode
from ..command import response_to
from ..fastjson import Bean
from .admin_bodies import subscription_bean

log = logging.getLogger("rocketstore.remoting.broker")


def bits_text(data: bytes) -> str:
    """BitsArray.toString of a whole-byte bit map: the last byte first, each from its high bit down."""
    return "".join(f"{b:08b}" for b in reversed(data))


def ext_unit_json(unit) -> str:
    """JSON.toJSONString of a CqExtUnit (getters: filterBitMap as base64 when there is one, msgStoreTime, size,
    tagsCode)."""
    bean = Bean(msgStoreTime=unit.msg_store_time, size=unit.size, tagsCode=unit.tags_code)
    if unit.filter_bit_map is not None:
        bean["filterBitMap"] = base64.b64encode(unit.filter_bit_map).decode()  # fastjson's byte[]
    return fastjson.dumps(bean)


def tag_matches(sub: dict | None, tags_code: int) -> bool:
    """ExpressionMessageFilter.isMatchedByConsumeQueue without a consumer filter (no bit maps calculated here):
    a tag subscription keeps "*" and the codes it lists; anything else passes."""
    if sub is None or sub.get("classFilterMode") or str(sub.get("expressionType") or "TAG").upper() != "TAG":
        return True
    if (sub.get("subString") or "*").strip() == "*":
        return True
    java_int = ((tags_code + (1 << 31)) % (1 << 32)) - (1 << 31)  # Long.intValue
    return java_int in {int(c) for c in sub.get("codeSet") or ()}


class StoreAdmin:
    def __init__(self, broker):
        self.broker = broker
        self.store = broker.store

    def handlers(self) -> dict:
        return {RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
                RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commitlog}  # fmt: skip

    async def delete_expired_commitlog(self, cmd, conn):
        log.warning("invoke deleteExpiredCommitLog start.")
        self.store.delete_files_manually()
        log.warning("invoke deleteExpiredCommitLog end.")
        return response_to(cmd, ResponseCode.SUCCESS)

    async def query_consume_queue(self, cmd, conn):
        h = headers.read(cmd, {"topic": "str", "queueId": "int", "index": "long", "count": "int"},
                         {"consumerGroup": "str"})  # fmt: skip
        topic, queue_id, index = h["topic"], h["queueId"], h["index"]
        queue = self.store.consume_queue(topic, queue_id)
        if queue is None:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        body = Bean(maxQueueIndex=queue.max_offset, minQueueIndex=queue.min_offset)
        sub = None
        if h["consumerGroup"] is not None:
            sub = self.broker.clients.subscription(h["consumerGroup"], topic)
            if sub is None:
                body["filterData"] = f"{h['consumerGroup']}@{topic} is not online!"
            else:
                body["subscriptionData"] = subscription_bean(sub)
                body["filterData"] = "null"  # no ConsumerFilterData: bit maps are not calculated here
        rows = await asyncio.to_thread(self._rows, queue, index, h["count"], sub, h["consumerGroup"] is not None)
        if rows is None:
            remark = f"Index {index} of {queue_id}@{topic} is not exist!"
            return response_to(cmd, ResponseCode.SUCCESS, remark)
        body["queueData"] = rows
        return response_to(cmd, ResponseCode.SUCCESS, None, None, fastjson.dumpb(body))

    @staticmethod
    def _rows(queue, index: int, count: int, sub: dict | None, with_group: bool) -> list[Bean] | None:
        """ConsumeQueueData for the units from `index` on (to the end of the file holding it, as iterateFrom
        goes), at most `count`; None when `index` is in no file."""
        if queue.is_batch:  # slot by slot (a batch queue's slots are its units, not its queue offsets)
            lo, hi = queue.slot_range()
            if not lo <= index < hi:
                return None
            units = [queue.unit_at(s) for s in range(index, min(index + max(count, 0), hi))]
            triples = [(u.pos, u.size, u.tags) for u in units if u is not None]
        else:
            found = queue.units_from(index)
            if found is None:
                return None
            _, units = found
            triples = [(int(u["pos"]), int(u["size"]), int(u["tags"])) for u in units[: max(count, 0)]]
        rows = []
        for pos, size, tags in triples:
            one = Bean(eval=False, physicOffset=pos, physicSize=size, tagsCode=tags)
            if not cq_ext.is_ext_addr(tags):
                rows.append(one)
                continue
            unit = queue.resolve_tags(tags)[1]
            if unit is None:
                one["msg"] = f"Cq extend not exist!addr: {tags}"
            else:
                one["extendDataJson"] = ext_unit_json(unit)
                if unit.filter_bit_map is not None:
                    one["bitMap"] = bits_text(unit.filter_bit_map)
                if with_group:
                    one["eval"] = tag_matches(sub, unit.tags_code)
            rows.append(one)
        return rows
