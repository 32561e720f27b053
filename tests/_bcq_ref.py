"""An independent reference for the batch-topic store tests (tests/store/test_batch_topic.py).

Written from RocketMQ's source, not from rocketstore (nothing here imports it):
- the client batch encoding: MessageDecoder.encodeMessage / encodeMessages (common/.../message/MessageDecoder.java);
- a CommitLog record read field by field (MessageExtEncoder's layout, CommitLog.checkMessageAndReturnSize);
- the 46-byte BatchConsumeQueue unit (BatchConsumeQueue.putBatchMessagePositionInfo);
- java.util.HashMap's iteration order for a few String keys (MessageDecoder.messageProperties2String
  walks Message.properties, a HashMap);
- BatchConsumeQueue.getOffsetInQueueByTime with binarySearchRight, literally: byte positions, `ceil`
  to a unit boundary, the per-file first-time map built at load (searchTimeFromCache), the last file
  first, and the early "timestamp >= the file's last time" answer.
"""

import os
import struct
import zlib

from _index_ref import java_hash  # the tests' one reference String.hashCode

UNIT_SIZE = 46
UNIT = struct.Struct(">qiqqqhii")  # phyOffset size tagsCode storeTime msgBaseOffset batchSize compacted reserved
MSG_STORE_TIME_OFFSET_INDEX = 20
MSG_BASE_OFFSET_INDEX = 28
MAGIC_V1 = -626843481  # MessageDecoder.MESSAGE_MAGIC_CODE (0xDAA320A7)
INNER_BATCH_FLAG = 0x80  # MessageSysFlag.INNER_BATCH_FLAG = 0x1 << 7


def hashmap_order(keys, capacity: int = 16) -> list:
    """java.util.HashMap iteration order (no resize: few keys): by bucket (h ^ h >>> 16) & (n - 1),
    insertion order inside a bucket."""

    def bucket(k):
        h = java_hash(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return [k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(keys))]


def props_string(pairs) -> bytes:
    """messageProperties2String over (name, value) pairs already in iteration order."""
    return "".join(f"{k}\x01{v}\x02" for k, v in pairs).encode("utf-8")


def parse_props(raw: bytes) -> dict:
    out = {}
    for item in raw.decode("utf-8").split("\x02"):
        if "\x01" in item:
            k, v = item.split("\x01", 1)
            out[k] = v
    return out


# ---- the client batch encoding ---------------------------------------------------------------------


def encode_message(body: bytes, props: bytes = b"", flag: int = 0) -> bytes:
    """MessageDecoder.encodeMessage: TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, BODY (len + bytes),
    PROPERTIES (short len + bytes)."""
    total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
    return struct.pack(">iiiii", total, 0, 0, flag, len(body)) + body + struct.pack(">h", len(props)) + props


def encode_messages(messages) -> bytes:
    """MessageDecoder.encodeMessages: (body, props, flag) triples back to back."""
    return b"".join(encode_message(*m) for m in messages)


def decode_messages(buf: bytes) -> list:
    """The inverse, with every fixed field checked: [(body, props, flag)]."""
    out = []
    p = 0
    while p < len(buf):
        total, magic, crc, flag, blen = struct.unpack_from(">iiiii", buf, p)
        assert (magic, crc) == (0, 0), "encodeMessage writes magic and body CRC as 0"
        body = buf[p + 20 : p + 20 + blen]
        (plen,) = struct.unpack_from(">h", buf, p + 20 + blen)
        props = buf[p + 22 + blen : p + 22 + blen + plen]
        assert total == 22 + blen + plen, "TOTALSIZE must cover the fields"
        out.append((body, props, flag))
        p += total
    assert p == len(buf)
    return out


# ---- a CommitLog record ----------------------------------------------------------------------------


def record_size(body_len: int, topic_len: int, props_len: int) -> int:
    """calMsgLength for IPv4 hosts (BatchPutMessageTest.calMsgLength)."""
    return 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + body_len + 1 + topic_len + 2 + props_len


def decode_record(buf: bytes, pos: int) -> dict:
    """A v1 record with IPv4 hosts, field by field."""
    (total, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts) = struct.unpack_from(
        ">iiiiiqqiq", buf, pos
    )
    assert sys_flag & 0x30 == 0, "IPv4 hosts only"
    p = pos + 48
    born_host = buf[p : p + 8]
    p += 8
    (store_ts,) = struct.unpack_from(">q", buf, p)
    p += 8
    store_host = buf[p : p + 8]
    p += 8
    reconsume, prepared, blen = struct.unpack_from(">iqi", buf, p)
    p += 16
    body = buf[p : p + blen]
    p += blen
    tlen = buf[p]
    topic = buf[p + 1 : p + 1 + tlen].decode("utf-8")
    p += 1 + tlen
    (plen,) = struct.unpack_from(">h", buf, p)
    props = buf[p + 2 : p + 2 + plen]
    p += 2 + plen
    assert p - pos == total, "TOTALSIZE must match the fields"
    return dict(
        total=total,
        magic=magic,
        body_crc=body_crc,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        sys_flag=sys_flag,
        born_ts=born_ts,
        born_host=born_host,
        store_ts=store_ts,
        store_host=store_host,
        reconsume=reconsume,
        prepared=prepared,
        body=body,
        topic=topic,
        props=props,
    )


