"""Puts to batch-ConsumeQueue topics (RIP-26), compiled against the pure reference: the same CommitLog, batch
ConsumeQueue and index files and the same PutResult / PutBatchResult for random sequences of plain and
inner-batch messages (INNER_NUM missing, 0, negative, not a number, beyond a short; unicode properties;
segments rolling), and the inner-batch decoders on random and corrupted bodies. Plus bytes by hand."""

import os
import struct
import tempfile
import zlib
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore import engine as engine_module
from rocketstore.errors import CorruptDataError
from rocketstore.formats import inner_batch as IB
from rocketstore.formats import properties as P

SPECIAL = ["", " ", "a b", "TagA", "\ud800", "\udfff", "é", "\U0001f600", "中文", "\ud83d\ude00"]
CLEAN = st.one_of(
    st.text(st.characters(codec=None, exclude_characters="\x01\x02"), max_size=8), st.sampled_from(SPECIAL)
)
# a separator now and then: text_problem refuses it (the C leaves it to Python, which does)
TEXT = st.integers(0, 30).flatmap(lambda i: st.sampled_from(["\x01", "x\x02y"]) if i == 0 else CLEAN)
INNER_NUMS = st.sampled_from(
    [
        "1",
        "2",
        "7",
        "3",
        "0",
        "-2",
        "abc",
        "",
        "40000",
        "32767",
        "-32768",
        "32768",
        "+4",
        "٣",
        "1_0",
        " 2",
        "\U0001d7d8",
    ]
)
NAMES = st.one_of(TEXT, st.sampled_from(["UNIQ_KEY", "KEYS", "TAGS", "__CRC32#", "INNER_BASE", "a", "WAIT"]))


@st.composite
def properties(draw):
    if draw(st.integers(0, 12)) == 0:
        return draw(st.sampled_from([None, {}, {"k": None}, [], {1: "a"}]))
    props = draw(st.dictionaries(NAMES, TEXT, max_size=4))
    if draw(st.booleans()):
        props[P.INNER_NUM] = draw(INNER_NUMS)
    return props


@st.composite
def messages(draw, topic=None):
    inner = draw(st.integers(0, 2)) > 0
    sys_flag = (0x80 if inner else 0) | draw(st.sampled_from([0, 0, 0, 0x4, 0x8, 0xC, 0x1, 0x10, 0x20, 0x40]))
    return Message(
        topic=topic or draw(st.sampled_from(["B", "B", "B", "T"])),
        body=draw(
            st.integers(0, 20).flatmap(
                lambda i: st.sampled_from([b"z" * 500, bytearray(b"ab")]) if i == 0 else st.binary(max_size=120)
            )
        ),
        tags=draw(st.one_of(st.none(), TEXT)),
        keys=draw(st.one_of(st.none(), TEXT, st.lists(TEXT, max_size=3), st.lists(TEXT, max_size=2).map(tuple))),
        properties=draw(properties()),
        flag=draw(st.integers(-(2**31), 2**31 - 1)),
        sys_flag=sys_flag,
        born_timestamp=draw(st.sampled_from([None, None, 1_650_000_000_000])),
        born_host=draw(st.sampled_from([None] * 6 + ["10.0.0.1:5", "[2001:db8::7]:40013", "bad"])),
        store_host=draw(st.sampled_from([None] * 6 + ["[fd00::5]:10911"])),
        raw_properties=draw(st.sampled_from([None] * 15 + ["INNER_NUM\x012\x02TAGS\x01r\x02", b"KEYS\x01k\x02"])),
    )


OPS = st.lists(
    st.one_of(
        st.tuples(st.integers(0, 3000), st.just("put"), messages(), st.integers(0, 1)),
        st.tuples(
            st.integers(0, 3000),
            st.just("batch"),
            st.lists(messages(topic="B"), min_size=1, max_size=5) | st.lists(messages(), min_size=1, max_size=3),
            st.integers(0, 1),
        ),
    ),
    max_size=14,
)


@contextmanager
def engine(on: bool, native):
    with engine_module.using("native" if on else "pure"):
        yield


