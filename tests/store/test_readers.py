"""Store-less readers (rocketstore.read.file_readers) against what the store itself answers, on a live writer's files."""

from hypothesis import given, settings, strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.read.file_readers import queue_end

CFG = StoreConfig(
    mapped_file_size_commit_log=64 * 1024,
    mapped_file_size_consume_queue=10 * 20,
    mapped_file_size_batch_consume_queue=4 * 46,
)


@settings(max_examples=25)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 5), st.booleans()), max_size=40))
def test_queue_end_is_the_stores_max_offset_while_it_writes(tmp_path_factory, puts):
    """Plain queues (files of 10 units) and batch queues (files of 4 units, whose newest file may be empty):
    after every put the end read from the files is the store's max offset."""
    root = str(tmp_path_factory.mktemp("store"))
    with MessageStore.open(root, CFG) as s:
        s.create_topic("B", queues=3, attributes={"queue.type": "BatchCQ"})
        for q in range(3):
            assert queue_end(root, "T", q, False) == 0 and queue_end(root, "B", q, True) == 0
        for q, n, batch in puts:
            topic = "B" if batch else "T"
            msgs = [Message(topic, b"x%d" % i) for i in range(n)]
            r = s.put_batch(msgs, q) if batch else s.put(msgs[0], q)
            assert r.ok
            assert queue_end(root, topic, q, batch) == s.max_offset(topic, q)
