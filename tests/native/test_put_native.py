"""The compiled put path against the pure reference: the same PROPERTIES bytes, the same props_info, the same
records, statuses, ConsumeQueues and index files; and a few byte expectations computed by hand."""

import os
import tempfile
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore import engine as engine_module
from rocketstore.formats import index as I
from rocketstore.formats import record as R
from rocketstore.put.encode import message_props_py
from rocketstore.services.bulk_dispatch import props_info_py
from rocketstore.services.dispatch_rows import index_entries

# texts as callers pass them: any code point (lone surrogates too), the separators, spaces, empty strings
SPECIAL = ["", " ", "a b", " a  b ", "\x01", "x\x02y", "TagA", "\ud800", "\udfff", "é", "\U0001f600", "中文"]
TEXT = st.one_of(
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=10), st.sampled_from(SPECIAL)
)
NAMES = st.one_of(TEXT, st.sampled_from(["UNIQ_KEY", "KEYS", "TAGS", "__CRC32#", "DELAY", "INNER_NUM", "a"]))
KEYS = st.one_of(
    st.none(),
    TEXT,
    st.lists(TEXT, max_size=3),
    st.lists(TEXT, max_size=3).map(tuple),
    st.sampled_from([{"k": 1}, 7, b"ab"]),
)  # odd types: Python decides
PROPS = st.one_of(
    st.none(), st.dictionaries(NAMES, st.one_of(st.none(), TEXT), max_size=4), st.sampled_from([[], 0, {1: "a"}])
)
BODY = st.one_of(st.binary(max_size=200), st.integers(0, 70_000).map(lambda n: b"z" * n))


@st.composite
def messages(draw, topic=None):
    return Message(
        topic=topic or draw(st.sampled_from(["T", "T", "U"])),
        body=draw(BODY),
        tags=draw(st.one_of(st.none(), TEXT, st.sampled_from([5]))),
        keys=draw(KEYS),
        properties=draw(PROPS),
        flag=draw(st.one_of(st.just(0), st.integers(-(2**31), 2**31 - 1))),
        sys_flag=draw(
            st.sampled_from(
                [0, 0, 0, R.TRANSACTION_COMMIT_TYPE, R.TRANSACTION_PREPARED_TYPE, R.TRANSACTION_ROLLBACK_TYPE]
            )
        ),
        raw_properties=draw(
            st.one_of(
                st.none(),
                st.none(),
                st.none(),
                st.sampled_from(["TAGS\x01r\x02KEYS\x01k1 k2\x02", b"UNIQ_KEY\x01U\x02"]),
            )
        ),
    )


# ---------------------------------------------------------------- function by function
@settings(max_examples=400, deadline=None)
@given(messages(), st.booleans())
def test_message_props_same_as_reference(native, msg, drop_crc):
    got = native.message_props(msg, drop_crc)
    want = message_props_py(msg, drop_crc)
    if got is None:
        # left to Python: only what the C does not take on (raw properties, odd types, a separator)
        assert (
            msg.raw_properties is not None
            or want is None
            or type(msg.keys) not in (type(None), str, list, tuple)
            or type(msg.tags) not in (type(None), str)
            or type(msg.properties) not in (type(None), dict)
            or any(type(k) is not str for k in (msg.properties or {}))
        )
    else:
        assert got == want


@settings(max_examples=400, deadline=None)
@given(st.lists(messages(topic="T"), min_size=1, max_size=6), st.booleans())
def test_batch_props_same_as_reference(native, msgs, drop_crc):
    """Each message's bytes as message_props makes them, and its info as props_info reads those bytes back
    (batch_props builds most infos from the message's own texts, without the read-back)."""
    props, infos, uniform, careful, codes = native.batch_props(msgs, drop_crc)
    assert props == [native.message_props(m, drop_crc) for m in msgs]
    want = [None if p is None else props_info_py(p) for p in props]
    assert infos == want
    assert np_list(codes, "i8") == [0 if i is None else i[0] for i in want]
    assert uniform == (None not in props and props.count(props[0]) == len(props))
    assert careful == any(i is None or i[3] for i in want)


