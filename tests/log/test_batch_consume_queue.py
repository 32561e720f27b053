"""BatchConsumeQueue: RocketMQ's BatchConsumeQueueTest behaviours on small files (20 units of 46 B), the
corner cases of its recovery, truncation and time lookups, and the golden store's batch queues."""

import hashlib
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from golden import goldens as GD
from rocketstore.log.batch_consume_queue import DEFAULT_FILE_SIZE, LOWER, UPPER, BatchConsumeQueue

UNIT = 46
PER_FILE = 20
FILE_SIZE = UNIT * PER_FILE  # RocketMQ's test uses 20 units per file as well


def open_bcq(root, *, writable=True, search_by_cache=True, recover=False, file_size=FILE_SIZE):
    q = BatchConsumeQueue(str(root), "topic", 0, file_size, writable=writable, search_by_cache=search_by_cache)
    q.load()
    if recover:
        q.recover()
    return q


def fill(q, n, batch=10, first_base=1, size=100, tags=0):
    """RocketMQ's test data: unit i points at physical offset i, stored at time i*batch, base i*batch+first."""
    for i in range(n):
        assert q.put(i, size, tags, i * batch, i * batch + first_base, batch)


def files_of(q):
    return [os.path.basename(mf.path) for mf in q.files.files]


def base_of(q, msg_offset):
    r = q.units_from(msg_offset)
    return None if r is None else r[0]


@pytest.fixture(params=[True, False], ids=["maps", "file-scan"])
def by_cache(request):
    return request.param


# ---- BatchConsumeQueueTest ------------------------------------------------------------------------


