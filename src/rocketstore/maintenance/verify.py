"""`rocketstore verify`: check a whole store, file by file, without changing a byte.

The files are read directly with the format modules (read-only mmaps), not through MessageStore.open:
opening runs recovery, which would silently cut a bad CommitLog tail in memory and hide exactly what
verify is for.

What is checked:
  * every CommitLog segment, in order: names follow each other by the segment size, each file has that size,
    every record decodes (format.record.read_header), its PHYSICALOFFSET field is where it sits, its body CRC
    holds and, when it carries `__CRC32#` (enabledAppendPropCRC), the appended CRC too; a BLANK filler
    declares exactly the bytes left in its file; a segment whose data ends without a BLANK while a later
    segment holds data is a problem (an all-zero later segment is a preallocated file, not a problem);
  * every ConsumeQueue unit against its record: a record starts at that physical offset, its size, topic,
    queueId and queue offset match the queue and the unit's position, tagsCode is what dispatch computes
    (services.dispatch.tags_code_for, which knows SCHEDULE_TOPIC_XXXX's delivery-time rule); pre-blank units
    (0, 0x7FFFFFFF, 0) are allowed at the head of a queue; units below the CommitLog's min offset are expired;
  * every batch ConsumeQueue unit: the same, plus msgBaseOffset = the record's queue offset, batchSize =
    INNER_NUM, and base offsets that follow each other;
  * every record that dispatch gives a queue unit has one; records after the last dispatched one are not
    corruption but dispatch lag (a crash image; RocketMQ's recovery re-dispatches them), reported as a note;
  * every index entry: it points at a record start in a live CommitLog file (or below the CommitLog's min:
    expired), its key hash is the hash of one of that record's `topic#UNIQ_KEY` / `topic#KEYS token`, and
    its prevIndexNo and the hash slots stay within the file's entries;
  * the checkpoint decodes.

Each problem is a dict {file, offset, problem} (file relative to the store root, offset = byte offset inside
that file), with extra context (physicalOffset, queueOffset, entry) where there is one.
"""

from __future__ import annotations

import bisect
import mmap
import os

import numpy as np

from .. import engine
from ..files import layout as L
from ..config.store_config import StoreConfig
from ..config.deleted_topics import DeletedTopics
from ..errors import CorruptDataError
from ..formats import batch_cq as BCQ
from ..formats import checkpoint as CP
from ..formats import cq as CQ
from ..formats import cq_ext as X
from ..formats import index as IX
from ..formats import properties as P
from ..formats import record as R
from ..formats.javahash import index_key_hash  # IndexFile's key hash (the compiled String.hashCode when built)
from ..services.dispatch import gets_queue_unit, tags_code_for
from ..store.file_sizes import resolve_file_sizes
from ..store.lock import written_by_another
from ..engine import parse_properties

PRE_BLANK_SIZE = 0x7FFFFFFF
PROGRESS_STEP = 4 << 20  # progress("commitlog", bytes done, bytes total) every this many bytes
NATIVE_RUN = 65536  # records per call of the compiled walk (rocketstore._native.VerifyRecords.walk)


def _map(path: str):
    if os.path.getsize(path) == 0:
        return b""
    with open(path, "rb") as fh:
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


class _QueueWalk:
    """Where the walk of one ConsumeQueue stands across its files: whether a written unit was seen (a pre-blank
    unit after one is wrong) and where the queue's written units ended (a written unit after that is wrong)."""

    __slots__ = ("topic", "qid", "ext", "seen_real", "ended_at")

    def __init__(self, topic: str, qid: int, ext):
        self.topic, self.qid, self.ext = topic, qid, ext
        self.seen_real = False
        self.ended_at: tuple[str, int, int] | None = None  # (file, byte offset, queue offset)


def _all_zero(buf) -> bool:
    return len(buf) == 0 or not np.frombuffer(buf, dtype=np.uint8).any()


def _zero_units(arr: np.ndarray, i: int) -> int:
    """How many units from the i-th on are all zeros (looked at in growing windows: the cost follows the run)."""
    n, window = 0, 64
    while i + n < len(arr):
        nonzero = arr[i + n : i + n + window].view(np.uint8).reshape(-1, CQ.UNIT_SIZE).any(axis=1)
        if nonzero.any():
            return n + int(np.argmax(nonzero))
        n += len(nonzero)
        window *= 2
    return n


class _Record:
    __slots__ = (
        "topic",
        "queue_id",
        "queue_offset",
        "size",
        "tags_code",
        "store_ts",
        "sys_flag",
        "inner_num",
        "keys",
        "uniq",
        "file",
        "pos",
    )