PIECES = st.one_of(
    st.sampled_from(
        [
            b"TAGS",
            b"KEYS",
            b"UNIQ_KEY",
            b"DELAY",
            b"INNER_NUM",
            b"INNER_BASE",
            b"\x01",
            b"\x02",
            b"TAGS\x01",
            b"\x02KEYS\x01",
            b"\xff",
            b"\xe4\xb8",
            b"\xed\xa0\x80",
            b" ",
        ]
    ),
    st.binary(max_size=6),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(PIECES, max_size=12).map(b"".join))
def test_props_info_same_as_reference(native, raw):
    assert native.props_info(raw) == props_info_py(raw)
    assert native.props_info(bytearray(raw)) == props_info_py(raw)


RECORD = st.tuples(
    st.sampled_from(["T", "Tö", "\U0001f600"]),
    st.integers(0, 1000),
    st.integers(0, 10**13),
    st.sampled_from([0, 4, 8, 12, 0x8C]),
    st.one_of(st.none(), TEXT),
    TEXT,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, max_size=8), st.integers(0, 1000))
def test_index_keys_same_as_reference(native, records, end):
    hashes, phys, stamps, last_owner = native.index_keys(records, end)
    indexed_to = end
    # the reference: services.dispatch_rows.index_entries (IndexService._build's pure path)
    keys, want_phys, want_stamps, owner = [], [], [], -1
    for i, (topic, phy, ts, flag, uniq, kstr) in enumerate(records):
        if phy < end or flag & 0xC == 0xC:
            continue
        mine = I.record_keys(topic, uniq, kstr)
        keys += mine
        want_phys += [phy] * len(mine)
        want_stamps += [ts] * len(mine)
        if mine:
            owner, end = i, phy
    assert np_list(hashes, "i4") == (I.key_hashes(keys).tolist() if keys else [])
    assert np_list(phys, "i8") == want_phys and np_list(stamps, "i8") == want_stamps
    assert last_owner == owner
    if records:  # and the function the pure build runs
        topics, phy_col, ts_col, flags, uniqs, kstrs = zip(*records)
        ref = index_entries(topics, uniqs, kstrs, flags, phy_col, ts_col, indexed_to)
        assert np_list(hashes, "i4") == list(ref[0]) and np_list(phys, "i8") == list(ref[1])
        assert np_list(stamps, "i8") == list(ref[2]) and last_owner == ref[3]


def np_list(raw: bytes, dtype: str) -> list[int]:
    import numpy as np

    return np.frombuffer(raw, dtype=dtype).tolist()


def test_index_keys_leaves_odd_records_to_python(native):
    assert native.index_keys([("T", 1, 2, 0, None, ["a"])], 0) is None
    assert native.index_keys([("T", 1, 2, 0)], 0) is None
    assert native.index_keys([("T", 2**70, 2, 0, None, "a")], 0) is None


# ---------------------------------------------------------------- whole stores, byte for byte
@contextmanager
def engine(on: bool, native):
    with engine_module.using("native" if on else "pure"):
        yield


def run_store(path, ops, append_crc, on, native, slots=8, entries=24):
    now = [1_700_000_000_000]
    cfg = StoreConfig(
        mapped_file_size_commit_log=256 * 1024,
        mapped_file_size_consume_queue=20 * 20,
        max_hash_slot_num=slots,
        max_index_num=entries,
        enabled_append_prop_crc=append_crc,
        clock=lambda: now[0],
    )
    answers = []
    with engine(on, native):
        s = MessageStore.open(path, cfg)
        try:
            for step, kind, payload, qid in ops:
                now[0] += step
                r = s.put(payload, qid) if kind == "put" else s.put_batch(payload, qid)
                answers.append(
                    (
                        r.status,
                        r.physical_offset,
                        r.queue_offset,
                        r.size,
                        [(x.physical_offset, x.size) for x in r] if kind == "batch" and r.ok else None,
                    )
                )
            s._index.build()
        finally:
            s.close()
    return answers


