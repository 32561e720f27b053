"""Issue #24, sections 3 and 4: output that shows what the user asked for, and the disk use of a new store.
Each command runs as a real process, at COLUMNS=80 and under --json, on a store written through the library
with a fixed clock, or on a golden RocketMQ store whose manifest says what to expect."""

import datetime
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from tests.golden import goldens as G

T0 = int(datetime.datetime(2026, 11, 22, 8, 0, tzinfo=datetime.timezone.utc).timestamp() * 1000)
ENV = {**os.environ, "COLUMNS": "80"}
# a small store's sizes, so a test store takes kilobytes (the CLI's --small is tested on its own below)
CONF = "mappedFileSizeCommitLog=4096\nmappedFileSizeConsumeQueue=6000\nmaxHashSlotNum=64\nmaxIndexNum=256\n"
GROUP = "billing-service-consumers"
LONG_TOPIC = "T" * 120 + "-orders"  # 127 characters, RocketMQ's longest is 127


def run(*args, stdin=None, env=None):
    p = subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        env=env or ENV,
    )
    return p.returncode, p.stdout, p.stderr


def ok(*args, **kw):
    code, out, err = run(*args, **kw)
    assert code == 0, err
    assert "Traceback" not in err
    return out


def lines(out):
    return [json.loads(line) for line in out.splitlines()]


def header_of(out):
    """A table's header row: the line starting with its first column's name."""
    return next(line.split() for line in out.splitlines() if line.split()[:1] == ["group"])


def widest(out):
    return max(len(line) for line in out.splitlines())


