"""The rocketstore sink: a DataFrame (batch or streaming) appended to a store through MessageStore.put_batch.

Columns: topic (string), body (binary, or string: written as UTF-8), and optionally tags (string), keys
(string, space separated as RocketMQ's KEYS, or array<string>), properties (map<string,string>),
queueId (int; NULL or absent: the store picks the queue, by the `__SHARDINGKEY` property if there is one,
else round robin a put at a time).

The store has one writer, so the work is split:
  * tasks validate their rows (everything put_batch would refuse, named by column, partition and row) and
    stage them as an Arrow IPC file under <store>/.spark-staging/ (the store's own file system: local mode,
    or a store on a shared file system); the commit message is the file's path and row count;
  * commit (driver side) opens the store for writing (its `lock`), reads the staged files in partition
    order and appends them with put_batch, in puts of at most PUT_MAX_ROWS rows / one segment's bytes,
    grouped by (topic, queue), then flushes and deletes the staging files; abort deletes them.

What is guaranteed
  * A row that fails validation fails the job before anything of the batch is put: nothing is appended.
  * A put that fails in the store itself (disk full, a CommitLog segment that cannot be created, a failed
    sync) can leave the puts before it appended: each put is all or nothing, a Spark batch of several
    puts is not. The error names how many rows were appended and which remain.
  * Streaming: exactly once per batch id and `sinkId`. The sink keeps, in <store>/config/sparkSinks.json
    (written atomically, as topics.json), the last batch id it committed and, while a commit runs, an
    intent record: the batch id and the CommitLog offset the commit started at. Every message it puts
    carries the property __SPARK_SINK = "<sink tag>:<batch id>:<put number>". A batch id at or below the
    committed one is skipped (Spark replaying a batch whose commit it did not record); a batch id with an
    intent record left behind (a crash, or a store failure, between the put and the commit record) is
    checked against the CommitLog from the recorded offset: puts that landed are skipped, the rest are
    appended. This assumes the replayed batch has the same rows in the same partitions, as Spark's
    replayable sources give; a landed put whose row count differs from the replay's fails loudly.
    The commit record is written only after the CommitLog is flushed, so it never vouches for rows a
    power loss could still take.
  * sinkId defaults to the checkpoint location; the query id of the checkpoint (its `metadata` file) is
    kept too, so a fresh checkpoint at the same place (batch ids restarting at 0) starts a fresh record
    instead of being skipped as a replay.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections import Counter

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from . import options as O
from .errors import SinkError

# the row checks live in sink_rows; SinkDataError is re-exported for callers that catch it from here
from .sink_rows import (
    MARKER,
    MARKER_RESERVE,
    RECORD_OVERHEAD,
    SHARDING_KEY,
    Limits,
    SinkDataError,  # noqa: F401
    _Rows,
    check_schema,
    staged_schema,
    validate_batch,
)
from ..engine import decode_messages, parse_properties

log = logging.getLogger("rocketstore.spark.sink")

PUT_MAX_ROWS = 1000  # rows per put_batch (one put holds the store's put lock for its whole batch)
STAGING_DIR = ".spark-staging"
STATE_FILE = os.path.join("config", "sparkSinks.json")


@dataclasses.dataclass
class StagedPart(WriterCommitMessage):
    """What a task staged: an Arrow IPC file (None when the partition was empty) and its row count."""

    partition_id: int
    path: str | None
    rows: int


def stage_partition(batches, limits: Limits, staging: str, partition_id: int, attempt: int) -> StagedPart:
    """Validate every batch of a partition and write the rows to one Arrow IPC file under `staging`."""
    import pyarrow as pa

    os.makedirs(staging, exist_ok=True)
    path = os.path.join(staging, f"part-{partition_id:05d}-{attempt}-{uuid.uuid4().hex[:8]}.arrow")
    count, writer = 0, None
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            staged = validate_batch(batch, limits, _Rows(partition_id, count))
            if writer is None:
                writer = pa.ipc.new_file(path, staged_schema())
            writer.write_batch(staged)
            count += batch.num_rows
    except BaseException:
        if writer is not None:
            writer.close()
        _remove(path)
        raise
    if writer is None:
        return StagedPart(partition_id, None, 0)
    writer.close()
    return StagedPart(partition_id, path, count)


def _task_ids() -> tuple[int, int]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return (ctx.partitionId(), ctx.attemptNumber()) if ctx is not None else (0, 0)


def _remove(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def remove_staged(messages, staging_root: str) -> None:
    """Delete the staged files named by the commit messages, and their directories once empty."""
    dirs = set()
    for m in messages:
        if isinstance(m, StagedPart) and m.path:
            _remove(m.path)
            dirs.add(os.path.dirname(m.path))
    for d in dirs:
        while os.path.abspath(d).startswith(os.path.abspath(staging_root) + os.sep):
            try:
                os.rmdir(d)  # only when empty: another writer's files stay
            except OSError:
                break
            d = os.path.dirname(d)


# ------------------------------------------------------------------------------------ appending (driver)
@dataclasses.dataclass
class PutPlan:
    """One put_batch: rows of one topic for one queue (None: the store picks it when putting)."""

    number: int
    topic: str
    queue_id: int | None
    rows: range | list[int]


def plan_puts(table, store, limits: Limits, first_number: int = 0) -> list[PutPlan]:
    """A staged file's rows as puts: grouped by (topic, queue) in order of first appearance, each group cut
    into puts of at most PUT_MAX_ROWS rows and one segment's bytes (a put_batch must fit one segment and
    maxMessageSize)."""
    sizes = _row_sizes(table)
    plans, number = [], first_number
    for (t, q), rows in _groups(table, store).items():
        for chunk in _chunks(rows, sizes, limits, len(t.encode("utf-8"))):
            plans.append(PutPlan(number, t, q, chunk))
            number += 1
    return plans


def _groups(table, store) -> dict[tuple[str, int | None], range | list[int]]:
    """(topic, queue id or None) -> its rows in order. One topic and no queue chosen is the common case:
    one group, all rows, without a loop over them."""
    from ..message import Message
    import pyarrow.compute as pc

    topic = table.column("topic")
    if (
        table.column("queueId").null_count == table.num_rows
        and table.column("shardingKey").null_count == table.num_rows
        and len(pc.unique(topic)) == 1
    ):
        return {(topic[0].as_py(), None): range(table.num_rows)}
    groups: dict[tuple[str, int | None], list[int]] = {}
    shards = table.column("shardingKey").to_pylist()
    for i, (t, q, s) in enumerate(zip(topic.to_pylist(), table.column("queueId").to_pylist(), shards)):
        if q is None and s is not None:  # as the store would pick it (SelectMessageQueueByHash)
            q = store.pick_queue(Message(t, properties={SHARDING_KEY: s}))
        groups.setdefault((t, q), []).append(i)
    return groups


def _row_sizes(table):
    import pyarrow.compute as pc

    body = pc.binary_length(table.column("body"))
    props = pc.binary_length(table.column("props"))
    return pc.add(body, pc.add(props, MARKER_RESERVE)).to_numpy()


def _chunks(rows, sizes, limits: Limits, topic_len: int):
    """Cut rows greedily: at most PUT_MAX_ROWS, the batch "body" (22 + body + properties per message) within
    maxMessageSize, the records within one segment. Contiguous rows come out as ranges."""
    if isinstance(rows, range) and len(rows):
        largest = int(sizes[rows.start : rows.stop].max())
        if (
            PUT_MAX_ROWS * (22 + largest) <= limits.max_body
            and PUT_MAX_ROWS * (largest + topic_len + RECORD_OVERHEAD) <= limits.max_record
        ):
            for start in range(rows.start, rows.stop, PUT_MAX_ROWS):  # any PUT_MAX_ROWS rows fit
                yield range(start, min(start + PUT_MAX_ROWS, rows.stop))
            return
    sizes = sizes.tolist()
    chunk, body_total, record_total = [], 0, 0
    for i in rows:
        body_size = 22 + sizes[i]
        record_size = sizes[i] + topic_len + RECORD_OVERHEAD
        if chunk and (
            len(chunk) >= PUT_MAX_ROWS
            or body_total + body_size > limits.max_body
            or record_total + record_size > limits.max_record
        ):
            yield chunk
            chunk, body_total, record_total = [], 0, 0
        chunk.append(i)
        body_total += body_size
        record_total += record_size
    if chunk:
        yield chunk


def open_store(root: str, config):
    from ..errors import StoreLockedError, StoreOpenError
    from ..store.facade import MessageStore

    try:
        return MessageStore.open(root, config)
    except StoreLockedError as e:
        raise SinkError(
            f"rocketstore sink: cannot append to {root}: {e} (the store has one writer: stop "
            f"the other writer, or write through it)"
        ) from None
    except StoreOpenError as e:
        raise SinkError(f"rocketstore sink: cannot open {root} for writing: {e}") from None


class Appender:
    """Puts staged files into an open store, in partition order, a PutPlan at a time."""

    def __init__(self, store, limits: Limits, marker_prefix: str | None = None, skip=None):
        self.store, self.limits = store, limits
        self.marker_prefix = marker_prefix  # "<sink tag>:<batch id>:" for streaming, None for batch writes
        self.skip = skip or {}  # put number -> rows that landed before (a replay)
        self.appended = 0
        self.skipped = 0

    def append_all(self, parts: list[StagedPart]) -> None:
        import pyarrow as pa

        total = sum(p.rows for p in parts)
        number = 0
        for part in sorted((p for p in parts if p.path), key=lambda p: p.partition_id):
            with pa.memory_map(part.path) as source:
                table = pa.ipc.open_file(source).read_all()
            for topic in set(table.column("topic").to_pylist()):  # new topics: the store's default queue count
                self.store.ensure_topic(topic)
            plans = plan_puts(table, self.store, self.limits, number)
            number += len(plans)
            self._put(table, plans, total)

    def _put(self, table, plans: list[PutPlan], total: int) -> None:
        bodies = table.column("body").to_pylist()
        props = table.column("props").to_pylist()
        for plan in plans:
            if self._landed_before(plan):
                continue
            msgs = self._messages(plan, bodies, props)
            queue = plan.queue_id if plan.queue_id is not None else self.store.pick_queue(msgs[0])
            r = self.store.put_batch(msgs, queue)
            if not r.ok:
                raise SinkError(
                    f"rocketstore sink: put_batch of {len(msgs)} rows to {plan.topic}-{queue} answered "
                    f"{r.status.name}; {self.appended} of this batch's {total} rows were appended "
                    f"before it ({self.skipped} were already there), the rest were not"
                    + ("; a replay of this streaming batch appends only the rest" if self.marker_prefix else "")
                )
            self.appended += len(msgs)

    def _messages(self, plan: PutPlan, bodies: list, props: list) -> list:
        from ..message import Message

        rows = plan.rows
        if isinstance(rows, range):
            bodies, props = bodies[rows.start : rows.stop], props[rows.start : rows.stop]
        else:
            bodies, props = [bodies[i] for i in rows], [props[i] for i in rows]
        topic = plan.topic
        if self.marker_prefix:
            marker = f"{MARKER}\x01{self.marker_prefix}{plan.number}\x02".encode()
            return [Message(topic, b, raw_properties=p + marker) for b, p in zip(bodies, props)]
        if props.count(b"") == len(props):  # no properties at all: the store's plain-message batch path
            return [Message(topic, b) for b in bodies]
        return [Message(topic, b, raw_properties=p) for b, p in zip(bodies, props)]

    def _landed_before(self, plan: PutPlan) -> bool:
        landed = self.skip.get(plan.number)
        if landed is None:
            return False
        if landed != len(plan.rows):
            raise SinkError(
                f"rocketstore sink: the replayed batch does not match the one partly appended before: "
                f"put {plan.number} had {landed} rows in the store and has {len(plan.rows)} now; "
                f"refusing to guess which rows are missing"
            )
        self.skipped += landed
        return True


# ------------------------------------------------------------------------------- the streaming record
def sink_tag(sink_id: str) -> str:
    """A short, fixed-length name for a sinkId (which may be a long checkpoint path) in each message."""
    return hashlib.sha1(sink_id.encode("utf-8")).hexdigest()[:12]


def parse_state(text: str) -> dict:
    """sparkSinks.json: {"sinks": {sinkId: {"committed": n, "intent": {"batchId": n, "startOffset": n},
    "queryId": s}}}; ValueError for any other shape (the commit would otherwise fail half-way)."""
    from ..config.files import as_int, as_object, as_str, load_json

    state = as_object(load_json(text), "the file", optional=False)
    sinks = state["sinks"] = as_object(state.get("sinks"), "sinks")
    for sink_id, sink in sinks.items():
        what = f"sink {sink_id!r}"
        sink = as_object(sink, what, optional=False)
        if "committed" in sink:
            as_int(sink["committed"], f"{what}: committed")
        if sink.get("queryId") is not None:
            as_str(sink["queryId"], f"{what}: queryId")
        if sink.get("intent") is not None:
            intent = as_object(sink["intent"], f"{what}: intent", optional=False)
            as_int(intent.get("batchId"), f"{what}: intent batchId")
            as_int(intent.get("startOffset"), f"{what}: intent startOffset", (0, 2**63 - 1))
    return state


def load_state(root: str) -> dict:
    from ..config.files import read_with_backup

    state, problems = read_with_backup(os.path.join(root, STATE_FILE), parse_state)
    if state is None and problems:
        raise SinkError(f"rocketstore sink: cannot read the sink record: {'; '.join(problems)}")
    return state if state is not None else {"sinks": {}}


def save_state(root: str, state: dict) -> None:
    from ..config.files import write_atomically

    write_atomically(os.path.join(root, STATE_FILE), json.dumps(state, indent=2, sort_keys=True))


def landed_puts(store, start_offset: int, prefix: str) -> dict[int, int]:
    """put number -> messages found in the CommitLog from `start_offset` whose marker starts with prefix."""
    from ..formats.record import INNER_BATCH_FLAG

    counts: Counter = Counter()
    segment = store.config.mapped_file_size_commit_log
    pos, end = max(start_offset, store.min_physical_offset), store.max_physical_offset
    while pos < end:
        m = store.look(pos)
        if m is None:  # the BLANK at a segment's end: go on with the next segment
            pos = (pos // segment + 1) * segment
            continue
        if m.sys_flag & INNER_BATCH_FLAG:
            props = [
                parse_properties(inner.properties_raw) if inner.properties_raw else {}
                for inner in decode_messages(m.body)
            ]
        else:
            props = [m.properties]
        for p in props:
            value = p.get(MARKER, "")
            if value.startswith(prefix):
                counts[int(value[len(prefix) :])] += 1
        pos += m.size
    return dict(counts)


def checkpoint_query_id(checkpoint: str | None) -> str | None:
    """The streaming query's id from <checkpoint>/metadata (Spark writes {"id": ...} when the query first
    starts), for a local checkpoint; None when it cannot be read."""
    if not checkpoint:
        return None
    path = checkpoint[len("file:") :] if checkpoint.startswith("file:") else checkpoint
    try:
        with open(os.path.join(path, "metadata"), encoding="utf-8") as fh:
            return json.loads(fh.readline()).get("id")
    except (OSError, ValueError, AttributeError):
        return None


# ------------------------------------------------------------------------------------------ the writers
class _SinkBase:
    def __init__(self, options, schema, overwrite):
        if overwrite:
            raise SinkError(
                "rocketstore sink: a message store is append-only: write with "
                'df.write.format("rocketstore").mode("append") (streams: outputMode("append")); '
                "save mode 'overwrite' and output mode 'complete' are not supported"
            )
        check_schema(schema)
        self.options = dict(options)
        raw = O.get(self.options, "path")
        if raw and not os.path.exists(os.path.expanduser(raw)):
            os.makedirs(os.path.expanduser(raw), exist_ok=True)  # a new store, as MessageStore.open makes one
        self.root = O.store_path(self.options)
        self.limits = Limits.of(O.store_config(self.options, self.root))
        self.staging_root = os.path.join(self.root, STAGING_DIR)
        self.staging = os.path.join(self.staging_root, uuid.uuid4().hex)

    def write(self, iterator):
        partition_id, attempt = _task_ids()
        return stage_partition(iterator, self.limits, self._task_staging(), partition_id, attempt)

    def _task_staging(self) -> str:
        return self.staging

    def _open(self):
        return open_store(self.root, O.store_config(self.options, self.root))


class RocketStoreBatchWriter(_SinkBase, DataSourceArrowWriter):
    """df.write.format("rocketstore").mode("append").option("path", store).save()"""

    def commit(self, messages) -> None:
        parts = [m for m in messages if isinstance(m, StagedPart)]
        try:
            store = self._open()
            try:
                appender = Appender(store, self.limits)
                appender.append_all(parts)
                store.flush()
            finally:
                store.close()
            log.info("appended %d rows to %s", appender.appended, self.root)
        finally:
            remove_staged(parts, self.staging_root)
            shutil.rmtree(self.staging, ignore_errors=True)  # failed attempts' files too

    def abort(self, messages) -> None:
        remove_staged(messages, self.staging_root)
        shutil.rmtree(self.staging, ignore_errors=True)


class RocketStoreStreamWriter(_SinkBase, DataSourceStreamArrowWriter):
    """df.writeStream.format("rocketstore").option("path", store).option("checkpointLocation", cp).start()"""

    def __init__(self, options, schema, overwrite):
        super().__init__(options, schema, overwrite)
        self.checkpoint = O.get(self.options, "checkpointLocation")
        self.sink_id = O.get(self.options, "sinkId") or self.checkpoint or "default"

    def _task_staging(self) -> str:
        # one directory per micro-batch when the task knows its batch id, so a commit can clear it whole
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
        return os.path.join(self.staging, f"batch-{batch}") if batch is not None else self.staging

    def commit(self, messages, batchId) -> None:
        parts = [m for m in messages if isinstance(m, StagedPart)]
        try:
            store = self._open()
            try:
                self._commit_once(store, parts, int(batchId))
            finally:
                store.close()
        finally:
            remove_staged(parts, self.staging_root)

    def abort(self, messages, batchId) -> None:
        remove_staged(messages, self.staging_root)

    def _commit_once(self, store, parts: list[StagedPart], batch_id: int) -> None:
        """Append the batch unless this sink committed it already; the record in config/sparkSinks.json is
        read and written under the store's lock (one writer), so no other commit interleaves."""
        state = load_state(self.root)
        sink = self._sink_record(state)
        if sink.get("committed", -1) >= batch_id:
            log.info("sink %s: batch %d was committed before: skipped", self.sink_id, batch_id)
            return
        prefix = f"{sink_tag(self.sink_id)}:{batch_id}:"
        intent = sink.get("intent")
        landed = {}
        if intent and intent.get("batchId") == batch_id:  # a commit of this batch was cut short
            landed = landed_puts(store, intent["startOffset"], prefix)
            log.warning(
                "sink %s: batch %d was partly appended before (%d rows): appending the rest",
                self.sink_id,
                batch_id,
                sum(landed.values()),
            )
        else:
            sink["intent"] = {"batchId": batch_id, "startOffset": store.max_physical_offset}
            save_state(self.root, state)
        appender = Appender(store, self.limits, prefix, landed)
        appender.append_all(parts)
        store.flush()  # the record must never vouch for rows a power loss could still take
        sink["committed"] = batch_id
        sink.pop("intent", None)
        save_state(self.root, state)

    def _sink_record(self, state: dict) -> dict:
        sinks = state.setdefault("sinks", {})
        query_id = checkpoint_query_id(self.checkpoint)
        sink = sinks.setdefault(self.sink_id, {})
        if query_id and sink.get("queryId") not in (None, query_id):
            log.warning(
                "sink %s: a new streaming query (%s, was %s): its batch ids start again",
                self.sink_id,
                query_id,
                sink.get("queryId"),
            )
            sink.clear()
        if query_id:
            sink["queryId"] = query_id
        return sink
