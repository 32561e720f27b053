"""`consume --follow` with a group commits its offsets when stopped with SIGTERM as with Ctrl-C (systemd and
`docker stop` send SIGTERM), and every few seconds while it follows, so that a follower killed outright
(SIGKILL) has committed what it printed a few seconds before (issue #25, point 5)."""

import json
import signal
import subprocess
import sys
import time

from rocketstore import Message, MessageStore, StoreConfig

CFG = StoreConfig(mapped_file_size_commit_log=64 * 1024, max_hash_slot_num=64, max_index_num=400)


def cli(conf, *args):
    p = subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", *args, "-c", conf], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


def committed(root, conf, group):
    """The group's committed offset per queue, as `queues --json` reads config/consumerOffset.json."""
    rows = json.loads(cli(conf, "queues", root, "F", "--json"))["rows"]
    return {r["queueId"]: r["groups"].get(group, {}).get("committed") for r in rows}


def follower(root, conf, group):
    return subprocess.Popen(
        [sys.executable, "-m", "rocketstore.cli", "consume", root, "F", "-g", group, "--follow", "--body-only"]
        + ["-c", conf],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def make(tmp_path):
    """A store of 5 messages over 2 queues, and a broker.conf with its index sizes."""
    conf = tmp_path / "broker.conf"
    conf.write_text("maxHashSlotNum=64\nmaxIndexNum=400\n")
    root = str(tmp_path / "store")
    with MessageStore.open(root, CFG) as s:
        s.create_topic("F", queues=2)
        for i in range(5):
            assert s.put(Message("F", b"m%d" % i), queue_id=i % 2).ok
    return root, str(conf)


def test_sigterm_commits_what_was_printed(tmp_path):
    root, conf = make(tmp_path)
    p = follower(root, conf, "g1")
    try:
        assert sorted(p.stdout.readline().strip() for _ in range(5)) == ["m0", "m1", "m2", "m3", "m4"]
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    assert p.returncode == 0, p.stderr.read()
    assert committed(root, conf, "g1") == {0: 3, 1: 2}


def test_a_follower_commits_while_it_follows(tmp_path):
    root, conf = make(tmp_path)
    p = follower(root, conf, "g2")
    try:
        assert sorted(p.stdout.readline().strip() for _ in range(5)) == ["m0", "m1", "m2", "m3", "m4"]
        deadline = time.monotonic() + 60
        while committed(root, conf, "g2") != {0: 3, 1: 2} and time.monotonic() < deadline:
            time.sleep(1)
        assert p.poll() is None  # still following
    finally:
        p.kill()  # no chance to commit at the end
        p.wait(timeout=60)
    assert committed(root, conf, "g2") == {0: 3, 1: 2}
