"""ConsumeQueue units (20 B) and the checkpoint file (4096 B), against struct-packed bytes and golden files."""

import struct

import numpy as np
import pytest
from hypothesis import given, strategies as st

from rocketstore.errors import CorruptDataError
from rocketstore.formats import checkpoint as C
from rocketstore.formats import cq

from . import _golden as G

INT64 = st.integers(-(2**63), 2**63 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)


# ---- ConsumeQueue ------------------------------------------------------------------------------


def test_unit_literal_bytes():
    assert cq.UNIT_SIZE == 20
    # offset 3189, size 257, tagsCode 2598919 ("TagA")
    assert cq.encode_unit(3189, 257, 2598919) == bytes.fromhex("0000000000000C7500000101000000000027A807")
    # a negative tagsCode is sign-extended to 8 bytes: -206781625 = -0x0C533CB9 -> 0xF3ACC347
    assert cq.encode_unit(0, 20, -206781625) == bytes.fromhex("000000000000000000000014FFFFFFFFF3ACC347")
    assert cq.decode_unit(bytes.fromhex("0000000000000C7500000101000000000027A807")) == (3189, 257, 2598919)


def test_pre_blank_unit():
    assert cq.PRE_BLANK == bytes.fromhex("00000000000000007FFFFFFF0000000000000000")
    assert cq.decode_unit(cq.PRE_BLANK) == (0, 0x7FFFFFFF, 0)
    assert cq.is_valid_unit(0, 0x7FFFFFFF)  # pre-blanks count as written units in recovery


def test_is_valid_unit():
    assert cq.is_valid_unit(0, 1) and cq.is_valid_unit(123, 445)
    assert not cq.is_valid_unit(0, 0)
    assert not cq.is_valid_unit(-1, 445)
    assert not cq.is_valid_unit(5, -3)


@given(INT64, INT32, INT64, st.integers(0, 60))
def test_encode_decode_unit_match_struct(pos, size, tags, at):
    raw = struct.pack(">qiq", pos, size, tags)
    assert cq.encode_unit(pos, size, tags) == raw
    buf = bytes(at) + raw + b"\xff" * 3
    assert cq.decode_unit(buf, at) == (pos, size, tags)


@given(st.lists(st.tuples(INT64, INT32, INT64), max_size=30), st.integers(0, 19))
def test_units_numpy_view(items, tail):
    raw = b"".join(struct.pack(">qiq", *t) for t in items) + b"\x01" * tail
    arr = cq.units(raw)
    assert len(arr) == len(items)  # a trailing partial unit is ignored
    assert [(int(a["pos"]), int(a["size"]), int(a["tags"])) for a in arr] == items
    assert arr.dtype.itemsize == 20


def test_units_is_a_view_without_copy():
    buf = bytearray(cq.PRE_BLANK + struct.pack(">qiq", 7, 8, 9))
    arr = cq.units(buf)
    assert np.shares_memory(arr, np.frombuffer(buf, dtype=np.uint8))
    struct.pack_into(">q", buf, 20, 42)
    assert int(arr["pos"][1]) == 42
    assert len(cq.units(b"")) == 0


