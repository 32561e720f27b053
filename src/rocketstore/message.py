"""The public message types: what a caller puts, and the results of put and get."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from .formats import properties as P

from .formats.record import INNER_BATCH_FLAG, StoredMessage, body_crc, make_msg_id
from .engine import decode_messages, parse_properties


class PutStatus(enum.Enum):
    """RocketMQ's PutMessageStatus."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class GetStatus(enum.Enum):
    """RocketMQ's GetMessageStatus."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    OFFSET_RESET = "OFFSET_RESET"


@dataclass
class Message:
    """A message to put. `tags` and `keys` become the TAGS and KEYS properties (keys space-separated).

    `raw_properties` replaces properties/tags/keys with an exact properties string, for replaying what
    another store (or a RocketMQ proxy) produced byte for byte."""

    topic: str
    body: bytes = b""
    tags: str | None = None
    keys: list[str] | str | None = None
    properties: dict[str, str] | None = None
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int | None = None
    born_host: str | None = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    raw_properties: str | bytes | None = None
    store_host: str | None = None  # this message's STOREHOST, when not the store's own (replays, proxies)

    def text_problem(self) -> str | None:
        """None when the tags, keys and property names and values can be stored as given (strings without
        the separators \x01 and \x02, see properties.storable_text), else what is wrong. raw_properties is
        the exact stored string and is not checked."""
        if self.raw_properties is not None:
            return None
        if self.tags is not None and not P.storable_text(self.tags):
            return f"tags {self.tags!r} must be a string without \\x01 or \\x02"
        keys = self.keys
        if keys is not None:
            if not isinstance(keys, (str, list, tuple)):
                return f"keys must be a string or a list of strings, not {type(keys).__name__}"
            for k in (keys,) if isinstance(keys, str) else keys:
                if not P.storable_text(k):
                    return f"key {k!r} must be a string without \\x01 or \\x02"
        props = self.properties
        if props is not None:
            if not isinstance(props, dict):
                return f"properties must be a dict, not {type(props).__name__}"
            for k, v in props.items():
                if not P.storable_text(k) or not (v is None or P.storable_text(v)):
                    return f"property {k!r}={v!r}: names and values must be strings without \\x01 or \\x02"
        return None

    def property_map(self) -> dict[str, str]:
        if self.raw_properties is not None:
            return parse_properties(self.raw_properties)
        props = dict(self.properties or {})
        if self.keys:
            props.setdefault(P.KEYS, self.keys if isinstance(self.keys, str) else P.KEY_SEPARATOR.join(self.keys))
        if self.tags:
            props.setdefault(P.TAGS, self.tags)
        return props

    def properties_bytes(self, drop_crc: bool = False) -> bytes:
        if self.raw_properties is not None:
            raw = self.raw_properties
            raw = raw.encode("utf-8", "replace") if isinstance(raw, str) else bytes(raw)
            if drop_crc and P.CRC32.encode() in raw:
                return P.format_properties({k: v for k, v in parse_properties(raw).items() if k != P.CRC32}).encode(
                    "utf-8", "surrogatepass"
                )
            return raw
        props = self.property_map()
        if drop_crc:
            props.pop(P.CRC32, None)
        return P.format_properties(props).encode("utf-8", "replace")  # Java: "?" for an unpaired surrogate


class PutResult:
    """The answer to one put: status, where the record went (queue id, queue offset, physical offset) and
    its msgId. queue_id is -1 when nothing was put. `reason`: for a refusal, why, in words (the body over
    maxMessageSize, the properties too long, a bad topic or queue id...); None for PUT_OK. The status is
    RocketMQ's; the reason is rocketstore's."""

    __slots__ = (
        "status",
        "physical_offset",
        "size",
        "queue_offset",
        "store_timestamp",
        "msg_num",
        "_host",
        "queue_id",
        "_reason",
    )

    def __init__(
        self,
        status: PutStatus,
        physical_offset: int = -1,
        size: int = 0,
        queue_offset: int = -1,
        store_host: bytes | None = None,
        store_timestamp: int = 0,
        msg_num: int = 1,
        reason: str | None = None,
    ):
        self.status = status
        self.physical_offset = physical_offset
        self.size = size
        self.queue_offset = queue_offset
        self.store_timestamp = store_timestamp
        self.msg_num = msg_num
        self._host = store_host
        self.queue_id = -1  # set by the store, which knows the queue it chose
        if reason is not None:  # left unset on PUT_OK (the put lane's C makes those without __init__)
            self._reason = reason

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def reason(self) -> str | None:
        """Why the put was refused, in words; None for PUT_OK."""
        return getattr(self, "_reason", None)

    @property
    def store_host(self) -> bytes | None:
        """The 8-byte STOREHOST the record was written with (the offset msgId's first half)."""
        return self._host

    @property
    def msg_id(self) -> str | None:
        """The offset msgId: store host + physical offset (computed when asked for)."""
        return make_msg_id(self._host, self.physical_offset) if self._host is not None else None

    def __repr__(self) -> str:
        return (
            f"PutResult({self.status.name}, physical_offset={self.physical_offset}, size={self.size}, "
            f"queue_id={self.queue_id}, queue_offset={self.queue_offset}, msg_id={self.msg_id}, store_timestamp={self.store_timestamp}"
            + (f", reason={self.reason!r})" if self.reason is not None else ")")
        )


class PutBatchResult:
    """A producer batch: one status for all (all or nothing) and the per-message results, built on demand."""

    def __init__(
        self,
        status: PutStatus,
        offsets=(),
        sizes=(),
        physical_offset: int = -1,
        size: int = 0,
        queue_offset: int = -1,
        store_host: bytes | None = None,
        store_timestamp: int = 0,
        reason: str | None = None,
    ):
        self.status = status
        self.reason = reason  # why the batch was refused, in words (as PutResult.reason); None for PUT_OK
        self.physical_offset = physical_offset
        self.size = size
        self.queue_offset = queue_offset
        self.store_timestamp = store_timestamp
        self._offsets, self._sizes, self._host = offsets, sizes, store_host  # numpy arrays from the put path
        self.queue_id = -1  # set by the store, which knows the queue it chose
        self._results = None

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def results(self) -> list[PutResult]:
        if self._results is None:
            self._results = [
                PutResult(self.status, p, s, self.queue_offset + i, self._host, self.store_timestamp)
                for i, (p, s) in enumerate(zip(_ints(self._offsets), _ints(self._sizes)))
            ]
            for r in self._results:
                r.queue_id = self.queue_id
        return self._results

    @property
    def msg_ids(self) -> list[str]:
        return [make_msg_id(self._host, p) for p in _ints(self._offsets)]

    def __len__(self):
        return len(self._offsets)

    def __iter__(self):
        return iter(self.results)

    def __getitem__(self, i):
        return self.results[i]

    def __repr__(self) -> str:
        return (
            f"PutBatchResult({self.status.name}, {len(self)} messages, physical_offset={self.physical_offset}, "
            f"size={self.size}, queue_id={self.queue_id}, queue_offset={self.queue_offset})"
        )


def _ints(values) -> list[int]:
    return values.tolist() if hasattr(values, "tolist") else list(values)


@dataclass
class GetResult:
    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[StoredMessage] = field(default_factory=list)
    buffer_total_size: int = 0
    message_count: int = 0
    filter_message_count: int = 0
    requested_offset: int | None = None  # set for batch ConsumeQueues, whose first batch may start before it

    @property
    def found(self) -> bool:
        return self.status is GetStatus.FOUND

    def unpacked(self) -> list["BatchedMessage"]:
        """The single messages: an inner-batch record (a batch ConsumeQueue topic) gives each message it
        holds, from the requested offset on; any other record gives itself."""
        out = []
        for m in self.messages:
            if not m.sys_flag & INNER_BATCH_FLAG:
                out.append(m)
                continue
            for i, inner in enumerate(decode_messages(m.body)):
                qoff = m.queue_offset + i
                if self.requested_offset is None or qoff >= self.requested_offset:
                    out.append(BatchedMessage(m, i, inner))
        return out


class BatchedMessage:
    """One message of an inner batch: its own body, flag and properties; the rest from the batch record."""

    __slots__ = ("batch", "index", "body", "flag", "properties_raw", "_props")

    def __init__(self, batch: StoredMessage, index: int, inner):
        self.batch, self.index = batch, index
        self.body, self.flag, self.properties_raw = inner.body, inner.flag, inner.properties_raw
        self._props = None

    @property
    def properties(self) -> dict[str, str]:
        if self._props is None:
            self._props = parse_properties(self.properties_raw) if self.properties_raw else {}
        return self._props

    topic = property(lambda self: self.batch.topic)
    queue_id = property(lambda self: self.batch.queue_id)
    queue_offset = property(lambda self: self.batch.queue_offset + self.index)
    physical_offset = property(lambda self: self.batch.physical_offset)
    store_timestamp = property(lambda self: self.batch.store_timestamp)
    born_timestamp = property(lambda self: self.batch.born_timestamp)
    store_host = property(lambda self: self.batch.store_host)
    born_host = property(lambda self: self.batch.born_host)
    msg_id = property(lambda self: self.batch.msg_id)  # the batch record's, as RocketMQ answers
    sys_flag = property(lambda self: self.batch.sys_flag)
    reconsume_times = property(lambda self: self.batch.reconsume_times)
    body_crc = property(lambda self: body_crc(self.body))  # the inner message's own body
    tags = property(lambda self: self.properties.get(P.TAGS))
    keys = property(lambda self: [k for k in (self.properties.get(P.KEYS) or "").split(P.KEY_SEPARATOR) if k])
    unique_key = property(lambda self: self.properties.get(P.UNIQ_KEY))

    def __repr__(self) -> str:
        return f"BatchedMessage(topic={self.topic!r}, queue_offset={self.queue_offset}, tags={self.tags!r})"


class QueryResult(list):
    """queryMessage's answer: the messages found, and how far the index had got (its newest file's end)."""

    def __init__(self, messages=(), index_last_update_timestamp: int = 0, index_last_update_phy_offset: int = 0):
        list.__init__(self, messages)  # not super(): a query builds one per call
        self.index_last_update_timestamp = index_last_update_timestamp
        self.index_last_update_phy_offset = index_last_update_phy_offset
