"""Batch ConsumeQueue (RIP-26) units are checked against the CommitLog (issue #17 point 5), as plain
ConsumeQueue units are (test_recovery_trust.py). Real stores on disk, damaged by writing bytes into their
batchconsumequeue files; every expectation comes from the put results recorded while writing (or from
bytes computed here), never from the store under test.

A batch unit is 46 bytes: phyOffset 8 | size 4 | tagsCode 8 | storeTime 8 | msgBaseOffset 8 | batchSize 2 |
compactedOffset 4 | reserved 4 (big-endian)."""

import random
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rocketstore import GetStatus, Message, MessageStore, StoreConfig
from rocketstore.maintenance.verify import verify_store
from rocketstore.formats import batch_cq

SEG = 4096
UNIT = 46
FILE_UNITS = 5
MODES = ["clean", "crash"]
FIELDS = {"pos": (0, ">q"), "size": (8, ">i"), "base": (28, ">q"), "batch": (36, ">h")}


def cfg():
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000))
    return StoreConfig(
        mapped_file_size_commit_log=SEG,
        mapped_file_size_consume_queue=10 * 20,
        mapped_file_size_batch_consume_queue=FILE_UNITS * UNIT,
        max_hash_slot_num=8,
        max_index_num=32,
        clock=lambda: next(clock),
    )


class Batch:
    """One acknowledged put into a batch topic: its record (physical offset, size), its unit's base offset
    and batch size, and its messages' bodies."""

    def __init__(self, topic, bodies, r):
        assert r.ok, r.status
        self.topic, self.bodies = topic, bodies
        self.pos, self.size, self.base, self.batch = r.physical_offset, r.size, r.queue_offset, len(bodies)

    def unit_bytes(self):
        """The unit's first fields as dispatch writes them, for comparing with the file."""
        return struct.pack(">qi", self.pos, self.size), struct.pack(">qh", self.base, self.batch)


def put_batch(s, topic, bodies):
    if len(bodies) == 1 and bodies[0].startswith(b"single"):  # a plain record on a batch topic: batch size 1
        r = s.put(Message(topic, bodies[0], tags="tg"), 0)
    else:
        r = s.put_batch([Message(topic, b, tags="tg") for b in bodies], 0)
    return Batch(topic, bodies, r)


def open_store(root):
    s = MessageStore.open(root, cfg())
    for t in ("B", "C"):
        if s.consume_queue(t, 0) is None:
            s.create_topic(t, queues=1, attributes={"queue.type": "BatchCQ"})
    return s


def build(root, n_b=12, n_c=4):
    """B/0 gets n_b batches of 1 to 4 messages (every seventh a plain record), C/0 n_c, interleaved, C/0's
    last: C/0's queue ends further in the CommitLog than B/0's (normal recovery starts dispatching after it)."""
    batches = []
    with open_store(root) as s:
        for i in range(n_b):
            bodies = [b"single%03d" % i] if i % 7 == 3 else [b"b%03d-%d" % (i, k) for k in range(1 + i % 4)]
            batches.append(put_batch(s, "B", bodies))
            if i % 4 == 1 and sum(b.topic == "C" for b in batches) < n_c - 1:
                batches.append(put_batch(s, "C", [b"c%03d-%d" % (i, k) for k in range(3)]))
        batches.append(put_batch(s, "C", [b"c-last-%d" % k for k in range(2)]))
    return batches


def expect(batches, topic):
    """(offset asked for, topic, queue offset served, body) for every message of a queue."""
    out = []
    for b in batches:
        if b.topic == topic:
            out += [(b.base + k, topic, b.base + k, body) for k, body in enumerate(b.bodies)]
    return out


def end_of(batches, topic):
    return max(b.base + b.batch for b in batches if b.topic == topic)


