"""Issue #24, section 2: user-facing errors. Each case runs the real command as a process and checks that an
error is one line on stderr (`rocketstore: error: ...`), with exit status 1 (or 2 for a usage error), and
no traceback; expectations come from RocketMQ's limits and hand-computed values."""

import datetime
import json
import os
import subprocess
import sys

import pytest

from rocketstore import Message, MessageStore, StoreConfig

T0 = int(datetime.datetime(2026, 11, 22, 8, 0, tzinfo=datetime.timezone.utc).timestamp() * 1000)
ENV = {**os.environ, "COLUMNS": "80"}
TOO_BIG = "99999999999999999999"  # 20 digits: beyond Java's long (9223372036854775807, 19 digits)


def run(*args, stdin=None, env=None):
    p = subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", *args], capture_output=True, input=stdin, timeout=120, env=env or ENV
    )
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def one_error_line(code_expected, *args, **kw):
    code, out, err = run(*args, **kw)
    assert "Traceback" not in err, err
    assert code == code_expected, (args, code, out, err)
    assert err.startswith("rocketstore: error:") and err.count("\n") == 1, (args, err)
    return err


def listing(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, files in os.walk(path) for f in files)


@pytest.fixture
def store(tmp_path):
    """Orders (2 queues): three messages stored at T0, T0 + 1 s, T0 + 2 s (a fixed clock)."""
    root = str(tmp_path / "store")
    now = [T0]
    with MessageStore.open(root, StoreConfig(clock=lambda: now[0], mapped_file_size_commit_log=1 << 20)) as s:
        s.create_topic("Orders", 2)
        for k in range(3):
            now[0] = T0 + 1000 * k
            assert s.put(Message("Orders", f"m{k}".encode(), tags="A", keys=[f"k{k}"]), k % 2).ok
    return root


@pytest.fixture
def plain_dir(tmp_path):
    """An ordinary directory: notes, nothing of a store."""
    d = tmp_path / "home"
    d.mkdir()
    (d / "notes.txt").write_text("not a store\n")
    (d / "sub").mkdir()
    return str(d)


# ---------------------------------------------------------------- every command refuses a non-store directory
NON_STORE_COMMANDS = [
    ["recover", "{d}"],
    ["clean", "{d}"],
    ["rebuild", "{d}", "--yes"],
    ["rebuild", "{d}", "--yes", "--engine", "spark"],
    ["rebuild", "{d}", "--dry-run"],
    ["clean", "{d}", "--dry-run"],
    ["produce", "{d}", "Orders", "x", "--create", "--small"],
    ["produce", "{d}", "Orders", "x"],
    ["produce", "{d}", "Orders", "x", "--create"],
    ["consume", "{d}", "Orders"],
    ["consume", "{d}", "Orders", "-g", "g1"],
    ["query", "{d}", "--key", "k"],
    ["topics", "{d}"],
    ["queues", "{d}"],
    ["groups", "{d}"],
    ["group", "progress", "{d}", "g1"],
    ["group", "reset-offset", "{d}", "g1", "-t", "Orders", "--to-earliest"],
    ["group", "delete", "{d}", "g1"],
    ["topic", "create", "{d}", "Orders"],
    ["topic", "create", "{d}", "Orders", "--create"],
    ["topic", "update", "{d}", "Orders", "--queues", "2"],
    ["topic", "delete", "{d}", "Orders", "--yes"],
    ["inspect", "{d}"],
    ["verify", "{d}"],
    ["serve", "{d}", "--no-grpc", "--no-namesrv", "--remoting", "127.0.0.1:0"],
    ["archive", "{d}", "--to", "{d}-archive"],
]


@pytest.mark.parametrize("argv", NON_STORE_COMMANDS, ids=lambda a: " ".join(x for x in a if x != "{d}"))
def test_a_directory_that_is_not_a_store_is_refused_and_left_alone(plain_dir, argv):
    before = listing(plain_dir)
    err = one_error_line(1, *[a.format(d=plain_dir) for a in argv])
    assert f"{plain_dir}: not a RocketMQ store" in err
    assert listing(plain_dir) == before == ["notes.txt"]  # no checkpoint, lock, config or commitlog written


def test_recover_then_produce_on_a_plain_directory_makes_no_store(plain_dir):
    one_error_line(1, "recover", plain_dir)
    one_error_line(1, "clean", plain_dir)
    one_error_line(1, "produce", plain_dir, "Orders", "x")
    assert listing(plain_dir) == ["notes.txt"]


