"""ConsumeQueue units checked against the CommitLog, the source of truth.

RocketMQ trusts a unit once its offset is >= 0 and its size > 0. A unit that is wrong all the same (a corrupt
size, garbage, a unit pointing at another queue's record) then misleads everything after it: a size reaching
past the log's end gives the queue a max physical offset past the log, and every later unit of the queue is
skipped as "already built"; a unit pointing at another topic's record serves that record as this queue's.

So recovery checks each queue's last units (`check_tails`): those that do not point at a record of this
topic, queue and queue offset, of the unit's size, inside the CommitLog, are cut, and recovery dispatches the
CommitLog again from where the queue's last good unit ends. Reads check every unit they hit (get_message);
a bad one is rebuilt in place from the records between its good neighbours (`repair_units`).
"""
from __future__ import annotations

import logging

from ..errors import CorruptDataError
from ..formats import record as R
from .dispatch import OK, BLANK, check_record, gets_queue_unit

log = logging.getLogger("rocketstore.queuecheck")
PRE_BLANK_SIZE = 0x7FFFFFFF
GOOD, EXPIRED, BAD = "good", "expired", "bad"


def check_unit(store, cq, index: int, pos: int, size: int) -> tuple[str, str | None]:
    """(GOOD | EXPIRED | BAD, problem) for unit `index` (`pos`, `size`) of a plain ConsumeQueue. A unit below
    the CommitLog's first file (its record expired) or a pre-blank cannot be checked and counts as EXPIRED."""
    cl = store.commitlog
    if pos < 0 or size <= 0:
        return BAD, f"unit ({pos}, {size}) is not a written unit"
    if pos < cl.min_offset() or (pos == 0 and size == PRE_BLANK_SIZE):
        return EXPIRED, None
    mf = cl.files.find(pos)
    if mf is None:
        return BAD, f"unit ({pos}, {size}) points past the CommitLog's end {cl.max_offset()}"
    rel = pos - mf.file_from_offset
    problem = R.unit_target_problem(mf.buf, rel, mf.read_position, size, cq.topic, cq.queue_id, index, pos)
    if problem and corrupt_record(store, pos, size):
        return GOOD, None   # the unit is right, the record it points at is damaged: reads report that
    return (BAD, problem) if problem else (GOOD, None)


def corrupt_record(store, pos: int, size: int) -> str | None:
    """What is wrong with a record that starts at `pos` (its header says so: this size, this physical
    offset) but fails its CRC (the body CRC, or the appended one with force_verify_prop_crc); None when
    there is no such record. A unit pointing there is taken to be right and the record to be damaged,
    rather than the unit to point at the wrong record."""
    view = store.commitlog.read(pos, size)
    if view is None:
        return None
    try:
        h = R.read_header(view, 0, size)
    except CorruptDataError:
        return None
    if h.size != size or h.physical_offset != pos:
        return None
    return R.verify_crc(view, h, 0, store.config.force_verify_prop_crc)


def check_tails(store) -> int:
    """Check every plain ConsumeQueue's units from its last one back to the first good (or expired) one; cut
    the bad ones off. Returns the CommitLog offset from which the damaged queues must be dispatched again
    (the lowest end of their last good units), -1 when no queue is damaged. Queues whose recovery found a
    hole (ConsumeQueue.damaged_from) count as damaged too."""
    repair_from = -1
    for cq in store.all_consume_queues():
        if cq.cq_type != "SimpleCQ":
            continue
        damaged = cq.damaged_from
        index = cq.max_offset - 1
        while index >= cq.min_offset:
            unit = cq.get_unit(index)
            if unit is None:
                break
            pos, size, _ = unit
            verdict, problem = check_unit(store, cq, index, pos, size)
            if verdict != BAD:
                break
            log.warning("consume queue %s-%d: unit %d is wrong (%s); cutting it and rebuilding it from the "
                        "CommitLog", cq.topic, cq.queue_id, index, problem)
            index -= 1
        if index < cq.max_offset - 1:
            cq.cut_to(index + 1)
            damaged = max(cq.max_physic_offset, 0) if damaged is None else min(damaged, max(cq.max_physic_offset, 0))
        cq.damaged_from = None
        if damaged is not None:
            repair_from = damaged if repair_from < 0 else min(repair_from, damaged)
    return repair_from


