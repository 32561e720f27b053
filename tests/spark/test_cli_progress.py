"""Issue #16, point 7: `rebuild --engine spark` says what it is doing from the start (Spark takes seconds to
start, and its own progress is hidden by rocketstore's quiet log settings), one line per phase when stderr
is not a terminal."""

import os
import subprocess
import sys

from rocketstore import Message, MessageStore, StoreConfig


def test_spark_rebuild_says_each_phase_and_starts_by_saying_it_starts_spark(tmp_path):
    root = str(tmp_path / "store")
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=128 * 1024)) as s:
        for i in range(400):  # about 3 segments; two index entries a record (its two KEYS)
            assert s.put(Message("Orders", b"x" * 700, properties={"KEYS": f"a{i} b{i}"}), i % 4).ok
    segments = len(os.listdir(os.path.join(root, "commitlog")))
    assert segments > 1
    p = subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", "rebuild", root, "--engine", "spark", "--yes"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    # said before anything else, Spark's own JVM start-up warnings included
    assert lines[0] == "starting Spark (local[*])...", lines
    ours = [line for line in lines if not line.startswith("WARNING")]
    assert ours == [
        "starting Spark (local[*])...",
        "planning",
        f"decoding {segments} CommitLog segments",
        "writing queues (400 records)",
        "writing 1 index file (800 entries)",
        "swapping in (checking the CommitLog's end)",
        "stopping Spark",
    ], lines
    assert "rebuilt" in p.stdout and "400" in p.stdout
