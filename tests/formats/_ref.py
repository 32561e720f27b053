"""Independent reference helpers for the format tests.

Nothing here imports rocketstore: these are second implementations written straight from RocketMQ's
source (MessageExtEncoder / CommitLog.checkMessageAndReturnSize / MessageDecoder / String.hashCode),
used only to compute expected values.
"""

import ipaddress
import struct
import zlib

MAGIC_V1_HEX = "DAA320A7"
MAGIC_V2_HEX = "DAA320AB"
BLANK_MAGIC_HEX = "CBD43194"


def host(ip: str, port: int) -> bytes:
    """MessageExt.socketAddress2ByteBuffer: raw address bytes, then the port as a 4-byte int."""
    return ipaddress.ip_address(ip).packed + struct.pack(">i", port)


def crc31(data: bytes) -> int:
    """UtilAll.crc32: java.util.zip.CRC32 value & 0x7FFFFFFF."""
    return zlib.crc32(data) & 0x7FFFFFFF


def crc_entry(crc: int) -> bytes:
    """MessageDecoder.createCrc32: "__CRC32#" \\x01, 10 digits least-significant first, zero padded, \\x02."""
    digits = str(crc)[::-1].ljust(10, "0") if crc > 0 else "0" * 10
    return b"__CRC32#" + b"\x01" + digits.encode("ascii") + b"\x02"


def record(
    *,
    topic: bytes,
    body: bytes = b"",
    props: bytes = b"",
    queue_id: int = 0,
    flag: int = 0,
    sys_flag: int = 0,
    born_ts: int = 0,
    born_host: bytes = b"\0" * 8,
    store_ts: int = 0,
    store_host: bytes = b"\0" * 8,
    reconsume: int = 0,
    prepared: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    v2: bool = False,
    body_crc: int | None = None,
    crc_reserved: bool = False,
) -> bytes:
    """One CommitLog record laid out field by field. TOTALSIZE is the real length of what was laid out.

    `sys_flag` must already carry the 0x10/0x20 bits for 20-byte hosts (as the broker sets them).
    With `crc_reserved`, `props` must end with 20 placeholder bytes which are replaced by the CRC entry
    computed over everything before them (CommitLog's enabledAppendPropCRC)."""
    rest = b"".join(
        [
            bytes.fromhex(MAGIC_V2_HEX if v2 else MAGIC_V1_HEX),
            struct.pack(">i", crc31(body) if body_crc is None else body_crc),
            struct.pack(">i", queue_id),
            struct.pack(">i", flag),
            struct.pack(">q", queue_offset),
            struct.pack(">q", physical_offset),
            struct.pack(">i", sys_flag),
            struct.pack(">q", born_ts),
            born_host,
            struct.pack(">q", store_ts),
            store_host,
            struct.pack(">i", reconsume),
            struct.pack(">q", prepared),
            struct.pack(">i", len(body)),
            body,
            (struct.pack(">H", len(topic)) if v2 else struct.pack(">B", len(topic))),
            topic,
            struct.pack(">H", len(props)),
            props,
        ]
    )
    data = struct.pack(">i", 4 + len(rest)) + rest
    if crc_reserved:
        head = data[:-20]
        data = head + crc_entry(crc31(head))
    return data


def java_hash(s: str) -> int:
    """String.hashCode as the closed-form sum s[i]*31^(n-1-i) over UTF-16 code units, as a Java int."""
    units = []
    for ch in s:
        cp = ord(ch)
        if cp >= 0x10000:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    n = len(units)
    total = sum(u * pow(31, n - 1 - i, 1 << 32) for i, u in enumerate(units)) % (1 << 32)
    return total - (1 << 32) if total >= (1 << 31) else total


def java_int(v: int) -> int:
    """Wrap an integer to a Java int (two's complement, 32 bits)."""
    return struct.unpack(">i", struct.pack(">I", v % (1 << 32)))[0]


def string2message_properties(s: str) -> dict:
    """A line-by-line port of MessageDecoder.string2messageProperties (indexOf based)."""
    out = {}
    length = len(s)
    index = 0
    while index < length:
        new_index = s.find("\x02", index)
        if new_index < 0:
            new_index = length
        if new_index - index >= 3:
            kv = s.find("\x01", index)
            if index < kv < new_index - 1:
                out[s[index:kv]] = s[kv + 1 : new_index]
        index = new_index + 1
    return out