def store_files(path):
    """Every CommitLog and ConsumeQueue file by path; the index files by age (their names are the wall clock's)."""
    out = {}
    for sub in ("commitlog", "consumequeue"):
        for root, _, files in os.walk(os.path.join(path, sub)):
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    out[os.path.relpath(os.path.join(root, f), path)] = fh.read()
    idx = os.path.join(path, "index")
    names = sorted(os.listdir(idx)) if os.path.isdir(idx) else []
    out["index"] = [open(os.path.join(idx, n), "rb").read() for n in names]
    return out


OPS = st.lists(
    st.one_of(
        st.tuples(st.integers(0, 3000), st.just("put"), messages(), st.integers(0, 2)),
        st.tuples(
            st.integers(0, 3000),
            st.just("batch"),
            st.lists(messages(topic="T"), min_size=1, max_size=6) | st.lists(messages(), min_size=1, max_size=3),
            st.integers(0, 2),
        ),
    ),
    max_size=10,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(OPS, st.booleans())
def test_stores_byte_identical(native, ops, append_crc):
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "native"), os.path.join(d, "pure")
        assert run_store(a, ops, append_crc, True, native) == run_store(b, ops, append_crc, False, native)
        assert store_files(a) == store_files(b)


@pytest.mark.parametrize("append_crc", [False, True])
def test_keyed_batches_byte_identical(native, tmp_path, append_crc):
    """Producers' messages (KEYS, UNIQ_KEY, TAGS) in batches and single puts, enough to fill and roll index
    files many times and build them in several runs."""
    ops = []
    for b in range(12):
        msgs = [
            Message(
                topic="T",
                body=bytes([i % 256]) * (i % 37),
                tags=f"Tag{i % 3}" if i % 5 else None,
                keys=f"order-{b}-{i}" if i % 4 else [f"k{i}", "", f"z{i}"],
                properties={"UNIQ_KEY": f"{b * 1000 + i:032X}"} if i % 7 else None,
            )
            for i in range(700)
        ]
        ops.append((1500, "batch", msgs, b % 2))
        ops.append((10, "put", msgs[3], 1))
    a, b = str(tmp_path / "native"), str(tmp_path / "pure")
    assert run_store(a, ops, append_crc, True, native, 61, 2500) == run_store(
        b, ops, append_crc, False, native, 61, 2500
    )
    fa, fb = store_files(a), store_files(b)
    assert len(fa["index"]) > 3
    assert fa == fb


# ---------------------------------------------------------------- bytes computed by hand
def test_message_props_by_hand(native):
    m = Message(topic="T", tags="TagA", keys=["a", "b"], properties={"UNIQ_KEY": "X", "__CRC32#": "1"})
    assert native.message_props(m, True) == b"UNIQ_KEY\x01X\x02KEYS\x01a b\x02TAGS\x01TagA\x02"
    assert native.message_props(m, False) == b"UNIQ_KEY\x01X\x02__CRC32#\x011\x02KEYS\x01a b\x02TAGS\x01TagA\x02"
    # an unpaired surrogate is "?" (Java's getBytes); U+00E9 is C3 A9; U+1F600 is F0 9F 98 80
    assert (
        native.message_props(Message(topic="T", tags="a\ud800\u00e9\U0001f600"), False)
        == b"TAGS\x01a?\xc3\xa9\xf0\x9f\x98\x80\x02"
    )
    # the properties dict names KEYS already (None: left out); an empty key list joins to nothing
    assert native.message_props(Message(topic="T", keys="k", properties={"KEYS": None, "p": ""}), False) == b"p\x01\x02"
    assert native.message_props(Message(topic="T", keys=[""], tags=""), False) == b""
    assert native.message_props(Message(topic="T", tags="a\x02b"), False) is None
    assert native.message_props(Message(topic="T", raw_properties="A\x01b\x02"), False) is None


