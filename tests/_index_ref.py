"""An independent reference for the IndexFile tests: a literal, one-key-at-a-time port of RocketMQ's
IndexHeader / IndexFile / IndexService (store/src/main/java/org/apache/rocketmq/store/index/) writing
into a bytearray with struct, and Java's String.hashCode as the textbook loop.

Nothing here imports rocketstore: it exists only to compute expected bytes and answers.
"""

import struct

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
INVALID_INDEX = 0
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
TRANSACTION_ROLLBACK_TYPE = 0xC


def to_int(v: int) -> int:
    """Wrap to a Java int."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def java_hash(s: str) -> int:
    """String.hashCode: h = 31*h + c over the UTF-16 code units, int overflow (a surrogate pair is two units)."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = to_int(31 * h + ((data[i] << 8) | data[i + 1]))
    return h


def index_key_hash(key: str) -> int:
    """IndexFile.indexKeyHashMethod: Math.abs(hashCode), which stays Integer.MIN_VALUE for MIN_VALUE -> 0."""
    h = java_hash(key)
    positive = to_int(-h) if h < 0 else h  # Math.abs on an int overflows exactly like this
    return 0 if positive < 0 else positive


def java_ldiv(a: int, b: int) -> int:
    """Java long division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def string_with_hash(prefix: str, target: int, n: int = 7) -> str:
    """A string s of n chars in 'A'..'_' such that (prefix + s).hashCode() == target (as an int)."""
    base = ord("A")
    shift = sum(base * pow(31, k, 1 << 32) for k in range(n))
    want = (target - java_hash(prefix) * pow(31, n, 1 << 32) - shift) % (1 << 32)
    digits = []
    for _ in range(n):
        digits.append(want % 31)
        want //= 31
    assert want == 0, "n too small"
    s = "".join(chr(base + d) for d in reversed(digits))
    assert java_hash(prefix + s) == to_int(target)
    return s


class RefIndexHeader:
    """IndexHeader: AtomicLong/AtomicInteger fields; every setter also writes its field into the buffer."""

    BEGIN_TS, END_TS, BEGIN_PHY, END_PHY, SLOT_COUNT, INDEX_COUNT = 0, 8, 16, 24, 32, 36

    def __init__(self, buf: bytearray):
        self.buf = buf
        self.begin_timestamp = 0
        self.end_timestamp = 0
        self.begin_phy_offset = 0
        self.end_phy_offset = 0
        self.hash_slot_count = 0
        self.index_count = 1

    def load(self):
        (
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        ) = struct.unpack_from(">qqqqii", self.buf, 0)
        if self.index_count <= 0:
            self.index_count = 1

    def update_byte_buffer(self):
        struct.pack_into(
            ">qqqqii",
            self.buf,
            0,
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    def set_begin_timestamp(self, v):
        self.begin_timestamp = v
        struct.pack_into(">q", self.buf, self.BEGIN_TS, v)

    def set_end_timestamp(self, v):
        self.end_timestamp = v
        struct.pack_into(">q", self.buf, self.END_TS, v)

    def set_begin_phy_offset(self, v):
        self.begin_phy_offset = v
        struct.pack_into(">q", self.buf, self.BEGIN_PHY, v)

    def set_end_phy_offset(self, v):
        self.end_phy_offset = v
        struct.pack_into(">q", self.buf, self.END_PHY, v)

    def inc_hash_slot_count(self):
        self.hash_slot_count += 1
        struct.pack_into(">i", self.buf, self.SLOT_COUNT, self.hash_slot_count)

    def inc_index_count(self):
        self.index_count += 1
        struct.pack_into(">i", self.buf, self.INDEX_COUNT, self.index_count)


class RefIndexFile:
    """IndexFile, line by line."""

    def __init__(
        self,
        hash_slot_num: int,
        index_num: int,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
        data: bytes | None = None,
    ):
        size = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.buf = bytearray(size) if data is None else bytearray(data)
        assert len(self.buf) == size
        self.header = RefIndexHeader(self.buf)
        if end_phy_offset > 0:
            self.header.set_begin_phy_offset(end_phy_offset)
            self.header.set_end_phy_offset(end_phy_offset)
        if end_timestamp > 0:
            self.header.set_begin_timestamp(end_timestamp)
            self.header.set_end_timestamp(end_timestamp)

    def load(self):
        self.header.load()

    def flush(self):
        self.header.update_byte_buffer()

    def is_write_full(self) -> bool:
        return self.header.index_count >= self.index_num

    def _get_int(self, pos):
        return struct.unpack_from(">i", self.buf, pos)[0]

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        return self.put_hash(index_key_hash(key), phy_offset, store_timestamp)

    def put_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        h = self.header
        if h.index_count < self.index_num:
            slot_pos = key_hash % self.hash_slot_num
            abs_slot_pos = INDEX_HEADER_SIZE + slot_pos * HASH_SLOT_SIZE
            slot_value = self._get_int(abs_slot_pos)
            if slot_value <= INVALID_INDEX or slot_value > h.index_count:
                slot_value = INVALID_INDEX
            time_diff = store_timestamp - h.begin_timestamp
            time_diff = java_ldiv(time_diff, 1000)
            if h.begin_timestamp <= 0:
                time_diff = 0
            elif time_diff > INT_MAX:
                time_diff = INT_MAX
            elif time_diff < 0:
                time_diff = 0
            abs_index_pos = INDEX_HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE + h.index_count * INDEX_SIZE
            struct.pack_into(">i", self.buf, abs_index_pos, key_hash)
            struct.pack_into(">q", self.buf, abs_index_pos + 4, phy_offset)
            struct.pack_into(">i", self.buf, abs_index_pos + 12, time_diff)
            struct.pack_into(">i", self.buf, abs_index_pos + 16, slot_value)
            struct.pack_into(">i", self.buf, abs_slot_pos, h.index_count)
            if h.index_count <= 1:
                h.set_begin_phy_offset(phy_offset)
                h.set_begin_timestamp(store_timestamp)
            if slot_value == INVALID_INDEX:
                h.inc_hash_slot_count()
            h.inc_index_count()
            h.set_end_phy_offset(phy_offset)
            h.set_end_timestamp(store_timestamp)
            return True
        return False

    def is_time_matched(self, begin: int, end: int) -> bool:
        b, e = self.header.begin_timestamp, self.header.end_timestamp
        result = begin < b and end > e
        result = result or (begin >= b and begin <= e)
        result = result or (end >= b and end <= e)
        return result

    def select_phy_offset(self, phy_offsets: list, key: str, max_num: int, begin: int, end: int) -> None:
        self.select_hash(phy_offsets, index_key_hash(key), max_num, begin, end)

    def select_hash(self, phy_offsets: list, key_hash: int, max_num: int, begin: int, end: int) -> None:
        """selectPhyOffset after its indexKeyHashMethod(key)."""
        slot_pos = key_hash % self.hash_slot_num
        abs_slot_pos = INDEX_HEADER_SIZE + slot_pos * HASH_SLOT_SIZE
        h = self.header
        slot_value = self._get_int(abs_slot_pos)
        if slot_value <= INVALID_INDEX or slot_value > h.index_count or h.index_count <= 1:
            return
        next_index = slot_value
        while True:
            if len(phy_offsets) >= max_num:
                break
            abs_index_pos = INDEX_HEADER_SIZE + self.hash_slot_num * HASH_SLOT_SIZE + next_index * INDEX_SIZE
            key_hash_read, phy_read, time_diff, prev_read = struct.unpack_from(">iqii", self.buf, abs_index_pos)
            if time_diff < 0:
                break
            time_diff *= 1000
            time_read = h.begin_timestamp + time_diff
            matched = begin <= time_read <= end
            if key_hash == key_hash_read and matched:
                phy_offsets.append(phy_read)
            if prev_read <= INVALID_INDEX or prev_read > h.index_count or prev_read == next_index or time_read < begin:
                break
            next_index = prev_read


class RefIndexService:
    """IndexService.buildIndex / getAndCreateLastIndexFile / queryOffset / deleteExpiredFile, with the
    flush of a full file done at once (RocketMQ does it on a thread; the bytes are the same)."""

    def __init__(self, hash_slot_num: int, index_num: int, max_msgs_num_batch: int = 64):
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.max_msgs_num_batch = max_msgs_num_batch
        self.files: list[RefIndexFile] = []
        self.index_msg_timestamps: list[int] = []  # every StoreCheckpoint.setIndexMsgTimestamp

    def get_and_create_last_index_file(self) -> RefIndexFile:
        prev = None
        end_phy = end_ts = 0
        if self.files:
            tmp = self.files[-1]
            if not tmp.is_write_full():
                return tmp
            end_phy, end_ts = tmp.header.end_phy_offset, tmp.header.end_timestamp
            prev = tmp
        f = RefIndexFile(self.hash_slot_num, self.index_num, end_phy, end_ts)
        self.files.append(f)
        if prev is not None:
            ts = prev.header.end_timestamp if prev.is_write_full() else 0
            prev.flush()
            if ts > 0:
                self.index_msg_timestamps.append(ts)
        return f

    def _put_key(self, f: RefIndexFile, phy: int, ts: int, idx_key: str) -> RefIndexFile:
        ok = f.put_key(idx_key, phy, ts)
        while not ok:
            f = self.get_and_create_last_index_file()
            ok = f.put_key(idx_key, phy, ts)
        return f

    def build_index(self, topic: str, phy: int, ts: int, sys_flag: int = 0, uniq_key=None, keys=None) -> None:
        f = self.get_and_create_last_index_file()
        if phy < f.header.end_phy_offset:
            return
        if (sys_flag & TRANSACTION_ROLLBACK_TYPE) == TRANSACTION_ROLLBACK_TYPE:
            return
        if uniq_key is not None:
            f = self._put_key(f, phy, ts, topic + "#" + uniq_key)
        if keys:
            for key in keys.split(" "):
                if len(key) > 0:
                    f = self._put_key(f, phy, ts, topic + "#" + key)

    def query_offset(self, topic: str, key: str, max_num: int, begin: int = 0, end: int = LONG_MAX):
        max_num = min(max_num, self.max_msgs_num_batch)
        offsets: list[int] = []
        last_ts = last_phy = 0
        for i in range(len(self.files), 0, -1):
            f = self.files[i - 1]
            if i == len(self.files):
                last_ts, last_phy = f.header.end_timestamp, f.header.end_phy_offset
            if f.is_time_matched(begin, end):
                f.select_phy_offset(offsets, topic + "#" + key, max_num, begin, end)
            if f.header.begin_timestamp < begin:
                break
            if len(offsets) >= max_num:
                break
        return offsets, last_ts, last_phy

    def flush(self) -> None:
        for f in self.files:
            f.flush()

    def file_bytes(self) -> list[bytes]:
        return [bytes(f.buf) for f in self.files]
