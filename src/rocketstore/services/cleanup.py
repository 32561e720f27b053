"""Expired-file cleanup: RocketMQ's CleanCommitLogService (DefaultMessageStore) and CleanConsumeQueueService
(ConsumeQueueStore), plus the disk-full flag (RunningFlags' DISK_FULL_BIT) that makes the store refuse puts.

One pass (`CleanupService.run_once`) is what RocketMQ's two scheduled tasks do every cleanResourceInterval:

* CommitLog: delete segments last modified more than `file_reserved_time` hours ago when it is one of the
  `delete_when` hours, or when the disk is fuller than `disk_max_used_space_ratio`, or while a manual
  trigger (`execute_delete_files_manually`, 20 passes) is pending; above `disk_space_clean_forcibly_ratio`
  unexpired segments go too (cleanImmediately). At most `delete_file_batch_max` per pass, oldest first,
  stopping at the first one kept, never the last segment. With archiveEnable, a segment the archive at
  archivePath does not hold yet is kept too (and so, no holes, is every later one), whatever the disk.
* Above `disk_space_warning_level_ratio` the store is marked disk-full and refuses puts
  (SERVICE_NOT_AVAILABLE, as the broker's HookUtils.checkBeforePutMessage answers a store that is not
  writeable); every pass measures again and clears the flag once the disk is below it. Only puts are
  refused: ConsumeQueue and index dispatch go on (alibaba/rocketmq #331: a store whose queues stopped on a
  full disk never recovered).
* ConsumeQueues, batch ConsumeQueues and index files: once the CommitLog's min offset has moved, delete the
  files whose entries all lie below it, then correct each queue's min offset.

The services are given what they work on (the config, the CommitLog, the queue table, the index, the put
lock, the store's layout), never the store.

"Now" comes from `config.clock` and expiry from the segments' mtimes (File.lastModified), so tests fake time
with the clock and os.utime. The disk usage function (path -> used ratio 0..1, or -1) can be replaced.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from ..errors import ArchiveError
from ..files.archive_manifest import ArchiveManifest, local_dest
from ..files.layout import COMMITLOG, CONSUMEQUEUE
from .service_thread import ServiceThread

log = logging.getLogger("rocketstore.cleanup")
store_log = logging.getLogger("rocketstore")

MAX_MANUAL_DELETE_FILE_TIMES = 20
FIRST_RUN_DELAY_MS = 60_000  # RocketMQ schedules the first cleanup a minute after start
# The disk-full flag is measured at open and then by puts, at most this often, instead of first by the
# cleanup pass a minute after start: a statvfs per disk costs microseconds
DISK_CHECK_INTERVAL_S = 0.1


def disk_space_used_ratio(path: str) -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent: used / (used + usable) of the partition holding `path`,
    rounded up to whole percent, as a fraction; -1 when it cannot be measured. One statvfs: used is total
    minus every free block (Java's getFreeSpace, f_bfree), usable what an unprivileged writer may still take
    (getUsableSpace, f_bavail)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    used = total - st.f_bfree * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return -1.0
    return (used * 100 // entire + (1 if used * 100 % entire else 0)) / 100.0


def is_it_time_to_do(when: str, now_ms: int) -> bool:
    """UtilAll.isItTimeToDo: is the local hour of `now_ms` one of the ';'-separated hours in `when`?"""
    hour = time.localtime(now_ms / 1000.0).tm_hour
    for w in str(when).split(";"):
        try:
            if int(w) == hour:
                return True
        except ValueError:
            log.warning("delete_when %r: %r is not an hour", when, w)
    return False


class CleanCommitLogService:
    """DefaultMessageStore.CleanCommitLogService."""

    def __init__(self, config, commitlog, layout, disk_usage=None):
        self.config = config
        self.commitlog = commitlog
        self.layout = layout
        self.disk_usage = disk_usage or disk_space_used_ratio
        self.manual_delete_times = 0
        self.clean_immediately = False
        self.disk_full = False  # RunningFlags' DISK_FULL_BIT

    # -- the three ratios, clamped as RocketMQ clamps them
    def disk_space_warning_level_ratio(self) -> float:
        return min(max(self.config.disk_space_warning_level_ratio / 100.0, 0.35), 0.90)

    def disk_space_clean_forcibly_ratio(self) -> float:
        return min(max(self.config.disk_space_clean_forcibly_ratio / 100.0, 0.30), 0.85)

    def execute_delete_files_manually(self) -> None:
        self.manual_delete_times = MAX_MANUAL_DELETE_FILE_TIMES
        log.info("executeDeleteFilesManually was invoked")

    def _measure(self, sub: str) -> float:
        # a directory that does not exist yet is measured on the store root (RocketMQ answers -1 there,
        # which reads as "disk full soon": apache/rocketmq #1493, #3463)
        path = self.layout.path(sub)
        return self.disk_usage(path if os.path.isdir(path) else self.layout.root)

    def _mark_full(self, what: str, ratio: float) -> None:
        if not self.disk_full:
            log.error("%s disk maybe full soon (%.2f used), so mark disk full: puts are refused", what, ratio)
        self.disk_full = True

    def _mark_ok(self, what: str, ratio: float) -> None:
        if self.disk_full:
            log.info("%s disk space OK (%.2f used), so mark disk ok: puts are accepted again", what, ratio)
        self.disk_full = False

    def _measure_and_flag(self) -> tuple[dict, bool]:
        """The disks and the disk-full flag, as isSpaceToDelete sets it: the CommitLog's disk first, then the
        ConsumeQueues'; past the warning level the disk is full, past the forcible level files go now.
        Returns (the ratios measured, whether one is past the forcible level)."""
        warning, forcibly = self.disk_space_warning_level_ratio(), self.disk_space_clean_forcibly_ratio()
        used = {}
        for what, sub in (("physic", COMMITLOG), ("logics", CONSUMEQUEUE)):
            used[what] = ratio = self._measure(sub)
            if ratio > warning:
                self._mark_full(what, ratio)
                return used, True
            if ratio > forcibly:
                return used, True
            self._mark_ok(what, ratio)
        return used, False

    def check_disk_full(self) -> bool:
        """Only the disk-full flag (no reclaiming decided), measured now: at open and from the put path."""
        self._measure_and_flag()
        return self.disk_full

    def is_space_to_delete(self) -> bool:
        """isSpaceToDelete (one CommitLog path, replicasPerDiskPartition 1): sets clean_immediately and the
        disk-full flag; True when files should be reclaimed at any hour."""
        used, past_forcible = self._measure_and_flag()
        self.clean_immediately = past_forcible
        if past_forcible:
            return True
        most = self.config.disk_max_used_space_ratio / 100.0
        for what, name in (("physic", "commitLog"), ("logics", "consumeQueue")):
            if used[what] < 0 or used[what] > most:
                log.info("%s disk maybe full soon, so reclaim space, %.2f", name, used[what])
                return True
        return False

    def run(self, now_ms: int) -> int:
        """deleteExpiredFiles: one pass; returns how many CommitLog segments were deleted."""
        cfg = self.config
        is_time_up = is_it_time_to_do(cfg.delete_when, now_ms)
        usage_exceeds = self.is_space_to_delete()
        manual = self.manual_delete_times > 0
        if not (is_time_up or usage_exceeds or manual):
            return 0
        if manual:
            self.manual_delete_times -= 1
        clean_at_once = cfg.clean_file_forcibly_enable and self.clean_immediately
        log.info(
            "begin to delete files older than %d hours: timeUp %s, usageExceeds %s, manual %d, "
            "cleanAtOnce %s, batchMax %d",
            cfg.file_reserved_time,
            is_time_up,
            usage_exceeds,
            self.manual_delete_times,
            clean_at_once,
            cfg.delete_file_batch_max,
        )
        count = self.commitlog.files.delete_expired_by_time(
            cfg.file_reserved_time * 3600 * 1000,
            now_ms,
            cfg.delete_commit_log_files_interval,
            clean_at_once,
            cfg.delete_file_batch_max,
            may_delete=self._archived if cfg.archive_enable else None,
        )
        if count == 0 and usage_exceeds:
            log.warning("disk space will be full soon, but delete file failed.")
        return count

    def _archived(self, path: str) -> bool:
        """May cleanup delete this CommitLog segment with archiveEnable? Only once the archive at archivePath
        holds it (an entry of its name and of its first bytes: not another store's); else it is held back, and
        said so."""
        name, dest = os.path.basename(path), self.config.archive_path
        try:
            if ArchiveManifest(local_dest(dest)).holds(path):
                return True
        except ArchiveError as e:  # archivePath names no local directory: nothing is archived there
            log.warning("archivePath: %s", e)
        log.warning(
            "cleanup held back at CommitLog segment %s: the archive at %s does not hold it yet (archiveEnable); "
            "`rocketstore archive %s --to %s --watch` beside the broker archives each segment as it closes",
            name, dest, self.layout.root, dest,
        )  # fmt: skip
        return False


class CleanConsumeQueueService:
    """ConsumeQueueStore.CleanConsumeQueueService: queue and index files in step with the CommitLog's min."""

    def __init__(self, config, commitlog, queues, index, lock):
        self.config = config
        self.commitlog = commitlog
        self.queues = queues  # the queue table
        self.index = index  # the IndexService
        self.lock = lock  # the put lock: dispatch (put path or reput) writes the queues under it
        self.last_physical_min_offset = 0

    def run(self, sleep=time.sleep) -> int:
        """One pass; returns how many queue files were deleted."""
        min_offset = self.commitlog.min_offset()
        if min_offset <= self.last_physical_min_offset:
            return 0
        self.last_physical_min_offset = min_offset
        interval = self.config.delete_consume_queue_files_interval
        total = 0
        for cq in self.queues:
            with self.lock:
                count = cq.delete_expired(min_offset)
            total += count
            if count > 0 and interval > 0:
                sleep(interval / 1000.0)
        self.index.delete_expired(min_offset)
        return total


class CleanupService(ServiceThread):
    """Both services, run in one pass by the store's cleanup thread (or by hand: run_once); and the put
    path's disk-full gate (refuses_put)."""

    name = "rocketstore-cleanup"
    wakeable = False

    def __init__(self, config, commitlog, queues, index, lock, layout, disk_usage=None):
        super().__init__()
        self.config = config
        self.commitlog = CleanCommitLogService(config, commitlog, layout, disk_usage)
        self.consume_queues = CleanConsumeQueueService(config, commitlog, queues, index, lock)
        self.first_run_delay_ms = FIRST_RUN_DELAY_MS
        self._pass_lock = threading.Lock()
        self.next_disk_check = 0.0  # time.monotonic() of the put path's next disk measure
        self._refused_puts = 0

    @property
    def disk_usage(self):
        return self.commitlog.disk_usage

    @disk_usage.setter
    def disk_usage(self, fn) -> None:
        self.commitlog.disk_usage = fn or disk_space_used_ratio

    @property
    def disk_full(self) -> bool:
        return self.commitlog.disk_full

    def check_disk_full(self) -> bool:
        """Measure the disks now and set the disk-full flag (no files deleted)."""
        return self.commitlog.check_disk_full()

    def checked_at_open(self) -> None:
        """Measure at open: puts see a full disk from the first one (not a pass later)."""
        self.check_disk_full()
        self.next_disk_check = time.monotonic() + DISK_CHECK_INTERVAL_S

    def refuses_put(self, name: str = "") -> bool:
        """The put path's gate: is the disk full (measured again at most every DISK_CHECK_INTERVAL_S, so a
        disk that fills is seen within 0.1 s)? A refusal is logged once per 50,000."""
        now = time.monotonic()
        if now >= self.next_disk_check:
            self.next_disk_check = now + DISK_CHECK_INTERVAL_S
            self.check_disk_full()
        if not self.commitlog.disk_full:
            return False
        if self._refused_puts % 50000 == 0:
            store_log.warning(
                "%s: the disk is full (above %d%%): put refused with SERVICE_NOT_AVAILABLE",
                name,
                self.config.disk_space_warning_level_ratio,
            )
        self._refused_puts += 1
        return True

    def run_once(self, now_ms: int | None = None) -> int:
        """cleanFilesPeriodically then cleanQueueFilesPeriodically; returns the CommitLog segments deleted."""
        with self._pass_lock:
            now = self.config.clock() if now_ms is None else now_ms
            try:
                deleted = self.commitlog.run(now)
            except Exception:
                log.exception("CleanCommitLogService failed")
                deleted = 0
            try:
                self.consume_queues.run()
            except Exception:
                log.exception("CleanConsumeQueueService failed")
            return deleted

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """The manual trigger: executeDeleteFilesManually, then passes now (not on the next ticks) until one
        deletes nothing or the trigger's passes are used up. Returns the CommitLog segments deleted."""
        self.commitlog.execute_delete_files_manually()
        total = 0
        while self.commitlog.manual_delete_times > 0:
            n = self.run_once(now_ms)
            total += n
            if n == 0:
                break
        return total

    # -- the periodic thread
    @property
    def initial_delay_s(self) -> float:
        return self.first_run_delay_ms / 1000.0

    def do_round(self) -> float:
        self.run_once()
        return max(self.config.clean_resource_interval, 1) / 1000.0
