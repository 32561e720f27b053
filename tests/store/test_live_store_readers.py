"""Read-only tools on a store another process is writing (issue #25, point 10): every read-only command answers,
none fails because the files changed under it. The writer is a real second process putting as fast as it can;
the readers are the installed command and read-only opens in this process."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.store.lock import written_by_another

TOPIC = "Live"
# small CommitLog segments (1 MiB) so that segments are created and filled while the readers look
CFG = dict(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=3000 * 20)

WRITER = textwrap.dedent(
    f"""
    import select, sys, time
    from rocketstore import Message, MessageStore, StoreConfig
    with MessageStore.open(sys.argv[1], StoreConfig(**{CFG!r})) as s:
        s.create_topic({TOPIC!r}, queues=4)
        n, deadline = 0, time.monotonic() + 600
        while time.monotonic() < deadline:  # until the test closes our stdin (or 10 minutes at most)
            r = s.put(Message({TOPIC!r}, b"x" * (50 + n % 300), tags="T%d" % (n % 3), keys=["k%d" % n]))
            assert r.ok, r
            n += 1
            if n == 2000:
                print("ready", flush=True)
            if n % 200 == 0:
                if select.select([sys.stdin], [], [], 0)[0]:
                    break
                # a steady writer, not a disk filler: slower past 20,000 messages, so that a walk of the whole
                # store (verify, on the pure engine too) does not chase a store growing as fast as it reads
                time.sleep(0.01 if n < 20000 else 0.1)
    """
)


@pytest.fixture
def live_store(tmp_path):
    root = str(tmp_path / "store")
    w = subprocess.Popen([sys.executable, "-c", WRITER, root], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert w.stdout.readline().strip() == "ready"
        yield root
        assert w.poll() is None, "the writer stopped while the readers ran"
        w.stdin.close()
        assert w.wait(timeout=60) == 0  # a clean close after all that
    finally:
        w.kill()
        w.wait()


def cli(*args):
    p = subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},
    )
    return p.returncode, p.stdout, p.stderr


def test_read_only_commands_answer_on_a_live_store(live_store):
    commands = (
        ("inspect", live_store),
        ("topics", live_store),
        ("groups", live_store),
        ("queues", live_store, TOPIC),
        ("query", live_store, "--key", "k5", "--topic", TOPIC),
        ("consume", live_store, TOPIC, "--max", "40"),
    )
    for _ in range(2):
        for args in commands:
            code, out, err = cli(*args)
            assert code == 0 and "Traceback" not in err, (args, err)


def test_read_only_opens_of_a_live_store(live_store):
    """Many read-only opens in a row, each reading the queues' ends and a batch of messages."""
    for _ in range(40):
        with MessageStore.open(live_store, StoreConfig(**CFG), read_only=True) as s:
            for q in range(4):
                end = s.max_offset(TOPIC, q)
                got = s.get("g", TOPIC, q, offset=0, max_count=8)
                assert end > 0 and len(got.messages) == 8
                assert [m.queue_offset for m in got.messages] == list(range(8))


def test_verify_of_a_live_store_reports_no_corruption(live_store):
    """Issue #25, point 11: units and index entries the writer adds while verify walks are not corruption;
    verify says the store is live and what it skipped."""
    for _ in range(3):  # (before the fix most runs reported corruption)
        code, out, err = cli("verify", live_store, "--json")
        report = json.loads(out)
        assert code == 0 and report["problems"] == [], (code, err, report["problems"][:3], report["notes"])
        assert report["live"] is True and "open for writing by another process" in report["notes"][0]


def test_a_closed_store_is_not_live(tmp_path):
    root = str(tmp_path / "store")
    with MessageStore.open(root, StoreConfig(**CFG)) as s:
        assert s.put(Message(TOPIC, b"x"), queue_id=0).ok
        assert written_by_another(root)  # this process writes it
    assert not written_by_another(root)
    code, out, err = cli("verify", root, "--json")
    assert code == 0 and json.loads(out)["live"] is False