def redispatch_damaged(store, end: int) -> None:
    """After the CommitLog's recovery: queues whose truncation found a hole (ConsumeQueue.damaged_from) get
    their units again from the records of theirs between where they now end and `end`, in log order."""
    damaged = [cq for cq in store.all_consume_queues() if getattr(cq, "damaged_from", None) is not None]
    if not damaged:
        return
    start = min(cq.damaged_from for cq in damaged)
    wanted = {(cq.topic, cq.queue_id) for cq in damaged}
    for cq in damaged:
        cq.damaged_from = None
    n = 0
    for req in _records(store, max(start, store.commitlog.min_offset()), end):
        if (req.topic, req.queue_id) in wanted and gets_queue_unit(req.sys_flag):
            store.put_message_position_info(req.topic, req.queue_id, req.commit_log_offset, req.msg_size,
                                            req.tags_code, req.consume_queue_offset, req.store_timestamp,
                                            req.msg_base_offset, req.batch_size)
            n += 1
    log.warning("rebuilt %d unit(s) of %s from the CommitLog", n, ", ".join(f"{t}-{q}" for t, q in sorted(wanted)))


def repair_units(store, cq, index: int) -> bool:
    """Rebuild unit `index` of a plain ConsumeQueue, and any other bad unit of the same stretch, from the
    CommitLog: the records of this queue between the good units around it (queue units follow the log's
    order) say where each of its offsets really is. The unit is rewritten in the mapping (a read-only store
    maps copy-on-write: its file never changes). True when unit `index` now points at its record."""
    cl = store.commitlog
    lo_index, lo = index - 1, cl.min_offset()
    while lo_index >= cq.min_offset:
        u = cq.get_unit(lo_index)
        if u is None:
            break
        verdict, _ = check_unit(store, cq, lo_index, u[0], u[1])
        if verdict == GOOD:
            lo = u[0] + u[1]
            break
        if verdict == EXPIRED:
            break
        lo_index -= 1
    hi_index, hi = index + 1, cl.max_offset()
    while hi_index < cq.max_offset:
        u = cq.get_unit(hi_index)
        if u is None:
            break
        if check_unit(store, cq, hi_index, u[0], u[1])[0] == GOOD:
            hi = u[0]
            break
        hi_index += 1
    fixed = 0
    found_index = False
    for req in _records(store, max(lo, cl.min_offset()), hi):
        if req.topic != cq.topic or req.queue_id != cq.queue_id or not gets_queue_unit(req.sys_flag):
            continue
        q = req.consume_queue_offset
        if not lo_index < q < hi_index:
            continue
        current = cq.get_unit(q)
        if current is None:
            continue
        if current[:2] != (req.commit_log_offset, req.msg_size):
            cq.rewrite_unit(q, req.commit_log_offset, req.msg_size, req.tags_code)
            fixed += 1
        found_index |= q == index
    if fixed:
        log.warning("consume queue %s-%d: rebuilt %d unit(s) between offsets %d and %d from the CommitLog",
                    cq.topic, cq.queue_id, fixed, lo_index + 1, hi_index - 1)
    return found_index


def _records(store, start: int, end: int):
    """The records (as dispatch requests) that start in [start, end), across segments; stops at the first
    record that does not parse."""
    cl = store.commitlog
    offset = start
    while offset < end:
        got = cl.data_from(offset, False)
        if got is None:
            return
        base, view = got
        pos = 0
        while base + pos < end:
            kind, size, req, _ = check_record(view, pos, len(view), check_crc=False, force_verify_prop_crc=False,
                                              delay_levels=store.delay_levels)
            if kind == OK:
                yield req
                pos += size
            elif kind == BLANK:
                break
            else:
                return
        offset = cl.roll_next_file(base)

