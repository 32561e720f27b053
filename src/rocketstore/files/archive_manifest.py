"""The archive's manifest: which CommitLog segments an archive holds, and the staging that makes each one
go in exactly once (rocketstore.spark.archive_job writes through it; cleanup will ask it: it is here, in
the files layer, with no Spark in it, so that the store's own services can).

Under DEST/_rocketstore_archive/ (Spark's readers skip names that start with "_"):

    segments/<segment>.json            one entry per archived segment: the commit, written last
    staging/stagedSegment=<segment>/   a batch's Parquet files as Spark wrote them, then moved into place
    staging/stagedSegment=<segment>/_moves.json   where they go, written before the first move
    lock                               one archive job at a time (flock)

A segment is in the archive when, and only when, its entry exists: `is_archived(name)` is one stat. Its
files are moved into DEST/topic=.../date=.../ before the entry is written, so a job killed at any instant
leaves, for each segment, either its entry and all its files, or no entry and files that `recover()` (run
first by every job) removes: those its _moves.json names, and the staging directory. Every write of the
manifest's own files is a temporary file, fsync, rename, fsync of the directory.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
from urllib.parse import unquote, urlparse

from ..errors import ArchiveError

MANIFEST_DIR = "_rocketstore_archive"
STAGED_COLUMN = "stagedSegment"  # the staging partition column: staging/stagedSegment=<segment>/
MOVES = "_moves.json"
VERSION = 1
HEAD_BYTES = 4096  # a segment's first bytes, hashed: the same segment of the same store, or not


def local_dest(dest: str) -> str:
    """DEST as an absolute local path: a plain path or a file: URI. Other schemes are refused for now: the
    manifest's atomic writes are local file operations (a Hadoop FileSystem's rename is not atomic on every
    store: S3's is a copy)."""
    text = os.fspath(dest)
    scheme = urlparse(text).scheme
    if scheme == "file":
        text = urlparse(text).path
    elif scheme and len(scheme) > 1:  # (a one-letter "scheme" is a Windows drive)
        raise ArchiveError(f"{text}: only local paths are supported as the archive's destination for now")
    return os.path.abspath(os.path.expanduser(text))


def destination(root: str, dest: str) -> str:
    """The archive's local path for the store at `root`: local_dest(dest), a new or empty directory or an
    archive already, neither inside the other (Parquet files among the store's, or a reader of the archive
    walking the store's files)."""
    target = local_dest(dest)
    for inner, outer, what in ((target, root, "the archive must not be inside the store"),
                               (root, target, "the store must not be inside the archive")):  # fmt: skip
        if inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep):
            raise ArchiveError(f"{target}: {what} ({root})")
    if os.path.exists(target) and not os.path.isdir(target):
        raise ArchiveError(f"{target}: not a directory")
    if os.path.isdir(target) and os.listdir(target) and not os.path.isdir(os.path.join(target, MANIFEST_DIR)):
        # someone's files: an archive's partition directories among them would be mixed up with them
        raise ArchiveError(
            f"{target}: not empty and not an archive (no {MANIFEST_DIR}/): give a new or empty directory"
        )
    return target


