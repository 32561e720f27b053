"""Issue #16, points 2-13: the `rocketstore` command as a newcomer uses it, each run as a real process on a
store written through the library with a fixed clock (so every expected time, offset and id is known
before the command runs)."""

import base64
import datetime
import json
import os
import pty
import resource  # noqa: F401  (os.wait4 fills a resource.struct_rusage)
import select
import subprocess
import sys

import pytest

from rocketstore import Message, MessageStore, StoreConfig

T0 = int(datetime.datetime(2026, 11, 22, 8, 0, tzinfo=datetime.timezone.utc).timestamp() * 1000)
ENV = {**os.environ, "COLUMNS": "80"}


def run(*args, stdin=None, env=None):
    p = subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", *args], capture_output=True, input=stdin, timeout=120, env=env or ENV
    )
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), p.stdout


def ok(*args, **kw):
    code, out, err, _ = run(*args, **kw)
    assert code == 0, err
    assert "Traceback" not in err
    return out


def one_error_line(code_expected, *args):
    code, out, err, _ = run(*args)
    assert code == code_expected, (args, out, err)
    assert err.startswith("rocketstore: error:") and err.count("\n") == 1, (args, err)
    return err


def lines(out):
    """JSON Lines (what `consume --json`, `query --json` and `dump --json` print): one object per line."""
    return [json.loads(line) for line in out.splitlines()]


def iso(ms):
    """An independent ISO rendering: what a table must show for a store time."""
    t = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


MARKUP = [("[/docs]", "[bold]x[/bold]", "[i]k"), ("plain", "TagB", "k2")]
BINARY = bytes(range(256))


@pytest.fixture
def store(tmp_path):
    """Orders: 4 queues; q0 holds the markup message, then a binary body, then plain ones; message k is stored
    at T0 + k seconds (the store's clock is set before each put)."""
    root = str(tmp_path / "store")
    now = [T0]
    with MessageStore.open(root, StoreConfig(clock=lambda: now[0])) as s:

        def put(k, topic, body, queue, **kw):
            now[0] = T0 + 1000 * k
            assert s.put(Message(topic, body, **kw), queue).ok

        s.create_topic("Orders", 4)
        (body, tags, key), (body2, tags2, key2) = MARKUP
        put(0, "Orders", body.encode(), 0, tags=tags, keys=[key])
        put(1, "Orders", BINARY, 0, tags="bin")
        for i in range(6):  # m0..m5 at T0 + 2..7 s
            put(2 + i, "Orders", f"m{i}".encode(), i % 4, tags=tags2, keys=[key2])
        s.create_topic("Other", 2)
        put(8, "Other", b"o0", 1)
    return root


# ---------------------------------------------------------------- 2: data is text, never markup
def test_markup_in_bodies_tags_and_keys_prints_as_written(store):
    seg = os.path.join(store, "commitlog", "0" * 20)
    everything = ("[/docs]", "[bold]x[/bold]", "[i]k")
    for args, texts in (
        (("consume", store, "Orders", "--max", "1", "--queue", "0"), everything),
        (("query", store, "--key", "[i]k", "--topic", "Orders"), everything),
        (("dump", seg, "--bodies", "--limit", "1"), ("[/docs]", "[bold]x[/bold]")),
        (("dump", seg, "--wide", "--limit", "1"), ("[bold]x[/bold]", "[i]k")),
    ):
        out = ok(*args, env={**ENV, "COLUMNS": "300"})
        for text in texts:
            assert text in out, (args, out)


# ---------------------------------------------------------------- 3: dump streams, in bounded memory
N_BIG = 300_000
RSS_BOUND_KB = 200 * 1024  # a list of 300,000 decoded rows alone takes several times this


@pytest.fixture(scope="module")
def big_segment(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("big") / "store")
    cfg = StoreConfig(mapped_file_size_commit_log=64 << 20, message_index_enable=False, clock=lambda: T0)
    with MessageStore.open(root, cfg) as s:
        for start in range(0, N_BIG, 10_000):
            assert s.put_batch([Message("Big", b"%d" % i) for i in range(start, start + 10_000)], 0).ok
    return os.path.join(root, "commitlog", "0" * 20)


