"""The pop-state journal always ends at a line boundary: a torn last line is cut off when it is loaded, and an
append that cannot write all of its bytes (a full disk, on a real small tmpfs) fails and cuts its fragment
off, so no later line is glued to a fragment and lost."""

import os
import subprocess

import pytest

from rocketstore.broker import journal as J


def _value(i):
    return {"0": {"next": i, "inflight": {}}}


def test_a_torn_tail_is_cut_off_on_load_so_later_lines_survive_a_second_crash(tmp_path):
    path = str(tmp_path / "config" / "popState.json")
    first = J.JournaledState(path)
    first.append({"T@g": _value(1)}, {})
    # crash mid-append: half a line at the end of the real file
    with open(path + ".journal", "ab") as fh:
        fh.write(b'{"k":"T@g","v":{"0":{"next":99')
    # restart: the torn line was never answered, so it is not applied...
    second = J.JournaledState(path)
    assert second.load() == {"T@g": _value(1)}
    # ...and it is gone from the file: the journal ends with the last whole line
    assert open(path + ".journal", "rb").read().endswith(b"}}}\n")
    second.append({"T@g": _value(2)}, {})
    second.append({"U@h": _value(7)}, {})
    # a second crash (no close): both answered changes are there
    assert J.JournaledState(path).load() == {"T@g": _value(2), "U@h": _value(7)}


def test_a_line_glued_to_an_old_fragment_keeps_its_record(tmp_path):
    """A journal written before the fix: a fragment with a whole answered record appended to it, then more."""
    path = str(tmp_path / "popState.json")
    with open(path + ".journal", "wb") as fh:
        fh.write(
            b'{"k":"T@g","v":{"0":{"next":1,"inflight":{}}}}\n'
            b'{"k":"T@g","v":{"0":{"ne'
            b'{"k":"T@g","v":{"0":{"next":3,"inflight":{}}}}\n'
            b'{"k":"U@h","v":{"0":{"next":4,"inflight":{}}}}\n'
        )
    assert J.JournaledState(path).load() == {"T@g": _value(3), "U@h": _value(4)}


@pytest.fixture
def small_tmpfs(tmp_path):
    d = tmp_path / "small"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)], check=True)
    yield d
    subprocess.run(["umount", "-l", str(d)], check=True)


def test_a_full_disk_fails_the_append_and_leaves_no_fragment(small_tmpfs):
    path = str(small_tmpfs / "popState.json")
    state = J.JournaledState(path)
    table = {"T@g": _value(1)}
    state.append(dict(table), table)
    before = open(path + ".journal", "rb").read()
    # fill the file system but for a few hundred bytes
    fd = os.open(small_tmpfs / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"x" * 512) > 0:
            pass
    except OSError:
        pass
    os.close(fd)
    # ~20 KB: the journal's page takes the first ~4 KB (a short write), then ENOSPC
    big = {"0": {"next": 5, "inflight": {str(i): [1, 2, 1, i] for i in range(1000)}}}
    try:
        with pytest.raises(J.JournalWriteError, match="popState.json.journal"):
            state.append({"T@g": big}, {"T@g": big})
        assert open(path + ".journal", "rb").read() == before
        # space again: the next change is appended on a line of its own
        os.remove(small_tmpfs / "filler")
        state.append({"U@h": _value(2)}, {})
        assert J.JournaledState(path).load() == {"T@g": _value(1), "U@h": _value(2)}
    finally:
        state.close({})
