"""Dispatching a run of plain records at once: what check_record + the ConsumeQueue and index dispatchers do
one record at a time, with the record fields gathered by numpy (formats.record_scan), the properties read
once per distinct value, and each queue's units written together.

Anything unusual (an inner batch, INNER_NUM without the flag, a bad DELAY, a CRC mismatch, a record that
fails a bound check, users' own dispatchers) ends the run; the caller then handles that record the
careful way, so results and error reports are exactly those of the one-at-a-time path.
"""
from __future__ import annotations

import re
import zlib

import numpy as np

from ..formats import properties as P
from ..formats import record as R
from ..formats.record_scan import chain, scan
from .dispatch import SCHEDULE_TOPIC, tags_code_for

RUN = 4096               # records per run: big enough to amortise numpy, small enough to stay in cache
_WANTED = re.compile(rb"(?:^|(?<=\x02))(TAGS|KEYS|UNIQ_KEY|DELAY|INNER_NUM|INNER_BASE)\x01([^\x02]*)")
_props_cache: dict[bytes, tuple | None] = {}
_topic_cache: dict[bytes, str] = {}
_UNIT_TRAN = R.TRANSACTION_ROLLBACK_TYPE


def props_info(raw: bytes):
    """(tagsCode, KEYS, UNIQ_KEY, has DELAY) from a properties string, as parse_properties would read
    them (names at item starts, the last non-empty value wins); None when the record needs the careful
    path (INNER_NUM/INNER_BASE)."""
    info = _props_cache.get(raw)
    if info is None and raw not in _props_cache:
        found: dict[bytes, bytes] = {}
        for name, value in _WANTED.findall(raw):
            if value:
                found[name] = value
        if b"INNER_NUM" in found or b"INNER_BASE" in found:
            info = None
        else:
            tags = found.get(b"TAGS")
            keys = found.get(b"KEYS")
            uniq = found.get(b"UNIQ_KEY")
            info = (R.tags_code(tags.decode("utf-8", "replace")) if tags else 0,
                    keys.decode("utf-8", "replace") if keys else "",
                    uniq.decode("utf-8", "replace") if uniq is not None else None,
                    b"DELAY" in found)
        if len(_props_cache) >= 65536:
            _props_cache.clear()
        _props_cache[raw] = info
    return info


def _topic(raw: bytes) -> str:
    t = _topic_cache.get(raw)
    if t is None:
        t = raw.decode("utf-8", "replace")
        if len(_topic_cache) < 65536:
            _topic_cache[raw] = t
    return t


def dispatch_run(store, buf, pos: int, limit: int, check_crc: bool,
                 dispatch_after: int = -1) -> tuple[int, int, int]:
    """Check and dispatch the plain records that start at `pos` in `buf` (one segment's bytes) and end by
    `limit`; records whose PHYSICALOFFSET is not past `dispatch_after` are only checked (normal recovery
    re-dispatches only what the queues lack). Returns (records checked, position after them, position of
    the last of them)."""
    positions, sizes = chain(buf, pos, limit, RUN)
    if not positions:
        return 0, pos, pos
    c = scan(buf, positions, sizes)
    n = c.count
    if not n:
        return 0, pos, pos
    qids, qoffs, phys, flags = c.queue_id.tolist(), c.queue_offset.tolist(), c.phys.tolist(), c.sys_flag.tolist()
    stamps, rsizes = c.store_ts.tolist(), c.size.tolist()
    tpos, tlen, ppos, plen = c.topic_pos.tolist(), c.topic_len.tolist(), c.props_pos.tolist(), c.props_len.tolist()
    if check_crc:
        bpos, blen, crcs = c.body_pos.tolist(), c.body_len.tolist(), c.crc.tolist()
    groups: dict[tuple[str, int], list[int]] = {}
    codes = [0] * n
    index_on = store._index_in_put_path
    to_index: list[tuple] = []
    last_keyless = None
    delay_levels = store.delay_levels
    done = n
    for i in range(n):
        if check_crc and blen[i] > 0 and zlib.crc32(buf[bpos[i]:bpos[i] + blen[i]]) & 0x7FFFFFFF != crcs[i]:
            done = i
            break
        if phys[i] <= dispatch_after:
            # the queues already have it; only properties that could make it a bad record need a look
            raw = bytes(buf[ppos[i]:ppos[i] + plen[i]])
            if b"INNER_" in raw or b"DELAY\x01" in raw:
                done = i
                break
            continue
        topic = _topic(bytes(buf[tpos[i]:tpos[i] + tlen[i]]))
        raw = bytes(buf[ppos[i]:ppos[i] + plen[i]])
        info = props_info(raw)
        if info is None:
            done = i
            break
        code, keys, uniq, has_delay = info
        if has_delay and topic == SCHEDULE_TOPIC:
            try:
                code = tags_code_for(topic, P.parse_properties(raw), stamps[i], flags[i], delay_levels)
            except ValueError:
                done = i
                break
        tran = flags[i] & _UNIT_TRAN
        if tran == R.TRANSACTION_NOT_TYPE or tran == R.TRANSACTION_COMMIT_TYPE:
            codes[i] = code
            members = groups.get((topic, qids[i]))
            if members is None:
                members = groups[(topic, qids[i])] = []
            members.append(i)
        if index_on:
            if keys or uniq is not None:
                to_index.append((topic, phys[i], stamps[i], flags[i], uniq, keys))
                last_keyless = None
            else:
                last_keyless = (topic, phys[i], stamps[i], flags[i], None, "")
    _write_units(store, groups, phys, rsizes, codes, qoffs, stamps)
    if index_on:
        # a record without keys only matters to the index as an arrival (it may open the next file):
        # the last one of the run stands for all of them
        if last_keyless is not None:
            to_index.append(last_keyless)
        store.index.add_many(to_index)
    if not done:
        return 0, pos, pos
    return done, positions[done - 1] + sizes[done - 1], positions[done - 1]


def _write_units(store, groups, phys, sizes, codes, qoffs, stamps) -> None:
    """Each queue's units of the run: in one write when their queue offsets follow each other and the
    queue (ConsumeQueue.put_many decides), else one at a time through the guards."""
    for (topic, qid), members in groups.items():
        cq = store._find_or_create_cq(topic, qid)
        # plain records of a batch-CQ topic: units of one message each; a queue with a ConsumeQueue ext:
        # each unit after its ext unit (tagsCode, store time, no bitmap: a bitmap dispatcher, added first,
        # turns this bulk path off), one at a time through put_message_position_info
        if cq.cq_type == "BatchCQ" or cq.ext is not None:
            for i in members:
                store.put_message_position_info(topic, qid, phys[i], sizes[i], codes[i], qoffs[i], stamps[i])
            continue
        first = qoffs[members[0]]
        if [qoffs[i] for i in members] == list(range(first, first + len(members))):
            ok = cq.put_many(np.array([phys[i] for i in members], dtype=np.int64),
                             np.array([sizes[i] for i in members], dtype=np.int64),
                             np.array([codes[i] for i in members], dtype=np.int64), first)
        else:
            ok = all([cq.put(phys[i], sizes[i], codes[i], qoffs[i]) for i in members])
        store._unit_written(cq, ok, stamps[members[-1]])
    if groups:  # the checkpoint's logics time is the last record's, whichever queue wrote last
        store.checkpoint.logics_msg_timestamp = stamps[max(m[-1] for m in groups.values())]
