"""Read-only access to the golden stores (tests/golden/data, written by the real RocketMQ store)."""

import base64
import json
import os
from functools import lru_cache

import pytest

from golden.data_root import root


def path(name: str, *parts: str) -> str:
    p = os.path.join(root(), name, *parts)
    if not os.path.exists(p):
        pytest.fail(f"golden file {p} is missing")
    return p


@lru_cache(maxsize=None)
def manifest(name: str) -> dict:
    with open(path(name, "manifest.json"), encoding="utf-8") as fh:
        return json.load(fh)


def file_size(name: str) -> int:
    return int(manifest(name)["config_all"]["mappedFileSizeCommitLog"])


@lru_cache(maxsize=None)
def segment(name: str, start: int) -> bytes:
    with open(path(name, "store", "commitlog", f"{start:020d}"), "rb") as fh:
        return fh.read()


def locate(name: str, phys: int) -> tuple[bytes, int]:
    """(the commitlog file holding `phys`, the record's position inside it)."""
    fs = file_size(name)
    return segment(name, phys - phys % fs), phys % fs


def record_bytes(name: str, phys: int, size: int) -> bytes:
    seg, pos = locate(name, phys)
    return seg[pos : pos + size]


def stored_records(name: str):
    """(entry, message-level entry, stored dict, physical offset, msgId) for every stored message:
    one per putMessage, one per message of a putMessages batch."""
    for e in manifest(name)["messages"]:
        if e["api"] == "putMessage":
            yield e, e, e["stored"], e["wroteOffset"], e["msgId"]
        else:
            for sub in e["messages"]:
                yield e, sub, sub["stored"], sub["physicalOffset"], sub["msgId"]


def b64(s: str) -> bytes:
    return base64.b64decode(s)
