"""Messages looked up outside the queues: by physical offset (lookMessageByOffset), by an offset msgId, and
by key through the index (queryMessage), every index hit re-checked against its record."""

from __future__ import annotations

from .. import engine
from ..errors import CorruptDataError, InvalidMessageIdError
from ..formats import record as R

from ..message import QueryResult
from ..services.index_service import LONG_MAX
from ..engine import decode_record

HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def verify_prop_crc(buf, pos: int) -> None:
    """The record's appended properties CRC (force_verify_prop_crc), as recovery checks it."""
    problem = R.verify_crc(buf, R.read_header(buf, pos), pos, True)
    if problem:
        raise CorruptDataError(problem, pos)


class Lookups:
    def __init__(self, commitlog, index, config):
        """`commitlog`: the records; `index`: the IndexService; `config`: force_verify_prop_crc and
        max_msgs_num_batch."""
        self.commitlog = commitlog
        self.index = index
        self.config = config

    def look(self, physical_offset: int):
        """The message whose record starts at a physical offset, or None (lookMessageByOffset)."""
        head = self.commitlog.read(physical_offset, 4)
        if head is None:
            return None
        size = R.I32.unpack_from(head, 0)[0]
        if size <= 0:
            return None
        view = self.commitlog.read(physical_offset, size)
        if view is None:
            return None
        try:
            return self.decode_at(view, physical_offset)
        except CorruptDataError:
            return None

    def decode_at(self, view, physical_offset: int):
        """Decode a record; with force_verify_prop_crc also check its appended CRC (as recovery does)."""
        try:
            m = decode_record(view, 0)
            if self.config.force_verify_prop_crc:
                verify_prop_crc(view, 0)
            return m
        except CorruptDataError as e:
            raise e.in_file(
                self.commitlog.segment_path(physical_offset), physical_offset % self.commitlog.file_size
            ) from None

    def query(
        self, topic: str, key: str, max_count: int = 32, begin_ms: int = 0, end_ms: int | None = None
    ) -> QueryResult:
        """queryMessage (see MessageStore.query): with the native engine the index walk and the re-check of
        every hit in one call (IndexService.query_checked), else query_py, the reference."""
        cfg = self.config
        if engine.native is None or cfg.force_verify_prop_crc:
            return self.query_py(topic, key, max_count, begin_ms, end_ms)
        try:
            return self.index.query_checked(
                QueryResult,
                topic,
                key,
                min(max_count, cfg.max_msgs_num_batch),
                begin_ms,
                LONG_MAX if end_ms is None else end_ms,
                self.commitlog,
            )
        except TypeError:
            if not isinstance(topic, str) or not isinstance(key, str):
                raise TypeError("query takes a topic and a key as strings") from None
            raise

    def query_py(
        self, topic: str, key: str, max_count: int = 32, begin_ms: int = 0, end_ms: int | None = None
    ) -> QueryResult:
        """queryMessage in Python: the index's offsets, each hit's record read and its topic and keys
        re-checked (the reference of the native query)."""
        if not isinstance(topic, str) or not isinstance(key, str):
            raise TypeError("query takes a topic and a key as strings")
        max_num = min(max_count, self.config.max_msgs_num_batch)
        found: dict[int, object] = {}

        def accept(phy: int) -> bool:
            m = found.get(phy)
            if m is None:
                m = self.look(phy)
                if m is None or m.physical_offset != phy:
                    # gone with a deleted CommitLog file (look(0) would give the first record left):
                    # RocketMQ counts it, then drops it
                    return True
                if m.topic != topic or (m.unique_key != key and key not in m.keys):
                    return False
                found[phy] = m
            return True

        offsets, last_ts, last_phy = self.index.query_offsets(
            topic, key, max_num, begin_ms, LONG_MAX if end_ms is None else end_ms, accept
        )
        if not offsets:
            return QueryResult()  # RocketMQ reports how far the index got only along with a hit
        return QueryResult((found[p] for p in sorted(offsets) if p in found), last_ts, last_phy)

    def by_msg_id(self, msg_id: str):
        """The message an offset msgId names (store host + physical offset), or None; a malformed msgId raises
        InvalidMessageIdError."""
        if not isinstance(msg_id, str):
            raise TypeError(f"by_msg_id takes a msgId as a string, not {type(msg_id).__name__}")
        if len(msg_id) not in (32, 56):
            n = len(msg_id)
            raise InvalidMessageIdError(
                msg_id,
                f"{n} character{'' if n == 1 else 's'}, where a msgId has 32 hex characters (IPv4 store host) "
                "or 56 (IPv6)",
            )
        bad = sorted({c for c in msg_id if c not in HEX_DIGITS})
        if bad:
            raise InvalidMessageIdError(msg_id, f"not hexadecimal: {''.join(bad)!r}")
        host, offset = R.parse_msg_id(msg_id)
        m = self.look(offset)
        if m is None or m.physical_offset != offset or m.store_host != host:
            return None
        return m

    def by_unique_key(self, topic: str, uniq_key: str):
        """The first stored message of `topic` whose UNIQ_KEY (the id a producer assigned) is uniq_key."""
        for m in self.query(topic, uniq_key, self.config.max_msgs_num_batch):
            if m.unique_key == uniq_key:
                return m
        return None
