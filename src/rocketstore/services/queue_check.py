"""ConsumeQueue and batch ConsumeQueue units checked against the CommitLog, the source of truth.

RocketMQ trusts a unit once its offset is >= 0 and its size > 0 (a batch unit: also its base offset >= 0 and
batch size > 0). A unit that is wrong all the same (a corrupt size, garbage, a unit pointing at another
queue's record) then misleads everything after it: a size reaching past the log's end gives the queue a max
physical offset past the log, and every later unit of the queue is skipped as "already built"; a unit
pointing at another topic's record serves that record as this queue's; a batch unit's wrong base offset or
batch size sends the binary search over base offsets, and a get's next offset, astray.

A unit is right when it is what dispatch would write from the record it points at: a record inside the
CommitLog, of the unit's size, written at the unit's offset, of this topic and queue, and of the unit's queue
offset (a batch unit: of its msgBaseOffset and batch size, the record's INNER_BASE and INNER_NUM).

So recovery checks each queue's last units (`check_tails`): those that are wrong are cut, and recovery
dispatches the CommitLog again from where the queue's last good unit ends. A batch queue's units must also
follow each other (consecutive queue offsets, records in log order); the units on either side of a break
in the files recovery walks are checked as well, and a wrong one is rebuilt in place. Reads check every
unit they hit (get_message); a bad one is rebuilt in place from the records between its good neighbours
(`repair_units`).

Both kinds of queue go through one mechanism: a unit is found by its slot (its place in the queue's files;
for a plain ConsumeQueue that is its queue offset, log/queue.py) and seen as a `Unit`; `_PlainUnits` and
`_BatchUnits` say what a unit must match in its record and which slot a record of the log belongs to.

The checks work on a `QueueCheck` (the CommitLog and how to read its records), the queues they are given
and, to rebuild units, the ConsumeQueue dispatcher: never on the ctx.
"""

from __future__ import annotations

import logging
from itertools import pairwise
from typing import NamedTuple

from ..errors import CorruptDataError
from ..formats import record as R
from .dispatch import BLANK, OK, check_record, gets_queue_unit

log = logging.getLogger("rocketstore.queuecheck")
PRE_BLANK_SIZE = 0x7FFFFFFF
GOOD, EXPIRED, BAD = "good", "expired", "bad"


class QueueCheck:
    """What checking units against the CommitLog needs: the CommitLog, the delay levels (for the tagsCodes
    of SCHEDULE_TOPIC_XXXX records) and whether a record's appended CRC is checked too."""

    def __init__(self, commitlog, delay_levels, force_verify_prop_crc: bool):
        self.commitlog = commitlog
        self.delay_levels = delay_levels
        self.force_verify_prop_crc = force_verify_prop_crc


class Unit(NamedTuple):
    """What a unit says about its record, for either kind of queue."""

    pos: int
    size: int
    queue_offset: int  # a plain unit's slot; a batch unit's msgBaseOffset
    batch_size: int  # 1 for a plain unit


class _PlainUnits:
    """A plain ConsumeQueue: slot = queue offset, units carry no queue offset of their own."""

    checks_batch = False

    def __init__(self, cq):
        self.cq = cq

    def slot_range(self) -> tuple[int, int]:
        return self.cq.slot_range()

    def unit(self, slot: int) -> Unit | None:
        u = self.cq.unit_at(slot)
        return None if u is None else Unit(u.pos, u.size, u.base_offset, u.batch_size)

    def suspects(self) -> list[int]:
        return self.cq.chain_break_slots()

    def cut_to(self, slot: int) -> None:
        self.cq.cut_to(slot)

    def end(self) -> int:
        """Where the queue's last unit's record ends (0 without units)."""
        return max(self.cq.max_physic_offset, 0)

    @staticmethod
    def from_record(req) -> Unit:
        return Unit(req.commit_log_offset, req.msg_size, req.consume_queue_offset, 1)

    def rewrite(self, ctx, slot: int, req) -> None:
        self.cq.rewrite_unit(slot, req.commit_log_offset, req.msg_size, req.tags_code)

    @staticmethod
    def place(reqs, lo_slot: int, hi_slot: int, lo_unit, hi_unit):
        """Each record names its queue offset, which is its slot."""
        return [(req.consume_queue_offset, req) for req in reqs if lo_slot < req.consume_queue_offset < hi_slot]


