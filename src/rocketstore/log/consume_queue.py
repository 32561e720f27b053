"""One queue's ConsumeQueue: 20-byte units under consumequeue/{topic}/{queueId}/ (RocketMQ's ConsumeQueue)."""

from __future__ import annotations

import logging
from itertools import repeat

import numpy as np

from ..files.mapped_file import MappedFile
from ..files.mapped_file_queue import MappedFileQueue
from ..formats import cq
from ..formats import cq_ext
from ..formats import record as R
from ..files.layout import StoreLayout
from .consume_queue_ext import ConsumeQueueExt
from .queue import QueueUnit

log = logging.getLogger("rocketstore.consumequeue")
_pack_unit = cq.UNIT.pack
UNIT = cq.UNIT_SIZE
LOWER, UPPER = "lower", "upper"


class ConsumeQueue:
    """A queue of the log/queue.py protocol: one unit per message, a slot is a queue offset."""

    cq_type = "SimpleCQ"
    is_batch = False
    label = "consume queue"
    unit_size = UNIT

    def __init__(
        self,
        root: str,
        topic: str,
        queue_id: int,
        file_size: int,
        *,
        writable: bool,
        ext: ConsumeQueueExt | None = None,
    ):
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.directory = StoreLayout(root).queue_dir(topic, queue_id)
        # The extension (enableConsumeQueueExt): None when off, and then nothing below touches it. With it,
        # the segment queue is one whose flushes also flush the ext (ConsumeQueue.flush: cq & ext), so
        # whoever flushes cq.files (the flush service, store.flush) covers both.
        self.ext = ext
        if ext is None:
            self.files = MappedFileQueue(self.directory, file_size, writable=writable, unit=UNIT)
        else:
            self.files = _FilesWithExt(self.directory, file_size, writable=writable, unit=UNIT)
            self.files.ext = ext
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        # recover() found valid-looking units after the first invalid one (a hole, e.g. garbage over a file's
        # head): they are cut with it, and recovery rebuilds the queue from the CommitLog from this offset
        self.damaged_from: int | None = None
        self._arrays: dict[int, np.ndarray] = {}  # file start -> numpy view of its units
        self._start_ts: dict[int, int] = {}
        self._stop_ts: dict[int, int] = {}

    # -- numpy views over the mapped files (zero-copy)
    def _units(self, mf: MappedFile) -> np.ndarray:
        arr = self._arrays.get(mf.file_from_offset)
        if arr is None:
            arr = cq.units(mf.buf)
            mf.hold_view(arr)
            self._arrays[mf.file_from_offset] = arr
        return arr

    def load(self) -> None:
        self.files.load()
        if self.ext is not None:
            self.ext.load()

    def recover(self) -> None:
        """ConsumeQueue.recover: from the third-last file, stop at the first unit that is not valid."""
        mfs = self.files.files
        if not mfs:
            return
        index = max(len(mfs) - 3, 0)
        per_file = self.file_size // UNIT
        while True:
            mf = mfs[index]
            arr = self._units(mf)[:per_file]
            valid = (arr["pos"] >= 0) & (arr["size"] > 0)
            bad = np.flatnonzero(~valid)
            n = int(bad[0]) if len(bad) else per_file
            if n:
                last = arr[n - 1]
                self.max_physic_offset = int(last["pos"]) + int(last["size"])
            process = mf.file_from_offset + n * UNIT
            if n == per_file and index + 1 < len(mfs):
                index += 1
                continue
            if n < per_file and (bool(valid[n + 1 :].any()) or index + 1 < len(mfs) or _written(arr[n])):
                # RocketMQ stops here and drops the rest. A unit that is not all zeros was written, and units
                # after it are real units: lost with it, so they are dispatched again from the CommitLog
                # (normal recovery alone would not: it starts past the furthest queue's end)
                self.damaged_from = max(self.max_physic_offset, 0)
                log.warning(
                    "consume queue %s-%d: invalid unit at %s offset %d; the queue is cut there and "
                    "rebuilt from the CommitLog",
                    self.topic,
                    self.queue_id,
                    mf.path,
                    n * UNIT,
                )
            break
        del arr, valid
        self.files.flushed_where = self.files.committed_where = process
        if self.ext is not None:
            # maxExtAddr: the last ext address among the valid units walked (from the third-last file on)
            max_ext_addr = self._last_ext_addr(mfs, max(len(mfs) - 3, 0), process)
        self._arrays.clear()  # views must go before a segment can be unmapped
        self.files.truncate_dirty(process)
        self._forget_missing()
        if self.ext is not None:
            self.ext.recover()
            log.info("truncating consume queue ext %s-%d by max %d", self.topic, self.queue_id, max_ext_addr)
            self.ext.truncate_by_max_address(max_ext_addr)

    def _last_ext_addr(self, mfs, first_index: int, end: int) -> int:
        """The tagsCode of the last unit before `end` (from file `first_index` on) that holds an ext address;
        1 (no address) when none does, RocketMQ's starting value."""
        for mf in reversed(mfs[first_index:]):
            if mf.file_from_offset >= end:
                continue
            n = (
                (end - mf.file_from_offset) // UNIT
                if end < mf.file_from_offset + self.file_size
                else self.file_size // UNIT
            )
            tags = self._units(mf)["tags"][:n]
            hits = np.flatnonzero(tags <= cq_ext.MAX_ADDR)
            if len(hits):
                return int(tags[hits[-1]])
        return 1

    def _forget_missing(self) -> None:
        live = {mf.file_from_offset for mf in self.files.files}
        for d in (self._arrays, self._start_ts, self._stop_ts):
            for k in [k for k in d if k not in live]:
                del d[k]

    # -- offsets
    @property
    def max_offset(self) -> int:
        return self.files.max_offset() // UNIT

    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // UNIT

    def roll_next_file(self, index: int) -> int:
        per_file = self.file_size // UNIT
        return index + per_file - index % per_file

    # -- write (ConsumeQueue.putMessagePositionInfo, with its guards)
    def put(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        if offset + size <= self.max_physic_offset:
            return True  # already built (recovery or reput replaying what is there)
        expect = cq_offset * UNIT
        files = self.files.files
        if files:
            # the put path's common case, without the guards' calls: the next unit of a started segment with
            # room for it (what get_last would return, no pre-blank, no out-of-order warning)
            mf = files[-1]
            wrote = mf.wrote
            if 0 < wrote <= mf.file_size - UNIT and mf.file_from_offset + wrote == expect:
                self.max_physic_offset = offset + size
                mf.append(_pack_unit(offset, size, tags_code))
                return True
        mf = self.files.get_last(expect)
        if mf is None:
            return False
        if mf.first_create_in_queue and cq_offset != 0 and mf.wrote == 0:
            self.min_logic_offset = expect
            self.files.flushed_where = self.files.committed_where = expect
            self._fill_pre_blank(mf, expect)
        if cq_offset != 0:
            current = mf.wrote + mf.file_from_offset
            if expect < current:
                log.warning(
                    "consume queue %s-%d built repeatedly: expect %d, current %d",
                    self.topic,
                    self.queue_id,
                    expect,
                    current,
                )
                return True
            if expect != current:
                log.warning(
                    "[BUG] consume queue %s-%d order may be wrong: expect %d, current %d",
                    self.topic,
                    self.queue_id,
                    expect,
                    current,
                )
        self.max_physic_offset = offset + size
        if mf.remaining() < UNIT:
            return False
        mf.append(cq.UNIT.pack(offset, size, tags_code))
        return True

    def put_position(
        self,
        offset: int,
        size: int,
        tags_code: int,
        queue_offset: int,
        store_timestamp: int = 0,
        msg_base_offset: int | None = None,
        batch_size: int = 1,
        bit_map: bytes | None = None,
    ) -> bool:
        """putMessagePositionInfoWrapper's unit: with the ext, first an ext unit (tagsCode, store time, the
        request's bitmap) whose address then takes the tagsCode slot; if the ext put fails, the plain
        tagsCode goes in (RocketMQ: "Save consume queue extend fail, So just save tagsCode!"). The ext unit
        is written even when put() then finds the unit already built, as RocketMQ does. (msg_base_offset and
        batch_size are a batch queue's; a plain unit covers its queue offset alone.)"""
        if self.ext is not None:
            addr = self.ext.put(tags_code, store_timestamp, bit_map)
            if cq_ext.is_ext_addr(addr):
                tags_code = addr
            else:
                log.warning(
                    "saving the consume queue ext unit failed, so just the tagsCode: %s-%d, offset %d",
                    self.topic,
                    self.queue_id,
                    offset,
                )
        return self.put(offset, size, tags_code, queue_offset)

    def put_wrapped(
        self, offset: int, size: int, tags_code: int, cq_offset: int, store_timestamp: int, bit_map: bytes | None = None
    ) -> bool:
        return self.put_position(offset, size, tags_code, cq_offset, store_timestamp, bit_map=bit_map)

    def put_units(self, phys, sizes, tags_codes, queue_offsets, store_ts, bit_maps=None) -> bool:
        """A run of records' units, in order (lists or numpy arrays; queue_offsets a list or a range): one
        write per file when the queue offsets follow each other and there is no ext (put_many decides),
        else unit by unit through the guards. False when a unit could not be written."""
        if self.ext is not None:
            # the ext units first, a file's worth per write; their addresses then take the tagsCode slots
            # (put_position's rule, unit by unit: a failed ext put keeps the plain tagsCode)
            codes = _ints(tags_codes)
            addrs = self.ext.put_many(codes, _ints(store_ts), bit_maps)
            if addrs and max(addrs) <= cq_ext.MAX_ADDR:  # every ext put answered an address
                codes = addrs
            for i, addr in enumerate(addrs if codes is not addrs else ()):
                if cq_ext.is_ext_addr(addr):
                    codes[i] = addr
                else:
                    log.warning(
                        "saving the consume queue ext unit failed, so just the tagsCode: %s-%d, offset %d",
                        self.topic,
                        self.queue_id,
                        int(phys[i]),
                    )
            tags_codes = codes
        first = queue_offsets[0]
        if isinstance(queue_offsets, range) or queue_offsets == list(range(first, first + len(queue_offsets))):
            return self._put_consecutive(
                np.asarray(phys, dtype=np.int64),
                np.asarray(sizes, dtype=np.int64),
                np.asarray(tags_codes, dtype=np.int64),
                first,
            )
        return all(
            [
                self.put(p, size, code, qoff)
                for p, size, code, qoff in zip(_ints(phys), _ints(sizes), _ints(tags_codes), queue_offsets)
            ]
        )

    def put_many(self, offsets, sizes, tags_codes, first_cq_offset: int) -> bool:
        """Units for consecutive queue offsets (a producer batch) in as few writes as there are files.

        Takes the fast way only when the units simply continue the queue; anything else (a rebuild,
        a queue starting past 0) goes unit by unit through put() and its guards."""
        if self.ext is not None:  # callers go through put_wrapped unit by unit when the queue has an ext
            raise ValueError(f"consume queue {self.topic}-{self.queue_id} has an ext: use put_wrapped")
        return self._put_consecutive(offsets, sizes, tags_codes, first_cq_offset)

    def _put_consecutive(self, offsets, sizes, tags_codes, first_cq_offset: int) -> bool:
        """put_many's writes (tagsCodes already holding ext addresses where the queue has an ext)."""
        last = self.files.last()
        expect = first_cq_offset * UNIT
        if last is None or offsets[0] < self.max_physic_offset or last.file_from_offset + last.wrote != expect:
            return all(
                [
                    self.put(o, s, t, first_cq_offset + i)
                    for i, (o, s, t) in enumerate(zip(_ints(offsets), _ints(sizes), _ints(tags_codes)))
                ]
            )
        data = cq.encode_units(offsets, sizes, tags_codes)
        pos = 0
        while pos < len(data):
            mf = self.files.get_last(expect + pos)
            room = mf.remaining() - mf.remaining() % UNIT
            chunk = data[pos : pos + room]
            mf.append(chunk)
            pos += len(chunk)
        self.max_physic_offset = int(offsets[-1]) + int(sizes[-1])
        return True

    def _fill_pre_blank(self, mf: MappedFile, until: int) -> None:
        n = (until % self.file_size) // UNIT
        if n:
            mf.append(cq.PRE_BLANK * n)

    # -- read
    def units_from(self, index: int):
        """getIndexBuffer: (first index, numpy units from `index` to the end of what is written in its file),
        or None when `index` is below the minimum or in no file."""
        offset = index * UNIT
        if offset < self.min_logic_offset:
            return None
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset % self.file_size
        if pos >= mf.read_position:
            return None
        arr = self._units(mf)
        return index, arr[pos // UNIT : mf.read_position // UNIT]

    def locate(self, index: int):
        """units_from, whose first index is also the first unit's slot: (slot, numpy units)."""
        return self.units_from(index)

    @staticmethod
    def unit_rows(units, first_slot: int, start: int, n: int) -> list[tuple]:
        """(pos, size, tagsCode, queue offset, 1) of units[start:start + n], units[0] being at first_slot:
        a plain unit covers the one queue offset that is its slot."""
        part = units[start : start + n]
        first = first_slot + start
        return list(
            zip(
                part["pos"].tolist(),
                part["size"].tolist(),
                part["tags"].tolist(),
                range(first, first + len(part)),
                repeat(1),
            )
        )

    def get_unit(self, index: int):
        r = self.units_from(index)
        if r is None or len(r[1]) == 0:
            return None
        u = r[1][0]
        return int(u["pos"]), int(u["size"]), int(u["tags"])

    # -- units by slot (for a plain queue a slot is a queue offset)
    def slot_range(self) -> tuple[int, int]:
        return self.min_offset, self.max_offset

    def unit_at(self, slot: int) -> QueueUnit | None:
        u = self.get_unit(slot)
        return None if u is None else QueueUnit(u[0], u[1], u[2], slot, 1)

    def chain_break_slots(self) -> list[int]:
        """Units carry no queue offsets of their own: nothing can break their chain."""
        return []

    def get_ext(self, address: int):
        """getExt: the ext unit at a tagsCode that holds an ext address; None without the ext, for a plain
        tagsCode, or when the unit is not found."""
        return self.ext.get(address) if self.ext is not None else None

    def resolve_tags(self, tags_code: int):
        """What RocketMQ's CqUnit iterator makes of a unit's tagsCode slot: (tagsCode, ext unit). An ext
        address becomes the ext unit's tagsCode; when that unit cannot be read (or the ext is off) the
        tagsCode is None (getValidTagsCodeAsLong: a tag filter then lets the message through)."""
        if not cq_ext.is_ext_addr(tags_code):
            return tags_code, None
        unit = self.get_ext(tags_code)
        if unit is None:
            if self.ext is not None:
                log.error("[BUG] consume queue ext %s-%d: no unit at %d", self.topic, self.queue_id, tags_code)
            return None, None
        return unit.tags_code, unit

    def last_physical_end(self) -> int:
        """getLastOffset: end (offset + size) of the last valid unit, -1 if none."""
        mf = self.files.last()
        if mf is None:
            return -1
        arr = self._units(mf)[max(mf.wrote - UNIT, 0) // UNIT :]
        last = -1
        for pos, size, _ in arr.tolist():
            if pos >= 0 and size > 0:
                last = pos + size
            else:
                break
        return last

    # -- truncation and min offset
    def truncate_dirty(self, phy_offset: int) -> None:
        """truncateDirtyLogicFiles: drop units that point at or beyond `phy_offset`.

        The ext is left as it is. RocketMQ's method ends with truncateByMaxAddress(maxExtAddr), but every path
        that keeps a unit returns before it, so it only runs once all files are gone, with maxExtAddr still 1
        (no address): a no-op. The ext units past the last kept unit stay (nothing refers to them), the
        next ext put appends after them, and the next recovery cuts the ext by the last address its
        ConsumeQueue holds. Doing the same keeps the ext's bytes and addresses RocketMQ's."""
        self.max_physic_offset = phy_offset
        per_file = self.file_size // UNIT
        # units pointing below phy_offset after a dropped one: the dropped one was garbage in the middle of
        # the queue, not a unit written ahead of the log; those after it are lost with it and must be
        # dispatched again from the CommitLog (damaged_from; recovery does it)
        hole = False
        while True:
            mf = self.files.last()
            if mf is None:
                break
            arr = self._units(mf)
            mf.set_positions(0)
            first_pos, first_size = int(arr[0]["pos"]), int(arr[0]["size"])
            if first_pos >= phy_offset:
                hole = hole or _any_below(arr[1:per_file], phy_offset)
                self._arrays.pop(mf.file_from_offset, None)
                del arr
                self.files.delete_last()
                self._forget_missing()
                continue
            mf.set_positions(UNIT)
            self.max_physic_offset = first_pos + first_size
            pos = arr["pos"][1:per_file]
            size = arr["size"][1:per_file]
            stop = np.flatnonzero((pos < 0) | (size <= 0) | (pos >= phy_offset))
            n = int(stop[0]) if len(stop) else per_file - 1
            if n:
                mf.set_positions((n + 1) * UNIT)
                self.max_physic_offset = int(pos[n - 1]) + int(size[n - 1])
            hole = hole or _any_below(arr[n + 2 : per_file], phy_offset)
            del arr, pos, size
            self._clear_after(mf)
            break
        if hole:
            # from the end of the last unit kept; with none kept, from the log's start (and the put guard
            # must then let every unit in: RocketMQ leaves the max at phy_offset)
            if not self.files.files:
                self.max_physic_offset = -1
            self.damaged_from = max(self.max_physic_offset, 0)
            log.warning(
                "consume queue %s-%d: a unit pointing past the CommitLog's end %d has units pointing "
                "below it after it; cut there, rebuilt from the CommitLog",
                self.topic,
                self.queue_id,
                phy_offset,
            )

    def cut_to(self, index: int) -> None:
        """Keep the units before queue offset `index`, drop the others (zeroed on disk, later files deleted):
        the queue's max physical offset becomes the end of the unit before `index` (-1 if none is left)."""
        self._arrays.clear()  # views must go before a segment can be unmapped
        end = index * UNIT
        self.files.flushed_where = min(self.files.flushed_where, end)
        self.files.committed_where = min(self.files.committed_where, end)
        self.files.truncate_dirty(end)
        self._forget_missing()
        prev = self.get_unit(index - 1) if index > 0 else None
        self.max_physic_offset = prev[0] + prev[1] if prev is not None and prev[0] >= 0 and prev[1] > 0 else -1

    def rewrite_unit(self, index: int, offset: int, size: int, tags_code: int) -> None:
        """Overwrite the written unit at queue offset `index` (a repair from the CommitLog)."""
        mf = self.files.find(index * UNIT)
        pos = index * UNIT % self.file_size
        if mf is None or pos + UNIT > mf.read_position:
            raise ValueError(f"consume queue {self.topic}-{self.queue_id} has no unit {index} to rewrite")
        mf.buf[pos : pos + UNIT] = cq.UNIT.pack(offset, size, tags_code)

    @staticmethod
    def _clear_after(mf: MappedFile) -> None:
        """Zero the dropped units past the new write position, durably: the next recovery takes any unit with
        an offset >= 0 and a size > 0 as written, so units left behind would come back once the CommitLog
        grows past them again (pointing into other records)."""
        mf.clear_from(mf.wrote)

    def correct_min_offset(self, min_commit_log_offset: int) -> None:
        """correctMinOffset: the min offset becomes the first unit pointing at or past the CommitLog's min."""
        if self.min_logic_offset >= self.files.max_offset():
            return
        last = self.files.last()
        if last is None:
            return
        rp = last.read_position
        if rp >= UNIT:
            if int(self._units(last)[rp // UNIT - 1]["pos"]) < min_commit_log_offset:
                self.min_logic_offset = last.file_from_offset + rp
                return
        first = self.files.first()
        start = self.min_logic_offset - first.file_from_offset
        intact = True
        if start < 0:
            intact, start = False, 0
        if start > first.read_position:
            log.error("consume queue file %s should have been deleted", first.path)
            return
        arr = self._units(first)[start // UNIT : first.read_position // UNIT]
        if len(arr) == 0:
            return
        if intact and int(arr[0]["pos"]) >= min_commit_log_offset:
            return
        hits = np.flatnonzero(arr["pos"] >= min_commit_log_offset)
        min_ext_addr = 1
        if len(hits):
            self.min_logic_offset = first.file_from_offset + start + int(hits[0]) * UNIT
            min_ext_addr = int(arr[int(hits[0])]["tags"])
        if self.ext is not None:
            # the ext files wholly below the new first unit's ext unit go (only on this path, as RocketMQ:
            # the early returns above skip it)
            self.ext.truncate_by_min_address(min_ext_addr)

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """deleteExpiredFile: delete leading files (never the last) whose last unit points below the
        CommitLog's min offset, then correct_min_offset. Returns how many files went."""
        count = self.files.delete_expired_by_offset(min_commit_log_offset, UNIT)
        if count:
            self._forget_missing()
        self.correct_min_offset(min_commit_log_offset)
        return count

    # -- lookups by time (getOffsetInQueueByTime, ported literally: its corner cases are RocketMQ's answers)
    def offset_by_time(self, timestamp: int, boundary: str, commitlog) -> int:
        mf = self._file_by_time(timestamp, boundary, commitlog)
        return self._search_by_time(mf, timestamp, boundary, commitlog) if mf is not None else 0

    def _file_by_time(self, timestamp: int, boundary: str, commitlog):
        mfs = list(self.files.files)
        if not mfs:
            return None
        for i in range(len(mfs) - 1, -1, -1):
            mf = mfs[i]
            key = mf.file_from_offset
            if self._start_ts.get(key, -1) < 0 and mf.read_position >= UNIT:
                pos, size, _ = cq.decode_unit(mf.buf, 0)
                t = commitlog.pickup_store_timestamp(pos, size)
                if t > 0:
                    self._start_ts[key] = t
            if i < len(mfs) - 1 and self._stop_ts.get(key, -1) < 0 and mf.read_position >= self.file_size:
                pos, size, _ = cq.decode_unit(mf.buf, self.file_size - UNIT)
                t = commitlog.pickup_store_timestamp(pos, size)
                if t > 0:
                    self._stop_ts[key] = t
        if boundary == LOWER:
            for i, mf in enumerate(mfs):
                if i < len(mfs) - 1 and self._stop_ts.get(mf.file_from_offset, -1) >= timestamp:
                    return mf
            return mfs[-1]
        for mf in reversed(mfs):
            if self._start_ts.get(mf.file_from_offset, -1) <= timestamp:
                return mf
        return None

    def _search_by_time(self, mf: MappedFile, timestamp: int, boundary: str, commitlog) -> int:
        base = mf.file_from_offset
        low = self.min_logic_offset - base if self.min_logic_offset > base else 0
        rng = self.file_size
        if mf.wrote != 0 and mf.wrote != self.file_size:
            rng = mf.wrote
        if rng > mf.read_position:
            return 0  # selectMappedBuffer(0, range) fails on a file not written that far
        search = search_by_time_py if rng - UNIT < low else search_by_time  # a file of one unit: the loop
        return search(
            mf.buf, base, low, rng - UNIT, timestamp, boundary == LOWER, commitlog.min_offset(),
            commitlog.files.files, commitlog.file_size, commitlog.min_offset(), commitlog.max_offset(),
        )  # fmt: skip

    def flush(self, least_pages: int = 0) -> bool:
        """ConsumeQueue.flush: the queue's files, then the ext's; True when neither moved."""
        return self.files.flush(least_pages)  # _FilesWithExt adds the ext

    def destroy(self) -> None:
        """ConsumeQueue.destroy: the queue's files and the ext's."""
        self._arrays.clear()
        self.min_logic_offset = 0
        self.max_physic_offset = -1
        self.files.destroy()
        if self.ext is not None:
            self.ext.destroy()

    def close(self) -> None:
        self._arrays.clear()
        self.files.close()
        if self.ext is not None:
            self.ext.close()


class _FilesWithExt(MappedFileQueue):
    """A ConsumeQueue's segments when it has an ext: flushing them flushes the ext too."""

    ext: ConsumeQueueExt

    def flush(self, least_pages: int = 0) -> bool:
        result = super().flush(least_pages)
        return self.ext.flush(least_pages) and result

    def flush_all(self) -> None:
        super().flush_all()
        self.ext.files.flush_all()


def _written(unit) -> bool:
    """Is this unit anything but zeros (the end of what was written)?"""
    return bool(unit["pos"] != 0 or unit["size"] != 0 or unit["tags"] != 0)


def _any_below(arr: np.ndarray, phy_offset: int) -> bool:
    """Does any of these units look written (offset >= 0, size > 0) and point below `phy_offset`?"""
    return bool(((arr["pos"] >= 0) & (arr["size"] > 0) & (arr["pos"] < phy_offset)).any())


def _ints(values) -> list[int]:
    return values.tolist() if hasattr(values, "tolist") else list(values)


def search_by_time_py(buf, base, floor, ceiling, timestamp, lower, min_phy, cl_files, cl_file_size, cl_min, cl_max):
    """getOffsetInQueueByTime's binary search over one ConsumeQueue file's units [floor, ceiling] (byte
    positions in `buf`, the file starting at queue byte `base`), probing each unit's record's store time in the
    CommitLog (`cl_files`: its segments; cl_min/cl_max: its offsets); the compiled twin is
    the extension's search_by_time. Ported literally: its corner cases are RocketMQ's answers."""
    boundary = LOWER if lower else UPPER
    high = ceiling
    low = floor

    def time_at(p):
        pos, size, _ = cq.decode_unit(buf, p)
        return pos, _store_ts(cl_files, cl_file_size, cl_min, cl_max, pos, size)

    _, t = time_at(ceiling)
    if t < timestamp:
        return (base + ceiling + UNIT) // UNIT if boundary == LOWER else (base + ceiling) // UNIT
    _, t = time_at(floor)
    if t > timestamp:
        return base // UNIT if boundary == LOWER else 0
    target = left = right = -1
    while high >= low:
        mid = (low + high) // (2 * UNIT) * UNIT
        pos, size, _ = cq.decode_unit(buf, mid)
        if pos < min_phy:
            low = mid + UNIT
            left = mid
            continue
        t = _store_ts(cl_files, cl_file_size, cl_min, cl_max, pos, size)
        if t < 0:
            return 0
        if t == timestamp:
            target = mid
            break
        if t > timestamp:
            high = mid - UNIT
            right = mid
        else:
            low = mid + UNIT
            left = mid
    if target != -1:
        step = -UNIT if boundary == LOWER else UNIT
        prev = target
        while True:
            attempt = prev + step
            if attempt < floor or attempt > ceiling:
                break
            if time_at(attempt)[1] != timestamp:
                break
            prev = attempt
        offset = prev
    else:
        offset = right if boundary == LOWER else left
    return (base + offset) // UNIT


def _store_ts(cl_files, cl_file_size, cl_min, cl_max, pos, size) -> int:
    """CommitLog.pickup_store_timestamp over the segment list as it was when the search began."""
    if not (pos >= cl_min and pos + size <= cl_max) or size < 64:
        return -1
    idx = pos // cl_file_size - cl_files[0].file_from_offset // cl_file_size if cl_files else -1
    if not 0 <= idx < len(cl_files):
        return -1
    mf = cl_files[idx]
    at = pos - mf.file_from_offset
    if not 0 <= at < cl_file_size or mf.buf is None or at + size > mf.read_position:
        return -1
    return R.store_timestamp_at(mf.buf, at, size)


# the chosen twin (rocketstore.engine.TWINS); search_by_time_py stays the reference
from ..engine import search_by_time
