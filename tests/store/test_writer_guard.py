"""One writer per store, whatever path reaches it (issue #17, point 14).

fcntl locks are per process: a second open of the `lock` file in the same process is granted, and closing
it drops the lock the first writer holds. The store therefore keeps its own registry of the stores this
process writes; it must know a store by its directory (device and inode), not by a path, since a bind
mount gives the same directory a second path that realpath cannot see through."""

import os
import subprocess
import sys

import pytest

from rocketstore import Message, MessageStore
from rocketstore.errors import StoreLockedError
from rocketstore.maintenance.rebuild import RebuildRun

OTHER_PROCESS = """
import sys
from rocketstore import MessageStore
from rocketstore.errors import StoreLockedError
try:
    MessageStore.open(sys.argv[1]).close()
except StoreLockedError:
    sys.exit(3)
"""


@pytest.fixture
def bind_mounted(tmp_path):
    """(dir, second path of the same dir through `mount --bind`); unmounted afterwards."""
    first, second = tmp_path / "store", tmp_path / "mnt"
    first.mkdir()
    second.mkdir()
    subprocess.run(["mount", "--bind", str(first), str(second)], check=True)
    try:
        yield str(first), str(second)
    finally:
        # a store left open through it (a failing test) keeps the mount busy: detach it lazily then
        if subprocess.run(["umount", str(second)]).returncode != 0:
            subprocess.run(["umount", "--lazy", str(second)], check=True)


def another_process_can_open(path: str) -> bool:
    p = subprocess.run([sys.executable, "-c", OTHER_PROCESS, path], capture_output=True, text=True, timeout=60)
    assert p.returncode in (0, 3), p.stderr
    return p.returncode == 0


@pytest.mark.parametrize("order", ["first-then-second", "second-then-first"])
def test_a_bind_mount_of_an_open_store_is_refused_and_the_lock_stays(bind_mounted, order):
    a, b = bind_mounted if order == "first-then-second" else bind_mounted[::-1]
    assert os.path.realpath(a) != os.path.realpath(b)  # the paths do not tell they are one store
    with MessageStore.open(a) as s:
        assert s.put(Message("T", b"one"), 0).ok
        with pytest.raises(StoreLockedError, match="already open for writing in this process"):
            MessageStore.open(b)
        with pytest.raises(StoreLockedError, match="already open for writing in this process"):
            RebuildRun(b).__enter__()
        # the refused opens released nothing: another process is still kept out, by either path
        assert not another_process_can_open(a)
        assert not another_process_can_open(b)
        assert s.put(Message("T", b"two"), 0).ok
    # closed: the store can be written again, through either path
    assert another_process_can_open(b)
    with MessageStore.open(b) as s:
        assert [m.body for m in s.get("g", "T", 0, 0).messages] == [b"one", b"two"]


def test_a_read_only_open_through_the_other_path_leaves_the_lock(bind_mounted):
    a, b = bind_mounted
    with MessageStore.open(a) as s:
        s.put(Message("T", b"x"), 0)
        s.flush()
        with MessageStore.open(b, read_only=True) as r:
            assert r.max_offset("T", 0) == 1
        assert not another_process_can_open(a)


def test_the_same_path_is_still_refused_and_can_reopen_after_close(tmp_path):
    root = str(tmp_path / "s")
    s = MessageStore.open(root)
    with pytest.raises(StoreLockedError, match="already open for writing in this process"):
        MessageStore.open(root)
    assert not another_process_can_open(root)
    s.close()
    MessageStore.open(root).close()
