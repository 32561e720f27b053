"""What recovery cuts never comes back, and ConsumeQueue units are checked against the CommitLog (issue #17,
points 4 and 5). Real stores on disk, damaged by writing bytes into their files; every expectation comes
from the PutResults recorded while writing (or from bytes computed here), never from the store under test."""

import logging
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rocketstore import GetStatus, Message, MessageStore, PutStatus, StoreConfig
from rocketstore.maintenance.verify import verify_store
from rocketstore.files import mapped_file

SEG = 4096
UNIT = 20
CQ_FILE_UNITS = 10
MODES = ["clean", "crash"]


def cfg():
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000))
    return StoreConfig(
        mapped_file_size_commit_log=SEG,
        mapped_file_size_consume_queue=CQ_FILE_UNITS * UNIT,
        max_hash_slot_num=8,
        max_index_num=32,
        clock=lambda: next(clock),
    )


def put(s, topic, queue, body):
    r = s.put(Message(topic, body, tags="tg", born_timestamp=1), queue)
    assert r.status is PutStatus.PUT_OK
    return r


def read_queue(s, topic, queue):
    """Every message get serves for a queue, as (queue offset asked for, topic, queue id, body), one get per
    offset so that an offset serving the wrong record shows."""
    out = []
    for off in range(s.min_offset(topic, queue), s.max_offset(topic, queue)):
        g = s.get("g", topic, queue, off, max_count=1)
        if g.status is GetStatus.FOUND:
            m = g.messages[0]
            out.append((off, m.topic, m.queue_id, m.queue_offset, m.body))
    return out


def expect(records, topic, queue):
    return [
        (r.queue_offset, topic, queue, r.queue_offset, body) for t, q, body, r in records if (t, q) == (topic, queue)
    ]


def cq_path(root, topic, queue, index):
    start = index * UNIT - index * UNIT % (CQ_FILE_UNITS * UNIT)
    return root / "consumequeue" / topic / str(queue) / f"{start:020d}", index * UNIT % (CQ_FILE_UNITS * UNIT)


def patch(path, pos, data):
    buf = bytearray(path.read_bytes())
    buf[pos : pos + len(data)] = data
    path.write_bytes(bytes(buf))


def patch_commitlog(root, phys, data):
    patch(root / "commitlog" / f"{phys - phys % SEG:020d}", phys % SEG, data)


def reopen(root, crash):
    if crash:
        (root / "abort").write_text("1")
    return MessageStore.open(root, cfg())


def assert_sound(root):
    report = verify_store(str(root), cfg())
    assert report["ok"], report["problems"]


# ------------------------------------------------------------------------------------------ point 4
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("new_topic", ["T", "U"])
def test_what_a_corrupt_record_cut_never_comes_back_after_a_same_size_put(tmp_path, mode, new_topic):
    """Twelve records of one size; the sixth gets a flipped body byte (a CRC failure: recovery cuts the log
    there, losing the six after it). One put of the same size then lands exactly on the cut record; a clean
    reopen must not find the six old records behind it."""
    root = tmp_path / "s"
    with MessageStore.open(root, cfg()) as s:
        records = [("T", 0, b"m%02d" % i * 10, put(s, "T", 0, b"m%02d" % i * 10)) for i in range(12)]
    cut = records[5][3]
    body_at = cut.physical_offset + 88  # IPv4 hosts: the body starts 88 bytes into the record
    patch_commitlog(root, body_at, bytes([records[5][2][0] ^ 0x40]))
    with reopen(root, mode == "crash") as s:
        assert s.max_offset("T", 0) == 5 and s.max_physical_offset == cut.physical_offset
        body = b"n%02d" % 5 * 10
        r = put(s, new_topic, 0, body)
        assert (r.physical_offset, r.size) == (cut.physical_offset, cut.size)  # the same bytes, overwritten
    kept = records[:5] + [(new_topic, 0, body, r)]
    for crash in (False, True):
        with reopen(root, crash) as s:
            assert s.max_physical_offset == r.physical_offset + r.size
            assert s.max_offset("T", 0) == len(expect(kept, "T", 0))
            assert read_queue(s, "T", 0) == expect(kept, "T", 0)
            assert read_queue(s, "U", 0) == expect(kept, "U", 0)
        assert_sound(root)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("clearing", ["punched hole", "zeros written"])
