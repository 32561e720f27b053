"""CommitLog records -> Arrow RecordBatches with the rocketstore formats' columns (bytes in, Arrow out).

Python per-message work is the cost to avoid, so a batch is built a column at a time: the fixed fields are
gathered by numpy (formats.record_scan.scan, the same bound checks reput makes), bodies and properties are
copied out of the mapped segment with one join each, the properties are split into map entries by Arrow's
string kernels, hosts are formatted once per distinct value and msgIds hex-encoded by a numpy table.
Records that scan refuses (an inner batch, a damaged record) are decoded one at a time by the record codec.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import engine
from ..formats import properties as P
from ..formats import record as R
from ..formats.record_scan import _gather, scan
from ..engine import decode_record, parse_properties

SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), False),
        pa.field("queueId", pa.int32(), False),
        pa.field("queueOffset", pa.int64(), False),
        pa.field("physicalOffset", pa.int64(), False),
        pa.field("msgId", pa.string(), False),
        pa.field("tags", pa.string(), True),
        pa.field("keys", pa.string(), True),
        pa.field("body", pa.binary(), False),
        pa.field("properties", pa.map_(pa.string(), pa.string()), False),
        pa.field("bornTimestamp", pa.timestamp("us", tz="UTC"), False),
        pa.field("storeTimestamp", pa.timestamp("us", tz="UTC"), False),
        pa.field("bornHost", pa.string(), False),
        pa.field("storeHost", pa.string(), False),
        pa.field("sysFlag", pa.int32(), False),
        pa.field("reconsumeTimes", pa.int32(), False),
        pa.field("flag", pa.int32(), False),
        pa.field("bodyCRC", pa.int32(), False),
    ]
)
_NAMES = tuple(SCHEMA.names)
DDL = (
    "topic STRING NOT NULL, queueId INT NOT NULL, queueOffset BIGINT NOT NULL, physicalOffset BIGINT NOT NULL, "
    "msgId STRING NOT NULL, tags STRING, keys STRING, body BINARY NOT NULL, "
    "properties MAP<STRING, STRING> NOT NULL, bornTimestamp TIMESTAMP NOT NULL, "
    "storeTimestamp TIMESTAMP NOT NULL, bornHost STRING NOT NULL, storeHost STRING NOT NULL, "
    "sysFlag INT NOT NULL, reconsumeTimes INT NOT NULL, flag INT NOT NULL, bodyCRC INT NOT NULL"
)

_HEX = np.frombuffer(b"".join(f"{i:02X}".encode() for i in range(256)), dtype=np.uint8).reshape(256, 2)
_V6 = R.BORNHOST_V6_FLAG | R.STOREHOSTADDRESS_V6_FLAG


def _joined(view, starts: list[int], lens: list[int]) -> tuple[bytes, np.ndarray]:
    """The byte ranges one after the other, and Arrow offsets (int32) over the result."""
    data = b"".join([view[s : s + n] for s, n in zip(starts, lens)])
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("a record batch over 2 GiB of bodies: lower maxRecordsPerBatch")
    return data, offsets.astype(np.int32)


def _var(kind, data: bytes, offsets: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(kind, len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _hosts(raw: np.ndarray) -> pa.Array:
    """IPv4 "a.b.c.d:port" from each record's 8 host bytes (as one big-endian int64): formatted once per
    distinct host."""
    distinct, inverse = np.unique(raw, return_inverse=True)
    names = [R.host_from_bytes(int(v).to_bytes(8, "big", signed=True)) for v in distinct.tolist()]
    return pc.take(pa.array(names, pa.string()), pa.array(inverse.astype(np.int32)))


def _msg_ids(store_host: np.ndarray, phys: np.ndarray) -> pa.Array:
    """MessageDecoder.createMessageId for IPv4 store hosts: 16 bytes (host, port, offset) as 32 hex digits."""
    n = len(phys)
    raw = np.empty((n, 2), dtype=">i8")
    raw[:, 0], raw[:, 1] = store_host, phys
    digits = _HEX[raw.view(np.uint8).reshape(n, 16)].reshape(n, 32)
    offsets = np.arange(0, 32 * (n + 1), 32, dtype=np.int32)
    return _var(pa.string(), digits.tobytes(), offsets)


def _property_maps(data: bytes, offsets: np.ndarray) -> tuple[pa.Array, pa.Array, pa.Array] | None:
    """(properties map, TAGS, KEYS) from each record's raw properties (name\\x01value\\x02 ...), split by
    Arrow; None when any record's properties are not in that exact form (the caller parses those rows)."""
    n = len(offsets) - 1
    arr = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(arr == 2)  # each pair ends with \x02
    starts = np.concatenate(([0], ends[:-1] + 1)) if len(ends) else ends
    lens = offsets[1:] - offsets[:-1]
    if len(ends) and (arr[offsets[1:][lens > 0] - 1] != 2).any():
        return None  # a record's properties do not end with \x02
    if not len(ends) and len(arr):
        return None
    seps = np.flatnonzero(arr == 1)
    first = np.searchsorted(seps, starts)
    if len(starts) and ((first >= len(seps)).any() or (seps[np.minimum(first, len(seps) - 1)] >= ends).any()):
        return None  # a pair without a name/value separator
    pairs = _var(pa.string(), data, np.concatenate((starts, [len(arr)])).astype(np.int32))
    try:
        pairs.validate(full=True)  # UTF-8
    except pa.ArrowInvalid:
        return None
    split = pc.split_pattern(pairs, "\x01", max_splits=1)
    names = pc.list_element(split, 0)
    values = pc.utf8_rtrim(pc.list_element(split, 1), "\x02")
    row_offsets = np.searchsorted(starts, offsets).astype(np.int32)
    maps = pa.MapArray.from_arrays(pa.array(row_offsets), names, values)
    row_of_pair = np.repeat(np.arange(n, dtype=np.int64), np.diff(row_offsets))
    return maps, _named(names, values, row_of_pair, n, P.TAGS), _named(names, values, row_of_pair, n, P.KEYS)


