"""The CommitLog record: RocketMQ 5.x's on-disk message layout (MessageExtEncoder / CommitLog).

TOTALSIZE 4 | MAGIC 4 | BODYCRC 4 | QUEUEID 4 | FLAG 4 | QUEUEOFFSET 8 | PHYSICALOFFSET 8 | SYSFLAG 4 |
BORNTIMESTAMP 8 | BORNHOST 8/20 | STORETIMESTAMP 8 | STOREHOST 8/20 | RECONSUMETIMES 4 |
PREPARED_TX_OFFSET 8 | BODYLEN 4 + body | TOPICLEN 1 (V1) / 2 (V2) + topic | PROPLEN 2 + properties.
All integers big-endian. Pure functions on bytes: no file handling here.
"""

from __future__ import annotations

import ipaddress
import zlib
from functools import lru_cache
from struct import Struct

import numpy as np

from .. import engine
from ..errors import CorruptDataError
from . import properties as P
from ..engine import java_string_hash, parse_properties


MAGIC_V1 = -626843481  # 0xDAA320A7
MAGIC_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8

# MessageSysFlag
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
HOST_V6_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700


def transaction_type(sys_flag):
    """MessageSysFlag.getTransactionValue: the two transaction bits (NOT, PREPARED, COMMIT or ROLLBACK).
    Takes an int, or a numpy array of sysFlags."""
    return sys_flag & TRANSACTION_ROLLBACK_TYPE


# The two dispatch rules on a record's transaction type; every dispatch path (put, reput, recovery, the
# local and Spark rebuilds, verify) asks these, none tests the bits itself.
def gets_queue_unit(sys_flag):
    """Does a record get a queue unit (and a queue offset)? Normal and committed transactional messages do;
    prepared and rolled-back ones don't (CommitLogDispatcherBuildConsumeQueue, CommitLog's
    MessageExtEncoder). Takes an int, or a numpy array of sysFlags (then answers a bool array)."""
    tran = transaction_type(sys_flag)
    return (tran == TRANSACTION_NOT_TYPE) | (tran == TRANSACTION_COMMIT_TYPE)


def gets_index_entries(sys_flag):
    """May a record get index entries (one per UNIQ_KEY and KEYS token)? Every one but a rolled-back
    transactional message: IndexService.buildIndex returns early for TRANSACTION_ROLLBACK_TYPE only, so a
    prepared (half) message is indexed though it gets no queue unit. Takes an int, or a numpy array of
    sysFlags (then answers a bool array)."""
    return transaction_type(sys_flag) != TRANSACTION_ROLLBACK_TYPE


HEAD = Struct(">iiiiiqqiq")  # totalSize..bornTimestamp: 48 bytes
I64 = Struct(">q")
I32 = Struct(">i")
I16 = Struct(">h")
U16 = Struct(">H")
TAIL = Struct(">iqi")  # reconsumeTimes, preparedTransactionOffset, bodyLength
BLANK = Struct(">ii")
QUEUE_OFFSET_POS = 20
PHYSICAL_OFFSET_POS = 28
SYSFLAG_POS = 36
BORN_HOST_POS = 48
MAX_TOPIC_BYTES_V1 = 127


def body_crc(body: bytes) -> int:
    """UtilAll.crc32: CRC32 masked to 31 bits."""
    return zlib.crc32(body) & 0x7FFFFFFF


def record_length(v2: bool, sys_flag: int, body_len: int, topic_len: int, props_len: int) -> int:
    """MessageExtEncoder.calMsgLength."""
    return (
        72
        + (8 if sys_flag & BORNHOST_V6_FLAG == 0 else 20)
        + (8 if sys_flag & STOREHOSTADDRESS_V6_FLAG == 0 else 20)
        + body_len
        + (2 if v2 else 1)
        + topic_len
        + 2
        + props_len
    )


