"""Torn and garbage tails (issue 4, "Done means"): recovery keeps the longest valid prefix, loses nothing before
it, says what it cut (a WARNING on "rocketstore.recovery" naming the file and the offset), and writing goes on
at the right queue offset -- after a clean shutdown followed by damage and after a crash (an `abort` file).
A read-only open of every damaged store answers what the writable open answers and changes no byte.

Every expected value comes from the PutResults recorded while the store was written, never from the store."""

import logging
import os
import pathlib
import random
import shutil
import struct
import tempfile

import pytest

from rocketstore import GetStatus, Message, MessageStore, PutStatus, StoreConfig

SEG = 4096
CQ_UNIT = 20
SMALL = dict(
    mapped_file_size_commit_log=SEG, mapped_file_size_consume_queue=10 * CQ_UNIT, max_hash_slot_num=8, max_index_num=32
)
# every byte of a record is covered by a check: the appended CRC property, verified on recovery
CRC_ALL = dict(enabled_append_prop_crc=True, force_verify_prop_crc=True, check_crc_on_recover=True)
MODES = ["clean", "crash"]


def small(**kw):
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000))
    return StoreConfig(**{**SMALL, "clock": lambda: next(clock), **kw})


# ------------------------------------------------------------------------------------------------ helpers
class Written:
    """What was put: records in CommitLog order, each (topic, queue_id, body, PutResult)."""

    def __init__(self, files, records):
        self.files = files  # {relative path: bytes} of the store after a clean close
        self.records = records

    @property
    def end(self):
        t, q, b, r = self.records[-1]
        return r.physical_offset + r.size

    def prefix(self, n):
        """The answers a store holding exactly the first n records must give."""
        queues = {}
        for t, q, body, r in self.records[:n]:
            queues.setdefault((t, q), []).append((r.queue_offset, body))
        return queues


def build(root, cfg_kw, n=75):
    """Three topics/queues over about three CommitLog segments; the last record goes to T/0 with T/0 holding a
    number of units that leaves room in its last ConsumeQueue file."""
    plan = []
    for i in range(n - 1):
        plan.append([("T", 0), ("T", 1), ("U", 0)][i % 3])
    plan.append(("T", 0))
    records = []
    with MessageStore.open(root, small(**cfg_kw)) as s:
        for i, (t, q) in enumerate(plan):
            body = b"last" if i == n - 1 else (b"m%04d-" % i) * (5 + i % 7)
            keys = [f"k{i}"] if i % 5 == 0 else None
            r = s.put(Message(t, body, tags=f"t{i % 4}", keys=keys, born_timestamp=1), q)
            assert r.status is PutStatus.PUT_OK
            records.append((t, q, body, r))
    assert sum(1 for t, q, *_ in records if (t, q) == ("T", 0)) % 10 not in (0, 8, 9)
    offs = [r.physical_offset for *_, r in records]
    assert offs == sorted(offs) and offs[-1] // SEG >= 2  # at least three segments
    return Written(snapshot(root), records)


def snapshot(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def materialize(root, files, abort):
    if root.exists():
        shutil.rmtree(root)
    for rel, data in files.items():
        if rel in ("abort", "lock"):
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    if abort:
        (root / "abort").write_text("12345")


def seg_name(phys):
    return f"commitlog/{phys - phys % SEG:020d}"


def patched(files, phys, data):
    """A copy of `files` with `data` written at CommitLog offset `phys` (inside one segment)."""
    rel = seg_name(phys)
    buf = bytearray(files[rel])
    pos = phys % SEG
    assert pos + len(data) <= SEG
    buf[pos : pos + len(data)] = data
    return {**files, rel: bytes(buf)}


def read_queue(s, topic, qid):
    out, off = [], s.min_offset(topic, qid)
    while True:
        g = s.get("g", topic, qid, off, max_count=32)
        if g.status is not GetStatus.FOUND:
            assert g.status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.NO_MESSAGE_IN_QUEUE), g.status
            return out
        out += [(m.queue_offset, m.body) for m in g.messages]
        off = g.next_begin_offset


def answers(s, queues=(("T", 0), ("T", 1), ("U", 0))):
    return {
        "max_physical_offset": s.max_physical_offset,
        "max_offsets": {tq: s.max_offset(*tq) for tq in queues},
        "messages": {tq: read_queue(s, *tq) for tq in queues},
    }


def expected_answers(w, n, queues=(("T", 0), ("T", 1), ("U", 0))):
    pre = w.prefix(n)
    t, q, b, r = w.records[n - 1]
    return {
        "max_physical_offset": r.physical_offset + r.size,
        "max_offsets": {tq: len(pre.get(tq, [])) for tq in queues},
        "messages": {tq: pre.get(tq, []) for tq in queues},
    }


