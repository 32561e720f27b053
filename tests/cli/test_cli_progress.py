"""Issue #16, point 7: `rebuild` and `recover` show their progress in bytes of CommitLog data on a terminal,
moving within a single segment (segments are preallocated: their sizes say nothing about the data), and
name their later phases. Each command runs as a real process with stderr on a pseudo-terminal."""

import os
import pty
import re
import subprocess
import sys
import threading

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.formats import checkpoint as CP

SEGMENT = 64 << 20  # one segment, preallocated to 64 MiB, holding about 12.6 MiB of records
ENV = {**os.environ, "TERM": "xterm", "COLUMNS": "140"}
AMOUNT = re.compile(rb"([\d.]+ (?:B|KiB|MiB)) of ([\d.]+ (?:B|KiB|MiB)) (\d+)%")


def mib(n: int) -> str:
    """A size as the bar is expected to show it (one decimal in MiB), computed here independently."""
    return f"{n / (1 << 20):.1f} MiB"


@pytest.fixture
def store(tmp_path):
    root = str(tmp_path / "store")
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=SEGMENT)) as s:
        for i in range(12_000):
            assert s.put(Message("Orders", bytes([97 + i % 26]) * 1000, properties={"KEYS": f"k{i}"}), i % 4).ok
        end = s.max_physical_offset
    assert sorted(os.listdir(os.path.join(root, "commitlog"))) == ["00000000000000000000"]
    assert os.path.getsize(os.path.join(root, "commitlog", "00000000000000000000")) == SEGMENT
    return root, end


def on_a_terminal(*args):
    """Run `rocketstore ARGS` with stderr on a pty (read as it comes, so the child never blocks on it);
    returns (exit status, stdout, everything written to the terminal)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "rocketstore.cli", *args], stdout=subprocess.PIPE, stderr=slave, env=ENV
    )
    os.close(slave)
    seen = []

    def read():
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                return
            if not chunk:
                return
            seen.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    out = p.communicate(timeout=120)[0].decode()
    reader.join(timeout=30)
    os.close(master)
    return p.returncode, out, b"".join(seen)


def byte_progress(seen: bytes) -> list[tuple[str, str, int]]:
    return [(d.decode(), t.decode(), int(pct)) for d, t, pct in AMOUNT.findall(seen)]


def assert_moved_over_the_data(seen: bytes, end: int) -> None:
    shown = byte_progress(seen)
    assert shown, seen[-600:]
    # the total is the data (about 12.6 MiB), not the preallocated segment (64.0 MiB)
    assert {total for _, total, _ in shown} == {mib(end)}, shown
    # and the bar moved before the end: several byte counts below 100 %
    below = {done for done, _, pct in shown if pct < 100}
    assert len(below) >= 2, shown
    assert shown[-1] == (mib(end), mib(end), 100)


def test_local_rebuild_shows_bytes_of_data_moving_and_its_phases(store):
    root, end = store
    code, out, seen = on_a_terminal("rebuild", root, "--yes")
    assert code == 0 and "rebuilt" in out, (out, seen[-600:])
    assert_moved_over_the_data(seen, end)
    text = seen.decode("utf-8", "replace")
    phases = [
        "rebuilding queues and index from the CommitLog",
        "flushing the new queue and index files",
        "swapping the new files in",
    ]
    assert all(p in text for p in phases), text[-600:]
    assert [text.index(p) for p in phases] == sorted(text.index(p) for p in phases)
    with MessageStore.open(root, read_only=True) as s:
        assert sum(s.max_offset("Orders", q) for q in range(4)) == 12_000


def test_recover_after_a_crash_shows_bytes_of_data_moving(store):
    root, end = store
    with open(os.path.join(root, "abort"), "w") as fh:  # a killed broker's leftovers
        fh.write("1")
    with open(os.path.join(root, "checkpoint"), "wb") as fh:
        fh.write(bytes(CP.FILE_SIZE))
    code, out, seen = on_a_terminal("recover", root)
    assert code == 0 and "crash" in out, (out, seen[-600:])
    assert_moved_over_the_data(seen, end)
    assert b"recovering the CommitLog" in seen


def test_not_on_a_terminal_nothing_is_drawn(store):
    root, _ = store
    p = subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", "rebuild", root, "--yes", "--json"],
        capture_output=True,
        timeout=120,
        env=ENV,
    )
    assert p.returncode == 0 and p.stderr == b"", p.stderr[-600:]
