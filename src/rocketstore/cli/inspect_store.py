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
        "topicConfigs": os.path.exists(TC.topics_path(root)),
        "bytesOnDisk": sum(f["bytesOnDisk"] for f in files),
    }
    return {"root": root, "summary": summary, "files": files, "queues": queues,
            "checkpoint": {"physicMsgTimestamp": cp.physic_msg_timestamp,
                           "logicsMsgTimestamp": cp.logics_msg_timestamp,
                           "indexMsgTimestamp": cp.index_msg_timestamp,
                           "masterFlushedOffset": cp.master_flushed_offset,
                           "confirmPhyOffset": cp.confirm_phy_offset}}
