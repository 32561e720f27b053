"""Where everything of a store lives: RocketMQ's directory layout under the store root (storePathRootDir).

    commitlog/<20-digit start offset>                      the CommitLog's segments
    consumequeue/<topic>/<queueId>/<20-digit start>        ConsumeQueue files (20-byte units)
    batchconsumequeue/<topic>/<queueId>/<20-digit start>   batch ConsumeQueue files (46-byte units, RIP-26)
    consumequeue_ext/<topic>/<queueId>/<20-digit start>    ConsumeQueue extension files
    index/<yyyyMMddHHmmssSSS>                              IndexFiles
    config/*.json, checkpoint, abort, lock

Every module that needs a path or a segment listing asks here, so the layout is written down once."""

from __future__ import annotations

import os

COMMITLOG = "commitlog"
CONSUMEQUEUE = "consumequeue"
BATCH_CONSUMEQUEUE = "batchconsumequeue"
CONSUMEQUEUE_EXT = "consumequeue_ext"
INDEX = "index"
CONFIG = "config"
CHECKPOINT = "checkpoint"
ABORT = "abort"
LOCK = "lock"
QUEUE_KINDS = (CONSUMEQUEUE, BATCH_CONSUMEQUEUE)


def segment_name(start: int) -> str:
    """A segment's file name: its start offset in 20 digits (UtilAll.offset2FileName)."""
    return f"{start:020d}"


def is_segment_name(name: str) -> bool:
    return len(name) == 20 and name.isdigit()


def segment_names(directory: str) -> list[str]:
    """The segment files of a directory, in offset order ([] when it does not exist)."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names if is_segment_name(n))


def segments(directory: str) -> list[tuple[str, int]]:
    """(path, start offset) of each segment of a directory, in order."""
    return [(os.path.join(directory, n), int(n)) for n in segment_names(directory)]


def queue_ids(directory: str) -> list[int]:
    """The queue ids under a topic's directory (numeric subdirectories), in order."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(int(q) for q in names if q.isdigit() and os.path.isdir(os.path.join(directory, q)))


class StoreLayout:
    """The paths of one store."""

    def __init__(self, root: str):
        self.root = root

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def commitlog(self) -> str:
        return self.path(COMMITLOG)

    @property
    def index(self) -> str:
        return self.path(INDEX)

    @property
    def config(self) -> str:
        return self.path(CONFIG)

    @property
    def checkpoint(self) -> str:
        return self.path(CHECKPOINT)

    @property
    def abort(self) -> str:
        return self.path(ABORT)

    @property
    def lock(self) -> str:
        return self.path(LOCK)

    def commitlog_segment(self, start: int) -> str:
        return self.path(COMMITLOG, segment_name(start))

    def commitlog_segments(self) -> list[tuple[str, int]]:
        return segments(self.commitlog)

    def queue_dir(self, topic: str, queue_id: int, batch: bool = False) -> str:
        return self.path(BATCH_CONSUMEQUEUE if batch else CONSUMEQUEUE, topic, str(queue_id))

    def ext_dir(self, topic: str, queue_id: int) -> str:
        return self.path(CONSUMEQUEUE_EXT, topic, str(queue_id))

    def topic_dir(self, kind: str, topic: str) -> str:
        return self.path(kind, topic)

    def topic_names(self, kind: str) -> list[str]:
        """The topic directories under a directory of one kind (consumequeue, batchconsumequeue...), sorted."""
        top = self.path(kind)
        try:
            names = os.listdir(top)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(n for n in names if os.path.isdir(os.path.join(top, n)))

    def first_segment(self, kind: str) -> str | None:
        """The path of the first segment file under a directory of one kind (commitlog, consumequeue...),
        looked for in name order through its subdirectories; None when there is none."""
        top = self.path(kind)
        if not os.path.isdir(top):
            return None
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for n in sorted(filenames):
                if is_segment_name(n):
                    return os.path.join(dirpath, n)
        return None

    def queue_dirs(self, kind: str = CONSUMEQUEUE) -> list[tuple[str, int, str]]:
        """(topic, queue id, directory) of every queue directory of one kind (consumequeue,
        batchconsumequeue or consumequeue_ext), sorted."""
        top = self.path(kind)
        try:
            topics = sorted(os.listdir(top))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [(t, q, os.path.join(top, t, str(q))) for t in topics for q in queue_ids(os.path.join(top, t))]
