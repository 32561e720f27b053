"""MessageStore: the face of rocketstore (RocketMQ's DefaultMessageStore). It opens and closes a store and
hands each call to the part that owns it: the CommitLog, the queue table (log/queue_table.py), the topic
table, the checkpoint file, the dispatch pipeline and the services (reput, flush, cleanup, recovery).

The parts are private (self._commitlog, self._queues, ...): adapters use the methods below, store-layer
modules are handed the parts they work on (get_message.ReadParts, put/lane.make_lane), so ruff's SLF001
flags any module that reaches into one."""

from __future__ import annotations

import logging
import os
import time

from ..read import get_message
from ..maintenance import rebuild_swap
from ..config import topics as TC
from ..config.store_config import SYNC_FLUSH, StoreConfig
from .consumer import Consumer, ConsumerOffsets
from ..config.deleted_topics import DeletedTopics
from ..errors import CorruptDataError, StoreClosedError, StoreNotWritableError, StoreOpenError
from .file_sizes import resolve_file_sizes
from ..files.transient_pool import TransientStorePool
from ..filter.bloom import BloomFilter
from ..filter.manager import ConsumerFilterManager
from ..files.layout import StoreLayout
from ..log.checkpoint_file import CheckpointFile
from ..log.commitlog import CommitLog
from ..log.consume_queue import LOWER, UPPER
from ..log.queue_table import QueueTable
from ..read.lookups import Lookups
from ..read.long_poll import Arrivals
from ..message import GetResult, GetStatus, Message, PutBatchResult, PutResult, PutStatus, QueryResult
from ..put.writer import MessageWriter
from ..put.lane import make_lane
from ..services import recovery
from ..services.calc_bitmap import CalcBitMapDispatcher
from ..services.cleanup import CleanupService
from ..services.cq_dispatch import ConsumeQueueDispatcher
from ..services.flush import FlushServices
from ..services.index_service import IndexService
from ..services.pipeline import DispatchPipeline
from ..services.queue_check import QueueCheck
from ..services.reput import ReputService
from .lock import StoreLock
from .topic_table import TopicTable
from ..validation import group_problem, topic_problem

__all__ = ["MessageStore", "resolve_file_sizes"]  # resolve_file_sizes: file_sizes.py's, imported from here too

log = logging.getLogger("rocketstore")
_WAITING = (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.OFFSET_OVERFLOW_ONE)  # what a long poll waits past


def _machine_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 * 1024**3


def _cannot_write(e: OSError) -> StoreOpenError:
    """A writable open that could not write what it must (a full disk: a segment's blocks, a file recovery
    creates, the lock or abort file), as one line naming the file."""
    if e.filename and e.strerror and not str(e).startswith(e.strerror):
        e = f"{e.filename}: {e.strerror[:1].lower()}{e.strerror[1:]}"
    return StoreOpenError(f"cannot open for writing: {e}")


