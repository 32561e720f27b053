"""Reading the fields of many consecutive CommitLog records at once (pure: bytes in, numpy columns out).

Reput and recovery only need a few fields of each record. Walking the TOTALSIZE chain is sequential, but
everything after it is not: the fixed fields are gathered for a whole run of records with numpy, and
the same bound checks read_header makes one record at a time are made on whole columns. The run ends
before the first record that fails any check (or is not a plain message), so the caller can look at that
one with read_header and say exactly what is wrong with it.
"""

from __future__ import annotations

from struct import Struct

import numpy as np

from .record import BORNHOST_V6_FLAG, INNER_BATCH_FLAG, MAGIC_V1, MAGIC_V2, STOREHOSTADDRESS_V6_FLAG

_SIZE_MAGIC = Struct(">ii")
MIN_RECORD = 91
_SPANS = {w: np.arange(w, dtype=np.int64) for w in (1, 2, 4, 8)}
_TYPES = {1: np.dtype("u1"), 2: np.dtype(">u2"), 4: np.dtype(">i4"), 8: np.dtype(">i8")}


def chain(buf, pos: int, limit: int, max_records: int) -> tuple[list[int], list[int]]:
    """(positions, sizes) of the records that start at `pos`, follow each other and end by `limit`,
    stopping at anything that is not a message record (a BLANK filler, zeros, garbage)."""
    positions: list[int] = []
    sizes: list[int] = []
    unpack = _SIZE_MAGIC.unpack_from
    while pos + 8 <= limit and len(positions) < max_records:
        size, magic = unpack(buf, pos)
        if (magic != MAGIC_V1 and magic != MAGIC_V2) or size < MIN_RECORD or pos + size > limit:
            break
        positions.append(pos)
        sizes.append(size)
        pos += size
    return positions, sizes


def _gather(data: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The big-endian integers of `width` bytes at each position of `at`."""
    return data[at[:, None] + _SPANS[width]].view(_TYPES[width]).ravel()


class Columns:
    """Fields of a run of records, one numpy array each; `count` records passed every check."""

    __slots__ = (
        "count",
        "pos",
        "size",
        "magic",
        "crc",
        "queue_id",
        "queue_offset",
        "phys",
        "sys_flag",
        "store_ts",
        "body_pos",
        "body_len",
        "topic_pos",
        "topic_len",
        "props_pos",
        "props_len",
    )

    def truncate(self, n: int) -> None:
        for name in self.__slots__[1:]:
            setattr(self, name, getattr(self, name)[:n])
        self.count = n


def scan(buf, positions: list[int], sizes: list[int]) -> Columns:
    """Gather and bound-check the records of a chain; stops before the first one read_header would refuse
    or that holds an inner batch (those go one at a time)."""
    data = np.frombuffer(buf, dtype=np.uint8)
    c = Columns()
    pos = np.array(positions, dtype=np.int64)
    for name in Columns.__slots__[1:]:
        setattr(c, name, pos)  # placeholders: every column is set below, truncated alike meanwhile
    c.size = size = np.array(sizes, dtype=np.int64)
    c.count = len(pos)
    if not c.count:
        return c
    c.magic = _gather(data, pos + 4, 4)
    c.crc = _gather(data, pos + 8, 4)
    c.queue_id = _gather(data, pos + 12, 4)
    c.queue_offset = _gather(data, pos + 20, 8)
    c.phys = _gather(data, pos + 28, 8)
    c.sys_flag = flags = _gather(data, pos + 36, 4)
    born = np.where(flags & BORNHOST_V6_FLAG, 20, 8)
    store = np.where(flags & STOREHOSTADDRESS_V6_FLAG, 20, 8)
    fixed = 48 + born + 8 + store + 16  # up to and including BODYLEN
    ok = (fixed <= size) & ((flags & INNER_BATCH_FLAG) == 0)
    _stop_at_first_failure(c, ok)
    pos, size, born, fixed = pos[: c.count], size[: c.count], born[: c.count], fixed[: c.count]
    c.store_ts = _gather(data, pos + 48 + born, 8)
    c.body_len = body_len = _gather(data, pos + fixed - 4, 4).astype(np.int64)
    v2 = c.magic == MAGIC_V2
    tlen_width = np.where(v2, 2, 1)
    ok = (body_len >= 0) & (fixed + body_len + tlen_width <= size)
    _stop_at_first_failure(c, ok)
    n = c.count
    pos, size, fixed, body_len, v2, tlen_width = (pos[:n], size[:n], fixed[:n], c.body_len, v2[:n], tlen_width[:n])
    c.body_pos = pos + fixed
    at = c.body_pos + body_len
    # a V2 topic length is 2 bytes; gather both bytes everywhere the record has room and keep the first for V1
    two = _gather(data, np.minimum(at, pos + size - 2), 2).astype(np.int64)
    one = data[at].astype(np.int64)
    c.topic_len = tlen = np.where(v2, two, one)
    c.topic_pos = at + tlen_width
    ok = c.topic_pos + tlen + 2 <= pos + size
    _stop_at_first_failure(c, ok)
    n = c.count
    pos, size, tlen = pos[:n], size[:n], c.topic_len
    plen_at = c.topic_pos + tlen
    plen = _gather(data, plen_at, 2).astype(np.int64)
    plen = np.where(plen >= 0x8000, 0, plen)  # Java reads a negative short and skips the properties
    c.props_pos = plen_at + 2
    c.props_len = plen
    _stop_at_first_failure(c, c.props_pos + plen == pos + size)
    return c


def _stop_at_first_failure(c: Columns, ok: np.ndarray) -> None:
    bad = np.flatnonzero(~ok)
    if len(bad):
        c.truncate(int(bad[0]))
