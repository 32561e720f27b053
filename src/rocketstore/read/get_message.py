"""getMessage (DefaultMessageStore.getMessage): how many ConsumeQueue units one call looks at, which records
it returns and where the next call begins, exactly as RocketMQ answers; one scan for plain and batch
ConsumeQueues, through the queue protocol (log/queue.py): a unit covers `batch size` queue offsets from its
base offset (a plain unit: its own queue offset, batch size 1)."""

from __future__ import annotations

import logging
from typing import NamedTuple

from ..errors import CorruptDataError
from ..formats.cq_ext import MAX_ADDR as EXT_MAX_ADDR
from ..formats.record import unit_target_problem
from .. import engine
from .get_plain import take_plain
from .lookups import verify_prop_crc
from ..message import GetResult, GetStatus
from ..services.queue_check import BAD, GOOD, Unit, check_unit, corrupt_record, repair_units
from ..engine import decode_record, get_plain, java_string_hash

log = logging.getLogger("rocketstore.get")


class ReadParts(NamedTuple):
    """What a get reads through, handed over by MessageStore (its parts stay its own): the store's
    settings, its CommitLog, the check of units against it, the writer's lock (a repair of units holds it)
    and the machine memory the in-memory cap is a share of."""

    config: object  # StoreConfig
    commitlog: object  # log/commitlog.CommitLog
    queue_check: object  # services/queue_check.QueueCheck
    write_lock: object  # MessageWriter.lock (an RLock)
    total_memory: int


MAX_PULL_MSG_SIZE = 128 * 1024 * 1024
WRONG_UNIT = object()  # a unit that points at no record of its queue


def int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v & 0x80000000 else v


def batch_full(cfg, size: int, batch: int, max_count: int, total: int, count: int, in_memory: bool) -> bool:
    """isTheBatchFull, for a get that already holds `count` messages in `total` bytes: may the next
    record (`size` bytes, `batch` messages) not go in? Data RocketMQ deems not in memory has smaller
    limits."""
    if count + batch > max_count or total + size > MAX_PULL_MSG_SIZE:
        return True
    if in_memory:
        return (
            total + size > cfg.max_transfer_bytes_on_message_in_memory
            or count > cfg.max_transfer_count_on_message_in_memory - 1
        )
    return (
        total + size > cfg.max_transfer_bytes_on_message_in_disk
        or count > cfg.max_transfer_count_on_message_in_disk - 1
    )


def unit_filter(cq, codes, matches):
    """The ConsumeQueue-level filter for units whose tagsCode slot may need more than the tag set: None
    when the plain check in the scans (`int32(tcode) in codes`) is all there is to do (no ext, no `matches`).

    Otherwise a function of the slot's value, as DefaultMessageStore.getMessage calls
    messageFilter.isMatchedByConsumeQueue(cqUnit.getValidTagsCodeAsLong(), cqUnit.getCqExtUnit()): an ext
    address is read through the ext (the real tagsCode and the ext unit, whose filter_bit_map a bloom filter
    may test); a tag set then tests that tagsCode (an ext unit not found: None, which a tag filter lets
    through); `matches(tags_code, ext_unit)` (tags_code None or an int, ext_unit a formats.cq_ext.ExtUnit
    or None) decides last."""
    has_ext = cq.ext is not None
    if not has_ext and matches is None:
        return None

    def accept(tcode: int) -> bool:
        tags, ext_unit = tcode, None
        if tcode <= EXT_MAX_ADDR:
            tags, ext_unit = cq.resolve_tags(tcode) if has_ext else (None, None)
            if codes is not None and tags is not None and int32(tags) not in codes:
                return False
        return matches is None or bool(matches(tags, ext_unit))

    return accept


_SUBSCRIPTIONS: dict[str, frozenset[int] | None] = {}  # a consumer asks with the same string get after get


def parse_subscription(tags) -> frozenset[int] | None:
    """None (all) or the set of int32 tag hash codes, as FilterAPI.buildSubscriptionData builds it."""
    if tags is None:
        return None
    if isinstance(tags, str):
        codes = _SUBSCRIPTIONS.get(tags, ())
        if codes == ():
            codes = _parse_subscription(tags)
            if len(_SUBSCRIPTIONS) >= 1024:
                _SUBSCRIPTIONS.clear()
            _SUBSCRIPTIONS[tags] = codes
        return codes
    return _parse_subscription(tags)


