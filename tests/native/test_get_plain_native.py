"""get's one-call path (get_plain.get_plain, compiled) against its reference get_plain_py, on hand-built
ConsumeQueue and CommitLog files: random records (other topics', other queues', misplaced and corrupted
ones among them), units right and wrong (sizes of 0, negative or foreign offsets, ext addresses), expired
CommitLog files, a queue whose first file is gone, write buffers (read_position = committed), tag sets of
every size, batch limits, filter caps and travel settings. Both must answer alike: None (the careful loop
answers) or the same next offset, bytes, count and messages, every field of them."""

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.formats import record as R
from rocketstore.formats.cq_ext import MAX_ADDR
from rocketstore.read.get_plain import get_plain, get_plain_py

from ._records import record_params

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CL_FS = 2048
CQ_FS = 20 * 8
TOPIC = "T"


class FakeFile:
    """The attributes of files.mapped_file.MappedFile that get_plain reads."""

    def __init__(self, start: int, data: bytes, size: int, readable: int, write_buffer: bool):
        self.file_from_offset = start
        self.buf = memoryview(bytearray(data.ljust(size, b"\0")))
        self.wbuf = bytearray(1) if write_buffer else None
        self.committed = readable
        self.wrote = readable + (40 if write_buffer else 0)  # past what readers may see

    @property
    def read_position(self) -> int:
        return self.wrote if self.wbuf is None else self.committed


@st.composite
def store_files(draw):
    """(cq_files, cq_min_logic_offset, cl_files, number of units)."""
    segs: list[bytearray] = [bytearray()]
    placed = []  # (pos, size) of each queue record
    n = draw(st.integers(0, 40))
    for qoff in range(n):
        if draw(st.integers(0, 4)) == 0:  # another topic's record in between
            other = draw(record_params())
            segs, _ = _append(segs, other, draw)
        params = draw(record_params())
        kind = draw(st.integers(0, 99))  # 1-4: this record is not the unit's (rarely: any one ends the fast path)
        params["topic"] = TOPIC.encode() if kind != 4 else draw(st.sampled_from([b"T2", b"", "T\u00e9".encode()]))
        params["queue_id"] = 1 if kind != 1 else 2
        params["queue_offset"] = qoff if kind != 2 else qoff + 1
        segs, (pos, size) = _append(segs, params, draw, misplace=kind == 3)
        placed.append((pos, size))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # flip a byte somewhere
        seg = draw(st.integers(0, len(segs) - 1))
        if segs[seg]:
            at = draw(st.integers(0, len(segs[seg]) - 1))
            segs[seg][at] ^= draw(st.integers(1, 255))
    write_buffer = draw(st.booleans())
    cl_files = [
        FakeFile(
            i * CL_FS,
            bytes(s),
            CL_FS,
            len(s) - (draw(st.sampled_from([0, 0, 0, 5, 30])) if i == len(segs) - 1 else 0),
            write_buffer,
        )
        for i, s in enumerate(segs)
    ]
    if len(cl_files) > 1 and draw(st.integers(0, 3)) == 0:
        cl_files = cl_files[1:]  # the first CommitLog file expired
    units = bytearray()
    for pos, size in placed:
        k = draw(st.integers(0, 99))
        if k == 0:
            size = draw(st.sampled_from([0, -1, size + 1, size - 1]))
        elif k == 1:
            pos = draw(st.sampled_from([-5, pos + 1, pos - 1, CL_FS * 9]))
        tcode = draw(st.sampled_from([1, 2, 3, -(2**31), 2**31 + 1, MAX_ADDR, MAX_ADDR - 7]))
        units += struct.pack(">qiq", pos, size, tcode)
    cq_files = []
    for i in range(0, max(len(units), 1), CQ_FS):
        chunk = bytes(units[i : i + CQ_FS])
        cq_files.append(FakeFile(i, chunk, CQ_FS, len(chunk), False))
    min_logic = 0
    if len(cq_files) > 1 and draw(st.integers(0, 3)) == 0:
        cq_files = cq_files[1:]
        min_logic = CQ_FS
    if draw(st.integers(0, 5)) == 0:
        min_logic += 20 * draw(st.integers(0, 3))
    return cq_files, min_logic, cl_files, n