# ---- hosts and msgId ---------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def host_to_bytes(host: str) -> bytes:
    """ "ip:port" (IPv6 with or without brackets) -> 4+4 or 16+4 bytes, as MessageExt.socketAddress2ByteBuffer."""
    addr, sep, port = host.rpartition(":")
    if not sep:
        raise ValueError(f"host {host!r} is not 'ip:port'")
    try:
        ip = ipaddress.ip_address(addr.strip("[]"))
        portn = int(port)
    except ValueError as e:
        raise ValueError(f"host {host!r} is not 'ip:port': {e}") from None
    if not 0 <= portn <= 0xFFFFFFFF:
        raise ValueError(f"host {host!r}: port out of range")
    return ip.packed + portn.to_bytes(4, "big")


@lru_cache(maxsize=4096)
def host_from_bytes(data: bytes) -> str:
    """The inverse, printed as Java prints an InetSocketAddress's host: IPv6 uncompressed, no brackets."""
    port = int.from_bytes(data[-4:], "big", signed=True)
    ip = data[:-4]
    if len(ip) == 4:
        return f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}:{port}"
    groups = ":".join(format(int.from_bytes(ip[i : i + 2], "big"), "x") for i in range(0, 16, 2))
    return f"{groups}:{port}"


def make_msg_id(store_host_bytes: bytes, physical_offset: int) -> str:
    """Offset msgId: store host (ip + port) + physical offset, upper-case hex (32 or 56 chars)."""
    return (store_host_bytes + I64.pack(physical_offset)).hex().upper()


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def parse_msg_id(msg_id: str) -> tuple[str, int]:
    """msgId -> (store host "ip:port", physical offset)."""
    if len(msg_id) not in (32, 56):
        raise ValueError(f"msgId {msg_id!r} must be 32 (IPv4) or 56 (IPv6) hex characters")
    if not all(c in _HEX_DIGITS for c in msg_id):  # bytes.fromhex would skip blanks
        raise ValueError(f"msgId {msg_id!r} is not hexadecimal")
    raw = bytes.fromhex(msg_id)
    return host_from_bytes(raw[:-8]), I64.unpack(raw[-8:])[0]


# ---- tags ---------------------------------------------------------------------------------------


def tags_code(tags: str | None) -> int:
    """tagsCode for the ConsumeQueue: Java String.hashCode, sign-extended; 0 without tags."""
    return java_string_hash(tags) if tags else 0


def parse_delay_levels(spec: str) -> tuple[int, ...]:
    """messageDelayLevel ("1s 5s ... 2h") -> delay in ms per level (index 0 = level 1)."""
    units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    out = []
    for item in spec.split(" "):
        if not item or item[-1] not in units:
            raise ValueError(f"bad messageDelayLevel entry {item!r} in {spec!r}")
        out.append(int(item[:-1]) * units[item[-1]])
    return tuple(out)


# ---- encode -------------------------------------------------------------------------------------

_FIXED = {}


def fixed_part(born_len: int, store_len: int) -> Struct:
    """One Struct for every fixed field of a record (TOTALSIZE .. BODYLEN) for the given host sizes:
    encoding a record is then one pack, the body, and the topic/properties tail."""
    st = _FIXED.get((born_len, store_len))
    if st is None:
        st = _FIXED[(born_len, store_len)] = Struct(f">iiiiiqqiq{born_len}sq{store_len}siqi")
    return st


_FIXED_DTYPES: dict[tuple[int, int], np.dtype] = {}


def fixed_dtype(born_len: int, store_len: int) -> np.dtype:
    """fixed_part as a numpy record, to encode the fixed fields of a whole batch in a few array writes."""
    dt = _FIXED_DTYPES.get((born_len, store_len))
    if dt is None:
        dt = _FIXED_DTYPES[(born_len, store_len)] = np.dtype(
            [
                ("size", ">i4"),
                ("magic", ">i4"),
                ("crc", ">i4"),
                ("queue_id", ">i4"),
                ("flag", ">i4"),
                ("queue_offset", ">i8"),
                ("phys", ">i8"),
                ("sys_flag", ">i4"),
                ("born_ts", ">i8"),
                ("born", f"S{born_len}"),
                ("store_ts", ">i8"),
                ("store_host", f"S{store_len}"),
                ("reconsume", ">i4"),
                ("prepared", ">i8"),
                ("body_len", ">i4"),
            ]
        )
    return dt


