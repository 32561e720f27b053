"""The body of an inner-batch record: the client's batch encoding (MessageDecoder.encodeMessages).

An inner batch is ONE CommitLog record (sysFlag INNER_BATCH_FLAG, property INNER_NUM = how many messages)
whose BODY holds the messages back to back, each:

TOTALSIZE 4 | MAGICCODE 4 (0) | BODYCRC 4 (0) | FLAG 4 | BODYLEN 4 + body | PROPLEN 2 + properties,

all big-endian. The store gives the record a BatchConsumeQueue unit covering INNER_NUM queue offsets
from INNER_BASE (the queue offset it assigned). Pure functions on bytes: no file handling here.
encode_messages, decode_messages and count_messages run in C with the compiled engine (put_batchcq.c);
the `_py` functions are the reference.
"""

from __future__ import annotations

from struct import Struct
from typing import Iterable, NamedTuple

from .. import engine
from ..errors import CorruptDataError
from . import properties as P
from .record import INNER_BATCH_FLAG
from ..engine import parse_properties

HEAD = Struct(">iiiii")  # totalSize, magic, bodyCRC, flag, bodyLength
PROPLEN = Struct(">h")
TOTAL = Struct(">i")
FIXED = HEAD.size + PROPLEN.size  # 22: a message with empty body and no properties
MAX_PROPERTIES = 0x7FFF  # Java casts the length to a short; anything longer cannot be encoded


class InnerMessage(NamedTuple):
    body: bytes
    properties_raw: bytes = b""
    flag: int = 0

    @property
    def properties(self) -> dict[str, str]:
        return parse_properties(self.properties_raw) if self.properties_raw else {}


def _properties_bytes(properties) -> bytes:
    if isinstance(properties, dict):
        properties = P.format_properties(properties)
    if isinstance(properties, str):
        # Java's String.getBytes(UTF_8) writes an unpaired surrogate as '?', as "replace" does here
        return properties.encode("utf-8", "replace")
    return bytes(properties)


def encode_message(body: bytes, properties: bytes | str | dict = b"", flag: int = 0) -> bytes:
    """MessageDecoder.encodeMessage: one message of a client batch. Magic and body CRC are written as 0."""
    props = _properties_bytes(properties)
    if len(props) > MAX_PROPERTIES:
        raise ValueError(f"properties of {len(props)} bytes do not fit the 2-byte length (at most {MAX_PROPERTIES})")
    total = FIXED + len(body) + len(props)
    return HEAD.pack(total, 0, 0, flag, len(body)) + bytes(body) + PROPLEN.pack(len(props)) + props


def encode_messages_py(messages: Iterable) -> bytes:
    """MessageDecoder.encodeMessages: (body, properties, flag) triples (e.g. InnerMessage) back to back."""
    return b"".join([encode_message(*m) for m in messages])


def encode_messages_native(messages: Iterable) -> bytes:
    messages = list(messages)
    got = engine.native.inner_encode(messages)
    return encode_messages_py(messages) if got is None else got


def _corrupt(reason: str, pos: int) -> CorruptDataError:
    return CorruptDataError(reason, pos)


def _read_one(buf, p: int, end: int) -> tuple[InnerMessage, int]:
    """The message at `p` and where the next one starts; every length checked before it is used."""
    if end - p < FIXED:
        raise _corrupt(f"truncated inner message: {end - p} bytes left, a message needs at least {FIXED}", p)
    total, _magic, _crc, flag, blen = HEAD.unpack_from(buf, p)
    if blen < 0 or blen > end - p - FIXED:
        raise _corrupt(f"body length {blen} overruns the {end - p} bytes left", p)
    q = p + HEAD.size + blen
    plen = PROPLEN.unpack_from(buf, q)[0]
    if plen < 0 or plen > end - q - PROPLEN.size:
        raise _corrupt(f"properties length {plen} overruns the {end - q - PROPLEN.size} bytes left", p)
    # Java's decodeMessages reads the fields in order and ignores TOTALSIZE, but countInnerMsgNum walks by
    # TOTALSIZE alone: a message on which the two disagree is corrupt.
    if total != FIXED + blen + plen:
        raise _corrupt(f"total size {total} does not match its fields ({FIXED + blen + plen} bytes)", p)
    body = bytes(buf[p + HEAD.size : q])
    props = bytes(buf[q + PROPLEN.size : q + PROPLEN.size + plen])
    return InnerMessage(body, props, flag), p + total