def _parse_subscription(tags) -> frozenset[int] | None:
    if isinstance(tags, str):
        if tags.strip() in ("", "*"):
            return None
        tags = [t.strip() for t in tags.split("||")]
    codes = frozenset(java_string_hash(t) for t in tags if t)
    return codes or None


def get(parts, cq, offset: int, max_count: int, codes, matches=None, accept_message=None) -> GetResult:
    """getMessage on a queue that exists: the answers for an offset outside it, else the scan (with the
    native engine, get_plain's one call first: the scan answers what it leaves)."""
    lo, hi = cq.min_offset, cq.max_offset
    if hi == 0:
        return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, lo, hi)
    if offset < lo:
        return GetResult(GetStatus.OFFSET_TOO_SMALL, lo, lo, hi)
    if offset == hi:
        return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi)
    if offset > hi:
        return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, hi, lo, hi)
    # the native engine answers most gets in one call (get_plain); the pure one always scans
    if engine.native is not None and matches is None and accept_message is None and not cq.is_batch and cq.ext is None:
        cfg = parts.config
        if not cfg.force_verify_prop_crc:
            cl = parts.commitlog
            got = get_plain(
                cq.files.files,
                cq.file_size,
                cq.min_logic_offset,
                cl.files.files,
                cl.file_size,
                offset,
                hi,
                max_count,
                codes,
                EXT_MAX_ADDR,
                (
                    cfg.max_transfer_bytes_on_message_in_memory,
                    cfg.max_transfer_count_on_message_in_memory,
                    cfg.max_transfer_bytes_on_message_in_disk,
                    cfg.max_transfer_count_on_message_in_disk,
                ),
                cfg.max_filter_message_size,
                cfg.travel_cq_file_num_when_get_message,
                int(parts.total_memory * (cfg.access_message_in_memory_max_ratio / 100.0)),
                cq.topic,
                cq.queue_id,
            )
            if got is not None:
                status = GetStatus.FOUND if got[2] else GetStatus.NO_MATCHED_MESSAGE
                return GetResult(status, got[0], lo, hi, got[3], got[1], got[2], 0, offset)
    return scan(parts, cq, offset, max_count, codes, matches, accept_message, (lo, hi))


def scan(
    parts,
    cq,
    offset: int,
    max_count: int,
    codes,
    matches=None,
    accept_message=None,
    bounds: tuple[int, int] | None = None,
) -> GetResult:
    """getMessage over a queue of either kind. `codes`: the tag hash set or None; `matches`: see
    unit_filter; `accept_message(message)`: the record-level filter (isMatchedByCommitLog), asked about each
    decoded message. A batch queue's records are whole inner batches, each counting its batch size; a get
    from inside a batch returns that batch (result.unpacked() gives single messages).

    A wrong unit met on the way is rebuilt from the CommitLog (services.queue_check.repair_units). In a batch
    queue, wrong base offsets mislead the binary search that found the first unit: after a repair with
    nothing found yet, the search runs again over the rebuilt units. `bounds`: the queue's (min, max) offsets
    as the caller just read them (the first attempt's; a search again reads them anew)."""
    for attempt in range(3):
        r = _scan(parts, cq, offset, max_count, codes, matches, accept_message, attempt < 2, bounds)
        bounds = None
        if r is not _SEARCH_AGAIN:
            return r
    raise AssertionError("unreachable: the last attempt never searches again")


_SEARCH_AGAIN = object()


def _base_at(cq, slot: int):
    """The base offset of the unit at `slot` (the next file's first), None past the queue's units."""
    u = cq.unit_at(slot)
    return None if u is None else u.base_offset


def _segment(files, pos: int, size: int):
    """(start, end of what is written, buffer) of the CommitLog segment holding a record of `size` bytes at
    `pos` (CommitLog.getMessage); None when it expired (below the CommitLog's first file), WRONG_UNIT when
    it lies inside the log's range and yet no such record can be there (the unit is wrong)."""
    mf = files.find(pos, pos == 0)
    if mf is not None and 0 <= pos - mf.file_from_offset <= mf.read_position - size:
        return mf.file_from_offset, mf.file_from_offset + mf.read_position, mf.buf
    return None if pos < files.min_offset() else WRONG_UNIT