# The command's own peak memory: VmHWM of its process (getrusage's ru_maxrss of a child is no good here: Linux
# carries the forking parent's resident size, pytest's, over fork and exec). The wrapper prints it at exit.
PEAK = """
import atexit, sys
def peak():
    with open("/proc/self/status") as fh:
        sys.stderr.write(next(line for line in fh if line.startswith("VmHWM")) + "\\n")
atexit.register(peak)
sys.argv = ["rocketstore", *sys.argv[1:]]
from rocketstore.cli.main import main
main()
"""


def _dump(*args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PEAK, "dump", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV
    )


def _hwm_kb(text: str) -> int:
    return int(text.split("VmHWM:")[1].split()[0])


def _peak_rss_kb(p: subprocess.Popen, kill: bool) -> int:
    """Peak resident memory of the command: read from /proc while it runs (then killed), else as it exits."""
    if kill:
        with open(f"/proc/{p.pid}/status") as fh:
            peak = _hwm_kb(fh.read())
        p.kill()
        p.wait()
        return peak
    err = p.stderr.read().decode()
    p.wait()
    return _hwm_kb(err)


def test_dump_table_shows_the_first_rows_at_once_and_stays_small(big_segment):
    p = _dump(big_segment)
    lines = [p.stdout.readline().decode() for _ in range(8)]
    # the first page is out (the old dump built every row first); killed now, its peak memory is one page's
    rss = _peak_rss_kb(p, kill=True)
    p.stdout.close()
    rows = [ln.split() for ln in lines if ln.split() and ln.split()[0].isdigit()]
    assert rows[0][:3] == ["0", rows[0][1], "V1"] and rows[1][0] == rows[0][1]  # offsets: 0, then its size
    assert all(len(ln.rstrip("\n")) <= 80 for ln in lines[1:])  # default columns fit 80 (not the title)
    assert rss < RSS_BOUND_KB, rss


def test_dump_json_is_json_lines_of_every_record_in_bounded_memory(big_segment):
    p = _dump(big_segment, "--json", "--bodies")
    count, first, last = 0, None, None
    for line in p.stdout:
        row = json.loads(line)
        first = first or row
        last = row
        count += 1
    rss = _peak_rss_kb(p, kill=False)
    assert count == N_BIG
    assert (first["offset"], first["body"], first["bodyEncoding"]) == (0, "0", "utf-8")
    assert last["body"] == str(N_BIG - 1) and last["queueOffset"] == N_BIG - 1
    assert "physicalOffset" not in first  # `offset` says it; the field only when it disagrees
    assert rss < RSS_BOUND_KB, rss


def test_dump_of_a_big_file_as_a_consume_queue_with_limit_stays_small(big_segment):
    p = _dump(big_segment, "--kind", "consumequeue", "--limit", "1", "--json")
    out = p.stdout.read()
    rss = _peak_rss_kb(p, kill=False)
    assert len(out.splitlines()) == 1
    assert rss < RSS_BOUND_KB, rss


def test_dump_default_columns_and_wide(store):
    seg = os.path.join(store, "commitlog", "0" * 20)
    narrow = ok("dump", seg)
    wide = ok("dump", seg, "--wide", env={**ENV, "COLUMNS": "400"})
    assert all(len(ln) <= 80 for ln in narrow.splitlines()[1:])
    assert "msgId" not in narrow and "msgId" in wide and "uniqKey" in wide
    assert iso(T0) in narrow  # times as ISO in tables


# ---------------------------------------------------------------- 4: not a store, unknown topics
def test_a_directory_that_is_not_a_store_is_an_error(tmp_path, store):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "hosts").write_text("127.0.0.1 localhost\n")
    for args in (
        ("verify", str(etc)),
        ("inspect", str(etc)),
        ("topics", str(etc)),
        ("queues", str(etc)),
        ("consume", str(etc), "Orders"),
        ("query", str(etc), "--key", "k"),
        ("groups", str(etc)),
    ):
        err = one_error_line(1, *args)
        assert "not a RocketMQ store" in err and "commitlog/" in err, (args, err)
    for args in (("consume", store, "Nope"), ("query", store, "--key", "k", "--topic", "Nope")):
        assert "no topic Nope" in one_error_line(1, *args)