class _Records:
    """The records the CommitLog walk found, by physical offset, and which of them a queue unit points at.

    The pure reference of the compiled rocketstore._native.VerifyRecords, which keeps them in C arrays (no
    Python object per record) and adds walk/units/index: the records, units and entries with nothing to
    report, taken in C."""

    def __init__(self):
        self._by_phys: dict[int, _Record] = {}
        self._covered: set[int] = set()

    def add(self, phys: int, r: _Record) -> None:
        self._by_phys[phys] = r

    def get(self, phys: int) -> _Record | None:
        return self._by_phys.get(phys)

    def offsets(self) -> list[int]:
        """The records' offsets, in record order."""
        return list(self._by_phys)

    def cover(self, phys: int) -> None:
        self._covered.add(phys)

    def uncovered(self) -> tuple[int, int, list[int]]:
        """(frontier, lag, before): the dispatched frontier (the highest covered offset, -1 if none), and of
        the records that get a queue unit and have none how many lie after it and the offsets of the others,
        in record order."""
        frontier = max(self._covered, default=-1)
        lag, before = 0, []
        for phys, r in self._by_phys.items():
            if phys in self._covered or not gets_queue_unit(r.sys_flag):
                continue
            if phys > frontier:
                lag += 1
            else:
                before.append(phys)
        return frontier, lag, before

    def clear(self) -> None:
        self._by_phys.clear()
        self._covered.clear()


class _ExtQueue:
    """One queue's consumequeue_ext files, mapped read-only and walked once: where units start, file by file."""

    def __init__(self, verifier: "Verifier", directory: str):
        self.v = verifier
        self.directory = directory
        self.names = L.segment_names(directory)
        self.start_list = [int(n) for n in self.names]
        sizes = [os.path.getsize(os.path.join(directory, n)) for n in self.names]
        # the ext's file size: what the files on disk have (the first one), else the config's
        self.file_size = (
            sizes[0]
            if sizes and sizes[0] > 0
            else (verifier.config.mapped_file_size_consume_queue_ext or StoreConfig.DEFAULT_CONSUME_QUEUE_EXT_SIZE)
        )
        self.bufs: dict[int, object] = {}
        self.starts: dict[int, set[int]] = {}  # file start -> positions where the walk found a unit
        self.walked: dict[int, int] = {}  # file start -> where the walk stopped
        for k, n in enumerate(self.names):
            self._walk(k, n, sizes[k])

    def _walk(self, k: int, name: str, actual: int) -> None:
        v = self.v
        path = os.path.join(self.directory, name)
        rel = v.rel(path)
        start = int(name)
        v.checked["consumeQueueExtFiles"] += 1
        if k > 0 and start != int(self.names[k - 1]) + self.file_size:
            v.problem(rel, 0, f"ext file name follows {self.names[k - 1]} but is not {self.file_size} bytes after it")
        if actual != self.file_size:
            v.problem(rel, actual, f"ext file is {actual} bytes, the queue's first ext file is {self.file_size}")
        buf = _map(path)
        self.bufs[start] = buf
        starts = self.starts[start] = set()
        pos, end, marker = 0, len(buf), False
        while pos + 2 <= end:
            size = X.read_size(buf, pos)
            if size == 0:
                break
            if size < 0:
                if buf[pos : pos + 2] == X.END_MARKER:
                    marker = True
                else:
                    v.problem(
                        rel,
                        pos,
                        f"ext unit size {size} is neither a unit nor the end marker (-1)",
                        extOffset=start + pos,
                    )
                break
            if size < X.MIN_UNIT_SIZE or pos + size > end:
                v.problem(
                    rel,
                    pos,
                    f"ext unit size {size} "
                    + (
                        f"is below the minimum {X.MIN_UNIT_SIZE}"
                        if size < X.MIN_UNIT_SIZE
                        else f"reaches past the end of the file ({end} bytes)"
                    ),
                    extOffset=start + pos,
                )
                break
            bm_size = X.HEAD.unpack_from(buf, pos)[3]
            if size != X.MIN_UNIT_SIZE + max(bm_size, 0):
                v.problem(
                    rel,
                    pos,
                    f"ext unit size {size} but {X.MIN_UNIT_SIZE} + its bitMapSize {bm_size} "
                    f"make {X.MIN_UNIT_SIZE + max(bm_size, 0)}",
                    extOffset=start + pos,
                )
                break
            starts.add(pos)
            v.checked["consumeQueueExtUnits"] += 1
            pos += size
        self.walked[start] = pos
        if not marker and k + 1 < len(self.names):
            v.problem(
                rel, pos, "ext units end without the end marker, but a later ext file exists", extOffset=start + pos
            )

    def file_of(self, real: int) -> int | None:
        """The start of the ext file an ext offset falls in (the last one starting at or before it)."""
        i = bisect.bisect_right(self.start_list, real) - 1
        return self.start_list[i] if i >= 0 else None

    def close(self) -> None:
        for buf in self.bufs.values():
            if isinstance(buf, mmap.mmap):
                buf.close()
        self.bufs.clear()

    def unit(self, address: int, cq_rel: str, cq_off: int, **ctx):
        """The ext unit at `address` (a CQ unit's tagsCode slot), or None after reporting why there is none."""
        v = self.v
        real = X.undecorate(address)
        start = self.file_of(real)
        if start is None or real - start >= self.file_size:
            v.problem(
                cq_rel,
                cq_off,
                f"tagsCode is the ext address of offset {real}, in no file of {v.rel(self.directory)}",
                extOffset=real,
                **ctx,
            )
            return None
        rel = v.rel(os.path.join(self.directory, L.segment_name(start)))
        pos = real - start
        if pos not in self.starts[start]:
            where = "past the units the walk of the file found" if pos >= self.walked[start] else "where no unit starts"
            v.problem(
                rel,
                pos,
                f"a ConsumeQueue unit ({cq_rel} offset {cq_off}) names this ext offset, {where}",
                extOffset=real,
                **ctx,
            )
            return None
        try:
            return X.decode_unit(self.bufs[start], pos)
        except Exception as e:  # CorruptDataError: cut short (the walk should have said so already)
            v.problem(rel, pos, f"ext unit does not decode: {e}", extOffset=real, **ctx)
            return None


