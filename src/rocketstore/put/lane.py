"""The put lane: MessageStore.put of the common message in one C call (rocketstore._native.PutLane, lane.c).

The Python path stays the reference and the path of everything else: put -> MessageWriter.put (checks,
queue offset, record) -> CommitLog segment -> pipeline.put -> ConsumeQueue dispatcher and index. For the
common case the lane does those same steps in C over one object, the writer's PutState (state.py: its
fields, who sets them, and the public attributes the C touches on the objects it names): it encodes the
record straight into the mapped CommitLog segment, moves the segment's write position and the state's queue
offset and last offset, writes the 20-byte unit into the queue's mapped ConsumeQueue file and moves its
positions, hands the record to the index (IndexService.add), moves reput's offset and wakes long polls; the
PutResult is the one the Python path answers (a copy of the state's put_ok with the record's numbers). The
common case:

- the store's gates are open (CommitLog health writeable, no dispatch error, the disk not full and not due
  to be measured again) and the pipeline has its built-in dispatchers alone (no bitmap or added ones);
- ASYNC_FLUSH without the transient store pool, dispatch in the put path, IPv4 store host, no appended CRC;
- a topic the writer has already taken once (its cached TopicInfo says `fast`: not a batch-CQ or schedule topic);
- a message with sysFlag 0, no store host of its own, a born host that is none or IPv4 written canonically
  ("a.b.c.d:port", as a broker's send names its producer), a bytes body, fields that fit, and properties
  put.c encodes (keyed_record's rules) or raw_properties (str or bytes, as a send carries them) without
  INNER_NUM / INNER_BASE;
- the record and an 8-byte filler fit the current segment (pages MappedFile.append has not populated yet
  fault in as the lane writes them);
- the queue exists, is a plain ConsumeQueue without the ext, and its last file is started, has room and is
  at the unit the queue offset expects.

Anything else, and every refusal, is decided before a byte is written or the clock is read: the lane
answers None and the Python path puts the message (new segment, new queue or file, statuses). So
ROCKETSTORE_PURE=1 (no lane) writes the same bytes (tests/native/test_put_lane.py).
"""

from __future__ import annotations

from ..config.store_config import SYNC_FLUSH
from ..log.consume_queue import ConsumeQueue
from ..services import index_service
from .. import engine


def lane_engine():
    """The extension when it has the put lane (lane.c), asked when a store opens; else None."""
    native = engine.native
    return native if native is not None and hasattr(native, "PutLane") else None


def make_lane(*, config, writer, commitlog, queues, checkpoint, index, reput, arrivals, health, pipeline, cleanup):
    """The PutLane over the writer's PutState (state.py), or None when the configuration is not one the lane
    covers (or no native engine). The store hands it its parts (MessageStore._make_lane, for a writable
    store): the lane's dispatch targets (queues, checkpoint, index, reput, arrivals) and the gates
    MessageStore.put reads (health: FlushHealth, pipeline, cleanup: CleanupService), which it puts into the
    state's "lane" fields."""
    native = lane_engine()
    if (
        native is None
        or writer.dispatch is None
        or config.flush_disk_type == SYNC_FLUSH
        or commitlog.files.pool is not None
        or writer.append_crc
        or len(writer.store_host) != 8
    ):
        return None
    state = writer.state
    state.queue_of = queues.get_by_key
    state.queue_type = ConsumeQueue
    state.checkpoint = checkpoint
    state.index = index if pipeline.index is not None else None
    state.index_build_at = index_service.BUILD_AT
    state.reput = reput
    state.arrivals = arrivals
    state.health = health
    state.pipeline = pipeline
    state.disk = cleanup.commitlog  # the disk_full flag (CleanCommitLogService)
    state.cleanup = cleanup
    missing = state.missing("writer") + state.missing("lane")
    if missing:
        raise ValueError(f"make_lane: the put state has no {', '.join(missing)}")
    return native.PutLane(state)
