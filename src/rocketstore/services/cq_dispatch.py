"""The ConsumeQueue dispatcher (CommitLogDispatcherBuildConsumeQueue): each record that gets a queue unit
(formats.record.gets_queue_unit) gets one in its queue, a ConsumeQueue unit (with its ext unit when the
ext is on) or a batch ConsumeQueue unit. It writes a run's units a queue at a time, and has the put path's
entry points (`put`, `put_batch`), whose common case, a plain queue, is written out inline."""
from __future__ import annotations

import logging

import numpy as np

from ..formats.record import gets_queue_unit
from ..topics import BATCH_CQ

log = logging.getLogger("rocketstore")


class ConsumeQueueDispatcher:
    bulk_capable = True

    def __init__(self, cqs: dict, new_cq, checkpoint):
        """`cqs`: the store's queue table, (topic, queue id) -> queue; `new_cq(topic, queue_id)` makes a
        queue the table lacks; `checkpoint`: its logics time follows the units written."""
        self.cqs = cqs
        self.new_cq = new_cq
        self.checkpoint = checkpoint

    def queue(self, topic: str, queue_id: int):
        """The queue, created (and added to the table) if it is new."""
        cq = self.cqs.get((topic, queue_id))
        if cq is None:
            cq = self.cqs[(topic, queue_id)] = self.new_cq(topic, queue_id)
        return cq

    def written(self, cq, ok: bool, store_ts: int) -> None:
        if ok:
            self.checkpoint.logics_msg_timestamp = store_ts
        else:
            log.error("consume queue %s-%d cannot be written", cq.topic, cq.queue_id)

    # ---------------------------------------------------------------- one record
    def dispatch(self, req) -> None:
        if gets_queue_unit(req.sys_flag):
            self.put_position(req.topic, req.queue_id, req.commit_log_offset, req.msg_size, req.tags_code,
                              req.consume_queue_offset, req.store_timestamp, req.msg_base_offset, req.batch_size,
                              req.bit_map)

    def put_position(self, topic, queue_id, phys, size, tags_code, queue_offset, store_ts, msg_base_offset=None,
                     batch_size=1, bit_map=None) -> None:
        """One record's unit in its queue (putMessagePositionInfoWrapper): a ConsumeQueue unit (with its ext
        unit when the ext is on: store time and `bit_map`, the request's filter bitmap), or a batch
        ConsumeQueue unit (base offset and batch size; a request without a base is dropped)."""
        cq = self.queue(topic, queue_id)
        if cq.cq_type == BATCH_CQ:
            base = queue_offset if msg_base_offset is None else msg_base_offset
            ok = cq.dispatch(phys, size, tags_code, store_ts, base, batch_size)
            if ok is None:
                return
        else:
            ok = cq.put_wrapped(phys, size, tags_code, queue_offset, store_ts, bit_map)
        self.written(cq, ok, store_ts)

    # ---------------------------------------------------------------- a run of records
    def dispatch_columns(self, cols) -> None:
        """Each queue's units of the run: in one write when their queue offsets follow each other and the
        queue allows it (ConsumeQueue.put_many decides), else one at a time through the guards."""
        by_queue = cols.by_queue
        if not by_queue:
            return
        phys, sizes, codes, qoffs, stamps = cols.phys, cols.size, cols.tags_code, cols.queue_offset, cols.store_ts
        bit_map = cols.bit_map
        for (topic, qid), members in by_queue.items():
            cq = self.queue(topic, qid)
            # plain records of a batch-CQ topic: units of one message each; a queue with a ConsumeQueue
            # ext: each unit after its ext unit (tagsCode, store time, the bitmap if one was computed)
            if cq.cq_type == BATCH_CQ or cq.ext is not None:
                for i in members:
                    self.put_position(topic, qid, phys[i], sizes[i], codes[i], qoffs[i], stamps[i],
                                      bit_map=None if bit_map is None else bit_map[i])
                continue
            first = qoffs[members[0]]
            if [qoffs[i] for i in members] == list(range(first, first + len(members))):
                ok = cq.put_many(np.array([phys[i] for i in members], dtype=np.int64),
                                 np.array([sizes[i] for i in members], dtype=np.int64),
                                 np.array([codes[i] for i in members], dtype=np.int64), first)
            else:
                ok = all([cq.put(phys[i], sizes[i], codes[i], qoffs[i]) for i in members])
            self.written(cq, ok, stamps[members[-1]])
        # the checkpoint's logics time is the last record's, whichever queue wrote last
        self.checkpoint.logics_msg_timestamp = stamps[max(m[-1] for m in by_queue.values())]

    # ---------------------------------------------------------------- the put path
    def put(self, topic, queue_id, phys, size, tags_code, store_ts, queue_offset, sys_flag, batch_size=1) -> None:
        """The record the put path just wrote. (Called once per put: the common case, a plain queue that
        exists, is written out here.)"""
        if gets_queue_unit(sys_flag):
            cq = self.cqs.get((topic, queue_id))
            if cq is not None and cq.cq_type != BATCH_CQ and cq.ext is None:
                if cq.put(phys, size, tags_code, queue_offset):
                    self.checkpoint.logics_msg_timestamp = store_ts
                else:
                    self.written(cq, False, store_ts)
            else:
                self.put_position(topic, queue_id, phys, size, tags_code, queue_offset, store_ts, queue_offset,
                                  batch_size)

    def put_batch(self, topic, queue_id, offsets, sizes, tags_codes, store_ts, base) -> None:
        """A producer batch the put path just wrote (numpy offsets, sizes, tags codes; queue offsets from
        `base` on): one write per ConsumeQueue file, or each unit with its ext unit."""
        cq = self.queue(topic, queue_id)
        if getattr(cq, "ext", None) is not None:   # each unit with its ext unit (putMessagePositionInfoWrapper)
            for i, (p, size, code) in enumerate(zip(offsets.tolist(), sizes.tolist(), tags_codes.tolist())):
                self.written(cq, cq.put_wrapped(p, size, code, base + i, store_ts), store_ts)
        else:
            self.written(cq, cq.put_many(offsets, sizes, tags_codes, base), store_ts)