def _undecodable(parts, cq, e: CorruptDataError, buf, rel: int, limit: int, size: int, queue_offset, pos: int):
    """A record that did not decode: when it is the one the unit points at (its header says so), the record
    is damaged and that is raised; else the unit is wrong (WRONG_UNIT). `queue_offset`: the queue offset
    the unit says (None: a batch unit's, not compared)."""
    if unit_target_problem(buf, rel, limit, size, cq.topic, cq.queue_id, queue_offset, pos) is None:
        raise e.in_file(parts.commitlog.segment_path(pos), rel) from None
    return WRONG_UNIT


def _scan(
    parts,
    cq,
    offset: int,
    max_count: int,
    codes,
    matches,
    accept_message,
    may_search_again: bool,
    bounds: tuple[int, int] | None = None,
):
    """One attempt of scan: its GetResult, or _SEARCH_AGAIN after a repair with nothing found yet."""
    return _Scan(parts, cq, offset, max_count, codes, accept_message, may_search_again, bounds, matches).run()


# what a step of the unit loop tells it to do with the unit in hand
_NEXT = object()  # go on to the next unit (this one is done with: passed over or refused)
_RETRY = object()  # units were rebuilt: read the rows again and look at this unit once more
_KEEP = object()  # the unit stands: go on with it
_EXPIRED = object()  # its record expired with its segment


