"""A read-only open of each golden store answers exactly what the real RocketMQ store answered."""

import hashlib
import os

import pytest

from rocketstore import MessageStore

from . import goldens as G

STORES = [
    "store-v1-basic",
    "store-crc",
    "store-v2-topics",
    "store-txn",
    "store-expired",
    "store-expired-cq-rebuilt",
    "store-abnormal",
    "store-abnormal-recovered",
    "store-batch-cq",
]


def _tree_digest(root):
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for n in sorted(filenames):
            p = os.path.join(dirpath, n)
            h.update(p.encode())
            with open(p, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def _message_view(m):
    return {
        "msgId": m.msg_id,
        "topic": m.topic,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "commitLogOffset": m.physical_offset,
        "storeSize": m.size,
        "sysFlag": m.sys_flag,
        "flag": m.flag,
        "bodyCRC": m.body_crc,
        "bornTimestamp": m.born_timestamp,
        "storeTimestamp": m.store_timestamp,
        "bornHost": m.born_host,
        "storeHost": m.store_host,
        "reconsumeTimes": m.reconsume_times,
        "preparedTransactionOffset": m.prepared_transaction_offset,
        "properties": m.properties,
        "body_sha256": hashlib.sha256(m.body).hexdigest(),
        "bodyLength": len(m.body),
    }


LONG_MAX = (1 << 63) - 1


def check_answers(store, answers, problems, simple_only=True) -> int:
    """Compare every recorded answer; returns how many were compared."""
    count = 0

    def same(what, ours, theirs):
        nonlocal count
        count += 1
        if ours != theirs:
            problems.append(f"{what}: ours {ours!r}, RocketMQ {theirs!r}")

    same("minPhyOffset", store.min_physical_offset, answers["minPhyOffset"])
    same("maxPhyOffset", store.max_physical_offset, answers["maxPhyOffset"])
    for q in answers["queues"]:
        if simple_only and q.get("cqType") != "SimpleCQ":
            continue
        t, qid = q["topic"], q["queueId"]
        tag = f"{t}/{qid}"
        same(f"{tag} max", store.max_offset(t, qid), q["maxOffsetInQueue"])
        same(f"{tag} min", store.min_offset(t, qid), q["minOffsetInQueue"])
        same(f"{tag} total", store.max_offset(t, qid) - store.min_offset(t, qid), q["messageTotalInQueue"])
        same(f"{tag} earliest", store.earliest_message_time(t, qid), q["earliestMessageTime"])
        for off, phys in q.get("commitLogOffsetInQueue", {}).items():
            u = store.queue_unit(t, qid, int(off))
            same(f"{tag} commitLogOffset@{off}", u[0] if u else 0, phys)
        for off, ts in q.get("messageStoreTimeStamp", {}).items():
            same(f"{tag} storeTime@{off}", store.store_timestamp_at(t, qid, int(off)), ts)
        for g in q.get("getMessage", []):
            r = store.get("GoldenGroup", t, qid, g["offset"], max_count=g["maxMsgNums"], tags=g.get("filter"))
            exp = g["result"]
            what = f"{tag} get({g['offset']}, {g['maxMsgNums']}, {g.get('filter')!r})"
            same(what + " status", r.status.name, exp["status"])
            same(what + " next", r.next_begin_offset, exp["nextBeginOffset"])
            same(what + " min/max", (r.min_offset, r.max_offset), (exp["minOffset"], exp["maxOffset"]))
            same(what + " offsets", [m.queue_offset for m in r.messages], exp["messageQueueOffsets"])
            same(what + " physical", [m.physical_offset for m in r.messages], exp["physicalOffsets"])
            same(what + " bytes", r.buffer_total_size, exp["bufferTotalSize"])
            same(what + " count", r.message_count, exp["messageCount"])
        for tq in q.get("offsetInQueueByTime", []):
            ts = tq["timestamp"]
            same(f"{tag} byTime({ts}) default", store.offset_by_time(t, qid, ts), tq["default"])
            same(f"{tag} byTime({ts}) LOWER", store.offset_by_time(t, qid, ts, "lower"), tq["LOWER"])
            same(f"{tag} byTime({ts}) UPPER", store.offset_by_time(t, qid, ts, "upper"), tq["UPPER"])
    for look in answers.get("lookMessageByOffset", []):
        m = store.look(look["commitLogOffset"])
        exp = look.get("message")
        ours = _message_view(m) if m is not None else None
        if exp is not None and ours is not None:
            ours = {k: ours[k] for k in exp}
        same(f"look({look['commitLogOffset']})", ours, exp)
    for qm in answers.get("queryMessage", []):
        end = None if qm["end"] == LONG_MAX else qm["end"]
        r = store.query(qm["topic"], qm["key"], max_count=qm["maxNum"], begin_ms=qm["begin"], end_ms=end)
        what = f"query({qm['topic']!r}, {qm['key']!r}, {qm['maxNum']}, {qm['begin']}..{qm['end']})"
        same(what, [m.physical_offset for m in r], qm["physicalOffsets"])
        if qm["physicalOffsets"]:  # RocketMQ reports how far the index got only with a hit
            same(
                what + " index end",
                (r.index_last_update_timestamp, r.index_last_update_phy_offset),
                (qm["indexLastUpdateTimestamp"], qm["indexLastUpdatePhyoffset"]),
            )
    cp = answers.get("checkpointInMemory")
    if cp:
        same("confirmPhyOffset", store.confirm_offset, cp["confirmPhyOffset"])
    return count


@pytest.mark.parametrize("name", STORES)
def test_read_only_open_answers_as_rocketmq(name):
    G.require(name)
    root = G.store_dir(name)
    before = _tree_digest(root)
    problems: list[str] = []
    with MessageStore.open(root, G.config_for(name), read_only=True) as store:
        compared = check_answers(store, G.manifest(name)["answers_after_reopen"], problems, simple_only=False)
    assert compared > 500
    assert not problems, f"{len(problems)} answers differ, e.g.:\n" + "\n".join(problems[:15])
    assert _tree_digest(root) == before, "a read-only open changed the store directory"