class _BatchUnits(_PlainUnits):
    """A batch ConsumeQueue (RIP-26): slots are places in the files; a unit names its queue offsets."""

    checks_batch = True

    def end(self) -> int:
        """Where the queue's last unit's record ends (0 without units; max_physic_offset is its start)."""
        u = self.unit(self.slot_range()[1] - 1)
        return u.pos + u.size if u is not None and u.pos >= 0 and u.size > 0 else 0

    @staticmethod
    def from_record(req) -> Unit:
        return Unit(req.commit_log_offset, req.msg_size, req.msg_base_offset, req.batch_size)

    def rewrite(self, ctx, slot: int, req) -> None:
        self.cq.rewrite_unit(
            slot,
            req.commit_log_offset,
            req.msg_size,
            req.tags_code,
            req.store_timestamp,
            req.msg_base_offset,
            req.batch_size,
            ctx.commitlog.min_offset(),
        )

    def place(self, reqs, lo_slot: int, hi_slot: int, lo_unit: Unit | None, hi_unit: Unit | None):
        """A record names no slot: the k-th record of the queue between two good units belongs to the k-th
        slot between them (units follow the log's order). Aligned on the good unit above when there is one
        (the records of units that expired are gone from the log's start), else on the one below. The
        records' queue offsets must continue one another and the good units around them; else nothing is
        placed (the stretch is not what its neighbours say)."""
        room = hi_slot - lo_slot - 1
        if room <= 0 or not reqs:
            return []
        if hi_unit is not None:
            if len(reqs) > room or (lo_unit is not None and len(reqs) != room):
                return []
            first = hi_slot - len(reqs)
        else:
            reqs = reqs[:room]  # records past the queue's end are not dispatched yet (reput)
            first = lo_slot + 1
        units = [self.from_record(r) for r in reqs]
        follows = all(b.queue_offset == a.queue_offset + a.batch_size for a, b in pairwise(units))
        if lo_unit is not None and first == lo_slot + 1:
            follows = follows and units[0].queue_offset == lo_unit.queue_offset + lo_unit.batch_size
        if hi_unit is not None:
            follows = follows and units[-1].queue_offset + units[-1].batch_size == hi_unit.queue_offset
        return [(first + k, r) for k, r in enumerate(reqs)] if follows else []


def units_of(cq):
    """The unit view of a queue of either kind (log/queue.py's is_batch: what its units cover)."""
    return _BatchUnits(cq) if cq.is_batch else _PlainUnits(cq)


def check_unit(ctx, cq, slot: int, unit: Unit, units=None) -> tuple[str, str | None]:
    """(GOOD | EXPIRED | BAD, problem) for the unit at `slot` of a queue. A unit below the CommitLog's first
    file (its record expired) or a pre-blank cannot be checked and counts as EXPIRED."""
    units = units or units_of(cq)
    cl = ctx.commitlog
    pos, size = unit.pos, unit.size
    if pos < 0 or size <= 0 or unit.queue_offset < 0 or unit.batch_size <= 0:
        return BAD, f"unit ({pos}, {size}) is not a written unit"
    if pos < cl.min_offset() or (pos == 0 and size == PRE_BLANK_SIZE):
        return EXPIRED, None
    mf = cl.files.find(pos)
    if mf is None:
        return BAD, f"unit ({pos}, {size}) points past the CommitLog's end {cl.max_offset()}"
    rel = pos - mf.file_from_offset
    problem = R.unit_target_problem(
        mf.buf, rel, mf.read_position, size, cq.topic, cq.queue_id, None if units.checks_batch else slot, pos
    )
    if problem is None and units.checks_batch:
        problem = _batch_problem(ctx, mf, rel, unit, units)
    if problem and corrupt_record(ctx, pos, size):
        return GOOD, None  # the unit is right, the record it points at is damaged: reads report that
    return (BAD, problem) if problem else (GOOD, None)


