"""The Spark source's queue reader (spark/queue_read.read_range, called directly: no Spark) on a store with the
ConsumeQueue extension: the tag pushdown must not drop units whose tagsCode slot holds an ext address. The
ext units' tagsCodes decide (read from the consumequeue_ext files), and when those files are gone the units
still go on to the exact tag check, which answers from the records' tags."""

import os
import shutil

import pyarrow as pa
import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.formats import cq as CQ
from rocketstore.formats import cq_ext as X
from rocketstore.formats.javahash import java_string_hash

QR = pytest.importorskip("rocketstore.spark.queue_read")

SEG = 1 << 20
TAGS = ["A", "B", "C"]
N = 300


def _store(root, ext=True):
    cfg = StoreConfig(
        enable_consume_queue_ext=ext,
        enable_calc_filter_bit_map=ext,
        mapped_file_size_commit_log=SEG,
        mapped_file_size_consume_queue=6000,
        mapped_file_size_consume_queue_ext=1000,
    )
    with MessageStore.open(root, cfg) as s:
        for i in range(N):
            if i == 100 and ext:
                s.register_filter("g1", "Shop", "region = 'eu'")  # later units carry bitmaps too
            props = {"i": str(i), "region": "eu" if i % 4 == 0 else "us"}
            assert s.put(Message("Shop", b"x", tags=TAGS[i % 3], properties=props), queue_id=i % 2).ok
    return cfg


def _read(root, queue_id, tags):
    spec = QR.ReadSpec(
        root=root,
        commitlog_size=SEG,
        cq_size=6000,
        tags=frozenset(tags),
        tag_codes=tuple(sorted(java_string_hash(t) for t in tags)),
        batch_rows=64,
    )
    batches = list(QR.read_range(spec, QR.QueueRange("Shop", queue_id, 0, N // 2)))
    table = pa.Table.from_batches(batches) if batches else None
    if table is None or not table.num_rows:
        return []
    return [int(dict(p)["i"]) for p in table.column("properties").to_pylist()]


def _expected(queue_id, tags):
    return [i for i in range(queue_id, N, 2) if TAGS[i % 3] in tags]


def test_tag_pushdown_resolves_ext_addresses(tmp_path):
    root = str(tmp_path / "s")
    _store(root)
    units = CQ.units(open(os.path.join(root, "consumequeue", "Shop", "0", "0" * 20), "rb").read())
    assert all(X.is_ext_addr(int(t)) for t in units["tags"][: N // 2])  # the case under test
    for q in (0, 1):
        assert _read(root, q, {"B"}) == _expected(q, {"B"})
        assert _read(root, q, {"A", "C"}) == _expected(q, {"A", "C"})


def test_ext_tags_are_what_the_pushdown_compares(tmp_path):
    """_ext_tags turns each address into its ext unit's tagsCode (the tag hash), across ext files."""
    root = str(tmp_path / "s")
    _store(root)
    units = CQ.units(open(os.path.join(root, "consumequeue", "Shop", "1", "0" * 20), "rb").read())[: N // 2]
    spec = QR.ReadSpec(root=root, commitlog_size=SEG, cq_size=6000)
    tags = units["tags"].astype("int64")
    got = QR._ext_tags(spec, QR.QueueRange("Shop", 1, 0, N // 2), tags, tags <= X.MAX_ADDR)
    assert got.tolist() == [java_string_hash(TAGS[i % 3]) for i in range(1, N, 2)]
    assert len(os.listdir(os.path.join(root, "consumequeue_ext", "Shop", "1"))) > 1  # several ext files


def test_without_the_ext_files_units_still_reach_the_exact_check(tmp_path):
    root = str(tmp_path / "s")
    _store(root)
    shutil.rmtree(os.path.join(root, "consumequeue_ext"))
    assert _read(root, 0, {"C"}) == _expected(0, {"C"})


def test_plain_store_unchanged(tmp_path):
    root = str(tmp_path / "s")
    _store(root, ext=False)
    assert _read(root, 1, {"A"}) == _expected(1, {"A"})
