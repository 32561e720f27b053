"""One queue's ConsumeQueue extension: ext units under consumequeue_ext/{topic}/{queueId}/ (RocketMQ's
ConsumeQueueExt). Units are appended; their addresses (formats.cq_ext.decorate) go into the ConsumeQueue
unit's tagsCode slot. Layout in formats/cq_ext.py."""

from __future__ import annotations

import logging

import numpy as np

from ..errors import CorruptDataError
from ..files.layout import StoreLayout
from ..files.mapped_file_queue import MappedFileQueue
from ..formats import cq_ext as X

log = logging.getLogger("rocketstore.consumequeue")

# ConsumeQueueExt.put answers 1 (no address) when it cannot write
PUT_FAILED = 1
_PUT_RETRIES = 3


class ConsumeQueueExt:
    def __init__(
        self, root: str, topic: str, queue_id: int, file_size: int, bit_map_length: int = 64, *, writable: bool
    ):
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.bit_map_length = bit_map_length  # RocketMQ sizes a scratch buffer with it; nothing on disk depends on it
        self.directory = StoreLayout(root).ext_dir(topic, queue_id)
        self.files = MappedFileQueue(self.directory, file_size, writable=writable)

    def load(self) -> None:
        self.files.load()

    # -- write
    def put(self, tags_code: int, msg_store_time: int, filter_bit_map: bytes | None = None) -> int:
        """ConsumeQueueExt.put: append a unit; its address, or PUT_FAILED (1, no address) when the unit is too
        big, the address space is used up, or no file can take it in three tries (a unit that does not fit
        in the rest of a file ends that file with the marker and goes to the next one)."""
        size = X.unit_size(filter_bit_map)
        if size > X.MAX_UNIT_SIZE:
            log.error("ext unit of %d bytes is larger than %d: %s-%d", size, X.MAX_UNIT_SIZE, self.topic, self.queue_id)
            return PUT_FAILED
        if self.files.max_offset() + size > X.MAX_REAL_OFFSET:
            log.warning(
                "consume queue ext %s-%d is full: %d + %d", self.topic, self.queue_id, self.files.max_offset(), size
            )
            return PUT_FAILED
        data = X.encode_unit(tags_code, msg_store_time, filter_bit_map)
        try:
            for _ in range(_PUT_RETRIES):
                mf = self.files.get_last(0)
                if mf is None:
                    continue
                wrote = mf.wrote
                blank = self.file_size - wrote - X.END_BLANK_DATA_LENGTH
                if size > blank:
                    self._fill_to_end(mf, wrote)
                    log.info("no room (need %d, have %d) in %s: filled to its end", size, blank, mf.path)
                    continue
                mf.append(data)
                return X.decorate(wrote + mf.file_from_offset)
        except OSError as e:
            log.error("saving a consume queue ext unit of %s-%d failed: %s", self.topic, self.queue_id, e)
        return PUT_FAILED

    def put_many(self, tags_codes, store_times, bit_maps=None) -> list[int]:
        """put() for a run of units, in order: their addresses (or PUT_FAILED), the units that fit in a file
        written at once. Anything put() would refuse or retry (a unit too big, the address space near its end,
        no file, an I/O error) goes unit by unit through put() from there on, so the answers are put()'s."""
        n = len(tags_codes)
        length = X.same_bit_map_length(bit_maps)
        if length is not None and X.MIN_UNIT_SIZE + length <= X.MAX_UNIT_SIZE:
            # one size for all (the usual run: one bitmap length): the units encoded as one array
            size = X.MIN_UNIT_SIZE + length
            data = X.encode_units(tags_codes, store_times, bit_maps, length)
            unit_len = lambda k: size  # noqa: E731
            chunk = lambda a, b: data[a * size : b * size]  # noqa: E731
            total_from = lambda k: (n - k) * size  # noqa: E731
        else:
            units = [
                X.encode_unit(t, s, None if bit_maps is None else bit_maps[i])
                if X.unit_size(None if bit_maps is None else bit_maps[i]) <= X.MAX_UNIT_SIZE
                else None
                for i, (t, s) in enumerate(zip(tags_codes, store_times))
            ]
            size = None
            unit_len = lambda k: len(units[k]) if units[k] is not None else None  # noqa: E731
            chunk = lambda a, b: b"".join(units[a:b])  # noqa: E731
            total_from = lambda k: sum(len(u) for u in units[k:] if u is not None)  # noqa: E731
        out: list[int] = []
        i = 0
        try:
            while i < n and unit_len(i) is not None:
                if self.files.max_offset() + total_from(i) > X.MAX_REAL_OFFSET:
                    break
                mf = self.files.get_last(0)
                if mf is None:
                    break
                wrote = mf.wrote
                room = self.file_size - wrote - X.END_BLANK_DATA_LENGTH
                if size is not None:
                    j = i + min(n - i, max(room, 0) // size)
                    starts = None
                else:
                    j, used, starts = i, 0, []
                    while j < n and units[j] is not None and used + len(units[j]) <= room:
                        starts.append(used)
                        used += len(units[j])
                        j += 1
                if j == i:  # the next unit does not fit: the end marker, then the next file (as put() does)
                    self._fill_to_end(mf, wrote)
                    log.info("no room (need %d, have %d) in %s: filled to its end", unit_len(i), room, mf.path)
                    if unit_len(i) > self.file_size - X.END_BLANK_DATA_LENGTH:
                        break
                    continue
                mf.append(chunk(i, j))
                base = wrote + mf.file_from_offset
                if starts is None:
                    # decorate(offset) is offset + Long.MIN_VALUE for every offset below MAX_REAL_OFFSET
                    out.extend((np.arange(j - i, dtype=np.int64) * size + (base + X.LONG_MIN)).tolist())
                else:
                    out.extend(X.decorate(base + s) for s in starts)
                i = j
        except OSError as e:
            log.error("saving consume queue ext units of %s-%d failed: %s", self.topic, self.queue_id, e)
        for k in range(i, n):  # the rest, one at a time, with put()'s checks and messages
            out.append(self.put(tags_codes[k], store_times[k], None if bit_maps is None else bit_maps[k]))
        return out

    def _fill_to_end(self, mf, wrote: int) -> None:
        """fullFillToEnd: the end marker (short -1) at the write position, then the file counts as full."""
        if wrote + len(X.END_MARKER) <= self.file_size:
            mf.write_at(wrote, X.END_MARKER)
        mf.advance(self.file_size - wrote)

    # -- read
    def get(self, address: int) -> X.ExtUnit | None:
        """The unit at an address, or None (not an address, no file, past what is written, no unit there)."""
        if not X.is_ext_addr(address):
            return None
        real = X.undecorate(address)
        mf = self.files.find(real, real == 0)
        if mf is None:
            return None
        pos = real % self.file_size
        limit = mf.read_position
        if not 0 <= pos < limit:  # selectMappedBuffer(pos) answers null
            log.warning("[BUG] consume queue ext unit %d of %s-%d is not found", real, self.topic, self.queue_id)
            return None
        try:
            return X.decode_unit(mf.buf, pos, limit)
        except CorruptDataError as e:
            log.error("%s: %s", mf.path, e)
            return None

    # -- addresses
    def max_address(self) -> int:
        """getMaxAddress: the address just past the last unit written."""
        mf = self.files.last()
        return X.decorate(mf.file_from_offset + mf.wrote if mf else 0)

    def min_address(self) -> int:
        """getMinAddress: the address of the first file's start."""
        mf = self.files.first()
        return X.decorate(mf.file_from_offset if mf else 0)

    # -- recovery, truncation, deletion
    def recover(self) -> None:
        """ConsumeQueueExt.recover: from the first file on, follow the units' sizes; a size below 1 (nothing
        written, or the end marker) ends a file and the walk goes on in the next; what is past the last
        unit of the last file is cut. (The ConsumeQueue then cuts by the last address it holds.)"""
        mfs = self.files.files
        if not mfs:
            return
        process = 0
        for mf in mfs:
            buf, off = mf.buf, 0
            while True:
                size = X.read_size(buf, off)
                if size <= 0 or off + size > self.file_size:
                    # (a size reaching past the file: Java throws from Buffer.position; stop here instead)
                    break
                off += size
            process = mf.file_from_offset + off
        self.files.flushed_where = self.files.committed_where = process
        self.files.truncate_dirty(process)

    def truncate_by_max_address(self, max_address: int) -> None:
        """truncateByMaxAddress: keep everything up to the end of the unit at `max_address` (the last one a
        ConsumeQueue unit refers to); nothing happens when it is no address or names no unit."""
        if not X.is_ext_addr(max_address):
            return
        unit = self.get(max_address)
        if unit is None:
            log.error("[BUG] consume queue ext %s-%d: address %d not found", self.topic, self.queue_id, max_address)
            return
        log.info("truncating consume queue ext %s-%d by max %d", self.topic, self.queue_id, max_address)
        self.files.truncate_dirty(X.undecorate(max_address) + unit.size)

    def truncate_by_min_address(self, min_address: int) -> int:
        """truncateByMinAddress: delete the files that end before the ext offset `min_address` names (the unit
        of the ConsumeQueue's new first unit). Returns how many went."""
        if not X.is_ext_addr(min_address):
            return 0
        real = X.undecorate(min_address)
        gone = [mf for mf in self.files.files if mf.file_from_offset + self.file_size < real]
        if gone:
            log.info("consume queue ext %s-%d: deleting %d files below %d", self.topic, self.queue_id, len(gone), real)
            self.files.delete_head(gone)
        return len(gone)

    def flush(self, least_pages: int = 0) -> bool:
        return self.files.flush(least_pages)

    def total_size(self) -> int:
        return self.files.total_size()

    def destroy(self) -> None:
        self.files.destroy()

    def close(self) -> None:
        self.files.close()
