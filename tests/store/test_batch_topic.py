"""Batch-ConsumeQueue topics (RIP-26) through the store: topic configs, inner-batch puts, gets, time lookups,
the index, recovery and the reput path, on small files (64 KiB CommitLog segments, 10 units per batch
queue file).

Expected values come from the inputs and from RocketMQ's rules, via tests/_bcq_ref.py (the client batch
encoding, the record and unit layouts, HashMap order and getOffsetInQueueByTime, written from RocketMQ's
source) or by hand; never from the code under test. Java references are to store/src/main/java/org/apache/
rocketmq/store/ unless said otherwise; ports of RocketMQ's own tests name them.
"""

import json
import os
import random
import shutil

import pytest

from rocketstore import GetStatus, Message, MessageStore, PutStatus, StoreConfig

import _bcq_ref as REF

T0 = 1_700_000_000_000
BORN = 1_650_000_000_000
CL_FILE = 64 * 1024
UNIT = 46
PER_FILE = 10
BCQ_FILE = UNIT * PER_FILE
BATCH = {"queue.type": "BatchCQ"}
STORE_HOST = REF.host_bytes("127.0.0.1", 10911)  # StoreConfig's default store_host
INNER = 0x80


class Clock:
    """The store's clock: returns `now`, then moves it on by `step` (0: the test sets `now` itself)."""

    def __init__(self, now=T0, step=0):
        self.now, self.step = now, step

    def __call__(self):
        v = self.now
        self.now += self.step
        return v


def config(clock=None, **kw):
    return StoreConfig(
        **{
            "mapped_file_size_commit_log": CL_FILE,
            "mapped_file_size_batch_consume_queue": BCQ_FILE,
            "mapped_file_size_consume_queue": 20 * 50,
            "clock": clock or Clock(step=1),
            "total_physical_memory": 8 * 1024**3,
            # small index files (BatchPutMessageTest: 100 slots): copies of a store stay cheap
            "max_hash_slot_num": 100,
            "max_index_num": 400,
            **kw,
        }
    )


def open_store(path, clock=None, **kw):
    return MessageStore.open(path, config(clock, **kw))


def batch_store(path, clock=None, **kw):
    s = open_store(path, clock, **kw)
    s.create_topic("B", queues=2, attributes=BATCH)
    return s


def triples(n, tag="m", pad=0):
    """n client messages as (body, properties, flag); every other one carries a KEYS property."""
    return [
        (f"{tag}{i}".encode() + b"." * pad, f"KEYS\x01{tag}-k{i}\x02".encode() if i % 2 == 0 else b"", i)
        for i in range(n)
    ]


def as_messages(ts, topic="B"):
    return [Message(topic, b, raw_properties=p, flag=f, born_timestamp=BORN) for b, p, f in ts]


def batch_props(n, base):
    """The properties of an inner batch after assignQueueOffset: {INNER_NUM, INNER_BASE}, java.util.HashMap
    order (messageProperties2String)."""
    values = {"INNER_NUM": str(n), "INNER_BASE": str(base)}
    return REF.props_string((k, values[k]) for k in REF.hashmap_order(["INNER_NUM", "INNER_BASE"]))


def batch_record(ts, base, topic="B"):
    """(body, properties, record size) of the record put_batch writes for these client messages."""
    body = REF.encode_messages(ts)
    props = batch_props(len(ts), base)
    return body, props, REF.record_size(len(body), len(topic.encode()), len(props))


def inner_message(n, topic="B", tags=None, extra=None, inner_num=True, pad=0):
    """An inner-batch message as the broker hands it to the store (BatchConsumeMessageTest.buildMessage):
    sysFlag INNER_BATCH_FLAG, INNER_NUM, the body a client batch of n messages."""
    props = dict(extra or {})
    if inner_num is True:
        props["INNER_NUM"] = str(n)
    elif inner_num is not None:
        props["INNER_NUM"] = inner_num
    return Message(
        topic,
        REF.encode_messages([(b"x" * pad, b"", 0)] * n),
        tags=tags,
        properties=props,
        sys_flag=INNER,
        born_timestamp=BORN,
    )


def bcq(root, q, topic="B"):
    """The valid units of a batch queue, read from its files."""
    out = []
    for _, data in REF.bcq_files(str(root), topic, q):
        out.extend(REF.valid_units(data))
    return out


def bcq_bytes(root, topic="B"):
    """{(queue, file name): bytes} of every batch queue file of a topic."""
    d = os.path.join(str(root), "batchconsumequeue", topic)
    return {(q, n): data for q in sorted(os.listdir(d)) for n, data in REF.bcq_files(str(root), topic, int(q))}


def cumsum(sizes):
    out, acc = [], 0
    for n in sizes:
        out.append(acc)
        acc += n
    return out


def offsets(g):
    return [m.queue_offset for m in g.messages]


# ---- topics.json ------------------------------------------------------------------------------------


def test_create_topic_writes_rocketmq_topic_config(tmp_path):
    with open_store(tmp_path) as s:
        s.create_topic("B", queues=2, attributes=BATCH)
        path = tmp_path / "config" / "topics.json"
        data = json.loads(path.read_text("utf-8"))
        # TopicConfigSerializeWrapper: topicConfigTable + dataVersion (stateVersion, timestamp, counter)
        assert {"topicConfigTable", "dataVersion"} <= set(data)
        assert set(data["dataVersion"]) == {"counter", "stateVersion", "timestamp"}
        assert all(type(v) is int for v in data["dataVersion"].values())
        # TopicConfig's serialized fields with RocketMQ's defaults (perm = PERM_READ | PERM_WRITE = 6)
        assert data["topicConfigTable"] == {
            "B": {
                "topicName": "B",
                "readQueueNums": 2,
                "writeQueueNums": 2,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": 0,
                "order": False,
                "attributes": {"queue.type": "BatchCQ"},
            }
        }
        assert not os.path.exists(str(path) + ".bak")  # nothing to back up on the first write

        # a rewrite keeps the previous file as .bak (MixAll.string2File)
        first = path.read_bytes()
        s.create_topic("C", queues=1)
        assert (tmp_path / "config" / "topics.json.bak").read_bytes() == first
        table = json.loads(path.read_text("utf-8"))["topicConfigTable"]
        assert set(table) == {"B", "C"}
        assert table["B"] == json.loads(first)["topicConfigTable"]["B"]
        assert (table["C"]["readQueueNums"], table["C"]["writeQueueNums"], table["C"]["attributes"]) == (1, 1, {})

        # the same type again may change the queue counts
        second = path.read_bytes()
        s.create_topic("B", queues=4, attributes=BATCH)
        assert (tmp_path / "config" / "topics.json.bak").read_bytes() == second
        table = json.loads(path.read_text("utf-8"))["topicConfigTable"]
        assert (table["B"]["readQueueNums"], table["B"]["writeQueueNums"]) == (4, 4)
        assert table["B"]["attributes"] == {"queue.type": "BatchCQ"}