def read_queue(s, topic):
    """What one get per queue offset serves first (a get from inside a batch serves the batch from there)."""
    out = []
    for off in range(s.min_offset(topic, 0), s.max_offset(topic, 0)):
        g = s.get("g", topic, 0, off, max_count=1)
        if g.status is GetStatus.FOUND:
            m = g.unpacked()[0]
            out.append((off, m.topic, m.queue_offset, m.body))
    return out


def read_all_at_once(s, topic):
    """Every message served walking the queue with large gets, as a consumer does."""
    out, off = [], s.min_offset(topic, 0)
    while off < s.max_offset(topic, 0):
        g = s.get("g", topic, 0, off, max_count=32)
        out += [(m.topic, m.queue_offset, m.body) for m in g.unpacked()]
        off = max(off + 1, g.next_begin_offset)
    return out


def unit_path(root, topic, slot):
    return (
        root / "batchconsumequeue" / topic / "0" / f"{slot // FILE_UNITS * FILE_UNITS * UNIT:020d}",
        slot % FILE_UNITS * UNIT,
    )


def patch(path, pos, data):
    buf = bytearray(path.read_bytes())
    buf[pos : pos + len(data)] = data
    path.write_bytes(bytes(buf))


def reopen(root, crash, read_only=False):
    if crash:
        (root / "abort").write_text("1")
    return MessageStore.open(root, cfg(), read_only=read_only)


def assert_all_served(root, batches, crash=False, read_only=False):
    with reopen(root, crash, read_only) as s:
        for t in ("B", "C"):
            assert (s.min_offset(t, 0), s.max_offset(t, 0)) == (0, end_of(batches, t))
            assert read_queue(s, t) == expect(batches, t)
            assert read_all_at_once(s, t) == [e[1:] for e in expect(batches, t)]


def assert_sound(root):
    report = verify_store(str(root), cfg())
    assert report["ok"], report["problems"]


def put_after_and_check(root, batches, topic, crash):
    """A put after the damaged open lands at the queue's true end and is served, also after a clean reopen."""
    end = end_of(batches, topic)
    with reopen(root, crash) as s:
        for t in ("B", "C"):
            assert (s.min_offset(t, 0), s.max_offset(t, 0)) == (0, end_of(batches, t))
            assert read_queue(s, t) == expect(batches, t)
        after = put_batch(s, topic, [b"after-%d" % k for k in range(2)])
        assert after.base == end
        batches = batches + [after]
        assert read_queue(s, topic) == expect(batches, topic)
    assert_all_served(root, batches)
    return batches


# ------------------------------------------------------------------------------------------ pure
def test_chain_breaks_finds_units_that_do_not_follow():
    def arr(rows):
        a = np.zeros(len(rows), dtype=batch_cq.DTYPE)
        for i, (pos, size, base, batch) in enumerate(rows):
            a[i]["pos"], a[i]["size"], a[i]["base_offset"], a[i]["batch_size"] = pos, size, base, batch
        return a

    good = [(0, 100, 0, 3), (100, 90, 3, 1), (400, 50, 4, 2), (450, 60, 6, 5)]  # gaps in the log are fine
    assert list(batch_cq.chain_breaks(arr(good))) == []
    assert list(batch_cq.chain_breaks(arr(good[:1]))) == []
    wrong_base = good[:2] + [(400, 50, 5, 2)] + good[3:]  # 3 + 1 = 4, not 5: breaks on both sides
    assert list(batch_cq.chain_breaks(arr(wrong_base))) == [1, 2]
    wrong_batch = [(0, 100, 0, 7)] + good[1:]  # 0 + 7 != 3
    assert list(batch_cq.chain_breaks(arr(wrong_batch))) == [0]
    overlapping = good[:1] + [(99, 90, 3, 1)] + good[2:]  # starts inside the record before
    assert list(batch_cq.chain_breaks(arr(overlapping))) == [0]
    huge = good[:1] + [((1 << 63) - 1, 90, 3, 1)] + good[2:]  # an offset whose end wraps
    assert list(batch_cq.chain_breaks(arr(huge))) == [1]


