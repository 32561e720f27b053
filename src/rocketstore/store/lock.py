"""The store's one-writer lock: the `lock` file, as RocketMQ's DefaultMessageStore takes it
(FileChannel.tryLock(0, 1, false) on its first byte), plus what fcntl locks lack. MessageStore.open and the
rebuild take this one implementation.

fcntl (POSIX record) locks belong to the process: a second open in the same process is granted the lock it
already holds, and closing ANY descriptor of the file drops it. So this process must never open the lock
file of a store it already writes, and keeps a registry of the stores it writes. A store is named in it by
the (st_dev, st_ino) of its directory, not by path: a bind mount, a symlink or a renamed parent give the
same directory another path, and a second writer through it would both be let in and, on closing, release
the first writer's lock.
"""

from __future__ import annotations

import fcntl
import os
import threading

from ..errors import StoreLockedError, StoreOpenError

_HELD: dict[tuple[int, int], "StoreLock"] = {}  # (st_dev, st_ino) of a store directory -> its lock
_GUARD = threading.Lock()


def store_identity(root: str) -> tuple[int, int]:
    """The directory's (st_dev, st_ino): the same for every path that reaches it."""
    try:
        st = os.stat(root)
    except OSError as e:
        raise StoreOpenError(f"{root}: {e.strerror or e}") from None
    return st.st_dev, st.st_ino


def written_by_another(root: str) -> bool:
    """Does another process hold the store's lock (is it open for writing elsewhere: rocketstore or RocketMQ)?
    Asked with a shared lock taken and given back at once; never for a store this process writes (closing
    the lock file here would drop that lock), which counts as written."""
    path = os.path.join(root, "lock")
    try:
        key = store_identity(root)
    except StoreOpenError:
        return False
    with _GUARD:
        if key in _HELD:
            return True
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return False  # no lock file: nobody ever opened it for writing
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 0)
        except OSError:
            return True
        finally:
            os.close(fd)  # (closing drops the probe's lock)
        return False


class StoreLock:
    """A held lock on one store root; `release()` gives it up (idempotent). Only the holder has one: a
    refused second writer never gets one, so it cannot release anything."""

    def __init__(self, root: str, key: tuple[int, int], fd: int):
        self.root, self.path, self._key, self._fd = root, os.path.join(root, "lock"), key, fd

    @classmethod
    def take(cls, root: str, in_process_hint: str = "") -> "StoreLock":
        """Take the lock of the store at `root` or raise StoreLockedError naming the lock file. Writes
        nothing until the lock is held (then "lock" into the file, as RocketMQ does)."""
        path = os.path.join(root, "lock")
        key = store_identity(root)
        with _GUARD:
            holder = _HELD.get(key)
            if holder is not None:
                # refused before the lock file is opened: opening and closing it here would drop the lock
                # the holder has
                via = "" if os.path.abspath(holder.root) == os.path.abspath(root) else f" (as {holder.root})"
                raise StoreLockedError(
                    f"{path}: the store is already open for writing in this process{via}{in_process_hint}"
                )
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)  # RocketMQ: FileChannel.tryLock(0, 1, false)
            except OSError:
                os.close(fd)
                raise StoreLockedError(f"{path}: the store is open for writing by another process") from None
            lock = _HELD[key] = cls(root, key, fd)
        try:
            os.pwrite(fd, b"lock", 0)
            os.fsync(fd)
        except BaseException:
            lock.release()
            raise
        return lock

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Close the lock file (which drops the fcntl lock) and forget the store."""
        with _GUARD:
            if self._fd is None:
                return
            os.close(self._fd)
            self._fd = None
            if _HELD.get(self._key) is self:
                del _HELD[self._key]
