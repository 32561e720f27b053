"""MessageWriter: the put path's coordinator, validate -> assign queue offset -> encode -> append -> dispatch.

Mirrors CommitLog.asyncPutMessage / asyncPutMessages: statuses instead of exceptions for bad input, queue
offsets taken under the put lock, one store timestamp per put (shared by a whole batch). The steps are the
modules beside it: checks (validate), topic (what is known of a topic), encode (properties, tagsCodes,
batch layouts), append (the CommitLog and what moves after it), single (one message), batch (a producer
batch), batch_topic (batch-ConsumeQueue topics). The writer holds the configuration they read and the
PutState (state.py) whose positions they move, the same object the C lane is handed.

Python pays per message, so what does not change between messages (topic bytes, validation, host bytes,
Structs) is computed once and cached, and a record is one Struct.pack plus its body and tail. With the
compiled engine (engine.native) the per-message loops run in C; the pure code is the reference and the
fallback (the C answers None where it leaves a message to Python)."""

from __future__ import annotations

import logging
import threading

from ..config.store_config import wall_clock_ms
from ..formats import record as R
from ..log.commitlog import CommitLog
from ..message import Message, PutResult, PutStatus
from ..services.dispatch import SCHEDULE_TOPIC
from ..validation import topic_problem
from . import append as append_step
from . import batch, checks, single
from .state import PutState
from .topic import QUEUES_MAX, TopicInfo

log = logging.getLogger("rocketstore.put")
MAX_TOPICS_CACHED = 100_000


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
        self.store_host = R.host_to_bytes(config.store_host)
        self.append_crc = config.enabled_append_prop_crc
        self.delay_levels = config.delay_levels()
        self.max_body = config.max_message_size
        self.max_record = config.max_message_size + 64 * 1024  # MessageExtEncoder reserves 64 KiB
        self.lock = threading.RLock()
        self.state = PutState(
            topics={},
            queue_offsets={},
            last_physical_offset=-1,
            lock=self.lock,
            store_host=self.store_host,
            clock=None if config.clock is wall_clock_ms else config.clock,  # None: C reads the wall clock
            max_body=self.max_body,
            max_record=self.max_record,
            put_ok=PutResult(PutStatus.PUT_OK, store_host=self.store_host),
            topic_type=TopicInfo,
            commitlog=commitlog.files,
        )
        self.is_batch_topic = is_batch_topic or (lambda topic: False)
        self.queue_limit = queue_limit or (lambda topic: None)
        # the plain-message fast path writes IPv4 store hosts and no appended CRC
        self.fast_ok = len(self.store_host) == 8 and not self.append_crc
        self.fixed_v4 = R.fixed_part(8, 8)
        self.append_problem = ""  # why append last answered a status (under the put lock)

    # the steps (functions of the writer, bound here as its methods)
    put = single.put
    put_batch = batch.put_batch
    append = append_step.append

    # the put path's positions live in the PutState, where the lane moves them too
    @property
    def queue_offsets(self) -> dict[tuple[str, int], int]:
        """(topic, queue id) -> the next queue offset."""
        return self.state.queue_offsets

    @queue_offsets.setter
    def queue_offsets(self, offsets: dict[tuple[str, int], int]) -> None:
        self.state.queue_offsets = offsets

    @property
    def last_physical_offset(self) -> int:
        """The start of the last record this writer appended, -1 before any."""
        return self.state.last_physical_offset

    @last_physical_offset.setter
    def last_physical_offset(self, offset: int) -> None:
        self.state.last_physical_offset = offset

    # -- topics
    def topic_info(self, topic) -> TopicInfo | None:
        """The topic's TopicInfo (cached in the PutState, where the lane finds it), None (logged) for a name
        that cannot be stored."""
        topics = self.state.topics
        t = topics.get(topic) if isinstance(topic, str) else None
        if t is None:
            problem = topic_problem(topic, self.config.auto_message_version_on_topic_len)
            if problem:
                log.warning("put refused: %s", problem)
                return None
            limit = self.queue_limit(topic)
            t = TopicInfo(
                topic,
                self.config.auto_message_version_on_topic_len and len(topic) > R.MAX_TOPIC_BYTES_V1,
                self.fast_ok and topic != SCHEDULE_TOPIC and not self.is_batch_topic(topic),
                QUEUES_MAX if limit is None else min(limit, QUEUES_MAX),
            )
            if len(topics) < MAX_TOPICS_CACHED:
                topics[topic] = t
        return t

    def forget_topic(self, topic: str) -> None:
        """A topic's kind changed (create_topic): drop what was cached about it."""
        self.state.topics.pop(topic, None)

    def topic_refused(self, topic) -> str:
        """Why topic_info answered None."""
        return checks.topic_refused(topic, self.config.auto_message_version_on_topic_len)

    def hosts(self, msg: Message) -> tuple[bytes, int, bytes] | None:
        """(born host, their sysFlag bits, store host) as the record writes them; None for one it cannot."""
        return checks.hosts(msg, self.store_host)
