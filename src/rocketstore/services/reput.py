"""The reput service: follows the CommitLog from the reput offset and hands each record to the dispatchers
(ReputMessageService). With `dispatch_in_put_path` the put path dispatches as it writes and advances the
reput offset itself, so this thread only has work for records written any other way."""

from __future__ import annotations

import logging

from .bulk_dispatch import dispatch_run
from .dispatch import BLANK, OK, check_record
from .service_thread import ServiceThread

log = logging.getLogger("rocketstore.reput")


class ReputService(ServiceThread):
    name = "rocketstore-reput"

    def __init__(self, commitlog, pipeline, lock, delay_levels, stop_at_flushed: bool = False):
        """`commitlog`: what it follows; `pipeline`: where the records go; `lock`: the put lock (dispatch
        writes the queues under it); `delay_levels`: for SCHEDULE_TOPIC_XXXX's tagsCodes;
        `stop_at_flushed`: go no further than the CommitLog's flushed offset (SYNC_FLUSH: nothing may be
        readable before it is on disk), else to its end."""
        super().__init__()
        self.commitlog = commitlog
        self.pipeline = pipeline
        self.lock = lock
        self.delay_levels = delay_levels
        self.stop_at_flushed = stop_at_flushed
        self.reput_from_offset = 0

    def end_offset(self) -> int:
        """How far reput may go: the flushed offset under SYNC_FLUSH, else the CommitLog's end."""
        files = self.commitlog.files
        return files.flushed_where if self.stop_at_flushed else files.max_offset()

    def caught_up(self) -> bool:
        """Everything reput may dispatch is dispatched, without a dispatch error pending."""
        return self.reput_from_offset >= self.end_offset() and self.pipeline.error is None

    def advance_to(self, offset: int) -> None:
        """The put path dispatched everything up to `offset` itself (called under the put lock)."""
        if offset > self.reput_from_offset:
            self.reput_from_offset = offset

    def behind(self) -> int:
        return self.commitlog.max_offset() - self.reput_from_offset

    def do_reput(self) -> int:
        """Dispatch everything between the reput offset and the end offset; returns how many records.

        A queue or index file that cannot be written (a full disk) stops the pass at the record it was
        for (pipeline.failed); the next pass starts there again (the queues skip units they already
        have). The pass that reaches the end with everything written lifts the store's refusal."""
        pipeline = self.pipeline
        cl = self.commitlog
        n = 0
        with self.lock:
            if self.reput_from_offset < cl.min_offset():
                self.reput_from_offset = cl.min_offset()
            end = self.end_offset()
            try:
                while self.reput_from_offset < end:
                    got = cl.data_from(self.reput_from_offset)
                    if got is None:
                        break
                    self.reput_from_offset = got[0]
                    done, more = self._dispatch_segment(got[1], end)
                    n += done
                    if not more:
                        break
            except OSError as e:
                pipeline.failed(e)
            else:
                if pipeline.error is not None:
                    pipeline.index_service.build()  # the entries an earlier build could not place
                    if self.reput_from_offset >= end:
                        pipeline.caught_up()
        if n:
            pipeline.index_service.build()
            if pipeline.notify is not None:
                pipeline.notify()
        return n

    def _dispatch_segment(self, view, end: int) -> tuple[int, bool]:
        """Dispatch the records of one segment's written part; (records dispatched, whether to go on)."""
        pipeline = self.pipeline
        pos, n, limit = 0, 0, len(view)
        while pos < limit and self.reput_from_offset < end:
            if pipeline.bulk:
                done, after, _ = dispatch_run(
                    pipeline, view, pos, min(limit, pos + end - self.reput_from_offset), False, self.delay_levels
                )
                if done:
                    n += done
                    self.reput_from_offset += after - pos
                    pos = after
                    continue
            kind, size, req, problem = check_record(
                view, pos, limit, check_crc=False, force_verify_prop_crc=False, delay_levels=self.delay_levels
            )
            if kind == OK:
                if self.reput_from_offset + size > end:
                    return n, False
                pipeline.dispatch(req)
                n += 1
                pos += size
                self.reput_from_offset += size
            elif kind == BLANK:
                self.reput_from_offset = self.commitlog.roll_next_file(self.reput_from_offset)
                return n, True
            elif size > 0:
                log.error("reput: %s at %d; skipping %d bytes", problem, self.reput_from_offset, size)
                pos += size
                self.reput_from_offset += size
            else:
                log.error("reput: %s at %d; waiting for more data", problem, self.reput_from_offset)
                return n, False
        return n, True

    def do_round(self) -> float:
        if self.do_reput():
            return 0.0
        # after a failed write, retry once a second (RocketMQ's dispatch retries sleep 1 s)
        return 0.05 if self.pipeline.error is None else 1.0

    def stop(self, drain: bool = True) -> None:
        if not self.running:
            return
        if drain:
            self.do_reput()
        super().stop()
