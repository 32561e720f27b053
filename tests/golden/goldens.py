"""Access to the golden stores (tests/golden/data): written by the real RocketMQ 5.x store, with their manifests."""

import base64
import json
import os
import struct
from functools import lru_cache

import pytest

from rocketstore import Message, StoreConfig

from .data_root import root


def available(name: str) -> bool:
    return os.path.isfile(os.path.join(root(), name, "manifest.json"))


def require(name: str):
    if not available(name):
        pytest.fail(f"golden store {name} is missing from {root()}")


@lru_cache(maxsize=None)
def manifest(name: str) -> dict:
    with open(os.path.join(root(), name, "manifest.json"), encoding="utf-8") as fh:
        return json.load(fh)


def store_dir(name: str) -> str:
    return os.path.join(root(), name, "store")


def config_for(name: str, **overrides) -> StoreConfig:
    """The store's own configuration, from the getter dump RocketMQ's harness recorded (camelCase strings)."""
    return StoreConfig.from_properties(manifest(name)["config_all"], **overrides)


def _golden_body(name: str, phys: int, length: int, file_size: int) -> bytes:
    """Bodies over 2 KiB are not in the manifest: read them from the golden CommitLog (input data)."""
    seg = phys - phys % file_size
    with open(os.path.join(store_dir(name), "commitlog", f"{seg:020d}"), "rb") as fh:
        fh.seek(phys % file_size)
        rec = fh.read(length + 400)
    sysflag = struct.unpack_from(">i", rec, 36)[0]
    p = 48 + (20 if sysflag & 0x10 else 8) + 8 + (20 if sysflag & 0x20 else 8) + 12
    blen = struct.unpack_from(">i", rec, p)[0]
    assert blen == length
    return rec[p + 4 : p + 4 + blen]


def _client_batch(body: bytes):
    """Split a client-encoded batch (MessageDecoder.encodeMessages) into (flag, body, properties bytes)."""
    out, p = [], 0
    while p < len(body):
        total, _magic, _crc, flag, blen = struct.unpack_from(">iiiii", body, p)
        b = body[p + 20 : p + 20 + blen]
        plen = struct.unpack_from(">h", body, p + 20 + blen)[0]
        props = body[p + 22 + blen : p + 22 + blen + plen]
        out.append((flag, b, props))
        p += total
    return out


def replay_inputs(name: str):
    """(api, queue_id, [Message], store_timestamp) for every put the manifest lists, in put order."""
    m = manifest(name)
    file_size = int(m["config_all"]["mappedFileSizeCommitLog"])
    for e in m["messages"]:
        if e["api"] == "putMessage":
            body = (
                base64.b64decode(e["body_b64"])
                if "body_b64" in e
                else _golden_body(name, e["wroteOffset"], e["bodyLength"], file_size)
            )
            msg = Message(
                topic=e["topic"],
                body=body,
                raw_properties=e["inputPropertiesString"],
                flag=e["flag"],
                sys_flag=e["inputSysFlag"],
                born_timestamp=e["bornTimestamp"],
                born_host=e["bornHost"],
                reconsume_times=e["reconsumeTimes"],
                prepared_transaction_offset=e["preparedTransactionOffset"],
                store_host=e["storeHost"],
            )
            yield e, [msg]
        else:
            msgs = [
                Message(
                    topic=e["topic"],
                    body=b,
                    raw_properties=props,
                    flag=flag,
                    born_timestamp=e["bornTimestamp"],
                    born_host=e["bornHost"],
                    store_host=e["storeHost"],
                )
                for flag, b, props in _client_batch(base64.b64decode(e["batchBody_b64"]))
            ]
            yield e, msgs
