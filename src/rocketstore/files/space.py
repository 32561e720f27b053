"""Disk blocks really reserved for files that are written through a memory mapping.

A sparse file (RocketMQ's RandomAccessFile.setLength, an ftruncate) takes no blocks until its pages are
written, and a store through a mapping has no system call that could answer ENOSPC: on a full disk the
kernel's page fault fails and the process dies of SIGBUS. So every segment that will be written through a
mapping gets its blocks with posix_fallocate when it is created (a full disk is then an OSError at creation,
which the callers turn into a status or a clear error), and an existing sparse one when it is opened for
writing (a store written before this, or copied sparse).
"""

from __future__ import annotations

import errno
import logging
import os

from ..errors import RocketStoreError

log = logging.getLogger("rocketstore.files")

# file systems that answer "not supported" to fallocate: glibc emulates it itself; elsewhere we do
_UNSUPPORTED = {errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
_unreservable_devices: set[int] = set()  # devices where a reservation does not stick (warned once)


class NoSpaceError(RocketStoreError, OSError):
    """ENOSPC while reserving a file's blocks; str() names the file and says what ran out."""

    def __init__(self, path: str, size: int):
        super().__init__(errno.ENOSPC, f"no space left on device for the {size} bytes of {path}", path)

    def __str__(self) -> str:
        return self.strerror


def is_sparse(st: os.stat_result, size: int) -> bool:
    """Fewer blocks allocated than the file's size needs (st_blocks counts 512-byte units)."""
    return st.st_blocks * 512 < size


def reserve(fd: int, size: int, path: str) -> None:
    """Allocate every block of [0, size) of the open file `fd` without changing a byte; NoSpaceError when
    the disk cannot hold them (the blocks got so far stay allocated, the content is unchanged)."""
    try:
        if hasattr(os, "posix_fallocate"):
            try:
                os.posix_fallocate(fd, 0, size)
                return
            except OSError as e:
                if e.errno not in _UNSUPPORTED:
                    raise
        _touch_blocks(fd, size)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise NoSpaceError(path, size) from None
        raise


def _touch_blocks(fd: int, size: int) -> None:
    """fallocate's fallback (as glibc emulates it): in each block, a zero byte where a zero byte reads back,
    so a hole gets its block and written data stays as it is."""
    block = max(os.fstat(fd).st_blksize, 512)
    for pos in range(block - 1, size + block - 1, block):
        pos = min(pos, size - 1)
        if os.pread(fd, 1, pos) in (b"", b"\0"):
            os.pwrite(fd, b"\0", pos)


def reserve_existing(fd: int, size: int, path: str) -> None:
    """Reserve the blocks of an existing file opened for writing if it is sparse. Its modification time is
    put back: nothing in it changed, and expiry (file_reserved_time) goes by that time."""
    st = os.fstat(fd)
    if not is_sparse(st, size) or st.st_dev in _unreservable_devices:
        return
    log.info("reserving the blocks of sparse file %s (%d of %d bytes allocated)", path, st.st_blocks * 512, size)
    try:
        reserve(fd, size, path)
    finally:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    if is_sparse(os.fstat(fd), size):
        # a copy-on-write or compressing file system (ZFS, btrfs with compression) allocates at write time
        # whatever we do: say it once, and do not pay for a reservation at every open
        _unreservable_devices.add(st.st_dev)
        log.warning(
            "%s: this file system does not keep reserved blocks; writing on a full disk may still fail with SIGBUS",
            path,
        )
