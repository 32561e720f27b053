"""The compact header form (SerializeType.ROCKETMQ, RocketMQSerializable), all big-endian:

    code short | language byte | version short | opaque int | flag int
    remark length int | remark UTF-8
    extFields length int | (key length short | key UTF-8 | value length int | value UTF-8)...

A length of 0 reads back as null (RocketMQSerializable.readStr), so an empty remark, key or value does not survive
this form; entries with a null key or value are not written. Reading is strict where RocketMQ's reader would run
past its bounds: every length must lie inside the header."""

import struct

from .. import engine
from .codes import SerializeType
from .command import RemotingCommand
from .errors import RemotingProtocolError

_FIXED = struct.Struct(">hBhii")  # code, language, version, opaque, flag: 13 bytes


def _s16(value: int) -> int:
    return ((value + 0x8000) & 0xFFFF) - 0x8000


def encode(cmd: RemotingCommand) -> bytes:
    # code and version are Java ints written with writeShort: their low 16 bits
    parts = [_FIXED.pack(_s16(cmd.code), cmd.language & 0xFF, _s16(cmd.version), cmd.opaque, cmd.flag)]
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    parts.append(struct.pack(">i", len(remark)))
    parts.append(remark)
    ext = []
    for k, v in (cmd.ext_fields or {}).items():
        if k is None or v is None:
            continue
        kb, vb = k.encode("utf-8"), v.encode("utf-8")
        if len(kb) > 0x7FFF:
            raise ValueError(f"extFields key longer than a short: {len(kb)} bytes")
        ext.append(struct.pack(">h", len(kb)) + kb + struct.pack(">i", len(vb)) + vb)
    ext_bytes = b"".join(ext)
    parts.append(struct.pack(">i", len(ext_bytes)))
    parts.append(ext_bytes)
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RemotingProtocolError(
                f"ROCKETMQ header truncated in {what} (need {n} at {self.pos}/{len(self.data)})"
            )
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def text(self, n: int, what: str) -> str | None:
        raw = self.take(n, what)
        if not raw:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RemotingProtocolError(f"ROCKETMQ header {what} is not UTF-8: {e}") from None


def decode(data: bytes) -> RemotingCommand:
    """The header's command: in one C call (remoting.c) when the header is well formed; decode_py says what is
    wrong with one that is not, and is the reference."""
    if engine.native is not None:
        got = engine.native.decode_binary_header(data)
        if got is not None:
            code, language, version, opaque, flag, remark, ext = got
            return RemotingCommand(code, language, version, opaque, flag, remark, ext, b"", SerializeType.ROCKETMQ)
    return decode_py(data)


def decode_py(data: bytes) -> RemotingCommand:
    r = _Reader(bytes(data))
    code, language, version, opaque, flag = _FIXED.unpack(r.take(_FIXED.size, "fixed fields"))
    (remark_len,) = struct.unpack(">i", r.take(4, "remark length"))
    remark = r.text(remark_len, "remark")
    (ext_len,) = struct.unpack(">i", r.take(4, "extFields length"))
    ext = None
    if ext_len > 0:
        end = r.pos + ext_len
        if end > len(r.data):
            raise RemotingProtocolError(f"ROCKETMQ header extFields length {ext_len} exceeds the header")
        ext = {}
        area = _Reader(r.take(ext_len, "extFields"))
        while area.pos < len(area.data):
            (klen,) = struct.unpack(">h", area.take(2, "extFields key length"))
            key = area.text(klen, "extFields key")
            (vlen,) = struct.unpack(">i", area.take(4, "extFields value length"))
            value = area.text(vlen, "extFields value")
            if key is not None and value is not None:
                ext[key] = value
    elif ext_len < 0:
        raise RemotingProtocolError(f"ROCKETMQ header extFields length {ext_len} is negative")
    return RemotingCommand(
        code=code,
        language=language,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.ROCKETMQ,
    )