def cut_warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "rocketstore.recovery" and r.levelno >= logging.WARNING]


def check_open(tmp_path, w, files, abort, n, cfg_kw, caplog, cut_at=None, continue_writing=True, tag=""):
    """Open the damaged store read-only, then writable: both must answer as if exactly the first n records were
    written. `cut_at` (a CommitLog offset or None) is where recovery must say it cut the log."""
    root = tmp_path / f"s{tag}"
    materialize(root, files, abort)
    before = snapshot(root)
    exp = expected_answers(w, n)
    caplog.clear()
    with MessageStore.open(root, small(**cfg_kw), read_only=True) as s:
        ro = answers(s)
    assert snapshot(root) == before, "a read-only open changed the store directory"
    ro_warn = cut_warnings(caplog)
    caplog.clear()
    with MessageStore.open(root, small(**cfg_kw)) as s:
        rw = answers(s)
        rw_warn = cut_warnings(caplog)
        assert rw == exp
        assert ro == rw
        if cut_at is None:
            assert rw_warn == [] and ro_warn == []
        else:
            name, pos = seg_name(cut_at).split("/")[1], cut_at % SEG
            for warns in (rw_warn, ro_warn):
                assert any(name in m and f"offset {pos}" in m for m in warns), (cut_at, warns)
        if continue_writing:
            t0 = s.put(Message("T", b"after-T0", born_timestamp=1), 0)
            u0 = s.put(Message("U", b"after-U0", born_timestamp=1), 0)
            assert t0.status is PutStatus.PUT_OK and u0.status is PutStatus.PUT_OK
            assert t0.queue_offset == exp["max_offsets"][("T", 0)]
            assert u0.queue_offset == exp["max_offsets"][("U", 0)]
            assert t0.physical_offset == exp["max_physical_offset"] or (
                t0.physical_offset % SEG == 0 and t0.physical_offset > exp["max_physical_offset"]
            )
            assert read_queue(s, "T", 0)[-1] == (t0.queue_offset, b"after-T0")
    return root


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return {name: build(tmp_path_factory.mktemp(name), kw) for name, kw in (("default", {}), ("crc", CRC_ALL))}