def _append(segs, params, draw, misplace=False):
    pos_in = len(segs[-1])
    phys = (len(segs) - 1) * CL_FS + pos_in
    rec = R.encode_record(physical_offset=phys + (8 if misplace else 0), **params)
    if pos_in + len(rec) > CL_FS:
        segs.append(bytearray())
        pos_in, phys = 0, (len(segs) - 1) * CL_FS
        rec = R.encode_record(physical_offset=phys + (8 if misplace else 0), **params)
    segs[-1] += rec
    return segs, (phys, len(rec))


def outcome(fn, args):
    try:
        r = fn(*args)
    except Exception as e:  # noqa: BLE001 - compared, not hidden
        return ("error", type(e), str(e))
    if r is None:
        return None
    next_begin, total, count, msgs = r
    return (next_begin, total, count, [(type(m), m.as_dict(), m.version, m.properties_raw) for m in msgs])


@SETTINGS
@given(store_files(), st.data())
def test_same_answer_as_the_reference(native, files, data):
    cq_files, min_logic, cl_files, n = files
    codes = data.draw(st.none() | st.sets(st.sampled_from([1, 2, -(2**31), 7]), max_size=3) | st.just(set(range(20))))
    limits = data.draw(
        st.sampled_from(
            [(256 * 1024, 32, 64 * 1024, 8), (700, 5, 300, 2), (10**9, 3, 10**9, 2), (10**9, 10**6, 10**9, 10**6)]
        )
    )
    args = (
        cq_files,
        CQ_FS,
        min_logic,
        cl_files,
        CL_FS,
        data.draw(st.integers(0, max(n - 1, 0)) | st.integers(0, n + 2)),
        data.draw(st.just(n) | st.integers(0, n + 1)),
        data.draw(st.integers(0, 40)),
        codes,
        MAX_ADDR,
        limits,
        data.draw(st.sampled_from([0, 60, 16000])),
        data.draw(st.integers(0, 2)),
        data.draw(st.sampled_from([0, 500, 10**12])),
        TOPIC,
        1,
    )
    expected = outcome(get_plain_py, args)
    assert outcome(get_plain, args) == expected


def test_answers_a_plain_run(native):
    """The usual get: every unit right, one file each; both take the first max_count records."""
    params = dict(
        body=b"x",
        props=b"TAGS\x01a\x02",
        queue_id=1,
        flag=0,
        sys_flag=0,
        born_timestamp=1,
        born_host=R.host_to_bytes("10.0.0.5:10911"),
        store_timestamp=2,
        store_host=R.host_to_bytes("10.0.0.5:10911"),
        reconsume_times=0,
        prepared_transaction_offset=0,
        v2=False,
    )
    seg, units = b"", b""
    for q in range(5):
        rec = R.encode_record(topic=b"T", queue_offset=q, physical_offset=len(seg), **params)
        units += struct.pack(">qiq", len(seg), len(rec), 1)
        seg += rec
    args = (
        [FakeFile(0, units, CQ_FS, len(units), False)],
        CQ_FS,
        0,
        [FakeFile(0, seg, CL_FS, len(seg), False)],
        CL_FS,
        1,
        5,
        3,
        None,
        MAX_ADDR,
        (256 * 1024, 32, 64 * 1024, 8),
        16000,
        1,
        10**12,
        TOPIC,
        1,
    )
    got = outcome(get_plain, args)
    assert got == outcome(get_plain_py, args)
    assert got[0] == 4 and got[2] == 3 and [d["queue_offset"] for _, d, _, _ in got[3]] == [1, 2, 3]
