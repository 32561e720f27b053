"""`rocketstore rebuild` is safe (issue #17, points 1-3), run as a real process the way an operator runs it:

1. on a store another process holds open for writing it fails, changes not one byte, and the writer goes on;
2. SIGKILLed at any instant, the next open serves every message at its offset and leaves no `.rebuild-*`;
3. without -c it keeps the store's ConsumeQueue, batch ConsumeQueue and index file sizes.

The expectations are what was put (`placed`) and sizes computed by hand from RocketMQ's layouts: a
ConsumeQueue unit is 20 bytes, a batch ConsumeQueue unit 46, an index file 40 + 4 x slots + 20 x entries.
"""

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time

from rocketstore import Message, MessageStore, StoreConfig, StoreOpenError

SIZES = dict(
    mapped_file_size_commit_log=1 << 20,
    mapped_file_size_consume_queue=5_000 * 20,
    mapped_file_size_batch_consume_queue=500 * 46,
    max_hash_slot_num=400,
    max_index_num=1_600,
)
CQ_FILE, BCQ_FILE, INDEX_FILE = 100_000, 23_000, 40 + 4 * 400 + 20 * 1_600
TOPICS, QUEUES = ("Orders", "Pays"), 4
# the check reads each queue in big steps (RocketMQ's defaults answer 32 messages a call)
READ = dict(max_transfer_count_on_message_in_memory=4096, max_transfer_bytes_on_message_in_memory=1 << 24)


def placed(i: int) -> tuple[str, int, bytes]:
    """Where message i goes and what it says (the writer script below puts the same)."""
    topic, queue = TOPICS[i % 2], (i // 2) % QUEUES
    return topic, queue, f"{topic}/{queue}/{i}".encode()


def expected(n: int) -> dict:
    """(topic, queue) -> [(queue offset, body)] of the first n messages put."""
    out = {(t, q): [] for t in TOPICS for q in range(QUEUES)}
    for i in range(n):
        topic, queue, body = placed(i)
        out[(topic, queue)].append((len(out[(topic, queue)]), body))
    return out


def fill(root: str, n: int) -> None:
    with MessageStore.open(root, StoreConfig(**SIZES)) as s:
        for i in range(n):
            topic, queue, body = placed(i)
            assert s.put(Message(topic, body, tags="T", keys=[f"k{i}"]), queue_id=queue).ok


def served(root: str, read_only: bool = False) -> dict:
    """Every queue from offset 0 as the store answers it, opened with the store's own sizes (its broker.conf)."""
    with MessageStore.open(root, StoreConfig(**SIZES, **READ), read_only=read_only) as s:
        out = {}
        for topic in TOPICS:
            for queue in range(QUEUES):
                got, offset = [], 0
                while True:
                    g = s.get("check", topic, queue, offset, max_count=4096)
                    if not g.found:
                        break
                    got += [(m.queue_offset, m.body) for m in g.messages]
                    offset = g.next_begin_offset
                out[(topic, queue)] = got
    return out


def leftovers(root: str) -> list[str]:
    return sorted(n for n in os.listdir(root) if n.startswith(".rebuild-"))


def segment_sizes(root: str, sub: str) -> set[int]:
    return {os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(root, sub)) for f in fs}