def test_a_torn_tail_then_a_shorter_put_leaves_a_sound_store(tmp_path, mode, clearing, caplog, monkeypatch):
    """The last record only half on disk (its second half zeros, as a torn write); after the cut one shorter
    record is put there. The bytes of the torn record past it must not stay: verify finds nothing wrong
    and the next recovery cuts nothing. Both ways of clearing: a punched hole, and (file systems that
    cannot punch) zeros written over the data past the cut."""
    if clearing == "zeros written":
        monkeypatch.setattr(mapped_file, "punch_hole", lambda fd, start, length: False)
    root = tmp_path / "s"
    with MessageStore.open(root, cfg()) as s:
        records = [("T", 0, b"x" * 300, put(s, "T", 0, b"x" * 300)) for _ in range(5)]
    last = records[-1][3]
    patch_commitlog(root, last.physical_offset + last.size // 2, bytes(last.size - last.size // 2))
    with reopen(root, mode == "crash") as s:
        assert s.max_physical_offset == last.physical_offset
        r = put(s, "T", 0, b"short")
        assert r.physical_offset == last.physical_offset and r.size < last.size // 2
    kept = records[:4] + [("T", 0, b"short", r)]
    assert_sound(root)
    caplog.set_level(logging.INFO, logger="rocketstore.recovery")
    caplog.clear()
    with reopen(root, False) as s:
        assert s.max_physical_offset == r.physical_offset + r.size
        assert read_queue(s, "T", 0) == expect(kept, "T", 0)
    assert not [m for m in caplog.records if m.name == "rocketstore.recovery" and m.levelno >= logging.WARNING]
    # on disk, after the new record: zeros to the end of the segment
    seg = (root / "commitlog" / f"{0:020d}").read_bytes()
    assert seg[r.physical_offset + r.size :] == bytes(SEG - r.physical_offset - r.size)


# ------------------------------------------------------------------------------------------ point 5
def build_two_queues(root, n_t=25, n_u=6):
    """T/0 gets n_t records (over several ConsumeQueue files), U/0 n_u, interleaved, U/0's last: so U/0's
    queue ends further in the CommitLog than T/0's (normal recovery starts dispatching after U/0)."""
    records = []
    with MessageStore.open(root, cfg()) as s:
        for i in range(n_t):
            body = b"t%03d" % i
            records.append(("T", 0, body, put(s, "T", 0, body)))
            if i % 5 == 4 and len([1 for t, *_ in records if t == "U"]) < n_u - 1:
                body = b"u%03d" % i
                records.append(("U", 0, body, put(s, "U", 0, body)))
        body = b"u-last"
        records.append(("U", 0, body, put(s, "U", 0, body)))
    return records


@pytest.mark.parametrize("mode", MODES)
def test_unit_size_past_the_commitlog_end_does_not_swallow_later_puts(tmp_path, mode):
    root = tmp_path / "s"
    records = build_two_queues(root)
    n = len(expect(records, "T", 0))
    path, pos = cq_path(root, "T", 0, n - 1)
    patch(path, pos + 8, struct.pack(">i", 0x7FFF0000))  # size field of T/0's last unit
    with reopen(root, mode == "crash") as s:
        assert s.max_offset("T", 0) == n
        r = put(s, "T", 0, b"after")
        assert r.queue_offset == n
        records.append(("T", 0, b"after", r))
        assert read_queue(s, "T", 0) == expect(records, "T", 0)
    for crash in (False, True):
        with reopen(root, crash) as s:
            assert read_queue(s, "T", 0) == expect(records, "T", 0)
            assert read_queue(s, "U", 0) == expect(records, "U", 0)
    assert_sound(root)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("files", [3, 1])
def test_garbage_at_the_head_of_a_queues_last_file(tmp_path, mode, seed, files):
    """T/0's last ConsumeQueue file (units 20..24 of three files, or units 0..7 of its only file) starts
    with two units of random bytes: every intact message stays served at its offset, and a put
    acknowledged afterwards survives a clean reopen."""
    root = tmp_path / "s"
    n = 25 if files == 3 else 8
    records = build_two_queues(root, n_t=n, n_u=3)
    assert len(expect(records, "T", 0)) == n
    path, pos = cq_path(root, "T", 0, (files - 1) * CQ_FILE_UNITS)
    assert pos == 0 and len(list(path.parent.iterdir())) == files
    rnd = random.Random(seed)
    garbage = bytes(rnd.randrange(256) for _ in range(2 * UNIT))
    if seed % 2:  # odd seeds: garbage that looks like units (offset >= 0, size > 0)
        garbage = b"".join(struct.pack(">qiq", rnd.randrange(1 << 40), rnd.randrange(1, 1 << 30), 0) for _ in "ab")
    patch(path, 0, garbage)
    with reopen(root, mode == "crash") as s:
        assert read_queue(s, "T", 0) == expect(records, "T", 0)
        r = put(s, "T", 0, b"after")
        assert r.queue_offset == n
        records.append(("T", 0, b"after", r))
        assert read_queue(s, "T", 0) == expect(records, "T", 0)
    with reopen(root, False) as s:
        assert s.min_offset("T", 0) == 0
        assert read_queue(s, "T", 0) == expect(records, "T", 0)
        assert read_queue(s, "U", 0) == expect(records, "U", 0)
    assert_sound(root)


def same_size_pair(root):
    """T/0 and U/0 records of identical sizes (same topic length, body length and tags)."""
    records = []
    with MessageStore.open(root, cfg()) as s:
        for i in range(8):
            for t in ("T", "U"):
                body = b"%s%03d" % (t.encode(), i)
                records.append((t, 0, body, put(s, t, 0, body)))
    assert len({r.size for *_, r in records}) == 1
    return records


@pytest.mark.parametrize("which", ["middle", "last"])
def test_a_unit_pointing_at_another_topics_record_is_never_served(tmp_path, which):
    root = tmp_path / "s"
    records = same_size_pair(root)
    t_recs = [r for t, q, b, r in records if t == "T"]
    u_recs = [r for t, q, b, r in records if t == "U"]
    k = 3 if which == "middle" else len(t_recs) - 1
    path, pos = cq_path(root, "T", 0, k)
    patch(path, pos, struct.pack(">q", u_recs[k].physical_offset))
    # read-only: nothing on disk changes, and get never answers with U's record for T/0
    before = path.read_bytes()
    with MessageStore.open(root, cfg(), read_only=True) as s:
        assert read_queue(s, "T", 0) == expect(records, "T", 0)
        g = s.get("g", "T", 0, 0, max_count=32)
        assert [(m.topic, m.queue_offset) for m in g.messages] == [("T", i) for i in range(len(t_recs))]
    assert path.read_bytes() == before
    # a writable open repairs the unit from the CommitLog: on disk it points at T's record again
    with MessageStore.open(root, cfg()) as s:
        assert read_queue(s, "T", 0) == expect(records, "T", 0)
        assert read_queue(s, "U", 0) == expect(records, "U", 0)
    assert struct.unpack_from(">qi", path.read_bytes(), pos) == (t_recs[k].physical_offset, t_recs[k].size)
    assert_sound(root)


@pytest.fixture(scope="module")
def pristine_two_queues(tmp_path_factory):
    root = tmp_path_factory.mktemp("pristine")
    records = build_two_queues(root)
    files = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return records, files


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    queue=st.sampled_from(["T", "U"]),
    index=st.integers(0, 24),
    field=st.sampled_from(["pos", "size", "all"]),
    value=st.integers(-(1 << 63), (1 << 63) - 1),
    crash=st.booleans(),
)
def test_one_corrupt_unit_never_loses_or_misplaces_a_message(
    tmp_path_factory, pristine_two_queues, queue, index, field, value, crash
):
    """Any one unit of either queue with any value in its offset or size field (or all 20 bytes): after
    reopening, every acknowledged message is served at its own offset with its own body, and a new put
    to that queue is served too, also after the next reopen."""
    records, files = pristine_two_queues
    n = len(expect(records, queue, 0))
    index %= n
    root = tmp_path_factory.mktemp("h")
    for rel, data in files.items():
        if rel in ("abort", "lock"):
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    path, pos = cq_path(root, queue, 0, index)
    if field == "pos":
        patch(path, pos, struct.pack(">q", value))
    elif field == "size":
        patch(path, pos + 8, struct.pack(">i", value % (1 << 32) - (1 << 31)))
    else:
        patch(path, pos, random.Random(value).randbytes(UNIT))
    with reopen(root, crash) as s:
        for t in ("T", "U"):
            assert read_queue(s, t, 0) == expect(records, t, 0)
        r = put(s, queue, 0, b"after")
        assert r.queue_offset == n
    with reopen(root, False) as s:
        got = read_queue(s, queue, 0)
        assert got == expect(records + [(queue, 0, b"after", r)], queue, 0)