# ---------------------------------------------------------------- 5: ids as the official clients print them
def test_an_id_printed_by_the_rocketmq5_client_is_found(store):
    from rocketmq.v5.util.message_id_codec import MessageIdCodec

    client_id = MessageIdCodec().next_message_id()  # what the RocketMQ 5 clients print (34 chars)
    assert len(client_id) == 34
    with MessageStore.open(store) as s:
        r = s.put(Message("Other", b"from a v5 client", properties={"UNIQ_KEY": client_id}), 0)
        assert r.ok
    for args in (("--msg-id", client_id), ("--unique-key", client_id), ("--msg-id", r.msg_id)):
        got = lines(ok("query", store, *args, "--json"))
        assert [(m["uniqKey"], m["body"], m["topic"]) for m in got] == [(client_id, "from a v5 client", "Other")], args


# ---------------------------------------------------------------- 6: binary bodies survive --json
def test_binary_bodies_survive_json(store):
    rows = lines(ok("consume", store, "Orders", "--queue", "0", "--max", "2", "--json"))
    assert (rows[0]["body"], rows[0]["bodyEncoding"]) == ("[/docs]", "utf-8")
    assert rows[1]["bodyEncoding"] == "base64" and base64.b64decode(rows[1]["body"]) == BINARY


# ---------------------------------------------------------------- 7: progress on a terminal
def test_verify_of_a_small_store_shows_progress_in_bytes_on_a_terminal(store):
    master, slave = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "rocketstore.cli", "verify", store],
        stdout=subprocess.PIPE,
        stderr=slave,
        env={**ENV, "TERM": "xterm"},
    )
    os.close(slave)
    out = p.communicate(timeout=120)[0].decode()
    seen = b""
    while select.select([master], [], [], 0)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert p.returncode == 0 and "the store is sound" in out
    assert b"verifying commitlog" in seen and (b"bytes" in seen or b"kB" in seen), seen[-400:]


# ---------------------------------------------------------------- 8: ISO times in and out
def test_iso_times_are_shown_and_taken(store):
    table = ok("consume", store, "Orders", "--queue", "1", env={**ENV, "COLUMNS": "200"})
    assert iso(T0 + 2000 + 1000) in table  # m1 went to queue 1 at T0 + 3 s
    since = lines(ok("consume", store, "Orders", "--from", iso(T0 + 5000), "--json"))
    assert sorted(r["body"] for r in since) == ["m3", "m4", "m5"]  # stored at T0 + 5, 6, 7 s
    in_range = lines(
        ok(
            "query",
            store,
            "--begin",
            iso(T0 + 1000),
            "--end",
            "2026-11-22T08:00:03+00:00",
            "--topic",
            "Orders",
            "--json",
        )
    )
    assert [r["storeTimestamp"] for r in in_range] == [T0 + 1000, T0 + 2000, T0 + 3000]


# ---------------------------------------------------------------- 9: consistency
def test_help_and_usage_errors_are_one_line(store):
    assert "Usage: rocketstore dump" in ok("dump", "-h")
    assert "Usage: rocketstore" in ok("-h")
    assert "--limit" in one_error_line(2, "dump", os.path.join(store, "checkpoint"), "--limit", "-1")
    assert "--nope" in one_error_line(2, "topics", store, "--nope")
    assert "Missing argument" in one_error_line(2, "topics")
    # serve takes the store as an argument like every command (a bad --listen fails before it opens it)
    err = one_error_line(2, "serve", store, "--listen", "no-port-here")  # a usage error, as the README says
    assert "listen" in err.lower() or "port" in err.lower()
    assert "once" in one_error_line(2, "serve", store, "--store", store)


# ---------------------------------------------------------------- 10: one queue, offsets, last N, formats
def test_one_queue_from_an_offset_last_n_and_formats(store):
    q0 = lines(ok("consume", store, "Orders", "--queue", "0", "--offset", "2", "--json"))
    assert [(r["queueId"], r["queueOffset"], r["body"]) for r in q0] == [(0, 2, "m0"), (0, 3, "m4")]
    last = lines(ok("consume", store, "Orders", "--last", "1", "--json"))
    assert sorted((r["queueId"], r["body"]) for r in last) == [(0, "m4"), (1, "m5"), (2, "m2"), (3, "m3")]
    code, _, err, raw = run("consume", store, "Orders", "--queue", "0", "--body-only")
    assert code == 0, err
    assert raw == b"[/docs]\n" + BINARY + b"\nm0\nm4\n"  # bodies as they are, for pipes
    out = ok("consume", store, "Orders", "--queue", "1", "--format", "%t/%p@%o %g %k: %s\\n")
    assert out == "Orders/1@0 TagB k2: m1\nOrders/1@1 TagB k2: m5\n"