def _named(names: pa.Array, values: pa.Array, row_of_pair: np.ndarray, n: int, name: str) -> pa.Array:
    """The value of property `name` for each row (null without one; the last wins, as parse_properties)."""
    hit = np.asarray(pc.equal(names, name).to_numpy(zero_copy_only=False), dtype=bool)
    where = np.full(n, -1, dtype=np.int64)
    where[row_of_pair[hit]] = np.flatnonzero(hit)
    return pc.take(values, pa.array(where, mask=where < 0))


def pick(batch: pa.RecordBatch, columns: tuple[str, ...] | None) -> pa.RecordBatch:
    """`batch`'s `columns` (names of SCHEMA, in its order), all when None."""
    return batch if columns is None else batch.select(list(columns))


def from_records_py(buf, positions: list[int], sizes: list[int], columns=None) -> pa.RecordBatch:
    """A RecordBatch of the records at `positions` (with `sizes`) of one mapped segment `buf` (numpy and
    Arrow's kernels: the reference of the compiled from_records); with `columns` (names of SCHEMA, in its
    order), only those: here every column is built and the others dropped, which the compiled side must
    match without building them."""
    return pick(_from_records_py(buf, positions, sizes), columns)


def _from_records_py(buf, positions: list[int], sizes: list[int]) -> pa.RecordBatch:
    positions, sizes = np.asarray(positions, dtype=np.int64).tolist(), np.asarray(sizes, dtype=np.int64).tolist()
    done = 0
    parts = []
    while done < len(positions):
        c = scan(buf, positions[done:], sizes[done:])
        if c.count:
            parts.append(_columns(buf, c))
            done += c.count
        if done < len(positions):
            parts.append(from_messages([decode_record(buf, positions[done], positions[done] + sizes[done])]))
            done += 1
    if len(parts) == 1:
        return parts[0]
    return pa.Table.from_batches(parts, SCHEMA).combine_chunks().to_batches()[0] if parts else empty()


