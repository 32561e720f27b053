"""`rocketstore dump`: decode one store file into rows, like kafka-dump-log (read-only, no store needed).

Each reader yields plain dicts, so the command can print them as a table or as JSON. A file's kind is
known from where it lives (commitlog/, consumequeue/T/Q/, consumequeue_ext/T/Q/, batchconsumequeue/T/Q/, index/,
checkpoint).

With the ConsumeQueue extension (enableConsumeQueueExt) a ConsumeQueue unit's tagsCode slot may hold an ext
address: such a slot is shown as "ext@<ext offset>" (not as a tags hash) and, when the queue's
consumequeue_ext files sit beside it, with the ext unit's tagsCode and store time. A consumequeue_ext file
dumps as its ext units (offset, size, tagsCode, storeTime, bitmap) until the end marker or unwritten space.
"""

from __future__ import annotations

import mmap
import os

from ..files import layout as L
from ..errors import CorruptDataError
from ..formats import batch_cq as BCQ
from ..formats import checkpoint as CP
from ..formats import cq as CQ
from ..formats import cq_ext as X
from ..formats import index as IX
from ..formats import record as R
from . import output as O
from ..engine import decode_record

KINDS = ("commitlog", "consumequeue", "consumequeue_ext", "batchconsumequeue", "index", "checkpoint")
# the columns a table shows by default (fits 80 columns); --wide and --json give every field
TABLE_COLUMNS = {
    "commitlog": ["offset", "size", "kind", "topic", "queueId", "queueOffset", "storeTimestamp", "tags"],
    "index": ["entry", "keyHash", "slot", "phyOffset", "storeTimestamp", "prevEntry"],
}
COMMITLOG_FIELDS = [
    "offset",
    "size",
    "kind",
    "topic",
    "queueId",
    "queueOffset",
    "sysFlag",
    "storeTimestamp",
    "bornTimestamp",
    "bodyLength",
    "bodyCRC",
    "tags",
    "keys",
    "uniqKey",
    "msgId",
    "physicalOffsetField",
    "problem",
]
UNITS_PER_CHUNK = 1 << 16  # queue units decoded this many at a time: a file of any size in bounded memory


def kind_of(path: str) -> str | None:
    parts = os.path.abspath(path).split(os.sep)
    if parts[-1] == "checkpoint":
        return "checkpoint"
    for kind in ("batchconsumequeue", "consumequeue", "consumequeue_ext"):
        if len(parts) >= 4 and parts[-4] == kind:
            return kind
    if len(parts) >= 2 and parts[-2] in ("commitlog", "index"):
        return parts[-2]
    return None


def _map(path: str):
    size = os.path.getsize(path)
    if size == 0:
        return b""
    with open(path, "rb") as fh:
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def _start_offset(path: str) -> int:
    name = os.path.basename(path)
    return int(name) if L.is_segment_name(name) else 0


def json_body(row: dict) -> dict:
    """A row for --json: a body (bytes) as text or base64, with bodyEncoding."""
    if "body" in row:
        row = {**row, **O.body_json(row["body"])}
    return row


def text_body(row: dict) -> dict:
    """A row for a table: a body (bytes) as text when it is, else hex."""
    if "body" in row:
        row = {**row, "body": O.body_text(row["body"])}
    return row


def _units(units_of, buf):
    """A queue file's units as tuples, a chunk at a time (tolist() of a whole 1 GiB file would hold
    hundreds of millions of Python ints)."""
    arr = units_of(buf)
    for start in range(0, len(arr), UNITS_PER_CHUNK):
        yield from arr[start : start + UNITS_PER_CHUNK].tolist()


def commitlog_rows(path: str, bodies: bool = False):
    """Every record from the start of a segment, until the BLANK filler, zeros or a bad record. `offset` is
    where the record sits; its PHYSICALOFFSET field is shown only when it says otherwise."""
    buf = _map(path)
    base = _start_offset(path)
    pos = 0
    while pos + 8 <= len(buf):
        size = R.I32.unpack_from(buf, pos)[0]
        if size == 0:
            break
        if R.is_blank(buf, pos):
            yield {"offset": base + pos, "size": size, "kind": "BLANK"}
            break
        try:
            m = decode_record(buf, pos)
        except CorruptDataError as e:
            yield {"offset": base + pos, "size": size, "kind": "BAD", "problem": e.reason}
            break
        row = {
            "offset": base + pos,
            "size": m.size,
            "kind": f"V{m.version}",
            "topic": m.topic,
            "queueId": m.queue_id,
            "queueOffset": m.queue_offset,
            "sysFlag": m.sys_flag,
            "storeTimestamp": m.store_timestamp,
            "bornTimestamp": m.born_timestamp,
            "bodyLength": len(m.body),
            "bodyCRC": m.body_crc,
            "tags": m.tags,
            "keys": " ".join(m.keys),
            "uniqKey": m.unique_key,
            "msgId": m.msg_id,
        }
        if m.physical_offset != base + pos:
            row["physicalOffsetField"] = m.physical_offset
        if bodies:
            row["body"] = m.body
        yield row
        pos += m.size


def consumequeue_rows(path: str):
    """Every written unit (a unit with size 0 ends the written part), with its queue offset. A tagsCode slot
    holding an ext address shows as "ext@<ext offset>", with the ext unit's tagsCode and store time when the
    queue's consumequeue_ext files are beside the consumequeue directory."""
    buf = _map(path)
    first = _start_offset(path) // CQ.UNIT_SIZE
    ext = None
    for i, (pos, size, tags) in enumerate(_units(CQ.units, buf)):
        if not CQ.is_valid_unit(pos, size):
            break
        row = {
            "queueOffset": first + i,
            "physicalOffset": pos,
            "size": size,
            "tagsCode": tags,
            "preBlank": size == 0x7FFFFFFF and pos == 0,
        }
        if X.is_ext_addr(tags):
            if ext is None:
                ext = _ExtFiles(_ext_dir_of(path))
            row["tagsCode"] = f"ext@{X.undecorate(tags)}"
            unit = ext.unit(tags)
            if isinstance(unit, str):
                row["ext"] = unit
            else:
                row["extTagsCode"], row["extStoreTime"] = unit.tags_code, unit.msg_store_time
        yield row