def test_create_still_makes_a_store_in_a_missing_or_empty_directory(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for d in (str(tmp_path / "new"), str(empty)):
        code, out, err = run("produce", d, "Orders", "x", "--create", "-c", _small_conf(tmp_path))
        assert code == 0, err
        assert os.path.isdir(os.path.join(d, "commitlog"))


def _small_conf(tmp_path):
    conf = tmp_path / "small.conf"
    conf.write_text("mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n")
    return str(conf)


# ---------------------------------------------------------------- OSError in the maintenance commands
@pytest.fixture
def read_only_store(store):
    """The store directory bind-mounted read-only onto itself (a real read-only file system: as root, a 0555
    mode would not stop a write)."""
    if os.geteuid() != 0:
        pytest.skip("a read-only mount needs root (chmod does not stop root, and a user cannot mount)")
    r = subprocess.run(["mount", "--bind", store, store], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {r.stderr.decode().strip()}")
    try:
        r = subprocess.run(["mount", "-o", "remount,bind,ro", store], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {r.stderr.decode().strip()}")
        yield store
    finally:
        subprocess.run(["umount", store], check=True)


@pytest.mark.parametrize("command", ["rebuild", "recover", "clean"])
def test_maintenance_on_a_read_only_file_system_is_one_line(read_only_store, command):
    before = listing(read_only_store)
    err = one_error_line(1, command, read_only_store, *(["--yes"] if command == "rebuild" else []))
    assert read_only_store in err
    assert "read-only file system" in err.lower()
    assert listing(read_only_store) == before


# ---------------------------------------------------------------- serve: a bad address is a usage error
@pytest.mark.parametrize(
    "option, value",
    [("--listen", "nope"), ("--listen", "127.0.0.1:70000"), ("--namesrv", "x"), ("--remoting-advertise", "0.0.0.0:1")],
)
def test_serve_bad_address_is_a_usage_error(tmp_path, option, value):
    err = one_error_line(2, "serve", str(tmp_path / "s"), option, value)
    assert option in err and "(see 'rocketstore serve -h')" in err
    assert not os.path.exists(tmp_path / "s")  # nothing made


# ---------------------------------------------------------------- archive: a destination it cannot use
@pytest.mark.parametrize(
    "to, said",
    [
        (None, "Missing option '--to'"),
        ("s3a://bucket/archive", "only local paths are supported"),
        ("{s}/archive", "the archive must not be inside the store"),
        ("{up}", "the store must not be inside the archive"),
        ("{s}/../home", "not empty and not an archive"),
        ("{s}/../home/notes.txt", "not a directory"),
    ],
)
def test_archive_to_a_destination_it_cannot_use_is_a_usage_error(store, plain_dir, to, said):
    """Refused before Spark starts, nothing written (`plain_dir`: someone's files, ../home from the store)."""
    before, theirs = listing(store), listing(plain_dir)
    args = ["archive", store] + ([] if to is None else ["--to", to.format(s=store, up=os.path.dirname(store))])
    assert said in one_error_line(2, *args)
    assert listing(store) == before and not os.path.exists(os.path.join(store, "archive"))
    assert listing(plain_dir) == theirs


def test_archive_watch_is_refused_before_spark_starts(store, tmp_path):
    """--watch's own errors, and a store or archive it cannot use, in one line before Spark starts: a missing
    store, --every without --watch or not a positive number of seconds, an archive another job is writing (a
    watcher already running: its lock held here)."""
    from rocketstore.files.archive_manifest import ArchiveManifest

    dest = str(tmp_path / "archive")
    missing = str(tmp_path / "nothing")
    assert f"{missing}: no store directory here" in one_error_line(1, "archive", missing, "--to", dest, "--watch")
    assert "--every is for --watch" in one_error_line(2, "archive", store, "--to", dest, "--every", "5")
    for bad in ("0", "-1", "nan", "inf"):
        err = one_error_line(2, "archive", store, "--to", dest, "--watch", "--every", bad)
        assert "'--every'" in err and "the seconds between rounds must be more than 0" in err, err
    with ArchiveManifest(dest):
        err = one_error_line(1, "archive", store, "--to", dest, "--watch", "--every", "5")
    assert f"{dest}: another archive job is writing this archive" in err
    assert listing(dest) == ["_rocketstore_archive/lock"]  # nothing archived


def test_serve_archive_must_be_local_and_archive_enable_needs_a_path(store, tmp_path):
    # serve --archive DEST: cleanup waits for DEST's manifest, read with file I/O, so DEST is local (usage
    # error, exit 2); broker.conf's archiveEnable=true without archivePath is refused (exit 1), before serving
    assert "only local paths are supported" in one_error_line(2, "serve", store, "--archive", "s3a://b/a")
    conf = tmp_path / "broker.conf"
    conf.write_text("archiveEnable=true\n")
    assert "archiveEnable=true needs archivePath" in one_error_line(1, "serve", store, "-c", str(conf))


# ---------------------------------------------------------------- numbers out of range: usage errors
LONG_MAX = 9223372036854775807  # Java's Long.MAX_VALUE, 2^63 - 1


@pytest.mark.parametrize(
    "argv, option",
    [
        (["consume", "{s}", "Orders", "--from", TOO_BIG], "--from"),
        (["consume", "{s}", "Orders", "--from", str(LONG_MAX + 1)], "--from"),
        (["query", "{s}", "--begin", TOO_BIG], "--begin"),
        (["query", "{s}", "--end", TOO_BIG], "--end"),
        (["query", "{s}", "--key", "k0", "--begin", TOO_BIG], "--begin"),
        (["group", "reset-offset", "{s}", "g1", "-t", "Orders", "--to-time", TOO_BIG], "--to-time"),
        (["group", "reset-offset", "{s}", "g1", "-t", "Orders", "--to-offset", TOO_BIG], "--to-offset"),
        (["consume", "{s}", "Orders", "--offset", TOO_BIG], "--offset"),
        (["consume", "{s}", "Orders", "--last", TOO_BIG], "--last"),
        (["consume", "{s}", "Orders", "--max", TOO_BIG], "--max"),
        (["query", "{s}", "--offset", TOO_BIG], "--offset"),
        (["query", "{s}", "--key", "k0", "--max", TOO_BIG], "--max"),
        (["dump", "{seg}", "--limit", "99999999999999999999999"], "--limit"),
        (["dump", "{seg}", "--skip", TOO_BIG], "--skip"),
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(x for x in v if not x.startswith("{") and x != TOO_BIG),
)
def test_numbers_beyond_a_java_long_are_usage_errors(store, argv, option):
    seg = os.path.join(store, "commitlog", "0" * 20)
    err = one_error_line(2, *[a.format(s=store, seg=seg) for a in argv])
    assert option in err


def test_the_largest_java_long_is_still_a_time_and_a_count(store):
    code, out, err = run("consume", store, "Orders", "--from", str(LONG_MAX), "--json")
    assert code == 0, err
    assert out == ""  # JSON Lines, one a message: nothing stored at or after the end of time
    seg = os.path.join(store, "commitlog", "0" * 20)
    code, out, err = run("dump", seg, "--json", "--skip", "1", "--limit", str(LONG_MAX))
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["keys"] for r in rows] == ["k1", "k2"]  # the records after the first, all of them


# ---------------------------------------------------------------- a time in seconds is warned about
def test_a_time_that_looks_like_seconds_warns_naming_both_readings(store):
    seconds = 1795812000  # 2026-11-27T20:40:00Z as seconds; as ms, 20 days after the epoch
    code, out, err = run("consume", store, "Orders", "--from", str(seconds), "--json")
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("rocketstore: warning:")]
    assert len(lines) == 1 and lines[0].startswith("rocketstore: warning: --from 1795812000"), err
    assert "1970-01-21T18:50:12.000Z" in err  # 1795812000 ms = 20 d 18 h 50 min 12 s
    assert "2026-11-27T20:40:00.000Z" in err
    assert len(out.splitlines()) == 3  # read as ms (before every message), as it always was
    for argv in (
        ["query", store, "--begin", str(seconds), "--end", str(seconds)],
        ["group", "reset-offset", store, "g1", "-t", "Orders", "--to-time", str(seconds)],
    ):
        code, out, err = run(*argv)
        assert code == 0, err
        assert err.count("rocketstore: warning:") == 2 if argv[0] == "query" else 1, err


@pytest.mark.parametrize("value", [str(T0), "2026-11-22T08:00:00Z", "0", "99999999"])
def test_ms_and_iso_times_do_not_warn(store, value):
    code, out, err = run("consume", store, "Orders", "--from", value, "--json")
    assert code == 0 and "warning" not in err, err


# ---------------------------------------------------------------- a closed stdout pipe ends quietly
@pytest.fixture
def big_store(tmp_path):
    """Far more output than a pipe buffers (64 KiB): 1500 messages of 200 bytes."""
    root = str(tmp_path / "big")
    with MessageStore.open(root, StoreConfig(clock=lambda: T0, mapped_file_size_commit_log=1 << 22)) as s:
        s.create_topic("Orders", 2)
        for i in range(1500):
            assert s.put(Message("Orders", b"b" * 200, keys=[f"k{i}"]), i % 2).ok
    return root


def head_1(*args):
    """`rocketstore ARGS | head -1`: read one line, close the pipe, let the command run on."""
    p = subprocess.Popen(
        [sys.executable, "-m", "rocketstore.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV
    )
    first = p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    return p.wait(timeout=120), first, err


@pytest.mark.parametrize(
    "argv",
    [
        ["dump", "{seg}", "--json"],
        ["dump", "{seg}"],
        ["dump", "{seg}", "--bodies"],
        ["dump", "{cq}"],
        ["consume", "{s}", "Orders", "--body-only"],
        ["consume", "{s}", "Orders"],
        ["consume", "{s}", "Orders", "--json"],
        ["query", "{s}", "--begin", "0", "--max", "1500"],
    ],
    ids=lambda a: " ".join(x for x in a if not x.startswith("{")),
)
def test_a_closed_stdout_pipe_ends_quietly(big_store, argv):
    seg = os.path.join(big_store, "commitlog", "0" * 20)
    cq = os.path.join(big_store, "consumequeue", "Orders", "0", "0" * 20)
    code, first, err = head_1(*[a.format(s=big_store, seg=seg, cq=cq) for a in argv])
    assert first  # it did print
    assert err == ""  # no "[Errno 32] Broken pipe", no traceback
    assert code in (0, 141)  # 141: as a shell reports a tool ended by SIGPIPE


# ---------------------------------------------------------------- a malformed msgId
@pytest.mark.parametrize(
    "msg_id, problem",
    [("x", "not an offset msgId (1 character,"), ("7F00000100002A9F000000000000000G", "not hexadecimal: 'G'")],
)
def test_query_by_a_malformed_msg_id_says_what_is_wrong(store, msg_id, problem):
    err = one_error_line(1, "query", store, "--msg-id", msg_id)
    assert f"id {msg_id}: no such message" in err and problem in err


# ---------------------------------------------------------------- a body over maxMessageSize
def test_produce_of_a_body_over_max_message_size_names_the_limit(store, tmp_path):
    body = tmp_path / "five.bin"
    body.write_bytes(b"\0" * (5 * 1024 * 1024))  # 5 MiB, over RocketMQ's maxMessageSize of 1024 * 1024 * 4
    err = one_error_line(1, "produce", store, "Orders", "--file", str(body), "--queue", "0")
    assert "MESSAGE_ILLEGAL" in err
    assert "5242880 bytes" in err and "maxMessageSize (4194304 bytes)" in err
    assert "-c broker.conf with maxMessageSize=5242880" in err
    conf = tmp_path / "big.conf"
    conf.write_text("maxMessageSize=6291456\n")  # 6 MiB: the body fits (the 1 MiB segments do not: a new store)
    code, out, err = run("produce", str(tmp_path / "new"), "Orders", "--file", str(body), "--create", "-c", str(conf))
    assert code == 0, err


# ---------------------------------------------------------------- reserved property names
@pytest.mark.parametrize("name", ["UNIQ_KEY", "KEYS", "TAGS", "DELAY", "TRAN_MSG", "__RMQ.TRANSIENT.x"])
def test_produce_refuses_a_system_property(store, name):
    before = listing(store), os.path.getsize(os.path.join(store, "checkpoint"))
    err = one_error_line(2, "produce", store, "Orders", "x", "--property", f"{name}=forged")
    assert "--property" in err and repr(name) in err
    code, out, _ = run("consume", store, "Orders", "--json")
    assert len(out.splitlines()) == 3  # nothing was put (JSON Lines, one a message)
    assert before[0] == listing(store)


def test_produce_takes_user_properties_and_sets_its_own_unique_key(store):
    code, out, err = run("produce", store, "Orders", "x", "--property", "color=red", "--queue", "0", "--json")
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    assert len(row["uniqKey"]) == 32 and row["uniqKey"] != "forged"


# ---------------------------------------------------------------- broker.conf typos warn
def test_a_typo_in_broker_conf_warns_once_per_key_naming_the_closest(store, tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\nnamesrvAddr=127.0.0.1:9876\n"
        "listenPort=10911\nmaxMesageSize=8388608\nfileReserveTime=48\n"
    )
    code, out, err = run("topics", store, "-c", str(conf))
    assert code == 0, err
    assert err.splitlines() == [
        f"rocketstore: warning: {conf}: unknown key maxMesageSize (ignored); did you mean maxMessageSize?",
        f"rocketstore: warning: {conf}: unknown key fileReserveTime (ignored); did you mean fileReservedTime?",
    ]
    code, out, err = run("verify", store, "-c", str(conf))
    assert code == 0 and err.count("rocketstore: warning:") == 2, err


def test_a_broker_conf_of_known_keys_is_quiet(store, tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-a\nnamesrvAddr=127.0.0.1:9876\nlistenPort=10911\nmaxMessageSize=8388608\n")
    code, out, err = run("topics", store, "-c", str(conf))
    assert code == 0 and err == "", err