def fixed_parts(
    *,
    born: bytes,
    store_host: bytes,
    sizes,
    magic: int,
    crcs,
    queue_id: int,
    flags,
    first_queue_offset: int,
    phys,
    sys_flag: int,
    born_timestamp: int,
    store_timestamp: int,
    reconsume_times: int,
    body_lens,
) -> np.ndarray:
    """The fixed fields (TOTALSIZE .. BODYLEN) of n records of one producer batch, as n numpy records:
    per-record sizes, CRCs, flags, physical offsets and body lengths; consecutive queue offsets; the
    rest shared. (Batches carry no transaction, so PREPARED_TRANSACTION_OFFSET is 0.)"""
    n = len(sizes)
    out = np.zeros(n, dtype=fixed_dtype(len(born), len(store_host)))
    out["size"] = sizes
    out["magic"] = magic
    out["crc"] = crcs
    out["queue_id"] = queue_id
    out["flag"] = flags
    out["queue_offset"] = np.arange(first_queue_offset, first_queue_offset + n, dtype=np.int64)
    out["phys"] = phys
    out["sys_flag"] = sys_flag
    out["born_ts"] = born_timestamp
    out["born"] = born
    out["store_ts"] = store_timestamp
    out["store_host"] = store_host
    out["reconsume"] = reconsume_times
    out["body_len"] = body_lens
    return out


def topic_tail(topic: bytes, v2: bool) -> bytes:
    """TOPICLEN + TOPIC, the part of a record between body and properties."""
    return (U16.pack(len(topic)) if v2 else bytes((len(topic) & 0xFF,))) + topic


def encode_properties(props_bytes: bytes, append_crc: bool, single: bool = True) -> bytes:
    """The PROPERTIES bytes as stored, with room reserved (zeros) for the appended CRC entry.

    On the single-message path RocketMQ inserts a missing final \\x02 before the CRC entry; the batch path does not.
    """
    if not append_crc:
        return props_bytes
    if single and props_bytes and props_bytes[-1:] != b"\x02":
        props_bytes += b"\x02"
    return props_bytes + bytes(P.CRC32_RESERVED_LEN)


def encode_record(
    *,
    topic: bytes,
    body: bytes,
    props: bytes,
    queue_id: int,
    flag: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    queue_offset: int,
    physical_offset: int,
    v2: bool,
    body_crc_value: int | None = None,
    append_crc: bool = False,
) -> bytes:
    """One whole record. `props` are the stored PROPERTIES bytes (see encode_properties) and already hold
    the 20 reserved bytes when `append_crc`; the CRC of everything before them is filled in here."""
    if len(born_host) == 20:
        sys_flag |= BORNHOST_V6_FLAG
    if len(store_host) == 20:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    size = record_length(v2, sys_flag, len(body), len(topic), len(props))
    crc = body_crc(body) if body_crc_value is None else body_crc_value
    data = (
        fixed_part(len(born_host), len(store_host)).pack(
            size,
            MAGIC_V2 if v2 else MAGIC_V1,
            crc,
            queue_id,
            flag,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp,
            born_host,
            store_timestamp,
            store_host,
            reconsume_times,
            prepared_transaction_offset,
            len(body),
        )
        + body
        + topic_tail(topic, v2)
        + U16.pack(len(props))
        + props
    )
    return fill_crc_property(data) if append_crc else data


def fill_crc_property(record: bytes | bytearray) -> bytes:
    """Write the appended CRC entry over the record's last 20 bytes: crc32 of everything before them."""
    n = len(record) - P.CRC32_RESERVED_LEN
    return bytes(record[:n]) + P.crc32_property(zlib.crc32(memoryview(record)[:n]) & 0x7FFFFFFF)