def test_create_topic_refuses_a_type_change_and_bad_input(tmp_path):
    with open_store(tmp_path) as s:
        s.create_topic("B", queues=2, attributes=BATCH)
        s.create_topic("C", queues=1, attributes={"queue.type": "SimpleCQ"})
        assert s.put(Message("P", b"plain", born_timestamp=BORN)).ok  # a plain topic known by its queue only
        path = tmp_path / "config" / "topics.json"
        before = path.read_bytes()
        with pytest.raises(ValueError):
            s.create_topic("B", queues=2, attributes={"queue.type": "SimpleCQ"})
        with pytest.raises(ValueError):
            s.create_topic("C", queues=1, attributes=BATCH)
        with pytest.raises(ValueError):
            s.create_topic("P", queues=1, attributes=BATCH)
        with pytest.raises(ValueError):
            s.create_topic("D", queues=1, attributes={"queue.type": "BatchQueue"})
        for name in ["", "  ", "a b", "a/b", "..", "t\u00e9", "x" * 256, None]:
            with pytest.raises((ValueError, TypeError)):
                s.create_topic(name, queues=1, attributes=BATCH)
        for queues in [0, -1, 2.0, "2", None, True]:
            with pytest.raises((ValueError, TypeError)):
                s.create_topic("D", queues=queues, attributes=BATCH)
        assert path.read_bytes() == before  # nothing refused was written
        # B is still a batch topic
        assert s.put_batch(as_messages(triples(2)), 0).ok
        assert bcq(tmp_path, 0) != []


def test_reopen_keeps_the_queue_type(tmp_path):
    with open_store(tmp_path) as s:
        s.create_topic("B", queues=2, attributes=BATCH)
    # nothing was put: the type lives in topics.json alone
    with open_store(tmp_path) as s:
        r = s.put_batch(as_messages(triples(3)), 1)
        assert r.ok and r.queue_offset == 0
        assert os.path.isdir(tmp_path / "batchconsumequeue" / "B" / "1")
        assert not os.path.exists(tmp_path / "consumequeue" / "B")
        with pytest.raises(ValueError):
            s.create_topic("B", queues=2, attributes={"queue.type": "SimpleCQ"})
    with open_store(tmp_path) as s:
        assert (s.min_offset("B", 1), s.max_offset("B", 1)) == (0, 3)
        r = s.put_batch(as_messages(triples(2)), 1)
        assert r.ok and r.queue_offset == 3
        assert s.max_offset("B", 1) == 5
    assert [u[4:6] for u in bcq(tmp_path, 1)] == [(0, 3), (3, 2)]
    assert not os.path.exists(tmp_path / "consumequeue" / "B")


# ---- put ----------------------------------------------------------------------------------------------


def test_put_batch_is_one_inner_batch_record_and_one_unit(tmp_path):
    clock = Clock()
    with batch_store(tmp_path, clock) as s:
        first = triples(5, "a", pad=3) + [(b"", b"TAGS\x01TagZ\x02", 7)]  # an empty body is a message too
        second = triples(3, "b")
        clock.now = T0 + 100
        r1 = s.put_batch(as_messages(first), 1)
        clock.now = T0 + 200
        r2 = s.put_batch(as_messages(second), 1)
        s.flush()

        body1, props1, size1 = batch_record(first, 0)
        body2, props2, size2 = batch_record(second, 6)
        assert props1 == b"INNER_BASE\x010\x02INNER_NUM\x016\x02"  # HashMap: INNER_BASE's bucket comes first
        assert (r1.status, r1.physical_offset, r1.size, r1.queue_offset, r1.store_timestamp) == (
            PutStatus.PUT_OK,
            0,
            size1,
            0,
            T0 + 100,
        )
        assert (r2.status, r2.physical_offset, r2.size, r2.queue_offset, r2.store_timestamp) == (
            PutStatus.PUT_OK,
            size1,
            size2,
            6,
            T0 + 200,
        )
        assert [x.queue_offset for x in r1.results] == list(range(6))
        assert [x.queue_offset for x in r2.results] == [6, 7, 8]

        # ONE CommitLog record per batch, field by field
        cl = REF.read_segment_bytes(str(tmp_path), "commitlog", CL_FILE)
        for phys, size, body, props, qoff, ts, n, msgs in [
            (0, size1, body1, props1, 0, T0 + 100, 6, first),
            (size1, size2, body2, props2, 6, T0 + 200, 3, second),
        ]:
            rec = REF.decode_record(cl, phys)
            assert rec == dict(
                total=size,
                magic=REF.MAGIC_V1,
                body_crc=REF.crc31(body),
                queue_id=1,
                flag=0,
                queue_offset=qoff,
                physical_offset=phys,
                sys_flag=INNER,
                born_ts=BORN,
                born_host=STORE_HOST,
                store_ts=ts,
                store_host=STORE_HOST,
                reconsume=0,
                prepared=0,
                body=body,
                topic="B",
                props=props,
            )
            assert REF.parse_props(rec["props"]) == {"INNER_NUM": str(n), "INNER_BASE": str(qoff)}
            assert REF.decode_messages(rec["body"]) == msgs  # the client batch encoding, message by message
        assert cl[size1 + size2 :] == bytes(len(cl) - size1 - size2)

        # one 46-byte unit per record, byte for byte: (phys, size, tagsCode, storeTime, base, n, -1, 0)
        files = REF.bcq_files(str(tmp_path), "B", 1)
        assert [n for n, _ in files] == ["00000000000000000000"]
        assert files[0][1] == (
            REF.unit(0, size1, 0, T0 + 100, 0, 6)
            + REF.unit(size1, size2, 0, T0 + 200, 6, 3)
            + bytes(BCQ_FILE - 2 * UNIT)
        )
        assert not os.path.exists(tmp_path / "batchconsumequeue" / "B" / "0")
        assert not os.path.exists(tmp_path / "consumequeue")

        # min/max are message offsets, not unit counts
        assert (s.min_offset("B", 1), s.max_offset("B", 1)) == (0, 9)
        m = s.look(size1)
        assert (m.sys_flag, m.queue_offset, m.properties) == (INNER, 6, {"INNER_NUM": "3", "INNER_BASE": "6"})


