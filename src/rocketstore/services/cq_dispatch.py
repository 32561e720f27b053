"""The ConsumeQueue dispatcher (CommitLogDispatcherBuildConsumeQueue): each record that gets a queue unit
(formats.record.gets_queue_unit) gets one in its queue, through the queue protocol (log/queue.py): a
ConsumeQueue unit (with its ext unit when the ext is on) or a batch ConsumeQueue unit. It writes a run's
units a queue at a time, and has the put path's entry points (`put`, `put_batch`). A record of a deleted
topic that lies below the CommitLog's end at its deletion gets no unit (deleted_topics.py): the put path
never meets one (what it writes lies past that end), reput and recovery may."""

from __future__ import annotations

import logging

from ..formats.record import gets_queue_unit

log = logging.getLogger("rocketstore")


class ConsumeQueueDispatcher:
    bulk_capable = True

    def __init__(self, queues, checkpoint, deleted):
        """`queues`: the store's queue table (log.queue_table.QueueTable); `checkpoint`: the
        formats.checkpoint.Checkpoint whose logics time follows the units written; `deleted`: the deleted
        topics (deleted_topics.DeletedTopics)."""
        self.queues = queues
        self.lookup = queues.get_by_key  # (topic, queue id) -> queue or None: once per record
        self.checkpoint = checkpoint
        self.deleted = deleted

    def queue(self, topic: str, queue_id: int):
        """The queue, created (and added to the table) if it is new."""
        return self.lookup((topic, queue_id)) or self.queues.find_or_create(topic, queue_id)

    def written(self, cq, ok, store_ts: int) -> None:
        """A put's answer: True (the checkpoint's logics time moves), False (logged), None (dropped)."""
        if ok:
            self.checkpoint.logics_msg_timestamp = store_ts
        elif ok is not None:
            log.error("consume queue %s-%d cannot be written", cq.topic, cq.queue_id)

    # ---------------------------------------------------------------- one record
    def dispatch(self, req) -> None:
        if gets_queue_unit(req.sys_flag) and req.commit_log_offset >= self.deleted.below(req.topic):
            self.put_position(
                req.topic,
                req.queue_id,
                req.commit_log_offset,
                req.msg_size,
                req.tags_code,
                req.consume_queue_offset,
                req.store_timestamp,
                req.msg_base_offset,
                req.batch_size,
                req.bit_map,
            )

    def put_position(
        self,
        topic,
        queue_id,
        phys,
        size,
        tags_code,
        queue_offset,
        store_ts,
        msg_base_offset=None,
        batch_size=1,
        bit_map=None,
    ) -> None:
        """One record's unit in its queue (putMessagePositionInfoWrapper): a ConsumeQueue unit (with its ext
        unit when the ext is on: store time and `bit_map`, the request's filter bitmap), or a batch
        ConsumeQueue unit (base offset and batch size; a request without a base is dropped)."""
        cq = self.queue(topic, queue_id)
        self.written(
            cq,
            cq.put_position(phys, size, tags_code, queue_offset, store_ts, msg_base_offset, batch_size, bit_map),
            store_ts,
        )

    # ---------------------------------------------------------------- a run of records
    def dispatch_columns(self, cols) -> None:
        """Each queue's units of the run, a queue at a time (the queue writes them in one go when it can:
        put_units)."""
        by_queue = cols.by_queue
        if by_queue and self.deleted:
            by_queue = self._not_deleted(by_queue, cols.phys)
        if not by_queue:
            return
        phys, sizes, codes, qoffs, stamps = cols.phys, cols.size, cols.tags_code, cols.queue_offset, cols.store_ts
        bit_map = cols.bit_map
        rows = len(phys)
        for (topic, qid), members in by_queue.items():
            cq = self.queue(topic, qid)
            if len(members) == rows:  # one queue takes every row of the run: its columns as they are
                ok = cq.put_units(phys, sizes, codes, qoffs, stamps, bit_map)
            else:
                ok = cq.put_units(
                    [phys[i] for i in members],
                    [sizes[i] for i in members],
                    [codes[i] for i in members],
                    [qoffs[i] for i in members],
                    [stamps[i] for i in members],
                    None if bit_map is None else [bit_map[i] for i in members],
                )
            self.written(cq, ok, stamps[members[-1]])
        # the checkpoint's logics time is the last record's, whichever queue wrote last
        self.checkpoint.logics_msg_timestamp = stamps[max(m[-1] for m in by_queue.values())]

    def _not_deleted(self, by_queue: dict, phys) -> dict:
        """The run's rows by queue less those of deleted topics below their deletion."""
        out = {}
        for key, members in by_queue.items():
            below = self.deleted.below(key[0])
            if below >= 0:
                members = [i for i in members if phys[i] >= below]
            if members:
                out[key] = members
        return out

    # ---------------------------------------------------------------- the put path
    def put(self, topic, queue_id, phys, size, tags_code, store_ts, queue_offset, sys_flag, batch_size=1) -> None:
        """The record the put path just wrote (called once per put)."""
        if gets_queue_unit(sys_flag):
            cq = self.lookup((topic, queue_id)) or self.queues.find_or_create(topic, queue_id)
            # (a plain queue without the ext: its unit alone, as its put_position would write it)
            ok = (
                cq.put(phys, size, tags_code, queue_offset)
                if cq.ext is None and not cq.is_batch
                else cq.put_position(phys, size, tags_code, queue_offset, store_ts, queue_offset, batch_size)
            )
            if ok:
                self.checkpoint.logics_msg_timestamp = store_ts
            elif ok is not None:
                self.written(cq, ok, store_ts)

    def put_batch(self, topic, queue_id, offsets, sizes, tags_codes, store_ts, base) -> None:
        """A producer batch the put path just wrote (numpy offsets, sizes, tags codes; queue offsets from
        `base` on): one write per ConsumeQueue file, or each unit with its ext unit."""
        cq = self.queue(topic, queue_id)
        n = len(offsets)
        self.written(cq, cq.put_units(offsets, sizes, tags_codes, range(base, base + n), [store_ts] * n), store_ts)