def test_props_info_by_hand(native):
    # "TagA".hashCode() == 2598919; the last non-empty value wins; a name not at an item start is not one
    raw = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U\x02UNIQ_KEY\x01\x02xDELAY\x013\x02"
    assert native.props_info(raw) == (2598919, "k1 k2", "U", False)
    assert native.props_info(b"DELAY\x013") == (0, "", None, True)
    assert native.props_info(b"KEYS\x01\xff") == (0, "\ufffd", None, False)
    assert native.props_info(b"INNER_NUM\x012\x02TAGS\x01a") is None
    assert native.props_info(b"INNER_NUM\x01\x02") == (0, "", None, False)


def test_index_keys_by_hand(native):
    # "T#a": 84*31^2 + 35*31 + 97 = 81906; "T#" + U+1F600: (84*31 + 35)*31^2 + 0xD83D*31 + 0xDE00
    hashes, phys, stamps, last = native.index_keys(
        [
            ("T", 100, 5, 0, None, " a "),
            ("T", 99, 6, 0, "x", ""),
            ("T", 200, 7, 12, "x", "a"),
            ("T", 300, 8, 0, "\U0001f600", ""),
        ],
        50,
    )
    assert np_list(hashes, "i4") == [81906, (84 * 31 + 35) * 961 + 0xD83D * 31 + 0xDE00]
    assert np_list(phys, "i8") == [100, 300] and np_list(stamps, "i8") == [5, 8] and last == 3
    # a key whose "T#key".hashCode() is Integer.MIN_VALUE (found from the hash's definition) hashes to 0
    # (five code units after "T#": digits of the remainder in base 31, the first one as large as needed)
    rest = (2**31 - (84 * 31 + 35) * 31**5) % 2**32
    units = [rest // 31**4] + [rest // 31**k % 31 for k in (3, 2, 1, 0)]
    key = "".join(map(chr, units))
    assert " " not in key and units[0] < 0xD800
    assert np_list(native.index_keys([("T", 1, 1, 0, None, key)], 0)[0], "i4") == [0]
    h = native.index_keys([("", 1, 1, 0, None, "x")], 0)[0]  # "#x": 35*31 + 120 = 1205
    assert np_list(h, "i4") == [1205]


def test_crc_by_hand(native):
    # CRC-32 of "123456789" is 0xCBF43926; masked to 31 bits 0x4BF43926 = 1274296614, digits least first
    assert native.crc32(b"123456789") == 0xCBF43926
    rec = bytearray(b"123456789" + bytes(20))
    native.fill_crc(rec)
    assert bytes(rec) == b"123456789__CRC32#\x014166924721\x02"


@pytest.mark.parametrize("append_crc", [False, True])
def test_encode_batch_is_encode_record(native, append_crc):
    """Two records of a batch against formats.record.encode_record, field by field from RocketMQ's layout."""
    born, host = R.host_to_bytes("10.0.0.1:1234"), R.host_to_bytes("127.0.0.1:10911")
    reserve = 20 if append_crc else 0
    props = [b"KEYS\x01k\x02", b""]
    bodies = [b"hello", b"\x00" * 300]
    template = R.fixed_part(8, 8).pack(0, R.MAGIC_V1, 0, 3, 0, 0, 0, 0, 111, born, 222, host, 5, 0, 0)
    want = b""
    for i in range(2):
        want += R.encode_record(
            topic=b"Topic",
            body=bodies[i],
            props=R.encode_properties(props[i], append_crc, False),
            queue_id=3,
            flag=-7 * i,
            sys_flag=0,
            born_timestamp=111,
            born_host=born,
            store_timestamp=222,
            store_host=host,
            reconsume_times=5,
            prepared_transaction_offset=0,
            queue_offset=40 + i,
            physical_offset=1000 + len(want),
            v2=False,
            append_crc=append_crc,
        )
    got = native.encode_batch(
        template, bodies, props, R.topic_tail(b"Topic", False), reserve, [0, -7], 40, 1000, len(want), append_crc
    )
    assert got == want
    with pytest.raises(ValueError):
        native.encode_batch(
            template,
            bodies,
            props,
            R.topic_tail(b"Topic", False),
            reserve,
            [0, -7],
            40,
            1000,
            len(want) - 1,
            append_crc,
        )


def test_batch_props_and_index_records_by_hand(native):
    a = Message(topic="T", tags="TagA", keys="k1")
    b = Message(topic="T", tags="x\x01")  # a separator: Python decides (MESSAGE_ILLEGAL)
    c = Message(topic="T", properties={"DELAY": "3"})
    props, infos, uniform, careful, codes = native.batch_props([a, a, b, c], False)
    assert props == [b"KEYS\x01k1\x02TAGS\x01TagA\x02"] * 2 + [None, b"DELAY\x013\x02"]
    assert infos == [(2598919, "k1", None, False)] * 2 + [None, (0, "", None, True)]
    assert uniform is False and careful is True
    assert np_list(codes, "i8") == [2598919, 2598919, 0, 0]
    _, _, uniform, careful, _ = native.batch_props([a, a], False)
    assert uniform is True and careful is False
    assert native.index_records("T", [5, 9], 7, 0, infos[:2]) == [
        ("T", 5, 7, 0, None, "k1"),
        ("T", 9, 7, 0, None, "k1"),
    ]


# ---------------------------------------------------------------- one keyed message's record (put's keyed path)
def _fields_fit_ref(msg) -> bool:
    """The record's int fields as RocketMQ's layout holds them: int32 FLAG and RECONSUMETIMES, int64
    PREPAREDTRANSACTIONOFFSET and BORNTIMESTAMP (or none given)."""

    def fits(v, bits):
        return type(v) is int and -(2 ** (bits - 1)) <= v < 2 ** (bits - 1)

    return (
        fits(msg.flag, 32)
        and fits(msg.reconsume_times, 32)
        and fits(msg.prepared_transaction_offset, 64)
        and (msg.born_timestamp is None or fits(msg.born_timestamp, 64))
    )


I32, I64 = st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)
# at most one field spoiled: a value its width does not hold, or not an int (Python decides those)
SPOIL = st.one_of(
    st.none(),
    st.tuples(
        st.sampled_from(["flag", "reconsume_times", "prepared_transaction_offset", "born_timestamp"]),
        st.sampled_from([True, 1.0, "1", 2**31, -(2**31) - 1, 2**63]),
    ),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.data_too_large])
