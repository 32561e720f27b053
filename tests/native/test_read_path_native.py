"""The read path's native calls on real stores against the pure path, answer for answer:

- get: one store copied twice, the same damage done to both (corrupted records, an expired CommitLog file),
  then every get asked of the copy read natively (get_plain's one call, lazy messages) and of the copy read
  by the pure reference (the careful loop, decode_record_py and take_units_py): the same GetResults, status,
  offsets, sizes and every field of every message, or the same error; plain and batch ConsumeQueue topics;
- query: store.query (query_index: the index walk and the key re-check in C) against Lookups.query_py, with a
  tiny index (chains mix many keys), keys whose hashes collide, keys with spaces, unique keys, corrupted and
  expired records;
- a lazy message (what the native get and query build) behaves as an eagerly decoded one: equality both
  ways, repr, every documented field, properties, pickling and copying."""

import contextlib
import copy
import os
import pickle
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore import engine
from rocketstore.errors import CorruptDataError
from rocketstore.formats import record as R

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BATCH = {"queue.type": "BatchCQ"}
# "Aa" and "BB" have the same Java hashCode: "T#kAa" and "T#kBB" share an index hash
KEYS = ["k1", "k2", "kAa", "kBB", "a b", "x"]


def config(**kw):
    return StoreConfig(
        mapped_file_size_commit_log=4096,
        mapped_file_size_consume_queue=20 * 12,
        mapped_file_size_batch_consume_queue=46 * 12,
        max_hash_slot_num=3,
        max_index_num=400,
        **kw,
    )


@st.composite
def workloads(draw):
    msgs = []
    for i in range(draw(st.integers(1, 45))):
        topic = draw(st.sampled_from(["T", "T", "T", "O"]))
        keys = draw(st.lists(st.sampled_from(KEYS), max_size=3))
        props = {"UNIQ_KEY": draw(st.sampled_from(KEYS + [f"u{i}", "k1 k2"]))} if draw(st.booleans()) else None
        body = bytes([i % 256]) * draw(st.integers(0, 120))
        msgs.append(
            Message(topic, body, tags=draw(st.sampled_from([None, "a", "b", "c"])), keys=keys, properties=props)
        )
    batches = draw(st.lists(st.integers(1, 4), max_size=4))
    damage = draw(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 250), st.integers(1, 255)), max_size=2))
    return msgs, batches, damage, draw(st.integers(0, 3)) == 0


def build(root, workload):
    """The store at `root` with the workload put and the damage done, closed; returns the records' places."""
    msgs, batches, _, _ = workload
    places = []
    with MessageStore.open(root, config()) as s:
        s.create_topic("B", queues=1, attributes=BATCH)
        for m in msgs:
            r = s.put(m, 0)
            assert r.ok
            places.append((r.physical_offset, r.size))
        for i, size in enumerate(batches):
            assert s.put_batch([Message("B", bytes([i]) * 30, tags="a" if j % 2 else "b") for j in range(size)], 0).ok
        s.wait_dispatched()
    return places


def damage(s, workload, places):
    """Flip bytes of some records in the open store's mapping (recovery never sees them), maybe drop the first
    CommitLog file (expired, the queues not corrected yet)."""
    _, _, flips, expire = workload
    for which, at, xor in flips:
        pos, size = places[which % len(places)]
        mf = s._commitlog.files.find(pos)
        rel = pos - mf.file_from_offset + at % size
        mf.buf[rel] ^= xor
    if expire and len(s._commitlog.files.files) > 1:
        s._commitlog.files.delete_head([s._commitlog.files.files[0]])


def answer(get):
    try:
        r = get()
    except CorruptDataError as e:  # the two stores' paths differ: the file is named relative to its store
        return (
            "error",
            e.reason,
            e.offset,
            os.path.relpath(e.file, os.path.dirname(os.path.dirname(e.file))) if e.file else None,
        )
    return (
        r.status,
        r.next_begin_offset,
        r.min_offset,
        r.max_offset,
        r.buffer_total_size,
        r.message_count,
        r.requested_offset,
        [(type(m), m.as_dict(), m.properties_raw, m.version) for m in r.messages],
    )


@contextlib.contextmanager
def pure_get():
    """get on the pure engine inside: the careful loop, decode_record_py and take_units_py."""
    with engine.using("pure"):
        yield


