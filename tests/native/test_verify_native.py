"""verify's compiled walks (records, ConsumeQueue units, index entries) change no report: a real store, then
random damage to its ConsumeQueue, CommitLog and index files (bytes flipped or overwritten, files cut short),
verified on both engines."""

import os
import shutil
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig, engine
from rocketstore.maintenance.verify import verify_store

CFG = dict(
    mapped_file_size_commit_log=32 * 1024,
    mapped_file_size_consume_queue=20 * 200,
    max_hash_slot_num=64,
    max_index_num=2000,
)


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("verify") / "s")
    with MessageStore.open(root, StoreConfig(**CFG)) as s:
        for i in range(500):
            m = Message(
                topic=f"T{i % 3}",
                body=bytes([i % 250]) * (10 + i % 60),
                tags=("a", "b", None)[i % 3],
                keys=f"k{i}  \u00f6{i % 7} \U0001f600{i % 5}" if i % 4 else None,
            )
            s.put(m, i % 2)
        s.wait_dispatched()
    return root


def _files(root):
    out = []
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            if ("consumequeue" in p or "commitlog" in p or os.sep + "index" + os.sep in p) and os.path.getsize(p):
                out.append(p)
    return sorted(out)


def _report(root, pure):
    with engine.using("pure" if pure else "native"):
        r = verify_store(root, StoreConfig(**CFG))
    r.pop("root")
    return r


def test_clean_store_same(native, store_dir):
    got = _report(store_dir, False)
    assert got["ok"] and got["checked"]["records"] == 500 and got["checked"]["consumeQueueUnits"] == 500
    assert got == _report(store_dir, True)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_damaged_store_same(native, store_dir, tmp_path_factory, data):
    root = str(tmp_path_factory.mktemp("damaged") / "s")
    shutil.copytree(store_dir, root)
    files = _files(root)
    for _ in range(data.draw(st.integers(1, 4))):
        path = data.draw(st.sampled_from(files))
        size = os.path.getsize(path)
        if size < 16:  # cut short by an earlier step
            continue
        # mostly in the written part of the file (records and units sit at its start)
        at = data.draw(st.integers(0, min(size, 20_000) - 8))
        with open(path, "r+b") as fh:
            fh.seek(at)
            op = data.draw(st.sampled_from(["flip", "int", "zero", "truncate"]))
            if op == "truncate":  # a file cut short (a torn copy): records, units or entries end inside it
                fh.truncate(at)
            elif op == "flip":
                b = fh.read(1)
                fh.seek(at)
                fh.write(bytes([b[0] ^ data.draw(st.integers(1, 255))]))
            elif op == "int":
                fh.write(struct.pack(">i", data.draw(st.sampled_from([0, -1, 1, 91, 0x7FFFFFFF, 20, 300]))))
            else:
                fh.write(bytes(data.draw(st.sampled_from([4, 8, 20, 40]))))
    assert _report(root, False) == _report(root, True)