def test_a_batch_unit_pointing_at_another_topics_record_is_never_served(tmp_path):
    """The same for a batch ConsumeQueue (RIP-26): B/0's first unit (46 bytes: offset 8 | size 4 | ...)
    made to point at C/0's inner-batch record of the same size. The unit is rebuilt from the CommitLog
    (in the read-only mapping): B's own two batches are served, C's never (more in
    test_batch_queue_trust.py)."""
    root = tmp_path / "s"
    with MessageStore.open(root, cfg()) as s:
        for t in ("B", "C"):
            s.create_topic(t, queues=1, attributes={"queue.type": "BatchCQ"})
        rb = [s.put_batch([Message("B", b"b%d-%d" % (k, i)) for i in range(3)], 0) for k in range(2)]
        rc = [s.put_batch([Message("C", b"c%d-%d" % (k, i)) for i in range(3)], 0) for k in range(2)]
        assert all(r.ok for r in rb + rc)
    unit = root / "batchconsumequeue" / "B" / "0" / f"{0:020d}"
    assert rb[0].size == rc[0].size
    patch(unit, 0, struct.pack(">q", rc[0].physical_offset))
    with MessageStore.open(root, cfg(), read_only=True) as s:
        g = s.get("g", "B", 0, 0, max_count=32)
        assert g.status is GetStatus.FOUND
        assert [(m.topic, m.physical_offset) for m in g.messages] == [("B", r.physical_offset) for r in rb]
