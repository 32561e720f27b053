"""A full disk, on a real small file system (a tmpfs of a few MiB, mounted for each test).

Writers run in subprocesses: writing into a sparse memory-mapped page on a full disk kills a process with
SIGBUS, which here shows as a negative return code instead of killing pytest. What must hold: a writer is
never killed; a put that cannot get its segment answers RocketMQ's CREATE_MAPPED_FILE_FAILED (or, once the
store knows the disk is full, SERVICE_NOT_AVAILABLE), never PUT_OK; every put that answered PUT_OK is
readable after a reopen in a fresh process; a writable open, `rocketstore recover` and `rocketstore produce`
on a full disk end with one error line naming the file and exit status 1.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.files.space import is_sparse

SRC = str(Path(__file__).resolve().parents[2] / "src")
KIB = 1024


@pytest.fixture
def disk(tmp_path):
    """Mount a tmpfs of the given size (KiB) under tmp_path; unmounted at the end."""
    mounted = []

    def mount(size_kib: int) -> Path:
        d = tmp_path / f"disk{len(mounted)}"
        d.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(d)], check=True)
        mounted.append(d)
        return d

    yield mount
    for d in mounted:
        subprocess.run(["umount", "-l", str(d)], check=True)


def python(code: str, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def cli(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", *map(str, args)], capture_output=True, text=True, timeout=120, env=env
    )


def fill(path: Path, leave: int = 0) -> None:
    """A ballast file that takes the disk's free space but `leave` bytes (all of it with 0)."""
    st = os.statvfs(path.parent)
    with open(path, "wb", buffering=0) as fh:
        if leave:
            fh.write(b"b" * (st.f_bavail * st.f_frsize - leave))
            return
        try:
            while True:
                fh.write(b"b" * 4096)
        except OSError:
            pass


def body(i: int) -> bytes:
    return b"%06d" % i + b"x" * 994


# the writer: puts until one fails, then one more, then close; prints what was acknowledged
FILL_WRITER = """
    import json, sys
    from rocketstore import Message, MessageStore, StoreConfig
    s = MessageStore.open(sys.argv[1], StoreConfig(**json.loads(sys.argv[2])))
    s._cleanup.disk_usage = lambda path: 0.0   # warning level aside: the segment that cannot be created
    acked, failed = [], None
    for i in range(100_000):
        r = s.put(Message("T", b"%06d" % i + b"x" * 994, keys=[f"k{i}"]), 0)
        if not r.ok:
            failed = r.status.name
            break
        acked.append([i, r.queue_offset, r.physical_offset])
    again = s.put(Message("T", b"again"), 0).status.name
    s.close()
    print(json.dumps({"acked": acked, "failed": failed, "again": again}))
"""

READ_BACK = """
    import json, sys
    from rocketstore import MessageStore, StoreConfig
    cfg = StoreConfig(**json.loads(sys.argv[3]))
    with MessageStore.open(sys.argv[1], cfg, read_only=sys.argv[2] == "ro") as s:
        out, offset = [], 0
        while True:
            g = s.get("g", "T", 0, offset, max_count=512)
            if not g.messages:
                break
            out += [[m.queue_offset, m.physical_offset, bytes(m.body[:6]).decode()] for m in g.messages]
            offset = g.next_begin_offset
        keys = [k for k in sys.argv[4:] if not s.query("T", k)]
        put = None if sys.argv[2] == "ro" else s.put(__import__("rocketstore").Message("T", b"after"), 0).status.name
    print(json.dumps({"messages": out, "keys_missing": keys, "put": put}))
"""


