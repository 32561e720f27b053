"""One queue's BatchConsumeQueue (RIP-26): 46-byte units under batchconsumequeue/{topic}/{queueId}/.

A port of RocketMQ 5.x's store/queue/BatchConsumeQueue. Each unit covers `batch_size` queue offsets from
`base_offset`, so min/max offsets are message offsets and a lookup by offset is a search on base_offset,
not an index computation. Where RocketMQ's answers are not the textbook ones (time lookups, truncation),
they are ported as RocketMQ gives them: they are what a RocketMQ broker would answer on the same files.
"""

from __future__ import annotations

import logging
from bisect import bisect_right, insort

import numpy as np

from ..files.mapped_file import MappedFile
from ..files.mapped_file_queue import MappedFileQueue
from ..formats import batch_cq as B
from ..formats import cq_ext
from ..formats.batch_cq import BatchUnit
from ..files.layout import StoreLayout

log = logging.getLogger("rocketstore.batchconsumequeue")
UNIT = B.UNIT_SIZE
ZERO_UNIT = bytes(UNIT)
DEFAULT_FILE_SIZE = 300_000 * UNIT  # MessageStoreConfig.mapperFileSizeBatchConsumeQueue
LOWER, UPPER = "lower", "upper"


class _FloorMap:
    """The part of ConcurrentSkipListMap the per-file maps use: put (last one wins) and floorEntry."""

    def __init__(self):
        self._keys: list[int] = []
        self._values: dict[int, MappedFile] = {}

    def put(self, key: int, mf: MappedFile) -> None:
        if key not in self._values:
            insort(self._keys, key)
        self._values[key] = mf

    def floor(self, key: int) -> MappedFile | None:
        i = bisect_right(self._keys, key)
        return self._values[self._keys[i - 1]] if i else None

    def keep_only(self, live: set) -> None:
        gone = [k for k, mf in self._values.items() if mf not in live]
        for k in gone:
            del self._values[k]
            self._keys.remove(k)

    def __len__(self) -> int:
        return len(self._keys)