def test_put_batch_offsets_per_queue_and_across_files(tmp_path):
    clock = Clock()
    with batch_store(tmp_path, clock) as s:
        sizes = {0: [1, 4, 2, 7, 3, 3, 5, 1, 1, 2, 6, 2], 1: [9, 1, 2]}
        expect = {0: [], 1: []}
        phys = 0
        for k in range(max(len(v) for v in sizes.values())):
            for q in (0, 1):
                if k < len(sizes[q]):
                    ts = triples(sizes[q][k], f"q{q}u{k}-")
                    base = sum(sizes[q][:k])
                    clock.now = T0 + 10 * k + q
                    r = s.put_batch(as_messages(ts), q)
                    _, _, size = batch_record(ts, base)
                    assert (r.ok, r.physical_offset, r.size, r.queue_offset) == (True, phys, size, base)
                    expect[q].append((phys, size, 0, T0 + 10 * k + q, base, sizes[q][k], -1, 0))
                    phys += size
        s.flush()
        for q in (0, 1):
            assert bcq(tmp_path, q) == expect[q]
            assert (s.min_offset("B", q), s.max_offset("B", q)) == (0, sum(sizes[q]))
        # 12 units in 10-unit files: a second file starting at byte 460
        assert [n for n, _ in REF.bcq_files(str(tmp_path), "B", 0)] == ["00000000000000000000", "00000000000000000460"]
        for q in (0, 1):
            for i, (p, size, _, _, base, n, _, _) in enumerate(expect[q]):
                for off in (base, base + n - 1):
                    assert s.queue_unit("B", q, off)[:2] == (p, size)


def test_a_plain_message_to_a_batch_topic(tmp_path):
    clock = Clock(T0 + 7)
    with batch_store(tmp_path, clock) as s:
        assert s.put_batch(as_messages(triples(4)), 0).ok
        r = s.put(Message("B", b"plain", tags="TagP", keys=["pk"], flag=3, born_timestamp=BORN), 0)
        assert (r.status, r.queue_offset, r.msg_num) == (PutStatus.PUT_OK, 4, 1)
        s.flush()
        cl = REF.read_segment_bytes(str(tmp_path), "commitlog", CL_FILE)
        rec = REF.decode_record(cl, r.physical_offset)
        assert (rec["sys_flag"], rec["queue_offset"], rec["flag"], rec["body"]) == (0, 4, 3, b"plain")
        props = REF.parse_props(rec["props"])
        assert props == {"TAGS": "TagP", "KEYS": "pk"}  # no INNER_BASE without INNER_BATCH_FLAG
        assert rec["total"] == REF.record_size(5, 1, len(rec["props"]))
        assert bcq(tmp_path, 0)[1] == (r.physical_offset, rec["total"], REF.java_hash("TagP"), T0 + 7, 4, 1, -1, 0)
        assert s.max_offset("B", 0) == 5
        g = s.get("g", "B", 0, 4)
        assert offsets(g) == [4] and g.next_begin_offset == 5
        assert g.unpacked() == g.messages  # a plain record unpacks to itself


def test_inner_batch_flag_without_inner_num_on_a_batch_topic(tmp_path):
    """BatchConsumeMessageTest.testSendMessagesToBcqTopic case 3: PUT_OK, one queue offset; assignQueueOffset
    still adds INNER_BASE (the flag is set), and the dispatch (which needs both INNER_NUM and INNER_BASE)
    gives a unit of batch size 1."""
    clock = Clock(T0 + 3)
    with batch_store(tmp_path, clock) as s:
        assert s.put(Message("B", b"plain", born_timestamp=BORN), 0).ok  # case 2: neither
        r = s.put(inner_message(1, inner_num=None), 0)
        assert (r.status, r.queue_offset) == (PutStatus.PUT_OK, 1)
        assert s.look(r.physical_offset).properties == {"INNER_BASE": "1"}
        s.flush()
        assert bcq(tmp_path, 0)[1] == (r.physical_offset, r.size, 0, T0 + 3, 1, 1, -1, 0)
        assert s.max_offset("B", 0) == 2
        assert s.put(Message("B", b"next", born_timestamp=BORN), 0).queue_offset == 2


def test_inner_batches_need_a_batch_topic_and_the_flag(tmp_path):
    """DefaultMessageStore.asyncPutMessage: INNER_NUM without INNER_BATCH_FLAG is MESSAGE_ILLEGAL, and so is
    an inner batch (the flag) to a topic whose queue type is not BatchCQ. Nothing is written."""
    with batch_store(tmp_path) as s:
        s.create_topic("S", queues=1)
        assert s.put(Message("P", b"p", born_timestamp=BORN), 0).ok
        assert s.put_batch(as_messages(triples(2)), 0).ok
        end = s.max_physical_offset
        cases = [
            ("P", inner_message(3, topic="P")),  # inner batch, plain (unknown-type) topic
            ("S", inner_message(3, topic="S")),  # inner batch, SimpleCQ topic
            ("P", inner_message(1, topic="P", inner_num=None)),  # the flag alone
            ("P", Message("P", b"x", properties={"INNER_NUM": "2"}, born_timestamp=BORN)),  # INNER_NUM alone
            ("B", Message("B", b"x", properties={"INNER_NUM": "2"}, born_timestamp=BORN)),  # ... on a batch topic
            ("B", Message("B", b"x", properties={"INNER_NUM": "1"}, born_timestamp=BORN)),
        ]
        for topic, msg in cases:
            r = s.put(msg, 0)
            assert r.status is PutStatus.MESSAGE_ILLEGAL, msg
        assert s.max_physical_offset == end
        assert (s.max_offset("P", 0), s.max_offset("B", 0)) == (1, 2)
        assert s.put(Message("P", b"q", born_timestamp=BORN), 0).queue_offset == 1


@pytest.mark.parametrize("inner_num", ["32768", "-32769", "abc", "1.5", " 3", "3 ", "0x10", "1e2", "\uff13"])
def test_inner_num_must_be_a_java_short(tmp_path, inner_num):
    """CommitLog.getMessageNum: Short.parseShort(INNER_NUM) (NumberFormatException: nothing is stored).
    A full-width digit is a digit to Character.digit, so '\uff13' (3) is accepted."""
    with batch_store(tmp_path) as s:
        r = s.put(inner_message(3, inner_num=inner_num), 0)
        if inner_num == "\uff13":
            assert r.ok and s.max_offset("B", 0) == 3
            return
        assert r.status is PutStatus.MESSAGE_ILLEGAL
        assert s.max_physical_offset == 0 and s.max_offset("B", 0) == 0


