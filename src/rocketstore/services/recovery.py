"""Recovery on open, as DefaultMessageStore.recover: ConsumeQueues first, then the CommitLog from a safe
segment on, re-dispatching records the ConsumeQueues lack, then truncation of everything past the last
valid record. Works the same read-only, where truncation only moves positions in memory.

It is given the files it recovers (the CommitLog, the queue table), the dispatch pipeline, the checks
against the CommitLog and the checkpoint (read only), and returns what it found (`Recovered`): the store
applies that to itself (the confirm offset, the queue offsets its writer continues from)."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

import numpy as np

from .bulk_dispatch import dispatch_run
from .dispatch import BLANK, OK, check_record
from .queue_check import check_tails, redispatch_damaged, units_of

log = logging.getLogger("rocketstore.recovery")
PROGRESS_STEP = 4 << 20  # progress(done, total) every this many bytes within a segment (and runs end there)
ZERO_SCAN = 64 << 20  # _data_end looks back over at most this many zero bytes
ZERO_CHUNK = 1 << 20


@dataclass
class Recovered:
    """What recovery found. `confirm_offset`: where the last valid record starts (the checkpoint's
    confirmPhyOffset and the CommitLog's confirm offset), None when the CommitLog was not recovered (trusted
    queues); `end`: where the CommitLog ends now (everything past it was cut); `queue_offsets`: (topic,
    queue id) -> the next queue offset of each queue."""

    confirm_offset: int | None
    end: int
    queue_offsets: dict = field(default_factory=dict)


def recover(
    commitlog, queues, pipeline, check, checkpoint, config, *, normal: bool, check_commitlog: bool = True, progress=None
) -> Recovered:
    """`queues`: the queue table; `pipeline`: where records the queues lack are dispatched; `check`: a
    services.queue_check.QueueCheck; `checkpoint`: the loaded formats.checkpoint.Checkpoint; `normal`: the
    last exit was clean (no abort file). check_commitlog=False trusts the queues (a read-only open).

    `progress(done_bytes, total_bytes)`, when given, is called as the CommitLog recovery goes, in bytes of
    the log from the segment recovery starts at: (0, total) first, then every PROGRESS_STEP bytes within a
    segment and at each segment's end; the last call has done_bytes == total_bytes == where the log ends
    (with no CommitLog file, one call (0, 0)). Segments are preallocated, so their sizes say nothing about
    how much they hold: total_bytes is first an estimate of where the data ends (`_data_end`), and becomes
    exact when recovery gets there. An exception from it propagates (the open fails)."""
    for cq in queues:
        cq.recover()
    if not check_commitlog:
        # where the last record any queue points at ends (a batch queue's max_physic_offset is its start)
        confirm = None
        end = _trust_queues(commitlog, max((units_of(cq).end() for cq in queues), default=-1))
    else:
        # units are checked against the CommitLog before they decide where dispatching starts: a unit
        # pointing past the log's end would otherwise make it start there (and skip every later unit)
        repair_from = check_tails(check, queues)
        dispatch_from = queues.max_physic_offset()
        if repair_from >= 0:
            # records are dispatched again when they start past dispatch_from (RocketMQ's `>`): the first
            # record a damaged queue lacks starts right at repair_from
            dispatch_from = min(dispatch_from, repair_from - 1)
        run = _CommitLogRecovery(commitlog, queues, pipeline, check, checkpoint, config)
        confirm, end = run.recover(dispatch_from, normal=normal, progress=progress, repair_from=repair_from)
    return Recovered(confirm, end, recover_topic_queue_table(commitlog, queues))


class _Progress:
    """Reporting as recovery goes: a log line per segment (file, records, bytes, elapsed), and the caller's
    callback in bytes of the log since `start` (the first segment's offset), against `end`, where the data
    is thought to end until recovery finds where it does."""

    def __init__(self, start: int, end: int, callback):
        self.start = start
        self.total = max(end - start, 0)
        self.callback = callback
        self.report_at = start + PROGRESS_STEP
        self.started = time.monotonic()
        self.records = 0
        self.total_records = 0
        if callback is not None:
            callback(0, self.total)

    def at(self, offset: int) -> None:
        """Recovery has got to physical offset `offset`: told once it is at `report_at` or past it, which then
        moves PROGRESS_STEP bytes on."""
        if offset >= self.report_at:
            self.report_at = offset + PROGRESS_STEP
            self._tell(offset - self.start)

    def _tell(self, done: int) -> None:
        self.total = max(self.total, done)  # the estimate was short (data ending with zero bytes)
        if self.callback is not None:
            self.callback(done, self.total)

    def segment_done(self, mf, valid_bytes: int, last: bool) -> None:
        now = time.monotonic()
        log.info(
            "recovered CommitLog file %s: %d records, %d bytes, %.3f s",
            mf.path,
            self.records,
            valid_bytes,
            now - self.started,
        )
        self.total_records += self.records
        self.records = 0
        self.started = now
        if last:  # where the log ends: the total is no longer an estimate
            self.total = mf.file_from_offset + valid_bytes - self.start
            self._tell(self.total)
        else:
            end = mf.file_from_offset + mf.file_size
            self.report_at = end + PROGRESS_STEP
            self._tell(end - self.start)


def _data_end(mfs: list, file_size: int) -> int:
    """Where the CommitLog's data is thought to end (physical offset), without reading it: the start of the
    last segment that holds any, plus how much of it the file system says is written (SEEK_HOLE: a
    preallocated segment's unused tail is unwritten or a hole), less the zero bytes before that, looked at
    backwards up to ZERO_SCAN bytes. An estimate for a progress bar: a record may end with zero bytes, a
    file system may report its whole extent as data."""
    last = next((mf for mf in reversed(mfs) if any(mf.buf[0:8])), None)
    if last is None:
        return mfs[0].file_from_offset
    end = file_size
    if hasattr(os, "SEEK_HOLE"):
        try:
            fd = os.open(last.path, os.O_RDONLY)
            try:
                end = min(os.lseek(fd, 0, os.SEEK_HOLE), file_size)
            finally:
                os.close(fd)
        except OSError:
            pass
    at, floor = end, max(end - ZERO_SCAN, 0)
    while at > floor:
        a = max(at - ZERO_CHUNK, floor)
        # a copy: another process may be writing this segment (a read-only open of a live store), and numpy
        # counts the non-zero bytes before it collects them, failing if they change in between
        nonzero = np.flatnonzero(np.frombuffer(bytes(last.buf[a:at]), dtype=np.uint8))
        if len(nonzero):
            return last.file_from_offset + a + int(nonzero[-1]) + 1
        at = a
    return last.file_from_offset + end  # zeros as far as it looked: the file system's answer


class _CommitLogRecovery:
    """recoverNormally / recoverAbnormally over the CommitLog's segments."""

    def __init__(self, commitlog, queues, pipeline, check, checkpoint, config):
        self.commitlog = commitlog
        self.queues = queues
        self.pipeline = pipeline
        self.check = check
        self.checkpoint = checkpoint
        self.config = config
        self.delay_levels = check.delay_levels

    def _first_record_matches(self, mf, dispatch_from: int, normal: bool, repair_from: int = -1) -> bool:
        """isMappedFileMatchedRecover: may recovery start at this segment? Not after `repair_from` (where a
        damaged queue must be dispatched again from), when there is one."""
        if 0 <= repair_from < mf.file_from_offset:
            return False
        cfg = self.config
        kind, size, req, _ = check_record(
            mf.buf,
            0,
            self.commitlog.file_size,
            check_crc=cfg.check_crc_on_recover,
            force_verify_prop_crc=cfg.force_verify_prop_crc,
            delay_levels=self.delay_levels,
        )
        if kind != OK or req.store_timestamp == 0:
            return False
        if cfg.message_index_enable and cfg.message_index_safe:
            if req.store_timestamp > self.checkpoint.index_msg_timestamp:
                return False
        if normal:
            return req.commit_log_offset <= dispatch_from
        return req.store_timestamp <= self.checkpoint.min_timestamp()

    def recover(self, dispatch_from: int, normal: bool, progress=None, repair_from: int = -1) -> tuple[int, int]:
        """(confirm offset, end): where the last valid record starts and where the log ends now."""
        cl = self.commitlog
        mfs = cl.files.files
        cfg = self.config
        if not mfs:
            return self._recover_nothing(progress)
        index = self._first_segment(mfs, dispatch_from, normal, repair_from)
        mf = mfs[index]
        process = mf.file_from_offset
        pos = 0
        last_valid = self.checkpoint.confirm_phy_offset if normal else process
        log.info("recovering the CommitLog %s from %s", "normally" if normal else "after a crash", mf.path)
        report = _Progress(process, _data_end(mfs[index:], cl.file_size) if progress is not None else process, progress)
        # runs of plain records are checked (and re-dispatched) in bulk; anything else goes one at a time. A
        # run ends by the next progress report's offset, so progress is told within a segment too (the
        # record across that offset goes one at a time)
        pipeline = self.pipeline
        bulk = not cfg.force_verify_prop_crc and pipeline.bulk
        while True:
            if bulk:
                done, after, last = dispatch_run(
                    pipeline,
                    mf.buf,
                    pos,
                    min(cl.file_size, report.report_at - process),
                    cfg.check_crc_on_recover,
                    self.delay_levels,
                    dispatch_after=dispatch_from if normal else -1,
                )
                if done:
                    last_valid = process + last
                    pos = after
                    report.records += done
                    report.at(process + pos)
                    continue
            kind, size, req, problem = check_record(
                mf.buf,
                pos,
                cl.file_size,
                check_crc=cfg.check_crc_on_recover,
                force_verify_prop_crc=cfg.force_verify_prop_crc,
                delay_levels=self.delay_levels,
            )
            if kind == OK:
                last_valid = process + pos
                pos += size
                report.records += 1
                if not normal or req.commit_log_offset > dispatch_from:
                    pipeline.dispatch(req)
                report.at(process + pos)
            elif kind == BLANK:
                index += 1
                report.segment_done(mf, pos, index >= len(mfs))
                if index >= len(mfs):
                    break
                mf = mfs[index]
                process, pos = mf.file_from_offset, 0
                log.info("recovering %s", mf.path)
            else:
                if problem and problem != "no record here" and any(mf.buf[pos : pos + 8]):
                    log.warning("%s: offset %d: %s; the log is cut here", mf.path, pos, problem)
                report.segment_done(mf, pos, True)
                break
        process += pos
        log.info("CommitLog recovered up to %d: %d records checked", process, report.total_records)
        self._cut_at(process)
        return last_valid, process

    def _recover_nothing(self, progress) -> tuple[int, int]:
        """A CommitLog without files: no queue can point anywhere."""
        if self.queues:
            log.warning("the CommitLog has no files: dropping every ConsumeQueue")
        self.commitlog.files.flushed_where = self.commitlog.files.committed_where = 0
        self.queues.destroy_all()
        if progress is not None:
            progress(0, 0)
        return self.checkpoint.confirm_phy_offset, 0

    def _first_segment(self, mfs, dispatch_from: int, normal: bool, repair_from: int) -> int:
        """The segment recovery starts from: the last one whose first record is already dispatched and
        checkpointed (recoverNormally / recoverAbnormally's backwards search); the first one else."""
        index = len(mfs) - 1
        while index > (0 if normal else -1):
            if self._first_record_matches(mfs[index], dispatch_from, normal, repair_from):
                break
            index -= 1
        return max(index, 0)

    def _cut_at(self, end: int) -> None:
        """The log ends at `end`: queue units and CommitLog bytes past it go, damaged units are dispatched anew."""
        queues, files = self.queues, self.commitlog.files
        if queues.max_physic_offset() >= end:
            for cq in queues:
                cq.truncate_dirty(end)
        files.flushed_where = files.committed_where = end
        files.truncate_dirty(end)
        redispatch_damaged(self.check, queues, self.pipeline.queues, end)


def _trust_queues(cl, queues_end: int) -> int:
    """A read-only open that reads only through the queues (open(check_commitlog=False)): the CommitLog is
    taken to end where the queues' last record ends, unchecked. Cheap (no record is read), for planners.
    Returns that end."""
    end = max(queues_end, cl.min_offset())
    cl.files.flushed_where = cl.files.committed_where = end
    cl.files.truncate_dirty(end)
    return end


def recover_topic_queue_table(commitlog, queues) -> dict:
    """recoverTopicQueueTable: each queue's min offset corrected to the CommitLog's min; returns (topic,
    queue id) -> the queue's max offset, where the writer continues it."""
    min_phy = commitlog.min_offset()
    table = {}
    for cq in queues:
        table[(cq.topic, cq.queue_id)] = cq.max_offset
        cq.correct_min_offset(min_phy)
    return table
