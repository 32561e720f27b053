"""The put path: validate -> assign queue offset -> encode -> append to the CommitLog -> dispatch.

Mirrors CommitLog.asyncPutMessage / asyncPutMessages: statuses instead of exceptions for bad input, queue
offsets taken under the put lock, one store timestamp per put (shared by a whole batch). Python pays per
message, so what does not change between messages (topic bytes, validation, host bytes, Structs) is
computed once and cached, and a record is one Struct.pack plus its body and tail.

With the compiled engine (rocketstore.engine) the per-message loops run in C: the PROPERTIES bytes of each
message with what the queues and the index read from them (computed once, handed to the dispatch), and a
producer batch's records with their CRCs in one call. The pure code beside it is the reference and the
fallback (the C answers None where it leaves a message to Python); `_native = None` runs it alone.
"""

from __future__ import annotations

import logging
import threading
import zlib

import numpy as np

from ..formats import properties as P
from ..formats import record as R
from .. import engine
from . import batch_topic as put_batch_topic
from ..config.store_config import wall_clock_ms
from ..log.commitlog import CommitLog, DoesNotFit
from ..message import Message, PutBatchResult, PutResult, PutStatus
from ..services.bulk_dispatch import props_info
from ..services.dispatch import SCHEDULE_TOPIC, tags_code_for
from ..validation import topic_problem

log = logging.getLogger("rocketstore.put")
_native = engine.native  # None: the pure path alone (the tests compare both)
_NO_KEYS = (0, "", None, False)  # props_info of properties without TAGS, KEYS, UNIQ_KEY or DELAY
MAX_PROPERTIES = 32767
_crc32 = zlib.crc32
_BYTES = (bytes, bytearray, memoryview)
_BYTES_TYPES = frozenset(_BYTES)
_I32_MIN, _I32_MAX, _I64_MIN, _I64_MAX = -(2**31), 2**31 - 1, -(2**63), 2**63 - 1


def _fields_fit(msg: Message) -> bool:
    """The record's fixed-width fields can hold the message's numbers (else MESSAGE_ILLEGAL, not a crash)."""
    flag, rt, sf, pto, bt = (
        msg.flag,
        msg.reconsume_times,
        msg.sys_flag,
        msg.prepared_transaction_offset,
        msg.born_timestamp,
    )
    return (
        type(flag) is int
        and _I32_MIN <= flag <= _I32_MAX
        and type(rt) is int
        and _I32_MIN <= rt <= _I32_MAX
        and type(sf) is int
        and _I32_MIN <= sf <= _I32_MAX
        and type(pto) is int
        and _I64_MIN <= pto <= _I64_MAX
        and (bt is None or (type(bt) is int and _I64_MIN <= bt <= _I64_MAX))
    )


def _fields_problem(msg: Message) -> str:
    """What _fields_fit finds wrong, in words (for a refusal's reason)."""
    for name, lo, hi, java in (
        ("flag", _I32_MIN, _I32_MAX, "int"),
        ("reconsume_times", _I32_MIN, _I32_MAX, "int"),
        ("sys_flag", _I32_MIN, _I32_MAX, "int"),
        ("prepared_transaction_offset", _I64_MIN, _I64_MAX, "long"),
        ("born_timestamp", _I64_MIN, _I64_MAX, "long"),
    ):
        v = getattr(msg, name)
        if v is None and name == "born_timestamp":
            continue
        if type(v) is not int or not lo <= v <= hi:
            return f"{name} {v!r} does not fit the record's field (a Java {java})"
    return "a field does not fit the record"


def _illegal(reason: str) -> PutResult:
    """MESSAGE_ILLEGAL, with why."""
    return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=reason)


def _flags_fit(flags: list) -> bool:
    """Every message of a batch has an int32 FLAG (the other fixed fields come from the first message)."""
    return set(map(type, flags)) == {int} and _I32_MIN <= min(flags) and max(flags) <= _I32_MAX


