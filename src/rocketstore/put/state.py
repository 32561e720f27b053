"""PutState: everything the put path's compiled code reads and moves, in one object with one declared table.

The C lane (lane.c) is handed this object and nothing else of the store: it reads each field through its slot
by index, in the order of FIELDS, which lane.c mirrors (its STATE_FIELDS names, exported as
rocketstore._native.PUT_STATE_FIELDS). PutLane(state) refuses a state whose __slots__ are not exactly that
list, and tests/native/test_put_state.py holds the two equal, so the table and the C cannot drift apart.

The put path's own positions live here and nowhere else: MessageWriter reads and writes `topics`,
`queue_offsets` and `last_physical_offset` on this object (its attributes of those names are views of
them), so the lane and the Python path always see one value without the C touching the writer.

The rest are the objects the lane writes into or reads a gate from, as Python uses them. The lane touches
only their public attributes, each named once in lane.c's attribute table (exported as
rocketstore._native.PUT_LANE_ATTRIBUTES; the test checks that none is private):

- the CommitLog's MappedFileQueue (`files`) and its last MappedFile (`wbuf`, `file_size`, `file_from_offset`,
  `buf`, `wrote`, `store_timestamp`): the record goes into the mapped segment and `wrote` moves on, so
  readers, flush and commit see it as they see a Python append;
- the queue a key names (`queue_of`), when it is a `queue_type` (ConsumeQueue) without the ext (`ext`,
  `files`, `max_physic_offset`), and its last MappedFile: the 20-byte unit;
- the dispatch's other effects: `checkpoint.logics_msg_timestamp`, `index.pending` / `index.build()` (what
  IndexService.add does), `reput.reput_from_offset`, `arrivals.waiters` / `arrivals.notify()`;
- the gates MessageStore.put checks (`health.writeable`, `pipeline.error`, `pipeline.plain`,
  `disk.disk_full`, `cleanup.next_disk_check`): the lane answers None unless all are open.

Those objects' own modules keep their state where every reader already looks for it (a MappedFile's write
position, reput's offset): moving it here would change every reader, so the lane writes it where it lives.
"""

from __future__ import annotations

from typing import NamedTuple


class Field(NamedTuple):
    name: str
    set_by: str  # "writer": MessageWriter (the put path's own state); "lane": make_lane, before the lane exists
    what: str


FIELDS: tuple[Field, ...] = (
    # the put path's own state: the lane and the Python path read and move these same values
    Field("topics", "writer", "dict topic -> TopicInfo: the topics the writer has taken once (the lane puts only to one whose `fast` is True)"),
    Field("queue_offsets", "writer", "dict (topic, queue id) -> the next queue offset"),
    Field("last_physical_offset", "writer", "the start of the last record appended, -1 before any"),
    # fixed for the state's life
    Field("lock", "writer", "the put lock (an RLock): the lane holds it from the segment's position to the dispatch"),
    Field("store_host", "writer", "the store host as the record writes it (8 bytes: IPv4, for the lane)"),
    Field("clock", "writer", "None: the wall clock (read in C); else the config's clock(), called"),
    Field("max_body", "writer", "maxMessageSize: the largest body"),
    Field("max_record", "writer", "maxMessageSize + 64 KiB: the largest record"),
    Field("put_ok", "writer", "a PutResult(PUT_OK) with the store host: the lane's answers are copies of it with their numbers"),
    Field("topic_type", "writer", "TopicInfo: the only class the lane reads a topic's slots from"),
    Field("commitlog", "writer", "the CommitLog's MappedFileQueue: its last segment takes the record"),
    # what the dispatch writes to and the gates it reads: set by make_lane
    Field("queue_of", "lane", "(topic, queue id) -> the ConsumeQueue, or None (QueueTable.get_by_key)"),
    Field("queue_type", "lane", "ConsumeQueue: the lane writes units only into a queue of exactly this class"),
    Field("checkpoint", "lane", "the checkpoint: logics_msg_timestamp takes the record's store time"),
    Field("index", "lane", "IndexService: the record's entry goes on its `pending` list, build() once index_build_at wait (its add(), without the call); None with the index off"),
    Field("index_build_at", "lane", "index_service.BUILD_AT: how many pending entries make the lane call build()"),
    Field("reput", "lane", "ReputService: reput_from_offset moves past the record (it is dispatched)"),
    Field("arrivals", "lane", "Arrivals: notify() when someone waits"),
    Field("health", "lane", "FlushHealth: the lane puts only while writeable is True"),
    Field("pipeline", "lane", "DispatchPipeline: no dispatch error, the built-in dispatchers alone (plain)"),
    Field("disk", "lane", "the CommitLog cleanup (disk_full): the lane puts only while it is False"),
    Field("cleanup", "lane", "CleanupService: past next_disk_check (time.monotonic) the Python path measures the disk"),
)  # fmt: skip

FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)


class PutState:
    """See the module docstring; the fields are FIELDS, in that order (the C reads them by index)."""

    __slots__ = FIELD_NAMES

    def __init__(self, **values):
        for name in FIELD_NAMES:
            setattr(self, name, values.pop(name, None))
        if values:
            raise TypeError(f"PutState has no field {sorted(values)[0]!r}")

    def missing(self, set_by: str) -> list[str]:
        """The fields `set_by` sets that are still None (clock and index may be None)."""
        return [
            f.name
            for f in FIELDS
            if f.set_by == set_by and f.name not in ("clock", "index") and getattr(self, f.name) is None
        ]
