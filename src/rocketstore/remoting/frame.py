"""RocketMQ's remoting frame (RemotingCommand.encode / fastEncodeHeader, NettyDecoder), big-endian:

    length int          4 + header length + body length (not counting itself)
    header length int   high byte: SerializeType (JSON 0, ROCKETMQ 1); low 24 bits: the header's length
    header              JSON or ROCKETMQ form
    body                the rest

NettyDecoder is a LengthFieldBasedFrameDecoder with maxFrameLength = com.rocketmq.remoting.frameMaxLength
(16 MiB by default), compared against the length field plus its own 4 bytes; a longer frame, or one whose header
does not fit, closes the connection."""

import struct

from . import header_binary, header_json
from .codes import SerializeType
from .command import RemotingCommand
from .errors import RemotingProtocolError

DEFAULT_MAX_FRAME = 16 * 1024 * 1024
MAX_HEADER = 0xFFFFFF
_INT = struct.Struct(">i")


def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame, length field included."""
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        header = header_binary.encode(cmd)
    else:
        header = header_json.encode(cmd)
    if len(header) > MAX_HEADER:
        raise ValueError(f"header of {len(header)} bytes does not fit 24 bits")
    body = cmd.body or b""
    return (
        struct.pack(">iI", 4 + len(header) + len(body), (int(cmd.serialize_type) << 24) | len(header)) + header + body
    )


def frame_length(prefix: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> int:
    """The number of bytes that follow a frame's 4-byte length field, checked before any of them is read."""
    (length,) = _INT.unpack(prefix)
    if length < 4:
        raise RemotingProtocolError(f"frame length {length} is shorter than the header length field")
    if length + 4 > max_frame:
        raise RemotingProtocolError(f"frame length {length + 4} exceeds the limit of {max_frame} bytes")
    return length


def decode(frame: bytes) -> RemotingCommand:
    """A command from the bytes after the length field (what NettyDecoder hands to RemotingCommand.decode)."""
    if len(frame) < 4:
        raise RemotingProtocolError(f"frame of {len(frame)} bytes has no header length")
    (mark,) = struct.unpack_from(">I", frame)
    kind, header_len = mark >> 24, mark & MAX_HEADER
    if header_len > len(frame) - 4:
        raise RemotingProtocolError(f"header length {header_len} exceeds the frame ({len(frame) - 4} bytes)")
    header = bytes(frame[4 : 4 + header_len])
    if kind == SerializeType.JSON:
        cmd = header_json.decode(header)
    elif kind == SerializeType.ROCKETMQ:
        cmd = header_binary.decode(header)
    else:
        raise RemotingProtocolError(f"unknown serialization type {kind}")
    cmd.body = bytes(frame[4 + header_len :])
    return cmd


def split(buffer: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> tuple[list[RemotingCommand], bytes]:
    """The complete frames at the start of `buffer` and the bytes left over (an incomplete frame)."""
    out = []
    pos = 0
    while len(buffer) - pos >= 4:
        length = frame_length(buffer[pos : pos + 4], max_frame)
        if len(buffer) - pos - 4 < length:
            break
        out.append(decode(buffer[pos + 4 : pos + 4 + length]))
        pos += 4 + length
    return out, bytes(buffer[pos:])
