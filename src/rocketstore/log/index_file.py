"""One IndexFile under index/, memory mapped: header, hash slots and chained entries (RocketMQ's IndexFile).

Entries are placed a run at a time: by the compiled index_place straight into the mapping when the native
engine is built, else with numpy (formats.index.place_entries gives the same chains as putKey one by one;
put_entries_py stays the reference). Lookups follow one chain (formats.index.select_chain)."""

from __future__ import annotations

import os

import numpy as np

from .. import engine
from ..errors import StoreOpenError
from ..files.mapped_file import MappedFile
from ..formats import index as I
from ..engine import select_chain


class IndexFile:
    def __init__(
        self,
        path: str,
        hash_slot_num: int,
        index_num: int,
        *,
        writable: bool,
        create: bool = False,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
    ):
        self.path = path
        self.name = os.path.basename(path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        size = I.file_size(hash_slot_num, index_num)
        if not create and os.path.getsize(path) != size:
            raise StoreOpenError(
                f"{path}: index file is {os.path.getsize(path)} bytes, the store expects {size} "
                f"(maxHashSlotNum={hash_slot_num}, maxIndexNum={index_num}: set the ones it was "
                f"written with)"
            )
        self.mf = MappedFile(path, size, writable=writable, create=create, named_by_offset=False)
        buf = self.mf.buf
        self.slots = np.frombuffer(buf, dtype=">i4", count=hash_slot_num, offset=I.HEADER_SIZE)
        self.entries = np.frombuffer(
            buf, dtype=I.ENTRY_DTYPE, count=index_num, offset=I.HEADER_SIZE + hash_slot_num * I.SLOT_SIZE
        )
        self.mf.hold_view(self.slots)
        self.mf.hold_view(self.entries)
        if create:
            # a new file starts where the previous one ended (IndexFile's constructor)
            self.header = I.IndexHeader()
            if end_phy_offset > 0:
                self.header.begin_phy_offset = self.header.end_phy_offset = end_phy_offset
            if end_timestamp > 0:
                self.header.begin_timestamp = self.header.end_timestamp = end_timestamp
            # the count of 1 stays in memory until the first entry or a flush, as RocketMQ's header does
            buf[:32] = self.header.encode()[:32]
        else:
            self.header = I.decode_header(buf)

    # -- state
    @property
    def begin_timestamp(self) -> int:
        return self.header.begin_timestamp

    @property
    def end_timestamp(self) -> int:
        return self.header.end_timestamp

    @property
    def end_phy_offset(self) -> int:
        return self.header.end_phy_offset

    def is_write_full(self) -> bool:
        return self.header.index_count >= self.index_num

    def room(self) -> int:
        return max(self.index_num - self.header.index_count, 0)

    # -- writing
    def put_entries(self, hashes: np.ndarray, phys: np.ndarray, timestamps: np.ndarray) -> int:
        """Append as many entries as fit (IndexFile.putKey over a run); returns how many went in."""
        native = engine.native  # None: the numpy placement alone (the tests compare both)
        if native is None:
            return self.put_entries_py(hashes, phys, timestamps)
        h = self.header
        (
            k,
            h.begin_timestamp,
            h.end_timestamp,
            h.begin_phy_offset,
            h.end_phy_offset,
            h.hash_slot_count,
            h.index_count,
        ) = native.index_place(
            self.mf.buf,
            self.hash_slot_num,
            self.index_num,
            h.begin_timestamp,
            h.end_timestamp,
            h.begin_phy_offset,
            h.end_phy_offset,
            h.hash_slot_count,
            h.index_count,
            np.ascontiguousarray(hashes, dtype=np.int32),
            np.ascontiguousarray(phys, dtype=np.int64),
            np.ascontiguousarray(timestamps, dtype=np.int64),
        )
        return k

    def put_entries_py(self, hashes: np.ndarray, phys: np.ndarray, timestamps: np.ndarray) -> int:
        """put_entries with numpy (the reference of the compiled index_place)."""
        h = self.header
        k = min(self.room(), len(hashes))
        if k <= 0:
            return 0
        hashes, phys, timestamps = hashes[:k], phys[:k], timestamps[:k]
        c0 = h.index_count
        if c0 <= 1:
            # the first entry is measured against the inherited begin time; then begin moves to it
            first = I.time_diff(int(timestamps[0]), h.begin_timestamp)
            h.begin_phy_offset, h.begin_timestamp = int(phys[0]), int(timestamps[0])
            diffs = I.time_diffs(timestamps, h.begin_timestamp)
            diffs[0] = first
        else:
            diffs = I.time_diffs(timestamps, h.begin_timestamp)
        placed = I.place_entries(self.slots, c0, hashes, self.hash_slot_num)
        run = self.entries[c0 : c0 + k]
        run["hash"] = hashes
        run["phy"] = phys
        run["diff"] = diffs
        run["prev"] = placed.prev
        self.slots[placed.slot_ids] = placed.slot_heads
        h.hash_slot_count += placed.new_slots
        h.index_count = c0 + k
        h.end_phy_offset = int(phys[-1])
        h.end_timestamp = int(timestamps[-1])
        self.mf.buf[: I.HEADER_SIZE] = h.encode()
        return k

    def cut_from(self, end: int, store_time_of) -> int:
        """Take out the entries of records at or past CommitLog offset `end` (a tail recovery cut): they are
        the file's newest, entries going in in CommitLog order. The header then ends at the last entry kept,
        whose record's store time `store_time_of(offset)` gives. Returns how many went."""
        h = self.header
        count = min(h.index_count, self.index_num)
        if count <= 1 or h.end_phy_offset < end:  # the header's end is the last entry's: nothing to cut (every
            return 0  # open asks, so the entries of a full 400 MB file are not read for nothing)
        phys = self.entries["phy"][1:count]
        past = np.flatnonzero(phys >= end)
        if not len(past):
            return 0
        first = 1 + int(past[0])
        if len(past) != count - first:  # entries out of CommitLog order: not a tail to cut
            return 0
        cut = self.entries[first:count]
        undone = I.unplace_entries(cut["hash"], cut["prev"], self.hash_slot_num)
        self.slots[undone.slot_ids] = undone.slot_heads
        self.entries[first:count] = np.zeros(count - first, dtype=I.ENTRY_DTYPE)
        h.hash_slot_count = max(h.hash_slot_count - undone.freed_slots, 0)
        h.index_count = first
        if first > 1:
            h.end_phy_offset = int(self.entries["phy"][first - 1])
            h.end_timestamp = store_time_of(h.end_phy_offset) or h.end_timestamp
        self.mf.buf[: I.HEADER_SIZE] = h.encode()
        return count - first

    # -- reading
    def select(self, out: list, key_hash: int, max_num: int, begin: int, end: int, accept=None) -> None:
        """IndexFile.selectPhyOffset: follow the key's chain from the newest entry, adding the physical
        offsets of entries with the same hash stored within [begin, end]; `accept(offset)` may veto one
        (rocketstore re-checks topic and key, so a hash collision never counts)."""
        h = self.header
        select_chain(
            self.mf.buf,
            self.hash_slot_num,
            h.begin_timestamp,
            h.index_count,
            self.index_num,
            key_hash,
            max_num,
            begin,
            end,
            out,
            accept,
        )

    # -- lifecycle
    def flush(self) -> None:
        """IndexFile.flush: the header as it stands in memory, then the whole file to disk."""
        if not self.mf.writable or self.mf.mm is None:
            return
        self.mf.buf[: I.HEADER_SIZE] = self.header.encode()
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)  # writes the mapping's dirty pages; unlike msync it lets other threads run
        finally:
            os.close(fd)

    def close(self) -> None:
        self.slots = self.entries = None  # numpy views must go before the mapping can
        self.mf.close()

    def destroy(self) -> None:
        self.slots = self.entries = None
        self.mf.destroy()

    def __repr__(self) -> str:
        return f"IndexFile({self.path}, count={self.header.index_count})"
