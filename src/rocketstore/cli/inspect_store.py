"""`rocketstore inspect`: what a store holds, gathered from an open (read-only) MessageStore."""

from __future__ import annotations

import os

from ..files import layout as L
from ..config import topics as TC


def _dir_usage(path: str) -> tuple[int, int]:
    """(files, bytes on disk) below a directory; sparse segments count what they really use."""
    files = used = 0
    for dirpath, _dirs, names in os.walk(path):
        for n in names:
            st = os.stat(os.path.join(dirpath, n))
            files += 1
            used += st.st_blocks * 512
    return files, used


def _queues_end_on_disk(root: str) -> int:
    """The end of the furthest CommitLog record the ConsumeQueue files on disk point at (what reput had
    dispatched when they were last written; a read-only open re-dispatches the rest only in memory)."""
    from . import dump as D

    end = -1
    for sub, rows in ((L.CONSUMEQUEUE, D.consumequeue_rows), (L.BATCH_CONSUMEQUEUE, D.batchconsumequeue_rows)):
        for _topic, _q, qdir in L.StoreLayout(root).queue_dirs(sub):
            names = L.segment_names(qdir)
            last = None
            for last in rows(os.path.join(qdir, names[-1])) if names else ():
                pass
            if last is not None and last.get("size", 0) != 0x7FFFFFFF:
                end = max(end, last["physicalOffset"] + last["size"])
    return end


def _ext_usage(root: str, topic: str, queue_id: int) -> tuple[int, int]:
    path = L.StoreLayout(root).ext_dir(topic, queue_id)
    return _dir_usage(path) if os.path.isdir(path) else (0, 0)


def _ext_written(ext) -> int:
    """Bytes of ext units written (from the first file's start to the write position of the last)."""
    first, last = ext.files.first(), ext.files.last()
    if first is None or last is None:
        return 0
    return last.file_from_offset + last.wrote - first.file_from_offset


def _ext_state(store) -> str:
    """The ConsumeQueue extension: on (the config enables it), off, or files on disk the config does not use."""
    on = store.config.enable_consume_queue_ext
    present = os.path.isdir(os.path.join(store.root, "consumequeue_ext"))
    if on:
        return "on"
    return (
        "off, but consumequeue_ext files exist (give -c broker.conf with enableConsumeQueueExt=true)"
        if present
        else "off"
    )


def inspect_store(store) -> dict:
    root = store.root
    files = []
    for sub in ("commitlog", "consumequeue", "consumequeue_ext", "batchconsumequeue", "index", "config"):
        path = os.path.join(root, sub)
        if os.path.isdir(path):
            n, used = _dir_usage(path)
            files.append({"directory": sub, "files": n, "bytesOnDisk": used})
    segs = store.commitlog_segments()  # (first offset, bytes written, file size)
    queues = []
    for cq in sorted(store.consume_queues(), key=lambda q: (q.topic, q.queue_id)):
        topic, qid = cq.topic, cq.queue_id
        lo, hi = cq.min_offset, cq.max_offset
        row = {
            "topic": topic,
            "queueId": qid,
            "type": cq.cq_type,
            "minOffset": lo,
            "maxOffset": hi,
            "messages": max(hi - max(lo, 0), 0),
            "files": len(cq.files.files),
        }
        ext_files, ext_used = _ext_usage(root, topic, qid)
        if ext_files:  # the ConsumeQueue extension's files (on disk, whether or not this open uses them)
            row["extFiles"], row["extBytesOnDisk"] = ext_files, ext_used
            if cq.ext is not None:
                row["extBytesWritten"] = _ext_written(cq.ext)
        queues.append(row)
    summary = {
        "commitLogMinOffset": store.min_physical_offset,
        "commitLogMaxOffset": store.max_physical_offset,
        "commitLogSegments": len(segs),
        "segmentSize": store.config.mapped_file_size_commit_log,
        "lastSegmentFill": f"{segs[-1][1] / segs[-1][2]:.1%}" if segs else "-",
        "topics": len({q["topic"] for q in queues}),
        "queues": len(queues),
        "batchTopics": sorted(store.batch_topics),
        "indexFiles": store.index_file_count(),
        "consumeQueueExt": _ext_state(store),
        "abortFilePresent": os.path.exists(os.path.join(root, "abort")),
        "dispatchBehindBytes": max(store.max_physical_offset - max(_queues_end_on_disk(root), 0), 0),
        "topicConfigs": os.path.exists(TC.topics_path(root)),
        "bytesOnDisk": sum(f["bytesOnDisk"] for f in files),
    }
    return {
        "root": root,
        "summary": summary,
        "files": files,
        "queues": queues,
        "checkpoint": _checkpoint_file(root),
    }


def _checkpoint_file(root: str) -> dict:
    """The checkpoint file's own values, decoded from its bytes (not the open store's: a read-only open
    recovers in memory and may hold another confirmPhyOffset, which it never writes)."""
    from . import dump as D

    path = os.path.join(root, "checkpoint")
    if not os.path.exists(path):
        return {"file": "checkpoint", "state": "no checkpoint file"}
    try:
        return {"file": "checkpoint", **D.checkpoint_header(path)}
    except (OSError, ValueError) as e:  # CorruptDataError is a ValueError
        return {"file": "checkpoint", "state": f"unreadable: {e}"}
