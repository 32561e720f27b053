"""The ConsumeQueue extension (enableConsumeQueueExt, issue #9): RocketMQ's ConsumeQueueExtTest ported, and a
store with the ext on: ext addresses in the ConsumeQueue's tagsCode slot, the ext bytes, gets answering as
without the ext, reopen, crash recovery, truncation, cleanup, the bitmap dispatcher hook and `matches`."""

import os
import random
import shutil
import struct

import pytest

from rocketstore.store.facade import resolve_file_sizes

from rocketstore import GetStatus, Message, MessageStore, StoreConfig
from rocketstore.formats import cq_ext as X
from rocketstore.log.consume_queue_ext import PUT_FAILED, ConsumeQueueExt
from tests._index_ref import java_hash

LONG_MIN = -(2**63)

# ---------------------------------------------------------------- ConsumeQueueExtTest, ported
BIT_MAP_LENGTH = 64
UNIT_WITH_BITMAP = 20 + BIT_MAP_LENGTH // 8  # 28
FILE_SIZE = 10 * UNIT_WITH_BITMAP  # 280
UNIT_COUNT = 20


def gen_ext(root):
    return ConsumeQueueExt(str(root), "abc", 0, FILE_SIZE, BIT_MAP_LENGTH, writable=True)


def gen_unit(rng, has_bitmap):
    bm = bytes(rng.getrandbits(8) for _ in range(BIT_MAP_LENGTH // 8)) if has_bitmap else None
    return rng.randrange(2**31), 1_700_000_000_000 + rng.randrange(10**6), bm


def put_sth(ext, get_after_put, same_size, count, seed=1):
    rng = random.Random(seed)
    addrs = []
    for i in range(count):
        tags, ts, bm = gen_unit(rng, True if same_size else i % 2 == 0)
        addr = ext.put(tags, ts, bm)
        assert addr < 0
        if get_after_put:
            u = ext.get(addr)
            assert u is not None
            assert (u.tags_code, u.msg_store_time, u.filter_bit_map) == (tags, ts, bm)
            assert u.size == 20 + (len(bm) if bm else 0)
        addrs.append(addr)
    return addrs


def test_ext_put(tmp_path):
    ext = gen_ext(tmp_path)
    put_sth(ext, True, False, UNIT_COUNT)
    ext.destroy()


def test_ext_get_walks_from_the_start(tmp_path):
    ext = gen_ext(tmp_path)
    put_sth(ext, False, False, UNIT_COUNT)
    addr, seen = X.decorate(0), 0
    while True:
        u = ext.get(addr)
        if u is None:
            break
        assert u.size >= 20
        addr += u.size
        seen += 1
    assert seen == 11  # the first file's units: the next place holds the end marker
    ext.destroy()


def test_ext_get_invalid_address(tmp_path):
    ext = gen_ext(tmp_path)
    put_sth(ext, False, True, UNIT_COUNT)
    assert ext.get(0) is None
    assert ext.get((FILE_SIZE // UNIT_WITH_BITMAP) * UNIT_WITH_BITMAP + UNIT_WITH_BITMAP) is None
    assert ext.get(X.decorate(10 * FILE_SIZE)) is None  # no such file
    assert ext.get(ext.max_address()) is None  # past what is written
    ext.destroy()


def test_ext_recovery(tmp_path):
    put = gen_ext(tmp_path)
    put_sth(put, False, True, UNIT_COUNT)
    put.close()
    load = gen_ext(tmp_path)
    load.load()
    load.recover()
    assert load.min_address() == LONG_MIN
    per_file = (FILE_SIZE - X.END_BLANK_DATA_LENGTH) // UNIT_WITH_BITMAP  # 9
    last_count = UNIT_COUNT % per_file  # 2
    files = UNIT_COUNT // per_file + 1  # 3
    assert X.undecorate(load.max_address()) == last_count * UNIT_WITH_BITMAP + (files - 1) * FILE_SIZE == 616
    load.destroy()


def test_ext_truncate_by_min_address(tmp_path):
    ext = gen_ext(tmp_path)
    put_sth(ext, False, True, UNIT_COUNT * 2)
    n = len(ext.files.files)
    assert ext.truncate_by_min_address(X.decorate(int(FILE_SIZE * 1.5))) == 1
    assert ext.min_address() == X.decorate(FILE_SIZE)
    assert len(ext.files.files) == n - 1
    assert not os.path.exists(os.path.join(ext.directory, "00000000000000000000"))
    assert ext.truncate_by_min_address(5) == 0  # no address: nothing happens
    ext.destroy()


def test_ext_truncate_by_max_address(tmp_path):
    ext = gen_ext(tmp_path)
    put_sth(ext, False, True, UNIT_COUNT * 2)
    address = X.decorate(FILE_SIZE * 2 + UNIT_WITH_BITMAP)
    ext.truncate_by_max_address(address)
    assert ext.max_address() == address + UNIT_WITH_BITMAP
    assert len(ext.files.files) == 3
    ext.truncate_by_max_address(X.decorate(FILE_SIZE * 2 + 200))  # no unit there: nothing happens
    assert ext.max_address() == address + UNIT_WITH_BITMAP
    ext.destroy()


def test_ext_end_marker_and_refusals(tmp_path):
    ext = ConsumeQueueExt(str(tmp_path), "t", 0, 50, writable=True)  # room for 2 plain units (46 usable)
    assert ext.put(7, 8) == X.decorate(0)
    assert ext.put(7, 8) == X.decorate(20)
    assert ext.put(7, 8, b"\x01") == X.decorate(50)  # 21 bytes do not fit in 6: next file
    first = ext.files.files[0].buf
    assert bytes(first[40:42]) == b"\xff\xff" and bytes(first[42:50]) == bytes(8)
    assert ext.put(1, 1, b"\x00" * 40) == PUT_FAILED  # 60 bytes never fit: three files tried
    assert ext.put(1, 1, b"\x00" * 32748) == PUT_FAILED  # larger than a short
    ext.destroy()


# ---------------------------------------------------------------- a store with the ext
def ext_config(**kw):
    base = dict(
        enable_consume_queue_ext=True,
        mapped_file_size_consume_queue_ext=200,  # 9 plain units a file
        mapped_file_size_consume_queue=20 * 10,
        mapped_file_size_commit_log=8192,
        max_hash_slot_num=16,
        max_index_num=64,
    )
    return StoreConfig(**{**base, **kw})


TAGS = ["TagA", "TagB", None, "TagC"]


def fill(s, n, start=0, topic="T", queues=2):
    out = []
    for i in range(start, start + n):
        tag = TAGS[i % len(TAGS)]
        r = s.put(Message(topic, b"body-%d" % i, tags=tag), i % queues)
        assert r.ok
        out.append((i % queues, r.queue_offset, tag, r.store_timestamp))
    return out


def cq_tags_slots(root, topic, q):
    """Every tagsCode slot of a queue's files, read by hand."""
    d = os.path.join(root, "consumequeue", topic, str(q))
    out = []
    for n in sorted(os.listdir(d)):
        data = open(os.path.join(d, n), "rb").read()
        for p in range(0, len(data), 20):
            pos, size, tags = struct.unpack_from(">qiq", data, p)
            if size <= 0:
                break
            out.append((pos, size, tags))
    return out


def ext_bytes(root, topic, q, address):
    real = address - LONG_MIN
    d = os.path.join(root, "consumequeue_ext", topic, str(q))
    names = sorted(os.listdir(d))
    size = os.path.getsize(os.path.join(d, names[0]))
    name = "%020d" % (real - real % size)
    with open(os.path.join(d, name), "rb") as fh:
        fh.seek(real % size)
        return fh.read(20)


def test_cq_units_hold_ext_addresses_and_ext_holds_the_tags(tmp_path):
    with MessageStore.open(tmp_path, ext_config()) as s:
        puts = fill(s, 30, queues=1)
        s.flush()
    slots = cq_tags_slots(str(tmp_path), "T", 0)
    assert len(slots) == 30
    for i, ((pos, size, tags), (_, qoff, tag, ts)) in enumerate(zip(slots, puts)):
        assert tags <= -(2**31) - 1  # isExtAddr, by hand
        # 9 units of 20 bytes a 200-byte file (its last 4 bytes stay free), so unit i sits at
        real = (i // 9) * 200 + (i % 9) * 20
        assert tags == LONG_MIN + real
        code = java_hash(tag) if tag else 0
        assert ext_bytes(str(tmp_path), "T", 0, tags) == struct.pack(">hqqh", 20, code, ts, 0)
    first = open(os.path.join(tmp_path, "consumequeue_ext", "T", "0", "0" * 20), "rb").read()
    assert first[180:182] == b"\xff\xff" and first[182:] == bytes(18)  # the end marker after 9 units
    assert sorted(os.listdir(os.path.join(tmp_path, "consumequeue_ext", "T", "0"))) == [
        "%020d" % o for o in (0, 200, 400, 600)
    ]


def all_answers(s, topic, queues, hi):
    out = []
    for q in range(queues):
        for off in range(-1, hi + 2):
            for tags in (None, "TagA", "TagB || TagC", "TagZ", "*"):
                for mc in (1, 3, 32):
                    g = s.get("g", topic, q, off, mc, tags=tags)
                    out.append(
                        (
                            q,
                            off,
                            tags,
                            mc,
                            g.status,
                            g.next_begin_offset,
                            g.min_offset,
                            g.max_offset,
                            [m.body for m in g.messages],
                        )
                    )
    return out


def test_get_answers_exactly_as_without_the_ext(tmp_path):
    plain_cfg = ext_config(enable_consume_queue_ext=False)
    with MessageStore.open(tmp_path / "plain", plain_cfg) as p, MessageStore.open(tmp_path / "ext", ext_config()) as e:
        fill(p, 50)
        fill(e, 50)
        want = all_answers(p, "T", 2, 26)
        assert all_answers(e, "T", 2, 26) == want
        for q in range(2):
            for off in range(25):
                assert e.queue_unit("T", q, off) == p.queue_unit("T", q, off)
    # the CommitLog is the same, the queues differ only in the tagsCode slots
    for q in range(2):
        a, b = cq_tags_slots(str(tmp_path / "plain"), "T", q), cq_tags_slots(str(tmp_path / "ext"), "T", q)
        assert [u[:2] for u in a] == [u[:2] for u in b]
        assert all(not X.is_ext_addr(u[2]) for u in a) and all(X.is_ext_addr(u[2]) for u in b)
    assert not os.path.exists(tmp_path / "plain" / "consumequeue_ext")
    with MessageStore.open(tmp_path / "ext", ext_config()) as e:  # reopened cleanly: the same answers
        assert all_answers(e, "T", 2, 26) == want
        e.wait_dispatched()


def test_reopen_continues_the_ext(tmp_path):
    with MessageStore.open(tmp_path, ext_config()) as s:
        fill(s, 20, queues=1)
        before = s.consume_queue("T", 0).ext.max_address()
    with MessageStore.open(tmp_path, ext_config()) as s:
        ext = s.consume_queue("T", 0).ext
        assert ext.max_address() == before
        fill(s, 5, start=20, queues=1)
        slots = cq_tags_slots(str(tmp_path), "T", 0)
        assert slots[20][2] == before  # the next unit's ext unit went at the end
        assert len({u[2] for u in slots}) == 25
        assert [m.body for m in s.get("g", "T", 0, 20, 32, tags="TagA").messages] == [b"body-20", b"body-24"]


def test_bulk_paths_write_ext_units_reput_and_put_batch(tmp_path):
    """The reput (bulk dispatch) path and put_batch write the ext as the one-at-a-time put path does."""
    cfgs = {
        "inline": ext_config(mapped_file_size_consume_queue=2000),
        "reput": ext_config(mapped_file_size_consume_queue=2000, dispatch_in_put_path=False),
    }
    slots = {}
    for name, cfg in cfgs.items():
        root = tmp_path / name
        with MessageStore.open(root, cfg) as s:
            fill(s, 10, queues=1)
            assert s.put_batch([Message("T", b"b%d" % j, tags="TagB") for j in range(4)], 0).ok
            s.wait_dispatched()
            assert [m.body for m in s.get("g", "T", 0, 0, 32, tags="TagB").messages] == [
                b"body-1",
                b"body-5",
                b"body-9",
                b"b0",
                b"b1",
                b"b2",
                b"b3",
            ]
        slots[name] = cq_tags_slots(str(root), "T", 0)
    assert [u[2] for u in slots["inline"]] == [u[2] for u in slots["reput"]]
    assert [u[2] - LONG_MIN for u in slots["inline"]] == [(i // 9) * 200 + (i % 9) * 20 for i in range(14)]


def answers_without_store_time(s, q, hi):
    return [
        (g.status, g.next_begin_offset, [m.body for m in g.messages])
        for off in range(hi)
        for g in [s.get("g", "T", q, off, 4, tags="TagA || TagC")]
    ]


def test_crash_recovery_copy_while_open(tmp_path):
    live = tmp_path / "live"
    with MessageStore.open(live, ext_config()) as s:
        fill(s, 40)
        s.flush()
        copy = tmp_path / "crash"
        shutil.copytree(live, copy)  # while open: the abort file makes the next open a crash recovery
        want = [answers_without_store_time(s, q, 20) for q in range(2)]
    assert (copy / "abort").exists()
    with MessageStore.open(copy, ext_config()) as c:
        assert [answers_without_store_time(c, q, 20) for q in range(2)] == want
        for q in range(2):
            cq = c.consume_queue("T", q)
            for off in range(cq.max_offset):
                pos, size, slot = cq.get_unit(off)
                assert X.is_ext_addr(slot)
                assert cq.get_ext(slot).tags_code == c.queue_unit("T", q, off)[2]
        assert c.put(Message("T", b"after", tags="TagA"), 0).ok
        assert c.get("g", "T", 0, 20, 4, tags="TagA").messages[-1].body == b"after"


def test_recovery_cuts_ext_units_no_consume_queue_unit_refers_to(tmp_path):
    with MessageStore.open(tmp_path, ext_config()) as s:
        fill(s, 12, queues=1)
        ext = s.consume_queue("T", 0).ext
        end = ext.max_address()
        last = ext.files.last()
        path, pos = last.path, last.wrote
    # an ext unit written, its ConsumeQueue unit not (the ext is written first): a crash between the two
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(X.encode_unit(99, 1, b"\x07" * 8))
    with MessageStore.open(tmp_path, ext_config()) as s:
        ext = s.consume_queue("T", 0).ext
        assert ext.max_address() == end  # recover walked into it, then truncateByMaxAddress cut it
        assert s.put(Message("T", b"next", tags="TagA"), 0).ok
        assert cq_tags_slots(str(tmp_path), "T", 0)[-1][2] == end
        assert [m.body for m in s.get("g", "T", 0, 10, 4, tags="TagA").messages] == [b"next"]


def test_truncated_commitlog_cuts_the_queue_and_leaves_the_ext_as_rocketmq(tmp_path):
    live = tmp_path / "live"
    with MessageStore.open(live, ext_config()) as s:
        fill(s, 10, queues=1)
        s.flush()
        last_phys = s.consume_queue("T", 0).get_unit(9)[0]
        ext_end = s.consume_queue("T", 0).ext.max_address()
        copy = tmp_path / "crash"
        shutil.copytree(live, copy)
    # the last record is torn: recovery cuts the CommitLog and the ConsumeQueue unit pointing at it
    seg = copy / "commitlog" / ("0" * 20)
    with open(seg, "r+b") as fh:
        fh.seek(last_phys)
        fh.write(b"\x00" * 8)
    with MessageStore.open(copy, ext_config()) as c:
        cq = c.consume_queue("T", 0)
        assert cq.max_offset == 9
        # truncateDirtyLogicFiles leaves the ext (RocketMQ's ext truncation there never runs with an address);
        # abnormal recovery re-dispatched the kept records, each adding an ext unit, as RocketMQ does
        assert cq.ext.max_address() >= ext_end
        assert c.get("g", "T", 0, 0, 32, tags="TagA").messages[-1].body == b"body-8"
        r = c.put(Message("T", b"new", tags="TagA"), 0)
        assert r.ok and r.queue_offset == 9
        new_addr = cq.get_unit(9)[2]
        assert X.is_ext_addr(new_addr) and new_addr >= ext_end
        assert [m.body for m in c.get("g", "T", 0, 7, 32, tags="TagA").messages] == [b"body-8", b"new"]
        end_now = cq.ext.max_address()
    with MessageStore.open(copy, ext_config()) as c:  # clean reopen: the ext is cut at the last address held
        assert c.consume_queue("T", 0).ext.max_address() == end_now
        assert [m.body for m in c.get("g", "T", 0, 0, 32, tags="TagA").messages] == [
            b"body-0",
            b"body-4",
            b"body-8",
            b"new",
        ]


def test_cleanup_trims_the_ext_with_the_queue(tmp_path):
    cfg = ext_config(
        mapped_file_size_commit_log=4096,
        delete_commit_log_files_interval=0,
        delete_consume_queue_files_interval=0,
        mapped_file_size_consume_queue_ext=104,
    )  # 5 units
    with MessageStore.open(tmp_path, cfg) as s:
        for i in range(60):
            assert s.put(Message("T", b"x" * 300, tags=TAGS[i % 4]), 0).ok
        s.flush()
        names = sorted(os.listdir(tmp_path / "commitlog"))
        for n in names[:4]:
            os.utime(tmp_path / "commitlog" / n, ns=(0, 0))
        ext_dir = tmp_path / "consumequeue_ext" / "T" / "0"
        ext_files_before = sorted(os.listdir(ext_dir))
        assert s.delete_expired_files() == 4
        cq = s.consume_queue("T", 0)
        assert cq.min_offset > 0
        min_addr = cq.get_unit(cq.min_offset)[2]
        real = min_addr - LONG_MIN
        ext_files = sorted(os.listdir(ext_dir))
        assert len(ext_files) < len(ext_files_before)
        # the files ending before the min unit's ext unit went (truncateByMinAddress: tail < offset)
        assert int(ext_files[0]) + 104 >= real
        assert all(int(n) + 104 < real for n in ext_files_before if n not in ext_files)
        assert cq.ext.min_address() == LONG_MIN + int(ext_files[0])
        g = s.get("g", "T", 0, cq.min_offset, 32, tags="TagA")
        assert g.status is GetStatus.FOUND
        assert all(m.tags == "TagA" for m in g.messages)


def test_bitmap_dispatcher_hook_and_matches(tmp_path):
    """A dispatcher added first fills request.bit_map; the ext unit keeps it; `matches` sees it."""
    calls = []

    def calc_bitmap(req):
        calls.append(req.consume_queue_offset)
        tags = (req.properties or {}).get("TAGS")
        req.bit_map = bytes([1 if tags == "TagA" else 2]) * 8 if tags else None

    for mode in ("inline", "reput"):
        root = tmp_path / mode
        cfg = ext_config(dispatch_in_put_path=(mode == "inline"))
        with MessageStore.open(root, cfg) as s:
            s.add_dispatcher(calc_bitmap, first=True)
            assert s.dispatchers[0].fn is calc_bitmap
            fill(s, 8, queues=1)
            assert s.put_batch([Message("T", b"bb", tags="TagA")] * 2, 0).ok
            s.wait_dispatched()
            cq = s.consume_queue("T", 0)
            units = [cq.get_ext(cq.get_unit(i)[2]) for i in range(10)]
            assert [u.filter_bit_map for u in units] == [b"\x01" * 8, b"\x02" * 8, None, b"\x02" * 8] * 2 + [
                b"\x01" * 8
            ] * 2
            assert all(u.size == (28 if u.filter_bit_map else 20) for u in units)
            seen = []

            def matches(tags_code, ext_unit):
                seen.append((tags_code, ext_unit.filter_bit_map if ext_unit else "none"))
                return ext_unit is not None and ext_unit.filter_bit_map == b"\x01" * 8

            g = s.get("g", "T", 0, 0, 32, matches=matches)
            assert [m.body for m in g.messages] == [b"body-0", b"body-4", b"bb", b"bb"]
            assert seen[0] == (java_hash("TagA"), b"\x01" * 8) and seen[2] == (0, None)
            # tags first, then matches
            seen.clear()
            g = s.get("g", "T", 0, 0, 32, tags="TagB", matches=matches)
            assert g.messages == [] and g.status is GetStatus.NO_MATCHED_MESSAGE
            assert [t for t, _ in seen] == [java_hash("TagB")] * 2
        assert calls[:8] == list(range(8))
        calls.clear()
        # recovery re-dispatches through the hook too (a crash image: everything from the first segment)
        with MessageStore.open(root, cfg) as s:
            pass


def test_ext_put_failure_falls_back_to_the_plain_tags_code(tmp_path):
    def huge(req):
        if req.consume_queue_offset == 1:
            req.bit_map = b"\x00" * 32760  # 32780 bytes: larger than a short, the ext refuses it

    with MessageStore.open(tmp_path, ext_config()) as s:
        s.add_dispatcher(huge, first=True)
        fill(s, 3, queues=1)
        slots = [u[2] for u in cq_tags_slots(str(tmp_path), "T", 0)]
        assert X.is_ext_addr(slots[0]) and X.is_ext_addr(slots[2])
        assert slots[1] == java_hash("TagB")  # "Save consume queue extend fail, So just save tagsCode!"
        assert slots[2] == slots[0] + 20
        assert [m.body for m in s.get("g", "T", 0, 0, 32, tags="TagB").messages] == [b"body-1"]


def test_ext_store_opened_without_the_ext_lets_ext_addresses_through(tmp_path):
    with MessageStore.open(tmp_path, ext_config()) as s:
        fill(s, 8, queues=1)
    with MessageStore.open(tmp_path, ext_config(enable_consume_queue_ext=False)) as s:
        # no ext read: getValidTagsCodeAsLong is null, a tag filter lets every unit through
        assert len(s.get("g", "T", 0, 0, 32, tags="TagA").messages) == 8
    with MessageStore.open(tmp_path, ext_config(), read_only=True) as s:
        assert [m.body for m in s.get("g", "T", 0, 0, 32, tags="TagA").messages] == [b"body-0", b"body-4"]


def test_config_names_and_defaults(tmp_path):
    c = StoreConfig()
    # the ext file size is open until a store resolves it: the files on disk, else RocketMQ's 48 MiB
    assert (c.enable_consume_queue_ext, c.mapped_file_size_consume_queue_ext, c.bit_map_length_consume_queue_ext) == (
        False,
        None,
        64,
    )
    assert resolve_file_sizes(str(tmp_path), c).mapped_file_size_consume_queue_ext == 48 * 1024 * 1024
    os.makedirs(tmp_path / "consumequeue_ext" / "T" / "0")
    (tmp_path / "consumequeue_ext" / "T" / "0" / ("0" * 20)).write_bytes(bytes(4096))
    assert resolve_file_sizes(str(tmp_path), c).mapped_file_size_consume_queue_ext == 4096
    c = StoreConfig.from_properties(
        {"enableConsumeQueueExt": "true", "mappedFileSizeConsumeQueueExt": "1024", "bitMapLengthConsumeQueueExt": "128"}
    )
    assert (c.enable_consume_queue_ext, c.mapped_file_size_consume_queue_ext, c.bit_map_length_consume_queue_ext) == (
        True,
        1024,
        128,
    )
    with pytest.raises(ValueError):
        StoreConfig(mapped_file_size_consume_queue_ext=0)


CHILD = """
import sys
from rocketstore import Message, MessageStore, StoreConfig
cfg = StoreConfig(enable_consume_queue_ext=True, mapped_file_size_consume_queue_ext=4096,
                  mapped_file_size_consume_queue=20 * 100, mapped_file_size_commit_log=64 * 1024)
s = MessageStore.open(sys.argv[1], cfg)
print("open", flush=True)
i = int(sys.argv[2])
while True:
    tag = ("TagA", "TagB", None)[i % 3]
    r = s.put(Message("C", b"m%d" % i, tags=tag), i % 2)
    if r.ok:
        print(i % 2, r.queue_offset, i, flush=True)
    i += 1
"""


def test_sigkill_writer_recovers_with_the_ext(tmp_path):
    import signal
    import subprocess
    import sys
    import threading
    import time

    root = str(tmp_path / "store")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    acked = {}
    for rnd in range(2):
        p = subprocess.Popen(
            [sys.executable, str(script), root, str(rnd * 1_000_000)], stdout=subprocess.PIPE, text=True
        )
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")))
        reader.start()
        deadline = time.monotonic() + 10
        while len(lines) < 50 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        reader.join()
        assert lines and lines[0].strip() == "open"
        for line in lines[1:]:
            parts = line.split()
            if line.endswith("\n") and len(parts) == 3:
                acked[(int(parts[0]), int(parts[1]))] = int(parts[2])
        cfg = StoreConfig(enable_consume_queue_ext=True, mapped_file_size_consume_queue_ext=4096)
        with MessageStore.open(root, cfg) as s:
            for (q, qoff), i in acked.items():
                tag = ("TagA", "TagB", None)[i % 3]
                assert s.queue_unit("C", q, qoff)[2] == (java_hash(tag) if tag else 0)
                g = s.get("g", "C", q, qoff, 1, tags=tag or "*")
                assert g.status is GetStatus.FOUND and g.messages[0].body == b"m%d" % i
                if tag != "TagB":  # the unit itself does not match TagB: a later one may answer
                    assert all(
                        m.queue_offset > qoff and m.tags == "TagB"
                        for m in s.get("g", "C", q, qoff, 1, tags="TagB").messages
                    )
            for q in range(2):
                cq = s.consume_queue("C", q)
                assert all(X.is_ext_addr(cq.get_unit(o)[2]) for o in range(cq.min_offset, cq.max_offset))
    assert len(acked) >= 100