def run_store(path, ops, append_crc, max_size, on, native):
    now = [1_700_000_000_000]

    def clock():
        now[0] += 1
        return now[0]

    cfg = StoreConfig(
        mapped_file_size_commit_log=4096,
        mapped_file_size_consume_queue=20 * 10,
        mapped_file_size_batch_consume_queue=46 * 6,
        max_hash_slot_num=8,
        max_index_num=24,
        enabled_append_prop_crc=append_crc,
        max_message_size=max_size,
        clock=clock,
    )
    answers = []
    with engine(on, native):
        s = MessageStore.open(path, cfg)
        try:
            s.create_topic("B", queues=2, attributes={"queue.type": "BatchCQ"})
            for step, kind, payload, qid in ops:
                now[0] += step
                try:
                    r = s.put(payload, qid) if kind == "put" else s.put_batch(payload, qid)
                except Exception as e:  # the reference's own exceptions (a bad field): the same from both
                    answers.append(type(e).__name__)
                    continue
                answers.append(
                    (
                        r.status,
                        r.physical_offset,
                        r.queue_offset,
                        r.size,
                        r.store_timestamp,
                        getattr(r, "msg_num", None),
                        [(x.physical_offset, x.size) for x in r] if kind == "batch" and r.ok else None,
                    )
                )
            answers.append(("max", s.max_offset("B", 0), s.max_offset("B", 1), s.max_offset("T", 0)))
            s._index.build()
        finally:
            s.close()
    return answers


def store_files(path):
    out = {}
    for sub in ("commitlog", "consumequeue", "batchconsumequeue"):
        for root, _, files in os.walk(os.path.join(path, sub)):
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    out[os.path.relpath(os.path.join(root, f), path)] = fh.read()
    idx = os.path.join(path, "index")
    names = sorted(os.listdir(idx)) if os.path.isdir(idx) else []
    out["index"] = [open(os.path.join(idx, n), "rb").read() for n in names]
    return out


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(OPS, st.booleans(), st.sampled_from([300, 4 * 1024 * 1024]))
def test_batch_topic_stores_byte_identical(native, ops, append_crc, max_size):
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "native"), os.path.join(d, "pure")
        assert run_store(a, ops, append_crc, max_size, True, native) == run_store(
            b, ops, append_crc, max_size, False, native
        )
        assert store_files(a) == store_files(b)


def test_many_batches_roll_segments(native, tmp_path):
    """Enough plain, inner-batch and producer-batch puts to roll CommitLog, batch queue and index files."""
    ops = []
    for i in range(300):
        inner = i % 3 == 0
        ops.append(
            (
                7,
                "put",
                Message(
                    "B",
                    bytes([i % 256]) * (i % 50),
                    tags=f"T{i % 4}",
                    keys=f"k{i}",
                    properties={"UNIQ_KEY": f"{i:032X}", **({"INNER_NUM": str(i % 5)} if inner else {})},
                    sys_flag=0x80 if inner else 0,
                ),
                i % 2,
            )
        )
        if i % 10 == 0:
            ops.append((3, "batch", [Message("B", b"m" * j, tags="x", keys=[f"b{i}", str(j)]) for j in range(7)], 0))
    a, b = str(tmp_path / "native"), str(tmp_path / "pure")
    assert run_store(a, ops, True, 4 * 1024 * 1024, True, native) == run_store(
        b, ops, True, 4 * 1024 * 1024, False, native
    )
    fa, fb = store_files(a), store_files(b)
    assert len([k for k in fa if k.startswith("commitlog")]) > 3
    assert len([k for k in fa if k.startswith("batchconsumequeue")]) > 3
    assert fa == fb


# ---------------------------------------------------------------- the inner-batch body
@settings(max_examples=150, deadline=None)
@given(st.lists(messages(topic="B"), max_size=6))
def test_inner_body_same_as_reference(native, msgs):
    got = native.inner_body(msgs, "B")
    if got is None:  # left to Python: what its checks refuse, or what the C does not take on
        return
    assert all(m.text_problem() is None and type(m.body) is bytes for m in msgs)
    assert got == IB.encode_messages((m.body, m.properties_bytes(drop_crc=True), m.flag) for m in msgs)