def encode_blank(remaining: int) -> bytes:
    """The end-of-file filler: RocketMQ writes only totalSize (= bytes left in the file) and the BLANK magic."""
    return BLANK.pack(remaining, BLANK_MAGIC)


# ---- decode -------------------------------------------------------------------------------------

_TOPICS: dict[bytes, str] = {}


_LAZY_SLOTS = frozenset(("_f", "body", "topic", "_props_raw", "_props"))


def _fixed_field(i: int):
    """The getter of the fixed field at `i` of a StoredMessage's `_f`: in C when built (read.c fixed_field: no
    Python frame per read), else a function."""
    if engine.native is not None:
        return engine.native.fixed_field(i)
    return lambda self: self._f[i]  # noqa: SLF001  (its own class)


_HOST_TEXTS: dict[bytes, str] = {}


def _host_text(data: bytes) -> str:
    """host_from_bytes, remembered: a store's records name a handful of hosts, read for every message."""
    text = _HOST_TEXTS.get(data)
    if text is None:
        if len(_HOST_TEXTS) >= 4096:  # many distinct producers: start over rather than grow without bound
            _HOST_TEXTS.clear()
        text = _HOST_TEXTS[data] = host_from_bytes(data)
    return text


class StoredMessage:
    """A message as read back from the CommitLog, with every field RocketMQ stores.

    Built from one validated record; the fixed header is unpacked at once, the rest (hosts, properties,
    msgId) only when asked for, so a get of many messages pays for what its caller reads."""

    # The fixed fields stay in the tuple one unpack produced (`_f`, fixed_part's order): building a
    # message is then five stores, which is what a get of many messages pays per message.
    # A message the native get builds holds only a copy of its (already checked) record in `_r`, and
    # `_props` None: the other slots are unset until first asked for (__getattr__ decodes them then).
    __slots__ = ("_f", "body", "topic", "_props_raw", "_props", "_r")

    def __getattr__(self, name):
        # only reached for an unset slot (or a name that is no attribute): a lazy message's fields
        if name in _LAZY_SLOTS:
            try:
                rec = self._r
            except AttributeError:
                rec = None
            if rec is not None:
                m = decode_record(rec, 0)
                self._f, self.body, self.topic = m._f, m.body, m.topic  # noqa: SLF001  (its own class)
                self._props_raw = m._props_raw  # noqa: SLF001
                self._r = None
                return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def record(self) -> bytes | None:
        """The record's bytes as the CommitLog holds them, when this message was built from a copy of them (the
        native get) and not decoded since; else None (read them at physical_offset, size). A pull's answer is
        these bytes: taking them here spares it decoding every message for its offset and size."""
        try:
            return self._r
        except AttributeError:
            return None

    size = property(_fixed_field(0))
    magic = property(_fixed_field(1))
    body_crc = property(_fixed_field(2))
    queue_id = property(_fixed_field(3))
    flag = property(_fixed_field(4))
    queue_offset = property(_fixed_field(5))
    physical_offset = property(_fixed_field(6))
    sys_flag = property(_fixed_field(7))
    born_timestamp = property(_fixed_field(8))
    _born = property(_fixed_field(9))
    store_timestamp = property(_fixed_field(10))
    _store = property(_fixed_field(11))
    reconsume_times = property(_fixed_field(12))
    prepared_transaction_offset = property(_fixed_field(13))

    def is_at(self, topic: str, queue_id: int, queue_offset: int, size: int, physical_offset: int) -> bool:
        """Is this the record a queue unit says is there (its topic, queue, queue offset, size and offset)?"""
        f = self._f
        return (
            self.topic == topic
            and f[3] == queue_id
            and f[5] == queue_offset
            and f[0] == size
            and f[6] == physical_offset
        )

    FIELDS = (
        "topic",
        "queue_id",
        "queue_offset",
        "physical_offset",
        "size",
        "msg_id",
        "tags",
        "keys",
        "properties",
        "body",
        "flag",
        "sys_flag",
        "born_timestamp",
        "born_host",
        "store_timestamp",
        "store_host",
        "reconsume_times",
        "body_crc",
        "prepared_transaction_offset",
    )

    @property
    def properties(self) -> dict[str, str]:
        if self._props is None:
            self._props = parse_properties(self._props_raw) if self._props_raw else {}
        return self._props

    @property
    def properties_raw(self) -> bytes:
        return self._props_raw

    @property
    def born_host(self) -> str:
        return _host_text(self._born)

    @property
    def store_host(self) -> str:
        return _host_text(self._store)

    @property
    def msg_id(self) -> str:
        return make_msg_id(self._store, self.physical_offset)

    @property
    def tags(self) -> str | None:
        return self.properties.get(P.TAGS)

    @property
    def keys(self) -> list[str]:
        k = self.properties.get(P.KEYS)
        return list(filter(None, k.split(P.KEY_SEPARATOR))) if k else []

    @property
    def unique_key(self) -> str | None:
        return self.properties.get(P.UNIQ_KEY)

    @property
    def version(self) -> int:
        return 2 if self.magic == MAGIC_V2 else 1

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.FIELDS}

    def __eq__(self, other):
        return isinstance(other, StoredMessage) and self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        return (
            f"StoredMessage(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"physical_offset={self.physical_offset}, size={self.size}, tags={self.tags!r})"
        )


