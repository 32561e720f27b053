"""Flush services: RocketMQ's CommitLog.FlushRealTimeService (ASYNC_FLUSH), CommitLog.GroupCommitService
(SYNC_FLUSH) and ConsumeQueueStore.FlushConsumeQueueService, with the checkpoint written on their cadence.

* ASYNC_FLUSH (`CommitLogFlushService`): every `flush_interval_commit_log` ms flush the CommitLog segment at
  the flushed offset when it has `flush_commit_log_least_pages` dirty pages (or is full); every
  `flush_commit_log_thorough_interval` ms flush whatever is dirty. A thorough flush records the store time
  of the last record of the segment it reached (MappedFileQueue.flush sets storeTimestamp only when
  flushLeastPages is 0) and that becomes the checkpoint's physicMsgTimestamp (in memory; the ConsumeQueue
  flush service writes the file).
* SYNC_FLUSH (`GroupCommitService`): a put hands in a request (the offset its bytes end at) and waits; the
  service swaps the pending requests out and flushes once up to the highest of them, so concurrent puts
  share one fsync. A request not confirmed within `sync_flush_timeout` ms answers FLUSH_DISK_TIMEOUT (the
  record stays written, as RocketMQ's FlushDiskWatcher). A sync that fails (OSError) answers
  FLUSH_DISK_TIMEOUT to every request it was to confirm at once, and is never retried: after a failed fsync
  the kernel may have dropped the dirty pages and a second fsync would report success for bytes that are
  gone (RocketMQ logs the failure and may confirm anyway: apache/rocketmq #2706). The status is the one
  RocketMQ gives an unconfirmed flush (GroupCommitService.doCommit: PUT_OK or FLUSH_DISK_TIMEOUT). As
  RocketMQ's MappedFile.flush on an IOException (RunningFlags.getAndMakeNotWriteable), a failed CommitLog
  sync, in either mode, makes the store not writeable: puts answer SERVICE_NOT_AVAILABLE and nothing more
  is flushed or dispatched past the failure until the store is reopened (and recovers).
* `ConsumeQueueFlushService`: every `flush_interval_consume_queue` ms flush each queue's segment with
  `flush_consume_queue_least_pages` dirty pages; every `flush_consume_queue_thorough_interval` ms flush all
  and write the checkpoint, its logicsMsgTimestamp taken before the queues were flushed (doFlush).

Under SYNC_FLUSH nothing may be readable before it is on disk (apache/rocketmq #8239). The store turns the
put path's inline dispatch off and lets reput dispatch, which already stops at the flushed offset
(ReputService.end_offset): one gate, in one place, for every kind of put (plain, producer batch,
batch ConsumeQueue topic) instead of holding each put path's queue units back until its flush. Dispatching
again costs a decode per record, which is small next to an fsync. The group-commit thread runs reput
itself right after each flush and before it answers the puts, so a put that returned PUT_OK is readable
at once (read-your-writes), and a whole group is dispatched in one bulk pass.

The services are given what they work on (the CommitLog, the queue table, the checkpoint file, the reput
service), never the store; `CommitLogHealth` is the NOT_WRITEABLE flag they set and the store reads.

The sync function is replaceable (`sync`: fn(mapped_file, start, length), must make those bytes durable or
raise OSError) so that tests can count, slow down or fail fsyncs.
"""

from __future__ import annotations

import logging
import threading
import time

from ..config.store_config import SYNC_FLUSH
from ..message import PutStatus
from .service_thread import ServiceThread

log = logging.getLogger("rocketstore.flush")
store_log = logging.getLogger("rocketstore")

RETRY_TIMES_OVER = 10  # CommitLog: flush attempts on shutdown
CQ_RETRY_TIMES_OVER = 3  # FlushConsumeQueueService


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class CommitLogHealth:
    """RunningFlags' NOT_WRITEABLE: False once a CommitLog sync failed (as RocketMQ's MappedFile.flush on an
    IOException), until the store is reopened. `name`: the store's directory, for the log."""

    def __init__(self, name: str):
        self.name = name
        self.writeable = True

    def sync_failed(self, error: OSError) -> None:
        if self.writeable:
            store_log.error("%s: CommitLog sync failed (%s): the store is not writeable any more", self.name, error)
        self.writeable = False


class _Service(ServiceThread):
    """A flush service: a ServiceThread pausing `interval_ms` between rounds (and after a failed round:
    RocketMQ logs and goes on at its interval)."""

    name = "rocketstore-flush"

    def __init__(self, config, commitlog, health: CommitLogHealth, interval_ms: int):
        super().__init__()
        self.config = config
        self.commitlog = commitlog
        self.health = health
        self.initial_delay_s = self.error_delay_s = interval_ms / 1000.0


