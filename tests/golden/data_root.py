"""Where the golden stores are: unpacked once per test run from tests/golden/data/*.tar.xz.

The archives are RocketMQ's own bytes (see tests/golden/data/README.md), kept in the repository so that a bare
clone tests itself. ROCKETSTORE_GOLDEN names an unpacked copy instead (a directory of store-*/ folders).

The archives' file dates are the day they were packed, and RocketMQ's cleanup reads a CommitLog file's age from
its mtime (fileReservedTime, 72 h): unpacked files are dated now, so that no answer depends on the calendar.
A test that needs an old file ages it itself (store-expired's manifest names the files its harness aged).
"""

import atexit
import os
import shutil
import tarfile
import tempfile
import threading

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
_lock = threading.Lock()
_root: str | None = None


def names() -> list[str]:
    """The golden stores the repository ships."""
    return sorted(f[: -len(".tar.xz")] for f in os.listdir(DATA) if f.endswith(".tar.xz"))


def root() -> str:
    """The directory holding store-*/ (manifest.json and store/); unpacked on first use, removed at exit."""
    global _root
    if os.environ.get("ROCKETSTORE_GOLDEN"):
        return os.environ["ROCKETSTORE_GOLDEN"]
    with _lock:
        if _root is None:
            target = tempfile.mkdtemp(prefix="rocketstore-golden-")
            atexit.register(shutil.rmtree, target, True)
            for name in names():
                with tarfile.open(os.path.join(DATA, f"{name}.tar.xz"), "r:xz") as tar:
                    tar.extractall(target, filter="data")  # the "data" filter keeps every member inside target
            _date_now(target)
            _root = target
        return _root


def _date_now(tree: str) -> None:
    """Every file of an unpacked tree dated now (its directories are left as tar wrote them)."""
    for dirpath, _, files in os.walk(tree):
        for f in files:
            os.utime(os.path.join(dirpath, f))
