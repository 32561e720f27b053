"""Queue files whose length is not a whole number of units (issue #17, point 11).

A ConsumeQueue file holds 20-byte units and a batch ConsumeQueue file 46-byte units; RocketMQ's
MappedFileQueue.doLoad refuses any file whose length is not the mapped file size. A store with such a file
(here: a real store's file truncated by a few bytes) must not open, read-only included, with an error that
names the file, its length and the unit; the command line says so in one line and exits 1, and `verify`
never calls the store sound."""

import json
import os
import subprocess
import sys

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import StoreOpenError

CQ_FILE = 20 * 100  # 100 units of 20 bytes
BCQ_FILE = 46 * 100  # 100 units of 46 bytes
SIZES = dict(
    mapped_file_size_commit_log=1 << 20,
    mapped_file_size_consume_queue=CQ_FILE,
    mapped_file_size_batch_consume_queue=BCQ_FILE,
)
CASES = {  # kind -> (queue file under the store, its unit, its full size)
    "cq": (os.path.join("consumequeue", "A", "0", "0" * 20), 20, CQ_FILE),
    "bcq": (os.path.join("batchconsumequeue", "B", "0", "0" * 20), 46, BCQ_FILE),
}


def make_store(root, kind: str, cut: int) -> str:
    """A store with a plain topic A and a batch-ConsumeQueue topic B, then the chosen queue file cut short."""
    with MessageStore.open(str(root), config=StoreConfig(**SIZES)) as s:
        s.create_topic("B", queues=1, attributes={"queue.type": "BatchCQ"})
        assert s.put(Message("A", b"x"), queue_id=0).status.name == "PUT_OK"
        assert s.put_batch([Message("B", b"y"), Message("B", b"z")], queue_id=0).status.name == "PUT_OK"
    rel, _unit, full = CASES[kind]
    path = os.path.join(str(root), rel)
    assert os.path.getsize(path) == full
    os.truncate(path, full - cut)
    return path


def cli(*args):
    p = subprocess.run([sys.executable, "-m", "rocketstore.cli", *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("kind", ["cq", "bcq"])
@pytest.mark.parametrize("cut", [1, 3, 7])
def test_open_names_the_file_its_length_and_the_unit(tmp_path, kind, cut, read_only):
    path = make_store(tmp_path / "s", kind, cut)
    _rel, unit, full = CASES[kind]
    with pytest.raises(StoreOpenError) as e:  # file sizes inferred from the files on disk
        MessageStore.open(str(tmp_path / "s"), read_only=read_only)
    text = str(e.value)
    assert path in text and f"{full - cut} bytes" in text and f"{unit}-byte" in text
    with pytest.raises(StoreOpenError) as e:  # file sizes given: RocketMQ's doLoad length check
        MessageStore.open(str(tmp_path / "s"), config=StoreConfig(**SIZES), read_only=read_only)
    text = str(e.value)
    assert path in text and f"{full - cut} bytes" in text and f"units of {unit} bytes" in text


@pytest.mark.parametrize("kind", ["cq", "bcq"])
def test_a_whole_unit_missing_in_a_later_queue_is_refused_too(tmp_path, kind):
    """The size inferred from the first file is right; a queue whose file lost a whole unit must not open."""
    root = tmp_path / "s"
    with MessageStore.open(str(root), config=StoreConfig(**SIZES)) as s:
        s.create_topic("B", queues=2, attributes={"queue.type": "BatchCQ"})
        for q in (0, 1):
            s.put(Message("A", b"x"), queue_id=q)
            s.put_batch([Message("B", b"y")], queue_id=q)
    rel, unit, full = CASES[kind]
    path = os.path.join(str(root), rel.replace(os.sep + "0" + os.sep, os.sep + "1" + os.sep))
    os.truncate(path, full - unit)
    with pytest.raises(StoreOpenError, match=f"{path}: file is {full - unit} bytes, the store expects {full}"):
        MessageStore.open(str(root), read_only=True)


@pytest.mark.parametrize("kind", ["cq", "bcq"])
@pytest.mark.parametrize("command", ["verify", "inspect", "recover"])
def test_cli_says_it_in_one_line(tmp_path, kind, command):
    path = make_store(tmp_path / "s", kind, 3)
    before = open(path, "rb").read()
    code, out, err = cli(command, str(tmp_path / "s"))
    assert code == 1
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rocketstore: error:") and path in lines[0], err
    assert "sound" not in out
    assert open(path, "rb").read() == before  # nothing was repaired behind the user's back


@pytest.mark.parametrize("kind", ["cq", "bcq"])
def test_verify_with_the_sizes_given_reports_the_file(tmp_path, kind):
    """With the sizes from broker.conf, verify checks the files and reports the short one as a problem."""
    make_store(tmp_path / "s", kind, 3)
    rel, unit, full = CASES[kind]
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"mappedFileSizeCommitLog={1 << 20}\nmappedFileSizeConsumeQueue={CQ_FILE}\n"
        f"mapperFileSizeBatchConsumeQueue={BCQ_FILE}\n",
        encoding="utf-8",
    )
    code, out, err = cli("verify", str(tmp_path / "s"), "-c", str(conf), "--json")
    assert code == 1 and "Traceback" not in err
    report = json.loads(out)
    assert not report["ok"]
    mine = {p["problem"]: p["offset"] for p in report["problems"] if p["file"] == rel}
    assert mine.get("file ends inside a unit") == (full - 3) // unit * unit
