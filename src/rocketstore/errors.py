"""The error types rocketstore raises. Bad *input to put* is answered with a PutStatus, never raised."""


class RocketStoreError(Exception):
    """Base class for every error rocketstore raises on purpose."""


class CorruptDataError(RocketStoreError, ValueError):
    """Bytes that do not follow RocketMQ's layout: names the file (when known) and the offset."""

    def __init__(self, reason: str, offset: int | None = None, file: str | None = None):
        self.reason = reason
        self.offset = offset
        self.file = file
        super().__init__(self._text())

    def _text(self) -> str:
        where = []
        if self.file:
            where.append(self.file)
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{': '.join(where) + ': ' if where else ''}{self.reason}"

    def in_file(self, file: str, base_offset: int = 0) -> "CorruptDataError":
        """The same error, located in `file` (offsets inside a buffer become offsets in the file)."""
        off = None if self.offset is None else base_offset + self.offset
        return CorruptDataError(self.reason, off, file)


class InvalidMessageIdError(RocketStoreError, ValueError):
    """A msgId that is not one: not 32 (IPv4) or 56 (IPv6) hexadecimal characters. Names the id and what is
    wrong with it. (A well-formed id that names no message is answered with None, not raised.)"""

    def __init__(self, msg_id: str, problem: str):
        self.msg_id = msg_id
        self.problem = problem
        super().__init__(f"msgId {msg_id!r}: {problem}")


class StoreOpenError(RocketStoreError):
    """A store directory that cannot be opened (missing, wrong file sizes, locked by another writer...)."""


class StoreLockedError(StoreOpenError):
    """Another process holds the store's `lock` file for writing."""


class StoreNotWritableError(RocketStoreError, OSError):
    """The store takes no more writes (a CommitLog sync failed: RocketMQ's NOT_WRITEABLE) until reopened."""


class StoreClosedError(RocketStoreError):
    """The store was used after close()."""


class ArchiveError(RocketStoreError):
    """An archive of CommitLog segments cannot be written exactly once: a destination it cannot use, another
    job on it, an archive of another store (files.archive_manifest, the Spark archive job)."""
