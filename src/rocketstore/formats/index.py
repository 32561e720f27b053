"""The IndexFile layout (IndexFile / IndexHeader): pure functions over bytes and numpy arrays, no I/O.

    header (40 B)   beginTimestamp 8 | endTimestamp 8 | beginPhyOffset 8 | endPhyOffset 8 |
                    hashSlotCount 4 (slots in use) | indexCount 4 (next entry number; starts at 1)
    slots           hashSlotNum x int32: the newest entry number whose key hashes to that slot, 0 = none
    entries         maxIndexNum x 20 B: keyHash 4 | phyOffset 8 | timeDiff 4 (seconds) | prevIndexNo 4

Entry 0 is never written (indexCount starts at 1), so a file holds maxIndexNum - 1 entries. Keys are
`topic#key`, hashed with Java's String.hashCode made non-negative (Integer.MIN_VALUE becomes 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct

import numpy as np


HEADER_SIZE = 40
SLOT_SIZE = 4
ENTRY_SIZE = 20
HEADER = Struct(">qqqqii")
ENTRY = Struct(">iqii")
SLOT = Struct(">i")
ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
INT32_MAX = 0x7FFFFFFF
INVALID = 0  # an entry number / slot value meaning "none"


def file_size(hash_slot_num: int, index_num: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE


def entry_position(hash_slot_num: int, entry_no: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + entry_no * ENTRY_SIZE


def build_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


def key_tokens(keys: str) -> list[str]:
    """The KEYS tokens that get an index entry: split on spaces (MessageConst.KEY_SEPARATOR), empty ones
    skipped."""
    return [k for k in keys.split(" ") if k] if keys else []


def record_keys(topic: str, uniq_key: str | None, keys: str) -> list[str]:
    """The index keys of one record, in IndexService.buildIndex's order: topic#UNIQ_KEY, then topic#token
    for each KEYS token (key_tokens)."""
    out = [f"{topic}#{uniq_key}"] if uniq_key is not None else []
    if keys:
        out.extend([f"{topic}#{k}" for k in key_tokens(keys)])
    return out


def record_key_count(uniq_key: str | None, keys: str) -> int:
    """len(record_keys(...)) without making the keys."""
    return (uniq_key is not None) + len(key_tokens(keys))


@dataclass
class IndexHeader:
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1

    def encode(self) -> bytes:
        return HEADER.pack(
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    def time_matched(self, begin: int, end: int) -> bool:
        """IndexFile.isTimeMatched: does [begin, end] overlap the file's time span?"""
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)


def decode_header(buf) -> IndexHeader:
    """IndexHeader.load: a count of 0 or less (a file never flushed) reads as 1."""
    h = IndexHeader(*HEADER.unpack_from(buf, 0))
    if h.index_count <= 0:
        h.index_count = 1
    return h


# ---------------------------------------------------------------- key hashes
_POW31: dict[int, np.ndarray] = {}


def _powers(n: int) -> np.ndarray:
    """31**(n-1) .. 31**0 modulo 2**32: the weights of String.hashCode's code units."""
    p = _POW31.get(n)
    if p is None:
        p = _POW31[n] = np.array([pow(31, n - 1 - j, 1 << 32) for j in range(n)], dtype=np.uint32)
    return p


def _java_hashes(data: bytes, count: int, units: int, dtype: str) -> np.ndarray:
    """Java String.hashCode of `count` strings of `units` code units each, laid end to end, as uint32."""
    if units == 0:
        return np.zeros(count, dtype=np.uint32)
    arr = np.frombuffer(data, dtype=dtype).reshape(count, units).astype(np.uint32)
    return (arr * _powers(units)).sum(axis=1, dtype=np.uint32)


