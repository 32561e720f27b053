"""One fixed-size segment file, memory mapped, named by the offset of its first byte (20 digits)."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import sys

import numpy as np

from ..errors import StoreOpenError
from .space import reserve, reserve_existing

PAGE = mmap.PAGESIZE
NAME_DIGITS = 20
# First writes to a fresh mapping fault one page at a time, which costs this VM more than the copy itself
# (0.4 GB/s); asking the kernel to populate 4 MiB ahead of the write position at once gives 1.7 GB/s.
MADV_POPULATE_WRITE = 23  # Linux 5.14+; older kernels refuse it and we stop asking
POPULATE_CHUNK = 4 * 1024 * 1024
# ...but no more than a 64th of the file ahead: a ConsumeQueue file (5.7 MB) fills 20 bytes a message, its page
# faults cost nothing, and 4 MiB populated ahead in each of a topic's queues (1024 for RocketMQ's BenchmarkTest)
# held 1.6 GB resident for a few thousand messages
POPULATE_FRACTION = 64
_populate_ok = hasattr(mmap.mmap, "madvise")


# CPython's mmap.flush (msync) holds the GIL for the whole disk wait (measured: a 170 ms msync stalls every
# other thread, puts included), os.fdatasync releases it. On Linux an fdatasync of the file writes back the
# dirty pages of its shared mappings too (one page cache), so it is used there; elsewhere msync.
_FDATASYNC = sys.platform.startswith("linux") and hasattr(os, "fdatasync")


def default_sync(mf: "MappedFile", start: int, length: int) -> None:
    """Make bytes [start, start + length) of a segment durable, or raise OSError."""
    if _FDATASYNC:
        try:
            fd = os.open(mf.path, os.O_RDONLY)
        except FileNotFoundError:  # an expired segment already unlinked: its mapping is all there is
            mf.mm.flush(start, length)
            return
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)
    else:
        mf.mm.flush(start, length)


# fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE): frees a range of a file, which then reads as zeros,
# without reading it first and without changing the file's size (every segment keeps its fixed size)
_PUNCH_HOLE_KEEP_SIZE = 0x02 | 0x01
_fallocate = None
if sys.platform.startswith("linux"):
    try:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        _fallocate = getattr(_libc, "fallocate64", None) or _libc.fallocate
        _fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        _fallocate.restype = ctypes.c_int
    except (OSError, AttributeError):
        _fallocate = None
ZERO_CHUNK = 1 << 20


def punch_hole(fd: int, start: int, length: int) -> bool:
    """Make [start, start + length) of the file read as zeros by freeing it; False when the platform or the
    file system cannot (the caller then writes zeros)."""
    if _fallocate is None or length <= 0:
        return length <= 0
    if _fallocate(fd, _PUNCH_HOLE_KEEP_SIZE, start, length) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(err, os.strerror(err))


def _data_ranges(fd: int, start: int, end: int):
    """The parts of [start, end) the file system holds data for (SEEK_DATA / SEEK_HOLE): holes read as zeros
    and need no look. Without those seeks, the whole range."""
    if not hasattr(os, "SEEK_DATA"):
        yield start, end
        return
    pos = start
    while pos < end:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # no data past pos
                return
            yield pos, end
            return
        if data >= end:
            return
        hole = min(os.lseek(fd, data, os.SEEK_HOLE), end)
        yield data, hole
        pos = hole


def segment_name(from_offset: int) -> str:
    return f"{from_offset:020d}"


class MappedFile:
    """A segment: positions `wrote` (appended), `committed` and `flushed` (on disk), as RocketMQ's MappedFile."""

    def __init__(
        self, path: str, file_size: int, *, writable: bool, create: bool = False, named_by_offset: bool = True
    ):
        self.path = path
        self.file_size = file_size
        self.writable = writable
        name = os.path.basename(path)
        if named_by_offset and (len(name) != NAME_DIGITS or not name.isdigit()):
            raise StoreOpenError(f"{path}: not a segment file (name must be {NAME_DIGITS} digits)")
        self.file_from_offset = int(name) if named_by_offset else 0
        self.first_create_in_queue = False
        self.store_timestamp = 0  # store time of the last record appended (RocketMQ's MappedFile.storeTimestamp)
        self.wbuf = None  # a transient store pool buffer: appends go there until committed
        if create and not writable:
            # a read-only store building in memory (recovery of a crash image): never touches the disk
            self.mm = mmap.mmap(-1, file_size)
            self.buf = memoryview(self.mm)
            self.wrote = self.committed = self.flushed = 0
            self._views = []
            self._populated = file_size
            return
        if create:
            # sized under a hidden name first, then linked in (exclusive, like O_EXCL): a crash between
            # create and setLength must not leave a short segment that stops the store from opening
            # (segment directories ignore names starting with ".")
            tmp = os.path.join(os.path.dirname(path), "." + name + ".creating")
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.ftruncate(fd, file_size)  # as RocketMQ's RandomAccessFile.setLength...
                reserve(fd, file_size, path)  # ...with its blocks: a full disk fails here, not with SIGBUS later
                os.link(tmp, path)
            except OSError:
                os.close(fd)
                os.unlink(tmp)
                raise
            os.unlink(tmp)
        else:
            actual = os.path.getsize(path)
            if actual != file_size:
                raise StoreOpenError(
                    f"{path}: file is {actual} bytes, the store expects {file_size} "
                    f"(set the matching mapped file size, e.g. mappedFileSizeCommitLog)"
                )
            fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
            if writable:
                try:
                    reserve_existing(fd, file_size, path)  # a sparse segment (an older store, a sparse copy)
                except OSError:
                    os.close(fd)
                    raise
        try:
            # read-only stores map copy-on-write: recovery may patch pages in memory, the file never changes
            self.mm = mmap.mmap(fd, file_size, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_COPY)
        finally:
            os.close(fd)
        self.buf = memoryview(self.mm)
        self.wrote = 0
        self.committed = 0
        self.flushed = 0
        self._views: list = []
        # pages populated for writing so far; the put lane (lane.c) writes only below it, leaving append to
        # populate the next range
        self._populated = 0 if writable else file_size

    # -- positions
    @property
    def read_position(self) -> int:
        """What readers may see: with a write buffer, only what was committed to the file."""
        return self.wrote if self.wbuf is None else self.committed

    def set_positions(self, pos: int) -> None:
        self.wrote = self.committed = self.flushed = pos

    def is_full(self) -> bool:
        return self.wrote >= self.file_size

    def remaining(self) -> int:
        return self.file_size - self.wrote

    # -- data
    def append(self, data) -> int:
        """Append at the write position; returns where it went."""
        pos = self.wrote
        end = pos + len(data)
        if self.wbuf is not None:
            self.wbuf[pos:end] = data
            self.wrote = end
            return pos
        if end > self._populated:
            self._populate(end)
        self.buf[pos:end] = data
        self.wrote = end
        return pos

    def _populate(self, end: int) -> None:
        global _populate_ok
        start = max(self._populated, self.wrote - self.wrote % PAGE)
        ahead = max(PAGE, min(POPULATE_CHUNK, self.file_size // POPULATE_FRACTION))
        stop = min(self.file_size, max(end, start + ahead))
        stop += -stop % PAGE if stop < self.file_size else 0
        stop = min(stop, self.file_size)
        if _populate_ok and stop > start:
            try:
                self.mm.madvise(MADV_POPULATE_WRITE, start, stop - start)
            except OSError:
                _populate_ok = False
        self._populated = stop

    def write_at(self, pos: int, data) -> None:
        (self.buf if self.wbuf is None else self.wbuf)[pos : pos + len(data)] = data

    def commit(self, least_pages: int = 0, pool=None) -> int:
        """DefaultMappedFile.commit: copy what was appended to the write buffer since the last commit into
        the file (when full, or at least `least_pages` pages, or anything with 0); a segment committed in
        full gives its buffer back. Without a buffer, everything written counts as committed."""
        if self.wbuf is None:
            self.committed = self.wrote
            return self.committed
        w, c = self.wrote, self.committed
        if w > c and (self.is_full() or (w // PAGE - c // PAGE >= least_pages if least_pages > 0 else True)):
            if w > self._populated:
                self._populate(w)
            self.buf[c:w] = self.wbuf[c:w]
            self.committed = w
        if self.committed >= self.file_size:
            buf, self.wbuf = self.wbuf, None
            if pool is not None:
                pool.give_back(buf)
        return self.committed

    def advance(self, n: int) -> None:
        """Move the write position without writing (BLANK fillers only write their first 8 bytes)."""
        self.wrote += n

    def flush(self, sync=None) -> int:
        """Sync everything written since the last flush; returns the new flushed position.

        The write position is read once, before the sync (appends may go on meanwhile: only what was
        written before the sync is vouched for). `sync(mapped_file, start, length)` replaces default_sync
        (a test hook). An OSError from it propagates and leaves the flushed position where it was, so a
        failed sync never confirms anything (RocketMQ's MappedFile.flush logs it and may confirm anyway:
        apache/rocketmq #2706)."""
        value = self.read_position  # with a write buffer, only committed bytes are in the file
        if self.writable and value > self.flushed:
            start = (self.flushed // mmap.ALLOCATIONGRANULARITY) * mmap.ALLOCATIONGRANULARITY
            (sync or default_sync)(self, start, value - start)
        if value > self.flushed:
            self.flushed = value
        return self.flushed

    def dirty_pages(self) -> int:
        return self.read_position // PAGE - self.flushed // PAGE

    def is_able_to_flush(self, least_pages: int) -> bool:
        """isAbleToFlush: a full segment always; else at least `least_pages` dirty pages (any, with 0)."""
        if self.is_full():
            return True
        if least_pages > 0:
            return self.dirty_pages() >= least_pages
        return self.read_position > self.flushed

    def clear_from(self, pos: int) -> None:
        """Zero the file from `pos` to its end, durably: what recovery cut off a segment must never be read
        again. The write position leaves old bytes behind it (RocketMQ's truncateDirtyFiles only moves
        positions), and the next recovery scans on as long as records parse: a new record shorter than, or
        as long as, what it overwrote would bring the old records after it back.

        Only the parts of the file that hold data are looked at (holes read as zeros); when they are all
        zeros already (the usual end of a segment) nothing is written and nothing synced. Otherwise the rest
        is freed with a punched hole where the file system can, else zeros are written; then fsync."""
        if not self.writable or pos >= self.file_size or self.mm is None:
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            dirty = self._first_non_zero(fd, pos)
            if dirty is None:
                return
            if not punch_hole(fd, dirty, self.file_size - dirty):
                self._write_zeros(fd, dirty)
            os.fsync(fd)  # (on Linux this also writes the mapping's dirty pages: one page cache)
        finally:
            os.close(fd)

    def _first_non_zero(self, fd: int, pos: int) -> int | None:
        """Where the first chunk holding a non-zero byte at or past `pos` starts (at least `pos`), or None."""
        for a, b in self._chunks(fd, pos):
            if np.frombuffer(self.buf[a:b], dtype=np.uint8).any():
                return a
        return None

    def _chunks(self, fd: int, pos: int):
        """[a, b) pieces (at most ZERO_CHUNK, aligned to it) of the data the file holds from `pos` on."""
        for start, end in list(_data_ranges(fd, pos, self.file_size)):
            a = start
            while a < end:
                b = min(a - a % ZERO_CHUNK + ZERO_CHUNK, end)
                yield a, b
                a = b

    def _write_zeros(self, fd: int, pos: int) -> None:
        """Zero, through the mapping, every chunk past `pos` that holds a non-zero byte."""
        for a, b in self._chunks(fd, pos):
            if np.frombuffer(self.buf[a:b], dtype=np.uint8).any():
                self.buf[a:b] = bytes(b - a)

    def hold_view(self, view) -> None:
        """Keep track of numpy views over the mapping so that close() can drop them first."""
        self._views.append(view)

    def close(self) -> None:
        if self.mm is None:
            return
        self._views.clear()
        self.buf.release()
        try:
            self.mm.close()
        except BufferError:
            pass  # a caller still holds a zero-copy view; the mapping goes when that view does
        self.mm = None

    def destroy(self) -> None:
        self.close()
        if not self.writable:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"MappedFile({self.path}, wrote={self.wrote})"