# ---------------------------------------------------------------- 11: consumer groups
def test_groups_progress_reset_and_delete(store):
    ok("consume", store, "Orders", "--group", "g1", "--queue", "0", "--max", "3")  # q0: 3 of 4 consumed
    groups = json.loads(ok("groups", store, "--json"))["rows"]
    assert groups == [{"group": "g1", "topics": "Orders", "queues": 4, "lag": 1 + 2 + 1 + 1}]
    prog = json.loads(ok("group", "progress", store, "g1", "--json"))
    q0 = prog["rows"][0]
    assert (q0["brokerOffset"], q0["consumerOffset"], q0["lag"], q0["lastTimestamp"]) == (4, 3, 1, T0 + 2000)
    assert prog["header"]["lag"] == 5
    # to a time: the first message stored at or after it, per queue (RocketMQ's getOffsetInQueueByTime)
    reset = json.loads(ok("group", "reset-offset", store, "g1", "-t", "Orders", "--to-time", iso(T0 + 4500), "--json"))[
        "rows"
    ]
    assert [(r["queueId"], r["after"]) for r in reset] == [(0, 3), (1, 1), (2, 1), (3, 0)]
    assert [
        (r["queueId"], r["after"])
        for r in json.loads(
            ok("group", "reset-offset", store, "g1", "-t", "Orders", "--to-offset", "1", "--queue", "0", "--json")
        )["rows"]
    ] == [(0, 1)]
    ok("group", "delete", store, "g1")
    assert json.loads(ok("groups", store, "--json"))["rows"] == []
    assert "no consumer group g1" in one_error_line(1, "group", "progress", store, "g1")


# ---------------------------------------------------------------- 12: topics
def test_topic_create_update_delete_write_topics_json(store):
    ok("topic", "create", store, "Fresh")
    ok("topic", "create", store, "Batches", "--queues", "2", "--batch-cq", "--message-type", "fifo")
    table = json.load(open(os.path.join(store, "config", "topics.json")))["topicConfigTable"]
    assert (table["Fresh"]["readQueueNums"], table["Fresh"]["writeQueueNums"]) == (8, 8)  # defaultTopicQueueNums
    assert table["Batches"]["attributes"] == {"queue.type": "BatchCQ", "message.type": "FIFO"}
    assert "already exists" in one_error_line(1, "topic", "create", store, "Fresh")
    ok("topic", "update", store, "Fresh", "--queues", "3")
    table = json.load(open(os.path.join(store, "config", "topics.json")))["topicConfigTable"]
    assert table["Fresh"]["writeQueueNums"] == 3
    # produce into a new topic: created with the same default
    ok("produce", store, "ByProduce", "x")
    table = json.load(open(os.path.join(store, "config", "topics.json")))["topicConfigTable"]
    assert table["ByProduce"]["writeQueueNums"] == 8
    # delete: its entry, its queues and the groups' offsets go; the CommitLog keeps the records
    ok("consume", store, "Orders", "--group", "g")
    commitlog = open(os.path.join(store, "commitlog", "0" * 20), "rb").read()
    ok("topic", "delete", store, "Orders", "--yes")
    table = json.load(open(os.path.join(store, "config", "topics.json")))["topicConfigTable"]
    assert "Orders" not in table and not os.path.exists(os.path.join(store, "consumequeue", "Orders"))
    assert open(os.path.join(store, "commitlog", "0" * 20), "rb").read() == commitlog
    assert "Orders" not in {r["topic"] for r in json.loads(ok("topics", store, "--json"))["rows"]}
    assert "Orders@g" not in open(os.path.join(store, "config", "consumerOffset.json")).read()
    assert "no topic Orders" in one_error_line(1, "topic", "delete", store, "Orders", "--yes")


# ---------------------------------------------------------------- 13: query a time range without a key
def test_query_by_time_range_alone_across_topics(store):
    rows = lines(ok("query", store, "--begin", str(T0 + 6000), "--json"))
    assert [(r["topic"], r["storeTimestamp"]) for r in rows] == [
        ("Orders", T0 + 6000),
        ("Orders", T0 + 7000),
        ("Other", T0 + 8000),
    ]
    assert len(lines(ok("query", store, "--begin", str(T0), "--max", "2", "--json"))) == 2