class TopicInfo:
    """What the put path needs of a topic, computed once: its bytes, its record version, whether the
    plain-message fast path applies, and the record tails of the tags seen so far."""

    __slots__ = ("name", "tail", "v2", "tlen", "magic", "fast", "tag_tails", "queues")

    def __init__(self, name: str, v2: bool, fast: bool, queues: int = _I32_MAX + 1):
        raw = name.encode("utf-8")
        self.name, self.v2, self.tlen = name, v2, len(raw)
        self.queues = queues  # queue ids below this are accepted (a Java int; fewer with a topic config)
        self.tail = R.topic_tail(raw, v2)
        self.magic = R.MAGIC_V2 if v2 else R.MAGIC_V1
        self.fast = fast
        self.tag_tails: dict[str | None, tuple[bytes, int, int, bytes, tuple]] = {}

    def tag_tail(self, tags: str | None) -> tuple[bytes, int, int, bytes, tuple] | None:
        """(tail = TOPIC + PROPERTIES for a message with only these tags, its length, tagsCode, the
        properties alone, their props_info); None for tags that cannot be stored (not a string, or holding
        a separator)."""
        try:
            got = self.tag_tails.get(tags)
        except TypeError:  # unhashable: not a string
            return None
        if got is None:
            if tags is not None and not P.storable_text(tags):
                log.warning("put refused: tags %r must be a string without \\x01 or \\x02", tags)
                return None
            props = f"TAGS\x01{tags}\x02".encode("utf-8", "replace") if tags else b""
            tail = self.tail + R.U16.pack(len(props) & 0xFFFF) + props
            # the tagsCode of what is stored (a separator cuts the tag; an unpaired surrogate became "?")
            info = _info(props)
            got = (tail, len(tail), info[0], props, info)
            if len(self.tag_tails) < 1024:
                self.tag_tails[tags] = got
        return got