class RecordHeader:
    """What reput and recovery need from a record, without copying the body (CommitLog.checkMessageAndReturnSize)."""

    __slots__ = (
        "size",
        "magic",
        "body_crc",
        "queue_id",
        "flag",
        "queue_offset",
        "physical_offset",
        "sys_flag",
        "born_timestamp",
        "store_timestamp",
        "body_pos",
        "body_len",
        "topic",
        "props_raw",
        "properties",
    )


def _corrupt(reason: str, pos: int) -> CorruptDataError:
    return CorruptDataError(reason, pos)


def read_header(buf, pos: int = 0, end: int | None = None) -> RecordHeader:
    """Parse and bound-check one message record at `pos` (not BLANK). Every length is checked against the
    record's TOTALSIZE and the buffer before anything is sliced, so no size field is trusted."""
    if end is None:
        end = len(buf)
    if end - pos < HEAD.size:
        raise _corrupt(f"truncated record: {end - pos} bytes left, a header needs {HEAD.size}", pos)
    (size, magic, crc, qid, flag, qoff, phys, sysflag, born_ts) = HEAD.unpack_from(buf, pos)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        raise _corrupt(f"bad magic code 0x{magic & 0xFFFFFFFF:08X}", pos)
    if size < 91 or size > end - pos:
        raise _corrupt(f"record size {size} does not fit the {end - pos} bytes left", pos)
    rend = pos + size
    p = pos + 48 + (20 if sysflag & BORNHOST_V6_FLAG else 8)
    store_ts = I64.unpack_from(buf, p)[0]
    p += 8 + (20 if sysflag & STOREHOSTADDRESS_V6_FLAG else 8)
    if p + 16 > rend:
        raise _corrupt(f"record size {size} too small for its host fields", pos)
    body_len = I32.unpack_from(buf, p + 12)[0]
    p += 16
    if body_len < 0 or p + body_len > rend:
        raise _corrupt(f"body length {body_len} overruns the record of {size} bytes", pos)
    body_pos = p
    p += body_len
    if magic == MAGIC_V2:
        if p + 2 > rend:
            raise _corrupt("record ends inside the topic length", pos)
        tlen = U16.unpack_from(buf, p)[0]
        p += 2
    else:
        if p + 1 > rend:
            raise _corrupt("record ends inside the topic length", pos)
        tlen = buf[p]
        p += 1
    if p + tlen + 2 > rend:
        raise _corrupt(f"topic length {tlen} overruns the record of {size} bytes", pos)
    topic = bytes(buf[p : p + tlen]).decode("utf-8", "replace")
    p += tlen
    plen = I16.unpack_from(buf, p)[0]
    p += 2
    if plen < 0:
        plen = 0  # Java reads a negative short and skips the properties
    if p + plen != rend:
        raise _corrupt(f"record size {size} does not match its fields ({p + plen - pos} bytes)", pos)
    h = RecordHeader()
    h.size, h.magic, h.body_crc, h.queue_id, h.flag = size, magic, crc, qid, flag
    h.queue_offset, h.physical_offset, h.sys_flag, h.born_timestamp = qoff, phys, sysflag, born_ts
    h.store_timestamp, h.body_pos, h.body_len, h.topic = store_ts, body_pos, body_len, topic
    h.props_raw = bytes(buf[p:rend])
    h.properties = None
    return h


