"""rocketstore.maintenance.rebuild, the Spark-free pieces of the parallel rebuild: each checked against what the store
itself does (check_record, IndexService, reput on open), and the whole serial pipeline byte for byte
against the local engine (open the store without its queue and index files: recovery dispatches every
record again)."""

import os
import shutil

import numpy as np
import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.maintenance import rebuild as RB
from rocketstore.errors import StoreLockedError
from rocketstore.formats import record as R
from rocketstore.services.dispatch import OK, check_record
from rocketstore.services.index_service import IndexService

SMALL = dict(
    mapped_file_size_commit_log=64 * 1024,
    mapped_file_size_consume_queue=50 * 20,
    mapped_file_size_batch_consume_queue=20 * 46,
    max_hash_slot_num=64,
    max_index_num=100,
)


def make_store(root, clock_start=1_700_000_000_000, n=900, **overrides) -> StoreConfig:
    """Several topics and queues, tags, keys (none, one, several, rolled back), a SCHEDULE_TOPIC delay,
    a batch-CQ topic, small CommitLog segments and small index files."""
    t = [clock_start]

    def clock():
        t[0] += 7
        return t[0]

    cfg = StoreConfig(clock=clock, **{**SMALL, **overrides})
    with MessageStore.open(root, cfg) as s:
        s.create_topic("Batchy", 2, {"queue.type": "BatchCQ"})
        for i in range(n):
            topic = ("Orders", "Pays", "Logs")[i % 3]
            keys = None if i % 5 == 0 else ([f"k{i}"] if i % 5 == 1 else [f"k{i}", "shared", f"x{i % 7}"])
            sys_flag = {
                37: R.TRANSACTION_PREPARED_TYPE,
                38: R.TRANSACTION_ROLLBACK_TYPE,
                39: R.TRANSACTION_COMMIT_TYPE,
            }.get(i % 40, 0)
            props = {"UNIQ_KEY": f"U{i:06d}"} if i % 4 else None
            r = s.put(
                Message(
                    topic,
                    b"x" * (20 + i % 300),
                    tags=f"T{i % 4}" if i % 6 else None,
                    keys=keys,
                    properties=props,
                    sys_flag=sys_flag,
                ),
                queue_id=(i // 3) % 3,
            )
            assert r.ok, r
            if i % 50 == 0:
                assert s.put(
                    Message("SCHEDULE_TOPIC_XXXX", b"d", properties={"DELAY": str(1 + i % 5)}), queue_id=i % 5
                ).ok
            if i % 30 == 0:
                assert s.put_batch(
                    [Message("Batchy", b"b" * 30, keys=[f"b{i}-{j}"]) for j in range(3)], queue_id=i % 2
                ).ok
                assert s.put_batch(
                    [Message("Orders", b"p", tags="TB", keys=[f"pb{i}-{j}"]) for j in range(2)], queue_id=0
                ).ok
    return cfg


def rebuild_locally(root, cfg):
    """The reference: what the local engine does (old files gone, open: recovery dispatches everything)."""
    for sub in RB.REBUILT:
        shutil.rmtree(os.path.join(root, sub), ignore_errors=True)
    with MessageStore.open(root, cfg) as s:
        s.wait_dispatched(60)


def tree(root, sub):
    base = os.path.join(root, sub)
    out = {}
    for d, _, files in os.walk(base):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                out[os.path.relpath(os.path.join(d, f), base)] = fh.read()
    return out


def index_contents(root):
    """The index files' bytes in name order (names are wall-clock times: they differ between runs)."""
    d = os.path.join(root, "index")
    return [open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))] if os.path.isdir(d) else []


def assert_same_rebuild(a, b):
    for sub in ("consumequeue", "batchconsumequeue"):
        ta, tb = tree(a, sub), tree(b, sub)
        assert sorted(ta) == sorted(tb), sub
        for k in ta:
            assert ta[k] == tb[k], f"{sub}/{k} differs"
    ia, ib = index_contents(a), index_contents(b)
    assert len(ia) == len(ib)
    for i, (x, y) in enumerate(zip(ia, ib)):
        assert x == y, f"index file #{i} differs"
    assert open(os.path.join(a, "checkpoint"), "rb").read() == open(os.path.join(b, "checkpoint"), "rb").read()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("gen") / "store")
    cfg = make_store(root)
    return root, cfg


def copy(src, dst):
    shutil.copytree(src, dst)
    return str(dst)


def test_decoded_columns_are_what_check_record_reads(generated):
    root, cfg = generated
    settings = RB.DecodeSettings.of(cfg)
    path = os.path.join(root, "commitlog", "00000000000000000000")
    seg = RB.decode_segment(path, 0, settings)
    buf = open(path, "rb").read()
    pos, i = 0, 0
    while True:
        kind, size, req, _ = check_record(
            buf, pos, len(buf), check_crc=True, force_verify_prop_crc=False, delay_levels=cfg.delay_levels()
        )
        if kind != OK:
            break
        c = seg.columns
        assert (
            c["topic"][i],
            int(c["queue_id"][i]),
            int(c["queue_offset"][i]),
            int(c["phys"][i]),
            int(c["size"][i]),
            int(c["tags_code"][i]),
            int(c["store_ts"][i]),
            int(c["sys_flag"][i]),
            int(c["base"][i]),
            int(c["batch_size"][i]),
            c["keys"][i],
            c["uniq"][i],
        ) == (
            req.topic,
            req.queue_id,
            req.consume_queue_offset,
            req.commit_log_offset,
            req.msg_size,
            req.tags_code,
            req.store_timestamp,
            req.sys_flag,
            req.msg_base_offset,
            req.batch_size,
            req.keys,
            req.uniq_key,
        )
        pos += size
        i += 1
    assert i == seg.records > 100 and seg.blank and seg.end == pos
    assert any(c == "SCHEDULE_TOPIC_XXXX" for c in seg.columns["topic"])
    assert set(np.asarray(seg.columns["batch_size"]).tolist()) >= {1, 3}  # inner batches of the batch topic