@pytest.mark.parametrize("inner_num,n", [("+3", 3), ("007", 7), ("32767", 32767)])
def test_inner_num_java_short_spellings(tmp_path, inner_num, n):
    with batch_store(tmp_path) as s:
        r = s.put(inner_message(2, inner_num=inner_num), 0)
        assert r.ok and r.queue_offset == 0
        assert s.put(Message("B", b"after", born_timestamp=BORN), 0).queue_offset == n
        s.flush()
        assert [u[4:6] for u in bcq(tmp_path, 0)] == [(0, n), (n, 1)]


@pytest.mark.parametrize("dispatch_in_put_path", [True, False], ids=["put-path", "reput"])
def test_inner_num_below_one(tmp_path, dispatch_in_put_path):
    """INNER_NUM 0 or negative: getMessageNum clamps the queue offsets taken to 1 (CommitLog.java:1462-1463),
    but the unit comes from the DispatchRequest, whose batchSize is Short.parseShort(INNER_NUM) unclamped
    (CommitLog.setBatchSizeIfNeeded, CommitLog.java:666-668); BatchConsumeQueue.putMessagePositionInfoWrapper
    drops a request with batchSize < 0 and putBatchMessagePositionInfo writes batchSize 0 as is.
    The put path must build the same unit RocketMQ's reput does."""
    clock = Clock()
    with batch_store(tmp_path, clock, dispatch_in_put_path=dispatch_in_put_path) as s:
        rs = []
        for k, num in enumerate(["0", "-2", "2"]):
            clock.now = T0 + k
            rs.append(s.put(inner_message(2, inner_num=num), 0))
        assert [(r.ok, r.queue_offset) for r in rs] == [(True, 0), (True, 1), (True, 2)]
        assert s.wait_dispatched(5)
        s.flush()
        ((_, data),) = REF.bcq_files(str(tmp_path), "B", 0)
        units = [REF.UNIT.unpack_from(data, i * UNIT) for i in range(3)]
        assert units == [
            (rs[0].physical_offset, rs[0].size, 0, T0, 0, 0, -1, 0),  # INNER_NUM "0": batch size 0
            # INNER_NUM "-2": no unit at all
            (rs[2].physical_offset, rs[2].size, 0, T0 + 2, 2, 2, -1, 0),
            (0, 0, 0, 0, 0, 0, 0, 0),
        ]
        assert data == REF.unit(*units[0][:6]) + REF.unit(*units[1][:6]) + bytes(BCQ_FILE - 2 * UNIT)


# ---- get ------------------------------------------------------------------------------------------

GET_SIZES = [5, 16, 3, None, 7, 2, 2, 2, 2, 2, 4, 4, 4]  # None: a plain message (batch size 1)


def fill_get_queue(s, q=0):
    """13 units in two files (10 + 3): bases 0 5 21 24 25 32 34 36 38 40 | 42 46 50, max 54.
    Returns {queue offset: body} of every single message."""
    bodies = {}
    off = 0
    for k, n in enumerate(GET_SIZES):
        if n is None:
            assert s.put(Message("B", b"plain", born_timestamp=BORN), q).queue_offset == off
            bodies[off] = b"plain"
            off += 1
            continue
        ts = triples(n, f"u{k}-")
        assert s.put_batch(as_messages(ts), q).queue_offset == off
        for i, (body, _, _) in enumerate(ts):
            bodies[off + i] = body
        off += n
    return bodies


def test_get_returns_whole_batches_counting_their_sizes(tmp_path):
    with batch_store(tmp_path) as s:
        bodies = fill_get_queue(s)
        assert (s.min_offset("B", 0), s.max_offset("B", 0)) == (0, 54)

        g = s.get("g", "B", 0, 0, max_count=32)
        # 5 + 16 + 3 + 1 + 7 = 32: the next unit (2) would make 34 > 32 (isTheBatchFull)
        assert (g.status, offsets(g), g.next_begin_offset, g.message_count) == (
            GetStatus.FOUND,
            [0, 5, 21, 24, 25],
            32,
            32,
        )
        assert (g.min_offset, g.max_offset) == (0, 54)
        assert [m.queue_offset for m in g.unpacked()] == list(range(32))
        assert [m.body for m in g.unpacked()] == [bodies[i] for i in range(32)]

        # the first unit is always taken: a batch of 16 comes back whole with max_count 3
        g = s.get("g", "B", 0, 5, max_count=3)
        assert (g.status, offsets(g), g.next_begin_offset, g.message_count) == (GetStatus.FOUND, [5], 21, 16)
        g = s.get("g", "B", 0, 0, max_count=3)
        assert (offsets(g), g.next_begin_offset, g.message_count) == ([0], 5, 5)

        # from inside a batch: the covering record (queue offset below the request); unpacked() starts there
        g = s.get("g", "B", 0, 10, max_count=3)
        assert (g.status, offsets(g), g.next_begin_offset, g.message_count) == (GetStatus.FOUND, [5], 21, 16)
        assert g.messages[0].queue_offset < 10 and g.messages[0].sys_flag == INNER
        un = g.unpacked()
        assert [m.queue_offset for m in un] == list(range(10, 21))
        assert [m.body for m in un] == [bodies[i] for i in range(10, 21)]
        assert [m.flag for m in un] == list(range(5, 16))  # each inner message keeps its own flag
        assert un[0].properties == {} and un[1].properties == {"KEYS": "u1--k6"}

        # a plain record amid batches unpacks to itself; a get never crosses a batch queue file
        g = s.get("g", "B", 0, 24, max_count=32)
        assert (offsets(g), g.next_begin_offset, g.message_count) == ([24, 25, 32, 34, 36, 38, 40], 42, 18)
        un = g.unpacked()
        assert un[0] is g.messages[0] and un[0].body == b"plain"
        assert [m.queue_offset for m in un] == list(range(24, 42))
        g = s.get("g", "B", 0, 30, max_count=32)
        assert (offsets(g), g.next_begin_offset) == ([25, 32, 34, 36, 38, 40], 42)
        assert [m.queue_offset for m in g.unpacked()] == list(range(30, 42))
        g = s.get("g", "B", 0, 41)
        assert (offsets(g), g.next_begin_offset, [m.queue_offset for m in g.unpacked()]) == ([40], 42, [41])
        g = s.get("g", "B", 0, 42)
        assert (offsets(g), g.next_begin_offset, g.message_count) == ([42, 46, 50], 54, 12)
        g = s.get("g", "B", 0, 53, max_count=1)
        assert (offsets(g), g.next_begin_offset, [m.queue_offset for m in g.unpacked()]) == ([50], 54, [53])