class CommitLogFlushService(_Service):
    """FlushRealTimeService: ASYNC_FLUSH's periodic CommitLog flush."""

    name = "rocketstore-flush-commitlog"

    def __init__(self, config, commitlog, health, checkpoint):
        super().__init__(config, commitlog, health, config.flush_interval_commit_log)
        self.checkpoint = checkpoint  # formats.checkpoint.Checkpoint: physicMsgTimestamp is set here
        # flushCommitLogTimed: the interval is slept out; else a wakeup may cut it short
        self.wakeable = not config.flush_commit_log_timed
        self.last_flush_timestamp = 0
        self.flushes = 0

    def flush_once(self, least_pages: int | None = None) -> None:
        """One round: a flush of the segment at the flushed offset (thorough when it is time, or when
        least_pages is 0), then physicMsgTimestamp from what a thorough flush reached."""
        cfg = self.config
        if least_pages is None:
            least_pages = cfg.flush_commit_log_least_pages
            now = _now_ms()
            if now >= self.last_flush_timestamp + cfg.flush_commit_log_thorough_interval:
                self.last_flush_timestamp = now
                least_pages = 0
        files = self.commitlog.files
        if not self.health.writeable:
            return
        try:
            files.flush(least_pages)
        except OSError as e:
            self.health.sync_failed(e)
            return
        self.flushes += 1
        if files.store_timestamp > 0:
            self.checkpoint.physic_msg_timestamp = files.store_timestamp

    def do_round(self) -> float:
        self.flush_once()
        return self.initial_delay_s

    def on_stop(self) -> None:
        """Normal shutdown: flush everything before leaving (until a flush moves nothing)."""
        for _ in range(RETRY_TIMES_OVER):
            if not self.health.writeable:
                break
            try:
                if self.commitlog.files.flush(0):
                    break
            except OSError as e:
                self.health.sync_failed(e)
                break


class CommitService(_Service):
    """CommitRealTimeService (transient store pool): every commit_interval_commit_log ms, copy what puts
    appended to the write buffers into the CommitLog file (at least commit_commit_log_least_pages pages, or
    all of it every commit_commit_log_thorough_interval ms), then wake the flush service. Readers and reput
    see only what is committed."""

    name = "rocketstore-commit-commitlog"

    wakeable = False

    def __init__(self, config, commitlog, health, flush: _Service, reput):
        super().__init__(config, commitlog, health, config.commit_interval_commit_log)
        self.flush = flush
        self.reput = reput
        self.last_commit_timestamp = 0
        self.commits = 0

    def commit_once(self, least_pages: int | None = None) -> None:
        cfg = self.config
        if least_pages is None:
            least_pages = cfg.commit_commit_log_least_pages
            now = _now_ms()
            if now >= self.last_commit_timestamp + cfg.commit_commit_log_thorough_interval:
                self.last_commit_timestamp = now
                least_pages = 0
        if not self.commitlog.files.commit(least_pages):
            self.commits += 1
            self.flush.wake()
            self.reput.wake()

    def do_round(self) -> float:
        self.commit_once()
        return self.initial_delay_s

    def on_stop(self) -> None:
        self.commitlog.files.commit_all()  # shutdown: everything into the file before the last flush


class _Request:
    __slots__ = ("next_offset", "status", "done")

    def __init__(self, next_offset: int):
        self.next_offset = next_offset
        self.status: PutStatus | None = None
        self.done = threading.Event()


class GroupCommitService(_Service):
    """GroupCommitService: SYNC_FLUSH's group commit."""

    name = "rocketstore-group-commit"

    def __init__(self, config, commitlog, health, checkpoint, reput):
        super().__init__(config, commitlog, health, 10)
        self.checkpoint = checkpoint
        self.reput = reput
        self._lock = threading.Lock()
        self._requests: list[_Request] = []
        self.commits = 0  # flush rounds that served at least one request

    def wait_for(self, next_offset: int) -> PutStatus:
        """Block until the CommitLog is flushed up to `next_offset`: PUT_OK, or FLUSH_DISK_TIMEOUT after
        sync_flush_timeout ms or when the flush failed."""
        files = self.commitlog.files
        if files.flushed_where >= next_offset:
            return PutStatus.PUT_OK
        req = _Request(next_offset)
        with self._lock:
            if not self.running:  # stopped (closing): nobody would answer
                return PutStatus.FLUSH_DISK_TIMEOUT
            self._requests.append(req)
        self.wake()
        if not req.done.wait(self.config.sync_flush_timeout / 1000.0):
            log.error(
                "group commit: the flush up to %d did not come within %d ms",
                next_offset,
                self.config.sync_flush_timeout,
            )
            return PutStatus.FLUSH_DISK_TIMEOUT
        return req.status

    def do_commit(self) -> None:
        with self._lock:
            reqs, self._requests = self._requests, []
        files = self.commitlog.files
        target = max((r.next_offset for r in reqs), default=files.max_offset())
        try:
            while self.health.writeable and files.flushed_where < target:
                if files.flush(0):  # flushed_where did not move: nothing more to flush
                    break
        except OSError as e:
            log.error(
                "group commit: flush failed at %d: %s; %d puts waiting for it fail", files.flushed_where, e, len(reqs)
            )
            self.health.sync_failed(e)
        if files.store_timestamp > 0:
            self.checkpoint.physic_msg_timestamp = files.store_timestamp
        if not reqs:
            return
        self.commits += 1
        try:
            self.reput.do_reput()  # what was flushed becomes readable before the puts are answered
        except Exception:
            log.exception("group commit: dispatch after the flush failed")
        where = files.flushed_where
        for r in reqs:
            # after a failed sync only what an earlier sync confirmed counts (flushed_where did not move)
            r.status = PutStatus.PUT_OK if where >= r.next_offset else PutStatus.FLUSH_DISK_TIMEOUT
            r.done.set()

    def do_round(self) -> float:
        self.do_commit()
        return self.initial_delay_s

    def on_stop(self) -> None:
        time.sleep(0.01)  # shutdown: answer what came in meanwhile
        self.do_commit()

    def stop(self) -> None:
        if not self.running:
            return
        super().stop()
        with self._lock:
            reqs, self._requests = self._requests, []
        for r in reqs:  # came in after the last round: unconfirmed
            r.status = PutStatus.FLUSH_DISK_TIMEOUT
            r.done.set()