class BatchConsumeQueue:
    """A queue of the log/queue.py protocol: a unit per inner batch, slots are places in the files."""

    cq_type = "BatchCQ"
    is_batch = True
    label = "batch consume queue"
    unit_size = UNIT
    ext = None  # a batch ConsumeQueue has no ConsumeQueue extension

    def __init__(
        self,
        root: str,
        topic: str,
        queue_id: int,
        file_size: int = DEFAULT_FILE_SIZE,
        *,
        writable: bool,
        search_by_cache: bool = True,
    ):
        if file_size <= 0 or file_size % UNIT:
            raise ValueError(f"batch consume queue file size must be a positive multiple of {UNIT}, got {file_size}")
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.search_by_cache = search_by_cache  # MessageStoreConfig.searchBcqByCacheEnable (default true)
        self.directory = StoreLayout(root).queue_dir(topic, queue_id, batch=True)
        self.files = MappedFileQueue(self.directory, file_size, writable=writable, unit=UNIT)
        # maxMsgPhyOffsetInCommitLog: the START of the last unit's record (a plain CQ keeps its end), which
        # is why the put guard below is `offset <= max`, not `offset + size <= max`.
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self._max_offset = 0
        self._min_offset = -1  # RocketMQ answers -1 for a queue without units
        # recovery found valid-looking units after a unit it stopped at (a hole: garbage or zeros over units
        # in the middle): they are cut with it, and recovery rebuilds the queue from the CommitLog from this
        # offset (the end of the last unit kept), as for a plain ConsumeQueue
        self.damaged_from: int | None = None
        # first msgBaseOffset / first storeTime of each file -> that file (offsetCache / timeCache)
        self._offset_map = _FloorMap()
        self._time_map = _FloorMap()
        self._arrays: dict[MappedFile, np.ndarray] = {}

    # -- numpy views over the mapped files (zero-copy)
    def _units(self, mf: MappedFile) -> np.ndarray:
        arr = self._arrays.get(mf)
        if arr is None:
            arr = B.units(mf.buf)
            mf.hold_view(arr)
            self._arrays[mf] = arr
        return arr

    def _written(self, mf: MappedFile) -> np.ndarray:
        return self._units(mf)[: mf.read_position // UNIT]

    def _forget_missing(self) -> None:
        """Views and map entries of segments that were deleted must go (a view keeps the mapping alive)."""
        live = set(self.files.files)
        for mf in [m for m in self._arrays if m not in live]:
            del self._arrays[mf]
        self._offset_map.keep_only(live)
        self._time_map.keep_only(live)

    @staticmethod
    def _first_unit(mf: MappedFile | None) -> BatchUnit | None:
        """getMinMsgOffset: the file's first unit, None for a file with no unit yet."""
        if mf is None or mf.read_position < UNIT:
            return None
        return B.decode_unit(mf.buf, 0)

    @staticmethod
    def _last_unit(mf: MappedFile | None) -> BatchUnit | None:
        """getMaxMsgOffset: the file's last written unit."""
        if mf is None or mf.read_position < UNIT:
            return None
        return B.decode_unit(mf.buf, mf.read_position - UNIT)

    # -- open
    def load(self) -> None:
        self.files.load()

    def recover(self) -> None:
        """BatchConsumeQueue.recover: from the third-last file, stop at the first unit that is not valid.

        Like RocketMQ it leaves the per-file maps alone: the store builds them in correct_min_offset, which
        it calls after recovery (recoverOffsetTable)."""
        mfs = self.files.files
        if not mfs:
            return
        index = max(len(mfs) - 3, 0)
        per_file = self.file_size // UNIT
        end = -1  # where the last valid unit's record ends
        while True:
            mf = mfs[index]
            arr = self._units(mf)[:per_file]
            valid = B.valid_mask(arr)
            bad = np.flatnonzero(~valid)
            n = int(bad[0]) if len(bad) else per_file
            if n:
                self.max_physic_offset = int(arr["pos"][n - 1])
                end = self.max_physic_offset + int(arr["size"][n - 1])
            process = mf.file_from_offset + n * UNIT
            if n == per_file and index + 1 < len(mfs):
                index += 1
                continue
            if n < per_file and (bool(valid[n + 1 :].any()) or index + 1 < len(mfs) or arr[n].tobytes() != ZERO_UNIT):
                # RocketMQ stops here and drops the rest. A unit that is not all zeros was written, and units
                # after it are real units: lost with it, so they are dispatched again from the CommitLog
                self.damaged_from = max(end, 0)
                log.warning(
                    "batch consume queue %s-%d: invalid unit at %s offset %d; the queue is cut there and "
                    "rebuilt from the CommitLog",
                    self.topic,
                    self.queue_id,
                    mf.path,
                    n * UNIT,
                )
            break
        del arr, valid
        self.files.flushed_where = self.files.committed_where = process
        self._arrays.clear()  # views must go before a segment can be unmapped
        self.files.truncate_dirty(process)
        self._forget_missing()
        self.revise_offsets()

    # -- offsets (message offsets: a unit of batch size n covers n of them)
    @property
    def min_offset(self) -> int:
        return self._min_offset

    @property
    def max_offset(self) -> int:
        return self._max_offset

    @property
    def message_total(self) -> int:
        return self._max_offset - self._min_offset

    def _revise_min_offset(self) -> None:
        first = self.files.first()
        if first is None:
            self._max_offset, self._min_offset, self.min_logic_offset = 0, -1, -1
            return
        self.min_logic_offset = first.file_from_offset
        u = self._first_unit(first)
        self._min_offset = u.base_offset if u is not None else -1

    def _revise_max_offset(self) -> None:
        u = self._last_unit(self.files.last())
        if u is None and len(self.files.files) >= 2:
            u = self._last_unit(self.files.files[-2])  # the last file may be new and still empty
        self._max_offset = u.next_offset if u is not None else 0

    def revise_offsets(self) -> None:
        """reviseMaxAndMinOffsetInQueue: min = first file's first base, max = last unit's base + batch size."""
        self._revise_min_offset()
        self._revise_max_offset()

    def roll_next_file(self, offset: int) -> int:
        """rollNextFile: RocketMQ's batch queue has no file arithmetic on message offsets and answers 0."""
        return 0

    # -- the per-file maps (searchBcqByCacheEnable)
    def _map_file(self, mf: MappedFile) -> None:
        """cacheBcq: a file that just got its first unit."""
        u = self._first_unit(mf)
        if u is None:
            return
        self._offset_map.put(u.base_offset, mf)
        self._time_map.put(u.store_time, mf)

    def _refresh_maps(self) -> None:
        if not self.search_by_cache:
            return
        self._offset_map, self._time_map = _FloorMap(), _FloorMap()
        for mf in self.files.files:
            self._map_file(mf)

    # -- write
    def put(
        self, offset: int, size: int, tags_code: int, store_time: int, msg_base_offset: int, batch_size: int
    ) -> bool:
        """putBatchMessagePositionInfo: append one unit (compactedOffset -1, reserved 0)."""
        if offset <= self.max_physic_offset:
            log.debug(
                "batch consume queue %s-%d built repeatedly: max physical offset %d, offset %d",
                self.topic,
                self.queue_id,
                self.max_physic_offset,
                offset,
            )
            return True  # already built (recovery or reput replaying what is there)
        data = B.encode_unit(offset, size, tags_code, store_time, msg_base_offset, batch_size)
        mf = self.files.get_last(self.files.max_offset())
        if mf is None or mf.remaining() < UNIT:
            return False
        is_new = mf.read_position < UNIT
        mf.append(data)
        self.max_physic_offset = offset
        self._max_offset = msg_base_offset + batch_size
        # only the queue's very first file sets the min here; later ones are correct_min_offset's job
        if mf.first_create_in_queue and self._min_offset == -1:
            self._revise_min_offset()
        if is_new:
            self._map_file(mf)
        return True

    def dispatch(
        self, offset: int, size: int, tags_code: int, store_time: int, msg_base_offset: int, batch_size: int
    ) -> bool | None:
        """putMessagePositionInfoWrapper's guard, then put: None when the request is dropped (negative
        base offset or batch size, which RocketMQ logs and skips), else put's answer. Its retry loop and
        checkpoint stamping are the caller's."""
        if msg_base_offset < 0 or batch_size < 0:
            log.warning(
                "unexpected dispatch request in batch consume queue %s-%d at offset %d (base %d, batch size %d)",
                self.topic,
                self.queue_id,
                offset,
                msg_base_offset,
                batch_size,
            )
            return None
        return self.put(offset, size, tags_code, store_time, msg_base_offset, batch_size)

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
    ):
        """The queue protocol's put: a unit covering `batch_size` queue offsets from msg_base_offset (from
        queue_offset for a record without one: a plain record of a batch topic). None when dropped
        (dispatch). A batch queue keeps no bitmap (it has no ext)."""
        base = queue_offset if msg_base_offset is None else msg_base_offset
        return self.dispatch(offset, size, tags_code, store_timestamp, base, batch_size)

    def put_units(
        self,
        phys: list,
        sizes: list,
        tags_codes: list,
        queue_offsets: list,
        store_ts: list,
        bit_maps: list | None = None,
    ) -> bool:
        """A run of plain records' units (one message each), in order. False when a unit could not be
        written (a dropped one is no failure). When every unit passes put's guards (physical offsets rising
        past the queue's, queue offsets >= 0) they are encoded at once and written a file's worth at a time;
        else, and from a file that cannot take a unit on, unit by unit (put_units_py)."""
        n = len(phys)
        if not n:
            return True
        p = np.asarray(phys, dtype=np.int64)
        q = np.asarray(queue_offsets, dtype=np.int64)
        if p[0] <= self.max_physic_offset or q.min() < 0 or (n > 1 and not (p[1:] > p[:-1]).all()):
            return self.put_units_py(phys, sizes, tags_codes, queue_offsets, store_ts)
        arr = np.empty(n, dtype=B.DTYPE)
        arr["pos"], arr["size"], arr["tags"], arr["store_time"] = p, sizes, tags_codes, store_ts
        arr["base_offset"], arr["batch_size"], arr["compacted_offset"], arr["reserved"] = q, 1, B.INVALID_POS, 0
        data = arr.tobytes()
        done = 0
        while done < n:
            mf = self.files.get_last(self.files.max_offset())
            if mf is None or mf.remaining() < UNIT:
                return self.put_units_py(
                    list(phys)[done:],
                    list(sizes)[done:],
                    list(tags_codes)[done:],
                    q[done:].tolist(),
                    list(store_ts)[done:],
                )
            is_new = mf.read_position < UNIT
            k = min(n - done, mf.remaining() // UNIT)
            mf.append(data[done * UNIT : (done + k) * UNIT])
            done += k
            self.max_physic_offset = int(p[done - 1])
            self._max_offset = int(q[done - 1]) + 1
            if mf.first_create_in_queue and self._min_offset == -1:
                self._revise_min_offset()
            if is_new:
                self._map_file(mf)
        return True

    def put_units_py(self, phys, sizes, tags_codes, queue_offsets, store_ts, bit_maps=None) -> bool:
        """put_units unit by unit through put_position (the reference)."""
        ok = True
        for p, size, code, qoff, ts in zip(phys, sizes, tags_codes, queue_offsets, store_ts):
            ok = self.put_position(p, size, code, qoff, ts) is not False and ok
        return ok

    @staticmethod
    def resolve_tags(tags_code: int):
        """(tagsCode, ext unit) as a plain queue without the ext answers: a slot value that looks like an ext
        address has no valid tagsCode (None: a tag filter lets it through)."""
        return (None, None) if cq_ext.is_ext_addr(tags_code) else (tags_code, None)

    # -- read by message offset
    def _file_by_offset(self, msg_offset: int) -> MappedFile | None:
        last = self.files.last()
        min_last = self._first_unit(last)
        if min_last is not None and min_last.base_offset <= msg_offset:
            return last
        if not self.search_by_cache:
            return self._search_offset_in_files(msg_offset)
        mf = self._offset_map.floor(msg_offset)
        if mf is None:
            # the map misses: RocketMQ falls back to the file scan only inside the queue's known range
            min_first = self._first_unit(self.files.first())
            if (
                min_first is not None
                and min_first.base_offset <= msg_offset
                and (min_last is None or msg_offset < min_last.base_offset)
            ):
                mf = self._search_offset_in_files(msg_offset)
            log.warning(
                "offset map of batch consume queue %s-%d misses offset %d; file %s",
                self.topic,
                self.queue_id,
                msg_offset,
                mf,
            )
        return mf

    def _search_offset_in_files(self, msg_offset: int) -> MappedFile | None:
        """searchOffsetFromFiles: the newest file whose first base offset is <= msg_offset."""
        for mf in reversed(self.files.files):
            u = self._first_unit(mf)
            if u is not None and u.base_offset <= msg_offset:
                return mf
        return None

    def units_from(self, msg_offset: int):
        """getBatchMsgIndexBuffer: (base offset of the unit covering `msg_offset`, numpy units from that unit
        to the end of what is written in its file), or None. The covering unit's base may lie below
        `msg_offset` (a get starting mid-batch returns the whole batch)."""
        r = self.locate(msg_offset)
        return None if r is None else (int(r[1]["base_offset"][0]), r[1])

    def locate(self, msg_offset: int):
        """units_from with the slot of the first unit instead of its base offset: (slot, numpy units)."""
        if msg_offset >= self._max_offset:
            return None
        mf = self._file_by_offset(msg_offset)
        if mf is None or self._first_unit(mf) is None:
            return None
        arr = self._written(mf)
        mid = _search_base(arr["base_offset"], 0, len(arr) - 1, msg_offset)
        if mid == -1:
            return None
        return mf.file_from_offset // UNIT + mid, arr[mid:]

    @staticmethod
    def unit_rows(units, first_slot: int, start: int, n: int) -> list[tuple]:
        """(pos, size, tagsCode, base offset, batch size) of units[start:start + n]."""
        part = units[start : start + n]
        return list(
            zip(
                part["pos"].tolist(),
                part["size"].tolist(),
                part["tags"].tolist(),
                part["base_offset"].tolist(),
                part["batch_size"].tolist(),
            )
        )

    # -- units by slot: a unit's place in the files (its byte offset / 46), what the checks against the
    # CommitLog (services.queue_check) walk; a slot is not a queue offset
    def slot_range(self) -> tuple[int, int]:
        """(first slot, slot past the last written unit)."""
        first = self.files.first()
        return (first.file_from_offset // UNIT if first else 0), self.files.max_offset() // UNIT

    def unit_at(self, slot: int) -> BatchUnit | None:
        """The written unit at `slot`, None past what is written."""
        mf = self.files.find(slot * UNIT) if slot >= 0 else None
        rel = slot * UNIT - mf.file_from_offset if mf is not None else 0
        if mf is None or rel + UNIT > mf.read_position:
            return None
        return B.decode_unit(mf.buf, rel)

    def chain_break_slots(self) -> list[int]:
        """The slots on both sides of every break in the unit chain (formats.batch_cq.chain_breaks), in order:
        where a unit that passed recovery's validity test may still be wrong. All of the files recovery
        walks (the last three); of the others, where one file meets the next (a file's first unit decides
        the per-file map and the queue's min offset), which reads only two units per file."""
        out: list[int] = []
        prev = None  # (slot, unit) of the previous file's last unit
        mfs = self.files.files
        for k, mf in enumerate(mfs):
            arr = self._written(mf)
            if not len(arr):
                continue
            first = mf.file_from_offset // UNIT
            if prev is not None and len(B.chain_breaks(np.concatenate([prev[1], arr[:1]]))):
                out += [prev[0], first]
            if k >= len(mfs) - 3:
                out += [first + int(i) + d for i in B.chain_breaks(arr) for d in (0, 1)]
            prev = (first + len(arr) - 1, arr[-1:])
        return sorted(set(out))

    def cut_to(self, slot: int) -> None:
        """Keep the units before `slot`, drop the others (zeroed on disk, later files deleted): the queue's max
        physical offset becomes the start of the record of the unit before `slot` (-1 if none is left)."""
        self._arrays.clear()  # views must go before a segment can be unmapped
        end = slot * UNIT
        self.files.flushed_where = min(self.files.flushed_where, end)
        self.files.committed_where = min(self.files.committed_where, end)
        self.files.truncate_dirty(end)
        self._forget_missing()
        prev = self.unit_at(slot - 1)
        self.max_physic_offset = (
            prev.pos
            if prev is not None and B.is_valid_unit(prev.pos, prev.size, prev.base_offset, prev.batch_size)
            else -1
        )
        self.revise_offsets()
        self._refresh_maps()

    def rewrite_unit(
        self,
        slot: int,
        pos: int,
        size: int,
        tags_code: int,
        store_time: int,
        base_offset: int,
        batch_size: int,
        min_commit_log_offset: int,
    ) -> None:
        """Overwrite the written unit at `slot` (a repair from the CommitLog). A file's first unit or the
        queue's last one decides offsets and the per-file maps: those are revised (correct_min_offset)."""
        mf = self.files.find(slot * UNIT) if slot >= 0 else None
        rel = slot * UNIT - mf.file_from_offset if mf is not None else 0
        if mf is None or rel + UNIT > mf.read_position:
            raise ValueError(f"batch consume queue {self.topic}-{self.queue_id} has no unit at slot {slot} to rewrite")
        mf.buf[rel : rel + UNIT] = B.encode_unit(pos, size, tags_code, store_time, base_offset, batch_size)
        if slot == self.slot_range()[1] - 1:
            self.max_physic_offset = pos
        if rel == 0 or slot == self.slot_range()[1] - 1:
            self.correct_min_offset(min_commit_log_offset)

    def get_unit(self, msg_offset: int) -> BatchUnit | None:
        """get(offset): the unit covering `msg_offset` (its first three fields are a plain CQ unit's)."""
        r = self.units_from(msg_offset)
        if r is None:
            return None
        return BatchUnit._make(r[1][0].item())

    def earliest_unit(self) -> BatchUnit | None:
        return self.get_unit(self._min_offset)

    def latest_unit(self) -> BatchUnit | None:
        return self.get_unit(self._max_offset - 1)

    def last_physical_end(self) -> int:
        """getLastOffset: end (offset + size) of the latest unit's record, -1 if none."""
        u = self.latest_unit()
        return u.pos + u.size if u is not None else -1

    # -- read by time (getOffsetInQueueByTime, ported literally)
    def offset_by_time(self, timestamp: int, boundary: str = LOWER, commitlog=None) -> int:
        """The base offset RocketMQ's BatchConsumeQueue answers, before the store clamps it to [min, max]
        (-1 when nothing qualifies). Uses each unit's own store time, so `commitlog` is not needed; it is
        accepted to match ConsumeQueue.offset_by_time.

        Not a textbook search: T at or past the chosen file's last time answers that last unit's base
        offset, for LOWER too; in between, binarySearchRight's LOWER/UPPER (see _search_time)."""
        if boundary not in (LOWER, UPPER):
            raise ValueError(f"boundary must be {LOWER!r} or {UPPER!r}, got {boundary!r}")
        mf = self._file_by_time(timestamp)
        if mf is None or self._first_unit(mf) is None:
            return -1
        arr = self._written(mf)
        times = arr["store_time"]
        right = len(arr) - 1
        if timestamp >= int(times[right]):
            return int(arr["base_offset"][right])
        mid = _search_time(times, 0, right, timestamp, boundary)
        return int(arr["base_offset"][mid]) if mid != -1 else -1

    def _file_by_time(self, timestamp: int) -> MappedFile | None:
        last = self.files.last()
        if last is None:
            return None  # RocketMQ throws on a queue without files; nothing qualifies
        min_last = self._first_unit(last)
        if min_last is not None and min_last.store_time <= timestamp:
            return last
        if not self.search_by_cache:
            return self._search_time_in_files(timestamp)
        # searchTimeFromCache: the file whose first time is the greatest <= T, else the FIRST file (so an
        # empty map, before correct_min_offset built it, always answers from the first file)
        mf = self._time_map.floor(timestamp)
        return mf if mf is not None else self.files.first()

    def _search_time_in_files(self, timestamp: int) -> MappedFile | None:
        """searchTimeFromFiles: newest file first, for when the per-file maps are off."""
        mfs = self.files.files
        n = len(mfs)
        for i in range(n - 1, -1, -1):
            lo = self._first_unit(mfs[i])
            if lo is None:
                continue  # a new file
            hi = self._last_unit(mfs[i])
            if hi.store_time >= timestamp:
                if lo.store_time <= timestamp or i == 0:
                    return mfs[i]
                continue
            return mfs[i + 1] if i + 1 < n else None
        return None

    # -- truncation, min offset, deletion
    def truncate_dirty(self, phy_offset: int) -> None:
        """truncateDirtyLogicFiles: drop units whose record starts at or beyond `phy_offset`.

        As in RocketMQ, a last file's FIRST unit is only compared with `phy_offset`, never tested for
        validity: an empty last file keeps one all-zero unit (write position 46)."""
        self.max_physic_offset = phy_offset - 1
        per_file = self.file_size // UNIT
        # units pointing below phy_offset after a dropped one: the dropped one was garbage in the middle of
        # the queue, not a unit written ahead of the log; those after it are lost with it and must be
        # dispatched again from the CommitLog (damaged_from; recovery does it)
        hole = False
        kept_end = -1
        while True:
            mf = self.files.last()
            if mf is None:
                break
            arr = self._units(mf)
            mf.set_positions(0)
            first_pos = int(arr["pos"][0])
            if first_pos >= phy_offset:
                hole = hole or _any_below(arr[1:per_file], phy_offset)
                del arr
                self._arrays.pop(mf, None)
                self.files.delete_last()
                self._forget_missing()
                continue
            mf.set_positions(UNIT)
            self.max_physic_offset = first_pos
            kept_end = first_pos + int(arr["size"][0])
            rest = arr[1:per_file]
            stop = np.flatnonzero(~B.valid_mask(rest) | (rest["pos"] >= phy_offset))
            n = int(stop[0]) if len(stop) else per_file - 1
            if n:
                mf.set_positions((n + 1) * UNIT)
                self.max_physic_offset = int(rest["pos"][n - 1])
                kept_end = self.max_physic_offset + int(rest["size"][n - 1])
            hole = hole or _any_below(rest[n + 1 :], phy_offset)
            del rest, arr
            # dropped units zeroed on disk (durably): the next recovery would take them as written again
            mf.clear_from(mf.wrote)
            break  # (RocketMQ loops forever on a one-unit file here)
        if hole:
            # from the end of the last unit kept; with none kept, from the log's start (and the put guard
            # must then let every unit in)
            if not self.files.files:
                self.max_physic_offset = -1
            self.damaged_from = max(kept_end, 0)
            log.warning(
                "batch consume queue %s-%d: a unit pointing past the CommitLog's end %d has units "
                "pointing below it after it; cut there, rebuilt from the CommitLog",
                self.topic,
                self.queue_id,
                phy_offset,
            )
        self.revise_offsets()

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """correctMinOffset: revise min/max, rebuild the per-file maps, then move the min past the first
        file's units whose record lies below the CommitLog's min (only the first file is looked at)."""
        self.revise_offsets()
        self._refresh_maps()
        first = self.files.first()
        if first is None:
            return
        if first.read_position <= 0:
            log.warning("correct min offset found an empty first file in %s-%d", self.topic, self.queue_id)
            return
        arr = self._written(first)
        above = np.flatnonzero(arr["pos"] >= phy_min_offset)
        k = int(above[0]) if len(above) else len(arr)
        if k:
            self._min_offset = int(arr["base_offset"][k - 1]) + int(arr["batch_size"][k - 1])

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """deleteExpiredFile: delete leading files (never the last) whose last unit's record lies below the
        CommitLog's min offset, then correct_min_offset. Returns how many files went."""
        gone = []
        for mf in list(self.files.files[:-1]):
            if mf.read_position <= self.file_size - UNIT:
                break  # a file before the last that is not full: RocketMQ stops there
            last_pos = B.decode_unit(mf.buf, self.file_size - UNIT).pos
            if last_pos >= min_commit_log_offset:
                break
            self._arrays.pop(mf, None)
            gone.append(mf)
        # unlinked, not unmapped: a reader holding a numpy view of one keeps its old bytes
        self.files.delete_head(gone)
        count = len(gone)
        self._forget_missing()
        self.correct_min_offset(min_commit_log_offset)
        return count

    # -- flush and close
    def flush(self, least_pages: int = 0) -> bool:
        return self.files.flush(least_pages)

    def close(self) -> None:
        self._arrays.clear()
        self._offset_map, self._time_map = _FloorMap(), _FloorMap()
        self.files.close()

    def destroy(self) -> None:
        self.max_physic_offset = -1
        self._min_offset, self._max_offset = -1, 0
        self._arrays.clear()
        self._offset_map, self._time_map = _FloorMap(), _FloorMap()
        self.files.destroy()


def _any_below(arr: np.ndarray, phy_offset: int) -> bool:
    """Does any of these units look written (valid) and point below `phy_offset`?"""
    return bool((B.valid_mask(arr) & (arr["pos"] < phy_offset)).any())


def _search_base(bases, left: int, right: int, target: int) -> int:
    """binarySearch on msgBaseOffset over unit indexes [left, right]: the unit whose base equals `target`,
    else the last one below it as the search converges; -1 when every base is above `target`."""
    max_right = right
    while left <= right:
        mid = (left + right) // 2
        v = int(bases[mid])
        if v == target:
            return mid
        if v > target:
            right = mid - 1
        elif mid == left:
            # converging on the left: the next unit may still be the one at or below target
            if mid + 1 <= max_right and int(bases[mid + 1]) <= target:
                return mid + 1
            return mid
        else:
            left = mid
    return -1


def _search_time(times, left: int, right: int, target: int, boundary: str) -> int:
    """binarySearchRight on storeTime over unit indexes [left, right], step for step as RocketMQ's: meant
    as the first unit with time >= target (LOWER: the lowest of equal ones, UPPER: the highest), but UPPER
    keeps `left` on times <= target and so can answer -1 where a time > target exists."""
    while left <= right:
        mid = (left + right) // 2
        v = int(times[mid])
        if mid == right:
            return mid if v >= target else -1
        if mid == left:
            if v >= target:
                return mid
            left = mid + 1
        elif boundary == LOWER:
            if v < target:
                left = mid + 1
            else:
                right = mid
        elif v <= target:
            left = mid
        else:
            right = mid - 1
    return -1
