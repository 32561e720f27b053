"""The CommitLog: every record, appended to fixed-size segments under commitlog/ (RocketMQ's CommitLog)."""

from __future__ import annotations

import logging

from ..errors import RocketStoreError
from ..files.mapped_file_queue import MappedFileQueue
from ..formats import record as R
from ..files.layout import StoreLayout

log = logging.getLogger("rocketstore.commitlog")


class DoesNotFit(RocketStoreError):
    """A record (or a whole batch) larger than a segment can ever hold."""


class CommitLog:
    def __init__(self, root: str, file_size: int, *, writable: bool):
        self.directory = StoreLayout(root).commitlog
        self.file_size = file_size
        self.files = MappedFileQueue(self.directory, file_size, writable=writable)
        self.confirm_offset = -1

    def load(self) -> None:
        self.files.load()

    # -- offsets
    def min_offset(self) -> int:
        return self.files.min_offset()

    def max_offset(self) -> int:
        return self.files.max_offset()

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # -- append
    def append(self, size: int, make) -> int:
        """Append one record of `size` bytes built by make(physical_offset); returns that offset.

        When the record and an 8-byte filler do not fit the current segment, the segment is closed with a
        BLANK filler and the record goes to the next one, as RocketMQ's doAppend does. A producer batch
        calls this once with its total size so that it moves as a whole."""
        if size + R.END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise DoesNotFit(f"{size} bytes never fit a CommitLog segment of {self.file_size} bytes")
        mf = self.files.get_last(0)
        remaining = mf.remaining()
        if size + R.END_FILE_MIN_BLANK_LENGTH > remaining:
            mf.write_at(mf.wrote, R.encode_blank(remaining))
            mf.advance(remaining)
            mf = self.files.get_last(0)
        phys = mf.file_from_offset + mf.wrote
        mf.append(make(phys))
        return phys

    # -- read
    def read(self, offset: int, size: int):
        """getMessage(offset, size): a zero-copy view of [offset, offset+size) if that much is written there."""
        mf = self.files.find(offset, offset == 0)
        if mf is None:
            return None
        pos = offset % self.file_size
        if pos < 0 or pos + size > mf.read_position:
            return None
        return mf.buf[pos : pos + size]

    def data_from(self, offset: int, return_first_on_not_found: bool | None = None):
        """getData(offset): (start offset, view up to the written end of offset's segment), or None."""
        if return_first_on_not_found is None:
            return_first_on_not_found = offset == 0
        mf = self.files.find(offset, return_first_on_not_found)
        if mf is None:
            return None
        pos = offset % self.file_size
        if not 0 <= pos < mf.read_position:
            return None
        return mf.file_from_offset + pos, mf.buf[pos : mf.read_position]

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        if offset >= self.min_offset() and offset + size <= self.max_offset():
            view = self.read(offset, size)
            if view is not None and size >= 64:
                return R.store_timestamp_at(view, 0, size)
        return -1

    def segment_path(self, offset: int) -> str:
        mf = self.files.find(offset)
        return mf.path if mf else self.directory

    def close(self) -> None:
        self.files.close()