def test_inner_body_repeated_texts(native):
    """Messages sharing their tags and keys objects reuse one properties encoding; any change is seen."""
    t, k = "TagA", "k1 k2"
    msgs = [Message("B", b"%d" % i, tags=t, keys=k) for i in range(3)]
    msgs += [Message("B", b"x", tags=t, keys=k, properties={"p": "1"}), Message("B", b"y", tags=t, keys=k)]
    msgs += [Message("B", b"z", tags="TagA"), Message("B", b"w", tags=t), Message("B", b"v", tags=t, keys=[k])]
    msgs += [Message("B", b"u", tags=t, keys=[k]), Message("B", b"s", keys=k), Message("B", b"r", tags=None, keys=k)]
    want = IB.encode_messages((m.body, m.properties_bytes(drop_crc=True), m.flag) for m in msgs)
    assert native.inner_body(msgs, "B") == want
    assert want.count(b"KEYS\x01k1 k2\x02TAGS\x01TagA\x02") == 7  # all but the four with tags or keys alone


def test_inner_body_leaves_odd_messages_to_python(native):
    ok = Message("B", b"x", tags="t")
    assert native.inner_body([ok], "B") == IB.encode_message(b"x", b"TAGS\x01t\x02")
    assert native.inner_body([ok, Message("C", b"x")], "B") is None
    assert native.inner_body([Message("B", bytearray(b"x"))], "B") is None
    assert native.inner_body([Message("B", b"x", flag=2**31)], "B") is None
    assert native.inner_body([Message("B", b"x", tags="a\x02")], "B") is None
    assert native.inner_body([Message("B", b"x", raw_properties="a\x01b\x02")], "B") is None
    assert native.inner_body([Message("B", b"x", properties={"a": "v" * 40000})], "B") is None
    assert native.inner_body([], "B") == b""


@st.composite
def inner_bodies(draw):
    msgs = draw(st.lists(st.tuples(st.binary(max_size=20), st.binary(max_size=12), st.integers(-5, 5)), max_size=4))
    buf = bytearray(IB.encode_messages(msgs))
    for _ in range(draw(st.integers(0, 3))):
        if buf:
            i = draw(st.integers(0, len(buf) - 1))
            buf[i] = draw(st.sampled_from([0, 0xFF, 0x7F, 0x80, buf[i] ^ 1]))
    if draw(st.booleans()) and buf:
        buf = buf[: draw(st.integers(0, len(buf)))]
    return bytes(buf)


def outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except CorruptDataError as e:
        return ("corrupt", e.reason, e.offset)


@settings(max_examples=300, deadline=None)
@given(inner_bodies(), st.integers(-2, 30), st.one_of(st.none(), st.integers(-2, 120)))
def test_inner_decoders_same_as_reference(native, buf, start, end):
    for fn_native, fn_py in (
        (IB.decode_messages_native, IB.decode_messages_py),
        (IB.count_messages_native, IB.count_messages_py),
    ):
        wide = memoryview(buf[: len(buf) // 4 * 4]).cast("i")  # len() counts ints: the reference decides
        for data in (buf, memoryview(buf), bytearray(buf), wide):
            want = outcome(fn_py, data, 0, None)
            got = outcome(fn_native, data, 0, None)
            assert got == want
            if want[0] == "ok" and fn_py is IB.decode_messages_py:
                assert all(type(m) is IB.InnerMessage for m in got[1])
        try:
            want = outcome(fn_py, buf, start, end)
        except Exception as e:  # struct.error for bounds outside the buffer: the native one defers to Python
            with pytest.raises(type(e)):
                fn_native(buf, start, end)
        else:
            assert outcome(fn_native, buf, start, end) == want


TRIPLE = st.tuples(
    st.one_of(st.binary(max_size=12), st.sampled_from([bytearray(b"ab"), memoryview(b"cd")])),
    st.one_of(st.binary(max_size=12), st.sampled_from(["TAGS\x01é\x02", {"a": "b"}, b"p" * 40000])),
    st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([2**31, -(2**31) - 1, True])),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(TRIPLE, TRIPLE.map(list), TRIPLE.map(lambda t: IB.InnerMessage(*t))), max_size=5))
def test_inner_encode_same_as_reference(native, msgs):
    want = outcome_any(IB.encode_messages_py, msgs)
    assert outcome_any(IB.encode_messages_native, msgs) == want
    assert outcome_any(IB.encode_messages_native, iter(msgs)) == want
    got = native.inner_encode(msgs)
    assert got is None or ("ok", got) == want


