"""The `checkpoint` file (RocketMQ's StoreCheckpoint): its five times and offsets in memory (`data`, a
formats.checkpoint.Checkpoint, the same object for the life of the store: the dispatchers and flush
services update it in place), loaded at open, reserved whole, and written back on the flush services'
cadence. The byte layout is formats/checkpoint.py's."""

from __future__ import annotations

import dataclasses
import os

from ..config.files import write_checkpoint_file
from ..errors import CorruptDataError
from ..formats import checkpoint as CP


class CheckpointFile:
    def __init__(self, path: str, writable: bool, data: CP.Checkpoint | None = None):
        self.path = path
        self.writable = writable
        self.data = data if data is not None else CP.Checkpoint()

    def load(self) -> CP.Checkpoint:
        """Read the file into `data` (in place; all zeros when there is no file). Corrupt bytes raise
        CorruptDataError naming the file."""
        if os.path.exists(self.path):
            with open(self.path, "rb") as fh:
                raw = fh.read(CP.FILE_SIZE)
            try:
                loaded = CP.decode(raw)
            except CorruptDataError as e:
                raise e.in_file(self.path)
            for f in dataclasses.fields(loaded):
                setattr(self.data, f.name, getattr(loaded, f.name))
        return self.data

    def reserve(self) -> None:
        """The file whole from the open on (StoreCheckpoint creates and maps its 4 KiB at load): later writes
        overwrite its blocks in place, which a full disk cannot fail."""
        try:
            whole = os.path.getsize(self.path) == CP.FILE_SIZE
        except FileNotFoundError:
            whole = False
        if not whole:
            write_checkpoint_file(self.path, CP.encode(self.data))

    def write(self) -> None:
        """`data` to the file, synced (a read-only store writes nothing)."""
        if self.writable:
            write_checkpoint_file(self.path, CP.encode(self.data))

    def index_file_flushed(self, end_timestamp: int) -> None:
        """A full index file reached the disk: the checkpoint may vouch for it (indexMsgTimestamp)."""
        self.data.index_msg_timestamp = max(self.data.index_msg_timestamp, end_timestamp)
        self.write()
