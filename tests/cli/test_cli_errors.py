"""Issue #24, section 2: user-facing errors. Each case runs the real command as a process and checks that an
error is one line on stderr (`rocketstore: error: ...`), with exit status 1 (or 2 for a usage error), and
no traceback; expectations come from RocketMQ's limits and hand-computed values."""

import datetime
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