def from_records_native(buf, positions, sizes, columns=None) -> pa.RecordBatch:
    """from_records_py's batch, its buffers filled by the compiled arrow_columns straight from the mapped
    segment in one pass without the GIL (only those of `columns`); records it refuses are decoded one at a
    time as there, and a run whose text is not UTF-8 goes to from_records_py (which decodes it with
    "replace")."""
    pos = np.ascontiguousarray(positions, dtype=np.int64)
    size = np.ascontiguousarray(sizes, dtype=np.int64)
    want = _NAMES if columns is None else tuple(columns)
    bits = sum(1 << _NAMES.index(c) for c in want)
    done = 0
    parts = []
    while done < len(pos):
        got = engine.native.arrow_columns(buf, pos[done:], size[done:], bits)
        if got is None:
            return from_records_py(buf, pos.tolist(), size.tolist(), columns)
        count, pairs, buffers = got
        if count:
            parts.append(_from_buffers(count, pairs, buffers, want))
            done += count
        if done < len(pos):
            one = from_messages([decode_record(buf, int(pos[done]), int(pos[done] + size[done]))])
            parts.append(pick(one, columns))
            done += 1
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return pick(empty(), columns)
    return pa.Table.from_batches(parts, parts[0].schema).combine_chunks().to_batches()[0]


def _from_buffers(n: int, pairs: int, b: tuple, want: tuple[str, ...]) -> pa.RecordBatch:
    (
        topic_off,
        topic,
        qid,
        qoff,
        phys,
        msgid_off,
        msgid,
        tags_valid,
        tags_off,
        tags,
        keys_valid,
        keys_off,
        keys,
        body_off,
        body,
        map_off,
        name_off,
        name,
        value_off,
        value,
        born_ts,
        store_ts,
        born_off,
        born,
        store_off,
        store,
        sys_flag,
        reconsume,
        flag,
        crc,
    ) = [pa.py_buffer(x) for x in b]

    def var(kind, offsets, data, count=n, valid=None):
        return pa.Array.from_buffers(kind, count, [valid, offsets, data])

    def fixed(kind, data):
        return pa.Array.from_buffers(kind, n, [None, data])

    ts = pa.timestamp("us", tz="UTC")
    build = {  # each column made only when asked for (the buffers of the others are empty)
        "topic": lambda: var(pa.string(), topic_off, topic),
        "queueId": lambda: fixed(pa.int32(), qid),
        "queueOffset": lambda: fixed(pa.int64(), qoff),
        "physicalOffset": lambda: fixed(pa.int64(), phys),
        "msgId": lambda: var(pa.string(), msgid_off, msgid),
        "tags": lambda: var(pa.string(), tags_off, tags, valid=tags_valid),
        "keys": lambda: var(pa.string(), keys_off, keys, valid=keys_valid),
        "body": lambda: var(pa.binary(), body_off, body),
        "properties": lambda: pa.MapArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), n + 1, [None, map_off]),
            var(pa.string(), name_off, name, pairs),
            var(pa.string(), value_off, value, pairs),
        ),
        "bornTimestamp": lambda: fixed(ts, born_ts),
        "storeTimestamp": lambda: fixed(ts, store_ts),
        "bornHost": lambda: var(pa.string(), born_off, born),
        "storeHost": lambda: var(pa.string(), store_off, store),
        "sysFlag": lambda: fixed(pa.int32(), sys_flag),
        "reconsumeTimes": lambda: fixed(pa.int32(), reconsume),
        "flag": lambda: fixed(pa.int32(), flag),
        "bodyCRC": lambda: fixed(pa.int32(), crc),
    }
    schema = SCHEMA if want == _NAMES else pa.schema([SCHEMA.field(c) for c in want])
    return pa.RecordBatch.from_arrays([build[c]() for c in want], schema=schema)


