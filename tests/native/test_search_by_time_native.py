"""offset_by_time's binary search (getOffsetInQueueByTime) in C against the pure reference,
log.consume_queue.search_by_time_py: the same queue offset for any time, boundary and search floor, over a
real store whose messages carry chosen store times (repeats included), and over ConsumeQueue bytes with
units overwritten by garbage (offsets and sizes pointing anywhere, into the log or past it)."""

import shutil
import struct
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.log import consume_queue as CQ

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOPIC = "TimeTopic"
UNIT = 20


def _store(times):
    """A store with one message per store time in `times` (small segments, so the log spans several; no index,
    whose files hundreds of examples would fill the disk with); removed by _close."""
    now = [0]
    cfg = StoreConfig(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=64 * UNIT,
                      message_index_enable=False, clock=lambda: now[0])  # fmt: skip
    store = MessageStore.open(tempfile.mkdtemp(prefix="rs-bytime-"), cfg)
    for i, t in enumerate(times):
        now[0] = t  # every clock reading of this put (born and store time) is t
        assert store.put(Message(topic=TOPIC, body=b"b%d" % i), 0).ok
    return store


def _close(store):
    store.close()
    shutil.rmtree(store.root, ignore_errors=True)


def _answers(store, buf, floor, ceiling, ts, lower, native):
    cl = store._commitlog
    args = (buf, 0, floor, ceiling, ts, lower, cl.min_offset(), cl.files.files, cl.file_size, cl.min_offset(),
            cl.max_offset())  # fmt: skip
    return CQ.search_by_time_py(*args), native.search_by_time(*args)


@SETTINGS
@given(
    steps=st.lists(st.integers(0, 3), min_size=1, max_size=60),
    probes=st.lists(st.tuples(st.integers(990, 1200), st.booleans(), st.integers(0, 59)), min_size=1, max_size=8),
)
def test_same_offset_as_reference(native, steps, probes):
    times, t = [], 1000
    for s in steps:  # non-decreasing store times: 0 steps make runs of equal times
        t += s
        times.append(t)
    store = _store(times)
    try:
        cq = store.consume_queue(TOPIC, 0)
        mf = cq.files.files[0]
        ceiling = len(times) * UNIT - UNIT
        for ts, lower, floor_unit in probes:
            floor = min(floor_unit, len(times) - 1) * UNIT
            py, c = _answers(store, mf.buf, floor, ceiling, ts, lower, native)
            assert c == py, (ts, lower, floor)
        # and the whole lookup agrees with what the times say (an expectation of its own)
        for ts, lower, _ in probes:
            want = (
                next((i for i, x in enumerate(times) if x >= ts), len(times))
                if lower
                else max([i for i, x in enumerate(times) if x <= ts] or [0])
            )
            assert store.offset_by_time(TOPIC, 0, ts, "lower" if lower else "upper") == min(want, len(times))
    finally:
        _close(store)


@SETTINGS
@given(
    n=st.integers(2, 40),
    garbage=st.lists(
        st.tuples(st.integers(0, 39), st.integers(-(2**40), 2**40), st.integers(-(2**31), 2**31 - 1)),
        min_size=1,
        max_size=6,
    ),
    near=st.lists(st.tuples(st.integers(0, 39), st.integers(-300, 9000), st.integers(-10, 400)), max_size=6),
    ts=st.integers(990, 1100),
    lower=st.booleans(),
)
def test_same_offset_over_garbage_units(native, n, garbage, near, ts, lower):
    store = _store([1000 + i for i in range(n)])
    try:
        buf = bytearray(store.consume_queue(TOPIC, 0).files.files[0].buf[: n * UNIT])
        for i, pos, size in garbage + near:  # units anywhere: past the log, mid-record, too short, negative
            if i < n:
                struct.pack_into(">qi", buf, i * UNIT, pos, size)
        py, c = _answers(store, bytes(buf), 0, n * UNIT - UNIT, ts, lower, native)
        assert c == py
    finally:
        _close(store)
