"""The bulk decoder: a run of plain records as DispatchColumns (services.pipeline), what check_record does
one record at a time, with the record fields gathered by numpy (formats.record_scan) and the properties
read once per distinct value. Reput, recovery and the rebuild use it.

Anything unusual (an inner batch, INNER_NUM without the flag, a bad DELAY, a CRC mismatch, a record that
fails a bound check) ends the run; the caller then handles that record the careful way, so results and
error reports are exactly those of the one-at-a-time path.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

from .. import engine
from ..formats import record as R
from ..formats.record_scan import chain, scan
from .dispatch import SCHEDULE_TOPIC, tags_code_for
from .dispatch_rows import unit_rows
from .pipeline import DispatchColumns
from ..engine import parse_properties

RUN = 4096  # records per run: big enough to amortise numpy, small enough to stay in cache
_WANTED = re.compile(rb"(?:^|(?<=\x02))(TAGS|KEYS|UNIQ_KEY|DELAY|INNER_NUM|INNER_BASE)\x01([^\x02]*)")
_props_cache: dict[bytes, tuple | None] = {}
_topic_cache: dict[bytes, str] = {}


def props_info_py(raw: bytes):
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
            info = (
                R.tags_code(tags.decode("utf-8", "replace")) if tags else 0,
                keys.decode("utf-8", "replace") if keys else "",
                uniq.decode("utf-8", "replace") if uniq is not None else None,
                b"DELAY" in found,
            )
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


def decode_run_py(
    buf, pos: int, limit: int, check_crc: bool, delay_levels, dispatch_after: int = -1, arrays: bool = False
) -> tuple[int, int, int, DispatchColumns | None]:
    """The bulk decoder: check the plain records that start at `pos` in `buf` (one segment's bytes) and end
    by `limit`, as check_record would, stopping before the first that needs the careful path. Returns
    (records checked, position after them, position of the last of them, their DispatchColumns): records
    whose PHYSICALOFFSET is not past `dispatch_after` are only checked, not in the columns (normal
    recovery re-dispatches only what the queues lack); the columns are None when no record is in them.
    With `arrays`, the numeric columns (queue_id .. tags_code) are int64 numpy arrays and by_queue is None
    (the rebuild's decode, which groups by queue itself)."""
    positions, sizes = chain(buf, pos, limit, RUN)
    if not positions:
        return 0, pos, pos, None
    c = scan(buf, positions, sizes)
    n = c.count
    if not n:
        return 0, pos, pos, None
    qids, qoffs, phys, flags = c.queue_id.tolist(), c.queue_offset.tolist(), c.phys.tolist(), c.sys_flag.tolist()
    stamps, rsizes = c.store_ts.tolist(), c.size.tolist()
    tpos, tlen, ppos, plen = c.topic_pos.tolist(), c.topic_len.tolist(), c.props_pos.tolist(), c.props_len.tolist()
    if check_crc:
        bpos, blen, crcs = c.body_pos.tolist(), c.body_len.tolist(), c.crc.tolist()
    topics, codes, keys, uniqs, props = [], [], [], [], []
    first = 0  # the first record to dispatch (PHYSICALOFFSET grows: those before are a prefix)
    done = n
    for i in range(n):
        if check_crc and blen[i] > 0 and zlib.crc32(buf[bpos[i] : bpos[i] + blen[i]]) & 0x7FFFFFFF != crcs[i]:
            done = i
            break
        if phys[i] <= dispatch_after:
            if topics:  # after records to dispatch (a PHYSICALOFFSET out of order): the careful path
                done = i
                break
            # the queues already have it; only properties that could make it a bad record need a look
            raw = bytes(buf[ppos[i] : ppos[i] + plen[i]])
            if b"INNER_" in raw or b"DELAY\x01" in raw:
                done = i
                break
            first = i + 1
            continue
        topic = _topic(bytes(buf[tpos[i] : tpos[i] + tlen[i]]))
        raw = bytes(buf[ppos[i] : ppos[i] + plen[i]])
        info = props_info_py(raw)
        if info is None:
            done = i
            break
        code, k, u, has_delay = info
        if has_delay and topic == SCHEDULE_TOPIC:
            try:
                code = tags_code_for(topic, parse_properties(raw), stamps[i], flags[i], delay_levels)
            except ValueError:
                done = i
                break
        topics.append(topic)
        codes.append(code)
        keys.append(k)
        uniqs.append(u)
        props.append(raw)
    if not done:
        return 0, pos, pos, None
    cols = None
    if done > first and arrays:
        numeric = (qids, qoffs, phys, rsizes, stamps, flags)
        numeric = [np.array(v[first:done], dtype=np.int64) for v in numeric] + [np.array(codes, dtype=np.int64)]
        cols = DispatchColumns(topics, *numeric, keys, uniqs, props, None)
    elif done > first:
        qids, flags = qids[first:done], flags[first:done]
        cols = DispatchColumns(
            topics,
            qids,
            qoffs[first:done],
            phys[first:done],
            rsizes[first:done],
            stamps[first:done],
            flags,
            codes,
            keys,
            uniqs,
            props,
            unit_rows(topics, qids, c.sys_flag[first:done]),
        )
    return done, positions[done - 1] + sizes[done - 1], positions[done - 1], cols


def decode_run_native(
    buf, pos: int, limit: int, check_crc: bool, delay_levels, dispatch_after: int = -1, arrays: bool = False
) -> tuple[int, int, int, DispatchColumns | None]:
    """decode_run_py in C (rocketstore._native): the same walk, checks and columns; the walk and the CRCs
    run without the GIL. With `arrays`, C writes the numeric columns straight into int64 buffers."""

    def delay_code(topic: str, raw: bytes, store_ts: int, sys_flag: int) -> int:
        return tags_code_for(topic, parse_properties(raw), store_ts, sys_flag, delay_levels)

    done, after, last, cols = engine.native.decode_run(
        buf, pos, limit, RUN, check_crc, dispatch_after, delay_code, arrays
    )
    if cols is not None and arrays:
        cols = (cols[0], *(np.frombuffer(b, dtype=np.int64) for b in cols[1:8]), *cols[8:])
    return done, after, last, (DispatchColumns(*cols) if cols is not None else None)


# the chosen twins (rocketstore.engine.TWINS); the *_py functions stay the reference
from ..engine import decode_run, props_info  # noqa: F401  (the public name)


def dispatch_run(
    pipeline, buf, pos: int, limit: int, check_crc: bool, delay_levels, dispatch_after: int = -1
) -> tuple[int, int, int]:
    """decode_run, and its columns through the pipeline; (records checked, position after them, position
    of the last of them)."""
    done, after, last, cols = decode_run(buf, pos, limit, check_crc, delay_levels, dispatch_after)
    if cols is not None:
        pipeline.dispatch_columns(cols)
    return done, after, last