def unit_target_problem(
    buf, pos: int, end: int, size: int, topic: str, queue_id: int, queue_offset: int | None, physical_offset: int
) -> str | None:
    """Why the record at `pos` (of `buf`, readable up to `end`) is not the one a queue unit (`physical_offset`,
    `size`) of `topic`/`queue_id` at `queue_offset` (None: not compared, e.g. a batch unit) points at; None
    when it is. Reads the header only: no CRC."""
    if pos < 0 or size <= 0 or pos + size > end:
        return f"unit ({physical_offset}, {size}) reaches past the CommitLog's written end"
    try:
        h = read_header(buf, pos, pos + size)
    except CorruptDataError as e:
        return f"no record of {size} bytes at {physical_offset}: {e.reason}"
    if h.size != size:
        return f"the record at {physical_offset} is {h.size} bytes, the unit says {size}"
    if h.physical_offset != physical_offset:
        return f"the record at {physical_offset} says it was written at {h.physical_offset}"
    if h.topic != topic or h.queue_id != queue_id:
        return f"the record at {physical_offset} belongs to {h.topic}-{h.queue_id}, not {topic}-{queue_id}"
    if queue_offset is not None and h.queue_offset != queue_offset:
        return f"the record at {physical_offset} has queue offset {h.queue_offset}, the unit is at {queue_offset}"
    return None


def is_blank(buf, pos: int) -> bool:
    return len(buf) - pos >= 8 and I32.unpack_from(buf, pos + 4)[0] == BLANK_MAGIC


_HEAD_UNPACK = HEAD.unpack_from
_I64_UNPACK = I64.unpack_from
_TAIL_UNPACK = TAIL.unpack_from


def decode_record_py(buf, pos: int = 0, end: int | None = None, with_body: bool = True) -> StoredMessage:
    """Decode the record at `pos` into a StoredMessage; CorruptDataError (naming the offset) on any bad byte.

    Every length is bounded by TOTALSIZE and the buffer before it is used. The record is copied out of
    the buffer once; its fixed fields come from one unpack, the rest are slices of that copy."""
    if end is None:
        end = len(buf)
    avail = end - pos
    if avail < 91:
        raise _corrupt(f"truncated record: {avail} bytes left, a record needs at least 91", pos)
    size, magic = _SIZE_MAGIC_UNPACK(buf, pos)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        raise _corrupt(f"bad magic code 0x{magic & 0xFFFFFFFF:08X}", pos)
    if size < 91 or size > avail:
        raise _corrupt(f"record size {size} does not fit the {avail} bytes left", pos)
    rec = bytes(buf[pos : pos + size])
    f = _FIXED_V4_UNPACK(rec, 0)
    sysflag = f[7]
    p = 88
    if sysflag & (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG):
        bl = 20 if sysflag & BORNHOST_V6_FLAG else 8
        sl = 20 if sysflag & STOREHOSTADDRESS_V6_FLAG else 8
        p = 72 + bl + sl
        if p + 3 > size:
            raise _corrupt(f"record size {size} too small for its host fields", pos)
        f = fixed_part(bl, sl).unpack_from(rec, 0)
    body_len = f[14]
    if body_len < 0 or p + body_len + 3 > size:
        raise _corrupt(f"body length {body_len} overruns the record of {size} bytes", pos)
    m = StoredMessage()
    m._f = f  # noqa: SLF001  (this module defines StoredMessage and builds it here, the hot path)
    m.body = rec[p : p + body_len] if with_body else None
    p += body_len
    if magic == MAGIC_V2:
        tlen = (rec[p] << 8) | rec[p + 1]
        p += 2
    else:
        tlen = rec[p]
        p += 1
    if p + tlen + 2 > size:
        raise _corrupt(f"topic length {tlen} overruns the record of {size} bytes", pos)
    tb = rec[p : p + tlen]
    topic = _TOPICS.get(tb)
    if topic is None:
        topic = tb.decode("utf-8", "replace")
        if len(_TOPICS) < 65536:
            _TOPICS[tb] = topic
    p += tlen
    plen = (rec[p] << 8) | rec[p + 1]
    p += 2
    if plen >= 0x8000:
        plen = 0  # Java reads a negative short and skips the properties
    if p + plen != size:
        raise _corrupt(f"record size {size} does not match its fields ({p + plen} bytes)", pos)
    m._props_raw = rec[p:]  # noqa: SLF001
    m._props = None  # noqa: SLF001
    m.topic = topic
    return m