class Verifier:
    def __init__(self, root: str, config: StoreConfig, progress=None):
        self.root = os.path.abspath(root)
        self.layout = L.StoreLayout(self.root)
        self.config = resolve_file_sizes(self.root, config)
        self.delay_levels = self.config.delay_levels()
        self.progress = progress  # callable(kind, done, total) or None
        self.problems: list[dict] = []
        self.notes: list[str] = []
        self.checked = {
            "commitLogSegments": 0,
            "records": 0,
            "blankFillers": 0,
            "consumeQueues": 0,
            "consumeQueueUnits": 0,
            "preBlankUnits": 0,
            "batchConsumeQueues": 0,
            "batchConsumeQueueUnits": 0,
            "expiredUnits": 0,
            "undispatchedRecords": 0,
            "unindexedRecords": 0,
            "missingIndexEntries": 0,
            "indexFiles": 0,
            "indexEntries": 0,
            "expiredIndexEntries": 0,
            "checkpoint": 0,
            "consumeQueueExtFiles": 0,
            "consumeQueueExtUnits": 0,
            "extAddressedUnits": 0,
            "writtenAfterWalk": 0,
        }
        self.live = False  # another process writes the store: what it wrote after the CommitLog walk is skipped
        self.records = engine.native.VerifyRecords(_Record) if engine.native is not None else _Records()
        self.deleted = DeletedTopics(self.root, writable=False)  # their old records rightly have no unit
        self.min_offset = 0
        self.max_offset = 0

    def problem(self, file: str, offset: int, text: str, **context) -> None:
        p = {"file": file, "offset": offset, "problem": text}
        p.update(context)
        self.problems.append(p)

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.root)

    # ------------------------------------------------------------------ CommitLog
    def check_commitlog(self) -> None:
        directory = self.layout.commitlog
        names = L.segment_names(directory)
        size = self.config.mapped_file_size_commit_log
        if not names:
            self.notes.append("no CommitLog segments")
            return
        self.min_offset = int(names[0])
        # the last segment that holds data; all-zero segments after it are preallocated
        written = []
        for n in names:
            with open(os.path.join(directory, n), "rb") as fh:
                written.append(any(fh.read(8)))
        last_written = max((i for i, w in enumerate(written) if w), default=-1)
        self.max_offset = self.min_offset
        crc_wanted = self.config.enabled_append_prop_crc
        # progress in bytes of the segments that hold data, reported every few MiB within a segment too
        total = sum(os.path.getsize(os.path.join(directory, n)) for n in names[: last_written + 1])
        done = 0
        walk = getattr(self.records, "walk", None)  # the compiled table's walk, if it is the compiled one

        def delay_code(topic: str, raw: bytes, store_ts: int, sys_flag: int) -> int:
            return tags_code_for(topic, parse_properties(raw), store_ts, sys_flag, self.delay_levels)

        for i, n in enumerate(names):
            path = os.path.join(directory, n)
            rel = self.rel(path)
            base = int(n)
            self.checked["commitLogSegments"] += 1
            if self.progress:
                self.progress("commitlog", done, total)
            self._check_segment_file(path, rel, base, names[i - 1] if i else None, size)
            if i > last_written:
                if _all_zero(_map(path)):
                    self.notes.append(f"{rel}: preallocated, never written (all zeros)")
                else:
                    self.problem(
                        rel,
                        0,
                        "segment starts with zeros where a record or BLANK should be, but holds data further on",
                        physicalOffset=base,
                    )
                continue
            buf = _map(path)
            pos, ended = self._walk_segment(buf, base, rel, size, crc_wanted, walk, delay_code, done, total)
            if not ended and i < last_written:
                self.problem(
                    rel,
                    pos,
                    "segment data ends without a BLANK filler, but a later segment holds data",
                    physicalOffset=base + pos,
                )
            self.max_offset = base + pos
            done += len(buf)
        if self.progress:
            self.progress("commitlog", total, total)

    def _check_segment_file(self, path: str, rel: str, base: int, previous: str | None, size: int) -> None:
        """A segment's name follows the one before it by the segment size, is a multiple of it, and the file
        is that size."""
        if previous is not None and base != int(previous) + size:
            self.problem(
                rel, 0, f"segment name follows {previous} but is not {size} bytes after it", physicalOffset=base
            )
        if base % size:
            self.problem(
                rel, 0, f"segment name {base} is not a multiple of the segment size {size}", physicalOffset=base
            )
        actual = os.path.getsize(path)
        if actual != size:
            self.problem(
                rel,
                actual,
                f"segment is {actual} bytes, RocketMQ's segments are {size} (truncated or extended file)",
                physicalOffset=base + actual,
            )

    def _walk_segment(self, buf, base, rel, size, crc_wanted, walk, delay_code, done, total) -> tuple[int, bool]:
        """The records of one segment, to its BLANK filler or the end of what is written: (where the walk
        stopped, whether the segment ended there: a BLANK, or a bad record after which nothing can be found)."""
        pos, end = 0, len(buf)
        report_at = PROGRESS_STEP
        while pos + 8 <= end:
            if pos >= report_at and self.progress:
                self.progress("commitlog", done + pos, total)
                report_at = pos + PROGRESS_STEP
            rsize = R.I32.unpack_from(buf, pos)[0]
            if rsize == 0 and R.I32.unpack_from(buf, pos + 4)[0] == 0:
                return pos, False  # the end of the written data
            if R.is_blank(buf, pos):
                self.checked["blankFillers"] += 1
                if rsize != size - pos:
                    self.problem(
                        rel,
                        pos,
                        f"BLANK filler declares {rsize} bytes, {size - pos} are left in the segment",
                        physicalOffset=base + pos,
                    )
                return end, True
            if walk is not None:
                # the compiled walk takes the records with nothing to report (the same checks as
                # _check_record, which then judges the record it stopped at)
                n, after = walk(buf, pos, end, NATIVE_RUN, base, crc_wanted, delay_code, rel)
                if n:
                    self.checked["records"] += n
                    pos = after
                    continue
            if not self._check_record(buf, pos, base, rel, crc_wanted):
                return pos, True  # cannot find the next record after a bad one
            pos += rsize
        return pos, False

    def _check_record(self, buf, pos: int, base: int, rel: str, crc_wanted: bool) -> bool:
        phys = base + pos
        try:
            h = R.read_header(buf, pos, len(buf))
        except CorruptDataError as e:
            self.problem(rel, pos, f"bad record: {e.reason}", physicalOffset=phys)
            return False
        self.checked["records"] += 1
        try:
            props = parse_properties(h.props_raw) if h.props_raw else {}
        except (ValueError, UnicodeDecodeError) as e:
            self.problem(rel, pos, f"properties do not decode: {e}", physicalOffset=phys)
            props = {}
        h.properties = props
        if h.physical_offset != phys:
            self.problem(
                rel,
                pos,
                f"PHYSICALOFFSET field says {h.physical_offset}, the record sits at {phys}",
                physicalOffset=phys,
            )
        bad = R.verify_crc(buf, h, pos, False)
        if bad:
            self.problem(rel, pos, bad, physicalOffset=phys)
        if P.CRC32 in props:
            bad = R.verify_crc(buf, h, pos, True)
            if bad:
                self.problem(rel, pos, bad, physicalOffset=phys)
        elif crc_wanted:
            self.problem(rel, pos, "the appended CRC property is missing (enabledAppendPropCRC)", physicalOffset=phys)
        r = _Record()
        r.topic, r.queue_id, r.queue_offset, r.size = h.topic, h.queue_id, h.queue_offset, h.size
        r.sys_flag, r.file, r.pos, r.store_ts = h.sys_flag, rel, pos, h.store_timestamp
        try:
            r.tags_code = tags_code_for(h.topic, props, h.store_timestamp, h.sys_flag, self.delay_levels)
        except ValueError:
            r.tags_code = None
            self.problem(rel, pos, f"DELAY property {props.get(P.DELAY)!r} is not a number", physicalOffset=phys)
        inner = props.get(P.INNER_NUM)
        try:
            r.inner_num = int(inner) if inner is not None else None
        except ValueError:
            r.inner_num = None
            self.problem(rel, pos, f"INNER_NUM {inner!r} is not a number", physicalOffset=phys)
        r.keys, r.uniq = props.get(P.KEYS) or "", props.get(P.UNIQ_KEY)
        self.records.add(phys, r)
        return True

    # ------------------------------------------------------------------ ConsumeQueues
    def _record_for(self, rel: str, offset: int, phys: int, size: int, **ctx) -> _Record | None:
        """The record a unit points at, or None (after reporting why, unless it is expired)."""
        if phys < self.min_offset:
            self.checked["expiredUnits"] += 1
            return None
        r = self.records.get(phys)
        if r is None:
            if self._written_after_walk(phys):
                return None
            where = "past the end of the CommitLog" if phys >= self.max_offset else "where no record starts"
            self.problem(rel, offset, f"unit points at physical offset {phys}, {where}", physicalOffset=phys, **ctx)
            return None
        self.records.cover(phys)
        if size != r.size:
            self.problem(
                rel, offset, f"unit size {size} but the record at {phys} is {r.size} bytes", physicalOffset=phys, **ctx
            )
        return r

    def _written_after_walk(self, phys: int) -> bool:
        """On a live store, a unit or entry for a record past the CommitLog as walked came later: skipped."""
        if self.live and phys >= self.max_offset:
            self.checked["writtenAfterWalk"] += 1
            return True
        return False

    def _check_identity(self, rel, offset, r: _Record, topic, qid, qoff, tags, phys, **ctx) -> None:
        if r.topic != topic or r.queue_id != qid:
            self.problem(
                rel,
                offset,
                f"unit of {topic}/{qid} points at a record of {r.topic}/{r.queue_id}",
                physicalOffset=phys,
                **ctx,
            )
        if r.queue_offset != qoff:
            self.problem(
                rel,
                offset,
                f"unit at queue offset {qoff} points at a record with queue offset {r.queue_offset}",
                physicalOffset=phys,
                **ctx,
            )
        if r.tags_code is not None and tags != r.tags_code:
            self.problem(
                rel, offset, f"tagsCode {tags} but the record's tags give {r.tags_code}", physicalOffset=phys, **ctx
            )

    def _check_ext(self, ext: _ExtQueue | None, rel, off, r: _Record | None, topic, qid, address, phys, **ctx) -> None:
        """A unit whose tagsCode slot holds an ext address: its ext unit against the record."""
        self.checked["extAddressedUnits"] += 1
        if ext is None:
            self.problem(
                rel,
                off,
                f"tagsCode {address} is an ext address (offset {X.undecorate(address)}), but "
                f"there is no consumequeue_ext/{topic}/{qid}",
                physicalOffset=phys,
                **ctx,
            )
            return
        unit = ext.unit(address, rel, off, physicalOffset=phys, **ctx)
        if unit is None or r is None:
            return
        real = X.undecorate(address)
        start = ext.file_of(real)
        ext_rel = self.rel(os.path.join(ext.directory, L.segment_name(start)))
        if r.tags_code is not None and unit.tags_code != r.tags_code:
            self.problem(
                ext_rel,
                real - start,
                f"ext unit tagsCode {unit.tags_code} but the record's tags give {r.tags_code} ({rel} offset {off})",
                extOffset=real,
                physicalOffset=phys,
                **ctx,
            )
        if unit.msg_store_time != r.store_ts:
            self.problem(
                ext_rel,
                real - start,
                f"ext unit msgStoreTime {unit.msg_store_time} but the record was "
                f"stored at {r.store_ts} ({rel} offset {off})",
                extOffset=real,
                physicalOffset=phys,
                **ctx,
            )

    def check_consume_queues(self) -> None:
        for topic, qid, qdir in self.layout.queue_dirs(L.CONSUMEQUEUE):
            self.checked["consumeQueues"] += 1
            ext_dir = self.layout.ext_dir(topic, qid)
            ext = _ExtQueue(self, ext_dir) if L.segment_names(ext_dir) else None
            walk = _QueueWalk(topic, qid, ext)
            names = L.segment_names(qdir)
            for k, n in enumerate(names):
                self._check_cq_file(walk, os.path.join(qdir, n), names[k - 1] if k else None)
            if ext is not None:
                ext.close()

    def _check_cq_file(self, walk: "_QueueWalk", path: str, previous: str | None) -> None:
        """One ConsumeQueue file: its name and size, then its units (the compiled walk takes the units with
        nothing to report; _check_cq_unit judges the one it stopped at)."""
        unit_file = self.config.mapped_file_size_consume_queue
        verify_units = getattr(self.records, "units", None)
        rel = self.rel(path)
        start = int(os.path.basename(path))
        actual = os.path.getsize(path)
        if previous is not None and start != int(previous) + unit_file:
            self.problem(rel, 0, f"file name follows {previous} but is not {unit_file} bytes after it")
        if actual != unit_file:
            self.problem(rel, actual, f"file is {actual} bytes, ConsumeQueue files are {unit_file}")
        if actual % CQ.UNIT_SIZE:
            self.problem(rel, actual - actual % CQ.UNIT_SIZE, "file ends inside a unit")
        arr = CQ.units(_map(path))
        first = start // CQ.UNIT_SIZE
        rows = None
        i = 0
        while i < len(arr):
            if verify_units is not None and walk.ended_at is None:
                took = verify_units(arr[i:], first + i, walk.topic, walk.qid, self.min_offset, X.MAX_ADDR)
                if took:
                    self.checked["consumeQueueUnits"] += took
                    walk.seen_real = True
                    i += took
                    continue
            zeros = _zero_units(arr, i)
            if zeros:  # the unwritten rest of a file: only the first of them is worth a word
                if walk.ended_at is None:
                    walk.ended_at = (rel, i * CQ.UNIT_SIZE, first + i)
                i += zeros
                continue
            if rows is None:
                rows = arr.tolist()
            self._check_cq_unit(walk, rel, i * CQ.UNIT_SIZE, first + i, *rows[i])
            i += 1

    def _check_cq_unit(self, walk: "_QueueWalk", rel: str, off: int, qoff: int, phys: int, size: int, tags: int):
        """One unit that is not all zeros: written where the queue has not ended, pointing at a record that
        belongs to this queue at this offset with these tags (or at an ext unit that says so)."""
        if not CQ.is_valid_unit(phys, size):
            if phys != 0 or size != 0 or tags != 0:
                self.problem(rel, off, f"unit ({phys}, {size}, {tags}) is neither written nor zero", queueOffset=qoff)
            if walk.ended_at is None:
                walk.ended_at = (rel, off, qoff)
            return
        if walk.ended_at is not None:
            ended_rel, ended_off, ended_qoff = walk.ended_at
            self.problem(
                rel,
                off,
                f"unit written after the queue's end at {ended_rel} offset {ended_off} (queue offset {ended_qoff})",
                queueOffset=qoff,
            )
            walk.ended_at = None
        if size == PRE_BLANK_SIZE and phys == 0:
            self.checked["preBlankUnits"] += 1
            if walk.seen_real:
                self.problem(rel, off, "pre-blank unit after written units", queueOffset=qoff)
            return
        walk.seen_real = True
        self.checked["consumeQueueUnits"] += 1
        r = self._record_for(rel, off, phys, size, queueOffset=qoff)
        if X.is_ext_addr(tags):
            if phys < self.min_offset:
                return  # expired: its ext file may be gone with it (truncateByMinAddress)
            self._check_ext(walk.ext, rel, off, r, walk.topic, walk.qid, tags, phys, queueOffset=qoff)
            if r is not None:  # the ext unit's tagsCode was checked instead of the slot's
                self._check_identity(rel, off, r, walk.topic, walk.qid, qoff, r.tags_code, phys, queueOffset=qoff)
        elif r is not None:
            self._check_identity(rel, off, r, walk.topic, walk.qid, qoff, tags, phys, queueOffset=qoff)
            if self.progress:
                self.progress("consumequeue", 0, 0)
        with_cq = {(t, q) for t, q, _ in self.layout.queue_dirs(L.CONSUMEQUEUE)}
        for topic, qid, _ in self.layout.queue_dirs(L.CONSUMEQUEUE_EXT):
            if (topic, qid) not in with_cq:
                self.notes.append(f"consumequeue_ext/{topic}/{qid} has no ConsumeQueue: nothing refers to its units")

    def check_batch_consume_queues(self) -> None:
        unit_file = self.config.mapped_file_size_batch_consume_queue
        for topic, qid, qdir in self.layout.queue_dirs(L.BATCH_CONSUMEQUEUE):
            self.checked["batchConsumeQueues"] += 1
            names = L.segment_names(qdir)
            next_base = None
            for k, n in enumerate(names):
                path = os.path.join(qdir, n)
                rel = self.rel(path)
                actual = os.path.getsize(path)
                if k > 0 and int(n) != int(names[k - 1]) + unit_file:
                    self.problem(rel, 0, f"file name follows {names[k - 1]} but is not {unit_file} bytes after it")
                if actual != unit_file:
                    self.problem(rel, actual, f"file is {actual} bytes, batch ConsumeQueue files are {unit_file}")
                if actual % BCQ.UNIT_SIZE:
                    self.problem(rel, actual - actual % BCQ.UNIT_SIZE, "file ends inside a unit")
                buf = _map(path)
                arr = BCQ.units(buf)
                # the units up to the last one holding any byte: a preallocated file's zero tail (most of it,
                # 300,000 units by default) has nothing to check
                raw = np.frombuffer(buf, dtype=np.uint8, count=len(arr) * BCQ.UNIT_SIZE).reshape(-1, BCQ.UNIT_SIZE)
                hit = np.flatnonzero(raw.any(axis=1))
                last = int(hit[-1]) + 1 if len(hit) else 0
                for i, u in enumerate(arr[:last].tolist()):
                    phys, size, tags, _st, base, batch, _comp, _res = u
                    off = i * BCQ.UNIT_SIZE
                    if not BCQ.is_valid_unit(phys, size, base, batch):
                        if any(u[:6]):
                            self.problem(rel, off, f"unit {tuple(u)} is neither written nor zero")
                        continue
                    self.checked["batchConsumeQueueUnits"] += 1
                    if next_base is not None and base != next_base:
                        self.problem(
                            rel,
                            off,
                            f"msgBaseOffset {base} does not follow the previous unit's end {next_base}",
                            queueOffset=base,
                        )
                    next_base = base + batch
                    r = self._record_for(rel, off, phys, size, queueOffset=base)
                    if r is None:
                        continue
                    self._check_identity(rel, off, r, topic, qid, base, tags, phys, queueOffset=base)
                    want = r.inner_num if r.inner_num is not None else 1
                    if batch != want:
                        self.problem(
                            rel,
                            off,
                            f"batchSize {batch} but the record's INNER_NUM is {want}",
                            physicalOffset=phys,
                            queueOffset=base,
                        )

    def check_dispatch_coverage(self) -> None:
        """Records that get a queue unit and have none: corruption before the dispatched frontier, lag after."""
        frontier, lag, before = self.records.uncovered()
        if self.deleted:
            before = [p for p in before if not self._of_deleted_topic(p)]
            if lag:  # every record past the frontier lacks its unit: count those that should have one
                lag = sum(
                    1
                    for p in self.records.offsets()
                    if p > frontier and gets_queue_unit(self.records.get(p).sys_flag) and not self._of_deleted_topic(p)
                )
        for phys in before:
            r = self.records.get(phys)
            self.problem(
                r.file,
                r.pos,
                f"record of {r.topic}/{r.queue_id} at queue offset {r.queue_offset} has no ConsumeQueue unit",
                physicalOffset=phys,
            )
        self.checked["undispatchedRecords"] = lag
        if lag:
            self.notes.append(
                f"{lag} record(s) after physical offset {frontier} are not in any ConsumeQueue yet: "
                "dispatch is behind the CommitLog (a crash image); the next writable open (RocketMQ's recovery, "
                "then reput) dispatches them, so this is not corruption"
            )

    def check_index_lag(self, ends: list[int]) -> None:
        """Records past the index's frontier (the last index file's endPhyOffset: entries are added in
        CommitLog order) that get index entries (a UNIQ_KEY or KEYS, not a rolled-back transaction) and have
        none: the index is behind the CommitLog (the index is built after the queues, so a kill leaves it
        further behind). Not corruption: the next writable open's recovery and reput index them."""
        if not self.config.message_index_enable:
            return
        frontier = max(ends, default=-1)
        offsets = self.records.offsets()
        records = entries = 0
        for phys in offsets[bisect.bisect_right(offsets, frontier) :]:
            r = self.records.get(phys)
            if r is None or not R.gets_index_entries(r.sys_flag):
                continue
            n = sum(1 for k in r.keys.split(P.KEY_SEPARATOR) if k) + (r.uniq is not None)
            if n:
                records += 1
                entries += n
        self.checked["unindexedRecords"] = records
        self.checked["missingIndexEntries"] = entries
        if records:
            where = f"after physical offset {frontier}" if frontier >= 0 else "(no index entries at all)"
            self.notes.append(
                f"the index is {entries} entr{'y' if entries == 1 else 'ies'} behind: {records} record(s) "
                f"{where} have keys or a UNIQ_KEY and are not in the index yet (not flushed or not dispatched "
                "when the store stopped); the next writable open (recovery, then reput) indexes them, so this "
                "is not corruption"
            )

    def _of_deleted_topic(self, phys: int) -> bool:
        """A record of a topic deleted after it was written (deleted_topics.py): it has no unit on purpose."""
        return phys < self.deleted.below(self.records.get(phys).topic)

    # ------------------------------------------------------------------ index
    def check_index(self) -> None:
        directory = self.layout.index
        if not os.path.isdir(directory):
            self.check_index_lag([])
            return
        slots, num = self.config.max_hash_slot_num, self.config.max_index_num
        want = IX.file_size(slots, num)
        ends = []  # each index file's endPhyOffset: the last record it indexed
        for n in sorted(os.listdir(directory)):
            path = os.path.join(directory, n)
            if not os.path.isfile(path) or n.startswith("."):
                continue
            rel = self.rel(path)
            self.checked["indexFiles"] += 1
            actual = os.path.getsize(path)
            if actual != want:
                self.problem(
                    rel,
                    actual,
                    f"index file is {actual} bytes, maxHashSlotNum={slots} and maxIndexNum={num} make {want}",
                )
            buf = _map(path)
            if len(buf) < IX.HEADER_SIZE:
                self.problem(rel, 0, "index file is shorter than its header")
                continue
            h = IX.decode_header(buf)
            if h.index_count > 1:
                ends.append(h.end_phy_offset)
            if h.index_count > num:
                self.problem(rel, 36, f"indexCount {h.index_count} exceeds maxIndexNum {num}")
            self._check_index_slots(rel, buf, h.index_count, slots, num)
            count = min(h.index_count, num, max((len(buf) - IX.entry_position(slots, 0)) // IX.ENTRY_SIZE, 0))
            self._walk_index_entries(rel, buf, slots, count)
        self.check_index_lag(ends)

    def _check_index_slots(self, rel: str, buf, index_count: int, slots: int, num: int) -> None:
        """Every hash slot names an entry the file holds (or none)."""
        if len(buf) < IX.HEADER_SIZE + slots * IX.SLOT_SIZE:
            return
        table = np.frombuffer(buf, dtype=">i4", count=slots, offset=IX.HEADER_SIZE)
        beyond = table >= max(index_count, 1)
        if self.live:  # entries added since the header was read (up to what the file can hold)
            newer = beyond & (table < num)
            self.checked["writtenAfterWalk"] += int(np.count_nonzero(newer))
            beyond &= ~newer
        for s in np.nonzero((table < 0) | beyond)[0].tolist():
            self.problem(
                rel,
                IX.HEADER_SIZE + s * IX.SLOT_SIZE,
                f"hash slot {s} names entry {int(table[s])}, outside 0..{index_count - 1}",
            )

    def _walk_index_entries(self, rel: str, buf, slots: int, count: int) -> None:
        """Entries 1.. of an index file: the compiled walk takes the entries with nothing to report (the checks of
        _check_index_entry, which then judges the entry it stopped at)."""
        verify_index = getattr(self.records, "index", None)
        e = 1
        while e < count:
            if verify_index is not None:
                took, expired = verify_index(buf, slots, e, count, self.min_offset)
                if took:
                    self.checked["indexEntries"] += took
                    self.checked["expiredIndexEntries"] += expired
                    e += took
                    continue
            self._check_index_entry(rel, buf, slots, e)
            e += 1

    def _check_index_entry(self, rel: str, buf, slots: int, ent: int) -> None:
        """One entry: an earlier prevIndexNo, and a key hash of the record it points at (unless expired)."""
        off = IX.entry_position(slots, ent)
        key_hash, phys, _diff, prev = IX.ENTRY.unpack_from(buf, off)
        self.checked["indexEntries"] += 1
        if prev < 0 or prev >= ent:
            self.problem(rel, off, f"prevIndexNo {prev} is not an earlier entry", entry=ent)
        if phys < self.min_offset:
            self.checked["expiredIndexEntries"] += 1
            return
        r = self.records.get(phys)
        if r is None:
            if not self._written_after_walk(phys):
                where = "past the end of the CommitLog" if phys >= self.max_offset else "where no record starts"
                self.problem(
                    rel, off, f"index entry points at physical offset {phys}, {where}", entry=ent, physicalOffset=phys
                )
            return
        hashes = {index_key_hash(IX.build_key(r.topic, k)) for k in r.keys.split(P.KEY_SEPARATOR) if k}
        if r.uniq is not None:
            hashes.add(index_key_hash(IX.build_key(r.topic, r.uniq)))
        if key_hash not in hashes:
            self.problem(
                rel,
                off,
                f"key hash {key_hash} is not the hash of any key of the record at {phys}",
                entry=ent,
                physicalOffset=phys,
            )

    # ------------------------------------------------------------------ checkpoint
    def check_checkpoint(self) -> None:
        path = os.path.join(self.root, "checkpoint")
        if not os.path.exists(path):
            self.notes.append("no checkpoint file")
            return
        self.checked["checkpoint"] = 1
        with open(path, "rb") as fh:
            data = fh.read()
        try:
            CP.decode(data)
        except CorruptDataError as e:
            self.problem("checkpoint", 0, e.reason)
            return
        if len(data) != CP.FILE_SIZE:
            self.problem("checkpoint", len(data), f"checkpoint is {len(data)} bytes, RocketMQ's is {CP.FILE_SIZE}")

    # ------------------------------------------------------------------ config files
    def check_config_files(self) -> None:
        """The config files an open reads: one that neither it nor its .bak can be read from stops the store
        from opening (RocketMQ's ConfigManager.load / loadBak); a fallback to the .bak is a note."""
        from ..config import deleted_topics as D
        from ..config.files import read_with_backup
        from ..store.consumer import offsets_path, parse_offsets
        from ..filter.manager import FILE as FILTERS_FILE, parse_filters
        from ..config.topics import parse_topic_configs, topics_path

        for path, parse in (
            (topics_path(self.root), parse_topic_configs),
            (offsets_path(self.root), parse_offsets),
            (os.path.join(self.root, FILTERS_FILE), parse_filters),
            (D.path_of(self.root), D.parse),
        ):
            value, problems = read_with_backup(path, parse)
            if value is None and problems:
                self.problem(self.rel(path), 0, "neither the file nor its .bak can be read: " + "; ".join(problems))
            elif problems:
                self.notes.append(f"{problems[0]}: the store reads {self.rel(path)}.bak instead")
            if parse is D.parse and value:
                self.deleted.below_offset = value

    def run(self) -> dict:
        self.live = written_by_another(self.root)
        self.check_config_files()
        self.check_commitlog()
        self.check_consume_queues()
        self.check_batch_consume_queues()
        self.check_dispatch_coverage()
        self.check_index()
        self.check_checkpoint()
        self.records.clear()
        if self.live:
            self.notes.insert(
                0,
                f"the store is open for writing by another process: checked as far as the CommitLog reached when "
                f"it was walked (offset {self.max_offset}); {self.checked['writtenAfterWalk']} queue unit(s), index "
                "entries and hash slots written after that were skipped, and lag is expected",
            )
        return {
            "ok": not self.problems,
            "live": self.live,
            "root": self.root,
            "checked": self.checked,
            "commitLog": {"minOffset": self.min_offset, "maxOffset": self.max_offset},
            "problems": self.problems,
            "notes": self.notes,
        }


def segment_count(root: str) -> int:
    return len(L.segment_names(L.StoreLayout(root).commitlog))


def verify_store(root: str, config: StoreConfig | None = None, progress=None) -> dict:
    """Check the store at `root` (read-only); {ok, checked: counts, problems: [{file, offset, problem}], notes}."""
    return Verifier(root, config or StoreConfig(), progress).run()