@given(
    messages(),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.one_of(st.integers(0, 400), st.just(1 << 20)),
    st.one_of(st.just(4 << 20), st.integers(0, 70_000)),
    I32,
    I32,
    I64,
    st.one_of(st.none(), I64),
    SPOIL,
    st.booleans(),
    st.sampled_from(["T", "a-topic"]),
)
def test_keyed_record_is_encode_record(
    native, msg, qid, qoff, phys, room, max_body, flag, rt, pto, born_ts, spoil, v2, topic
):
    """keyed_record against formats.record.encode_record of the reference's properties (or, when it leaves
    the message to Python, one of the reasons it does, and the clock not read)."""
    msg.flag, msg.reconsume_times, msg.prepared_transaction_offset, msg.born_timestamp = flag, rt, pto, born_ts
    if spoil is not None:
        setattr(msg, *spoil)
        flag, rt, pto, born_ts = msg.flag, msg.reconsume_times, msg.prepared_transaction_offset, msg.born_timestamp
    host = R.host_to_bytes("127.0.0.1:10911")
    tail = R.topic_tail(topic.encode(), v2)
    magic = R.MAGIC_V2 if v2 else R.MAGIC_V1
    max_record = max_body + 64 * 1024
    room += 88 + len(tail) + len(msg.body)
    ticks = []

    def clock():
        ticks.append(1_700_000_000_000 + len(ticks))
        return ticks[-1]

    got = native.keyed_record(msg, tail, magic, qid, qoff, phys, room, max_body, max_record, host, clock)
    props = message_props_py(msg, False)
    info = props_info_py(props) if props is not None else None
    if got is None:
        assert ticks == []
        size = 88 + len(tail) + len(msg.body) + 2 + len(props or b"")
        assert (
            props is None
            or info is None
            or not _fields_fit_ref(msg)
            or type(msg.body) is not bytes
            or len(msg.body) > max_body
            or len(props) > 32767
            or size > max_record
            or size + 8 > room
            or native.message_props(msg, False) is None
        )
        return
    record, got_props, got_info, store_ts = got
    assert got_props == props and got_info == info
    assert ticks[-1] == store_ts and len(ticks) == (2 if born_ts is None else 1)
    want = R.encode_record(
        topic=topic.encode(),
        body=msg.body,
        props=props,
        queue_id=qid,
        flag=flag,
        sys_flag=0,
        born_timestamp=ticks[0] if born_ts is None else born_ts,
        born_host=host,
        store_timestamp=store_ts,
        store_host=host,
        reconsume_times=rt,
        prepared_transaction_offset=pto,
        queue_offset=qoff,
        physical_offset=phys,
        v2=v2,
        append_crc=False,
    )
    assert record == want
    assert len(record) + 8 <= room


