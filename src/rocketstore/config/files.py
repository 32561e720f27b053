"""The store's small files: the metadata under config/ (topics.json, consumerOffset.json) and the checkpoint.

Metadata files are written as RocketMQ's MixAll.string2File does, so a crash never leaves a half-written
one (apache/rocketmq #3401): the new text to a temp file and fsynced, the previous version kept as `.bak`,
then a rename over, then the directory fsynced. Every step that needs disk space writes a temp file first,
so a full disk raises OSError with the old file and its `.bak` as they were (no half-written temp file is
left behind). Reading falls back to the `.bak` when the file is missing, unreadable or of the wrong shape,
as ConfigManager.load does (any exception from decode: loadBak), and only when neither can be used is the
store refused (StoreOpenError naming both files and what is wrong with each).
"""

from __future__ import annotations

import json
import logging
import os

from ..errors import StoreOpenError
from ..files.space import is_sparse

log = logging.getLogger("rocketstore.config")

JAVA_INT = (-(2**31), 2**31 - 1)
JAVA_LONG = (-(2**63), 2**63 - 1)


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
            _replace_synced(path + ".bak", previous, sync_directory=False)  # the one below covers both
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
    neither can be read. `parse` raises ValueError for text of the wrong shape."""
    problems = []
    for candidate in (path, path + ".bak"):
        if not os.path.exists(candidate):
            continue
        try:
            with open(candidate, encoding="utf-8") as fh:
                value = parse(fh.read())
        # RecursionError: json's decoder on deeply nested text; the others: parsers that trust the shape
        except (OSError, ValueError, AttributeError, TypeError, KeyError, OverflowError, RecursionError) as e:
            problems.append(f"{candidate}: {e}")
            continue
        if problems:
            log.warning("%s; read %s instead", problems[0], candidate)
        return value, problems
    return None, problems


def read_config(path: str, parse, what: str):
    """read_with_backup, refusing the store when the file and its .bak both exist in no usable form;
    None when neither exists."""
    value, problems = read_with_backup(path, parse)
    if value is None and problems:
        raise StoreOpenError(f"cannot read {what}: " + "; ".join(problems))
    return value


# -- the shape of a config file's JSON (RocketMQ's fastjson would fail on a mismatch too)
def load_json(text: str):
    """json.loads, with text nested too deeply for the decoder a ValueError like any other bad text."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _kind(value) -> str:
    return {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a non-integer number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def as_object(value, what: str, *, optional: bool = True) -> dict:
    """A JSON object (null or absent: empty when optional)."""
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object, not {_kind(value)}")
    return value


def as_int(value, what: str, bounds: tuple[int, int] = JAVA_LONG):
    """An integer within bounds (Java's int or long): not a string, a fraction or a boolean."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an integer, not {_kind(value)}")
    lo, hi = bounds
    if not lo <= value <= hi:
        raise ValueError(f"{what} {value} is out of range [{lo}, {hi}]")
    return value


def as_str(value, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, not {_kind(value)}")
    return value


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
        if e.filename is None:  # a failed flush does not say which file
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