def test_build_and_iterate(tmp_path, by_cache):
    q = open_bcq(tmp_path, search_by_cache=by_cache)
    batch, n, initial = 10, 1000, 1000
    for i in range(n):
        assert q.put(i, 1024, 111, i * batch, i * batch + initial, batch)
    assert len(q.files.files) == n // PER_FILE == 50
    assert q.max_offset == initial + batch * n
    assert q.min_offset == initial
    first, last = q.earliest_unit(), q.latest_unit()
    assert (first.base_offset, first.batch_size) == (initial, batch)
    assert (last.base_offset, last.batch_size) == (initial + batch * n - batch, batch)
    for i in range(initial + batch * n + 10):
        u = q.get_unit(i)
        if i < initial or i >= initial + batch * n:
            assert u is None and q.units_from(i) is None
            continue
        assert u.base_offset == (i // batch) * batch
        assert u.batch_size == batch
        assert u.pos == (i - initial) // batch
        assert (u.size, u.tags, u.store_time) == (1024, 111, u.pos * batch)
        assert (u.compacted_offset, u.reserved) == (-1, 0)


def test_build_and_search(tmp_path, by_cache):
    q = open_bcq(tmp_path, search_by_cache=by_cache)
    batch, n = 10, 2000
    fill(q, n, batch)
    assert len(q.files.files) == 100
    assert q.max_offset == n * batch + 1 and q.min_offset == 1
    q.revise_offsets()
    assert q.max_offset == n * batch + 1 and q.min_offset == 1
    assert q.units_from(0) is None
    assert q.units_from(1) is not None
    assert q.units_from(n * batch + 1) is None
    assert q.units_from(n * batch) is not None
    for i in range(1, n * batch + 1):
        assert base_of(q, i) == ((i - 1) // batch) * batch + 1
    base, units = q.units_from(501)
    assert base == 501 and int(units["base_offset"][0]) == 501 and int(units["batch_size"][0]) == 10
    # the view runs to the end of what is written in the unit's file: unit 50 is the 11th of file 2
    assert len(units) == PER_FILE - 50 % PER_FILE
    # by store time: unit i was stored at i*10
    assert q.offset_by_time(-100) == 1
    assert q.offset_by_time(0) == 1
    assert q.offset_by_time(1) == 11
    for i in range(n):
        assert q.offset_by_time(i * batch) == i * batch + 1
    assert q.offset_by_time(1_700_000_000_000) == (n - 1) * batch + 1


def test_build_and_recover(tmp_path):
    q = open_bcq(tmp_path)
    fill(q, 100)
    assert len(q.files.files) == 5 and q.max_offset == 1001 and q.min_offset == 1
    for _ in range(10):
        q.flush(0)
    q.close()
    r = open_bcq(tmp_path, recover=True)
    assert len(r.files.files) == 5
    assert r.max_offset == 1001 and r.min_offset == 1
    assert r.max_physic_offset == 99  # the START of the last unit's record, not its end
    for i in range(1, 1001):
        assert base_of(r, i) == ((i - 1) // 10) * 10 + 1


@pytest.mark.parametrize("cut", [1, 7, 19, 20, 21, 57, 99, 100, 500])
def test_truncate(tmp_path, cut, by_cache):
    q = open_bcq(tmp_path, search_by_cache=by_cache)
    n = 100
    fill(q, n)
    q.truncate_dirty(cut)
    kept = min(cut, n)
    assert len(q.files.files) == -(-kept // PER_FILE)
    assert q.max_offset == kept * 10 + 1 and q.min_offset == 1
    assert q.max_physic_offset == kept - 1
    for i in range(n):
        msg_offset = i * 10 + 1
        if i < cut:
            assert base_of(q, msg_offset) == msg_offset and base_of(q, msg_offset + 9) == msg_offset
        else:
            assert q.units_from(msg_offset) is None
    # the queue carries on from the cut
    for i in range(kept, n):
        assert q.put(i, 100, 0, i * 10, i * 10 + 1, 10)
    assert q.max_offset == n * 10 + 1
    for i in range(1, n * 10 + 1):
        assert base_of(q, i) == ((i - 1) // 10) * 10 + 1


def test_truncate_everything(tmp_path):
    q = open_bcq(tmp_path)
    fill(q, 30)
    q.truncate_dirty(0)
    assert q.files.files == [] and os.listdir(q.directory) == []
    assert (q.min_offset, q.max_offset, q.max_physic_offset, q.min_logic_offset) == (-1, 0, -1, -1)


def test_truncate_and_delete(tmp_path):
    q = open_bcq(tmp_path)
    fill(q, 100)
    assert len(q.files.files) == 5 and q.max_offset == 1001 and q.min_offset == 1
    q.truncate_dirty(80)
    assert len(q.files.files) == 4 and q.max_offset == 801 and q.min_offset == 1
    assert q.delete_expired(30) == 1
    assert len(q.files.files) == 3
    assert q.max_offset == 801
    assert q.min_offset == 301  # units of physical offsets 20..29 (bases 201..291) fell below the min
    assert (
        sorted(os.listdir(q.directory))
        == files_of(q)
        == ["00000000000000000920", "00000000000000001840", "00000000000000002760"]
    )
    # lookups do not check the min (RocketMQ's neither): only what the deleted file held is gone
    assert q.units_from(200) is None and base_of(q, 201) == 201 and base_of(q, 300) == 291


# ---- put and its guards ---------------------------------------------------------------------------


def test_put_writes_the_unit_bytes(tmp_path):
    q = open_bcq(tmp_path)
    assert q.put(4096, 300, -206781625, 1_700_000_000_123, 17, 16)
    q.flush()
    with open(os.path.join(q.directory, "00000000000000000000"), "rb") as fh:
        data = fh.read()
    assert len(data) == FILE_SIZE
    assert data[:46] == struct.pack(">qiqqqhii", 4096, 300, -206781625, 1_700_000_000_123, 17, 16, -1, 0)
    assert data[46:] == bytes(FILE_SIZE - 46)
    assert (q.min_offset, q.max_offset, q.max_physic_offset) == (17, 33, 4096)


def test_put_guards(tmp_path):
    q = open_bcq(tmp_path)
    assert q.put(100, 10, 0, 1, 0, 2)
    # a record at or before the last unit's start is already built: accepted, nothing written
    assert q.put(100, 10, 0, 1, 2, 3) is True
    assert q.put(50, 10, 0, 1, 2, 3) is True
    assert q.files.max_offset() == 46 and q.max_offset == 2
    # the dispatch wrapper drops negative bases or batch sizes
    assert q.dispatch(200, 10, 0, 1, -1, 3) is None
    assert q.dispatch(200, 10, 0, 1, 2, -3) is None
    assert q.files.max_offset() == 46
    # ... but lets batch size 0 through; recovery then sees that unit as the end of the queue
    assert q.dispatch(200, 10, 0, 1, 2, 0) is True
    assert q.dispatch(300, 10, 0, 1, 2, 4) is True
    assert q.files.max_offset() == 3 * 46 and q.max_offset == 6
    q.close()
    r = open_bcq(tmp_path, recover=True)
    assert r.files.max_offset() == 46 and r.max_offset == 2 and r.max_physic_offset == 100


def test_queue_starting_past_zero_has_no_pre_blanks(tmp_path):
    q = open_bcq(tmp_path)
    assert q.put(10, 10, 0, 1, 5000, 4)
    assert files_of(q) == ["00000000000000000000"] and q.files.max_offset() == 46
    assert (q.min_offset, q.max_offset) == (5000, 5004)
    assert q.units_from(4999) is None and base_of(q, 5003) == 5000


def test_empty_queue(tmp_path):
    q = open_bcq(tmp_path, recover=True)
    assert (q.min_offset, q.max_offset, q.message_total) == (-1, 0, 1)
    assert q.units_from(0) is None and q.get_unit(0) is None
    assert q.offset_by_time(123) == -1
    assert q.last_physical_end() == -1
    assert q.roll_next_file(123) == 0


def test_last_physical_end_and_total(tmp_path):
    q = open_bcq(tmp_path)
    fill(q, 25, size=7)
    assert q.last_physical_end() == 24 + 7
    assert q.message_total == 250


def test_bad_file_size(tmp_path):
    with pytest.raises(ValueError):
        BatchConsumeQueue(str(tmp_path), "t", 0, 1000, writable=True)
    assert DEFAULT_FILE_SIZE == 13_800_000


# ---- recovery -------------------------------------------------------------------------------------


def poke(q_dir, file_start, unit_index, **fields):
    """Overwrite fields of one unit on disk (a crash that left a unit half written)."""
    layout = {"pos": (0, ">q"), "size": (8, ">i"), "base": (28, ">q"), "batch": (36, ">h")}
    with open(os.path.join(q_dir, f"{file_start:020d}"), "r+b") as fh:
        for name, value in fields.items():
            at, fmt = layout[name]
            fh.seek(unit_index * UNIT + at)
            fh.write(struct.pack(fmt, value))


@pytest.mark.parametrize("field,value", [("pos", -1), ("size", 0), ("base", -5), ("batch", 0)])
def test_recover_stops_at_first_invalid_unit(tmp_path, field, value):
    q = open_bcq(tmp_path)
    fill(q, 45)  # files of 20, 20, 5 units
    q.close()
    poke(q.directory, 2 * FILE_SIZE, 2, **{field: value})
    r = open_bcq(tmp_path, recover=True)
    assert len(r.files.files) == 3
    assert r.files.max_offset() == 2 * FILE_SIZE + 2 * UNIT
    assert r.max_offset == 41 * 10 + 1 + 10 and r.max_physic_offset == 41
    assert r.units_from(42 * 10 + 1) is None


def test_recover_deletes_files_after_the_stop(tmp_path):
    q = open_bcq(tmp_path)
    fill(q, 100)  # 5 full files
    q.close()
    poke(q.directory, 3 * FILE_SIZE, 4, size=0)  # file 3 is among the last three
    r = open_bcq(tmp_path, recover=True)
    assert files_of(r) == [f"{i * FILE_SIZE:020d}" for i in range(4)]
    assert sorted(os.listdir(r.directory)) == files_of(r)
    assert r.max_offset == 64 * 10 + 1 and r.max_physic_offset == 63


def test_recover_only_looks_at_the_last_three_files(tmp_path):
    q = open_bcq(tmp_path)
    fill(q, 100)
    q.close()
    poke(q.directory, FILE_SIZE, 4, size=0)  # file 1 of 5: before the third-last, never checked
    r = open_bcq(tmp_path, recover=True)
    assert len(r.files.files) == 5 and r.max_offset == 1001 and r.max_physic_offset == 99


def test_recover_keeps_an_empty_last_file(tmp_path):
    q = open_bcq(tmp_path)
    fill(q, 40)  # two full files
    q.close()
    with open(os.path.join(q.directory, f"{2 * FILE_SIZE:020d}"), "wb") as fh:
        fh.write(bytes(FILE_SIZE))
    r = open_bcq(tmp_path, recover=True)
    assert len(r.files.files) == 3 and r.files.last().read_position == 0
    assert r.max_offset == 401 and r.min_offset == 1  # max comes from the second-last file
    assert base_of(r, 400) == 391
    r.correct_min_offset(0)
    assert base_of(r, 1) == 1 and base_of(r, 215) == 211
    assert r.put(40, 100, 0, 400, 401, 10) and files_of(r)[-1] == f"{2 * FILE_SIZE:020d}"
    assert r.max_offset == 411 and base_of(r, 405) == 401


def test_truncate_keeps_a_zero_unit_in_an_empty_last_file(tmp_path):
    """RocketMQ tests only the first unit's offset against the cut: an all-zero unit passes (offset 0)."""
    q = open_bcq(tmp_path)
    fill(q, 40)
    q.close()
    with open(os.path.join(q.directory, f"{2 * FILE_SIZE:020d}"), "wb") as fh:
        fh.write(bytes(FILE_SIZE))
    r = open_bcq(tmp_path, recover=True)
    r.truncate_dirty(35)
    assert len(r.files.files) == 3 and r.files.last().read_position == UNIT
    assert r.max_offset == 0 and r.max_physic_offset == 0


# ---- min offset and deletion ------------------------------------------------------------------------


def test_correct_min_offset(tmp_path):
    q = open_bcq(tmp_path)
    fill(q, 60)
    q.correct_min_offset(0)
    assert q.min_offset == 1
    q.correct_min_offset(5)  # units 0..4 lie below: the min is unit 5's base
    assert q.min_offset == 51
    q.correct_min_offset(35)  # only the first file is looked at: past its last unit, not to unit 35
    assert q.min_offset == 20 * 10 + 1
    assert q.units_from(30) is not None  # the min is advisory: lookups below it still answer


def test_delete_expired_stops_and_keeps_the_last_file(tmp_path):
    q = open_bcq(tmp_path)
    fill(q, 60)  # 3 full files: physical offsets 0..19, 20..39, 40..59
    assert q.delete_expired(19) == 0  # file 0's last unit (19) is not below 19
    assert len(q.files.files) == 3 and q.min_offset == 191
    assert q.delete_expired(1000) == 2  # never the last file
    assert files_of(q) == ["00000000000000001840"]
    assert q.min_offset == 20 * 30 + 1  # every unit of the remaining file is below: its end
    assert q.max_offset == 601


def test_delete_expired_stops_at_a_file_that_is_not_full(tmp_path):
    q = open_bcq(tmp_path)
    fill(q, 60)
    q.close()
    poke(q.directory, FILE_SIZE, 3, size=0)
    q = open_bcq(tmp_path)  # loaded without recovery: positions at the file ends
    q.files.files[0].set_positions(FILE_SIZE - UNIT)  # file 0 is not full
    assert q.delete_expired(1000) == 0
    assert len(q.files.files) == 3


# ---- time lookups, literally -------------------------------------------------------------------------


def time_queue(tmp_path, times, batch=5, by_cache=True):
    q = open_bcq(tmp_path, search_by_cache=by_cache)
    for i, t in enumerate(times):
        assert q.put(1000 + i, 10, 0, t, i * batch, batch)
    return q


def test_time_search_in_one_file(tmp_path):
    q = time_queue(tmp_path, [10, 20, 20, 30])  # bases 0, 5, 10, 15
    assert q.offset_by_time(20, LOWER) == 5  # the first of equal times
    assert q.offset_by_time(20, UPPER) == 10  # the last of equal times
    assert q.offset_by_time(5, LOWER) == 0
    assert q.offset_by_time(5, UPPER) == 0
    assert q.offset_by_time(25, LOWER) == 15
    # UPPER is not "last time <= T": 25 answers the unit stored at 30, 15 answers nothing at all
    assert q.offset_by_time(25, UPPER) == 15
    assert q.offset_by_time(15, UPPER) == -1
    assert q.offset_by_time(15, LOWER) == 5
    # at or past the file's last time: the last unit's base, LOWER included (not max = 20)
    assert q.offset_by_time(30, LOWER) == 15 and q.offset_by_time(30, UPPER) == 15
    assert q.offset_by_time(10**15, LOWER) == 15
    with pytest.raises(ValueError):
        q.offset_by_time(20, "middle")


def test_time_search_picks_a_file_by_its_first_time(tmp_path, by_cache):
    # file 0 stored at 0..190, file 1 at 1000..1190, file 2 at 2000..2190; bases 5 apart
    times = [f * 1000 + i * 10 for f in range(3) for i in range(PER_FILE)]
    q = time_queue(tmp_path, times, by_cache=by_cache)
    assert q.offset_by_time(2000, LOWER) == 40 * 5  # the last file's first time
    assert q.offset_by_time(1005, LOWER) == 21 * 5
    # between file 0's last time and file 1's first time: through the per-file map, file 0 and its last
    # unit, for LOWER too; the file scan (maps off) picks file 1 and its first unit instead
    expected = 19 * 5 if by_cache else 20 * 5
    assert q.offset_by_time(500, LOWER) == expected
    assert q.offset_by_time(500, UPPER) == expected
    # before everything: file 0
    assert q.offset_by_time(-1, LOWER) == 0


def test_time_maps_are_built_by_correct_min_offset_not_recover(tmp_path):
    times = [f * 1000 + i * 10 for f in range(3) for i in range(PER_FILE)]
    q = time_queue(tmp_path, times)
    q.flush()
    q.close()
    r = open_bcq(tmp_path, recover=True)
    # no per-file map yet: the last file answers from its own first time on, and every earlier time is
    # searched in the FIRST file
    assert r.offset_by_time(2000, LOWER) == 40 * 5
    assert r.offset_by_time(1005, LOWER) == 19 * 5
    r.correct_min_offset(0)
    assert r.offset_by_time(1005, LOWER) == 21 * 5
    # lookups by offset fall back to scanning the files when the map misses
    s = open_bcq(tmp_path, recover=True)
    assert base_of(s, 23 * 5 + 2) == 23 * 5


# ---- the golden store: BatchTopic's queues as RocketMQ wrote and answered them ------------------------

GOLDEN = "store-batch-cq"


def _tree_digest(root):
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for name in sorted(filenames):
            p = os.path.join(dirpath, name)
            h.update(p.encode())
            with open(p, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def open_golden(queue_id):
    """As RocketMQ's store opens a batch queue: load, recover, then correctMinOffset with the CommitLog min."""
    GD.require(GOLDEN)
    m = GD.manifest(GOLDEN)
    size = int(m["config_nonDefault"]["mapperFileSizeBatchConsumeQueue"])
    assert size == 920
    q = BatchConsumeQueue(GD.store_dir(GOLDEN), "BatchTopic", queue_id, size, writable=False)
    q.load()
    assert q.files.files, "the golden batch queue has no files"
    q.recover()
    q.correct_min_offset(m["answers_after_reopen"]["minPhyOffset"])
    return q


def golden_queues():
    GD.require(GOLDEN)
    qs = [q for q in GD.manifest(GOLDEN)["answers_after_reopen"]["queues"] if q["topic"] == "BatchTopic"]
    assert [q["queueId"] for q in qs] == [0, 1]
    return qs


@pytest.mark.parametrize("queue_id", [0, 1])
def test_golden_offsets_and_time_lookups(queue_id):
    before = _tree_digest(GD.store_dir(GOLDEN))
    ans = golden_queues()[queue_id]
    q = open_golden(queue_id)
    assert ans["cqType"] == "BatchCQ"
    assert q.min_offset == ans["minOffsetInQueue"]
    assert q.max_offset == ans["maxOffsetInQueue"]
    assert q.message_total == ans["messageTotalInQueue"]
    assert q.max_physic_offset == ans["cqMaxPhysicOffset"]
    assert q.earliest_unit().store_time == ans["earliestMessageTime"]
    for probe, phys in ans["commitLogOffsetInQueue"].items():
        u = q.get_unit(int(probe))
        assert (u.pos if u else 0) == phys
        assert (u.store_time if u else -1) == ans["messageStoreTimeStamp"][probe]
    assert len(ans["offsetInQueueByTime"]) >= 29
    for e in ans["offsetInQueueByTime"]:
        for key, boundary in (("default", LOWER), ("LOWER", LOWER), ("UPPER", UPPER)):
            got = q.offset_by_time(e["timestamp"], boundary)
            got = min(max(got, q.min_offset), q.max_offset)  # ConsumeQueueStore's clamp
            assert got == e[key], (e, key)
    q.close()
    assert _tree_digest(GD.store_dir(GOLDEN)) == before  # a read-only open changes no byte


@pytest.mark.parametrize("queue_id", [0, 1])
def test_golden_units_match_the_puts(queue_id):
    """Every inner batch put to the queue has its unit, in put order, and every queue offset it covers
    finds that unit; the view runs to the end of the unit's file."""
    puts = [e for e in GD.manifest(GOLDEN)["messages"] if e["topic"] == "BatchTopic" and e["queueId"] == queue_id]
    q = open_golden(queue_id)
    assert len(puts) > 100
    for k, e in enumerate(puts):
        expected = (
            e["wroteOffset"],
            e["wroteBytes"],
            e["tagsCodeExpected"],
            e["storeTimestamp"],
            e["queueOffset"],
            e["innerNum"],
            -1,
            0,
        )
        for off in range(e["queueOffset"], e["queueOffset"] + e["innerNum"]):
            base, units = q.units_from(off)
            assert base == e["queueOffset"]
            assert tuple(units[0].item()) == expected
            if k // PER_FILE < len(puts) // PER_FILE:
                assert len(units) == PER_FILE - k % PER_FILE
            else:
                assert len(units) == len(puts) % PER_FILE - k % PER_FILE
    assert q.max_offset == puts[-1]["queueOffset"] + puts[-1]["innerNum"]
    q.close()


@pytest.mark.parametrize("queue_id", [0, 1])
def test_golden_get_message_scans_these_units(queue_id):
    """What RocketMQ's getMessage returned is a prefix of the (tag-filtered) units units_from gives, and a
    scan that found nothing ran to the end of that file."""
    ans = golden_queues()[queue_id]
    q = open_golden(queue_id)
    checked = 0
    for g in ans["getMessage"]:
        res = g["result"]
        if res["status"] not in ("FOUND", "NO_MATCHED_MESSAGE"):
            continue
        base, units = q.units_from(g["offset"])
        codes = set(g.get("filterCodeSet") or [])
        rows = [u for u in (tuple(x.item()) for x in units) if not codes or u[2] in codes]
        n = len(res["messageQueueOffsets"])
        assert [u[4] for u in rows[:n]] == res["messageQueueOffsets"]
        assert [u[0] for u in rows[:n]] == res["physicalOffsets"]
        if res["status"] == "NO_MATCHED_MESSAGE":
            last = tuple(units[-1].item())
            assert res["nextBeginOffset"] == last[4] + last[5]
        elif not codes:
            assert base == res["messageQueueOffsets"][0]
        checked += 1
    assert checked >= 10
    q.close()


# ---- put_units: the run written at once against unit by unit --------------------------------------
RUN = st.lists(
    st.tuples(st.integers(1, 300), st.integers(1, 90), st.integers(-(2**40), 2**40), st.integers(0, 40)),
    min_size=1,
    max_size=50,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(RUN, min_size=1, max_size=4), st.booleans())
def test_put_units_same_as_unit_by_unit(tmp_path_factory, runs, by_cache):
    """Runs of plain records' units (rising offsets, or a step back, a repeat or a negative queue offset
    now and then: put's guards), across file ends: the same bytes, offsets, answers and per-file maps."""
    queues = [open_bcq(tmp_path_factory.mktemp("q"), search_by_cache=by_cache) for _ in range(2)]
    answers = [[], []]
    phys, qoff = 0, 0
    for run in runs:
        cols = [[], [], [], [], []]
        for step, size, tags, odd in run:
            phys += -step if odd == 1 else step  # a step back: put skips what is already built
            qoff = -1 if odd == 0 else qoff + 1  # -1: a dropped request
            for col, v in zip(cols, (phys, size, tags, qoff, phys * 3)):
                col.append(v)
            qoff = max(qoff, 0)
        for k, q in enumerate(queues):
            put = q.put_units if k == 0 else q.put_units_py
            answers[k].append((put(*cols), q.max_physic_offset, q.max_offset, q.min_offset, q.min_logic_offset))
    fast, ref = queues
    assert answers[0] == answers[1]
    assert [bytes(mf.buf[: mf.read_position]) for mf in fast.files.files] == [
        bytes(mf.buf[: mf.read_position]) for mf in ref.files.files
    ]
    assert files_of(fast) == files_of(ref)
    for m in (0, 5, 17, 40, 10**6):
        assert base_of(fast, m) == base_of(ref, m)


def test_put_units_writes_a_clean_run_at_once(tmp_path):
    q = open_bcq(tmp_path)
    q.put_units_py = None  # not called: the run is written a file's worth at a time
    n = PER_FILE * 2 + 3
    assert q.put_units(list(range(100, 100 + n)), [7] * n, [5] * n, list(range(n)), [9] * n)
    assert len(q.files.files) == 3 and q.max_offset == n and q.max_physic_offset == 100 + n - 1
    assert q.get_unit(PER_FILE + 1) == (100 + PER_FILE + 1, 7, 5, 9, PER_FILE + 1, 1, -1, 0)