@pytest.fixture
def conf(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text(CONF)
    return str(path)


@pytest.fixture
def store(tmp_path):
    """Orders (4 queues) with 6 messages, a 127-character topic with 2; the group billing-service-consumers
    has consumed 1 message of Orders' queue 0 (so its lag is 5 + 2 = 7) and nothing of the long topic."""
    root = str(tmp_path / "store")
    now = [T0]
    cfg = StoreConfig(
        clock=lambda: now[0],
        mapped_file_size_commit_log=16 * 1024 * 1024,
        mapped_file_size_consume_queue=6_000 * 20,
        max_hash_slot_num=5_000,
        max_index_num=20_000,
    )
    with MessageStore.open(root, cfg) as s:
        s.create_topic("Orders", 4)
        s.create_topic(LONG_TOPIC, 2)
        for i in range(6):
            now[0] = T0 + 1000 * i
            assert s.put(Message("Orders", f"m{i}".encode(), keys=[f"k{i}"]), i % 4).ok
        for i in range(2):
            assert s.put(Message(LONG_TOPIC, f"l{i}".encode()), i).ok
        s.consumer_offsets.commit(GROUP, "Orders", {0: 1, 1: 0, 2: 0, 3: 0})
        s.consumer_offsets.commit(GROUP, LONG_TOPIC, {0: 0, 1: 0})
    return root


# ---------------------------------------------------------------- tables keep what the user asked for
def test_groups_at_80_columns_shows_the_whole_group_name_and_its_lag(store):
    out = ok("groups", store)
    assert widest(out.split("\n", 1)[1]) <= 80  # the table (its title names the store's path whole)
    assert "lag" in header_of(out)
    (row,) = [line for line in out.splitlines() if GROUP in line]  # the name whole, on one line
    assert row.split()[0] == GROUP and row.split()[-1] == "7"  # 5 left of Orders, 2 of the long topic
    # the long topic folds (every character kept), it is not cut
    assert "".join(out.split()).count(LONG_TOPIC) == 1
    (g,) = json.loads(ok("groups", store, "--json"))["rows"]
    assert (g["group"], g["lag"], g["queues"]) == (GROUP, 7, 6)


def test_groups_wide_shows_every_column_whole(store):
    out = ok("groups", store, "--wide")
    assert header_of(out) == ["group", "topics", "queues", "lag"]
    (row,) = [line for line in out.splitlines() if GROUP in line]
    assert LONG_TOPIC in row and row.split()[-2:] == ["6", "7"]


def test_queues_at_80_columns_keeps_each_groups_lag(store):
    out = ok("queues", store, "Orders")
    assert widest(out.split("\n", 1)[1]) <= 80  # the table (its title names the store's path whole)
    assert f"{GROUP} lag" in " ".join(out.split())  # the header, whole
    rows = [line.split() for line in out.splitlines() if line.split()[:1] == ["Orders"]]
    # queue, lag: m0..m5 went round robin (queues 0 and 1 hold 2), and the group committed 1 of queue 0
    assert [(r[1], r[-1]) for r in rows] == [("0", "1"), ("1", "2"), ("2", "1"), ("3", "1")]
    assert f"left out to fit 80 columns: {GROUP} committed" in " ".join(out.split())
    by_queue = {r["queueId"]: r["groups"][GROUP] for r in json.loads(ok("queues", store, "Orders", "--json"))["rows"]}
    assert by_queue[0] == {"committed": 1, "lag": 1} and by_queue[1] == {"committed": 0, "lag": 2}


def test_produce_prints_whole_ids_that_query_finds(tmp_path, conf):
    root = str(tmp_path / "new")
    out = ok("produce", root, "Orders", "hello", "--keys", "order-1", "--create", "-c", conf)
    assert widest(out) <= 80
    # the first record of a store: store host 127.0.0.1:10911 (7F000001, port 0x2A9F), physical offset 0
    assert "7F00000100002A9F0000000000000000" in out.split()
    ids = re.findall(r"\b[0-9A-F]{32}\b", out)
    assert len(ids) == 2  # the offset msgId and the UNIQ_KEY, both whole
    assert "(left out to fit 80 columns: qoffset; --wide shows every field)" in out  # said, not hidden
    for printed in ids:
        found = lines(ok("query", root, "--msg-id", printed, "--json", "-c", conf))
        assert [m["body"] for m in found] == ["hello"], printed
    wide = ok("produce", root, "Orders", "again", "--wide", "-c", conf)
    assert "physOffset" in wide and "size" in wide.split()


def test_every_table_printing_command_has_wide():
    for args in (
        ("produce",),
        ("consume",),
        ("query",),
        ("topics",),
        ("queues",),
        ("groups",),
        ("group", "progress"),
        ("group", "reset-offset"),
        ("inspect",),
        ("verify",),
        ("dump",),
    ):
        assert "--wide" in ok(*args, "-h"), args


def test_consume_and_query_print_json_lines(store):
    out = ok("consume", store, "Orders", "--json")
    got = lines(out)
    assert len(out.splitlines()) == 6 and sorted(m["body"] for m in got) == [f"m{i}" for i in range(6)]
    assert all(m["topic"] == "Orders" for m in got)
    found = lines(ok("query", store, "--key", "k3", "--topic", "Orders", "--json"))
    assert [(m["body"], m["queueId"], m["storeTimestamp"]) for m in found] == [("m3", 3, T0 + 3000)]
    assert ok("query", store, "--key", "nobody", "--topic", "Orders", "--json") == ""


def test_consume_table_at_80_columns_keeps_its_columns(store):
    out = ok("consume", store, LONG_TOPIC)
    table = [line for line in out.splitlines() if LONG_TOPIC not in line]  # the title names the topic whole
    assert max(len(line) for line in table) <= 80
    (header,) = [line.split() for line in table if line.split()[:1] == ["queue"]]
    assert header == ["queue", "qoffset", "stored", "tags", "keys", "body"]
    assert "l0" in out.split() and "l1" in out.split()


# ---------------------------------------------------------------- clean says why, and --dry-run
def _snapshot(root):
    """Every file's bytes and mtime (ns), and the set of paths."""
    out = {}
    for d, _dirs, names in os.walk(root):
        for n in names:
            path = os.path.join(d, n)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, root)] = (fh.read(), os.stat(path).st_mtime_ns)
    return out


def _segments(root):
    return sorted(os.listdir(os.path.join(root, "commitlog")))


def test_clean_that_deletes_nothing_says_why(tmp_path, conf):
    root = str(tmp_path / "s")
    ok("produce", root, "T", "one", "--create", "-c", conf)
    assert _segments(root) == ["0" * 20]
    summary = json.loads(ok("clean", root, "-c", conf, "--json"))
    assert summary["commitLogFilesDeleted"] == 0
    assert "last (current)" in summary["why"] and "deleteWhen" in summary["why"]
    # two segments, the oldest 3 h old: kept 72 h
    ok("produce", root, "T", "--stdin", "-c", conf, stdin="".join(f"{i:0100d}\n" for i in range(40)))
    segs = _segments(root)
    assert len(segs) >= 2
    three_hours_ago = time.time() - 3 * 3600
    os.utime(os.path.join(root, "commitlog", segs[0]), (three_hours_ago, three_hours_ago))
    out = ok("clean", root, "-c", conf)
    assert widest(out) <= 80
    text = " ".join(out.split())
    assert "0 files deleted" in text and "is 3.0 h old" in text and "kept 72 h" in text, text
    assert _segments(root) == segs