def outcome_any(fn, arg):
    try:
        return ("ok", fn(arg))
    except Exception as e:  # the reference's refusals (a property string too long, a flag out of range)
        return (type(e).__name__, str(e))


def test_inner_decode_by_hand(native):
    # TOTALSIZE 22+2+3=27 | MAGIC 0 | BODYCRC 0 | FLAG 7 | BODYLEN 2 "hi" | PROPLEN 3 "a\x01b"
    one = struct.pack(">iiiii", 27, 0, 0, 7, 2) + b"hi" + struct.pack(">h", 3) + b"a\x01b"
    assert native.inner_decode(one * 2, 0, None, IB.InnerMessage) == [IB.InnerMessage(b"hi", b"a\x01b", 7)] * 2
    assert native.inner_count(one * 2, 27, None) == 1
    with pytest.raises(CorruptDataError) as e:
        native.inner_decode(one[:-1], 0, None, IB.InnerMessage)
    assert e.value.reason == "properties length 3 overruns the 2 bytes left" and e.value.offset == 0
    bad = struct.pack(">i", 28) + one[4:]
    with pytest.raises(CorruptDataError) as e:
        native.inner_decode(one + bad, 0, None, IB.InnerMessage)
    assert e.value.reason == "total size 28 does not match its fields (27 bytes)" and e.value.offset == 27


# ---------------------------------------------------------------- a record by hand
def test_bcq_record_by_hand(native):
    """An inner batch at queue offset 5: INNER_BASE added, the properties in HashMap order, the CRC entry."""
    msg = Message("B", b"body", properties={"INNER_NUM": "3", "UNIQ_KEY": "U", "__CRC32#": "9"}, sys_flag=0x80)
    host = bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big")
    tail = b"\x01B"  # v1: TOPICLEN 1 byte
    got = native.bcq_record(msg, tail, -626843481, 1, 5, 4096, 10_000, 1000, 70_000, host, host, True, lambda: 77)
    record, props, code, batch, info, store_ts, sys_flag, takes = got
    # buckets of a 16-slot HashMap ((h ^ h >>> 16) & 15, h = String.hashCode): INNER_BASE 1, UNIQ_KEY 12,
    # INNER_NUM 14; the CRC entry is dropped from the map and appended after
    assert props == b"INNER_BASE\x015\x02UNIQ_KEY\x01U\x02INNER_NUM\x013\x02"
    assert (code, batch, info, store_ts, sys_flag, takes) == (0, 3, (0, "", "U", False), 77, 0x80, True)
    stored = props + bytes(20)
    size = 88 + 4 + 2 + 2 + len(stored)
    fixed = struct.pack(">iiiiiqq", size, -626843481, zlib.crc32(b"body") & 0x7FFFFFFF, 1, 0, 5, 4096)
    assert record[:36] == fixed
    assert struct.unpack_from(">iq", record, 36) == (0x80, 77)  # sysFlag; bornTimestamp from the clock
    assert record[88 : 88 + 4 + 1 + 1 + 2 + len(props)] == b"body" + tail + struct.pack(">h", len(stored)) + props
    crc = zlib.crc32(record[:-20]) & 0x7FFFFFFF
    assert record[-20:] == P.crc32_property(crc)
    # not a short: Python decides (and logs); without INNER_BATCH_FLAG an INNER_NUM is Python's to refuse
    for bad in ("40000", "x", ""):
        m = Message("B", b"", properties={"INNER_NUM": bad}, sys_flag=0x80)
        assert native.bcq_record(m, tail, 0, 0, 0, 0, 10_000, 1000, 70_000, host, host, False, None) is None
    m = Message("B", b"", properties={"INNER_NUM": "2"})
    assert native.bcq_record(m, tail, 0, 0, 0, 0, 10_000, 1000, 70_000, host, host, False, None) is None
    # a record that does not leave 8 bytes of room: Python rolls the segment
    m = Message("B", b"")
    assert native.bcq_record(m, tail, 0, 0, 0, 0, 88 + 2 + 2 + 7, 1000, 70_000, host, host, False, None) is None
    assert native.bcq_record(m, tail, 0, 0, 0, 0, 88 + 2 + 2 + 8, 1000, 70_000, host, host, False, None) is not None