def _batch_problem(ctx, mf, rel: int, unit: Unit, units) -> str | None:
    """What a batch unit says that the record it points at (whose header matches) does not: its queue
    offsets (msgBaseOffset, batch size) are those dispatch takes from the record (INNER_BASE, INNER_NUM)."""
    kind, _, req, problem = check_record(
        mf.buf, rel, mf.read_position, check_crc=False, force_verify_prop_crc=False, delay_levels=ctx.delay_levels
    )
    if kind != OK:
        return f"no record of {unit.size} bytes at {unit.pos}: {problem}"
    if not gets_queue_unit(req.sys_flag):
        return f"the record at {unit.pos} gets no queue unit (a prepared or rolled back transaction)"
    want = units.from_record(req)
    if (want.queue_offset, want.batch_size) != (unit.queue_offset, unit.batch_size):
        return (
            f"the record at {unit.pos} covers {want.batch_size} queue offset(s) from {want.queue_offset}, "
            f"the unit says {unit.batch_size} from {unit.queue_offset}"
        )
    return None


def corrupt_record(ctx, pos: int, size: int) -> str | None:
    """What is wrong with a record that starts at `pos` (its header says so: this size, this physical
    offset) but fails its CRC (the body CRC, or the appended one with force_verify_prop_crc); None when
    there is no such record. A unit pointing there is taken to be right and the record to be damaged,
    rather than the unit to point at the wrong record."""
    view = ctx.commitlog.read(pos, size)
    if view is None:
        return None
    try:
        h = R.read_header(view, 0, size)
    except CorruptDataError:
        return None
    if h.size != size or h.physical_offset != pos:
        return None
    return R.verify_crc(view, h, 0, ctx.force_verify_prop_crc)


def check_tails(ctx: QueueCheck, queues) -> int:
    """Check every queue's units from its last one back to the first good (or expired) one, and cut the bad
    ones off; before that, a batch queue's units around breaks in its chain (rebuilt in place from the
    CommitLog, else cut there). Returns the CommitLog offset from which the damaged queues must be
    dispatched again (the lowest end of their last good units), -1 when no queue is damaged. Queues whose
    recovery found a hole (damaged_from) count as damaged too."""
    repair_from = -1
    for cq in queues:
        units = units_of(cq)
        damaged = cq.damaged_from
        cut = _check_suspects(ctx, cq, units)
        first, end = units.slot_range()
        slot = end - 1
        while slot >= first:
            unit = units.unit(slot)
            if unit is None:
                break
            verdict, problem = check_unit(ctx, cq, slot, unit, units)
            if verdict != BAD:
                break
            log.warning(
                "%s %s-%d: unit %d is wrong (%s); cutting it and rebuilding it from the CommitLog",
                _name(cq),
                cq.topic,
                cq.queue_id,
                slot,
                problem,
            )
            slot -= 1
        if slot < end - 1:
            units.cut_to(slot + 1)
            cut = True
        if cut:
            kept = units.end()
            damaged = kept if damaged is None else min(damaged, kept)
        cq.damaged_from = None
        if damaged is not None:
            repair_from = damaged if repair_from < 0 else min(repair_from, damaged)
    return repair_from


def _check_suspects(ctx, cq, units) -> bool:
    """Check the units recovery's validity test cannot judge but their neighbours make suspect; a bad one is
    rebuilt in place from the CommitLog, or, when that fails, the queue is cut there. True when cut."""
    for slot in units.suspects():
        unit = units.unit(slot)
        if unit is None:
            break
        verdict, problem = check_unit(ctx, cq, slot, unit, units)
        if verdict != BAD:
            continue
        log.warning(
            "%s %s-%d: unit %d does not follow its neighbours and is wrong (%s); rebuilding it from the CommitLog",
            _name(cq),
            cq.topic,
            cq.queue_id,
            slot,
            problem,
        )
        if not repair_units(ctx, cq, slot):
            units.cut_to(slot)
            return True
    return False


