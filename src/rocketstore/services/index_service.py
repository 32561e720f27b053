"""The index service: IndexFiles under index/, built from dispatched records, queried by key
(RocketMQ's IndexService and CommitLogDispatcherBuildIndex).

Dispatch only queues a record (a few hundred ns), or a whole run of the bulk decoder's columns; the queue is
turned into entries a run at a time (the keys and their hashes by the compiled index_keys / index_columns,
else by dispatch_rows.index_entries with numpy), when it grows long, when reput or recovery finishes a pass,
and before any query or flush, so a query always sees every record dispatched before it.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import time
from operator import itemgetter

import numpy as np

from .. import engine
from ..engine import parse_properties, props_info
from ..formats.javahash import index_key_hash
from ..log.index_file import IndexFile
from .dispatch_rows import index_entries

log = logging.getLogger("rocketstore.index")
BUILD_AT = 4096  # queued records that trigger a build
LONG_MAX = (1 << 63) - 1


def file_name_at(ms: int) -> str:
    """UtilAll.timeMillisToHumanString: local time as yyyyMMddHHmmssSSS."""
    t = time.localtime(ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{ms % 1000:03d}"


def name_after(name: str) -> str | None:
    """The file name one millisecond after `name` (None for a name not in RocketMQ's form)."""
    try:
        t = datetime.datetime.strptime(name, "%Y%m%d%H%M%S%f") + datetime.timedelta(milliseconds=1)
    except ValueError:
        return None
    return t.strftime("%Y%m%d%H%M%S") + f"{t.microsecond // 1000:03d}"


class IndexService:
    def __init__(
        self,
        root: str,
        hash_slot_num: int,
        index_num: int,
        *,
        writable: bool,
        on_full_flushed=None,
        background_flush: bool = False,
        on_error=None,
    ):
        """`on_full_flushed(end_timestamp)` runs after a full file reached the disk (the checkpoint's
        indexMsgTimestamp moves to that file's end); `on_error(OSError)` when a build cannot write."""
        if hash_slot_num <= 0 or index_num <= 1:
            raise ValueError(f"index sizes must be positive (maxHashSlotNum={hash_slot_num}, maxIndexNum={index_num})")
        self.directory = os.path.join(root, "index")
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.writable = writable
        self.on_full_flushed = on_full_flushed
        self.files: list[IndexFile] = []
        self.lock = threading.RLock()
        # records queued one by one (add), after those in _queued; public: the put lane (lane.c) appends to it as
        # add() does, without the call
        self.pending: list[tuple] = []
        # earlier pieces of the queue, oldest first: ("rows", records as add takes them) or ("cols", a run's
        # columns: topics, phys, stamps, sys_flags, uniqs, keys); _queued_rows counts their records
        self._queued: list[tuple[str, object]] = []
        self._queued_rows = 0
        self._last_name: str | None = None  # names must stay unique and ordered, even in a burst
        # a full file's fsync (420 MB with default sizes) on its own thread, as RocketMQ's FlushIndexFileThread,
        # so the put path that filled it does not wait for the disk
        self.background_flush = background_flush
        self._flushes: list[threading.Thread] = []
        self._unplaced: tuple | None = None  # (hashes, phys, stamps) a build could not place: placed first
        self._roll_pending = False  # a record arrived while the last file was full: open the next
        self.error: OSError | None = None  # the last build failed (no file could be created)
        self.on_error = on_error

    # ---------------------------------------------------------------- load
    def load(self, last_exit_ok: bool, index_msg_timestamp: int) -> None:
        """IndexService.load: every file, oldest first; after a crash, files that may hold entries the
        checkpoint does not vouch for are dropped (reput rebuilds them)."""
        if not os.path.isdir(self.directory):
            return
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            if name.startswith(".") or not os.path.isfile(path):
                continue
            f = IndexFile(path, self.hash_slot_num, self.index_num, writable=self.writable)
            if not last_exit_ok and f.end_timestamp > index_msg_timestamp:
                log.info("dropping index file %s: it ends after the checkpoint's index time", path)
                f.destroy()
                continue
            self.files.append(f)
            self._last_name = name

    def cut_past(self, end: int, store_time_of) -> int:
        """Recovery cut the CommitLog at `end`: the entries of the records it cut go (RocketMQ leaves them,
        and since a record below the last entry's offset is taken as indexed already, the records written
        next at those offsets would never be indexed). Files left with no entry, or beginning past `end`,
        are deleted; the next record opens a new one. Returns how many entries went."""
        removed = 0
        with self.lock:
            while self.files:
                f = self.files[-1]
                n = f.cut_from(end, store_time_of)
                removed += n
                if f.header.index_count > 1 or (n == 0 and f.header.begin_phy_offset < end):
                    break
                log.info("deleting index file %s: its entries all lie past the CommitLog's end %d", f.path, end)
                self.files.pop().destroy()
        return removed

    # ---------------------------------------------------------------- dispatch
    def add(self, topic: str, phy: int, store_timestamp: int, sys_flag: int, uniq_key, keys) -> None:
        """One dispatched record (CommitLogDispatcherBuildIndex.dispatch)."""
        self.pending.append((topic, phy, store_timestamp, sys_flag, uniq_key, keys))
        if len(self.pending) >= BUILD_AT:
            self.build()

    def add_many(self, records: list[tuple]) -> None:
        """Several dispatched records, as add() takes them, in dispatch order."""
        self.pending.extend(records)
        if len(self.pending) >= BUILD_AT:
            self.build()

    def add_columns(self, topics, phys, stamps, sys_flags, uniqs, keys) -> None:
        """A run of dispatched records as columns (lists, row i one record), in dispatch order after
        everything queued before: add() for each row, without a tuple per row."""
        n = len(phys)
        if not n:
            return
        with self.lock:  # a query's build may be taking the queue apart on another thread
            if self.pending:  # what add() queued came first
                self._queued.append(("rows", self.pending))
                self._queued_rows += len(self.pending)
                self.pending = []
            self._queued.append(("cols", (topics, phys, stamps, sys_flags, uniqs, keys)))
            self._queued_rows += n
            if self._queued_rows >= BUILD_AT:
                self.build()

    def build(self) -> None:
        """Index every queued record, in dispatch order (IndexService.buildIndex, a run at a time).

        An index file that cannot be created (a full disk) does not raise here, where the caller is a put,
        a query or a flush: the entries not placed stay queued, `error` holds the OSError, `on_error` is
        told (the store refuses puts, RocketMQ's WRITE_INDEX_FILE_ERROR), and the next build tries again."""
        with self.lock:
            try:
                self._build()
            except OSError as e:
                if self.error is None:
                    log.error("index file cannot be written: %s; its entries wait until it can", e)
                self.error = e
                if self.on_error is not None:
                    self.on_error(e)
                return
            if self.error is not None:
                log.info("index files are written again")
                self.error = None

    def _build(self) -> None:
        if self._unplaced is not None:  # entries of an earlier build that found no file to go to
            hashes, phys, stamps = self._unplaced
            self._unplaced = None
            self._put(hashes, phys, stamps)
        if self._roll_pending:
            self._last_file()
            self._roll_pending = False
        while self._queued or self.pending:
            # a piece leaves the queue once its entries are made (the last file's end tells which records are
            # indexed already); entries that then find no file wait in _unplaced
            end = self._last_file().end_phy_offset
            if self._queued:
                kind, piece = self._queued.pop(0)
                n = len(piece) if kind == "rows" else len(piece[1])
                self._queued_rows -= n
            else:
                kind, (piece, self.pending) = "rows", (self.pending, [])
                n = len(piece)
            hashes, entry_phys, entry_stamps, last_owner = _entries(kind, piece, end)
            # RocketMQ opens the next file as soon as a record arrives while the last one is full
            self._roll_pending = last_owner < n - 1
            if len(hashes):
                self._put(hashes, entry_phys, entry_stamps)
            if self._roll_pending and self.files and self.files[-1].is_write_full():
                self._last_file()
            self._roll_pending = False

    def _put(self, hashes: np.ndarray, phys: np.ndarray, stamps: np.ndarray) -> None:
        done = 0
        try:
            while done < len(hashes):
                f = self._last_file()
                done += f.put_entries(hashes[done:], phys[done:], stamps[done:])
        except OSError:
            self._unplaced = (hashes[done:], phys[done:], stamps[done:])
            raise

    def _last_file(self) -> IndexFile:
        """getAndCreateLastIndexFile: the last file while it has room, else a new one that starts where it
        ended (the full one is flushed and its end time goes to the checkpoint)."""
        if self.files and not self.files[-1].is_write_full():
            return self.files[-1]
        prev = self.files[-1] if self.files else None
        name = file_name_at(time.time_ns() // 1_000_000)
        if self._last_name is not None and name <= self._last_name:
            # several files within a millisecond (or a clock set back): RocketMQ would reuse a name
            name = name_after(self._last_name) or name
        self._last_name = name
        if self.writable:
            os.makedirs(self.directory, exist_ok=True)
        f = IndexFile(
            os.path.join(self.directory, name),
            self.hash_slot_num,
            self.index_num,
            writable=self.writable,
            create=True,
            end_phy_offset=prev.end_phy_offset if prev else 0,
            end_timestamp=prev.end_timestamp if prev else 0,
        )
        self.files.append(f)
        if prev is not None:
            if self.background_flush:
                # one after the other: the checkpoint's indexMsgTimestamp must only ever move forward, and
                # only past files that are all on disk
                before = self._flushes[-1] if self._flushes else None
                t = threading.Thread(
                    target=self._flush_in_turn, args=(prev, before), name="rocketstore-index-flush", daemon=True
                )
                t.start()
                self._flushes = [x for x in self._flushes if x.is_alive()] + [t]
            else:
                self._flush_file(prev)
        return f

    def _flush_in_turn(self, f: IndexFile, before: threading.Thread | None) -> None:
        if before is not None:
            before.join()
        self._flush_file(f)

    def _flush_file(self, f: IndexFile) -> None:
        full_end = f.end_timestamp if f.is_write_full() else 0
        f.flush()
        if full_end > 0 and self.on_full_flushed is not None:
            self.on_full_flushed(full_end)

    # ---------------------------------------------------------------- queries
    def query_offsets(
        self, topic: str, key: str, max_num: int, begin: int = 0, end: int = LONG_MAX, accept=None
    ) -> tuple[list[int], int, int]:
        """IndexService.queryOffset: (physical offsets, newest file's end time, its end offset), newest
        file first, stopping once a file begins before `begin` or max_num offsets are found."""
        if self.pending or self._queued or self._unplaced is not None or self._roll_pending or self.error is not None:
            self.build()
        offsets: list[int] = []
        key_hash = index_key_hash(f"{topic}#{key}")  # formats.index.build_key's key (compiled hash when built)
        with self.lock:
            files = self.files
            if not files:
                return offsets, 0, 0
            h = files[-1].header
            last_ts, last_phy = h.end_timestamp, h.end_phy_offset
            for f in reversed(files):
                h = f.header
                if h.time_matched(begin, end):
                    f.select(offsets, key_hash, max_num, begin, end, accept)
                if h.begin_timestamp < begin or len(offsets) >= max_num:
                    break
        return offsets, last_ts, last_phy

    def query_checked(self, result_type, topic: str, key: str, max_num: int, begin: int, end: int, commitlog):
        """query_offsets with lookups.Lookups.query_py's re-check of each hit against its record, in one
        native call (the native engine only): a `result_type` (message.QueryResult) of the messages in offset
        order, with the newest file's end time and offset when a hit was counted."""
        if self.pending or self._queued or self._unplaced is not None or self._roll_pending or self.error is not None:
            self.build()
        with self.lock:
            return engine.native.query_index(
                result_type, self.files, max_num, begin, end, commitlog.files.files, commitlog.file_size, topic, key
            )

    # ---------------------------------------------------------------- cleanup and lifecycle
    def delete_expired(self, min_phy_offset: int) -> int:
        """IndexService.deleteExpiredFile: files (never the last) that end below the CommitLog's minimum."""
        self.wait_flushes()
        with self.lock:
            if not self.files or self.files[0].end_phy_offset >= min_phy_offset:
                return 0
            gone = 0
            while len(self.files) > 1 and self.files[0].end_phy_offset < min_phy_offset:
                f = self.files.pop(0)
                f.destroy()
                gone += 1
            return gone

    def wait_flushes(self) -> None:
        """Wait for full files still being written out in the background."""
        for t in self._flushes:
            t.join()
        self._flushes = []

    def flush(self) -> None:
        self.build()
        self.wait_flushes()
        with self.lock:
            for f in self.files:
                f.flush()

    def close(self) -> None:
        self.wait_flushes()
        with self.lock:
            for f in self.files:
                f.close()
            self.files = []


def _entries(kind: str, piece, end: int):
    """The index entries of a queued piece, records from `end` on: (key hashes, physical offsets, store times)
    as numpy arrays, and the piece's row of the last entry (-1: none)."""
    native = engine.native
    if native is not None:  # index_entries' loop in C (None: a record it leaves to Python)
        got = native.index_keys(piece, end) if kind == "rows" else native.index_columns(*piece, end)
        if got is not None:
            hashes, phys, stamps, last_owner = got
            return (
                np.frombuffer(hashes, dtype=np.int32),
                np.frombuffer(phys, dtype=np.int64),
                np.frombuffer(stamps, dtype=np.int64),
                last_owner,
            )
    if kind == "rows":
        topics, phys, stamps, flags, uniqs, keys = zip(*piece)
    else:
        topics, phys, stamps, flags, uniqs, keys = piece
    # already indexed (recovery replays from a safe point), or rolled back: nothing to add
    return index_entries(topics, uniqs, keys, flags, phys, stamps, end)


class IndexDispatcher:
    """CommitLogDispatcherBuildIndex: hands each dispatched record to the index service."""

    bulk_capable = True

    def __init__(self, index: IndexService):
        self.index = index

    def dispatch(self, req) -> None:
        self.index.add(req.topic, req.commit_log_offset, req.store_timestamp, req.sys_flag, req.uniq_key, req.keys)

    def dispatch_columns(self, cols) -> None:
        """A run's records, queued as the columns they came in."""
        self.index.add_columns(cols.topic, cols.phys, cols.store_ts, cols.sys_flag, cols.uniq, cols.keys)

    def put(self, topic: str, phys: int, store_ts: int, sys_flag: int, props: bytes, info=None) -> None:
        """The record the put path just wrote (`props`: its properties as stored; `info`: their props_info
        when the put path has it)."""
        if info is None:
            info = props_info(props) if props else _NO_KEYS
        if info is None:  # inner-batch properties: read them in full
            pmap = parse_properties(props)
            info = (0, pmap.get("KEYS") or "", pmap.get("UNIQ_KEY"), False)
        self.index.add(topic, phys, store_ts, sys_flag, info[2], info[1])

    def put_batch(self, topic: str, offsets, store_ts: int, sys_flag: int, props_list: list[bytes], infos=None) -> None:
        """A producer batch the put path just wrote: its records with keys; with none, to the index the
        batch is one arrival (it may open the next file). `infos`: each record's props_info, when the put
        path has them."""
        if _may_hold_keys(props_list):
            if infos is not None and None not in infos:
                n = len(infos)  # as columns: no tuple per record, no Python loop
                self.index.add_columns(
                    [topic] * n,
                    offsets.tolist(),
                    [store_ts] * n,
                    [sys_flag] * n,
                    list(map(_UNIQ_OF, infos)),
                    list(map(_KEYS_OF, infos)),
                )
                return
            for p, props in zip(offsets.tolist(), props_list):
                self.put(topic, p, store_ts, sys_flag, props)
        else:
            self.index.add(topic, int(offsets[-1]), store_ts, sys_flag, None, "")


_NO_KEYS = (0, "", None, False)
_KEYS_OF, _UNIQ_OF = itemgetter(1), itemgetter(2)  # a props_info's KEYS and UNIQ_KEY


def _may_hold_keys(props_list: list[bytes]) -> bool:
    first = props_list[0]
    if props_list.count(first) == len(props_list):
        return b"KEYS\x01" in first or b"UNIQ_KEY\x01" in first
    return any(b"KEYS\x01" in p or b"UNIQ_KEY\x01" in p for p in props_list)
