"""The store's small files: the metadata under config/ (topics.json, consumerOffset.json) and the checkpoint.

Metadata files are written as RocketMQ's MixAll.string2File does, so a crash never leaves a half-written
one (apache/rocketmq #3401): the new text to a temp file and fsynced, the previous version kept as `.bak`,
then a rename over, then the directory fsynced. Reading falls back to the `.bak` when the file is missing or
unreadable, as ConfigManager does. Every step that needs disk space writes a temp file first, so a full disk
raises OSError with the old file and its `.bak` as they were (no half-written temp file is left behind).
"""
from __future__ import annotations

import os

from .files.space import is_sparse


def write_atomically(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    _write_synced(tmp, text.encode("utf-8"))
    try:
        try:
            with open(path, "rb") as fh:
                previous = fh.read()
        except FileNotFoundError:
            previous = None
        if previous is not None:
            _replace_synced(path + ".bak", previous, sync_directory=False)   # the one below covers both
    except BaseException:
        _unlink_quietly(tmp)
        raise
    os.replace(tmp, path)
    _sync_directory(path)


def write_checkpoint_file(path: str, data: bytes) -> None:
    """A small file of fixed size (the checkpoint): overwritten in place once it exists whole (its blocks are
    there, so a full disk cannot fail the write half-way), else written whole under a temp name and renamed
    over (a full disk raises OSError and leaves the old file, short or missing, as it was)."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        fd = -1
    if fd >= 0:
        try:
            st = os.fstat(fd)
            if st.st_size == len(data) and not is_sparse(st, len(data)):
                os.pwrite(fd, data, 0)
                os.fsync(fd)
                return
        finally:
            os.close(fd)
    _replace_synced(path, data)


def read_with_backup(path: str, parse):
    """parse(text) of the file, else of its .bak; (None, []) when neither exists; (None, problems) when
    neither can be read."""
    problems = []
    for candidate in (path, path + ".bak"):
        if not os.path.exists(candidate):
            continue
        try:
            with open(candidate, encoding="utf-8") as fh:
                return parse(fh.read()), problems
        except (OSError, ValueError, AttributeError, TypeError) as e:
            problems.append(f"{candidate}: {e}")
    return None, problems


def _replace_synced(path: str, data: bytes, sync_directory: bool = True) -> None:
    tmp = path + ".tmp"
    _write_synced(tmp, data)
    os.replace(tmp, path)
    if sync_directory:
        _sync_directory(path)


def _write_synced(path: str, data: bytes) -> None:
    """Write and fsync a whole new file; on failure (a full disk) nothing of it is left."""
    try:
        with open(path, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as e:
        _unlink_quietly(path)
        if e.filename is None:   # a failed flush does not say which file
            raise OSError(e.errno, e.strerror, path) from None
        raise
    except BaseException:
        _unlink_quietly(path)
        raise


def _sync_directory(path: str) -> None:
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