class _Scan:
    """One attempt of getMessage's loop over a queue's units, file by file (DefaultMessageStore.getMessage):
    what it carries from unit to unit is its state, each step of a unit a method."""

    def __init__(self, parts, cq, offset, max_count, codes, accept_message, may_search_again, bounds, matches):
        cfg = parts.config
        self.parts, self.cq, self.cfg, self.offset = parts, cq, cfg, offset
        self.max_count, self.codes, self.accept_message = max_count, codes, accept_message
        self.may_search_again = may_search_again
        self.lo, self.hi = bounds or (cq.min_offset, cq.max_offset)
        self.result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, self.lo, self.hi)
        self.result.requested_offset = offset
        unit_size = cq.unit_size
        # the filter cap: no unit at or past this queue offset is looked at
        self.cap = offset - (-max(cfg.max_filter_message_size, max_count * unit_size) // unit_size)
        self.max_py = parts.commitlog.max_offset()
        self.memory = int(parts.total_memory * (cfg.access_message_in_memory_max_ratio / 100.0))
        self.next_begin = offset
        self.total = self.count = 0
        self.accept = unit_filter(cq, codes, matches)
        self.seg = (0, -1, None)  # the CommitLog segment in hand: start, end of what is written, buffer
        self.verify = cfg.force_verify_prop_crc
        self.chained = cq.is_batch  # units carry their own queue offsets, which must follow each other
        self.checked: set[int] = set()  # slots checked against the CommitLog by this get
        self.chunk = max(max_count, 32) + 1  # units as Python tuples a chunk at a time (a full get looks at one more)
        self.prev_next = None  # in a batch queue: the offset the unit before this one says comes next
        self.next_file_start = None  # past an expired record: records below this are expired too

    def run(self):
        files_read = 0
        while (
            self.total <= 0 and self.next_begin < self.hi and files_read < self.cfg.travel_cq_file_num_when_get_message
        ):
            files_read += 1
            got = self.cq.locate(self.next_begin)
            if got is None:
                self.result.status = GetStatus.OFFSET_FOUND_NULL
                self.next_begin = self.cq.roll_next_file(self.next_begin)
                break
            got = self._plain_head(*got)
            if got is not None and self._units(*got) is _SEARCH_AGAIN:
                return _SEARCH_AGAIN
        r = self.result
        r.next_begin_offset, r.buffer_total_size, r.message_count = self.next_begin, self.total, self.count
        return r

    def _plain_head(self, slot0: int, units):
        """The compiled fast path (get_plain.take_plain) takes the plain units it can, up to the filter cap:
        (first slot, units) left for the careful loop, None when none is (the next file's turn)."""
        if self.chained or self.accept is not None or self.accept_message is not None or self.verify:
            return slot0, units
        head = units[: max(0, min(self.cap, self.hi) - slot0)]
        k, total, count, skipped = take_plain(
            self.parts, self.cq, head, slot0, self.codes, self.max_count, self.max_py, self.memory, self.result.messages
        )
        self.total, self.count = total, count
        if not k:
            return slot0, units
        r = self.result
        r.status = GetStatus.FOUND if count else GetStatus.NO_MATCHED_MESSAGE if skipped else r.status
        self.next_begin = slot0 + k
        if count >= self.max_count or k == len(units):
            # the loop would look at no unit: none is left, or the next would not fit (count past max_count:
            # batch_full), so its first unit breaks before anything changes
            return None
        return slot0 + k, units[k:]

    def _units(self, slot0: int, units):
        """The careful loop over one file's units from `slot0`: _SEARCH_AGAIN, or None when it stops."""
        cq = self.cq
        n_units = len(units)
        rows = cq.unit_rows(units, slot0, 0, self.chunk)
        self.next_file_start = self.prev_next = None
        ahead = 1 if self.chained else 0  # rows needed past the one in hand (the next unit's base offset)
        j = 0
        while j < n_units:
            if j + ahead >= len(rows) and len(rows) < n_units:
                rows += cq.unit_rows(units, slot0, len(rows), self.chunk)
            pos, size, tcode, base, batch = rows[j]
            act = self._follows(rows, slot0 + j, j, pos, size, base, batch) if self.chained else _KEEP
            if act is _RETRY:
                rows = cq.unit_rows(units, slot0, 0, len(rows))
                continue
            if act is _NEXT:
                j += 1
                continue
            if act is _SEARCH_AGAIN:
                return act
            if self._stops_before(pos, size, base, batch):
                return None
            begin_before, self.next_begin = self.next_begin, base + batch
            j += 1
            act = self._look_at(slot0 + j - 1, pos, size, tcode, base, batch)
            if act is _RETRY:
                rows = cq.unit_rows(units, slot0, 0, len(rows))
                self.next_begin, self.prev_next = begin_before, None
                j -= 1
            elif act is _SEARCH_AGAIN:
                return act
        return None

    def _follows(self, rows, slot: int, j: int, pos: int, size: int, base: int, batch: int):
        """In a batch queue: does this unit follow the one before it, and the next one follow it? One of them
        is wrong otherwise, and a wrong base offset or batch size would misplace every offset after it."""
        following = rows[j + 1][3] if j + 1 < len(rows) else _base_at(self.cq, slot + 1)
        broken = (self.prev_next is not None and base != self.prev_next) or (
            following is not None and following != base + batch
        )
        if broken and slot not in self.checked:
            self.checked.add(slot)
            if check_unit(self.parts.queue_check, self.cq, slot, Unit(pos, size, base, batch))[0] == BAD:
                act = self._repaired(slot, "does not follow its neighbours")
                if act is not None:
                    return act
                self.prev_next = None
                return _NEXT
        self.prev_next = base + batch
        if base + batch <= self.offset:  # wholly before the offset asked for: only a wrong unit leads here
            return _NEXT
        return _KEEP

    def _repaired(self, slot: int, why: str):
        """After a wrong unit: _SEARCH_AGAIN or _RETRY when it was rebuilt, else None (with nothing found yet,
        the answer says the record cannot be read)."""
        if _repair(self.parts, self.cq, slot, why):
            return _SEARCH_AGAIN if self.total == 0 and self.may_search_again else _RETRY
        if self.total == 0:
            self.result.status = GetStatus.MESSAGE_WAS_REMOVING
        return None

    def _stops_before(self, pos: int, size: int, base: int, batch: int) -> bool:
        """Whether the get ends before this unit: past the queue or the filter cap, or the batch is full."""
        if self.next_begin >= self.hi or base >= self.cap:
            return True
        in_memory = (self.max_py - pos) <= self.memory
        return bool(self.total and self.count) and batch_full(
            self.cfg, size, batch, self.max_count, self.total, self.count, in_memory
        )

    def _look_at(self, slot: int, pos: int, size: int, tcode: int, base: int, batch: int):
        """A unit the get goes past: its tags, its record, whether that record is the unit's, the record-level
        filter; the record taken when all pass. _RETRY or _SEARCH_AGAIN after a repair, else None."""
        if self.next_file_start is not None and pos < self.next_file_start:
            return None
        if self._refused_by_tags(tcode):
            return None
        m = self._record(pos, size, base)
        if m is _EXPIRED:
            return None
        # the unit must point at this queue's record for its offset (fields decoded anyway: topic,
        # queueId, queueOffset, size, physicalOffset): a corrupt unit may point at another record
        if m is WRONG_UNIT or not m.is_at(self.cq.topic, self.cq.queue_id, base, size, pos):
            act = self._not_its_record(m, slot, pos, size, base, batch)
            if act is not _KEEP:
                return act
            # else the unit is what dispatch writes from this record (a batch record's INNER_BASE is not
            # its QUEUEOFFSET)
        if self.accept_message is not None and not self.accept_message(m):
            if self.total == 0:
                self.result.status = GetStatus.NO_MATCHED_MESSAGE
            return None
        self.result.messages.append(m)
        self.total += size
        self.count += batch
        self.result.status = GetStatus.FOUND
        self.next_file_start = None
        return None

    def _refused_by_tags(self, tcode: int) -> bool:
        """isMatchedByConsumeQueue. A tagsCode slot holding an ext address (<= EXT_MAX_ADDR) is no tags hash:
        it passes the tag set here, and `accept` reads its ext unit; without the ext RocketMQ lets it through
        (no valid tagsCode)."""
        codes = self.codes
        refused = (codes is not None and int32(tcode) not in codes and tcode > EXT_MAX_ADDR) or (
            self.accept is not None and not self.accept(tcode)
        )
        if refused and self.total == 0:  # nothing found so far says so
            self.result.status = GetStatus.NO_MATCHED_MESSAGE
        return refused

    def _record(self, pos: int, size: int, base: int):
        """The record a unit points at, decoded (CRCs checked when asked); WRONG_UNIT when none can be there,
        _EXPIRED when its segment is gone."""
        start, end, buf = self.seg
        if not start <= pos <= end - size:  # a record outside the segment in hand: find its own
            seg = _segment(self.parts.commitlog.files, pos, size)
            if seg is None:
                if self.total == 0:
                    self.result.status = GetStatus.MESSAGE_WAS_REMOVING
                self.next_file_start = self.parts.commitlog.roll_next_file(pos)
                return _EXPIRED
            if seg is WRONG_UNIT:
                return WRONG_UNIT
            self.seg = start, end, buf = seg
        if size <= 0:
            return WRONG_UNIT
        rel = pos - start
        try:
            m = decode_record(buf, rel, rel + size)
            if self.verify:
                verify_prop_crc(buf, rel)
            return m
        except CorruptDataError as e:
            queue_offset = None if self.chained else base
            return _undecodable(self.parts, self.cq, e, buf, rel, end - start, size, queue_offset, pos)

    def _not_its_record(self, m, slot: int, pos: int, size: int, base: int, batch: int):
        """A unit whose record is not the one it names: a damaged record is raised; a wrong unit is checked
        against the CommitLog once and rebuilt (_RETRY / _SEARCH_AGAIN), or passed over (None); _KEEP when
        the check finds the unit is what dispatch writes."""
        parts = self.parts
        problem = corrupt_record(parts.queue_check, pos, size)
        if problem:  # a damaged record, not a wrong unit: said as any corrupt record is
            raise CorruptDataError(problem, pos % parts.commitlog.file_size, parts.commitlog.segment_path(pos))
        first_look = slot not in self.checked
        self.checked.add(slot)
        if (
            first_look
            and m is not WRONG_UNIT
            and check_unit(parts.queue_check, self.cq, slot, Unit(pos, size, base, batch))[0] == GOOD
        ):
            return _KEEP
        act = self._repaired(slot, "does not point at its record") if first_look else None
        if act is None and self.total == 0:  # RocketMQ's answer for a unit whose record cannot be read
            self.result.status = GetStatus.MESSAGE_WAS_REMOVING
        return act


def _repair(parts, cq, slot: int, why: str) -> bool:
    """Rebuild the unit at `slot` (and its stretch) from the CommitLog under the writer's lock."""
    log.error(
        "%s %s-%d: the unit at slot %d %s; rebuilding it from the CommitLog", cq.label, cq.topic, cq.queue_id, slot, why
    )
    with parts.write_lock:  # repairs write units: never alongside the writer's own
        return repair_units(parts.queue_check, cq, slot)