# ------------------------------------------------------------------------------------------ recovery
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("files", [3, 1])
def test_garbage_at_the_head_of_a_batch_queues_last_file(tmp_path, mode, seed, files):
    """B/0's last batch ConsumeQueue file (units 10..12 of three files, or units 0..3 of its only file)
    starts with two units of random bytes: every intact message stays served at its offset, and a put
    acknowledged afterwards gets the next offset and survives a reopen."""
    root = tmp_path / "s"
    n = 13 if files == 3 else 4
    batches = build(root, n_b=n, n_c=2)
    path, pos = unit_path(root, "B", (files - 1) * FILE_UNITS)
    assert pos == 0 and len(list(path.parent.iterdir())) == files
    rnd = random.Random(seed)
    garbage = bytes(rnd.randrange(256) for _ in range(2 * UNIT))
    if seed % 2:  # odd seeds: garbage that passes recovery's validity test (offsets >= 0, sizes > 0)
        garbage = b"".join(
            batch_cq.encode_unit(
                rnd.randrange(1 << 40),
                rnd.randrange(1, 1 << 30),
                0,
                0,
                rnd.randrange(1 << 40),
                rnd.randrange(1, 0x7FFF),
            )
            for _ in "ab"
        )
    patch(path, 0, garbage)
    put_after_and_check(root, batches, "B", mode == "crash")
    assert_sound(root)