def redispatch_damaged(ctx: QueueCheck, queues, dispatcher, end: int) -> None:
    """After the CommitLog's recovery: queues whose truncation found a hole (damaged_from) get their units
    again (through the ConsumeQueue dispatcher's put_position) from the records of theirs between where
    they now end and `end`, in log order."""
    damaged = [cq for cq in queues if cq.damaged_from is not None]
    if not damaged:
        return
    start = min(cq.damaged_from for cq in damaged)
    wanted = {(cq.topic, cq.queue_id) for cq in damaged}
    for cq in damaged:
        cq.damaged_from = None
    n = 0
    for req in _records(ctx, max(start, ctx.commitlog.min_offset()), end):
        if (req.topic, req.queue_id) in wanted and gets_queue_unit(req.sys_flag):
            dispatcher.put_position(
                req.topic,
                req.queue_id,
                req.commit_log_offset,
                req.msg_size,
                req.tags_code,
                req.consume_queue_offset,
                req.store_timestamp,
                req.msg_base_offset,
                req.batch_size,
            )
            n += 1
    log.warning("rebuilt %d unit(s) of %s from the CommitLog", n, ", ".join(f"{t}-{q}" for t, q in sorted(wanted)))


def repair_units(ctx, cq, slot: int) -> bool:
    """Rebuild the unit at `slot` of a queue, and any other bad unit of the same stretch, from the CommitLog:
    the records of this queue between the good units around it (queue units follow the log's order) say
    what each of its units really is. The units are rewritten in the mapping (a read-only store maps
    copy-on-write: its file never changes). True when the unit at `slot` now points at its record."""
    units = units_of(cq)
    cl = ctx.commitlog
    first, end = units.slot_range()
    lo_slot, lo, lo_unit = slot - 1, cl.min_offset(), None
    while lo_slot >= first:
        u = units.unit(lo_slot)
        if u is None:
            break
        verdict, _ = check_unit(ctx, cq, lo_slot, u, units)
        if verdict == GOOD:
            lo, lo_unit = u.pos + u.size, u
            break
        if verdict == EXPIRED:
            break
        lo_slot -= 1
    hi_slot, hi, hi_unit = slot + 1, cl.max_offset(), None
    while hi_slot < end:
        u = units.unit(hi_slot)
        if u is None:
            break
        if check_unit(ctx, cq, hi_slot, u, units)[0] == GOOD:
            hi, hi_unit = u.pos, u
            break
        hi_slot += 1
    reqs = [
        req
        for req in _records(ctx, max(lo, cl.min_offset()), hi)
        if req.topic == cq.topic and req.queue_id == cq.queue_id and gets_queue_unit(req.sys_flag)
    ]
    fixed = 0
    found = False
    for s, req in units.place(reqs, lo_slot, hi_slot, lo_unit, hi_unit):
        current = units.unit(s)
        if current is None:
            continue
        if current != units.from_record(req):
            units.rewrite(ctx, s, req)
            fixed += 1
        found |= s == slot
    if fixed:
        log.warning(
            "%s %s-%d: rebuilt %d unit(s) between slots %d and %d from the CommitLog",
            _name(cq),
            cq.topic,
            cq.queue_id,
            fixed,
            lo_slot + 1,
            hi_slot - 1,
        )
    return found


def _name(cq) -> str:
    return cq.label


def _records(ctx, start: int, end: int):
    """The records (as dispatch requests) that start in [start, end), across segments; stops at the first
    record that does not parse."""
    cl = ctx.commitlog
    offset = start
    while offset < end:
        got = cl.data_from(offset, False)
        if got is None:
            return
        base, view = got
        pos = 0
        while base + pos < end:
            kind, size, req, _ = check_record(
                view, pos, len(view), check_crc=False, force_verify_prop_crc=False, delay_levels=ctx.delay_levels
            )
            if kind == OK:
                yield req
                pos += size
            elif kind == BLANK:
                break
            else:
                return
        offset = cl.roll_next_file(base)