def test_clean_dry_run_changes_nothing_and_names_the_expired_files(tmp_path, conf):
    root = str(tmp_path / "s")
    ok("produce", root, "T", "--stdin", "--create", "-c", conf, stdin="".join(f"{i:0100d}\n" for i in range(60)))
    segs = _segments(root)
    assert len(segs) >= 3
    old = time.time() - 100 * 3600  # older than 72 h: the first two go, the third (new) stays
    for name in segs[:2]:
        os.utime(os.path.join(root, "commitlog", name), (old, old))
    before = _snapshot(root)
    report = json.loads(ok("clean", root, "--dry-run", "-c", conf, "--json"))
    assert [f["file"] for f in report["files"]] == [f"commitlog/{n}" for n in segs[:2]]
    assert report["commitLogFilesToDelete"] == 2 and report["bytesToFree"] == 2 * 4096
    assert report["commitLogMinOffsetAfter"] == int(segs[2])
    out = ok("clean", root, "--dry-run", "-c", conf)
    assert widest(out) <= 80 and f"commitlog/{segs[0]}" in out and "nothing changed" in out
    assert _snapshot(root) == before  # every byte and every mtime
    # and the real clean deletes exactly those
    assert json.loads(ok("clean", root, "-c", conf, "--json"))["commitLogFilesDeleted"] == 2
    assert _segments(root) == segs[2:]


def test_rebuild_dry_run_says_what_and_changes_nothing(store):
    before = _snapshot(store)
    report = json.loads(ok("rebuild", store, "--dry-run", "--json"))
    assert report["dryRun"] is True
    assert report["queues"] == 6 and report["messages"] == 8  # Orders' 4 queues and the long topic's 2
    assert report["indexFiles"] == 1 and report["indexFileSize"] == 40 + 5_000 * 4 + 20_000 * 20
    assert report["bytesNeeded"] == 6 * 6_000 * 20 + report["indexFileSize"]  # one queue file each
    assert sorted((r["topic"], r["queueId"]) for r in report["rows"]) == sorted(
        [("Orders", q) for q in range(4)] + [(LONG_TOPIC, 0), (LONG_TOPIC, 1)]
    )
    out = ok("rebuild", store, "--dry-run")
    assert "nothing changed" in out and "rebuild would write 6 queue(s) and 1 index file(s)" in " ".join(out.split())
    assert _snapshot(store) == before
    assert not os.path.exists(os.path.join(store, ".rebuild-new"))


# ---------------------------------------------------------------- --help has examples
@pytest.mark.parametrize(
    "command",
    ["produce", "consume", "query", "inspect", "verify", "topics", "groups", "serve", "rebuild", "clean"],
)
def test_help_ends_with_examples_kept_one_a_line(command):
    out = ok(command, "-h")
    assert "Examples:" in out
    examples = out.split("Examples:", 1)[1].strip().splitlines()
    assert len(examples) >= 2
    assert all(f"rocketstore {command} " in line or "rocketstore group " in line for line in examples), examples
    assert widest(out) <= 80


# ---------------------------------------------------------------- inspect shows the checkpoint file's values
def test_inspect_shows_the_checkpoint_files_own_values():
    name = "store-abnormal"  # a crash image: recovery (in memory) knows another confirmPhyOffset than the file
    G.require(name)
    root = G.store_dir(name)
    with open(os.path.join(root, "checkpoint"), "rb") as fh:
        raw = fh.read(40)
    # StoreCheckpoint: five big-endian longs, decoded here by hand
    physic, logics, index, master, confirm = struct.unpack(">qqqqq", raw)
    want = G.manifest(name)["checkpointFile"]
    assert (physic, logics, index, master, confirm) == (
        want["physicMsgTimestamp"],
        want["logicsMsgTimestamp"],
        want["indexMsgTimestamp"],
        want["masterFlushedOffset"],
        want["confirmPhyOffset"],
    )
    report = json.loads(ok("inspect", root, "--json"))
    cp = report["checkpoint"]
    assert (cp["physicMsgTimestamp"], cp["logicsMsgTimestamp"], cp["indexMsgTimestamp"]) == (physic, logics, index)
    assert (cp["masterFlushedOffset"], cp["confirmPhyOffset"]) == (master, confirm) == (0, 0)
    out = ok("inspect", root)
    section = out.split("checkpoint file", 1)[1]
    assert re.search(r"confirmPhyOffset\s+0\s", section), section


