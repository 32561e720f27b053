"""The put lane (put/lane.py, lane.c) against the pure path: random message sequences put with the lane and with
the pure engine give the same PutResults and byte-identical CommitLog, ConsumeQueue and index files, through
segment rolls (tiny CommitLog segments), ConsumeQueue file rolls, new queues, several topics, keys with spaces,
empty keys and unicode, with producer batches and messages the lane leaves to Python in between."""

import os
import tempfile
import threading
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.formats import record as R

from .test_put_native import engine, store_files

TEXT = st.one_of(
    st.sampled_from(["", " ", "a b", " a  b ", "order-1", "é", "中文 键", "\U0001f600", "\ud800", "x\x02y"]),
    st.text(max_size=8),
)
KEYS = st.one_of(st.none(), TEXT, st.lists(TEXT, max_size=3))
PROPS = st.one_of(
    st.none(),
    st.builds(lambda u: {"UNIQ_KEY": u}, TEXT),
    st.dictionaries(st.sampled_from(["UNIQ_KEY", "a", "KEYS", "TAGS", "DELAY", "INNER_NUM"]), TEXT, max_size=3),
)
TOPICS = ["T", "T", "U", "Topic_%|2"]
# born hosts as a broker's send names its producer ("ip:port"), and forms the lane leaves to host_to_bytes: IPv6,
# leading zeros (refused), a port with a space or out of range, no port, the empty string (the store's host)
HOSTS = st.sampled_from([None, None, "10.0.0.1:9", "127.0.0.1:65535", "255.255.255.255:4294967295", "0.0.0.0:0",
                         "[::1]:80", "01.2.3.4:5", "1.2.3.4: 5", "1.2.3.4:4294967296", "1.2.3.4", "1.2.3:4", ""])  # fmt: skip
# raw properties as a producer's send carries them (str or bytes), with the names the queues and the index read
RAW = st.one_of(
    st.none(),
    st.none(),
    st.lists(
        st.sampled_from(
            [
                "KEYS\x01a b\x02",
                "TAGS\x01t\x02",
                "UNIQ_KEY\x01u1\x02",
                "a\x01b\x02",
                "é\x01中\x02",
                "DELAY\x013\x02",
                "INNER_NUM\x012\x02",
                "INNER_BASE\x01\x02",
                "x\ud800\x01y\x02",
                "KEYS\x01\x02",
                "TAGS",
            ]
        ),
        max_size=4,
    ).map("".join),
    st.binary(max_size=12),
)


@st.composite
def messages(draw, topic=None):
    odd = draw(st.integers(0, 9)) == 0  # now and then one the lane leaves to Python
    return Message(
        topic=topic or draw(st.sampled_from(TOPICS)),
        body=draw(st.one_of(st.binary(max_size=120), st.integers(0, 900).map(lambda n: b"b" * n))),
        tags=draw(st.one_of(st.none(), TEXT)),
        keys=draw(KEYS),
        properties=draw(PROPS),
        flag=draw(st.sampled_from([0, 0, 7, -1])),
        born_timestamp=draw(st.one_of(st.none(), st.just(1_600_000_000_000))),
        sys_flag=R.TRANSACTION_PREPARED_TYPE if odd and draw(st.booleans()) else 0,
        born_host=draw(HOSTS),
        raw_properties=draw(RAW),
    )


OPS = st.lists(
    st.one_of(
        st.tuples(st.integers(0, 2000), st.just("put"), messages(), st.integers(0, 3)),
        st.tuples(st.integers(0, 2000), st.just("put"), messages(), st.integers(0, 3)),
        st.tuples(st.integers(0, 2000), st.just("batch"), st.lists(messages("T"), min_size=1, max_size=4), st.just(1)),
    ),
    max_size=40,
)


class CountingLane:
    """The store's lane, counting the puts it took."""

    def __init__(self, lane):
        self.lane, self.taken = lane, 0

    def put(self, msg, queue_id):
        r = self.lane.put(msg, queue_id)
        self.taken += r is not None
        return r


def run(path, ops, lane_on, native, index=True):
    now = [1_700_000_000_000]
    cfg = StoreConfig(
        mapped_file_size_commit_log=4096,
        mapped_file_size_consume_queue=20 * 6,
        max_hash_slot_num=7,
        max_index_num=40,
        message_index_enable=index,
        clock=lambda: now[0],
    )
    answers = []
    with engine(lane_on, native):
        s = MessageStore.open(path, cfg)
        try:
            assert (s._lane is not None) == lane_on
            if lane_on:
                s._lane = counting = CountingLane(s._lane)
            for step, kind, payload, qid in ops:
                now[0] += step
                r = s.put(payload, qid) if kind == "put" else s.put_batch(payload, qid)
                if kind == "put":
                    answers.append((r.status, r.physical_offset, r.size, r.queue_offset, r.queue_id, r.msg_id))
                    answers.append((r.store_timestamp, r.msg_num))
                else:
                    answers.append((r.status, r.physical_offset, r.queue_offset, [x.physical_offset for x in r]))
            answers.append(
                sorted((t, q, s.max_offset(t, q)) for t in set(TOPICS) for q in range(4) if s.max_offset(t, q))
            )
            answers.append([(m.physical_offset, m.body) for m in s.query("T", "a", 100)])
            s._index.build()
        finally:
            s.close()
    return answers, counting.taken if lane_on else 0


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(OPS, st.booleans())
def test_lane_same_as_pure(native, ops, index):
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "lane"), os.path.join(d, "pure")
        got, taken = run(a, ops, True, native, index)
        want, _ = run(b, ops, False, native, index)
        assert got == want
        assert store_files(a) == store_files(b)


