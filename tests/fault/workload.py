"""The store configuration and message bodies the fault-injection tests share, and the writer child they kill.

Run as a script (`python workload.py ROOT MODE SEED`), it opens the store for writing and loops forever over
one kind of work, printing one line per acknowledged operation (flushed at once, so a line the parent reads
was acknowledged before the kill):
  ack TOPIC QUEUE QUEUE_OFFSET BODY_SHA1       a put or a put_batch message that answered PUT_OK
  commit QUEUE OFFSET                          ConsumerOffsets.commit() returned
  cleaned N                                    delete_expired_files() returned
Sizes are tiny on purpose: a CommitLog segment every ~60 KiB, a ConsumeQueue file every 50 units and an index
file every 60 entries, so that segment creation and index rolls happen many times a second.
"""

import hashlib
import random
import sys

TOPIC = "Orders"
BATCH_TOPIC = "Batches"  # a batch-ConsumeQueue topic (RIP-26)
QUEUES = 3


def config(**extra):
    from rocketstore import StoreConfig

    return StoreConfig(
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=50 * 20,
        mapped_file_size_batch_consume_queue=20 * 46,
        max_hash_slot_num=16,
        max_index_num=60,
        **extra,
    )


def body(seed: int, n: int) -> bytes:
    """A body of 1..3000 bytes that names its seed and number (so any two differ)."""
    rng = random.Random(seed * 1_000_003 + n)
    head = f"{seed}-{n}-".encode()
    return head + bytes(rng.choice(b"abcdefghij") for _ in range(rng.randint(0, 3000)))


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _put(store, seed: int, rng: random.Random) -> None:
    from rocketstore import Message

    n = 0
    while True:
        q = rng.randrange(QUEUES)
        b = body(seed, n)
        r = store.put(Message(TOPIC, b, tags=f"T{n % 3}", keys=[f"k{seed}-{n}", f"shared{n % 5}"]), queue_id=q)
        if r.ok:
            _say(f"ack {TOPIC} {q} {r.queue_offset} {sha1(b)}")
        n += 1


def _put_batch(store, seed: int, rng: random.Random) -> None:
    from rocketstore import Message

    n = 0
    while True:
        q = rng.randrange(QUEUES)
        topic = BATCH_TOPIC if rng.random() < 0.3 else TOPIC
        bodies = [body(seed, n + i) for i in range(rng.randint(1, 12))]
        n += len(bodies)
        msgs = [Message(topic, b, tags="B", keys=[f"b{seed}-{n}-{i}"]) for i, b in enumerate(bodies)]
        r = store.put_batch(msgs, queue_id=q)
        if r.ok:
            for i, b in enumerate(bodies):
                _say(f"ack {topic} {q} {r.queue_offset + i} {sha1(b)}")


def _cleanup(store, seed: int, rng: random.Random) -> None:
    """Puts, and every few puts deletes expired CommitLog files (all but the newest are 'expired': the clock
    passed to delete_expired_files is far ahead), with the queue and index files in step."""
    from rocketstore import Message

    n = 0
    while True:
        for _ in range(rng.randint(5, 40)):
            q = rng.randrange(QUEUES)
            b = body(seed, n)
            r = store.put(Message(TOPIC, b, keys=[f"c{seed}-{n}"]), queue_id=q)
            n += 1
            if r.ok:
                _say(f"ack {TOPIC} {q} {r.queue_offset} {sha1(b)}")
        _say(f"cleaned {store.delete_expired_files(now_ms=store.config.clock() + 10**9)}")


def _commit(store, seed: int, rng: random.Random) -> None:
    """Commits ever larger offsets for one group (the whole consumerOffset.json is rewritten each time)."""
    offsets = store.consumer_offsets
    start = max(offsets.query("g", TOPIC, q) for q in range(QUEUES))
    n = max(start, 0)
    while True:
        n += 1
        q = rng.randrange(QUEUES)
        offsets.commit("g", TOPIC, {qq: n for qq in range(QUEUES)})
        _say(f"commit {q} {n}")


MODES = {"put": _put, "put_batch": _put_batch, "cleanup": _cleanup, "commit": _commit}


def main() -> None:
    root, mode, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from rocketstore import MessageStore

    store = MessageStore.open(root, config())
    if BATCH_TOPIC not in store.topics():
        store.create_topic(BATCH_TOPIC, queues=QUEUES, attributes={"queue.type": "BatchCQ"})
        store.create_topic(TOPIC, queues=QUEUES)
    _say("open")
    MODES[mode](store, seed, random.Random(seed))


if __name__ == "__main__":
    main()
