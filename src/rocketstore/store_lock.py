"""The store's one-writer lock, as RocketMQ's DefaultMessageStore takes it: FileChannel.tryLock(0, 1) on the
`lock` file in the store root. MessageStore.open and the rebuild take this one implementation.

fcntl locks belong to the process and do not exclude a second lock in the same process (Java's tryLock
does), so the stores held in this process are tracked here too. Note that closing *any* descriptor of the
lock file drops the process's lock on it (POSIX): a holder that lets a MessageStore open and close the same
root meanwhile no longer holds the lock afterwards."""
from __future__ import annotations

import fcntl
import os
import threading

from .errors import StoreLockedError

_HELD: set[str] = set()        # realpaths of the store roots locked by this process
_HELD_LOCK = threading.Lock()


class StoreLock:
    """A held lock on one store root; `release()` gives it up (idempotent)."""

    def __init__(self, path: str, key: str, fd: int):
        self.path = path
        self._key = key
        self._fd: int | None = fd

    @classmethod
    def take(cls, root: str) -> "StoreLock":
        """Take the lock of the store at `root` or raise StoreLockedError naming the lock file. Writes
        nothing until the lock is held (then "lock" into the file, as RocketMQ does)."""
        path = os.path.join(root, "lock")
        key = os.path.realpath(root)
        with _HELD_LOCK:
            if key in _HELD:
                raise StoreLockedError(f"{path}: the store is already open for writing in this process")
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)  # RocketMQ: FileChannel.tryLock(0, 1, false)
            except OSError:
                os.close(fd)
                raise StoreLockedError(f"{path}: the store is open for writing by another process") from None
            _HELD.add(key)
        try:
            os.pwrite(fd, b"lock", 0)
            os.fsync(fd)
        except BaseException:
            lock = cls(path, key, fd)
            lock.release()
            raise
        return cls(path, key, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        os.close(self._fd)
        self._fd = None
        with _HELD_LOCK:
            _HELD.discard(self._key)