def crc31(data: bytes) -> int:
    """UtilAll.crc32: CRC32 & 0x7FFFFFFF."""
    return zlib.crc32(data) & 0x7FFFFFFF


def host_bytes(ip: str, port: int) -> bytes:
    return bytes(int(x) for x in ip.split(".")) + struct.pack(">i", port)


def layout(sizes, file_size: int) -> list:
    """Where records of these sizes land in a CommitLog of `file_size` segments: a record that does not
    leave END_FILE_MIN_BLANK_LENGTH (8) bytes goes to the next segment after a BLANK."""
    out = []
    pos = 0
    for size in sizes:
        left = file_size - pos % file_size
        if size + 8 > left:
            pos += left
        out.append(pos)
        pos += size
    return out


def read_segment_bytes(root: str, sub: str, file_size: int) -> bytes:
    """The concatenated segments under root/sub (each must be whole and the first start at 0)."""
    d = os.path.join(root, sub)
    names = sorted(os.listdir(d))
    data = bytearray()
    for n in names:
        assert int(n) == len(data), f"{sub}: segment {n} does not follow on"
        with open(os.path.join(d, n), "rb") as fh:
            chunk = fh.read()
        assert len(chunk) == file_size
        data += chunk
    return bytes(data)


# ---- the batch ConsumeQueue unit -------------------------------------------------------------------


def unit(pos: int, size: int, tags_code: int, store_time: int, base: int, batch: int) -> bytes:
    """putBatchMessagePositionInfo: compactedOffset INVALID_POS (-1), 4 reserved bytes 0."""
    return UNIT.pack(pos, size, tags_code, store_time, base, batch, -1, 0)


def bcq_files(root: str, topic: str, queue_id: int) -> list:
    """[(file name, bytes)] of one batch queue, oldest first."""
    d = os.path.join(root, "batchconsumequeue", topic, str(queue_id))
    out = []
    for n in sorted(os.listdir(d)):
        with open(os.path.join(d, n), "rb") as fh:
            out.append((n, fh.read()))
    return out


def valid_units(data: bytes) -> list:
    """The leading units recover() accepts (offset >= 0, size > 0, base >= 0, batch > 0), as tuples."""
    out = []
    for p in range(0, len(data) - UNIT_SIZE + 1, UNIT_SIZE):
        u = UNIT.unpack_from(data, p)
        if not (u[0] >= 0 and u[1] > 0 and u[4] >= 0 and u[5] > 0):
            break
        out.append(u)
    return out


# ---- BatchConsumeQueue.getOffsetInQueueByTime, literally -------------------------------------------


def _ceil(pos: int) -> int:
    return (pos // UNIT_SIZE) * UNIT_SIZE


def _long(buf: bytes, pos: int) -> int:
    return struct.unpack_from(">q", buf, pos)[0]


def binary_search_right(buf: bytes, left: int, right: int, target: int, upper: bool) -> int:
    """BatchConsumeQueue.binarySearchRight on byte positions (unitShift = MSG_STORE_TIME_OFFSET_INDEX)."""
    while left <= right:
        mid = _ceil((left + right) // 2)
        v = _long(buf, mid + MSG_STORE_TIME_OFFSET_INDEX)
        if mid == right:
            return mid if v >= target else -1
        if mid == left:
            if v >= target:
                return mid
            left = mid + UNIT_SIZE
        elif not upper:
            if v < target:
                left = mid + UNIT_SIZE
            else:
                right = mid
        else:
            if v <= target:
                left = mid
            else:
                right = mid - UNIT_SIZE
    return -1


def offset_in_queue_by_time(files: list, timestamp: int, upper: bool) -> int:
    """getOffsetInQueueByTime over one queue's files as loaded (each the bytes of its written units:
    readPosition = len), with searchBcqByCacheEnable (the default) and the time cache as
    correctMinOffset builds it at load (refreshCache: each file's first store time -> that file).
    -1 when nothing qualifies; the store clamps afterwards."""
    if not files:
        return -1
    last = files[-1]
    if len(last) >= UNIT_SIZE and _long(last, MSG_STORE_TIME_OFFSET_INDEX) <= timestamp:
        target = last
    else:
        cache = {}
        for f in files:
            if len(f) >= UNIT_SIZE:
                cache[_long(f, MSG_STORE_TIME_OFFSET_INDEX)] = f  # put: a later equal key wins
        keys = sorted(k for k in cache if k <= timestamp)
        target = cache[keys[-1]] if keys else files[0]  # floorEntry, else the first file
    if len(target) < UNIT_SIZE:
        return -1
    left, right = 0, len(target) - UNIT_SIZE
    if timestamp >= _long(target, right + MSG_STORE_TIME_OFFSET_INDEX):
        return _long(target, right + MSG_BASE_OFFSET_INDEX)
    mid = binary_search_right(target, left, right, timestamp, upper)
    return _long(target, mid + MSG_BASE_OFFSET_INDEX) if mid != -1 else -1


def store_offset_by_time(files: list, timestamp: int, upper: bool, min_offset: int, max_offset: int) -> int:
    """ConsumeQueueStore.getOffsetInQueueByTime: the queue's answer clamped to [min, max]."""
    return min(max(offset_in_queue_by_time(files, timestamp, upper), min_offset), max_offset)
