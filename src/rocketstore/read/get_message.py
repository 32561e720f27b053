"""getMessage (DefaultMessageStore.getMessage): how many ConsumeQueue units one call looks at, which records
it returns and where the next call begins, exactly as RocketMQ answers; one scan for plain and batch
ConsumeQueues, through the queue protocol (log/queue.py): a unit covers `batch size` queue offsets from its
base offset (a plain unit: its own queue offset, batch size 1)."""

from __future__ import annotations

import logging

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


def get(store, cq, offset: int, max_count: int, codes, matches=None, accept_message=None) -> GetResult:
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
        cfg = store.config
        if not cfg.force_verify_prop_crc:
            cl = store.commitlog
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
                int(store.total_memory * (cfg.access_message_in_memory_max_ratio / 100.0)),
                cq.topic,
                cq.queue_id,
            )
            if got is not None:
                status = GetStatus.FOUND if got[2] else GetStatus.NO_MATCHED_MESSAGE
                return GetResult(status, got[0], lo, hi, got[3], got[1], got[2], 0, offset)
    return scan(store, cq, offset, max_count, codes, matches, accept_message, (lo, hi))


def scan(
    store,
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
        r = _scan(store, cq, offset, max_count, codes, matches, accept_message, attempt < 2, bounds)
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


def _undecodable(store, cq, e: CorruptDataError, buf, rel: int, limit: int, size: int, queue_offset, pos: int):
    """A record that did not decode: when it is the one the unit points at (its header says so), the record
    is damaged and that is raised; else the unit is wrong (WRONG_UNIT). `queue_offset`: the queue offset
    the unit says (None: a batch unit's, not compared)."""
    if unit_target_problem(buf, rel, limit, size, cq.topic, cq.queue_id, queue_offset, pos) is None:
        raise e.in_file(store.commitlog.segment_path(pos), rel) from None
    return WRONG_UNIT


def _scan(  # noqa: C901 - past the ceiling, to be split
    store,
    cq,
    offset: int,
    max_count: int,
    codes,
    matches,
    accept_message,
    may_search_again: bool,
    bounds: tuple[int, int] | None = None,
):
    cfg = store.config
    lo, hi = bounds or (cq.min_offset, cq.max_offset)
    result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, lo, hi)
    result.requested_offset = offset
    unit_size = cq.unit_size
    # the filter cap: no unit at or past this queue offset is looked at
    cap = offset - (-max(cfg.max_filter_message_size, max_count * unit_size) // unit_size)
    max_py = store.commitlog.max_offset()
    memory = int(store.total_memory * (cfg.access_message_in_memory_max_ratio / 100.0))
    next_begin = offset
    files_read = 0
    total = count = 0
    msgs = result.messages
    accept = unit_filter(cq, codes, matches)
    cl_files = store.commitlog.files
    seg_start, seg_end, seg_buf = 0, -1, None  # the CommitLog segment in hand
    verify = cfg.force_verify_prop_crc
    topic, qid = cq.topic, cq.queue_id
    chained = cq.is_batch  # units carry their own queue offsets, which must follow each other
    ahead = 1 if chained else 0  # rows needed past the one in hand (the next unit's base offset)
    checked: set[int] = set()  # slots checked against the CommitLog by this get
    chunk = max(max_count, 32) + 1  # units as Python tuples a chunk at a time (a full get looks at one more)
    while total <= 0 and next_begin < hi and files_read < cfg.travel_cq_file_num_when_get_message:
        files_read += 1
        got = cq.locate(next_begin)
        if got is None:
            result.status = GetStatus.OFFSET_FOUND_NULL
            next_begin = cq.roll_next_file(next_begin)
            break
        slot0, units = got
        if not chained and accept is None and accept_message is None and not verify:
            # the compiled fast path (get_plain.take_plain) takes the plain units it can, up to the filter
            # cap; the loop below goes on from the first unit that needs a closer look
            head = units[: max(0, min(cap, hi) - slot0)]
            k, total, count, skipped = take_plain(store, cq, head, slot0, codes, max_count, max_py, memory, msgs)
            if k:
                result.status = GetStatus.FOUND if count else GetStatus.NO_MATCHED_MESSAGE if skipped else result.status
                if count >= max_count or k == len(units):
                    # the loop below would look at no unit: none is left, or the next would not fit (count
                    # past max_count: batch_full), so its first unit breaks before anything changes
                    next_begin = slot0 + k
                    continue
                units, slot0, next_begin = units[k:], slot0 + k, slot0 + k
        n_units = len(units)
        rows = cq.unit_rows(units, slot0, 0, chunk)
        n_rows = len(rows)
        next_file_start = None
        prev_next = None
        j = 0
        while j < n_units:
            if j + ahead >= n_rows and n_rows < n_units:
                rows += cq.unit_rows(units, slot0, n_rows, chunk)
                n_rows = len(rows)
            pos, size, tcode, base, batch = rows[j]
            if chained:
                slot = slot0 + j
                following = rows[j + 1][3] if j + 1 < n_rows else _base_at(cq, slot + 1)
                if (
                    (prev_next is not None and base != prev_next)
                    or (following is not None and following != base + batch)
                ) and slot not in checked:
                    # this unit does not follow the one before it, or the next does not follow it: one of
                    # them is wrong, and a wrong base offset or batch size would misplace every offset after it
                    checked.add(slot)
                    if check_unit(store.queue_check, cq, slot, Unit(pos, size, base, batch))[0] == BAD:
                        if _repair(store, cq, slot, "does not follow its neighbours"):
                            if total == 0 and may_search_again:
                                return _SEARCH_AGAIN
                            rows = cq.unit_rows(units, slot0, 0, n_rows)
                            continue
                        if total == 0:
                            result.status = GetStatus.MESSAGE_WAS_REMOVING
                        prev_next = None
                        j += 1
                        continue
                prev_next = base + batch
                if base + batch <= offset:  # wholly before the offset asked for: only a wrong unit leads here
                    j += 1
                    continue
            if next_begin >= hi or base >= cap:
                break
            if total and count and batch_full(cfg, size, batch, max_count, total, count, (max_py - pos) <= memory):
                break
            begin_before = next_begin
            next_begin = base + batch
            j += 1
            if next_file_start is not None and pos < next_file_start:
                continue
            # a tagsCode slot holding an ext address (<= EXT_MAX_ADDR) is no tags hash: it passes here, and
            # `accept` reads its ext unit; without the ext RocketMQ lets it through (no valid tagsCode)
            if (codes is not None and int32(tcode) not in codes and tcode > EXT_MAX_ADDR) or (
                accept is not None and not accept(tcode)
            ):
                if total == 0:  # isMatchedByConsumeQueue refused: nothing found so far says so
                    result.status = GetStatus.NO_MATCHED_MESSAGE
                continue
            m = None
            if not seg_start <= pos <= seg_end - size:  # a record outside the segment in hand: find its own
                seg = _segment(cl_files, pos, size)
                if seg is None:  # its record expired
                    if total == 0:
                        result.status = GetStatus.MESSAGE_WAS_REMOVING
                    next_file_start = store.commitlog.roll_next_file(pos)
                    continue
                if seg is WRONG_UNIT:
                    m = WRONG_UNIT
                else:
                    seg_start, seg_end, seg_buf = seg
            if m is None:
                if size <= 0:
                    m = WRONG_UNIT
                else:
                    rel = pos - seg_start
                    try:
                        m = decode_record(seg_buf, rel, rel + size)
                        if verify:
                            verify_prop_crc(seg_buf, rel)
                    except CorruptDataError as e:
                        m = _undecodable(
                            store, cq, e, seg_buf, rel, seg_end - seg_start, size, None if chained else base, pos
                        )
            # the unit must point at this queue's record for its offset (fields decoded anyway: topic,
            # queueId, queueOffset, size, physicalOffset): a corrupt unit may point at another record
            if m is WRONG_UNIT or not m.is_at(topic, qid, base, size, pos):
                problem = corrupt_record(store.queue_check, pos, size)
                if problem:  # a damaged record, not a wrong unit: said as any corrupt record is
                    raise CorruptDataError(problem, pos % store.commitlog.file_size, store.commitlog.segment_path(pos))
                slot = slot0 + j - 1
                first_look = slot not in checked
                checked.add(slot)
                if (
                    not first_look
                    or m is WRONG_UNIT
                    or check_unit(store.queue_check, cq, slot, Unit(pos, size, base, batch))[0] != GOOD
                ):
                    if first_look and _repair(store, cq, slot, "does not point at its record"):
                        if total == 0 and may_search_again:
                            return _SEARCH_AGAIN
                        rows = cq.unit_rows(units, slot0, 0, n_rows)
                        next_begin, prev_next = begin_before, None
                        j -= 1
                        continue
                    if total == 0:  # RocketMQ's answer for a unit whose record cannot be read
                        result.status = GetStatus.MESSAGE_WAS_REMOVING
                    continue
                # else the unit is what dispatch writes from this record (a batch record's INNER_BASE is not
                # its QUEUEOFFSET)
            if accept_message is not None and not accept_message(m):
                if total == 0:
                    result.status = GetStatus.NO_MATCHED_MESSAGE
                continue
            msgs.append(m)
            total += size
            count += batch
            result.status = GetStatus.FOUND
            next_file_start = None
    result.next_begin_offset = next_begin
    result.buffer_total_size = total
    result.message_count = count
    return result


def _repair(store, cq, slot: int, why: str) -> bool:
    """Rebuild the unit at `slot` (and its stretch) from the CommitLog under the writer's lock."""
    log.error(
        "%s %s-%d: the unit at slot %d %s; rebuilding it from the CommitLog", cq.label, cq.topic, cq.queue_id, slot, why
    )
    with store.writer.lock:  # repairs write units: never alongside the writer's own
        return repair_units(store.queue_check, cq, slot)
