"""`rocketstore inspect`: what a store holds, gathered from an open (read-only) MessageStore."""
from __future__ import annotations

import os

from .. import topics as TC


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
    for sub, rows in (("consumequeue", D.consumequeue_rows), ("batchconsumequeue", D.batchconsumequeue_rows)):
        base = os.path.join(root, sub)
        if not os.path.isdir(base):
            continue
        for topic in os.listdir(base):
            for q in os.listdir(os.path.join(base, topic)):
                qdir = os.path.join(base, topic, q)
                names = sorted(n for n in os.listdir(qdir) if n.isdigit())
                last = None
                for last in rows(os.path.join(qdir, names[-1])) if names else ():
                    pass
                if last is not None and last.get("size", 0) != 0x7FFFFFFF:
                    end = max(end, last["physicalOffset"] + last["size"])
    return end


def inspect_store(store) -> dict:
    root = store.root
    files = []
    for sub in ("commitlog", "consumequeue", "batchconsumequeue", "index", "config"):
        path = os.path.join(root, sub)
        if os.path.isdir(path):
            n, used = _dir_usage(path)
            files.append({"directory": sub, "files": n, "bytesOnDisk": used})
    segs = store.commitlog.files.files
    last = segs[-1] if segs else None
    queues = []
    for (topic, qid), cq in sorted(store._cqs.items()):
        lo, hi = cq.min_offset, cq.max_offset
        queues.append({"topic": topic, "queueId": qid, "type": cq.cq_type, "minOffset": lo, "maxOffset": hi,
                       "messages": max(hi - max(lo, 0), 0), "files": len(cq.files.files)})
    cp = store.checkpoint
    summary = {
        "commitLogMinOffset": store.min_physical_offset,
        "commitLogMaxOffset": store.max_physical_offset,
        "commitLogSegments": len(segs),
        "segmentSize": store.commitlog.file_size,
        "lastSegmentFill": f"{last.wrote / last.file_size:.1%}" if last else "-",
        "topics": len({q["topic"] for q in queues}),
        "queues": len(queues),
        "batchTopics": sorted(store.batch_topics),
        "indexFiles": len(store.index.files),
        "abortFilePresent": os.path.exists(os.path.join(root, "abort")),
        "dispatchBehindBytes": max(store.max_physical_offset - max(_queues_end_on_disk(root), 0), 0),
        "topicConfigs": os.path.exists(TC.topics_path(root)),
        "bytesOnDisk": sum(f["bytesOnDisk"] for f in files),
    }
    return {"root": root, "summary": summary, "files": files, "queues": queues,
            "checkpoint": {"physicMsgTimestamp": cp.physic_msg_timestamp,
                           "logicsMsgTimestamp": cp.logics_msg_timestamp,
                           "indexMsgTimestamp": cp.index_msg_timestamp,
                           "masterFlushedOffset": cp.master_flushed_offset,
                           "confirmPhyOffset": cp.confirm_phy_offset}}