class MessageWriter:
    def __init__(
        self, config, commitlog: CommitLog, dispatch, dispatch_batch=None, is_batch_topic=None, queue_limit=None
    ):
        """`dispatch(topic, queue_id, phys, size, tags_code, store_ts, queue_offset, sys_flag, props, end,
        info=...)` builds the queues for each record as it is written, under the put lock (`info`: the
        props_info of `props`, so that nothing reads them again); None leaves it to reput.
        `dispatch_batch` does the same for a producer batch, with lists in place of the per-record values.
        `queue_limit(topic)`: the number of queues a topic's config gives it, None without one."""
        self.config = config
        self.commitlog = commitlog
        self.dispatch = dispatch
        self.dispatch_batch = dispatch_batch
        self.lock = threading.RLock()
        self.queue_offsets: dict[tuple[str, int], int] = {}
        self.last_physical_offset = -1  # start of the last record this writer appended
        self.store_host = R.host_to_bytes(config.store_host)
        self.append_crc = config.enabled_append_prop_crc
        self.delay_levels = config.delay_levels()
        self.max_body = config.max_message_size
        self.max_record = config.max_message_size + 64 * 1024  # MessageExtEncoder reserves 64 KiB
        self._topics: dict[str, TopicInfo | str] = {}  # the put lane (lane.c) reads the fast topics from here
        self.is_batch_topic = is_batch_topic or (lambda topic: False)
        self.queue_limit = queue_limit or (lambda topic: None)
        # the plain-message fast path writes IPv4 store hosts and no appended CRC
        self._fast_ok = len(self.store_host) == 8 and not self.append_crc
        self._fixed_v4 = R.fixed_part(8, 8)
        self.append_problem = ""  # why append last answered a status (under the put lock)

    def append(self, size: int, make) -> int | PutStatus:
        """CommitLog.append under the put lock: the record's offset, or the status a failure answers
        (a record no segment can hold: MESSAGE_ILLEGAL; a segment that cannot be created)."""
        try:
            return self.commitlog.append(size, make)
        except DoesNotFit as e:
            log.warning("put refused: %s", e)
            self.append_problem = str(e)
            return PutStatus.MESSAGE_ILLEGAL
        except OSError as e:
            log.error("put failed: %s", e)
            self.append_problem = f"cannot create the next CommitLog segment: {e}"
            return PutStatus.CREATE_MAPPED_FILE_FAILED

    def forget_topic(self, topic: str) -> None:
        """A topic's kind changed (create_topic): drop what was cached about it."""
        self._topics.pop(topic, None)

    # -- checks shared by put and put_batch
    def _topic(self, topic) -> TopicInfo | None:
        t = self._topics.get(topic) if isinstance(topic, str) else None
        if t is None:
            problem = topic_problem(topic, self.config.auto_message_version_on_topic_len)
            if problem:
                log.warning("put refused: %s", problem)
                return None
            limit = self.queue_limit(topic)
            t = TopicInfo(
                topic,
                self.config.auto_message_version_on_topic_len and len(topic) > R.MAX_TOPIC_BYTES_V1,
                self._fast_ok and topic != SCHEDULE_TOPIC and not self.is_batch_topic(topic),
                _I32_MAX + 1 if limit is None else min(limit, _I32_MAX + 1),
            )
            if len(self._topics) < 100_000:
                self._topics[topic] = t
        return t

    def topic_refused(self, topic) -> str:
        """Why _topic answered None."""
        return topic_problem(topic, self.config.auto_message_version_on_topic_len) or f"topic {topic!r} is refused"

    def queue_refused(self, t: TopicInfo, queue_id) -> str:
        return f"queue id {queue_id!r} is not one of topic {t.name}'s queues (0..{t.queues - 1})"

    def body_refused(self, body) -> str:
        if body is None:
            return "the message has no body"
        if not isinstance(body, _BYTES):
            return f"the body must be bytes, not {type(body).__name__}"
        return f"the body is {len(body)} bytes, over maxMessageSize ({self.max_body} bytes)"

    def record_refused(self, size: int) -> str:
        return (
            f"the record would be {size} bytes, over maxMessageSize + 64 KiB ({self.max_record} bytes: "
            "the body with its topic and properties)"
        )

    @staticmethod
    def properties_refused(plen: int) -> str:
        return f"the properties take {plen} bytes, over {MAX_PROPERTIES} (their length is a Java short)"

    @staticmethod
    def text_refused(msg: Message) -> str:
        return msg.text_problem() or "a tag, key or property cannot be stored"

    def hosts_refused(self, msg: Message) -> str:
        try:
            for h in (msg.born_host, msg.store_host):
                if h:
                    R.host_to_bytes(h)
        except ValueError as e:
            return str(e)
        return "a host cannot be stored"

    def hosts(self, msg: Message) -> tuple[bytes, int, bytes] | None:
        try:
            born = R.host_to_bytes(msg.born_host) if msg.born_host else self.store_host
            store = R.host_to_bytes(msg.store_host) if msg.store_host else self.store_host
        except ValueError as e:
            log.warning("put refused: %s", e)
            return None
        flags = (R.BORNHOST_V6_FLAG if len(born) == 20 else 0) | (R.STOREHOSTADDRESS_V6_FLAG if len(store) == 20 else 0)
        return born, flags, store

    @staticmethod
    def _queue_ok(t: TopicInfo, queue_id) -> bool:
        """A queue id the record's int32 field holds and the topic's config has (the broker's msgCheck:
        queueId < max(writeQueueNums, readQueueNums))."""
        if type(queue_id) is int and 0 <= queue_id < t.queues:
            return True
        log.warning("put refused: queue id %r is not one of topic %s's queues (0..%d)", queue_id, t.name, t.queues - 1)
        return False

    @staticmethod
    def _props(msg: Message, drop_crc: bool) -> bytes | None:
        """The PROPERTIES bytes, None when a tag, key or property cannot be stored (Message.text_problem)."""
        if _native is not None:
            got = _native.message_props(msg, drop_crc)
            if got is not None:
                return got
        return MessageWriter._props_py(msg, drop_crc)

    @staticmethod
    def _props_py(msg: Message, drop_crc: bool) -> bytes | None:
        """_props in Python: the reference, and the path of what the compiled one leaves to it."""
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

    def _tags_code(self, topic: str, props: bytes, store_ts: int, sys_flag: int, info) -> int:
        """`info`: _info(props)."""
        if topic != SCHEDULE_TOPIC and info is not None:  # the tagsCode of the TAGS as stored, as reput reads it
            return info[0]
        return tags_code_for(topic, P.parse_properties(props), store_ts, sys_flag, self.delay_levels) if props else 0

    # -- one message
    def put(self, msg: Message, queue_id: int) -> PutResult:
        try:
            t = self._topics.get(msg.topic)
        except TypeError:  # an unhashable topic: _put refuses it
            t = None
        if (
            t is not None
            and t.fast
            and type(msg.body) is bytes
            and msg.raw_properties is None
            and not msg.sys_flag
            and msg.born_host is None
            and msg.store_host is None
            and type(queue_id) is int
            and 0 <= queue_id < t.queues
        ):
            if not msg.properties and not msg.keys:
                if not _fields_fit(msg):
                    return _illegal(_fields_problem(msg))
                return self._put_plain(msg, queue_id, t)
            if _native is not None:
                return self._put_keyed(msg, queue_id, t)
        return self._put_checked(msg, queue_id)

    def _put_checked(self, msg: Message, queue_id: int) -> PutResult:
        """The general path, after the checks of put that it does not make itself."""
        if not isinstance(msg.body, _BYTES):
            return _illegal(self.body_refused(msg.body))
        if not _fields_fit(msg):
            return _illegal(_fields_problem(msg))
        return self._put(msg, queue_id)

    def _put_plain(self, msg: Message, queue_id: int, t: TopicInfo) -> PutResult:
        """The common message (a topic, a body, maybe tags), with nothing re-derived that the topic's
        cache already knows; the same bytes as _put writes."""
        body = msg.body
        if body is None or len(body) > self.max_body:
            return _illegal(self.body_refused(body))
        got = t.tag_tail(msg.tags)
        if got is None:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=self.text_refused(msg))
        tail, tail_len, code, props, info = got
        if len(props) > MAX_PROPERTIES:
            return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, reason=self.properties_refused(len(props)))
        blen = len(body)
        size = 88 + blen + tail_len
        if size > self.max_record:
            return _illegal(self.record_refused(size))
        return self._write_plain(msg, queue_id, t, body, blen, size, tail, code, props, info)

    def _put_keyed(self, msg: Message, queue_id: int, t: TopicInfo) -> PutResult:
        """A producer's message (KEYS, UNIQ_KEY, user properties) on the plain path: its record, properties
        and their props_info made in one C call (keyed_record) under the put lock, with nothing re-derived
        that the topic's cache knows; the same bytes and statuses as _put, which decides whatever the C
        leaves to Python (before the clock is read) and writes the record that opens a new segment."""
        key = (t.name, queue_id)
        with self.lock:
            files = self.commitlog.files.files
            if not files:
                return self._put_checked(msg, queue_id)
            mf = files[-1]
            qoff = self.queue_offsets.get(key, 0)
            phys = mf.file_from_offset + mf.wrote
            clock = self.config.clock
            got = _native.keyed_record(
                msg,
                t.tail,
                t.magic,
                queue_id,
                qoff,
                phys,
                mf.file_size - mf.wrote,
                self.max_body,
                self.max_record,
                self.store_host,
                None if clock is wall_clock_ms else clock,
            )
            if got is None:
                return self._put_checked(msg, queue_id)
            record, props, info, store_ts = got
            mf.append(record)
            size = len(record)
            self.last_physical_offset = phys
            mf.store_timestamp = store_ts
            self.queue_offsets[key] = qoff + 1
            if self.dispatch is not None:
                self.dispatch(t.name, queue_id, phys, size, info[0], store_ts, qoff, 0, props, phys + size, info=info)
        return PutResult(PutStatus.PUT_OK, phys, size, qoff, self.store_host, store_ts)

    def _write_plain(
        self,
        msg: Message,
        queue_id: int,
        t: TopicInfo,
        body: bytes,
        blen: int,
        size: int,
        tail: bytes,
        code: int,
        props: bytes,
        info,
    ) -> PutResult:
        """The record of _put_plain (IPv4 hosts, sysFlag 0, no appended CRC) and its dispatch."""
        clock = self.config.clock
        born_ts = msg.born_timestamp if msg.born_timestamp is not None else clock()
        crc = _crc32(body) & 0x7FFFFFFF
        host = self.store_host
        key = (t.name, queue_id)
        with self.lock:
            qoff = self.queue_offsets.get(key, 0)
            store_ts = clock()
            files = self.commitlog.files.files
            mf = files[-1] if files else None
            if mf is not None and mf.file_size - mf.wrote >= size + R.END_FILE_MIN_BLANK_LENGTH:
                phys = mf.file_from_offset + mf.wrote
                mf.append(
                    self._fixed_v4.pack(
                        size,
                        t.magic,
                        crc,
                        queue_id,
                        msg.flag,
                        qoff,
                        phys,
                        0,
                        born_ts,
                        host,
                        store_ts,
                        host,
                        msg.reconsume_times,
                        msg.prepared_transaction_offset,
                        blen,
                    )
                    + body
                    + tail
                )
            else:  # a new segment (and a BLANK filler) first: the general append knows how
                phys = self.append(
                    size,
                    lambda p: (
                        self._fixed_v4.pack(
                            size,
                            t.magic,
                            crc,
                            queue_id,
                            msg.flag,
                            qoff,
                            p,
                            0,
                            born_ts,
                            host,
                            store_ts,
                            host,
                            msg.reconsume_times,
                            msg.prepared_transaction_offset,
                            blen,
                        )
                        + body
                        + tail
                    ),
                )
                if type(phys) is PutStatus:
                    return PutResult(phys, reason=self.append_problem)
            self.last_physical_offset = phys
            self.commitlog.files.files[-1].store_timestamp = store_ts
            self.queue_offsets[key] = qoff + 1
            if self.dispatch is not None:
                self.dispatch(t.name, queue_id, phys, size, code, store_ts, qoff, 0, props, phys + size, info=info)
        return PutResult(PutStatus.PUT_OK, phys, size, qoff, host, store_ts)

    def _put(self, msg: Message, queue_id: int) -> PutResult:
        t = self._topic(msg.topic)
        body = msg.body
        if t is None:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=self.topic_refused(msg.topic))
        if not self._queue_ok(t, queue_id):
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=self.queue_refused(t, queue_id))
        if body is None or len(body) > self.max_body:
            return _illegal(self.body_refused(body))
        if self.is_batch_topic(t.name):
            return put_batch_topic.put(self, msg, queue_id, t)
        sys_flag = msg.sys_flag
        if sys_flag & R.INNER_BATCH_FLAG:  # inner batches need a BatchCQ topic
            return _illegal(f"sysFlag has INNER_BATCH_FLAG, but topic {t.name} is no batch ConsumeQueue topic")
        props = self._props(msg, self.append_crc)
        if props is None:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=self.text_refused(msg))
        if b"INNER_NUM\x01" in props and P.INNER_NUM in P.parse_properties(props):  # RocketMQ's rule
            return _illegal("property INNER_NUM without INNER_BATCH_FLAG in sysFlag")
        stored = R.encode_properties(props, self.append_crc, single=True) if self.append_crc else props
        plen = len(stored)
        if plen > MAX_PROPERTIES:
            return PutResult(PutStatus.PROPERTIES_SIZE_EXCEEDED, reason=self.properties_refused(plen))
        hosts = self.hosts(msg)
        if hosts is None:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, reason=self.hosts_refused(msg))
        born, hflags, store_host = hosts
        sys_flag = R.with_host_flags(sys_flag, hflags)
        born_ts = msg.born_timestamp if msg.born_timestamp is not None else self.config.clock()
        blen = len(body)
        size = 72 + len(born) + len(store_host) + blen + len(t.tail) + 2 + plen
        if size > self.max_record:
            return _illegal(self.record_refused(size))
        crc = _crc32(body) & 0x7FFFFFFF
        fixed = R.fixed_part(len(born), len(store_host))
        tail = t.tail + R.U16.pack(plen) + stored
        magic = R.MAGIC_V2 if t.v2 else R.MAGIC_V1
        counts = R.gets_queue_unit(sys_flag)  # only these take a queue offset
        key = (t.name, queue_id)
        append_crc = self.append_crc
        with self.lock:
            qoff = self.queue_offsets.get(key, 0) if counts else 0
            store_ts = self.config.clock()

            def make(phys):
                rec = (
                    fixed.pack(
                        size,
                        magic,
                        crc,
                        queue_id,
                        msg.flag,
                        qoff,
                        phys,
                        sys_flag,
                        born_ts,
                        born,
                        store_ts,
                        store_host,
                        msg.reconsume_times,
                        msg.prepared_transaction_offset,
                        blen,
                    )
                    + body
                    + tail
                )
                return R.fill_crc_property(rec) if append_crc else rec

            phys = self.append(size, make)
            if type(phys) is PutStatus:
                return PutResult(phys, reason=self.append_problem)
            self.last_physical_offset = phys
            self.commitlog.files.files[-1].store_timestamp = store_ts
            if counts:
                self.queue_offsets[key] = qoff + 1
            if self.dispatch is not None:
                info = _info(props)
                self.dispatch(
                    t.name,
                    queue_id,
                    phys,
                    size,
                    self._tags_code(t.name, props, store_ts, sys_flag, info),
                    store_ts,
                    qoff,
                    sys_flag,
                    props,
                    phys + size,
                    info=info,
                )
        return PutResult(PutStatus.PUT_OK, phys, size, qoff, store_host, store_ts)

    # -- a producer batch (putMessages): one record per message, all in one segment, all or nothing
    def put_batch(self, msgs: list[Message], queue_id: int) -> PutBatchResult:  # noqa: C901 - past the ceiling, to be split
        """Python pays per message, so a batch is handled a column at a time: bodies, lengths and CRCs with
        map(), properties once per distinct value, the fixed fields of every record with numpy, and the
        records joined into one write."""
        if not msgs:
            return PutBatchResult(PutStatus.MESSAGE_ILLEGAL, reason="the batch is empty")
        first = msgs[0]
        t = self._topic(first.topic)
        if t is None:
            return PutBatchResult(PutStatus.MESSAGE_ILLEGAL, reason=self.topic_refused(first.topic))
        if not self._queue_ok(t, queue_id):
            return PutBatchResult(PutStatus.MESSAGE_ILLEGAL, reason=self.queue_refused(t, queue_id))
        if self.is_batch_topic(t.name):
            return put_batch_topic.put_batch(self, msgs, queue_id, t)
        if R.transaction_type(first.sys_flag) != R.TRANSACTION_NOT_TYPE or first.sys_flag & R.INNER_BATCH_FLAG:
            return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)  # batches carry no transactions (asyncPutMessages)
        hosts = self.hosts(first)
        if hosts is None:
            return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
        born, hflags, store_host = hosts
        sys_flag = R.with_host_flags(first.sys_flag, hflags)
        born_ts = first.born_timestamp if first.born_timestamp is not None else self.config.clock()
        append_crc = self.append_crc
        reserve = P.CRC32_RESERVED_LEN if append_crc else 0
        tname = t.name
        n = len(msgs)
        # the columns, checked in one C pass (None: a batch the checks below look at closer)
        got = _native.batch_fields(msgs, tname) if _native is not None and type(msgs) is list else None
        if got is not None:
            bodies, flags, blens = got
            if not _fields_fit(first):
                return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
        else:
            if [m.topic for m in msgs].count(tname) != n:
                log.warning("put_batch refused: one batch holds several topics (the first is %r)", tname)
                return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
            bodies = [m.body for m in msgs]
            flags = [m.flag for m in msgs]
            if not set(map(type, bodies)) <= _BYTES_TYPES or not _fields_fit(first) or not _flags_fit(flags):
                return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)  # no body, a body not bytes, a field out of range
            blens = list(map(len, bodies))
        if max(blens) > self.max_body:
            return PutBatchResult(
                PutStatus.MESSAGE_ILLEGAL,
                reason=f"a body is {max(blens)} bytes, over maxMessageSize ({self.max_body} bytes)",
            )
        codes = None
        if _native is not None:
            props_list, infos, uniform, careful, codes = _native.batch_props(msgs, append_crc)
            if careful and None in props_list:  # what the C leaves to Python
                for i, props in enumerate(props_list):
                    if props is None:
                        props_list[i] = props = self._props_py(msgs[i], append_crc)
                        infos[i] = _info(props) if props is not None else None
                uniform = props_list.count(props_list[0]) == n
                codes = None
        else:
            props_list, uniform = self._batch_props(msgs, append_crc)
            infos, careful = None, True
        if careful and None in props_list:
            return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)  # a tag, key or property cannot be stored
        for props in (props_list[:1] if uniform else props_list) if careful else ():  # (no DELAY: not careful)
            if b"DELAY\x01" in props and P.parse_properties(props).get(P.DELAY, "0").strip() not in ("", "0"):
                return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)  # RocketMQ refuses delayed batches
        plens = list(map(len, props_list))
        if max(plens) + reserve > MAX_PROPERTIES:
            return PutBatchResult(
                PutStatus.PROPERTIES_SIZE_EXCEEDED, reason=self.properties_refused(max(plens) + reserve)
            )
        if 22 * n + sum(blens) + sum(plens) > self.max_body:  # the encoded batch is one "body" to RocketMQ
            return PutBatchResult(
                PutStatus.MESSAGE_ILLEGAL,
                reason=f"the encoded batch is {22 * n + sum(blens) + sum(plens)} bytes, over maxMessageSize "
                f"({self.max_body} bytes)",
            )
        fixed_len = R.fixed_dtype(len(born), len(store_host)).itemsize
        sizes = np.array(blens, dtype=np.int64) + (
            np.array(plens, dtype=np.int64) + (fixed_len + len(t.tail) + 2 + reserve)
        )
        total = int(sizes.sum())
        magic = R.MAGIC_V2 if t.v2 else R.MAGIC_V1
        if _native is not None and (got is not None or set(map(type, bodies)) == {bytes}):
            return self._put_batch_native(
                msgs,
                queue_id,
                t,
                bodies,
                flags,
                props_list,
                infos,
                codes,
                uniform,
                sizes,
                total,
                born,
                store_host,
                sys_flag,
                born_ts,
                magic,
            )
        crcs = np.fromiter(map(_crc32, bodies), dtype=np.int64, count=n) & 0x7FFFFFFF
        if uniform:
            tails = [t.tail + R.U16.pack(plens[0] + reserve) + props_list[0] + bytes(reserve)] * n
        else:
            tails = [t.tail + R.U16.pack(pl + reserve) + pr + bytes(reserve) for pl, pr in zip(plens, props_list)]
        same_size = uniform and blens.count(blens[0]) == n
        key = (tname, queue_id)
        with self.lock:
            base = self.queue_offsets.get(key, 0)
            store_ts = self.config.clock()
            starts = None

            def make(phys):
                nonlocal starts
                starts = np.empty(n, dtype=np.int64)
                starts[0] = phys
                np.cumsum(sizes[:-1], out=starts[1:])
                starts[1:] += phys
                hb = R.fixed_parts(
                    born=born,
                    store_host=store_host,
                    sizes=sizes,
                    magic=magic,
                    crcs=crcs,
                    queue_id=queue_id,
                    flags=flags,
                    first_queue_offset=base,
                    phys=starts,
                    sys_flag=sys_flag,
                    born_timestamp=born_ts,
                    store_timestamp=store_ts,
                    reconsume_times=first.reconsume_times,
                    body_lens=blens,
                ).tobytes()
                if same_size:
                    data = _interleave_uniform(hb, bodies, tails[0], n, fixed_len, blens[0])
                else:
                    parts = [None] * (3 * n)
                    parts[0::3] = [hb[i : i + fixed_len] for i in range(0, n * fixed_len, fixed_len)]
                    parts[1::3] = bodies
                    parts[2::3] = tails
                    data = b"".join(parts)
                return _fill_crc_properties(data, sizes) if append_crc else data

            phys = self.append(total, make)
            if type(phys) is PutStatus:
                return PutBatchResult(phys)
            codes = None
            if self.dispatch is not None and uniform:
                info = _info(props_list[0])
                infos = [info] * n
                codes = np.full(n, self._tags_code(tname, props_list[0], store_ts, sys_flag, info), dtype=np.int64)
            elif self.dispatch is not None:
                infos = [_info(props) for props in props_list]
            else:
                infos = None
            self._batch_written(
                tname, queue_id, base, starts, sizes, store_ts, sys_flag, props_list, infos, codes, phys + total
            )
        return PutBatchResult(PutStatus.PUT_OK, starts, sizes, phys, total, base, store_host, store_ts)

    def _put_batch_native(
        self,
        msgs,
        queue_id,
        t,
        bodies,
        flags,
        props_list,
        infos,
        codes,
        uniform,
        sizes,
        total,
        born,
        store_host,
        sys_flag,
        born_ts,
        magic,
    ) -> PutBatchResult:
        """put_batch's write and dispatch with the compiled engine: the records, CRCs included, in one call
        (the same bytes as the numpy path), and the properties' infos handed to the index as they are."""
        n = len(msgs)
        first = msgs[0]
        tname = t.name
        append_crc = self.append_crc
        reserve = P.CRC32_RESERVED_LEN if append_crc else 0
        fixed = R.fixed_part(len(born), len(store_host))
        key = (tname, queue_id)
        with self.lock:
            base = self.queue_offsets.get(key, 0)
            store_ts = self.config.clock()
            template = fixed.pack(
                0,
                magic,
                0,
                queue_id,
                0,
                0,
                0,
                sys_flag,
                born_ts,
                born,
                store_ts,
                store_host,
                first.reconsume_times,
                0,
                0,
            )
            phys = self.append(
                total,
                lambda p: _native.encode_batch(
                    template,
                    bodies,
                    props_list[0] if uniform else props_list,
                    t.tail,
                    reserve,
                    flags,
                    base,
                    p,
                    total,
                    append_crc,
                ),
            )
            if type(phys) is PutStatus:
                return PutBatchResult(phys)
            starts = np.empty(n, dtype=np.int64)
            starts[0] = phys
            np.cumsum(sizes[:-1], out=starts[1:])
            starts[1:] += phys
            if tname != SCHEDULE_TOPIC and codes is not None and None not in infos:
                codes = np.frombuffer(codes, dtype=np.int64)
            else:
                codes = None
            self._batch_written(
                tname, queue_id, base, starts, sizes, store_ts, sys_flag, props_list, infos, codes, phys + total
            )
        return PutBatchResult(PutStatus.PUT_OK, starts, sizes, phys, total, base, store_host, store_ts)

    def _batch_written(
        self, tname, queue_id, base, starts, sizes, store_ts, sys_flag, props_list, infos, codes, end
    ) -> None:
        """After a producer batch is appended (under the put lock), by both encoders: the queue offset moves
        on, and the records go to the dispatch with their tagsCodes (computed here when `codes` is None)."""
        n = len(starts)
        self.queue_offsets[(tname, queue_id)] = base + n
        self.last_physical_offset = int(starts[-1])
        self.commitlog.files.files[-1].store_timestamp = store_ts
        if self.dispatch is None:
            return
        if codes is None:
            codes = np.array(
                [self._tags_code(tname, props, store_ts, sys_flag, info) for props, info in zip(props_list, infos)],
                dtype=np.int64,
            )
        self.dispatch_batch(
            tname, queue_id, starts, sizes, codes, store_ts, base, sys_flag, props_list, end, infos=infos
        )

    def _batch_props(self, msgs: list[Message], drop_crc: bool) -> tuple[list[bytes], bool]:
        """Each message's PROPERTIES bytes, and whether they are all the same (computed once, then)."""
        first = msgs[0]
        n = len(msgs)
        plain = [m.raw_properties for m in msgs].count(None) == n and not any([m.properties for m in msgs])
        if plain and [m.keys for m in msgs].count(None) == n and [m.tags for m in msgs].count(first.tags) == n:
            return [self._props(first, drop_crc)] * n, True
        props_list = [self._props(m, drop_crc) for m in msgs]
        return props_list, props_list.count(props_list[0]) == n


def lane_engine():
    """The compiled module when it has the put lane (put_lane.py), else None (the pure engine)."""
    return _native if _native is not None and hasattr(_native, "PutLane") else None


def _info(props: bytes):
    """props_info of stored properties (bulk_dispatch's, or its compiled twin): what the queues and the index
    read from them, computed once per record."""
    if not props:
        return _NO_KEYS
    return _native.props_info(props) if _native is not None else props_info(props)


def _interleave_uniform(headers: bytes, bodies: list, tail: bytes, n: int, fixed_len: int, body_len: int):
    """Records of one size as an (n, size) byte matrix: headers, bodies and the shared tail are each one
    strided numpy copy instead of 3n joined parts."""
    out = np.empty((n, fixed_len + body_len + len(tail)), dtype=np.uint8)
    out[:, :fixed_len] = np.frombuffer(headers, dtype=np.uint8).reshape(n, fixed_len)
    out[:, fixed_len : fixed_len + body_len] = np.frombuffer(b"".join(bodies), dtype=np.uint8).reshape(n, body_len)
    out[:, fixed_len + body_len :] = np.frombuffer(tail, dtype=np.uint8)
    return out.reshape(-1)


def _fill_crc_properties(data: bytes, sizes: np.ndarray) -> bytes:
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