def segment_head(path: str) -> str:
    """sha256 of a segment's first HEAD_BYTES: a closed segment never changes, so the same name with another
    head is another store's segment."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read(HEAD_BYTES)).hexdigest()


def has_data(path: str) -> bool:
    """Does a segment hold at least one record? (Its first 8 bytes, size and magic, are not zeros: a segment
    made ahead of the writer, as RocketMQ's AllocateMappedFileService does, is all zeros.)"""
    with open(path, "rb") as f:
        return f.read(8).strip(b"\0") != b""


def closed_segments(names: list[str], with_data: list[bool]) -> list[str]:
    """The segments the writer has left for good: every one before the last that holds data (the active
    segment, which the next put may still append to; an empty one after it is not started yet)."""
    last = max((i for i, d in enumerate(with_data) if d), default=-1)
    return names[: max(last, 0)]


def entry(name: str, size: int, head: str, files: list[dict], flags: dict) -> dict:
    """A segment's manifest entry. `files`: [{"path": relative to DEST, "rows": n}]."""
    return {
        "version": VERSION,
        "segment": name,
        "base": int(name),
        "size": size,
        "head": head,
        "rows": sum(f["rows"] for f in files),
        "files": files,
        **flags,
    }


def target_name(segment: str, index: int) -> str:
    """The archived name of a segment's index-th file in a partition directory: the segment's in its name, so
    the files of one segment are known without the manifest."""
    return f"{segment}-{index:05d}.parquet"


def file_topic(rel: str) -> str:
    """The topic of an archived file from its partition directory (topic=<escaped>/date=.../name), unescaped
    as Spark's ExternalCatalogUtils.unescapePathName (%XX)."""
    head = rel.split("/", 1)[0]
    if not head.startswith("topic="):
        raise ArchiveError(f"archived file {rel}: not under a topic= directory")
    return unquote(head[len("topic=") :])


def plan_moves(staged: str, segment: str) -> list[tuple[str, str]]:
    """(staged file, path relative to DEST) for each Parquet file Spark wrote for one segment, in the same
    partition directories (Spark's escaping of the values kept), numbered in each."""
    moves = []
    for d, dirs, files in os.walk(staged):
        dirs.sort()
        parts = sorted(f for f in files if f.endswith(".parquet") and not f.startswith((".", "_")))
        rel = os.path.relpath(d, staged)
        for i, f in enumerate(parts):
            moves.append((os.path.join(d, f), os.path.normpath(os.path.join(rel, target_name(segment, i)))))
    return moves


class ArchiveManifest:
    """The manifest of the archive at local path `dest`."""

    def __init__(self, dest: str):
        self.dest = dest
        self.root = os.path.join(dest, MANIFEST_DIR)
        self.segments_dir = os.path.join(self.root, "segments")
        self.staging = os.path.join(self.root, "staging")
        self._lock_fd = None

    # ------------------------------------------------------------------ reading (cheap, no lock)
    def is_archived(self, segment: str) -> bool:
        return os.path.exists(self._entry_path(segment))

    def archived(self) -> list[str]:
        """The archived segments' names, in offset order."""
        try:
            names = os.listdir(self.segments_dir)
        except FileNotFoundError:
            return []
        return sorted(n[:-5] for n in names if n.endswith(".json") and not n.startswith("."))

    def entry(self, segment: str) -> dict:
        with open(self._entry_path(segment), encoding="utf-8") as f:
            return json.load(f)

    def holds(self, path: str) -> bool:
        """Does the archive hold the segment file at `path`: an entry of its name whose head is this file's
        (the same name in another store's archive is another segment)? What cleanup asks before deleting."""
        name = os.path.basename(path)
        if not self.is_archived(name):
            return False
        try:
            return self.entry(name).get("head") == segment_head(path)
        except (OSError, ValueError):  # an entry that does not read: not held
            return False

    def staged_dir(self, segment: str) -> str:
        return os.path.join(self.staging, f"{STAGED_COLUMN}={segment}")

    # ------------------------------------------------------------------ writing (under the lock)
    def __enter__(self) -> "ArchiveManifest":
        os.makedirs(self.segments_dir, exist_ok=True)
        fd = os.open(os.path.join(self.root, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES):
                raise ArchiveError(f"{self.dest}: another archive job is writing this archive") from None
            raise
        self._lock_fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # (closing releases the flock)
            self._lock_fd = None

    def recover(self) -> list[str]:
        """Undo what a job killed before its commit left: for each staged segment without an entry, the
        files its _moves.json says were (maybe) moved into place; then all of staging. Returns the
        segments undone."""
        undone = []
        for name in sorted(os.listdir(self.staging)) if os.path.isdir(self.staging) else []:
            prefix = STAGED_COLUMN + "="
            if not name.startswith(prefix) or self.is_archived(name[len(prefix) :]):
                continue
            moves = os.path.join(self.staging, name, MOVES)
            if os.path.exists(moves):
                with open(moves, encoding="utf-8") as f:
                    for rel in json.load(f):
                        try:
                            os.unlink(os.path.join(self.dest, rel))
                        except FileNotFoundError:
                            pass
                        self._prune(os.path.dirname(rel))
                undone.append(name[len(prefix) :])
        shutil.rmtree(self.staging, ignore_errors=True)
        for n in os.listdir(self.segments_dir):  # an entry whose rename never happened
            if n.startswith("."):
                os.unlink(os.path.join(self.segments_dir, n))
        return undone

    def _prune(self, rel_dir: str) -> None:
        """Remove a partition directory (date=, then its topic=) left empty by an undone segment."""
        while rel_dir and rel_dir != os.curdir:
            try:
                os.rmdir(os.path.join(self.dest, rel_dir))
            except OSError:  # not empty (or gone): what is above it is not empty either
                return
            rel_dir = os.path.dirname(rel_dir)

    def move_in(self, segment: str, moves: list[tuple[str, str]], moved=None) -> None:
        """Move a staged segment's files into place, after saying where (_moves.json), each file and its
        directory synced; `moved(i)` after the i-th."""
        write_atomic(os.path.join(self.staged_dir(segment), MOVES), json.dumps([rel for _, rel in moves]))
        dirs = set()
        for i, (src, rel) in enumerate(moves):
            dst = os.path.join(self.dest, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            _fsync_file(src)
            os.rename(src, dst)
            dirs.add(os.path.dirname(dst))
            if moved is not None:
                moved(i)
        for d in sorted(dirs):
            _fsync_dir(d)

    def commit(self, record: dict) -> None:
        """The segment is in: its entry, written atomically; then its staging goes."""
        segment = record["segment"]
        write_atomic(self._entry_path(segment), json.dumps(record, indent=1, sort_keys=True))
        shutil.rmtree(self.staged_dir(segment), ignore_errors=True)

    def _entry_path(self, segment: str) -> str:
        return os.path.join(self.segments_dir, f"{segment}.json")


def write_atomic(path: str, text: str) -> None:
    """`path` holds `text` or what it held before, whatever instant the process dies at (and after a power
    loss once this returns): a temporary file beside it, synced, renamed over it, the directory synced."""
    d, base = os.path.split(path)
    tmp = os.path.join(d, f".{base}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
    _fsync_dir(d)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