# the chosen twin (rocketstore.engine.TWINS); from_records_py stays the reference
from ..engine import from_records  # noqa: F401  (the public name)


def empty() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], SCHEMA)


def _columns(buf, c) -> pa.RecordBatch:
    if (c.sys_flag & _V6).any():
        return from_messages([decode_record(buf, p, p + s) for p, s in zip(c.pos.tolist(), c.size.tolist())])
    data = np.frombuffer(buf, dtype=np.uint8)
    pos = c.pos
    view = memoryview(buf)
    body, body_off = _joined(view, c.body_pos.tolist(), c.body_len.tolist())
    topic, topic_off = _joined(view, c.topic_pos.tolist(), c.topic_len.tolist())
    props, props_off = _joined(view, c.props_pos.tolist(), c.props_len.tolist())
    parsed = _property_maps(props, props_off)
    if parsed is None:  # unusual properties: parse_properties per record, as StoredMessage does
        rows = [parse_properties(props[a:b]) if b > a else {} for a, b in zip(props_off[:-1], props_off[1:])]
        parsed = (
            pa.array([list(r.items()) for r in rows], pa.map_(pa.string(), pa.string())),
            pa.array([r.get(P.TAGS) for r in rows], pa.string()),
            pa.array([r.get(P.KEYS) for r in rows], pa.string()),
        )
    maps, tags, keys = parsed
    topics = _var(pa.string(), topic, topic_off)
    try:
        topics.validate(full=True)
    except pa.ArrowInvalid:  # a topic that is not UTF-8 (a damaged record): decoded one at a time, as get does
        return from_messages([decode_record(buf, p, p + s) for p, s in zip(c.pos.tolist(), c.size.tolist())])
    born_host = _gather(data, pos + 48, 8)
    store_host = _gather(data, pos + 64, 8)
    us = lambda ms: pa.array(ms.astype(np.int64) * 1000, pa.timestamp("us", tz="UTC"))
    columns = [
        topics,
        pa.array(c.queue_id.astype(np.int32)),
        pa.array(c.queue_offset.astype(np.int64)),
        pa.array(c.phys.astype(np.int64)),
        _msg_ids(store_host, c.phys),
        tags,
        keys,
        _var(pa.binary(), body, body_off),
        maps,
        us(_gather(data, pos + 40, 8)),
        us(c.store_ts),
        _hosts(born_host),
        _hosts(store_host),
        pa.array(c.sys_flag.astype(np.int32)),
        pa.array(_gather(data, pos + 72, 4).astype(np.int32)),
        pa.array(_gather(data, pos + 16, 4).astype(np.int32)),
        pa.array(c.crc.astype(np.int32)),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)


def from_messages(messages) -> pa.RecordBatch:
    """The same columns from decoded messages (StoredMessage), one at a time: the careful path."""
    rows = {f.name: [] for f in SCHEMA}
    for m in messages:
        props = m.properties
        for name, value in (
            ("topic", m.topic),
            ("queueId", m.queue_id),
            ("queueOffset", m.queue_offset),
            ("physicalOffset", m.physical_offset),
            ("msgId", m.msg_id),
            ("tags", props.get(P.TAGS)),
            ("keys", props.get(P.KEYS)),
            ("body", bytes(m.body)),
            ("properties", list(props.items())),
            ("bornTimestamp", m.born_timestamp * 1000),
            ("storeTimestamp", m.store_timestamp * 1000),
            ("bornHost", m.born_host),
            ("storeHost", m.store_host),
            ("sysFlag", m.sys_flag),
            ("reconsumeTimes", m.reconsume_times),
            ("flag", m.flag),
            ("bodyCRC", m.body_crc),
        ):
            rows[name].append(value)
    return pa.RecordBatch.from_arrays([pa.array(rows[f.name], f.type) for f in SCHEMA], schema=SCHEMA)
