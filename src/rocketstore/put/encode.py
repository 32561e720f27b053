"""Encode: a message's PROPERTIES bytes, what the queues and the index read from them (props_info, the
tagsCode), and a producer batch's records laid out in one buffer.

With the compiled engine (engine.native) the per-message work runs in C (message_props, props_info); the
Python here is the reference and the path of whatever the C leaves to it (it answers None)."""

from __future__ import annotations

import logging
import zlib

import numpy as np

from ..formats import properties as P
from ..message import Message
from ..services.bulk_dispatch import props_info_py
from ..services.dispatch import SCHEDULE_TOPIC, tags_code_for
from .. import engine

log = logging.getLogger("rocketstore.put")
NO_KEYS = (0, "", None, False)  # props_info of properties without TAGS, KEYS, UNIQ_KEY or DELAY
_crc32 = zlib.crc32


def props_info(props: bytes):
    """props_info of stored properties (bulk_dispatch's, or its compiled twin): what the queues and the index
    read from them, computed once per record."""
    if not props:
        return NO_KEYS
    native = engine.native
    return native.props_info(props) if native is not None else props_info_py(props)


def message_props(msg: Message, drop_crc: bool) -> bytes | None:
    """The PROPERTIES bytes, None when a tag, key or property cannot be stored (Message.text_problem)."""
    native = engine.native
    if native is not None:
        got = native.message_props(msg, drop_crc)
        if got is not None:
            return got
    return message_props_py(msg, drop_crc)


def message_props_py(msg: Message, drop_crc: bool) -> bytes | None:
    """message_props in Python: the reference, and the path of what the compiled one leaves to it."""
    if msg.raw_properties is None and not msg.properties:
        # the common case, without building a dict: KEYS then TAGS, as property_map orders them
        keys, tags = msg.keys, msg.tags
        if keys and type(keys) is not str:
            try:
                keys = P.KEY_SEPARATOR.join(keys)
            except TypeError:
                keys = False  # not strings: text_problem below says so
        if (keys is None or type(keys) is str and "\x01" not in keys and "\x02" not in keys) and (
            tags is None or type(tags) is str and "\x01" not in tags and "\x02" not in tags
        ):
            # Java's getBytes(UTF_8) writes "?" for an unpaired surrogate; so does "replace"
            if keys:
                return (f"KEYS\x01{keys}\x02TAGS\x01{tags}\x02" if tags else f"KEYS\x01{keys}\x02").encode(
                    "utf-8", "replace"
                )
            return f"TAGS\x01{tags}\x02".encode("utf-8", "replace") if tags else b""
    problem = msg.text_problem()
    if problem is not None:
        log.warning("put refused: %s", problem)
        return None
    return msg.properties_bytes(drop_crc=drop_crc)


def batch_props_py(msgs: list[Message], drop_crc: bool) -> tuple[list[bytes], bool]:
    """Each message's PROPERTIES bytes, and whether they are all the same (computed once, then)."""
    first = msgs[0]
    n = len(msgs)
    plain = [m.raw_properties for m in msgs].count(None) == n and not any([m.properties for m in msgs])
    if plain and [m.keys for m in msgs].count(None) == n and [m.tags for m in msgs].count(first.tags) == n:
        return [message_props(first, drop_crc)] * n, True
    props_list = [message_props(m, drop_crc) for m in msgs]
    return props_list, props_list.count(props_list[0]) == n


def tags_code(topic: str, props: bytes, store_ts: int, sys_flag: int, info, delay_levels) -> int:
    """The unit's tagsCode; `info`: props_info(props). A schedule topic's is the delivery time."""
    if topic != SCHEDULE_TOPIC and info is not None:  # the tagsCode of the TAGS as stored, as reput reads it
        return info[0]
    return tags_code_for(topic, P.parse_properties(props), store_ts, sys_flag, delay_levels) if props else 0


def interleave_uniform(headers: bytes, bodies: list, tail: bytes, n: int, fixed_len: int, body_len: int):
    """Records of one size as an (n, size) byte matrix: headers, bodies and the shared tail are each one
    strided numpy copy instead of 3n joined parts."""
    out = np.empty((n, fixed_len + body_len + len(tail)), dtype=np.uint8)
    out[:, :fixed_len] = np.frombuffer(headers, dtype=np.uint8).reshape(n, fixed_len)
    out[:, fixed_len : fixed_len + body_len] = np.frombuffer(b"".join(bodies), dtype=np.uint8).reshape(n, body_len)
    out[:, fixed_len + body_len :] = np.frombuffer(tail, dtype=np.uint8)
    return out.reshape(-1)


def fill_crc_properties(data: bytes, sizes: np.ndarray) -> bytes:
    """The appended CRC entry of every record of a batch (each over its own record)."""
    buf = bytearray(data)
    view = memoryview(buf)
    pos = 0
    for size in sizes.tolist():
        end = pos + size - P.CRC32_RESERVED_LEN
        buf[end : pos + size] = P.crc32_property(_crc32(view[pos:end]) & 0x7FFFFFFF)
        pos += size
    view.release()
    return bytes(buf)
