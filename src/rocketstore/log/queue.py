"""The one protocol both kinds of queue implement: ConsumeQueue (20-byte units, one per message) and
BatchConsumeQueue (46-byte units, RIP-26, one per inner batch). Callers go through it instead of asking
which kind a queue is.

A queue's units are reached two ways: by queue offset (`units_from`, `get_unit`, `locate`: what a get
asks for; `unit_rows` gives a located stretch as (pos, size, tagsCode, base offset, batch size)) and by slot, a unit's place in the queue's files (`slot_range`, `unit_at`, `cut_to`, `chain_break_slots`: what
the checks against the CommitLog walk). For a plain ConsumeQueue a slot is its queue offset.

The ConsumeQueue extension is an optional part: `ext` is the ConsumeQueueExt, or None (always None for a
batch queue)."""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable


class QueueUnit(NamedTuple):
    """One unit as both kinds can say it (a batch queue's formats.batch_cq.BatchUnit has these fields too):
    a plain unit covers one queue offset (base_offset is its queue offset, batch_size 1)."""

    pos: int
    size: int
    tags: int
    base_offset: int
    batch_size: int


@runtime_checkable
class Queue(Protocol):
    cq_type: str  # topics.SIMPLE_CQ or topics.BATCH_CQ, as a topic's queue.type says it
    is_batch: bool  # whether a unit covers a batch of queue offsets (RIP-26)
    unit_size: int
    topic: str
    queue_id: int
    ext: object | None  # the ConsumeQueueExt, None when off (and for a batch queue)
    files: object  # the MappedFileQueue of its segments
    max_physic_offset: int
    damaged_from: int | None

    # -- open
    def load(self) -> None: ...
    def recover(self) -> None: ...

    # -- offsets
    @property
    def min_offset(self) -> int: ...
    @property
    def max_offset(self) -> int: ...
    def roll_next_file(self, offset: int) -> int: ...

    # -- write
    def put_position(
        self,
        offset: int,
        size: int,
        tags_code: int,
        queue_offset: int,
        store_ts: int,
        msg_base_offset: int | None = None,
        batch_size: int = 1,
        bit_map: bytes | None = None,
    ) -> bool | None: ...

    # -- read
    def units_from(self, offset: int): ...
    def locate(self, offset: int): ...
    def unit_rows(self, units, first_slot: int, start: int, n: int) -> list[tuple]: ...
    def get_unit(self, offset: int): ...
    def unit_at(self, slot: int) -> QueueUnit | None: ...
    def slot_range(self) -> tuple[int, int]: ...
    def resolve_tags(self, tags_code: int): ...
    def offset_by_time(self, timestamp: int, boundary: str, commitlog) -> int: ...

    # -- truncation, repair, expiry
    def truncate_dirty(self, phy_offset: int) -> None: ...
    def cut_to(self, slot: int) -> None: ...
    def chain_break_slots(self) -> list[int]: ...
    def correct_min_offset(self, min_commit_log_offset: int) -> None: ...
    def delete_expired(self, min_commit_log_offset: int) -> int: ...

    # -- files
    def flush(self, least_pages: int = 0) -> bool: ...
    def close(self) -> None: ...
    def destroy(self) -> None: ...
