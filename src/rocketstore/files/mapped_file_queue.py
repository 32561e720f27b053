"""The ordered segments of one log (a CommitLog, or one queue's ConsumeQueue), as RocketMQ's MappedFileQueue."""

from __future__ import annotations

import logging
import os
import time

from ..errors import StoreOpenError
from .mapped_file import NAME_DIGITS, MappedFile, segment_name

log = logging.getLogger("rocketstore.files")


def _sync_directory(path: str) -> None:
    """fsync a directory, so that files removed from it stay removed after a power loss."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class MappedFileQueue:
    def __init__(self, directory: str, file_size: int, *, writable: bool, unit: int = 1):
        if file_size <= 0:
            raise ValueError(f"mapped file size must be positive, got {file_size}")
        self.directory = directory
        self.file_size = file_size
        self.unit = unit  # the size of one entry (a ConsumeQueue's 20 bytes), for error messages
        self.writable = writable
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self.committed_where = 0
        self.store_timestamp = 0  # store time of the last record of what a thorough flush reached
        self.sync = None  # sync(mapped_file, start, length): replaces msync (a test hook)
        self.pool = None  # a TransientStorePool: new segments take a write buffer from it

    def load(self) -> None:
        """Map every segment in the directory, oldest first; every one must have the configured size."""
        if not os.path.isdir(self.directory):
            return
        names = sorted(n for n in os.listdir(self.directory) if not n.startswith("."))
        for n in names:
            path = os.path.join(self.directory, n)
            if len(n) != NAME_DIGITS or not n.isdigit():
                raise StoreOpenError(f"{path}: unexpected file in a segment directory")
            if int(n) % self.file_size:
                raise StoreOpenError(
                    f"{path}: segment start {int(n)} is not a multiple of the file size {self.file_size}"
                )
            self._check_length(path)
            mf = MappedFile(path, self.file_size, writable=self.writable)
            mf.set_positions(self.file_size)  # recovery brings the last ones back to their real end
            self.files.append(mf)

    def _check_length(self, path: str) -> None:
        """MappedFileQueue.doLoad: a file whose length is not the mapped file size fails the load ("length not
        matched message store config value, please check it manually")."""
        actual = os.path.getsize(path)
        if actual == self.file_size:
            return
        text = f"{path}: file is {actual} bytes, the store expects {self.file_size}"
        if self.unit > 1:
            text += f" ({self.file_size // self.unit} units of {self.unit} bytes)"
            if actual % self.unit:
                text += f"; {actual} bytes end inside a unit"
        raise StoreOpenError(text)

    # -- lookups
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else -1

    def max_offset(self) -> int:
        mf = self.last()
        return mf.file_from_offset + mf.read_position if mf else 0

    def find(self, offset: int, return_first_on_not_found: bool = False) -> MappedFile | None:
        """findMappedFileByOffset: the segment holding `offset`."""
        if not self.files:
            return None
        first = self.files[0]
        idx = offset // self.file_size - first.file_from_offset // self.file_size
        if 0 <= idx < len(self.files):
            mf = self.files[idx]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        return first if return_first_on_not_found else None

    def get_last(self, start_offset: int = 0, create: bool = True) -> MappedFile | None:
        """getLastMappedFile: the segment to append to, creating the next one when the last is full."""
        last = self.last()
        if last is not None and not last.is_full():
            return last
        if not create:
            return last
        if last is None:
            create_offset = start_offset - start_offset % self.file_size
        else:
            create_offset = last.file_from_offset + self.file_size
        if self.writable:
            os.makedirs(self.directory, exist_ok=True)
        mf = MappedFile(
            os.path.join(self.directory, segment_name(create_offset)),
            self.file_size,
            writable=self.writable,
            create=True,
        )
        if self.pool is not None and self.writable:
            mf.wbuf = self.pool.borrow()  # None when all are out: this segment is written directly
            mf.committed = 0
        if not self.files:
            mf.first_create_in_queue = True
        self.files.append(mf)
        return mf

    # -- truncation and deletion
    def truncate_dirty(self, offset: int) -> None:
        """truncateDirtyFiles: move positions back to `offset`; segments wholly beyond it are deleted. Unlike
        RocketMQ, the bytes cut off the segment holding `offset` are zeroed on disk (MappedFile.clear_from)
        and the deletions made durable: nothing cut may come back at the next recovery."""
        keep = []
        dropped = False
        for mf in self.files:
            end = mf.file_from_offset + self.file_size
            if end > offset:
                if offset >= mf.file_from_offset:
                    mf.set_positions(offset % self.file_size)
                    mf.clear_from(offset % self.file_size)
                    keep.append(mf)
                else:
                    self._drop(mf)
                    dropped = True
            else:
                keep.append(mf)
        self.files = keep
        if dropped and self.writable:
            _sync_directory(self.directory)

    def delete_last(self) -> None:
        if self.files:
            self._drop(self.files.pop())

    def _drop(self, mf: MappedFile) -> None:
        if self.writable:
            log.info("deleting segment %s", mf.path)
            mf.destroy()
        else:
            mf.close()  # read-only: forget it, never touch the disk

    # -- expiry (MappedFileQueue.deleteExpiredFileByTime / deleteExpiredFileByOffset)
    @staticmethod
    def last_modified_ms(mf: MappedFile) -> int:
        """File.lastModified(): the segment's mtime in ms, 0 when the file is gone."""
        try:
            return os.stat(mf.path).st_mtime_ns // 1_000_000
        except OSError:
            return 0

    def delete_expired_by_time(
        self,
        expired_ms: int,
        now_ms: int,
        delete_files_interval_ms: int = 0,
        clean_immediately: bool = False,
        batch_max: int = 10,
        sleep=time.sleep,
        may_delete=None,
    ) -> int:
        """deleteExpiredFileByTime: from the oldest segment on, delete those last modified `expired_ms` or
        more before `now_ms` (any, with clean_immediately), at most `batch_max`, never the last segment, and
        stop at the first one that has not expired (no holes in the middle), or that `may_delete(path)`
        (when given) keeps. Returns how many went."""
        mfs = list(self.files)
        last = len(mfs) - 1
        gone: list[MappedFile] = []
        for i in range(last):
            mf = mfs[i]
            if not (now_ms >= self.last_modified_ms(mf) + expired_ms or clean_immediately):
                break  # avoid deleting files in the middle
            if may_delete is not None and not may_delete(mf.path):
                break  # held back (an archive that does not hold it yet): and so is every later one
            self._retire(mf)
            gone.append(mf)
            if len(gone) >= batch_max:
                break
            if delete_files_interval_ms > 0 and i + 1 < last:
                sleep(delete_files_interval_ms / 1000.0)
        self._remove_head(gone)
        return len(gone)

    def delete_expired_by_offset(self, offset: int, unit_size: int) -> int:
        """deleteExpiredFileByOffset: delete leading segments (never the last) whose last unit (the 8-byte
        offset at file_size - unit_size) points below `offset`; stop at the first that does not, or that is
        not written up to its last unit. Returns how many went."""
        mfs = list(self.files)
        gone: list[MappedFile] = []
        pos = self.file_size - unit_size
        for mf in mfs[:-1]:
            if not 0 <= pos < mf.read_position:
                break  # selectMappedBuffer fails: RocketMQ stops here ("this being not executed forever")
            max_in_file = int.from_bytes(mf.buf[pos : pos + 8], "big", signed=True)
            if max_in_file >= offset:
                break
            log.info("physic min offset %d, logics in %s max offset %d: delete it", offset, mf.path, max_in_file)
            gone.append(mf)
        for mf in gone:
            self._retire(mf)
        self._remove_head(gone)
        return len(gone)

    def delete_head(self, gone: list[MappedFile]) -> None:
        """Delete these leading segments (expired), leaving readers that hold them their old bytes."""
        for mf in gone:
            self._retire(mf)
        self._remove_head(gone)

    def _remove_head(self, gone: list[MappedFile]) -> None:
        """Take the deleted leading segments off the list in one step (appends only ever go to the end)."""
        if not gone:
            return
        n = len(gone)
        if all(a is b for a, b in zip(self.files[:n], gone)):
            del self.files[:n]
        else:  # not the head any more (should not happen): remove them one by one
            ids = {id(mf) for mf in gone}
            self.files[:] = [mf for mf in self.files if id(mf) not in ids]

    def _retire(self, mf: MappedFile) -> None:
        """Delete an expired segment's file. The mapping is not closed here: a reader that already holds the
        segment keeps reading valid (old) bytes, and the mapping goes with the last reference to it."""
        if not self.writable:
            return
        log.info("deleting expired segment %s", mf.path)
        try:
            os.unlink(mf.path)
        except FileNotFoundError:
            pass

    # -- flush
    def flush(self, least_pages: int = 0) -> bool:
        """MappedFileQueue.flush: flush the segment holding flushed_where when it is full or has at least
        `least_pages` dirty pages; a thorough flush (0) records the segment's last store timestamp as read
        before the sync. True when flushed_where did not move (RocketMQ's result). An OSError from the sync
        propagates with flushed_where unchanged."""
        mf = self.find(self.flushed_where, self.flushed_where == 0)
        if mf is None:
            first = self.first()
            if first is None or self.flushed_where >= first.file_from_offset:
                return True
            # the segments it pointed into were deleted (expired): go on from the first one left
            self.flushed_where = self.committed_where = first.file_from_offset
            mf = first
        tmp_timestamp = mf.store_timestamp
        if mf.is_able_to_flush(least_pages):
            mf.flush(self.sync)
        where = mf.file_from_offset + mf.flushed  # a full segment: the next call moves on to the next one
        result = where == self.flushed_where
        if where > self.flushed_where:
            self.flushed_where = where
            self.committed_where = max(self.committed_where, where)
        if least_pages == 0:
            self.store_timestamp = tmp_timestamp
        return result

    def commit(self, least_pages: int = 0) -> bool:
        """MappedFileQueue.commit: commit the segment holding committed_where; True when nothing moved."""
        mf = self.find(self.committed_where, self.committed_where == 0)
        if mf is None:
            return True
        where = mf.file_from_offset + mf.commit(least_pages, self.pool)
        result = where == self.committed_where
        self.committed_where = max(self.committed_where, where)
        return result

    def commit_all(self) -> None:
        """Everything appended into its file (before a flush at close)."""
        for mf in list(self.files):
            mf.commit(0, self.pool)
        if self.files:
            last = self.files[-1]
            self.committed_where = max(self.committed_where, last.file_from_offset + last.committed)

    def flush_all(self) -> None:
        """Everything written to disk (an explicit flush and close; callers hold the put lock)."""
        for mf in list(self.files):
            if mf.file_from_offset + mf.wrote > self.flushed_where or mf.wrote > mf.flushed:
                mf.flush(self.sync)
        self.flushed_where = self.max_offset()
        self.committed_where = self.flushed_where

    def total_size(self) -> int:
        return len(self.files) * self.file_size

    def close(self) -> None:
        for mf in self.files:
            mf.close()
        self.files = []

    def destroy(self) -> None:
        for mf in self.files:
            mf.destroy()
        self.files = []
        try:
            os.rmdir(self.directory)
        except OSError:
            pass
