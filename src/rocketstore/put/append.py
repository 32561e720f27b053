"""Append: the record into the CommitLog under the put lock, and what moves once it is there.

Every put path ends here (the lane does the same steps in C, on the same PutState): the record's offset or
the status a failure answers, then the writer's last offset, the segment's store time and the queue's next
offset, all under the lock that took the queue offset."""

from __future__ import annotations

import logging

from ..log.commitlog import DoesNotFit
from ..message import PutStatus

log = logging.getLogger("rocketstore.put")


def append(writer, size: int, make) -> int | PutStatus:
    """CommitLog.append under the put lock (`make(offset)` -> the record's bytes): the record's offset, or the
    status a failure answers (a record no segment can hold: MESSAGE_ILLEGAL; a segment that cannot be
    created: CREATE_MAPPED_FILE_FAILED), with why in writer.append_problem."""
    try:
        return writer.commitlog.append(size, make)
    except DoesNotFit as e:
        log.warning("put refused: %s", e)
        writer.append_problem = str(e)
        return PutStatus.MESSAGE_ILLEGAL
    except OSError as e:
        log.error("put failed: %s", e)
        writer.append_problem = f"cannot create the next CommitLog segment: {e}"
        return PutStatus.CREATE_MAPPED_FILE_FAILED


def appended(state, commitlog, last_phys: int, store_ts: int, key, next_queue_offset: int | None) -> None:
    """After an append (under the put lock): the start of the last record, the segment's store time, and the
    queue's next offset (None: the record took none, a prepared or rolled-back transaction)."""
    state.last_physical_offset = last_phys
    commitlog.files.files[-1].store_timestamp = store_ts
    if next_queue_offset is not None:
        state.queue_offsets[key] = next_queue_offset