@pytest.mark.parametrize("mode", MODES)
def test_a_run_of_zeros_over_units_in_the_middle(tmp_path, mode):
    """Zeros over the second half of unit 5 and the first half of unit 6 of B/0: recovery stops at an invalid
    unit with units after it (a hole, not the end of what was written) and rebuilds them from the log."""
    root = tmp_path / "s"
    batches = build(root)
    path, pos = unit_path(root, "B", 5)
    patch(path, pos + UNIT // 2, bytes(UNIT))
    put_after_and_check(root, batches, "B", mode == "crash")
    assert_sound(root)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("field,value", [("size", 0x7FFF0000), ("pos", 1 << 40), ("batch", 0x7FFF), ("base", 1 << 50)])
def test_a_last_unit_past_the_log_or_with_wrong_offsets_does_not_swallow_later_puts(tmp_path, mode, field, value):
    """B/0's last unit reaching past the CommitLog's end, or claiming queue offsets its record does not have
    (RocketMQ would take its max offset from them): it is rebuilt, and a later put gets the true next offset."""
    root = tmp_path / "s"
    batches = build(root)
    last = len([b for b in batches if b.topic == "B"]) - 1
    path, pos = unit_path(root, "B", last)
    at, fmt = FIELDS[field]
    patch(path, pos + at, struct.pack(fmt, value))
    put_after_and_check(root, batches, "B", mode == "crash")
    assert_sound(root)


def same_size_pair(root):
    """B/0 and C/0 batches of identical record sizes, alternating (bases 0, 3, 6, 9: INNER_BASE one digit)."""
    batches = []
    with open_store(root) as s:
        for i in range(4):
            for t in ("B", "C"):
                batches.append(put_batch(s, t, [b"%s%03d-%d" % (t.encode(), i, k) for k in range(3)]))
    assert len({b.size for b in batches}) == 1
    return batches


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("which", ["first", "middle", "last"])
def test_a_batch_unit_pointing_at_another_topics_record_is_rebuilt(tmp_path, which, mode):
    """B/0's unit k made to point at C/0's record of the same size (the record right after B's own, so the
    units still look in log order): never served as B's; a read-only open serves B's own record and leaves
    the file alone; a writable open rebuilds the unit on disk from the CommitLog."""
    root = tmp_path / "s"
    batches = same_size_pair(root)
    b_recs = [b for b in batches if b.topic == "B"]
    c_recs = [b for b in batches if b.topic == "C"]
    k = {"first": 0, "middle": 2, "last": len(b_recs) - 1}[which]
    path, pos = unit_path(root, "B", k)
    patch(path, pos, struct.pack(">q", c_recs[k].pos))
    before = path.read_bytes()
    assert_all_served(root, batches, crash=mode == "crash", read_only=True)
    assert path.read_bytes() == before
    assert_all_served(root, batches, crash=mode == "crash")
    data = path.read_bytes()
    assert (data[pos : pos + 12], data[pos + 28 : pos + 38]) == b_recs[k].unit_bytes()
    assert_sound(root)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("field", ["base", "batch", "pos", "size"])
def test_a_wrong_unit_in_an_old_file_is_rebuilt_on_read(tmp_path, mode, field):
    """Recovery walks only the last three files of a queue (as RocketMQ). A unit in the middle of an older
    file with a wrong base offset (which misleads the binary search), batch size (which moves the next
    offset), offset or size is found by the get that meets it and rebuilt from the CommitLog."""
    root = tmp_path / "s"
    batches = build(root, n_b=27, n_c=3)
    path, pos = unit_path(root, "B", 2)
    assert len(list(path.parent.iterdir())) == 6 and path.name == f"{0:020d}"
    b2 = [b for b in batches if b.topic == "B"][2]
    at, fmt = FIELDS[field]
    wrong = {"base": b2.base + 1000, "batch": b2.batch + 5, "pos": b2.pos + 7, "size": b2.size - 1}[field]
    patch(path, pos + at, struct.pack(fmt, wrong))
    assert_all_served(root, batches, crash=mode == "crash", read_only=True)
    assert_all_served(root, batches, crash=mode == "crash")
    data = path.read_bytes()
    assert (data[pos : pos + 12], data[pos + 28 : pos + 38]) == b2.unit_bytes()
    assert_sound(root)


# ------------------------------------------------------------------------------------------ property
@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("pristine")
    batches = build(root)
    files = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return batches, files


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    topic=st.sampled_from(["B", "C"]),
    index=st.integers(0, 15),
    field=st.sampled_from(["pos", "size", "base", "batch", "all"]),
    value=st.integers(-(1 << 63), (1 << 63) - 1),
    crash=st.booleans(),
)
def test_one_corrupt_batch_unit_never_loses_or_misplaces_a_message(
    tmp_path_factory, pristine, topic, index, field, value, crash
):
    """Any one unit of either queue with any value in its offset, size, base offset or batch size field (or
    all 46 bytes random): after reopening, every acknowledged message is served at its own offset with its
    own body, and a new put to that queue gets the next offset and is served, also after the next reopen."""
    batches, files = pristine
    index %= len([b for b in batches if b.topic == topic])
    root = tmp_path_factory.mktemp("h")
    for rel, data in files.items():
        if rel in ("abort", "lock"):
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    path, pos = unit_path(root, topic, index)
    if field == "all":
        patch(path, pos, random.Random(value).randbytes(UNIT))
    else:
        at, fmt = FIELDS[field]
        bits = struct.calcsize(fmt) * 8
        patch(path, pos + at, struct.pack(fmt, (value % (1 << bits)) - (1 << (bits - 1))))
    put_after_and_check(root, batches, topic, crash)


# ------------------------------------------------------------------------------------------ trusting the queues
def test_an_open_trusting_the_queues_serves_a_batch_queues_last_record(tmp_path):
    """open(read_only=True, check_commitlog=False) takes the CommitLog to end where the queues' last record
    ends. A batch queue's max physical offset is its last record's start (RocketMQ's maxMsgPhyOffsetInCommitLog):
    taken as the end, the last batch was cut off the log. Here the log's last record is B/0's last batch."""
    root = tmp_path / "s"
    batches = build(root, n_b=6, n_c=2)
    with open_store(root) as s:
        batches.append(put_batch(s, "B", [b"last-%d" % k for k in range(3)]))
    with MessageStore.open(root, cfg(), read_only=True, check_commitlog=False) as s:
        assert s.max_physical_offset == batches[-1].pos + batches[-1].size
        for t in ("B", "C"):
            assert read_queue(s, t) == expect(batches, t)