def decode_messages_py(buf, start: int = 0, end: int | None = None) -> list[InnerMessage]:
    """MessageDecoder.decodeMessages over buf[start:end]; CorruptDataError naming the offset in `buf`."""
    if end is None:
        end = len(buf)
    out = []
    p = start
    while p < end:
        m, p = _read_one(buf, p, end)
        out.append(m)
    return out


def count_messages_py(buf, start: int = 0, end: int | None = None) -> int:
    """MessageDecoder.countInnerMsgNum: walk by TOTALSIZE (bounded: a size that cannot be right is corrupt)."""
    if end is None:
        end = len(buf)
    n = 0
    p = start
    while p < end:
        if end - p < 4:
            raise _corrupt(f"truncated inner message: {end - p} bytes left", p)
        total = TOTAL.unpack_from(buf, p)[0]
        if total < FIXED or total > end - p:
            raise _corrupt(f"total size {total} does not fit the {end - p} bytes left", p)
        p += total
        n += 1
    return n


def _ints(start, end) -> bool:
    """Bounds the C takes: ints (anything else, a float or a bool, is the reference's to handle)."""
    return type(start) is int and (end is None or type(end) is int)


def decode_messages_native(buf, start: int = 0, end: int | None = None) -> list[InnerMessage]:
    got = engine.native.inner_decode(buf, start, end, InnerMessage) if _ints(start, end) else None
    return decode_messages_py(buf, start, end) if got is None else got


def count_messages_native(buf, start: int = 0, end: int | None = None) -> int:
    got = engine.native.inner_count(buf, start, end) if _ints(start, end) else None
    return count_messages_py(buf, start, end) if got is None else got


# the chosen twins (rocketstore.engine.TWINS); the *_py functions stay the reference
from ..engine import count_messages, decode_messages, encode_messages  # noqa: F401  (the public name)


# ---- the INNER_NUM / INNER_BASE properties of an inner-batch record ------------------------------


def parse_java_integer(text: str, bits: int) -> int:
    """Long.parseLong (bits 64) / Integer.parseInt (32) / Short.parseShort (16): an optional sign then
    decimal digits, nothing else (no spaces, no underscores, unlike int()); ValueError as Java's
    NumberFormatException."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    # Java walks UTF-16 units with Character.digit: any BMP decimal digit counts, a surrogate pair does not
    if not digits or not all(ch.isdecimal() and ord(ch) <= 0xFFFF for ch in digits):
        raise ValueError(f"{text!r} is not a decimal number")
    value = int(digits)
    if text[0] == "-":
        value = -value
    limit = 1 << (bits - 1)
    if not -limit <= value < limit:
        raise ValueError(f"{text!r} is out of range for a {bits}-bit integer")
    return value


def is_inner_batch(sys_flag: int) -> bool:
    return bool(sys_flag & INNER_BATCH_FLAG)


def message_num(props: dict[str, str], sys_flag: int, batch_cq: bool) -> int:
    """CommitLog.getMessageNum: how many queue offsets a put consumes. INNER_NUM counts for an inner batch
    or any message to a BatchCQ topic; values below 1 count as 1. ValueError for a non-number, as Java's
    Short.parseShort throws."""
    text = props.get(P.INNER_NUM)
    if text is None or not (sys_flag & INNER_BATCH_FLAG or batch_cq):
        return 1
    return max(parse_java_integer(text, 16), 1)


def dispatch_batch_fields(props: dict[str, str], queue_offset: int) -> tuple[int, int]:
    """(msgBaseOffset, batchSize) of a record's DispatchRequest: INNER_BASE and INNER_NUM when both are
    present (CommitLog.setBatchSizeIfNeeded), else the record's queue offset and 1 (the DispatchRequest
    defaults). ValueError for a non-number or an INNER_NUM beyond a short: Java's checkMessageAndReturnSize
    then answers a failed request (a bad record)."""
    base = props.get(P.INNER_BASE)
    num = props.get(P.INNER_NUM)
    if base is None or num is None:
        return queue_offset, 1
    return parse_java_integer(base, 64), parse_java_integer(num, 16)