@pytest.fixture
def scratch(tmp_path):
    """Where the every-byte loops build their hundreds of damaged stores: a tmpfs when there is one (the
    store fsyncs on every close), else the test's tmp_path."""
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        yield tmp_path
        return
    d = tempfile.mkdtemp(prefix="torn-tails-", dir="/dev/shm")
    try:
        yield pathlib.Path(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(autouse=True)
def _caplog_level(caplog):
    caplog.set_level(logging.INFO, logger="rocketstore.recovery")


# ------------------------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("mode", MODES)
def test_last_record_cut_at_every_byte_boundary_with_full_crc(scratch, pristine, caplog, mode):
    """With the appended CRC verified on recovery every byte of a record is checked: a last record with only
    its first k bytes on disk (k = 0 .. size-1, the rest zeros) is cut, every record before it kept."""
    w = pristine["crc"]
    n = len(w.records)
    last = w.records[-1][3]
    rec = w.files[seg_name(last.physical_offset)][last.physical_offset % SEG :][: last.size]
    failures = []
    for k in range(last.size):
        files = patched(w.files, last.physical_offset + k, bytes(last.size - k))
        torn = rec[:k] + bytes(last.size - k)
        try:
            check_open(
                scratch,
                w,
                files,
                mode == "crash",
                n - 1,
                CRC_ALL,
                caplog,
                cut_at=last.physical_offset if any(torn) else None,
                tag=str(k % 2),
            )
        except AssertionError as e:
            failures.append((k, str(e).splitlines()[0][:200]))
    assert failures == [], f"{len(failures)} of {last.size} cut points fail, e.g. {failures[:5]}"


@pytest.mark.parametrize("mode", MODES)
def test_last_record_cut_at_every_byte_boundary_default_config(scratch, pristine, caplog, mode):
    """With the default config (body CRC only, as RocketMQ) every cut that reaches the header, the body or a
    length field must be detected; a cut that only zeroes topic or property bytes (which RocketMQ's format does
    not check) may keep the record, but the open must still succeed, lose nothing before it and go on."""
    w = pristine["default"]
    n = len(w.records)
    t, q, body, last = w.records[-1]
    rec = w.files[seg_name(last.physical_offset)][last.physical_offset % SEG :][: last.size]
    # layout of this record (IPv4 hosts, V1 magic): ... bodyLen@84, body@88, topicLen, topic, propsLen, props
    body_end = 88 + len(body)
    assert struct.unpack_from(">i", rec, 84)[0] == len(body) and rec[88:body_end] == body
    topic_len_at, props_len_at = body_end, body_end + 1 + len(t)
    checked = set(range(0, body_end)) | {topic_len_at, props_len_at, props_len_at + 1}
    failures = []
    for k in range(last.size):
        files = patched(w.files, last.physical_offset + k, bytes(last.size - k))
        torn = rec[:k] + bytes(last.size - k)
        damaged_checked = any(rec[i] != torn[i] for i in checked)
        try:
            if damaged_checked:
                check_open(
                    scratch,
                    w,
                    files,
                    mode == "crash",
                    n - 1,
                    {},
                    caplog,
                    cut_at=last.physical_offset if any(torn) else None,
                    tag=str(k % 2),
                )
            else:
                root = scratch / f"u{k % 2}"
                materialize(root, files, mode == "crash")
                with MessageStore.open(root, small()) as s:
                    got = answers(s)
                    kept = got["max_offsets"][("T", 0)] == expected_answers(w, n)["max_offsets"][("T", 0)]
                    assert got == expected_answers(w, n if kept else n - 1)
                    r = s.put(Message("T", b"after", born_timestamp=1), 0)
                    assert r.queue_offset == got["max_offsets"][("T", 0)]
        except Exception as e:  # noqa: BLE001 - collect every failing cut point, report them together
            failures.append((k, f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"))
    assert failures == [], f"{len(failures)} of {last.size} cut points fail, e.g. {failures[:5]}"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cfg", ["default", "crc"])
def test_tail_overwritten_with_zeros(tmp_path, pristine, caplog, mode, cfg):
    """The last three records and everything after them in their segment turned to zeros: they are gone, and
    since only zeros were dropped there is nothing to report."""
    w = pristine[cfg]
    n = len(w.records)
    start = w.records[n - 3][3].physical_offset
    assert seg_name(start) == seg_name(w.end)
    files = patched(w.files, start, bytes(SEG - start % SEG))
    kw = CRC_ALL if cfg == "crc" else {}
    root = check_open(tmp_path, w, files, mode == "crash", n - 3, kw, caplog, cut_at=None)
    # as after an ASYNC_FLUSH crash: the ConsumeQueue of T/0 had units for two of the lost records; the log
    # then grows past where they pointed -- they must not come back on the next open, clean or crashed
    assert [tq for t, q, b, r in w.records[n - 3 :] for tq in [(t, q)]].count(("T", 0)) == 2
    with MessageStore.open(root, small(**kw)) as s:
        for i in range(12):
            assert s.put(Message("U", b"u" * 200, born_timestamp=1), 0).ok
    expect_t0 = expected_answers(w, n - 3)["messages"][("T", 0)]
    expect_t0 = expect_t0 + [(len(expect_t0), b"after-T0")]
    for abort in (False, True):
        if abort:
            (root / "abort").write_text("1")
        with MessageStore.open(root, small(**kw)) as s:
            assert s.max_offset("T", 0) == len(expect_t0), f"abort={abort}: stale ConsumeQueue units came back"
            assert read_queue(s, "T", 0) == expect_t0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cfg", ["default", "crc"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tail_overwritten_with_random_bytes(tmp_path, pristine, caplog, mode, cfg, seed):
    """From the start of the third-last record to the end of its segment: seeded random bytes."""
    w = pristine[cfg]
    n = len(w.records)
    start = w.records[n - 3][3].physical_offset
    rnd = random.Random(seed)
    garbage = bytes(rnd.randrange(256) for _ in range(SEG - start % SEG))
    files = patched(w.files, start, garbage)
    root = check_open(tmp_path, w, files, mode == "crash", n - 3, CRC_ALL if cfg == "crc" else {}, caplog, cut_at=start)
    # what was written after the recovery survives the next open, whichever way the store stops
    exp = expected_answers(w, n - 3)
    (root / "abort").write_text("1")
    with MessageStore.open(root, small(**(CRC_ALL if cfg == "crc" else {}))) as s:
        assert s.max_offset("T", 0) == exp["max_offsets"][("T", 0)] + 1
        assert s.max_offset("U", 0) == exp["max_offsets"][("U", 0)] + 1
        assert read_queue(s, "T", 0)[:-1] == exp["messages"][("T", 0)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cfg", ["default", "crc"])
@pytest.mark.parametrize("garbage", ["random", "header_copy", "ones"])
def test_valid_record_followed_by_garbage(tmp_path, pristine, caplog, mode, cfg, garbage):
    """Everything written is intact; after the last record, where zeros should be, there is garbage."""
    w = pristine[cfg]
    n = len(w.records)
    end = w.end
    room = SEG - end % SEG
    if garbage == "random":
        junk = bytes(random.Random(7).randrange(1, 256) for _ in range(min(room, 300)))
    elif garbage == "header_copy":  # the first 60 bytes of the last record again: a plausible, torn header
        last = w.records[-1][3]
        junk = w.files[seg_name(last.physical_offset)][last.physical_offset % SEG :][:60]
    else:
        junk = b"\xff" * min(room, 64)
    files = patched(w.files, end, junk)
    check_open(tmp_path, w, files, mode == "crash", n, CRC_ALL if cfg == "crc" else {}, caplog, cut_at=end)


@pytest.mark.parametrize("mode", MODES)
def test_consume_queue_units_past_the_commitlog_end_are_truncated(tmp_path, pristine, caplog, mode):
    w = pristine["default"]
    n = len(w.records)
    real = len(w.prefix(n)[("T", 0)])
    cq_dir = "consumequeue/T/0"
    last_cq = max(k for k in w.files if k.startswith(cq_dir + "/"))
    buf = bytearray(w.files[last_cq])
    first_free = real % 10
    assert buf[first_free * CQ_UNIT :] == bytes(len(buf) - first_free * CQ_UNIT)
    fake = 10 - first_free
    for i in range(fake):  # units pointing at records that would follow the CommitLog's last one
        struct.pack_into(">qiq", buf, (first_free + i) * CQ_UNIT, w.end + i * 150, 150, 12345)
    files = {**w.files, last_cq: bytes(buf)}
    root = check_open(tmp_path, w, files, mode == "crash", n, {}, caplog, cut_at=None)
    # the CommitLog now grows past where the fake units point; they were dropped, so they must stay dropped
    with MessageStore.open(root, small()) as s:
        for i in range(12):
            assert s.put(Message("U", b"u" * 200, born_timestamp=1), 0).ok
        assert s.max_physical_offset > w.end + fake * 150
    expect_t0 = w.prefix(n)[("T", 0)] + [(real, b"after-T0")]
    for abort in (False, True):
        if abort:
            (root / "abort").write_text("1")
        with MessageStore.open(root, small()) as s:
            assert s.max_offset("T", 0) == real + 1, f"abort={abort}: stale ConsumeQueue units came back"
            assert read_queue(s, "T", 0) == expect_t0
            assert s.get("g", "T", 0, real + 1).status is GetStatus.OFFSET_OVERFLOW_ONE


@pytest.mark.parametrize("mode", MODES)
def test_consume_queue_units_past_a_torn_commitlog_end(tmp_path, pristine, caplog, mode):
    """The CommitLog lost its last record; its ConsumeQueue unit (written before the crash) must go too."""
    w = pristine["default"]
    n = len(w.records)
    last = w.records[-1][3]
    files = patched(w.files, last.physical_offset + 30, bytes(last.size - 30))
    check_open(tmp_path, w, files, mode == "crash", n - 1, {}, caplog, cut_at=last.physical_offset)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("torn", [False, True])
def test_missing_checkpoint(tmp_path, pristine, caplog, mode, torn):
    w = pristine["default"]
    n = len(w.records)
    files = {k: v for k, v in w.files.items() if k != "checkpoint"}
    assert len(files) == len(w.files) - 1
    cut = None
    if torn:
        last = w.records[-1][3]
        files = patched(files, last.physical_offset + 50, bytes(last.size - 50))
        cut = last.physical_offset
    check_open(tmp_path, w, files, mode == "crash", n - 1 if torn else n, {}, caplog, cut_at=cut)


@pytest.mark.parametrize("torn", [False, True])
@pytest.mark.parametrize("cfg", ["default", "crc"])
def test_stale_abort_file(tmp_path, pristine, caplog, torn, cfg):
    """An abort file although the store was closed cleanly (it was recreated, or left by a copy)."""
    w = pristine[cfg]
    n = len(w.records)
    files = w.files
    cut = None
    if torn:
        last = w.records[-1][3]
        files = patched(files, last.physical_offset + 10, bytes(last.size - 10))
        cut = last.physical_offset
    root = check_open(
        tmp_path, w, files, True, n - 1 if torn else n, CRC_ALL if cfg == "crc" else {}, caplog, cut_at=cut
    )
    assert not (root / "abort").exists()  # the clean close after it removed the stale one