def _write_in_place(path: str, data: bytes) -> None:
    """Write a small file without truncating it first; a new one that a full disk refuses is not left behind
    (an empty `abort` would make the next open recover as after a crash)."""
    created = not os.path.exists(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    except OSError:
        if created:
            os.unlink(path)
        raise
    finally:
        os.close(fd)


class MessageStore:
    """A RocketMQ 5.x store directory: put, get, look up by offset and time. Open with MessageStore.open()."""

    def __init__(
        self,
        root: str,
        config: StoreConfig,
        read_only: bool,
        lock: StoreLock | None = None,
        check_commitlog: bool = True,
    ):
        self.root = root
        # public, unlike the parts below: a value (the paths under root, StoreLayout), with no state of its
        # own and nothing to run, so reading it reaches into nothing
        self.layout = StoreLayout(root)
        self.config = config
        self.read_only = read_only
        writable = not read_only
        self.check_commitlog = check_commitlog  # False: trust the queues, skip CommitLog recovery
        self.delay_levels = config.delay_levels()
        self.total_memory = config.total_physical_memory or _machine_memory()
        self._closed = False
        self._lock = lock  # the `lock` file, held while open for writing
        self._consumer_offsets: ConsumerOffsets | None = None
        self._commitlog = CommitLog(root, config.mapped_file_size_commit_log, writable=writable)
        self._queues = QueueTable(self.layout, config, writable)
        self._deleted_topics = DeletedTopics(root, writable)
        self._topic_table = TopicTable(self.layout, self._queues, self._deleted_topics)
        self._checkpoint_file = CheckpointFile(self.layout.checkpoint, writable)
        self._checkpoint = self._checkpoint_file.data  # loaded in place: this object for the store's life
        self._index = IndexService(
            root,
            config.max_hash_slot_num,
            config.max_index_num,
            writable=writable,
            on_full_flushed=self._checkpoint_file.index_file_flushed,
            background_flush=writable,
        )
        self._arrivals = Arrivals()
        # the dispatchers every record goes through (services/pipeline.py): the ConsumeQueue one, the index
        # one; dispatchers added with add_dispatcher(..., first=True) (RocketMQ's dispatcherList.addFirst, as
        # the broker adds CommitLogDispatcherCalcBitMap) run before them and may fill request.bit_map
        self._pipeline = DispatchPipeline(
            ConsumeQueueDispatcher(self._queues, self._checkpoint, self._deleted_topics),
            self._index,
            config.message_index_enable,
            self._arrivals.notify,
            root,
        )
        self._index.on_error = self._pipeline.failed
        self._lookups = Lookups(self._commitlog, self._index, config)
        self._queue_check = QueueCheck(self._commitlog, self.delay_levels, config.force_verify_prop_crc)
        # consumer groups' SQL92 filters; with bitmaps on, the bitmap dispatcher runs first (addFirst)
        self._filters = ConsumerFilterManager(
            root,
            BloomFilter(config.max_error_rate_of_bloom_filter, config.expect_consumer_num_use_filter),
            clock=config.clock,
            writable=writable,
        )
        if config.enable_calc_filter_bit_map and config.enable_consume_queue_ext:
            self.add_dispatcher(CalcBitMapDispatcher(self._filters), first=True)
        # the transient store pool (seed 002): ASYNC_FLUSH masters only, as RocketMQ enables it
        if config.transient_store_pool_enable and writable:
            if config.flush_disk_type == SYNC_FLUSH:
                log.warning("transient_store_pool_enable needs ASYNC_FLUSH: the pool stays off")
            else:
                self._commitlog.files.pool = TransientStorePool(
                    config.transient_store_pool_size, config.mapped_file_size_commit_log
                )
        # Under SYNC_FLUSH nothing may be readable before it is flushed (apache/rocketmq #8239): the put path
        # does not dispatch, reput does, and reput stops at the flushed offset; the group commit runs reput
        # right after each flush, so a put answered PUT_OK is readable (services/flush.py)
        self._sync_flush = config.flush_disk_type == SYNC_FLUSH
        # with the pool, a record is readable only once committed: reput (reading committed bytes) dispatches
        pooled = self._commitlog.files.pool is not None
        inline = config.dispatch_in_put_path and ((not self._sync_flush and not pooled) or config.read_uncommitted)
        self._writer = MessageWriter(
            config,
            self._commitlog,
            self._pipeline.put if inline else None,
            self._pipeline.put_batch,
            self._queues.is_batch,
            self._topic_table.configured_queues,
        )
        self._reput = ReputService(
            self._commitlog,
            self._pipeline,
            self._writer.lock,
            self.delay_levels,
            stop_at_flushed=self._sync_flush and not config.read_uncommitted,
        )
        self._pipeline.reput = self._reput
        # CommitLog flush / group commit, ConsumeQueue flush, checkpoint; expired files and the disk-full flag
        self._flush_service = FlushServices(
            config, self._commitlog, self._queues, self._checkpoint_file, self._reput, root
        )
        self._health = self._flush_service.health  # NOT_WRITEABLE: set when a CommitLog sync fails
        self._cleanup = CleanupService(
            config, self._commitlog, self._queues, self._index, self._writer.lock, self.layout
        )
        # what a get reads through (read/get_message.py is handed these, never the store)
        self._reads = get_message.ReadParts(
            config, self._commitlog, self._queue_check, self._writer.lock, self.total_memory
        )
        # the common put in one C call (put/lane.py, over the writer's PutState), None when the engine or the
        # configuration has none
        self._lane = self._make_lane()

    def _make_lane(self):
        """The put lane over the writer's PutState (put/lane.py), handed the parts it dispatches into and
        the gates it reads; None for a read-only store, or when the engine or the configuration has none."""
        if self.read_only:
            return None
        return make_lane(
            config=self.config,
            writer=self._writer,
            commitlog=self._commitlog,
            queues=self._queues,
            checkpoint=self._checkpoint,
            index=self._index,
            reput=self._reput,
            arrivals=self._arrivals,
            health=self._flush_service.health,
            pipeline=self._pipeline,
            cleanup=self._cleanup,
        )

    # ---------------------------------------------------------------- opening and closing
    @classmethod
    def open(
        cls,
        path,
        config: StoreConfig | None = None,
        read_only: bool = False,
        progress=None,
        check_commitlog: bool = True,
    ) -> "MessageStore":
        """Open (and recover) a store. `progress(done_bytes, total_bytes)`, if given, is called as the
        CommitLog is recovered: (0, total) first, then after each segment, the last call with done == total
        (services/recovery.py); recovery also logs a line per segment (logger "rocketstore.recovery").

        check_commitlog=False (read-only only) skips the CommitLog's recovery: the ConsumeQueues are
        trusted as they are on disk and the CommitLog taken to end where they do. It reads no record, so it
        opens a store of any size in the time its ConsumeQueues take: for readers that only go through the
        queues (the Spark source's planning), not for answers about the CommitLog's own end."""
        if not check_commitlog and not read_only:
            raise ValueError("check_commitlog=False is for read-only opens: a writer must recover the CommitLog")
        root = os.path.abspath(os.fspath(path))
        if read_only and not os.path.isdir(root):
            raise StoreOpenError(f"{root}: no store directory here")
        lock = None
        if not read_only:
            if os.path.exists(root) and not os.path.isdir(root):
                raise StoreOpenError(f"{root}: exists and is not a directory")
            try:
                os.makedirs(root, exist_ok=True)
                lock = StoreLock.take(root)
            except OSError as e:
                raise _cannot_write(e) from e
        try:
            # before any file is read (sizes included): a rebuild killed while swapping its files in is
            # finished, its leftovers removed; a reader cannot change the store, so it refuses that state
            if lock is not None:
                rebuild_swap.finish_interrupted(root)
            else:
                rebuild_swap.refuse_pending_swap(root)
            config = resolve_file_sizes(root, config or StoreConfig())
            store = cls(root, config, read_only, lock, check_commitlog)
        except OSError as e:
            if lock is not None:
                lock.release()
                raise _cannot_write(e) from e
            raise
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        try:
            store._load(progress)
        except BaseException:
            store._release()
            raise
        return store

    def _load(self, progress=None) -> None:
        """Load and recover. Opened for writing, whatever the store will write needs its disk blocks now
        (sparse segments get theirs, recovery creates the files it must): a full disk is a StoreOpenError
        naming the file here, never a SIGBUS later."""
        try:
            self._load_files(progress)
        except CorruptDataError as e:
            raise StoreOpenError(str(e)) from e
        except OSError as e:
            if self.read_only:
                raise
            raise _cannot_write(e) from e
        self._reput.reput_from_offset = self._commitlog.max_offset()
        if not self.read_only:
            self._reput.start()
            self._flush_service.start()
            self._cleanup.start()
        log.info(
            "opened %s%s: CommitLog %d..%d, %d queues",
            self.root,
            " read-only" if self.read_only else "",
            self.min_physical_offset,
            self.max_physical_offset,
            len(self._queues),
        )

    def _load_files(self, progress) -> None:
        last_exit_ok = not os.path.exists(self.layout.abort)
        self._commitlog.load()
        self._queues.load(self._topic_table.load())
        self._deleted_topics.load()  # before recovery: it must not give a deleted topic its queues back
        self._checkpoint_file.load()
        self._commitlog.confirm_offset = self._checkpoint.confirm_phy_offset  # loadCheckPoint: setConfirmOffset
        if not self.read_only:
            self._checkpoint_file.reserve()
        self._filters.load()  # before recovery: records it dispatches again get their bitmaps
        self._index.load(last_exit_ok, self._checkpoint.index_msg_timestamp)
        found = recovery.recover(
            self._commitlog,
            self._queues,
            self._pipeline,
            self._queue_check,
            self._checkpoint,
            self.config,
            normal=last_exit_ok,
            check_commitlog=self.check_commitlog,
            progress=progress,
        )
        if found.confirm_offset is not None:
            self._commitlog.confirm_offset = self._checkpoint.confirm_phy_offset = found.confirm_offset
        self._writer.queue_offsets = found.queue_offsets
        self._deleted_topics.forget_expired(self._commitlog.min_offset())
        self._index.build()
        if self._pipeline.error is not None:  # recovery's index entries found no file to go to
            raise self._pipeline.error
        if not self.read_only and found.confirm_offset is not None:
            cut = self._index.cut_past(found.end, self._store_time)
            if cut:
                log.warning("%s: %d index entries of records past the CommitLog's end went", self.root, cut)
        if not self.read_only:
            self._cleanup.checked_at_open()  # puts see a full disk from the first one (not 60 s later)
            _write_in_place(self.layout.abort, str(os.getpid()).encode())  # a clean close removes it

    def _store_time(self, physical_offset: int) -> int:
        """The store time of the record at an offset (0 when none starts there)."""
        m = self._lookups.look(physical_offset)
        return m.store_timestamp if m is not None else 0

    def flush(self) -> None:
        """Everything written so far to disk: CommitLog, ConsumeQueues, then the checkpoint."""
        self._check_open()
        if self.read_only:
            return
        with self._writer.lock:
            if not self.writeable:
                raise StoreNotWritableError(
                    f"{self.root}: a CommitLog sync failed earlier; the store takes no "
                    f"more writes and flushes nothing until it is reopened"
                )
            self._commitlog.files.commit_all()
            self._commitlog.files.flush_all()
            if self._commitlog.max_offset() > 0:
                self._checkpoint.physic_msg_timestamp = max(
                    self._checkpoint.physic_msg_timestamp, self._last_store_timestamp()
                )
            for cq in self._queues:
                cq.files.flush_all()
            self._index.flush()
            self._checkpoint_file.write()

    def _last_store_timestamp(self) -> int:
        """The store time of the last record written: the writer's, else (nothing put since the open) the
        one recovery found (the checkpoint's confirmPhyOffset, which nothing else moves)."""
        off = (
            self._writer.last_physical_offset
            if self._writer.last_physical_offset >= 0
            else self._checkpoint.confirm_phy_offset
        )
        return self._commitlog.pickup_store_timestamp(off, 91) if off >= 0 else 0

    def close(self) -> None:
        if self._closed:
            return
        self._lane = None  # every put takes the checks of the Python path from here on
        try:
            if not self.read_only:
                self._cleanup.stop()
                self._flush_service.stop()  # their last rounds flush what is left
                if not self.writeable:  # a sync failed: flush nothing, leave the abort file (recovery)
                    log.error("%s: closed after a failed CommitLog sync; the next open recovers", self.root)
                    self._reput.stop(drain=True)
                    return
                if self._sync_flush:  # reput dispatches only what is flushed: flush all, then drain
                    with self._writer.lock:
                        self._commitlog.files.flush_all()
                self._reput.stop(drain=True)
                # confirmPhyOffset stays RocketMQ's value: for a plain store (not controller mode, not
                # duplicationEnable) CommitLog.setConfirmOffset runs only in recovery (the start of the last
                # valid record) and when the log is truncated, never on a put, a flush or the shutdown, so
                # the checkpoint every flush writes carries what the last recovery found (0 on a new store)
                self.flush()
                if self._reput.behind() <= 0 and self._pipeline.error is None:
                    os.unlink(self.layout.abort)
                else:
                    log.error(
                        "%s: closed with records not in the queues or index; the next open recovers them", self.root
                    )
        finally:
            self._release()

    def _release(self) -> None:
        self._closed = True
        self._cleanup.stop()
        self._flush_service.stop()
        self._index.close()
        self._queues.close()
        self._commitlog.close()
        if self._lock is not None:
            self._lock.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{self.root}: the store is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise StoreOpenError(f"{self.root}: opened read-only")

    # ---------------------------------------------------------------- dispatch
    def add_dispatcher(self, dispatcher, first: bool = False) -> None:
        """Add a dispatcher (an object with dispatch(request), or a callable): it sees every record reput
        or the put path dispatches, after the built-in ones; with first=True before them (RocketMQ's
        dispatcherList.addFirst: the broker's CommitLogDispatcherCalcBitMap, which sets request.bit_map
        for the ConsumeQueue ext unit the ConsumeQueue dispatcher then writes). Runs of records reach it
        through dispatch_columns(columns) if it has one, else as requests one by one; one added first
        needs `bulk_capable = True` (its dispatch_columns fills columns.bit_map) or reput and recovery
        go one record at a time."""
        self._pipeline.add(dispatcher, first)

    @property
    def dispatchers(self) -> list:
        """The dispatchers in the order they run (the pipeline's)."""
        return self._pipeline.dispatchers

    def wait_dispatched(self, timeout_s: float | None = None) -> bool:
        """Return once everything written so far is readable through get (True), or at the timeout; False at
        once when a queue or index file cannot be written (the pipeline's dispatch error: reput retries by itself)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            self._reput.do_reput()
            if self._reput.caught_up():
                return True
            if self._pipeline.error is not None:
                return False  # a queue or index file cannot be written (full disk): reput retries on its own
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.001)

    # ---------------------------------------------------------------- topics
    @property
    def topic_configs(self) -> dict[str, dict]:
        """config/topics.json's topicConfigTable."""
        return self._topic_table.configs

    @property
    def batch_topics(self) -> set[str]:
        """The topics whose queues are batch ConsumeQueues (queue.type BatchCQ, RIP-26)."""
        return self._queues.batch_topics

    def create_topic(
        self, name: str, queues: int = TC.DEFAULT_QUEUE_NUMS, attributes: dict[str, str] | None = None
    ) -> None:
        """Create (or update) a topic in config/topics.json, RocketMQ's format. `attributes` may set
        `queue.type` to SimpleCQ or BatchCQ (RIP-26); like RocketMQ, a topic's queue type cannot change."""
        self._check_writable()
        self._topic_table.create(name, queues, attributes, self._writer)

    def update_topic_config(
        self,
        name: str,
        read_queue_nums: int,
        write_queue_nums: int,
        perm: int,
        *,
        topic_filter_type: str = "SINGLE_TAG",
        topic_sys_flag: int = 0,
        order: bool = False,
        attributes: dict[str, str] | None = None,
    ) -> None:
        """A whole TopicConfig, as a broker's createAndUpdateTopicConfig takes it: create_topic's checks (name,
        queue type, which cannot change) with the larger queue count, then the fields create_topic does not
        take (separate read and write queue counts, perm, filter type, sysFlag, order) over its entry in
        config/topics.json, with puts kept out meanwhile."""
        self.create_topic(name, max(read_queue_nums, write_queue_nums), attributes)
        fields = {
            "readQueueNums": read_queue_nums,
            "writeQueueNums": write_queue_nums,
            "perm": perm,
            "topicFilterType": topic_filter_type,
            "topicSysFlag": topic_sys_flag,
            "order": order,
        }
        self._topic_table.set_fields(name, fields, attributes or {}, self._writer)

    def ensure_topic(self, name: str) -> None:
        """Give a topic that has no config one (config/topics.json) with the default queue count, or as many
        queues as it already has if more: what a broker's auto-create does for a new topic."""
        if name not in self._topic_table.configs:
            self._check_writable()
            self._topic_table.ensure(name, self._writer)

    def delete_topic(self, name: str) -> bool:
        """deleteTopic as RocketMQ's broker does it (deleteTopicInBroker): the topic's config, its queues
        (ConsumeQueue, batch ConsumeQueue and ext files: messageStore.deleteTopics) and the groups' offsets
        for it (cleanOffsetByTopic). Its CommitLog records stay until they expire, as in RocketMQ. False when
        the store knows no such topic."""
        self._check_writable()
        if not self._topic_table.delete(name, self._writer):
            return False
        self.consumer_offsets.remove_topic(name)
        return True

    def queue_count(self, topic: str) -> int:
        """How many queues a put without a queue id spreads over (TopicTable.queue_count)."""
        return self._topic_table.queue_count(topic)

    def pick_queue(self, msg: Message) -> int:
        """A queue for a message sent without one: by its sharding key, else round robin (TopicTable)."""
        return self._topic_table.pick_queue(msg)

    # ---------------------------------------------------------------- consumer groups
    @property
    def consumer_offsets(self) -> ConsumerOffsets:
        """The groups' committed offsets (config/consumerOffset.json), read on first use."""
        if self._consumer_offsets is None:
            self._consumer_offsets = ConsumerOffsets(self.root, writable=not self.read_only)
        return self._consumer_offsets

    def consumer(
        self,
        group: str,
        topic: str,
        tags=None,
        start: str = "earliest",
        sql: str | None = None,
        queues: list[int] | None = None,
    ) -> Consumer:
        """A consumer of `topic` for `group`: poll(), iteration, follow(), lag(), commit(). `sql`: a SQL92
        subscription instead of tags; on a writable store it is registered for the group (register_filter),
        so the bitmap dispatcher marks matching messages from now on. `queues`: only these queue ids."""
        self._check_open()
        problem = group_problem(group) or topic_problem(topic)
        if problem:
            raise ValueError(problem)
        if sql is not None and not self.read_only:
            self.register_filter(group, topic, sql)
        return Consumer(self, self.consumer_offsets, group, topic, tags, start, sql, queues)

    def wait_for_arrival(self, timeout_s: float) -> None:
        """Sleep until a new message is dispatched or the timeout passes (long polling)."""
        self._arrivals.wait(timeout_s)

    # ---------------------------------------------------------------- put
    def _refuses_puts(self) -> bool:
        return (
            self.read_only
            or not self._health.writeable
            or self._pipeline.error is not None
            or self._cleanup.refuses_put(self.root)
        )

    @property
    def lane(self):
        """The put lane (put/lane.py: put(msg, queue_id) -> PutResult of the common message, None for the rest,
        which `put` takes), or None: what the broker's fast send calls first (remoting/broker/fast_send.py)."""
        return self._lane

    def put(self, msg: Message, queue_id: int | None = None) -> PutResult:
        """Put one message; without a queue id the store picks one (pick_queue)."""
        lane = self._lane
        if lane is not None:
            r = lane.put(msg, queue_id)  # the common message, the same steps in C; None: the path below
            if r is not None:
                return r
        if self._closed:
            self._check_open()
        if (
            self.read_only
            or not self._health.writeable
            or self._pipeline.error is not None
            or self._cleanup.refuses_put(self.root)
        ):  # _refuses_puts, without its call (once per put)
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE)
        if queue_id is None:
            queue_id = self._topic_table.pick_queue(msg)
        r = self._writer.put(msg, queue_id)
        if r.ok:
            r.queue_id = queue_id
            if self._sync_flush:
                self._wait_flushed(r, msg)
            elif self._writer.dispatch is None:
                self._reput.wake()
        return r

    def put_batch(self, messages: list[Message], queue_id: int | None = None) -> PutBatchResult:
        """Put a producer batch into one queue; without a queue id the store picks one for the batch."""
        self._check_open()
        if self._refuses_puts():
            return PutBatchResult(PutStatus.SERVICE_NOT_AVAILABLE)
        messages = list(messages)
        if queue_id is None:
            if not messages:
                return PutBatchResult(PutStatus.MESSAGE_ILLEGAL)
            queue_id = self._topic_table.pick_queue(messages[0])
        r = self._writer.put_batch(messages, queue_id)
        if r.ok:
            r.queue_id = queue_id
            if self._sync_flush:
                self._wait_flushed(r, messages[0])
            elif self._writer.dispatch is None:
                self._reput.wake()
        return r

    def _wait_flushed(self, r, msg: Message) -> None:
        """SYNC_FLUSH (handleDiskFlush): wait for the group commit to flush the record's bytes; unconfirmed
        in time, or a failed flush, answers FLUSH_DISK_TIMEOUT (the record stays written). A message with
        the WAIT property "false" (isWaitStoreMsgOK) only wakes the service."""
        if msg.properties and msg.properties.get("WAIT") == "false":
            self._flush_service.commitlog.wake()
            return
        status = self._flush_service.wait_flushed(r.physical_offset + r.size)
        if status is not PutStatus.PUT_OK:
            r.status = status

    @property
    def writeable(self) -> bool:
        """False once a CommitLog sync failed (RunningFlags.getAndMakeNotWriteable, as RocketMQ's MappedFile.flush
        does on an IOException): puts answer SERVICE_NOT_AVAILABLE and nothing more is flushed, so no later
        sync can seem to vouch for bytes an earlier failed one may have lost, until the store is reopened."""
        return self._health.writeable

    # ---------------------------------------------------------------- cleanup
    @property
    def disk_full(self) -> bool:
        """RunningFlags' DISK_FULL_BIT: the last cleanup pass found the disk above
        disk_space_warning_level_ratio; puts answer SERVICE_NOT_AVAILABLE until a pass finds it below."""
        return self._cleanup.disk_full

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """The manual trigger (executeDeleteFilesManually): delete expired CommitLog files now, whatever the
        hour, up to delete_file_batch_max per pass and pass after pass while files go, each pass followed by
        the ConsumeQueue, batch ConsumeQueue and index files in step with the CommitLog's new min offset.
        Returns how many CommitLog files were deleted."""
        self._check_open()
        if self.read_only:
            return 0
        return self._cleanup.delete_expired_files(now_ms)

    def delete_files_manually(self) -> None:
        """executeDeleteFilesManually, as mqadmin's deleteExpiredCommitLog asks it: the cleanup service's next
        passes delete expired CommitLog files whatever the hour (delete_expired_files does it now)."""
        self._check_open()
        if not self.read_only:
            self._cleanup.commitlog.execute_delete_files_manually()

    def disk_ratio(self, folder: str = "commitlog") -> float:
        """The used share (0 to 1) of the disk holding one of the store's folders ("commitlog",
        "consumequeue"): UtilAll.getDiskPartitionSpaceUsedPercent, as the cleanup service measures it."""
        return self._cleanup.disk_usage(os.path.join(self.root, folder))

    # ---------------------------------------------------------------- files and dispatch
    @property
    def confirm_offset(self) -> int:
        """The checkpoint's confirmPhyOffset: the CommitLog offset below which every record is known whole."""
        return self._checkpoint.confirm_phy_offset

    @property
    def dispatched_offset(self) -> int:
        """The CommitLog offset below which every record is in its queues and the index (reput's
        reputFromOffset)."""
        return self._reput.reput_from_offset

    def record_bytes(self, physical_offset: int, size: int):
        """`size` bytes of the CommitLog from `physical_offset`, as a memoryview of the mapped segment (a
        whole record, as a pull or a lookup answers it: CommitLog.getMessage), or None when they are not
        there (expired, or past what is written)."""
        return self._commitlog.read(physical_offset, size)

    def commitlog_segments(self) -> list[tuple[int, int, int]]:
        """(first offset, bytes written, file size) of each CommitLog segment, oldest first."""
        return [(mf.file_from_offset, mf.wrote, mf.file_size) for mf in list(self._commitlog.files.files)]

    def commitlog_position(self, physical_offset: int) -> tuple[str, int]:
        """Where a physical offset lies on disk: (the path of the CommitLog segment holding it, the offset
        within that segment). The path is the commitlog directory when no segment holds it (expired, or
        past what is written)."""
        return self._commitlog.segment_path(physical_offset), physical_offset % self._commitlog.file_size

    def advise_commitlog(self, advice: int) -> None:
        """madvise(2) every mapped CommitLog segment (mmap.MADV_NORMAL or MADV_RANDOM: RocketMQ's
        setCommitLogReadAheadMode)."""
        for mf in list(self._commitlog.files.files):
            if getattr(mf, "mm", None) is not None:
                mf.mm.madvise(advice)

    def index_file_count(self) -> int:
        return len(self._index.files)

    def consume_queue(self, topic: str, queue_id: int):
        """The queue of (topic, queue id) (getConsumeQueue; log/queue.py's protocol, plain or batch), None
        when it has none. For reading: its units, offsets and files."""
        return self._queues.get(topic, queue_id)

    def consume_queues(self) -> list:
        """Every queue the store has (getConsumeQueueTable), for reading."""
        return list(self._queues)

    # ---------------------------------------------------------------- offsets
    @property
    def min_physical_offset(self) -> int:
        return self._commitlog.min_offset()

    @property
    def max_physical_offset(self) -> int:
        return self._commitlog.max_offset()

    @property
    def flush_behind_bytes(self) -> int:
        """flushBehindBytes: CommitLog bytes written but not yet flushed to disk (0 for a read-only store)."""
        if self.read_only:
            return 0
        return max(self._commitlog.max_offset() - self._commitlog.files.flushed_where, 0)

    @property
    def dispatch_behind_bytes(self) -> int:
        """dispatchBehindBytes: CommitLog bytes not yet dispatched to the queues and the index."""
        return max(self._reput.behind(), 0)

    def earliest_store_time(self) -> int:
        """getEarliestMessageTime: the store time of the CommitLog's first record, -1 without one."""
        if self._commitlog.max_offset() <= 0:
            return -1
        return self._store_time(self._commitlog.min_offset()) or -1

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get(topic, queue_id)
        if cq is None:  # RocketMQ creates the queue to answer; an empty batch ConsumeQueue says -1
            return -1 if self._queues.is_batch(topic) else 0
        return cq.min_offset

    def max_offset(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get(topic, queue_id)
        return cq.max_offset if cq else 0

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int, boundary: str = LOWER) -> int:
        """getOffsetInQueueByTime: the queue offset of the first message stored at or after the time (lower),
        or of the last one stored at or before it (upper), clamped to [min, max]."""
        boundary = boundary.lower()
        if boundary not in (LOWER, UPPER):
            raise ValueError(f"boundary must be 'lower' or 'upper', got {boundary!r}")
        cq = self._queues.get(topic, queue_id)
        if cq is None:
            return 0
        off = cq.offset_by_time(timestamp_ms, boundary, self._commitlog)
        return min(max(off, cq.min_offset), cq.max_offset)

    def topics(self) -> dict[str, list[int]]:
        """topic -> its queue ids, from the queue table."""
        out: dict[str, list[int]] = {}
        for t, q in sorted(self._queues.keys()):
            out.setdefault(t, []).append(q)
        return out

    def queue_unit(self, topic: str, queue_id: int, offset: int):
        """(physical offset, size, tagsCode) of a queue offset, or None. A tagsCode slot holding a ConsumeQueue
        ext address answers the ext unit's tagsCode (the address itself if that unit cannot be read)."""
        cq = self._queues.get(topic, queue_id)
        u = cq.get_unit(offset) if cq else None
        if u is not None and cq.ext is not None:
            tags = cq.resolve_tags(u[2])[0]
            if tags is not None:
                u = (u[0], u[1], tags)
        return u

    def store_timestamp_at(self, topic: str, queue_id: int, offset: int) -> int:
        """getMessageStoreTimeStamp: the store time of the message at a queue offset, -1 if none."""
        u = self.queue_unit(topic, queue_id, offset)
        return self._commitlog.pickup_store_timestamp(u[0], u[1]) if u else -1

    def earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get(topic, queue_id)
        return self.store_timestamp_at(topic, queue_id, cq.min_offset) if cq else -1

    # ---------------------------------------------------------------- lookups (lookups.py)
    def look(self, physical_offset: int):
        """The message whose record starts at a physical offset, or None (lookMessageByOffset)."""
        self._check_open()
        return self._lookups.look(physical_offset)

    def query(
        self, topic: str, key: str, max_count: int = 32, begin_ms: int = 0, end_ms: int | None = None
    ) -> QueryResult:
        """queryMessage: messages of `topic` whose KEYS or UNIQ_KEY is `key`, stored within [begin_ms,
        end_ms] as the index records it, in physical offset order. max_count is capped at
        max_msgs_num_batch. The index matches on a hash; every hit is re-checked against the record, so
        another key with the same hash never answers (apache/rocketmq #3616)."""
        self._check_open()
        return self._lookups.query(topic, key, max_count, begin_ms, end_ms)

    def by_msg_id(self, msg_id: str):
        """The message an offset msgId names (store host + physical offset), or None; a malformed msgId (not
        32 or 56 hex characters) raises InvalidMessageIdError, a RocketStoreError naming it."""
        self._check_open()
        return self._lookups.by_msg_id(msg_id)

    def by_unique_key(self, topic: str, uniq_key: str):
        """The first stored message of `topic` whose UNIQ_KEY (the id a producer assigned) is uniq_key."""
        self._check_open()
        return self._lookups.by_unique_key(topic, uniq_key)

    # ---------------------------------------------------------------- get
    def get(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        tags=None,
        wait_ms: int = 0,
        matches=None,
        sql: str | None = None,
    ) -> GetResult:
        """getMessage: up to max_count messages of a queue from `offset`, filtered by tags (None, a set of
        tags, or a subscription string "TagA || TagB"). With wait_ms, waits that long for new messages
        when there are none yet (long polling).

        `matches(tags_code, ext_unit) -> bool`, if given, is asked about every unit that passes the tags
        (MessageFilter.isMatchedByConsumeQueue): tags_code is the unit's tagsCode (from its ext unit when
        the ConsumeQueue ext holds it; None when that unit cannot be read), ext_unit the
        formats.cq_ext.ExtUnit (store time, filter_bit_map) or None. A unit it refuses is skipped as a tag
        mismatch is.

        `sql`: a SQL92 filter on the messages' properties instead of tags (RocketMQ's grammar; a bad one
        raises FilterSyntaxError naming the position). When `group` registered the same expression for the
        topic (register_filter) and bitmaps are on, each unit's ext bitmap is tested first and only
        candidates are read; the expression then decides on each record."""
        self._check_open()
        codes = get_message.parse_subscription(tags)
        if sql is None and wait_ms <= 0:  # the common call: one look, no filter to build
            return self._get_once(topic, queue_id, offset, max_count, codes, matches)
        accept = None
        if sql is not None:
            if codes is not None:
                raise ValueError("give tags or sql, not both: a subscription is by tag or by SQL92")
            mf = self.message_filter(group, topic, sql)
            if matches is None:
                matches = mf.matches
            else:
                user = matches
                matches = lambda t, e: mf.matches(t, e) and user(t, e)  # noqa: E731
            accept = mf.accept

        def once():
            return self._get_once(topic, queue_id, offset, max_count, codes, matches, accept)

        r = once()
        if wait_ms > 0 and r.status in _WAITING:
            r = self._arrivals.poll(r, once, lambda res: res.status in _WAITING, wait_ms)
        return r

    def message_filter(self, group: str, topic: str, sql: str):
        """The ExpressionMessageFilter a get with `sql` uses (the group's registered filter, if it is this
        expression, lets the ext bitmaps decide first)."""
        from ..filter import compile as compile_sql
        from ..filter.message_filter import ExpressionMessageFilter

        return ExpressionMessageFilter(compile_sql(sql), self._filters.get(topic, group), self._filters.bloom)

    def register_filter(self, group: str, topic: str, sql: str):
        """A consumer group subscribes `topic` with a SQL92 expression (ConsumerFilterManager.register): from
        now on the bitmap dispatcher (enable_calc_filter_bit_map with enable_consume_queue_ext) marks the
        messages it matches. Kept in config/consumerFilter.json."""
        self._check_open()
        problem = group_problem(group) or topic_problem(topic)
        if problem:
            raise ValueError(problem)
        return self._filters.register(group, topic, sql)

    def filter_groups(self) -> set[str]:
        """The consumer groups with a SQL92 filter in config/consumerFilter.json (an unregistered one stays, dead,
        until cleaned a day later, as ConsumerFilterManager keeps it)."""
        return {g for groups in self._filters.by_topic.values() for g in groups}

    def unregister_filter(self, group: str) -> None:
        self._check_open()
        self._filters.unregister(group)

    def _get_once(self, topic, queue_id, offset, max_count, codes, matches=None, accept=None) -> GetResult:
        cq = self._queues.get(topic, queue_id)
        if cq is None:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, self.min_offset(topic, queue_id), 0)
        return get_message.get(self._reads, cq, offset, max_count, codes, matches, accept)