def test_lane_takes_the_common_puts(native, tmp_path):
    """Producers' messages through rolls of every file: the lane takes most, the bytes are the pure path's."""
    ops = []
    for i in range(400):
        m = Message(
            topic=TOPICS[i % 4],
            body=bytes([i % 256]) * (i % 50),
            tags=f"Tag{i % 3}" if i % 5 else None,
            keys=f"order-{i} k{i % 7}" if i % 4 else ["", f"é{i}"],
            properties={"UNIQ_KEY": f"{i:032X}"} if i % 3 else None,
        )
        if i % 2:  # as a broker's send puts it: the producer's address, the properties string as it came
            m.born_host, m.raw_properties = (
                f"10.0.{i % 3}.7:{40000 + i}",
                m.properties_bytes().decode() + "CLUSTER\x01c\x02",
            )
        ops.append((i % 3, "put", m, i % 3))
    got, taken = run(str(tmp_path / "lane"), ops, True, native)
    want, _ = run(str(tmp_path / "pure"), ops, False, native)
    assert got == want
    assert store_files(str(tmp_path / "lane")) == store_files(str(tmp_path / "pure"))
    assert taken > 250  # (the rest: first puts of a queue, segment and file rolls)


def test_no_lane_where_it_does_not_apply(native, tmp_path):
    for cfg in (
        StoreConfig(flush_disk_type="SYNC_FLUSH"),
        StoreConfig(enabled_append_prop_crc=True),
        StoreConfig(dispatch_in_put_path=False),
        StoreConfig(store_host="[::1]:10911"),
    ):
        d = str(tmp_path / str(id(cfg)))
        with MessageStore.open(d, cfg) as s:
            assert s._make_lane() is None


ODD_FIELDS = st.one_of(
    st.tuples(st.sampled_from(["T", "U"]), st.binary(max_size=5), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just("T"), st.sampled_from([None, bytearray(b"a"), "s"]), st.just(0)),
    st.tuples(st.just("T"), st.just(b""), st.sampled_from([True, 2**31, -(2**31) - 1, 1.0, None])),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(ODD_FIELDS, min_size=1, max_size=6))
def test_batch_fields_is_the_python_columns(native, fields):
    """batch_fields answers the columns put_batch builds in Python, or None for any batch its checks refuse
    or look at closer (another topic, a body not bytes, a flag not an int32)."""
    msgs = [Message(topic=t, body=b, flag=f) for t, b, f in fields]
    got = native.batch_fields(msgs, "T")
    plain = all(
        m.topic == "T" and type(m.body) is bytes and type(m.flag) is int and -(2**31) <= m.flag < 2**31 for m in msgs
    )
    if plain:
        assert got == ([m.body for m in msgs], [m.flag for m in msgs], [len(m.body) for m in msgs])
    else:
        assert got is None


def test_lane_wakes_long_polls(native, tmp_path):
    """A put through the lane wakes a get waiting for arrivals (as pipeline.put's notify does)."""
    with MessageStore.open(str(tmp_path), StoreConfig()) as s:
        assert s.put(Message("T", b"a"), 0).ok  # (the queue's first unit: the Python path)
        s._cleanup.next_disk_check = float("inf")  # (a put due to measure the disk goes the Python way)
        waiter = threading.Thread(target=s.wait_for_arrival, args=(600.0,))
        waiter.start()
        while s._arrivals.waiters == 0:
            time.sleep(0.001)
        assert s._lane.put(Message("T", b"b"), 0).ok
        waiter.join(60.0)
        assert not waiter.is_alive()


def test_lane_leaves_closed_gates_and_extra_dispatchers_to_python(native, tmp_path):
    with MessageStore.open(str(tmp_path), StoreConfig()) as s:
        assert s.put(Message("T", b"a"), 0).ok
        s._cleanup.next_disk_check = float("inf")  # (a put due to measure the disk goes the Python way)
        assert s._lane.put(Message("T", b"b"), 0).queue_offset == 1
        s._cleanup.commitlog.disk_full = True
        assert s._lane.put(Message("T", b"c"), 0) is None
        s._cleanup.commitlog.disk_full = False
        s._flush_service.health.writeable = False
        assert s._lane.put(Message("T", b"c"), 0) is None
        s._flush_service.health.writeable = True
        s._cleanup.next_disk_check = 0.0  # due to measure the disk again: the Python path measures it
        assert s._lane.put(Message("T", b"c"), 0) is None
        s._cleanup.next_disk_check = float("inf")
        seen = []
        s.add_dispatcher(lambda req: seen.append(req.consume_queue_offset))
        assert s._lane.put(Message("T", b"c"), 0) is None
        assert s.put(Message("T", b"c"), 0).queue_offset == 2 and seen == [2]