_SIZE_MAGIC_UNPACK = Struct(">ii").unpack_from
_FIXED_V4_UNPACK = fixed_part(8, 8).unpack_from

# the extension's decode_record makes StoredMessages (the same fields and CorruptDataErrors as decode_record_py)
if engine.native is not None:
    engine.native.set_message_type(StoredMessage)

# the chosen twin (rocketstore.engine.TWINS); decode_record_py stays the reference
from ..engine import decode_record


def store_timestamp_at(buf, pos: int, size: int | None = None) -> int:
    """CommitLog.pickupStoreTimestamp: the STORETIMESTAMP field, located through SYSFLAG; -1 when a record of
    `size` bytes cannot hold it (a corrupt unit's size: RocketMQ's read would fail there)."""
    sysflag = I32.unpack_from(buf, pos + SYSFLAG_POS)[0]
    at = 48 + (20 if sysflag & BORNHOST_V6_FLAG else 8)
    if size is not None and at + 8 > size:
        return -1
    return I64.unpack_from(buf, pos + at)[0]


def verify_crc(buf, h: RecordHeader, pos: int, force_verify_prop_crc: bool) -> str | None:
    """The CRC checks of checkMessageAndReturnSize: None when sound, else what is wrong."""
    if not force_verify_prop_crc:
        if h.body_len > 0:
            actual = zlib.crc32(memoryview(buf)[h.body_pos : h.body_pos + h.body_len]) & 0x7FFFFFFF
            if actual != h.body_crc:
                return f"body CRC {actual} does not match the stored {h.body_crc}"
        return None
    props = h.properties if h.properties is not None else parse_properties(h.props_raw)
    text = props.get(P.CRC32)
    if text is None:
        return "the appended CRC property is missing"
    expected = P.parse_crc32_digits(text)
    if expected < 0:
        return f"the appended CRC property {text!r} is not a CRC"
    actual = zlib.crc32(memoryview(buf)[pos : pos + h.size - P.CRC32_RESERVED_LEN]) & 0x7FFFFFFF
    if actual != expected:
        return f"record CRC {actual} does not match the appended {expected}"
    return None


def with_host_flags(sys_flag: int, host_flags: int) -> int:
    """`sys_flag` with the IPv6 host bits of the hosts the record holds (host_flags), whatever the caller
    set: the bits say how long the host fields are, so a bit without an IPv6 address would make the record
    unreadable (RocketMQ only ever sets them from the address, CommitLog.asyncPutMessage)."""
    return (sys_flag & ~HOST_V6_FLAGS) | host_flags