def snapshot(root: str) -> dict:
    """Every directory, file (sha256) and symlink under root."""
    out = {}
    for d, dirs, files in os.walk(root):
        out[os.path.relpath(d, root)] = "dir"
        for name in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            path = os.path.join(d, name)
            if os.path.islink(path):
                out[os.path.relpath(path, root)] = "-> " + os.readlink(path)
            else:
                with open(path, "rb") as fh:
                    out[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def broker_conf(tmp_path) -> str:
    """The store's sizes as its broker.conf gives them (RocketMQ's names, its spelling of the batch one)."""
    path = tmp_path / "broker.conf"
    path.write_text(
        f"mappedFileSizeCommitLog={SIZES['mapped_file_size_commit_log']}\n"
        f"mappedFileSizeConsumeQueue={CQ_FILE}\nmapperFileSizeBatchConsumeQueue={BCQ_FILE}\n"
        f"maxHashSlotNum={SIZES['max_hash_slot_num']}\nmaxIndexNum={SIZES['max_index_num']}\n"
    )
    return str(path)


def cli(*args):
    return [sys.executable, "-m", "rocketstore.cli", *args]


def run(*args):
    p = subprocess.run(cli(*args), capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


# ---------------------------------------------------------------------------- 1. a store held by a writer
WRITER = """
import sys
from rocketstore import Message, MessageStore, StoreConfig
root, first, more = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sizes = {sizes!r}
never = 3_600_000     # no background flush while the test compares bytes: only the explicit flush() writes
s = MessageStore.open(root, StoreConfig(**sizes, flush_interval_commit_log=never,
                      flush_commit_log_thorough_interval=never, flush_interval_consume_queue=never,
                      flush_consume_queue_thorough_interval=never))
def put(a, b):
    for i in range(a, b):
        topic, queue = {topics!r}[i % 2], (i // 2) % {queues}
        r = s.put(Message(topic, f"{{topic}}/{{queue}}/{{i}}".encode(), tags="T", keys=[f"k{{i}}"]), queue_id=queue)
        assert r.ok, r
put(0, first)
s.flush()
print("ready", flush=True)
sys.stdin.readline()
put(first, first + more)
s.flush()
s.close()
print("closed", flush=True)
""".format(sizes=SIZES, topics=TOPICS, queues=QUEUES)


def test_rebuild_of_a_store_held_by_a_writer_changes_nothing(tmp_path):
    root = str(tmp_path / "store")
    first, more = 6_000, 1_000
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, root, str(first), str(more)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline().strip() == "ready", writer.stderr.read()
        before = snapshot(root)
        assert "abort" in before and "consumequeue/Orders/0/00000000000000000000" in before
        for engine in ("local", "spark"):  # the Spark engine fails on the lock before starting Spark
            code, out, err = run("rebuild", root, "--yes", "--engine", engine)
            assert code == 1
            assert err.strip() == (
                f"rocketstore: error: {os.path.join(root, 'lock')}: the store is open for writing by another process"
            ), err
            assert snapshot(root) == before
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "closed", writer.stderr.read()
        assert writer.wait(60) == 0
    finally:
        writer.kill()
        writer.wait()
    assert served(root) == expected(first + more)


# ---------------------------------------------------------------------------- 2. SIGKILL at any instant
def check_after_kill(root: str, n: int) -> None:
    """What the next open finds: every message at its offset, the store's sizes, nothing left over."""
    assert served(root) == expected(n)
    assert leftovers(root) == []
    assert segment_sizes(root, "consumequeue") == {CQ_FILE}
    assert segment_sizes(root, "index") == {INDEX_FILE}


def wait_until_begun(p: subprocess.Popen, root: str) -> bool:
    """Polls until the rebuild's first `.rebuild-*` directory appears (False: the process ended first)."""
    deadline = time.monotonic() + 60
    while not leftovers(root):
        if p.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


# the kill tests give -c broker.conf: they are about the kills, not about sizes inferred without it (3.)
def test_sigkill_at_random_instants(tmp_path):
    root, n = str(tmp_path / "store"), 24_000
    fill(root, n)
    conf = broker_conf(tmp_path)
    # one undisturbed rebuild first: how long it runs once begun, to spread the kills over that span
    p = subprocess.Popen(
        cli("rebuild", root, "--yes", "--json", "-c", conf), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert wait_until_begun(p, root)
    began = time.monotonic()
    out, err = p.communicate(timeout=300)
    span = time.monotonic() - began
    assert p.returncode == 0, err
    check_after_kill(root, n)
    rng = random.Random(17)
    for _ in range(10):
        p = subprocess.Popen(
            cli("rebuild", root, "--yes", "--json", "-c", conf), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if wait_until_begun(p, root):
            time.sleep(rng.uniform(0, span * 1.1))
        p.send_signal(signal.SIGKILL)
        p.wait()
        check_after_kill(root, n)


# the rebuild CLI in a process that SIGKILLs itself at its k-th file-system change (rename, replace, unlink,
# rmdir: what a rebuild's staging and swap are made of), or with k = 0 lists them all and runs to the end
KILLER = """
import json, os, signal, sys
kill_at, log = int(sys.argv[1]), sys.argv[2]
count = [0]
def deadly(name, fn):
    def change(*args, **kwargs):
        count[0] += 1
        if count[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if not kill_at:
            with open(log, "a") as fh:
                fh.write(json.dumps([name, os.path.abspath(args[0])]) + "\\n")
        return fn(*args, **kwargs)
    return change
for name in ("rename", "replace", "unlink", "rmdir"):
    setattr(os, name, deadly(name, getattr(os, name)))
from rocketstore.cli.main import cli
sys.argv = ["rocketstore", *sys.argv[3:]]
cli()
"""


def kill_points(ops: list, root: str) -> list[int]:
    """Every change to the store root or to a directory right under it (the swap's renames, `abort`, the
    checkpoint), and the first and last of each run of changes deeper inside one tree (files the staging
    store creates; shutil.rmtree deleting a tree: one change per file and directory)."""

    def deep_tree(op):
        parts = os.path.relpath(op[1], root).split(os.sep)
        return parts[0] if len(parts) > 2 else None

    points = []
    for k, op in enumerate(ops, 1):
        tree = deep_tree(op)
        inside_a_run = (
            tree is not None and k > 1 and deep_tree(ops[k - 2]) == tree and k < len(ops) and deep_tree(ops[k]) == tree
        )
        if not inside_a_run:
            points.append(k)
    return points


def test_sigkill_at_each_step_of_the_swap(tmp_path):
    root, n = str(tmp_path / "store"), 3_000
    fill(root, n)
    log = str(tmp_path / "ops.jsonl")
    args = ("rebuild", root, "--yes", "--json", "-c", broker_conf(tmp_path))
    p = subprocess.run([sys.executable, "-c", KILLER, "0", log, *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    check_after_kill(root, n)
    with open(log) as fh:
        ops = [json.loads(line) for line in fh]
    points = kill_points(ops, root)
    assert 8 <= len(points) <= 40, ops
    for k in points:
        p = subprocess.run([sys.executable, "-c", KILLER, str(k), log, *args], capture_output=True, timeout=300)
        assert p.returncode == -signal.SIGKILL, (k, ops[k - 1], p.stderr)
        # a reader cannot finish a swap: it refuses the store or answers as the old or the new files do
        try:
            assert served(root, read_only=True) == expected(n), (k, ops[k - 1])
        except StoreOpenError as e:
            assert "interrupted while swapping" in str(e), e
        if k % 4:  # the next writer's open settles what the kill left ...
            check_after_kill(root, n)
        else:  # ... and so does the next rebuild
            code, out, err = run(*args)
            assert code == 0, (k, ops[k - 1], err)
            check_after_kill(root, n)


def test_rebuild_deletes_what_an_older_rebuild_left_aside(tmp_path):
    """rocketstore before #17 moved the old files into `.rebuild-<ms>/` and, killed, left them there."""
    root, n = str(tmp_path / "store"), 2_000
    fill(root, n)
    aside = os.path.join(root, ".rebuild-1763800000000")
    os.makedirs(aside)
    os.rename(os.path.join(root, "index"), os.path.join(aside, "index"))
    code, out, err = run("rebuild", root, "--yes", "--json", "-c", broker_conf(tmp_path))
    assert code == 0, err
    assert ".rebuild-1763800000000" in err  # said so
    check_after_kill(root, n)


# ---------------------------------------------------------------------------- 3. file sizes
def batches_served(root: str, topic: str) -> list[bytes]:
    with MessageStore.open(root, StoreConfig(**SIZES, **READ), read_only=True) as s:
        bodies = []
        for queue in range(2):
            offset = 0
            while (g := s.get("check", topic, queue, offset, max_count=4096)).found:
                bodies += [m.body for m in g.unpacked()]
                offset = g.next_begin_offset
    return bodies


SIZED = {"consumequeue": {CQ_FILE}, "batchconsumequeue": {BCQ_FILE}, "index": {INDEX_FILE}}


def make_sized_store(root: str, n: int, batches: int) -> None:
    """n messages (`placed`) and `batches` batches of two on the batch ConsumeQueue topic Batchy."""
    fill(root, n)
    with MessageStore.open(root, StoreConfig(**SIZES)) as s:
        s.create_topic("Batchy", 2, {"queue.type": "BatchCQ"})
        for i in range(batches):
            assert s.put_batch([Message("Batchy", f"b{i}-{j}".encode()) for j in range(2)], queue_id=i % 2).ok
    assert {sub: segment_sizes(root, sub) for sub in SIZED} == SIZED


def assert_sizes_kept(root: str, n: int, batches: int) -> None:
    assert {sub: segment_sizes(root, sub) for sub in SIZED} == SIZED
    assert served(root) == expected(n)  # opened with the sizes its broker.conf gives
    assert sorted(batches_served(root, "Batchy")) == sorted(
        f"b{i}-{j}".encode() for i in range(batches) for j in range(2)
    )


def test_rebuild_without_conf_keeps_the_file_sizes(tmp_path):
    root, n, batches = str(tmp_path / "store"), 8_000, 1_200
    make_sized_store(root, n, batches)
    # 600 units of 46 bytes a queue: more than one 23,000-byte file
    assert len(os.listdir(os.path.join(root, "batchconsumequeue", "Batchy", "0"))) == 2
    code, out, err = run("rebuild", root, "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["messages"] == n + 2 * batches
    assert_sizes_kept(root, n, batches)