def test_keyed_record_by_hand(native):
    """A record laid out by hand from RocketMQ's CommitLog format (MessageExtEncoder)."""
    import struct

    msg = Message(topic="T", body=b"hi", tags="A", keys="k", flag=3, born_timestamp=7)
    host = bytes([127, 0, 0, 1]) + struct.pack(">i", 10911)
    got = native.keyed_record(msg, b"\x01T", R.MAGIC_V1, 2, 5, 1000, 4096, 100, 200, host, lambda: 9)
    props = b"KEYS\x01k\x02TAGS\x01A\x02"
    size = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 2 + 1 + 1 + 2 + len(props)
    import zlib

    want = (
        struct.pack(">iiiiiqqiq", size, R.MAGIC_V1, zlib.crc32(b"hi") & 0x7FFFFFFF, 2, 3, 5, 1000, 0, 7)
        + host
        + struct.pack(">q", 9)
        + host
        + struct.pack(">iqi", 0, 0, 2)
        + b"hi"
        + b"\x01T"
        + struct.pack(">h", len(props))
        + props
    )
    assert got[0] == want and got[1] == props and got[3] == 9
    assert got[2] == (props_info_py(props)[0], "k", None, False)
    # a record that leaves fewer than 8 bytes of the segment: Python's (it rolls the segment)
    assert native.keyed_record(msg, b"\x01T", R.MAGIC_V1, 2, 5, 1000, size + 7, 100, 200, host, lambda: 9) is None
    # clock None: the wall clock (config.wall_clock_ms) read in C, for BORNTIMESTAMP and STORETIMESTAMP
    import time

    before = time.time_ns() // 1_000_000
    got = native.keyed_record(
        Message(topic="T", body=b"hi", keys="k"), b"\x01T", R.MAGIC_V1, 2, 5, 1000, 4096, 100, 200, host, None
    )
    after = time.time_ns() // 1_000_000
    born_ts, store_ts = struct.unpack_from(">q", got[0], 40)[0], struct.unpack_from(">q", got[0], 56)[0]
    assert before <= born_ts <= store_ts == got[3] <= after