def test_get_boundaries(tmp_path):
    with batch_store(tmp_path) as s:
        fill_get_queue(s)
        g = s.get("g", "B", 0, 54)
        assert (g.status, g.next_begin_offset, g.messages) == (GetStatus.OFFSET_OVERFLOW_ONE, 54, [])
        g = s.get("g", "B", 0, 55)
        assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 54)
        g = s.get("g", "B", 0, 10**9)
        assert (g.status, g.next_begin_offset, g.min_offset, g.max_offset) == (
            GetStatus.OFFSET_OVERFLOW_BADLY,
            54,
            0,
            54,
        )
        g = s.get("g", "B", 0, 53)
        assert g.status is GetStatus.FOUND and g.next_begin_offset == 54
        # OFFSET_TOO_SMALL: see test_get_after_the_first_commitlog_file_is_gone


def test_a_batch_queue_without_messages(tmp_path):
    """BatchConsumeMessageTest.testGetOffsetInQueueByTime: "The initial min max offset, before and after the
    creation of consume queue": max 0, min -1 (a new BatchConsumeQueue's minOffsetInQueue; the store finds or
    creates the queue, ConsumeQueueStore.getMinOffsetInQueue). getMessage answers NO_MESSAGE_IN_QUEUE with
    next 0 and that min."""
    with batch_store(tmp_path) as s:
        assert s.max_offset("B", 0) == 0
        assert s.min_offset("B", 0) == -1
        g = s.get("g", "B", 0, 0)
        assert (g.status, g.next_begin_offset, g.min_offset, g.max_offset) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0, -1, 0)
        assert s.put_batch(as_messages(triples(10)), 0).ok
        assert (s.min_offset("B", 0), s.max_offset("B", 0)) == (0, 10)


def test_get_batch_message_within_number(tmp_path):
    """BatchConsumeMessageTest.testGetBatchMessageWithinNumber (batches of 20; 30 puts instead of 200), with
    QueueTestBase's transfer limits (1024 messages, 1 MiB)."""
    limits = dict(
        max_transfer_count_on_message_in_memory=1024,
        max_transfer_count_on_message_in_disk=1024,
        max_transfer_bytes_on_message_in_memory=1024 * 1024,
        max_transfer_bytes_on_message_in_disk=1024 * 1024,
    )
    with batch_store(tmp_path, **limits) as s:
        for i in range(30):
            r = s.put(inner_message(20), 0)
            assert (r.status, r.queue_offset, r.msg_num) == (PutStatus.PUT_OK, i * 20, 20)
        assert (s.min_offset("B", 0), s.max_offset("B", 0)) == (0, 600)
        g = s.get("group", "B", 0, 5, max_count=1)
        assert (g.status, g.next_begin_offset, len(g.messages), g.message_count) == (GetStatus.FOUND, 20, 1, 20)
        assert g.messages[0].queue_offset == 0 and g.messages[0].properties["INNER_NUM"] == "20"
        g = s.get("group", "B", 0, 5, max_count=39)
        assert (g.status, len(g.messages), g.next_begin_offset, g.message_count) == (GetStatus.FOUND, 1, 20, 20)
        g = s.get("group", "B", 0, 5, max_count=60)
        assert (g.status, len(g.messages), g.next_begin_offset, g.message_count) == (GetStatus.FOUND, 3, 60, 60)
        for i, m in enumerate(g.messages):
            assert (m.properties["INNER_BASE"], m.properties["INNER_NUM"]) == (str(i * 20), "20")


def test_next_begin_offset_walk(tmp_path):
    """BatchConsumeMessageTest.testNextBeginOffsetConsumeBatchMessage: pulling one at a time visits every
    batch once, next = its base + its batch size."""
    rnd = random.Random(26)
    nums = [rnd.randint(2, 200) for _ in range(40)]
    with batch_store(tmp_path) as s:
        for n in nums:
            assert s.put(inner_message(n), 0).ok
        pulled = []
        off = 0
        while True:
            g = s.get("group", "B", 0, off, max_count=1)
            if g.status is GetStatus.OFFSET_OVERFLOW_ONE:
                break
            assert g.status is GetStatus.FOUND and len(g.messages) == 1
            base = g.messages[0].queue_offset
            pulled.append(g.next_begin_offset - base)
            assert base == off
            off = g.next_begin_offset
        assert pulled == nums


@pytest.mark.parametrize("memory,expected", [(8 * 1024**3, [0, 10, 20, 30]), (1, [0])], ids=["in-memory", "on-disk"])
def test_get_transfer_count_limits(tmp_path, memory, expected):
    """isTheBatchFull compares the messages already taken (not units) with maxTransferCountOnMessageInMemory
    (32: stop once more than 31) or ...InDisk (8: more than 7), whatever max_count says."""
    with batch_store(tmp_path, total_physical_memory=memory) as s:
        for _ in range(10):
            assert s.put_batch(as_messages(triples(10)), 0).ok
        g = s.get("g", "B", 0, 0, max_count=1000)
        assert (offsets(g), g.next_begin_offset, g.message_count) == (expected, expected[-1] + 10, 10 * len(expected))


def test_get_with_a_tag_filter(tmp_path):
    with batch_store(tmp_path) as s:
        tags = ["TagA" if i % 2 == 0 else "TagB" for i in range(12)]  # bases 0, 2, ..., 22; file 0 ends at 20
        for t in tags:
            assert s.put(inner_message(2, tags=t), 1).ok
        s.flush()
        assert [u[2] for u in bcq(tmp_path, 1)] == [REF.java_hash(t) for t in tags]

        g = s.get("g", "B", 1, 0, tags="TagA")
        # filtered units advance next; the scan runs to the end of the batch queue file
        assert (g.status, offsets(g), g.next_begin_offset, g.message_count) == (
            GetStatus.FOUND,
            [0, 4, 8, 12, 16],
            20,
            10,
        )
        # the unit that finds the batch full does not advance next (and is checked before the filter)
        g = s.get("g", "B", 1, 0, max_count=3, tags="TagA")
        assert (offsets(g), g.next_begin_offset) == ([0], 2)
        g = s.get("g", "B", 1, 1, tags={"TagA"})
        assert (offsets(g), g.next_begin_offset) == ([0, 4, 8, 12, 16], 20)
        assert [m.queue_offset for m in g.unpacked()] == [1, 4, 5, 8, 9, 12, 13, 16, 17]
        g = s.get("g", "B", 1, 19, tags="TagB")
        assert (offsets(g), g.next_begin_offset) == ([18], 20)
        g = s.get("g", "B", 1, 20, tags="TagB")
        assert (offsets(g), g.next_begin_offset) == ([22], 24)
        g = s.get("g", "B", 1, 0, tags="TagA || TagB")
        assert (offsets(g), g.next_begin_offset) == (list(range(0, 20, 2)), 20)
        g = s.get("g", "B", 1, 0, tags="TagC")
        assert (g.status, g.messages, g.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, [], 20)
        g = s.get("g", "B", 1, 20, tags="TagC")
        assert (g.status, g.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 24)