def _ext_dir_of(cq_path: str) -> str | None:
    """consumequeue_ext/T/Q beside consumequeue/T/Q/<file>, or None when the file is not in such a place."""
    parts = os.path.abspath(cq_path).split(os.sep)
    if len(parts) < 4 or parts[-4] != "consumequeue":
        return None
    return os.sep.join(parts[:-4] + ["consumequeue_ext", parts[-3], parts[-2]])


class _ExtFiles:
    """A queue's consumequeue_ext files, mapped on first use, to look ext addresses up."""

    def __init__(self, directory: str | None):
        self.directory = directory
        names = L.segment_names(directory) if directory else []
        self.starts = [int(n) for n in names]
        self.bufs: dict[int, object] = {}

    def unit(self, address: int):
        """The ext unit at an address, or a short text saying why there is none."""
        real = X.undecorate(address)
        if not self.starts:
            return "no consumequeue_ext files beside this queue"
        start = max((s for s in self.starts if s <= real), default=None)
        if start is None:
            return f"no ext file holds offset {real}"
        buf = self.bufs.get(start)
        if buf is None:
            buf = self.bufs[start] = _map(os.path.join(self.directory, f"{start:020d}"))
        try:
            unit = X.decode_unit(buf, real - start)
        except CorruptDataError as e:
            return f"bad ext unit: {e.reason}"
        return unit if unit is not None else f"no ext unit at offset {real}"


def consumequeue_ext_rows(path: str):
    """Every ext unit of a consumequeue_ext file from its start (offset = the ext offset an address names),
    until unwritten space (size 0), the end marker (shown as an END row) or a unit that does not decode."""
    buf = _map(path)
    base = _start_offset(path)
    pos = 0
    while pos + 2 <= len(buf):
        size = X.read_size(buf, pos)
        if size == 0:
            break
        if buf[pos : pos + 2] == X.END_MARKER:
            yield {"offset": base + pos, "size": size, "kind": "END"}
            break
        try:
            if size < X.MIN_UNIT_SIZE:
                raise CorruptDataError(f"unit size {size} is below the minimum {X.MIN_UNIT_SIZE}", pos)
            u = X.decode_unit(buf, pos)
            if u.size != X.unit_size(u.filter_bit_map) or pos + u.size > len(buf):
                raise CorruptDataError(
                    f"unit size {u.size} does not match its bitMapSize {u.bit_map_size} or reaches past the file", pos
                )
        except CorruptDataError as e:
            yield {"offset": base + pos, "size": size, "kind": "BAD", "problem": e.reason}
            break
        yield {
            "offset": base + pos,
            "size": u.size,
            "kind": "UNIT",
            "address": X.decorate(base + pos),
            "tagsCode": u.tags_code,
            "storeTime": u.msg_store_time,
            "bitMapSize": u.bit_map_size,
            "bitmap": u.filter_bit_map.hex() if u.filter_bit_map is not None else "",
        }
        pos += u.size


def batchconsumequeue_rows(path: str):
    buf = _map(path)
    for i, u in enumerate(_units(BCQ.units, buf)):
        pos, size, tags, store_time, base, batch, compacted, _reserved = u
        if not BCQ.is_valid_unit(pos, size, base, batch):
            break
        yield {
            "unit": i,
            "physicalOffset": pos,
            "size": size,
            "tagsCode": tags,
            "storeTime": store_time,
            "msgBaseOffset": base,
            "batchSize": batch,
            "compactedOffset": compacted,
        }


def index_header(path: str, hash_slot_num: int) -> dict:
    h = IX.decode_header(_map(path))
    return {
        "beginTimestamp": h.begin_timestamp,
        "endTimestamp": h.end_timestamp,
        "beginPhyOffset": h.begin_phy_offset,
        "endPhyOffset": h.end_phy_offset,
        "hashSlotCount": h.hash_slot_count,
        "indexCount": h.index_count,
        "hashSlotNum": hash_slot_num,
    }


def index_rows(path: str, hash_slot_num: int):
    """The header's entries 1 .. indexCount-1 (entry 0 is never used)."""
    buf = _map(path)
    h = IX.decode_header(buf)
    base = IX.HEADER_SIZE + hash_slot_num * IX.SLOT_SIZE
    count = min(h.index_count, max((len(buf) - base) // IX.ENTRY_SIZE, 0))
    for n in range(1, count):
        key_hash, phy, diff, prev = IX.ENTRY.unpack_from(buf, base + n * IX.ENTRY_SIZE)
        yield {
            "entry": n,
            "keyHash": key_hash,
            "slot": key_hash % hash_slot_num,
            "phyOffset": phy,
            "timeDiffSeconds": diff,
            "storeTimestamp": h.begin_timestamp + diff * 1000,
            "prevEntry": prev,
        }


def checkpoint_header(path: str) -> dict:
    with open(path, "rb") as fh:
        cp = CP.decode(fh.read(CP.FILE_SIZE))
    return {
        "physicMsgTimestamp": cp.physic_msg_timestamp,
        "logicsMsgTimestamp": cp.logics_msg_timestamp,
        "indexMsgTimestamp": cp.index_msg_timestamp,
        "masterFlushedOffset": cp.master_flushed_offset,
        "confirmPhyOffset": cp.confirm_phy_offset,
    }
