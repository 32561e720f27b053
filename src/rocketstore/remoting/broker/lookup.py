"""Message lookups outside the queues, as RocketMQ's QueryMessageProcessor answers them: VIEW_MESSAGE_BY_ID (33: the
record at a CommitLog offset, which the client takes from an offset msgId) and QUERY_MESSAGE (12: the records the
index finds for a key, by KEYS or, with the `_UNIQUE_KEY_QUERY` flag, by UNIQ_KEY, within a store time range).

Both answer with the stored records' bytes as they are in the CommitLog (the client decodes them with
MessageDecoder), the query's records one after another in CommitLog order."""

from __future__ import annotations

import asyncio

from .. import headers
from ..codes import RequestCode, ResponseCode
from ..command import response_to

UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"  # MixAll.UNIQUE_MSG_QUERY_FLAG
QUERY_HEADER = {"topic": "str", "key": "str", "maxNum": "int", "beginTimestamp": "long", "endTimestamp": "long"}


class Lookups:
    def __init__(self, broker):
        self.store = broker.store

    def handlers(self) -> dict:
        return {RequestCode.QUERY_MESSAGE: self.query_message, RequestCode.VIEW_MESSAGE_BY_ID: self.view_message}

    def _record(self, m) -> bytes | None:
        view = self.store.record_bytes(m.physical_offset, m.size)
        return None if view is None else bytes(view)

    # ------------------------------------------------------------------ by offset
    def _view(self, offset: int) -> bytes | None:
        m = self.store.look(offset) if offset >= 0 else None
        if m is None or m.physical_offset != offset:
            return None
        return self._record(m)

    async def view_message(self, cmd, conn):
        h = headers.read(cmd, {"offset": "long"}, {"topic": "str"})
        record = await asyncio.to_thread(self._view, h["offset"])
        if record is None:
            return response_to(cmd, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h['offset']}")
        return response_to(cmd, ResponseCode.SUCCESS, None, None, record)

    # ------------------------------------------------------------------ by key
    def _query(self, h: dict, max_num: int):
        r = self.store.query(h["topic"], h["key"], max_num, h["beginTimestamp"], h["endTimestamp"])
        records = [rec for rec in map(self._record, r) if rec is not None]
        return r, b"".join(records)

    async def query_message(self, cmd, conn):
        h = headers.read(cmd, QUERY_HEADER)
        max_num = h["maxNum"]
        if cmd.ext(UNIQUE_MSG_QUERY_FLAG) == "true":  # a lookup by UNIQ_KEY takes the broker's defaultQueryMaxNum
            max_num = self.store.config.default_query_max_num
        r, body = await asyncio.to_thread(self._query, h, max_num)
        ext = headers.write(
            indexLastUpdateTimestamp=r.index_last_update_timestamp,
            indexLastUpdatePhyoffset=r.index_last_update_phy_offset,
        )
        if body:
            return response_to(cmd, ResponseCode.SUCCESS, None, ext, body)
        return response_to(cmd, ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", ext)
