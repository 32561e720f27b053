"""Consumer groups: offsets in RocketMQ's consumerOffset.json (written as its fastjson does, read either
way), a consumer reading every queue from the committed offsets, tags, batch topics, lag and long polling."""

import json
import threading
import time

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.store.consumer import format_offsets, offsets_path, parse_offsets


def cfg():
    return StoreConfig(
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20 * 50,
        max_hash_slot_num=16,
        max_index_num=64,
    )


def fill(s, n, queues=3, topic="T"):
    for i in range(n):
        s.put(Message(topic, f"m{i}".encode(), tags="TagA" if i % 2 == 0 else "TagB"), queue_id=i % queues)


def test_rocketmqs_offset_file_reads_and_writes():
    text = '{"offsetTable":{"TopicTest@g1":{0:250,1:249},"%RETRY%g1@g1":{0:0}}}'  # as a broker writes it
    assert parse_offsets(text) == {"TopicTest@g1": {0: 250, 1: 249}, "%RETRY%g1@g1": {0: 0}}
    out = format_offsets({"T@g": {1: 5, 0: 7}}, 3)
    assert '"T@g":{0:7,1:5}' in out  # integer keys unquoted, like fastjson
    assert parse_offsets(out) == {"T@g": {0: 7, 1: 5}}
    assert parse_offsets('{"offsetTable":{"T@g":{"0":1}}}') == {"T@g": {0: 1}}  # quoted keys read too
    data = json.loads(out.replace("{0:7,1:5}", '{"0":7,"1":5}'))
    assert set(data) == {"dataVersion", "offsetTable"}


def test_a_group_reads_every_message_once_and_resumes_after_commit(tmp_path):
    with MessageStore.open(tmp_path, cfg()) as s:
        fill(s, 90)
        c = s.consumer("g", "T")
        first = [c.poll(max_count=8) for _ in range(3)]
        seen = [m.body for batch in first for m in batch]
        c.commit()
        raw = open(offsets_path(str(tmp_path))).read()
        assert parse_offsets(raw)["T@g"] == c.positions
        assert sum(c.positions.values()) == len(seen)
    with MessageStore.open(tmp_path, cfg()) as s:
        rest = [m.body for m in s.consumer("g", "T")]
        assert sorted(seen + rest) == sorted(f"m{i}".encode() for i in range(90))
        assert len(set(seen + rest)) == 90
        other = [m.body for m in s.consumer("h", "T", start="latest")]
        assert other == []
        assert s.consumer("g", "T").lag() == {0: 30 - c.positions[0], 1: 30 - c.positions[1], 2: 30 - c.positions[2]}


def test_tags_filter_and_batch_topics_unpack(tmp_path):
    with MessageStore.open(tmp_path, cfg()) as s:
        fill(s, 40)
        assert sorted(m.body for m in s.consumer("g", "T", tags="TagA")) == sorted(
            f"m{i}".encode() for i in range(0, 40, 2)
        )
        s.create_topic("B", queues=1, attributes={"queue.type": "BatchCQ"})
        s.put_batch([Message("B", b"b%d" % i) for i in range(5)], 0)
        s.put_batch([Message("B", b"c%d" % i) for i in range(3)], 0)
        got = list(s.consumer("g", "B"))
        assert [m.body for m in got] == [b"b0", b"b1", b"b2", b"b3", b"b4", b"c0", b"c1", b"c2"]
        assert [m.queue_offset for m in got] == list(range(8))


def test_poll_waits_for_new_messages(tmp_path):
    with MessageStore.open(tmp_path, cfg()) as s:
        s.create_topic("T", queues=2)
        c = s.consumer("g", "T")
        assert c.poll(wait_ms=0) == []
        threading.Timer(0.2, lambda: s.put(Message("T", b"late"), 1)).start()
        t0 = time.monotonic()
        got = c.poll(wait_ms=5000)
        assert [m.body for m in got] == [b"late"] and time.monotonic() - t0 < 4


def test_a_stale_committed_offset_is_corrected(tmp_path):
    with MessageStore.open(tmp_path, cfg()) as s:
        fill(s, 6, queues=1)
        s.consumer_offsets.commit("g", "T", {0: 100})  # past the end: OFFSET_OVERFLOW_BADLY
        c = s.consumer("g", "T")
        assert c.poll() == [] and c.positions[0] == 6  # corrected to the max, as RocketMQ answers


def test_puts_without_a_queue_spread_round_robin_or_follow_their_sharding_key(tmp_path):
    from _index_ref import java_hash  # the tests' own String.hashCode

    def java_mod(a, n):  # Java's % truncates toward zero
        r = abs(a) % n
        return -r if a < 0 else r

    with MessageStore.open(tmp_path, cfg()) as s:
        assert [s.put(Message("T", b"x")).queue_offset for _ in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
        assert [s.max_offset("T", q) for q in range(4)] == [2, 2, 2, 2]  # a producer's 4 queues
        s.create_topic("S", queues=3)
        for key in ("order-1", "order-2", "订单-3", "polygenelubricants"):
            expected = abs(java_mod(java_hash(key), 3))  # SelectMessageQueueByHash
            before = s.max_offset("S", expected)
            for _ in range(2):
                s.put(Message("S", b"y", properties={"__SHARDINGKEY": key}))
            assert s.max_offset("S", expected) == before + 2, key
        totals = [s.max_offset("S", q) for q in range(3)]
        r = s.put_batch([Message("S", b"b1"), Message("S", b"b2")])
        after = [s.max_offset("S", q) for q in range(3)]
        assert r.ok and sorted(a - b for a, b in zip(after, totals)) == [0, 0, 2]  # one queue for a batch


def test_poll_honours_a_count_above_one_get(tmp_path):
    """One get returns at most 32 messages (RocketMQ's transfer count limit); poll(n) takes as many gets as
    n needs, across the queues, and never more than n."""
    with MessageStore.open(tmp_path, cfg()) as s:
        fill(s, 90)  # 30 per queue
        c = s.consumer("g", "T")
        got = c.poll(max_count=75)
        assert len(got) == 75
        assert len({(m.queue_id, m.queue_offset) for m in got}) == 75
        rest = c.poll(max_count=1000)
        assert len(rest) == 15 and c.poll(max_count=1000) == []
        assert sorted(m.body for m in got + rest) == sorted(f"m{i}".encode() for i in range(90))


def test_put_result_names_the_queue_the_store_chose(tmp_path):
    with MessageStore.open(tmp_path, cfg()) as s:
        s.create_topic("Q", queues=3)
        results = [s.put(Message("Q", b"x%d" % i)) for i in range(6)]
        assert sorted(r.queue_id for r in results) == [0, 0, 1, 1, 2, 2]  # round robin over 3 queues
        for i, r in enumerate(results):
            g = s.get("g", "Q", r.queue_id, r.queue_offset, 1)
            assert g.messages[0].body == b"x%d" % i
        b = s.put_batch([Message("Q", b"b0"), Message("Q", b"b1")])
        assert b.queue_id in (0, 1, 2) and [r.queue_id for r in b] == [b.queue_id] * 2
        assert s.get("g", "Q", b.queue_id, b.queue_offset + 1, 1).messages[0].body == b"b1"
        assert s.put(Message("Q", bytes(5 << 20))).queue_id == -1  # over maxMessageSize: nothing put, no queue