class ConsumeQueueFlushService(_Service):
    """FlushConsumeQueueService: the ConsumeQueues' periodic flush, and the checkpoint on thorough rounds."""

    name = "rocketstore-flush-consumequeue"

    def __init__(self, config, queues, checkpoint_file):
        super().__init__(config, None, None, config.flush_interval_consume_queue)
        self.queues = queues  # the queue table
        self.checkpoint_file = checkpoint_file  # log.checkpoint_file.CheckpointFile
        self.last_flush_timestamp = 0
        self.checkpoints_written = 0

    def do_flush(self, retry_times: int = 1) -> None:
        cfg = self.config
        checkpoint = self.checkpoint_file.data
        least_pages = 0 if retry_times == CQ_RETRY_TIMES_OVER else cfg.flush_consume_queue_least_pages
        logics_msg_timestamp = 0
        now = _now_ms()
        if now >= self.last_flush_timestamp + cfg.flush_consume_queue_thorough_interval:
            self.last_flush_timestamp = now
            least_pages = 0
            logics_msg_timestamp = checkpoint.logics_msg_timestamp
        for cq in self.queues:
            result = False
            for _ in range(retry_times):
                if result:
                    break
                try:
                    result = cq.flush(least_pages)
                except OSError as e:
                    log.error("flushing consume queue %s-%d failed: %s", cq.topic, cq.queue_id, e)
                    break
        if least_pages == 0:
            if logics_msg_timestamp > 0:
                checkpoint.logics_msg_timestamp = logics_msg_timestamp
            self.checkpoint_file.write()
            self.checkpoints_written += 1

    def do_round(self) -> float:
        self.do_flush(1)
        return self.initial_delay_s

    def on_stop(self) -> None:
        self.do_flush(CQ_RETRY_TIMES_OVER)


class FlushServices:
    """The store's flush services: the CommitLog's (group commit under SYNC_FLUSH, else the periodic one)
    and the ConsumeQueues'; the commit service with the transient store pool. `health`: the NOT_WRITEABLE
    flag a failed sync sets. `sync` replaces the CommitLog's msync (tests)."""

    def __init__(self, config, commitlog, queues, checkpoint_file, reput, name: str = ""):
        self.files = commitlog.files
        self.health = CommitLogHealth(name)
        self.sync_mode = config.flush_disk_type == SYNC_FLUSH
        checkpoint = checkpoint_file.data
        self.commitlog = (
            GroupCommitService(config, commitlog, self.health, checkpoint, reput)
            if self.sync_mode
            else CommitLogFlushService(config, commitlog, self.health, checkpoint)
        )
        self.consume_queue = ConsumeQueueFlushService(config, queues, checkpoint_file)
        self.commit = (
            CommitService(config, commitlog, self.health, self.commitlog, reput)
            if commitlog.files.pool is not None
            else None
        )

    @property
    def writeable(self) -> bool:
        return self.health.writeable

    @property
    def sync(self):
        return self.files.sync

    @sync.setter
    def sync(self, fn) -> None:
        self.files.sync = fn

    def start(self) -> None:
        if self.commit is not None:
            self.commit.start()
        self.commitlog.start()
        self.consume_queue.start()

    def stop(self) -> None:
        if self.commit is not None:
            self.commit.stop()  # commits what is left, so the flush below writes it out
        self.commitlog.stop()
        self.consume_queue.stop()

    def wait_flushed(self, next_offset: int) -> PutStatus:
        return self.commitlog.wait_for(next_offset)