def read_back(root, mode, sizes: dict, keys=()) -> dict:
    p = python(READ_BACK, root, mode, json.dumps(sizes), *keys)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_filling_the_disk_answers_create_mapped_file_failed_and_loses_no_acknowledged_put(disk):
    d = disk(4096)
    fill(d / "ballast", leave=3 * 1024 * KIB)
    root = d / "store"
    sizes = dict(
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20 * 8192,
        max_hash_slot_num=64,
        max_index_num=8192,
    )
    p = python(FILL_WRITER, root, json.dumps(sizes))
    assert p.returncode == 0, f"writer died (signal {-p.returncode})" if p.returncode < 0 else p.stderr
    assert "Traceback" not in p.stderr
    out = json.loads(p.stdout)
    acked = out["acked"]
    assert len(acked) > 100  # 64 KiB segments of ~1 KiB records: the disk took dozens of segments
    # the next segment could not get its blocks: RocketMQ's answer to a mapped file it cannot create
    assert out["failed"] == "CREATE_MAPPED_FILE_FAILED"
    assert out["again"] in ("CREATE_MAPPED_FILE_FAILED", "SERVICE_NOT_AVAILABLE")
    expected = [[qoff, phys, "%06d" % i] for i, qoff, phys in acked]
    # a fresh process on the still-full disk reads every acknowledged message
    got = read_back(root, "ro", sizes, [f"k{acked[0][0]}", f"k{acked[-1][0]}"])
    assert got["messages"] == expected and got["keys_missing"] == []
    # space freed: a writable open recovers, everything is there, and puts go on
    os.unlink(d / "ballast")
    got = read_back(root, "rw", sizes, [f"k{i}" for i in (0, len(acked) // 2, len(acked) - 1)])
    assert got["messages"] == expected and got["keys_missing"] == [] and got["put"] == "PUT_OK"


def test_a_nearly_full_disk_refuses_puts_from_the_first_put(disk):
    """The disk-full flag (above disk_space_warning_level_ratio, 90%) is measured at open, not by the
    cleanup pass a minute later; freeing space lets puts in again within the put path's next measure."""
    d = disk(4096)
    fill(d / "ballast", leave=300 * KIB)  # ~93% used
    p = python(
        """
        import json, os, sys, time
        from rocketstore import Message, MessageStore, StoreConfig
        cfg = StoreConfig(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=2000,
                          max_hash_slot_num=4, max_index_num=16)
        with MessageStore.open(sys.argv[1], cfg) as s:
            first = s.put(Message("T", b"first"), 0).status.name
            os.unlink(sys.argv[2])
            deadline = time.monotonic() + 10
            while True:
                r = s.put(Message("T", b"later"), 0)
                if r.ok or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            print(json.dumps({"first": first, "later": r.status.name, "max": s.max_offset("T", 0)}))
    """,
        d / "store",
        d / "ballast",
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out == {"first": "SERVICE_NOT_AVAILABLE", "later": "PUT_OK", "max": 1}


def make_sparse(path: Path) -> None:
    """What an older rocketstore (or a sparse copy) left: the same bytes, no blocks past the written part."""
    data = path.read_bytes()
    written = len(data.rstrip(b"\0"))
    written += -written % 4096
    st = os.stat(path)
    with open(path, "r+b") as fh:
        fh.truncate(0)
        fh.truncate(len(data))
        fh.write(data[:written])
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.read_bytes() == data


SMALL = dict(
    mapped_file_size_commit_log=64 * 1024,
    mapped_file_size_consume_queue=20 * 1024,
    max_hash_slot_num=256,
    max_index_num=1024,
)  # 4 entries a slot: the CLI infers the sizes


def sparse_store(root: Path) -> list[Path]:
    """A store with a few messages whose segment files are all sparse again; returns those files."""
    with MessageStore.open(root, StoreConfig(**SMALL)) as s:
        for i in range(20):
            assert s.put(Message("T", body(i), keys=[f"k{i}"]), 0).ok
    files = [p for sub in ("commitlog", "consumequeue", "index") for p in (root / sub).rglob("*") if p.is_file()]
    for f in files:
        make_sparse(f)
        assert is_sparse(os.stat(f), f.stat().st_size)
    return files


def test_sparse_segments_on_a_full_disk_open_recover_and_produce_fail_cleanly(disk):
    d = disk(2048)
    root = d / "store"
    files = sparse_store(root)
    mtimes = {f: os.stat(f).st_mtime_ns for f in files}
    fill(d / "ballast")
    opened = python("from rocketstore import MessageStore\nimport sys\nMessageStore.open(sys.argv[1])", root)
    assert opened.returncode == 1 and "StoreOpenError" in opened.stderr, opened.stderr
    for p in (cli("produce", root, "T", "hello"), cli("recover", root)):
        assert p.returncode == 1, f"died (signal {-p.returncode})" if p.returncode < 0 else p.stderr
        assert "Traceback" not in p.stderr
        line = p.stderr.strip().splitlines()[-1]
        assert line.startswith("rocketstore: error: ") and "no space left on device" in line, line
        assert str(root) in line  # the file whose blocks could not be reserved
    assert "no space left on device" in opened.stderr.splitlines()[-1]
    # space freed: the open reserves every block, changes no byte, and no CommitLog segment's modification
    # time (expiry goes by it)
    os.unlink(d / "ballast")
    p = python("from rocketstore import MessageStore\nimport sys\nMessageStore.open(sys.argv[1]).close()", root)
    assert p.returncode == 0, p.stderr
    for f in files:
        assert not is_sparse(os.stat(f), f.stat().st_size), f
        if f.parent.name == "commitlog":
            assert os.stat(f).st_mtime_ns == mtimes[f], f
    got = read_back(root, "rw", SMALL, ["k0", "k19"])
    assert [m[2] for m in got["messages"]] == ["%06d" % i for i in range(20)]
    assert got["keys_missing"] == [] and got["put"] == "PUT_OK"


def test_full_disk_when_a_consume_queue_file_must_be_created_loses_no_acknowledged_message(disk):
    d = disk(4096)
    root = d / "store"
    p = python(
        """
        import json, sys
        from rocketstore import Message, MessageStore, StoreConfig
        cfg = StoreConfig(mapped_file_size_commit_log=256 * 1024, mapped_file_size_consume_queue=20 * 1024,
                          max_hash_slot_num=16, max_index_num=64)
        s = MessageStore.open(sys.argv[1], cfg)
        s._cleanup.disk_usage = lambda path: 0.0   # (another process fills the disk between two measures)
        assert s.put(Message("T", b"q0", keys=["a"]), 0).ok
        s.flush()                                 # the first ConsumeQueue and index files exist
        with open(sys.argv[2], "wb", buffering=0) as fh:   # the ballast: the rest of the disk
            try:
                while True:
                    fh.write(b"b" * 4096)
            except OSError:
                pass
        r = s.put(Message("T", b"q1", keys=["b"]), 1)      # fits the CommitLog; queue 1's file cannot be made
        refused = s.put(Message("T", b"refused"), 0)
        s.close()
        print(json.dumps({"q1": r.status.name, "q1_offset": r.physical_offset, "refused": refused.status.name}))
    """,
        root,
        d / "ballast",
    )
    assert p.returncode == 0, f"writer died (signal {-p.returncode})" if p.returncode < 0 else p.stderr
    out = json.loads(p.stdout)
    # the record is in the CommitLog: PUT_OK, as RocketMQ answers before reput dispatches; then the store
    # refuses puts (RocketMQ's WRITE_LOGICS_QUEUE_ERROR makes it not writeable)
    assert out["q1"] == "PUT_OK" and out["refused"] == "SERVICE_NOT_AVAILABLE"
    assert (root / "abort").exists()  # closed with a record not dispatched: the next open recovers it
    os.unlink(d / "ballast")
    p = python(
        """
        import json, sys
        from rocketstore import MessageStore
        with MessageStore.open(sys.argv[1]) as s:
            g = s.get("g", "T", 1, 0)
            print(json.dumps([[m.physical_offset, bytes(m.body).decode()] for m in g.messages]
                             + [[m.physical_offset for m in s.query("T", "b")]]))
    """,
        root,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == [[out["q1_offset"], "q1"], [out["q1_offset"]]]


def test_full_disk_when_an_index_file_must_be_created_catches_up_once_space_is_freed(disk):
    d = disk(4096)
    root = d / "store"
    p = python(
        """
        import json, os, sys
        from rocketstore import Message, MessageStore, StoreConfig
        cfg = StoreConfig(mapped_file_size_commit_log=256 * 1024, mapped_file_size_consume_queue=20 * 1024,
                          max_hash_slot_num=8, max_index_num=32)
        s = MessageStore.open(sys.argv[1], cfg)
        s._cleanup.disk_usage = lambda path: 0.0
        for i in range(31):                        # 31 keys fill the first index file
            assert s.put(Message("T", b"m%d" % i, keys=[f"k{i}"]), 0).ok
        s.flush()
        with open(sys.argv[2], "wb", buffering=0) as fh:   # the ballast: the rest of the disk
            try:
                while True:
                    fh.write(b"b" * 4096)
            except OSError:
                pass
        acked = [s.put(Message("T", b"m%d" % i, keys=[f"k{i}"]), 0).status.name for i in range(31, 40)]
        s.flush()                                  # the index needs its second file: no space
        refused = s.put(Message("T", b"refused"), 0).status.name
        missing_before = [i for i in range(40) if not s.query("T", f"k{i}")]
        os.unlink(sys.argv[2])
        caught_up = s.wait_dispatched(timeout_s=10)   # reput's retry places the entries that waited
        missing_after = [i for i in range(40) if not s.query("T", f"k{i}")]
        after = s.put(Message("T", b"m40", keys=["k40"]), 0).status.name
        s.close()
        print(json.dumps({"acked": acked, "refused": refused, "missing_before": missing_before,
                          "caught_up": caught_up, "missing_after": missing_after, "after": after}))
    """,
        root,
        d / "ballast",
    )
    assert p.returncode == 0, f"writer died (signal {-p.returncode})" if p.returncode < 0 else p.stderr
    out = json.loads(p.stdout)
    assert out["acked"] == ["PUT_OK"] * 9 and out["refused"] == "SERVICE_NOT_AVAILABLE"
    assert out["missing_before"] == list(range(31, 40))
    assert out["caught_up"] and out["missing_after"] == [] and out["after"] == "PUT_OK"
    assert not (root / "abort").exists()
    got = read_back(
        root,
        "ro",
        dict(mapped_file_size_commit_log=256 * 1024, max_hash_slot_num=8, max_index_num=32),
        [f"k{i}" for i in range(41)],
    )
    assert got["keys_missing"] == [] and len(got["messages"]) == 41


def test_metadata_and_checkpoint_writes_on_a_full_disk_keep_the_old_files(disk):
    d = disk(1024)
    root = d / "store"
    with MessageStore.open(root, StoreConfig(**SMALL)) as s:
        s.create_topic("A", queues=2)
        s.create_topic("A", queues=3)  # a second write: topics.json.bak holds the first
    config_dir = root / "config"
    before = {p.name: p.read_bytes() for p in config_dir.iterdir()}
    os.unlink(root / "checkpoint")
    fill(d / "ballast")
    # the checkpoint must be whole from the open on: a full disk is an error there, and leaves no empty file
    p = python("from rocketstore import MessageStore\nimport sys\nMessageStore.open(sys.argv[1])", root)
    assert p.returncode == 1 and "checkpoint" in p.stderr and "no space left on device" in p.stderr, p.stderr
    assert not (root / "checkpoint").exists()
    os.unlink(d / "ballast")
    with MessageStore.open(root, StoreConfig(**SMALL)) as s:
        assert (root / "checkpoint").stat().st_size == 4096
        fill(d / "ballast")
        with pytest.raises(OSError):
            s.create_topic("B", queues=1)
        assert "B" not in s.topic_configs
        s.flush()  # the checkpoint is rewritten in place: no block needed
    assert {p.name: p.read_bytes() for p in config_dir.iterdir()} == before  # no temp file left, .bak intact
    os.unlink(d / "ballast")
    with MessageStore.open(root, StoreConfig(**SMALL), read_only=True) as s:
        assert int(s.topic_configs["A"]["writeQueueNums"]) == 3