def key_hashes(keys: list[str]) -> np.ndarray:
    """indexKeyHashMethod for many keys at once: |String.hashCode| as int32, Integer.MIN_VALUE -> 0.

    Keys are grouped by length, so each group is one (count x length) matrix of code units; ASCII
    keys are their own UTF-16 code units, so they go as single bytes."""
    out = np.empty(len(keys), dtype=np.uint32)
    groups: dict[tuple[int, bool], list[int]] = {}
    for i, k in enumerate(keys):
        g = groups.get((len(k), k.isascii()))
        if g is None:
            g = groups[(len(k), k.isascii())] = []
        g.append(i)
    for (length, ascii_only), members in groups.items():
        if ascii_only:
            out[members] = _java_hashes("".join([keys[i] for i in members]).encode("ascii"), len(members), length, "u1")
        else:  # len() counts code points; a code point above U+FFFF is two UTF-16 units
            for i in members:
                data = keys[i].encode("utf-16-be", "surrogatepass")
                out[i] = _java_hashes(data, 1, len(data) // 2, ">u2")[0]
    signed = out.view(np.int32)
    positive = np.abs(signed)  # abs(MIN_VALUE) stays negative in int32, as in Java
    positive[positive < 0] = 0
    return positive


def key_hash(key: str) -> int:
    """One key's hash, without numpy's per-call cost."""
    h = 0
    for u in key.encode("ascii") if key.isascii() else _utf16_units(key):
        h = (31 * h + u) & 0xFFFFFFFF
    h = h - 0x100000000 if h & 0x80000000 else h
    return 0 if h == -0x80000000 else abs(h)


def _utf16_units(key: str) -> list[int]:
    data = key.encode("utf-16-be", "surrogatepass")
    return [(data[i] << 8) | data[i + 1] for i in range(0, len(data), 2)]


def time_diff(store_timestamp: int, begin_timestamp: int) -> int:
    """Seconds since the file's begin timestamp, clamped to [0, Integer.MAX_VALUE]; 0 without a begin."""
    if begin_timestamp <= 0:
        return 0
    d = store_timestamp - begin_timestamp
    d = -(-d // 1000) if d < 0 else d // 1000  # Java's long division truncates toward zero
    return min(max(d, 0), INT32_MAX)


# ---------------------------------------------------------------- placing a run of entries
@dataclass
class Placement:
    """Where a run of entries goes in one file, computed before anything is written."""

    prev: np.ndarray  # prevIndexNo of each entry
    slot_ids: np.ndarray  # slots whose head changes ...
    slot_heads: np.ndarray  # ... to these entry numbers
    new_slots: int  # slots that were empty before (hashSlotCount grows by this)


def place_entries(slot_table: np.ndarray, index_count: int, hashes: np.ndarray, hash_slot_num: int) -> Placement:
    """Chain entries numbered index_count, index_count+1, ... into their slots, as IndexFile.putKey
    would one at a time: each entry points at the slot's previous head (a head outside
    (0, current count] is treated as empty), and the slot then points at the entry."""
    n = len(hashes)
    slots = hashes.astype(np.int64) % hash_slot_num
    numbers = np.arange(index_count, index_count + n, dtype=np.int64)
    order = np.argsort(slots, kind="stable")
    s_sorted = slots[order]
    first = np.ones(n, dtype=bool)
    first[1:] = s_sorted[1:] != s_sorted[:-1]
    old = slot_table[s_sorted].astype(np.int64)
    # putKey checks a head against the count at the time of that entry (entry k of the run sees
    # index_count + k); only the first entry of each slot in the run reads the old head
    old_valid = (old > INVALID) & (old <= index_count + order)
    prev_sorted = np.where(first, np.where(old_valid, old, INVALID), np.r_[0, numbers[order][:-1]])
    prev = np.empty(n, dtype=np.int64)
    prev[order] = prev_sorted
    last = np.ones(n, dtype=bool)
    last[:-1] = s_sorted[1:] != s_sorted[:-1]
    return Placement(
        prev=prev,
        slot_ids=s_sorted[last],
        slot_heads=numbers[order][last],
        new_slots=int(np.count_nonzero(first & ~old_valid)),
    )


@dataclass
class Unplacement:
    """What taking a file's newest entries out again changes (place_entries undone)."""

    slot_ids: np.ndarray  # every slot one of them was in ...
    slot_heads: np.ndarray  # ... gets back the head it had before them (INVALID: empty again)
    freed_slots: int  # slots that are empty again (hashSlotCount shrinks by this)


def unplace_entries(hashes: np.ndarray, prevs: np.ndarray, hash_slot_num: int) -> Unplacement:
    """The slots once a file's newest entries (their hashes and prevIndexNo, in entry order) are taken out:
    each slot they were in points again at what the oldest of them in that slot pointed at, the head the
    slot had before them (an entry's prev is the slot's earlier head, see place_entries)."""
    slots = hashes.astype(np.int64) % hash_slot_num
    order = np.argsort(slots, kind="stable")  # entry order kept within a slot: its first is its oldest
    s_sorted = slots[order]
    first = np.ones(len(s_sorted), dtype=bool)
    first[1:] = s_sorted[1:] != s_sorted[:-1]
    heads = prevs.astype(np.int64)[order][first]
    return Unplacement(s_sorted[first], heads, int(np.count_nonzero(heads == INVALID)))


def time_diffs(timestamps: np.ndarray, begin_timestamp: int) -> np.ndarray:
    """time_diff over an array of store timestamps against one begin timestamp."""
    if begin_timestamp <= 0:
        return np.zeros(len(timestamps), dtype=np.int64)
    d = timestamps.astype(np.int64) - begin_timestamp
    d = np.where(d < 0, 0, d // 1000)
    return np.minimum(d, INT32_MAX)


# ---------------------------------------------------------------- the chain walk of a query
def select_chain_py(
    buf,
    hash_slot_num: int,
    begin_timestamp: int,
    index_count: int,
    index_num: int,
    key_hash: int,
    max_num: int,
    begin: int,
    end: int,
    out: list,
    accept=None,
) -> None:
    """IndexFile.selectPhyOffset over a file's bytes (its header's beginTimestamp and indexCount given):
    follow the key's chain from the newest entry, adding to `out` the physical offsets of entries with the
    same hash stored within [begin, end]; `accept(offset)` may veto one."""
    count = min(index_count, index_num - 1)  # a header claiming more than the file holds is corrupt
    n = SLOT.unpack_from(buf, HEADER_SIZE + (key_hash % hash_slot_num) * SLOT_SIZE)[0]
    if n <= INVALID or n > count or index_count <= 1:
        return
    base = HEADER_SIZE + hash_slot_num * SLOT_SIZE
    unpack = ENTRY.unpack_from
    hops = 0
    while len(out) < max_num and hops < count:  # a corrupt chain may loop: never walk more than the file
        hops += 1
        hash_read, phy, diff, prev = unpack(buf, base + n * ENTRY_SIZE)
        if diff < 0:
            break
        t = begin_timestamp + diff * 1000
        if hash_read == key_hash and begin <= t <= end and (accept is None or accept(phy)):
            out.append(phy)
        if prev <= INVALID or prev > count or prev == n or t < begin:
            break
        n = prev


# the chosen twin (rocketstore.engine.TWINS); select_chain_py stays the reference
from ..engine import select_chain  # noqa: F401  (the public name)
