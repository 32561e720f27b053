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

    def __init__(self, store):
        super().__init__()
        self.store = store
        self.reput_from_offset = 0

    def advance_to(self, offset: int) -> None:
        """The put path dispatched everything up to `offset` itself (called under the put lock)."""
        if offset > self.reput_from_offset:
            self.reput_from_offset = offset

    def behind(self) -> int:
        return self.store.commitlog.max_offset() - self.reput_from_offset

    def do_reput(self) -> int:
        """Dispatch everything between the reput offset and the end offset; returns how many records.

        A queue or index file that cannot be written (a full disk) stops the pass at the record it was
        for (store.dispatch_failed); the next pass starts there again (the queues skip units they already
        have). The pass that reaches the end with everything written lifts the store's refusal."""
        store = self.store
        cl = store.commitlog
        n = 0
        with store.writer.lock:
            if self.reput_from_offset < cl.min_offset():
                self.reput_from_offset = cl.min_offset()
            end = store.reput_end_offset()
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
                store.dispatch_failed(e)
            else:
                if store._dispatch_error is not None:
                    store.index.build()   # the entries an earlier build could not place
                    if self.reput_from_offset >= end:
                        store.dispatch_caught_up()
        if n:
            store.index.build()
            store.notify_arrival()
        return n

    def _dispatch_segment(self, view, end: int) -> tuple[int, bool]:
        """Dispatch the records of one segment's written part; (records dispatched, whether to go on)."""
        store = self.store
        pos, n, limit = 0, 0, len(view)
        bulk = len(store.dispatchers) == store._builtin_dispatchers  # users' dispatchers want requests
        while pos < limit and self.reput_from_offset < end:
            if bulk:
                done, after, _ = dispatch_run(store, view, pos, min(limit, pos + end - self.reput_from_offset),
                                           check_crc=False)
                if done:
                    n += done
                    self.reput_from_offset += after - pos
                    pos = after
                    continue
            kind, size, req, problem = check_record(view, pos, limit, check_crc=False, force_verify_prop_crc=False,
                                                    delay_levels=store.delay_levels)
            if kind == OK:
                if self.reput_from_offset + size > end:
                    return n, False
                store.do_dispatch(req)
                n += 1
                pos += size
                self.reput_from_offset += size
            elif kind == BLANK:
                self.reput_from_offset = store.commitlog.roll_next_file(self.reput_from_offset)
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
        return 0.05 if self.store._dispatch_error is None else 1.0

    def stop(self, drain: bool = True) -> None:
        if not self.running:
            return
        if drain:
            self.do_reput()
        super().stop()