@SETTINGS
@given(workloads())
def test_get_answers_as_the_pure_path(native, workload):
    base = tempfile.mkdtemp()
    try:
        a, b = os.path.join(base, "a"), os.path.join(base, "b")
        places = build(a, workload)
        shutil.copytree(a, b)
        with MessageStore.open(a, config()) as sa, MessageStore.open(b, config()) as sb:
            damage(sa, workload, places)
            damage(sb, workload, places)
            for topic in ("T", "B"):
                hi = sa.max_offset(topic, 0)
                for off in sorted({0, 1, 2, 5, hi // 2, hi - 1, hi, hi + 1}):
                    for n, tags in ((32, None), (3, "a"), (1, None), (32, "b || c"), (7, "zz")):
                        native_answer = answer(lambda: sa.get("g", topic, 0, off, n, tags=tags))
                        with pure_get():
                            pure_answer = answer(lambda: sb.get("g", topic, 0, off, n, tags=tags))
                        assert native_answer == pure_answer, (topic, off, n, tags)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def query_answer(q, *args):
    r = q(*args)
    ids = [next(i for i, o in enumerate(r) if o is m) for m in r]  # the same message twice is one object
    return (
        [(m.as_dict(), m.properties_raw) for m in r],
        ids,
        r.index_last_update_timestamp,
        r.index_last_update_phy_offset,
    )


@SETTINGS
@given(workloads(), st.data())
def test_query_answers_as_the_pure_path(native, workload, data):
    base = tempfile.mkdtemp()
    try:
        places = build(base, workload)
        with MessageStore.open(base, config()) as s:
            damage(s, workload, places)
            times = sorted({0, 1} | {data.draw(st.integers(0, 2**41)) for _ in range(2)})
            for key in KEYS + ["u0", "u1", "k1 k2", "missing", "kA", ""]:
                for topic in ("T", "O", "B"):
                    for n in (32, 1, 2):
                        for begin, end in ((0, None), (times[-1], None), (0, times[1])):
                            args = (topic, key, n, begin, end)
                            assert query_answer(s.query, *args) == query_answer(s._lookups.query_py, *args), args
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_query_is_native_when_built(native, tmp_path):
    with MessageStore.open(str(tmp_path), config()) as s:
        s.put(Message("T", b"x", keys=["kAa", "kBB"]), 0)
        s.put(Message("T", b"y", keys="kBB"), 0)
        calls = []
        real = s._lookups.look
        s._lookups.look = lambda phy: calls.append(phy) or real(phy)
        got = s.query("T", "kBB")
        assert calls == []  # no Python look per hit
        # x's two entries (kAa, kBB: one hash) both lead to a record with kBB: counted twice, as query_py does
        assert [m.body for m in got] == [b"x", b"x", b"y"] and got[0] is got[1]
        assert query_answer(s.query, "T", "kBB") == query_answer(s._lookups.query_py, "T", "kBB")
        assert [m.body for m in s.query("T", "kAa")] == [b"x", b"x"]  # y's kBB entry re-checked away
        with pytest.raises(TypeError, match="as strings"):
            s.query("T", 5)


def lazy_and_eager(tmp_path):
    with MessageStore.open(str(tmp_path), config()) as s:
        props = {"UNIQ_KEY": "u1", "x": "\u00e9t\u00e9"}
        r = s.put(Message("T", b"body", tags="a", keys=["k1", "k2"], properties=props, flag=3), 0)
        lazy = s.get("g", "T", 0, 0, 1).messages[0]
        eager = R.decode_record_py(s.record_bytes(r.physical_offset, r.size), 0)
        return lazy, eager


def test_a_lazy_message_is_the_decoded_one(native, tmp_path):
    lazy, eager = lazy_and_eager(tmp_path)
    assert type(lazy) is R.StoredMessage and lazy == eager and eager == lazy
    lazy, eager = lazy_and_eager(tmp_path / "again")
    assert repr(lazy) == repr(eager)
    lazy, eager = lazy_and_eager(tmp_path / "fields")
    for name in R.StoredMessage.FIELDS + ("unique_key", "version", "properties_raw", "magic", "body_crc"):
        assert getattr(lazy, name) == getattr(eager, name), name
    assert lazy.keys == ["k1", "k2"] and lazy.tags == "a" and lazy.body == b"body"
    assert lazy.body is lazy.body and lazy.properties is lazy.properties  # decoded once, then kept
    with pytest.raises(AttributeError):
        lazy.no_such_field  # noqa: B018


def test_a_lazy_message_pickles_and_copies(native, tmp_path):
    lazy, eager = lazy_and_eager(tmp_path)
    assert pickle.loads(pickle.dumps(lazy)) == eager
    lazy, eager = lazy_and_eager(tmp_path / "copy")
    assert copy.copy(lazy) == eager and copy.deepcopy(lazy) == eager
    assert lazy.is_at("T", 0, 0, eager.size, eager.physical_offset)