@pytest.mark.parametrize("max_count,expected_next", [(32, 350), (400, 400)])
def test_filter_scan_cap_counts_message_offsets(tmp_path, max_count, expected_next):
    """getMessage stops at (cqUnit.getQueueOffset() - offset) * unitSize >= max(maxFilterMessageSize 16000,
    maxMsgNums * 46): with batches of 50 that is the unit based at 350 (16100 >= 16000), or at 400 when
    max_count 400 makes the cap 18400."""
    with batch_store(tmp_path) as s:
        for _ in range(10):
            assert s.put_batch(as_messages(triples(50)), 0).ok
        g = s.get("g", "B", 0, 0, max_count=max_count, tags="Nothing")
        assert (g.status, g.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, expected_next)


def test_get_after_the_first_commitlog_file_is_gone(tmp_path):
    """correctMinOffset looks at the first batch queue file only: its units below the CommitLog's min move the
    min past them; units of later files pointing into the deleted file give MESSAGE_WAS_REMOVING, and
    the scan skips to the next CommitLog file (rollNextFile)."""
    n_units = 30
    ts = [triples(2, f"r{k}-", pad=1400) for k in range(n_units)]
    sizes = [batch_record(t, 2 * k)[2] for k, t in enumerate(ts)]
    phys = REF.layout(sizes, CL_FILE)
    k0 = sum(1 for p in phys if p < CL_FILE)  # records in the first CommitLog file
    assert 20 <= k0 < 30, "the data must put the deleted file's end inside the third batch queue file"
    with batch_store(tmp_path) as s:
        for k, t in enumerate(ts):
            r = s.put_batch(as_messages(t), 0)
            assert (r.physical_offset, r.queue_offset) == (phys[k], 2 * k)
    os.remove(tmp_path / "commitlog" / f"{0:020d}")
    with open_store(tmp_path) as s:
        assert s.min_physical_offset == CL_FILE
        # units 0..9 (the first file) all lie below: min = base of unit 9 + 2; units 10..k0-1 are not looked at
        assert (s.min_offset("B", 0), s.max_offset("B", 0)) == (20, 60)
        g = s.get("g", "B", 0, 0)
        assert (g.status, g.next_begin_offset, g.min_offset) == (GetStatus.OFFSET_TOO_SMALL, 20, 20)
        g = s.get("g", "B", 0, 19)
        assert (g.status, g.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, 20)
        # units 10..19 point into the deleted file
        g = s.get("g", "B", 0, 20)
        assert (g.status, g.messages, g.next_begin_offset) == (GetStatus.MESSAGE_WAS_REMOVING, [], 40)
        # units 20..k0-1 too, the rest are read
        g = s.get("g", "B", 0, 40)
        assert (g.status, offsets(g), g.next_begin_offset) == (GetStatus.FOUND, [2 * k for k in range(k0, 30)], 60)
        assert [m.physical_offset for m in g.messages] == phys[k0:]


# ---- time lookups -----------------------------------------------------------------------------------

TIME_SIZES = [i % 3 + 1 for i in range(25)]  # 25 units: files of 10, 10, 5
TIMES = [T0 + 10 * i for i in range(25)]


def fill_times(s, clock, q=0, sizes=TIME_SIZES, times=TIMES):
    for n, t in zip(sizes, times):
        clock.now = t
        assert s.put_batch(as_messages(triples(n)), q).ok


def loaded_files(root, q):
    """What a load + recover leaves: each file's written (valid) units."""
    return [data[: len(REF.valid_units(data)) * UNIT] for _, data in REF.bcq_files(str(root), "B", q)]


def test_offset_by_time_rules(tmp_path):
    """BatchConsumeQueue.getOffsetInQueueByTime, worked by hand: the last file if its first time <= T, else
    the file whose first time is the greatest <= T (else the first); T >= that file's last time answers
    its last unit's base (LOWER too); in between binarySearchRight; -1 is clamped to min."""
    b = cumsum(TIME_SIZES)
    t = TIMES
    cases = [  # (T, LOWER, UPPER)
        (t[0] - 1000, b[0], b[0]),
        (t[0], b[0], b[0]),
        (t[5] + 5, b[6], 0),  # UPPER: binarySearchRight answers -1 -> min
        (t[9] + 5, b[9], b[9]),  # file 0's last unit, not the next file's first (b[10])
        (t[12], b[12], b[12]),
        (t[12] + 5, b[13], b[13]),
        (t[19] + 5, b[19], b[19]),
        (t[20], b[20], b[20]),  # the last file's first time
        (t[22] + 3, b[23], 0),
        (t[24], b[24], b[24]),
        (t[24] + 10**9, b[24], b[24]),  # the last unit's base, not max (50)
    ]
    clock = Clock()
    with batch_store(tmp_path, clock) as s:
        fill_times(s, clock)
        assert (s.min_offset("B", 0), s.max_offset("B", 0)) == (0, sum(TIME_SIZES))
        for T, lower, upper in cases:
            assert (s.offset_by_time("B", 0, T), s.offset_by_time("B", 0, T, "upper")) == (lower, upper), T
            assert s.offset_by_time("B", 0, T, "lower") == lower
            assert s.offset_by_time("B", 0, T, "UPPER") == upper
    with open_store(tmp_path) as s:  # the per-file time map is rebuilt at load
        for T, lower, upper in cases:
            assert (s.offset_by_time("B", 0, T, "lower"), s.offset_by_time("B", 0, T, "upper")) == (lower, upper), T


def test_offset_by_time_matches_a_literal_port(tmp_path):
    clock = Clock()
    sizes = [random.Random(5).randint(1, 9) for _ in range(37)]
    rnd = random.Random(6)
    times, t = [], T0
    for _ in sizes:
        t += rnd.choice([0, 0, 1, 3, 7, 20])  # runs of equal times
        times.append(t)
    with batch_store(tmp_path, clock) as s:
        fill_times(s, clock, 1, sizes, times)
        s.flush()
        files = loaded_files(tmp_path, 1)
        assert len(files) == 4
        lo, hi = 0, sum(sizes)
        for reopened in (False, True):
            if reopened:
                s.close()
                s = open_store(tmp_path)
            for T in range(times[0] - 3, times[-1] + 4):
                for upper in (False, True):
                    expect = REF.store_offset_by_time(files, T, upper, lo, hi)
                    assert s.offset_by_time("B", 1, T, "upper" if upper else "lower") == expect, (T, upper)
        s.close()