def test_index_plan_matches_index_service(tmp_path):
    """Entries through IndexService (the store's own) vs plan_index + write_index_file: same files."""
    rng = np.random.default_rng(7)
    per_record = rng.integers(0, 4, 300)
    per_record[-5:] = 0  # records without keys after the last entry: an arrival
    records = []
    for i, k in enumerate(per_record.tolist()):
        keys = " ".join(f"key{i}-{j}" for j in range(k))
        records.append(("T", 1000 + i * 10, 1_700_000_000_000 + i * 1500, 0, None, keys))
    for index_num, cut in ((9, 300), (9, 295), (101, 300), (4, 300)):
        ref = tmp_path / f"ref{index_num}-{cut}"
        svc = IndexService(str(ref), 16, index_num, writable=True)
        svc.add_many(records[:cut])
        svc.build()
        svc.flush()
        svc.close()
        counts = [entry for entry in per_record[:cut].tolist()]
        last_entry = max((i for i, c in enumerate(counts) if c), default=-1)
        plan = RB.plan_index(index_num, [(0, cut, sum(counts))], arrival_after_last_entry=cut - 1 > last_entry)
        ours = tmp_path / f"ours{index_num}-{cut}" / "index"
        ours.mkdir(parents=True)
        h, p, t = RB.index_entries(
            ["T"] * cut,
            [r[5] for r in records[:cut]],
            [None] * cut,
            [0] * cut,
            [r[1] for r in records[:cut]],
            [r[2] for r in records[:cut]],
        )
        for i, name in enumerate(plan.names):
            a, b = i * plan.per_file, min((i + 1) * plan.per_file, plan.total_entries)
            RB.write_index_file(
                str(ours / name), 16, index_num, h[a:b], p[a:b], t[a:b], (int(p[a - 1]), int(t[a - 1])) if a else None
            )
        assert index_contents(str(ref)) == index_contents(str(ours.parent)), (index_num, cut)
        assert plan.names == sorted(plan.names) and len(set(plan.names)) == len(plan.names)


def test_serial_rebuild_is_byte_identical_to_the_local_engine(generated, tmp_path):
    root, cfg = generated
    ours, ref = copy(root, tmp_path / "ours"), copy(root, tmp_path / "ref")
    rebuild_locally(ref, cfg)
    summary = RB.rebuild_serial(ours, cfg)
    assert len(os.listdir(os.path.join(ours, "commitlog"))) > 3 and len(index_contents(ours)) > 3
    assert_same_rebuild(ours, ref)
    with MessageStore.open(ref, cfg, read_only=True) as s:
        assert summary["queues"] == len(s.consume_queues())
        assert summary["indexFiles"] == s.index_file_count()
    assert not [n for n in os.listdir(ours) if n.startswith(".rebuild-")]


def test_serial_rebuild_of_a_cleaned_store_without_index(tmp_path):
    root = str(tmp_path / "store")
    cfg = make_store(root, n=600, message_index_enable=False)
    with MessageStore.open(root, cfg) as s:
        segs = sorted(os.listdir(os.path.join(root, "commitlog")))
        for n in segs[:3]:  # expire the first three segments
            os.utime(os.path.join(root, "commitlog", n), (1, 1))
        assert s.delete_expired_files() >= 2
        assert s.min_physical_offset > 0
    ref = copy(root, tmp_path / "ref")
    rebuild_locally(ref, cfg)
    RB.rebuild_serial(root, cfg)
    assert_same_rebuild(root, ref)
    assert index_contents(root) == []


def test_a_bad_record_mid_log_is_an_error_and_the_old_files_come_back(generated, tmp_path):
    root, cfg = generated
    ours = copy(root, tmp_path / "ours")
    before = tree(ours, "consumequeue")
    seg = os.path.join(ours, "commitlog", "00000000000000065536")
    with open(seg, "r+b") as fh:
        fh.seek(1000)  # inside the segment's records: the chain breaks there
        fh.write(b"\xff" * 16)
    with pytest.raises(RB.RebuildError, match=r"00000000000000065536: offset \d+.*rocketstore recover"):
        RB.rebuild_serial(ours, cfg)
    assert tree(ours, "consumequeue") == before
    assert not [n for n in os.listdir(ours) if n.startswith(".rebuild-")]


def test_refuses_a_store_open_for_writing(generated, tmp_path):
    root, cfg = generated
    ours = copy(root, tmp_path / "ours")
    with MessageStore.open(ours, cfg):
        with pytest.raises(StoreLockedError):
            RB.rebuild_serial(ours, cfg)
    assert os.path.isdir(os.path.join(ours, "consumequeue"))