# ---------------------------------------------------------------- section 4: a new store's disk use
def _blocks(root):
    return sum(os.stat(os.path.join(d, n)).st_blocks * 512 for d, _, names in os.walk(root) for n in names)


def test_a_small_new_store_takes_little_disk_and_keeps_its_sizes(tmp_path):
    root = str(tmp_path / "small")
    put = json.loads(ok("produce", root, "Orders", "hello", "--create", "--small", "--json"))
    assert put["header"]["messages"] == 1
    assert _blocks(root) < 20 * 1024 * 1024  # 16 MiB of CommitLog, queue and index files of kilobytes
    assert os.path.getsize(os.path.join(root, "commitlog", "0" * 20)) == 16 * 1024 * 1024
    # later opens, without --small, keep the sizes: they are read from the files
    ok("produce", root, "Orders", "--stdin", stdin="".join(f"m{i}\n" for i in range(20)))
    ok("produce", root, "Other", "x")  # a new topic's queues too
    assert _segments(root) == ["0" * 20]
    for d, _, names in os.walk(os.path.join(root, "consumequeue")):
        for n in names:
            assert os.path.getsize(os.path.join(d, n)) == 6_000 * 20
    (index,) = os.listdir(os.path.join(root, "index"))
    assert os.path.getsize(os.path.join(root, "index", index)) == 40 + 5_000 * 4 + 20_000 * 20
    assert _blocks(root) < 20 * 1024 * 1024
    assert len(lines(ok("consume", root, "Orders", "--json"))) == 21
    assert json.loads(ok("verify", root, "--json"))["ok"] is True


def test_broker_conf_sizes_work_on_create(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=2000\nmaxHashSlotNum=10\nmaxIndexNum=40\n"
    )
    root = str(tmp_path / "s")
    ok("topic", "create", root, "Orders", "--queues", "1", "--create", "-c", str(conf))
    ok("produce", root, "Orders", "a", "-c", str(conf))
    assert os.path.getsize(os.path.join(root, "commitlog", "0" * 20)) == 1048576
    assert os.path.getsize(os.path.join(root, "consumequeue", "Orders", "0", "0" * 20)) == 2000
    (index,) = os.listdir(os.path.join(root, "index"))
    assert os.path.getsize(os.path.join(root, "index", index)) == 40 + 10 * 4 + 40 * 20
    ok("produce", root, "Orders", "b")  # reopened without -c: the sizes come from the files
    assert _segments(root) == ["0" * 20]
    assert [m["body"] for m in lines(ok("consume", root, "Orders", "--json"))] == ["a", "b"]


def test_the_default_new_store_keeps_rocketmqs_1_gib_segment(tmp_path):
    if shutil.disk_usage(tmp_path).free < 4 * 1024**3:
        pytest.skip("needs 1.4 GB of free disk for RocketMQ's default file sizes")
    root = str(tmp_path / "default")
    ok("produce", root, "Orders", "hello", "--create")
    assert os.path.getsize(os.path.join(root, "commitlog", "0" * 20)) == 1024**3
    (index,) = os.listdir(os.path.join(root, "index"))
    assert os.path.getsize(os.path.join(root, "index", index)) == 40 + 5_000_000 * 4 + 20_000_000 * 20
    assert "1 GiB CommitLog segment" in " ".join(ok("produce", "-h").split())


# ---------------------------------------------------------------- serve with an archive: who archives
def test_serve_with_an_archive_names_the_command_that_archives_beside_it(tmp_path):
    """serve archives nothing itself (no Spark in the broker): with --archive it says at start which command
    to keep running beside it, with this store's and this archive's paths."""
    import signal

    store, dest = str(tmp_path / "store"), str(tmp_path / "archive")
    os.makedirs(os.path.join(store, "commitlog"))
    argv = ["serve", store, "--no-grpc", "--no-namesrv", "--no-http", "--remoting", "127.0.0.1:0", "--archive", dest]
    p = subprocess.Popen(
        [sys.executable, "-m", "rocketstore.cli", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        lines = [p.stdout.readline() for _ in range(2)]
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    assert lines[0].startswith(f"rocketstore serve: store {store},"), lines
    assert lines[1] == (
        f"rocketstore serve: cleanup waits for the archive at {dest}: keep "
        f"`rocketstore archive {store} --to {dest} --watch` running beside it\n"
    )