def test_offset_by_time_runs_of_equal_times(tmp_path):
    clock = Clock()
    times = [T0 + 100, T0 + 110, T0 + 110, T0 + 110, T0 + 120]
    with batch_store(tmp_path, clock) as s:
        fill_times(s, clock, 0, [2] * 5, times)  # bases 0, 2, 4, 6, 8
        cases = [
            (T0 + 110, 2, 6),  # LOWER the first of equal times, UPPER the last
            (T0 + 105, 2, 2),  # UPPER is not "the last unit at or before T"
            (T0 + 99, 0, 0),
            (T0 + 120, 8, 8),
            (T0 + 121, 8, 8),
        ]
        for T, lower, upper in cases:
            assert (s.offset_by_time("B", 0, T), s.offset_by_time("B", 0, T, "upper")) == (lower, upper), T


def test_offset_by_time_and_store_times_as_rocketmq_tests_them(tmp_path):
    """BatchConsumeMessageTest.testGetOffsetInQueueByTime (19 batches of 10, the time taken after the 8th put
    -> 80) and testDispatchBuildBatchConsumeQueue's store-time and CommitLog-offset lookups."""
    clock = Clock()
    with batch_store(tmp_path, clock) as s:
        phys = []
        for i in range(19):
            clock.now = T0 + 3 * i
            r = s.put(inner_message(10), 0)
            assert r.ok
            phys.append(r.physical_offset)
        time_mid = T0 + 3 * 7 + 1
        assert s.offset_by_time("B", 0, time_mid) == 80
        assert (s.min_offset("B", 0), s.max_offset("B", 0)) == (0, 190)
        assert s.earliest_message_time("B", 0) == T0
        for off in (0, 9, 80, 125, 189):
            assert s.store_timestamp_at("B", 0, off) == T0 + 3 * (off // 10)
            assert s.queue_unit("B", 0, off)[0] == phys[off // 10]
        assert s.store_timestamp_at("B", 0, 190) == -1


# ---- the index ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dispatch_in_put_path", [True, False], ids=["put-path", "reput"])
def test_keys_of_an_inner_batch_record_are_indexed(tmp_path, dispatch_in_put_path):
    """IndexService.buildIndex indexes the DispatchRequest's UNIQ_KEY and KEYS: the batch record's own
    properties. The keys of the messages inside the body are not the record's."""
    with batch_store(tmp_path, dispatch_in_put_path=dispatch_in_put_path) as s:
        assert s.put_batch(as_messages(triples(3, "in")), 0).ok  # inner messages carry KEYS in-k0, in-k2
        r = s.put(inner_message(2, extra={"KEYS": "kA kB", "UNIQ_KEY": "U-1"}), 0)
        assert r.ok and r.queue_offset == 3
        assert s.wait_dispatched(5)
        for key in ("kA", "kB", "U-1"):
            found = s.query("B", key)
            assert [m.physical_offset for m in found] == [r.physical_offset], key
            assert found[0].sys_flag == INNER and found[0].properties["INNER_BASE"] == "3"
        assert list(s.query("B", "in-k0")) == []
        assert list(s.query("C", "kA")) == []
    with open_store(tmp_path) as s:
        assert [m.physical_offset for m in s.query("B", "U-1")] == [r.physical_offset]


# ---- recovery -----------------------------------------------------------------------------------------


def fill_recovery(s):
    """Batches, inner-batch puts and plain puts on both queues, over two CommitLog files; queue 0 ends with
    three units in its second batch queue file."""
    sizes = {0: [], 1: []}
    for k in range(13):
        for q in (0, 1):
            if q == 1 and k >= 12:
                continue
            if k % 5 == 3:
                assert s.put(inner_message(k + 1, tags=f"T{k}", extra={"KEYS": f"key{q}-{k}"}, pad=300), q).ok
                sizes[q].append(k + 1)
            elif k % 5 == 4:
                assert s.put(Message("B", b"p" * 900, tags="P", born_timestamp=BORN), q).ok
                sizes[q].append(1)
            else:
                assert s.put_batch(as_messages(triples(4, f"q{q}k{k}-", pad=1300)), q).ok
                sizes[q].append(4)
    assert s.max_physical_offset > CL_FILE
    return sizes


def answers(s):
    out = []
    for q in (0, 1):
        out.append((s.min_offset("B", q), s.max_offset("B", q)))
        for off in range(0, s.max_offset("B", q) + 2, 3):
            g = s.get("g", "B", q, off, max_count=9)
            out.append((g.status, offsets(g), g.next_begin_offset, [m.body for m in g.unpacked()]))
        out.append(s.offset_by_time("B", q, T0 + 7, "upper"))
    return out


def test_a_copy_taken_while_open_reopens_intact(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    with batch_store(src) as s:
        sizes = fill_recovery(s)
        s.flush()
        shutil.copytree(src, dst)
        expected = answers(s)
        files = bcq_bytes(src)
    assert os.path.exists(dst / "abort")
    with open_store(dst) as c:
        assert [(c.min_offset("B", q), c.max_offset("B", q)) for q in (0, 1)] == [
            (0, sum(sizes[0])),
            (0, sum(sizes[1])),
        ]
        assert answers(c) == expected
        assert bcq_bytes(dst) == files
        r = c.put_batch(as_messages(triples(2)), 1)
        assert r.queue_offset == sum(sizes[1])
        c.flush()
        assert bcq(dst, 1)[-1][4:6] == (sum(sizes[1]), 2)


@pytest.mark.parametrize("how", ["abort", "normal"])
def test_batch_queue_files_are_rebuilt_from_the_commitlog(tmp_path, how):
    src, dst = tmp_path / "src", tmp_path / "dst"
    with batch_store(src) as s:
        fill_recovery(s)
        s.flush()
        if how == "abort":
            shutil.copytree(src, dst)  # while open: the abort file makes it a crash recovery
        expected = answers(s)
        files = bcq_bytes(src)
    assert len([k for k in files if k[0] == "0"]) == 2
    if how == "abort":
        assert os.path.exists(dst / "abort")
        shutil.rmtree(dst / "batchconsumequeue" / "B" / "0")
        last = sorted(os.listdir(dst / "batchconsumequeue" / "B" / "1"))[-1]
        os.remove(dst / "batchconsumequeue" / "B" / "1" / last)
    else:
        shutil.copytree(src, dst)
        assert not os.path.exists(dst / "abort")
        shutil.rmtree(dst / "batchconsumequeue")
    with open_store(dst) as c:
        assert answers(c) == expected
        c.flush()
        assert bcq_bytes(dst) == files  # byte for byte, file names included


@pytest.mark.parametrize("how", ["abort", "normal"])
def test_units_past_the_commitlog_end_are_truncated(tmp_path, how):
    src, dst = tmp_path / "src", tmp_path / "dst"
    with batch_store(src) as s:
        sizes = fill_recovery(s)
        s.flush()
        if how == "abort":
            shutil.copytree(src, dst)
        cl_end = s.max_physical_offset
        expected = answers(s)
    if how == "normal":
        shutil.copytree(src, dst)
    real = {q: sum(sizes[q]) for q in (0, 1)}
    units0 = bcq(dst, 0)
    # garbage after queue 0's last unit (its second file holds 3 of 10) and queue 1's
    qdir = dst / "batchconsumequeue" / "B" / "0"
    last = sorted(os.listdir(qdir))[-1]
    k = len(units0) % PER_FILE
    assert 0 < k <= PER_FILE - 2
    with open(qdir / last, "r+b") as fh:
        fh.seek(k * UNIT)
        fh.write(
            REF.unit(cl_end + 1000, 200, 0, T0 + 99, real[0], 5)
            + REF.unit(cl_end + 2000, 200, 0, T0 + 99, real[0] + 5, 5)
        )
    q1 = dst / "batchconsumequeue" / "B" / "1"
    last1 = sorted(os.listdir(q1))[-1]
    k1 = len(bcq(dst, 1)) % PER_FILE
    assert 0 < k1 < PER_FILE
    with open(q1 / last1, "r+b") as fh:
        fh.seek(k1 * UNIT)
        fh.write(REF.unit(cl_end, 100, 0, T0 + 99, real[1], 3))  # exactly at the end: past it too
    with open_store(dst) as c:
        assert [c.max_offset("B", q) for q in (0, 1)] == [real[0], real[1]]
        assert answers(c) == expected
        assert c.get("g", "B", 0, real[0]).status is GetStatus.OFFSET_OVERFLOW_ONE
        r = c.put_batch(as_messages(triples(2)), 0)
        assert (r.queue_offset, r.physical_offset) == (real[0], cl_end)
        c.flush()
        assert bcq(dst, 0)[: len(units0) + 1] == units0 + [(cl_end, r.size, 0, r.store_timestamp, real[0], 2, -1, 0)]
        assert c.max_offset("B", 0) == real[0] + 2


# ---- the reput path ---------------------------------------------------------------------------------


def run_puts(s, clock):
    for k in range(14):
        clock.now = T0 + 5 * k
        q = k % 2
        if k % 4 == 0:
            assert s.put_batch(as_messages(triples(k % 7 + 1, f"k{k}-", pad=40)), q).ok
        elif k % 4 == 1:
            assert s.put(inner_message(k, tags="TagR", extra={"KEYS": f"r{k}"}), q).ok
        elif k % 4 == 2:
            assert s.put(Message("B", b"plain%d" % k, tags="TagP", born_timestamp=BORN), q).ok
        else:
            assert s.put(inner_message(1, inner_num=None), q).ok
    assert s.wait_dispatched(5)


def test_the_reput_path_builds_the_same_batch_queues(tmp_path):
    out = {}
    for on in (True, False):
        root = tmp_path / str(on)
        clock = Clock()
        with batch_store(root, clock, dispatch_in_put_path=on) as s:
            run_puts(s, clock)
            s.flush()
            out[on] = (
                bcq_bytes(root),
                REF.read_segment_bytes(str(root), "commitlog", CL_FILE),
                answers(s),
                [m.physical_offset for m in s.query("B", "r5")],
            )
    assert out[True][1] == out[False][1]  # the same CommitLog
    assert out[True][0] == out[False][0]  # the same batch queue files, byte for byte
    assert out[True][2] == out[False][2]
    assert out[True][3] == out[False][3] != []


def test_a_prepared_inner_batch_keeps_its_properties_and_takes_no_offset(tmp_path):
    """assignQueueOffset (which adds INNER_BASE and rewrites the properties) runs only for messages that take
    a queue offset: a prepared inner batch is stored with its properties as given, and no unit."""
    with batch_store(tmp_path) as s:
        m = Message(
            "B",
            REF.encode_messages([(b"a", b"", 0)] * 2),
            raw_properties="INNER_NUM\x012\x02TAGS\x01a\x02",
            sys_flag=INNER | 0x4,
            born_timestamp=BORN,
        )
        r = s.put(m, 0)
        assert r.status is PutStatus.PUT_OK and r.queue_offset == 0
        stored = s.look(r.physical_offset)
        assert stored.properties_raw == b"INNER_NUM\x012\x02TAGS\x01a\x02"
        assert s.wait_dispatched(5) and s.max_offset("B", 0) == 0
        r2 = s.put(inner_message(3), 0)
        assert r2.queue_offset == 0 and b"INNER_BASE\x010\x02" in s.look(r2.physical_offset).properties_raw


def test_dropped_batch_units_never_come_back(tmp_path):
    """Units recovery drops (their records were lost) must not be taken as written by a later recovery,
    once the CommitLog has grown past their offsets again."""
    live, copy = tmp_path / "live", tmp_path / "copy"
    with batch_store(live) as s:
        for i in range(4):
            s.put_batch(as_messages(triples(2, tag=f"a{i}")), 0)
        cut = s.put_batch(as_messages(triples(2, tag="lost")), 0).physical_offset
        s.put_batch(as_messages(triples(2, tag="lost2")), 0)
        s.flush()
        shutil.copytree(live, copy)
    seg = os.path.join(copy, "commitlog", f"{cut - cut % CL_FILE:020d}")
    with open(seg, "r+b") as fh:  # the last two records never reached the disk
        fh.seek(cut % CL_FILE)
        fh.write(bytes(CL_FILE - cut % CL_FILE))
    open(os.path.join(copy, "abort"), "w").close()
    with open_store(copy) as s:
        assert s.max_offset("B", 0) == 8
        s.put_batch(as_messages(triples(1, tag="new") * 200), 1)  # the CommitLog grows far past the old units
    with open_store(copy) as s:
        assert s.max_offset("B", 0) == 8
        assert [m.queue_offset for m in s.get("g", "B", 0, 0).messages] == [0, 2, 4, 6]