def test_golden_consume_queue_units():
    """Every message of the golden store has the unit (wroteOffset, size, tagsCode) at its queue offset."""
    name = "store-v1-basic"
    cq_file_size = int(G.manifest(name)["config_all"]["mappedFileSizeConsumeQueue"])
    cache = {}

    def unit(topic, qid, qoff):
        start = qoff * 20 - qoff * 20 % cq_file_size
        key = (topic, qid, start)
        if key not in cache:
            with open(G.path(name, "store", "consumequeue", topic, str(qid), f"{start:020d}"), "rb") as fh:
                cache[key] = fh.read()
        data = cache[key]
        return cq.units(data)[qoff * 20 % cq_file_size // 20], cq.decode_unit(data, qoff * 20 % cq_file_size)

    n = 0
    for e in G.manifest(name)["messages"]:
        if e["topic"] == "SCHEDULE_TOPIC_XXXX":
            continue  # tagsCode there is the delivery time
        subs = (
            [(e, e["wroteOffset"], e["queueOffset"])]
            if e["api"] == "putMessage"
            else [(s, s["physicalOffset"], s["queueOffset"]) for s in e["messages"]]
        )
        for sub, phys, qoff in subs:
            row, tup = unit(e["topic"], e["queueId"], qoff)
            want = (phys, sub["stored"]["totalSize"], sub["tagsCodeExpected"])
            assert tup == want
            assert (int(row["pos"]), int(row["size"]), int(row["tags"])) == want
            n += 1
    assert n > 1500


def test_golden_pre_blank_units():
    """store-expired-cq-rebuilt: ConsumeQueue.fillPreBlank wrote leading (0, Integer.MAX_VALUE, 0) units."""
    data = open(
        G.path("store-expired-cq-rebuilt", "store", "consumequeue", "TopicA", "0", "00000000000000000000"), "rb"
    ).read()
    assert data[:20] == cq.PRE_BLANK
    arr = cq.units(data)
    lead = 0
    while lead < len(arr) and int(arr["size"][lead]) == 0x7FFFFFFF:
        assert int(arr["pos"][lead]) == 0 and int(arr["tags"][lead]) == 0
        lead += 1
    assert 0 < lead < len(arr)
    assert int(arr["pos"][lead]) >= 983040  # the first real unit points into the remaining commitlog


# ---- checkpoint --------------------------------------------------------------------------------


@given(INT64, INT64, INT64, INT64, INT64)
def test_checkpoint_encode_layout(a, b, c, d, e):
    raw = C.encode(C.Checkpoint(a, b, c, d, e))
    assert len(raw) == 4096 == C.FILE_SIZE
    assert raw[:40] == struct.pack(">q", a) + struct.pack(">q", b) + struct.pack(">q", c) + struct.pack(
        ">q", d
    ) + struct.pack(">q", e)
    assert raw[40:] == bytes(4056)
    assert C.decode(raw) == C.Checkpoint(a, b, c, d, e)


def test_checkpoint_field_offsets():
    raw = bytearray(4096)
    for i, v in enumerate((11, 22, 33, 44, 55)):
        struct.pack_into(">q", raw, 8 * i, v)
    cp = C.decode(bytes(raw))
    assert (
        cp.physic_msg_timestamp,
        cp.logics_msg_timestamp,
        cp.index_msg_timestamp,
        cp.master_flushed_offset,
        cp.confirm_phy_offset,
    ) == (11, 22, 33, 44, 55)
    assert C.decode(bytes(raw[:40])) == cp  # only the first 40 bytes matter


@pytest.mark.parametrize("n", [0, 1, 8, 39])
def test_checkpoint_decode_short_buffer(n):
    with pytest.raises(CorruptDataError) as ei:
        C.decode(bytes(n))
    assert ei.value.offset == 0


@pytest.mark.parametrize(
    "physic,logics,want",
    [
        (10_000, 5_000, 2_000),
        (5_000, 10_000, 2_000),
        (3_000, 9_999, 0),
        (2_999, 9_999, 0),
        (0, 0, 0),
        (1700000318249, 1700000892645, 1700000315249),
    ],
)
def test_min_timestamp(physic, logics, want):
    cp = C.Checkpoint(physic, logics, 0, 0, 0)
    assert cp.min_timestamp() == want


@given(st.integers(0, 2**62), st.integers(0, 2**62), st.integers(0, 2**62))
def test_min_timestamp_properties(physic, logics, index):
    cp = C.Checkpoint(physic, logics, index, 0, 0)
    assert cp.min_timestamp() == max(min(physic, logics) - 3000, 0)
    assert cp.min_timestamp_index() == min(max(min(physic, logics) - 3000, 0), index)


def test_golden_checkpoint_file():
    m = G.manifest("store-v1-basic")["checkpointFile"]
    with open(G.path("store-v1-basic", "store", "checkpoint"), "rb") as fh:
        raw = fh.read()
    assert len(raw) == m["fileSize"] == 4096
    cp = C.decode(raw)
    assert cp.physic_msg_timestamp == m["physicMsgTimestamp"]
    assert cp.logics_msg_timestamp == m["logicsMsgTimestamp"]
    assert cp.index_msg_timestamp == m["indexMsgTimestamp"]
    assert cp.master_flushed_offset == m["masterFlushedOffset"]
    assert cp.confirm_phy_offset == m["confirmPhyOffset"]
    assert m["bytes40toEndAllZero"] and raw[40:] == bytes(4056)
    assert C.encode(cp) == raw  # byte-exact, since everything after the five longs is zero
