"""The command line on a store with the ConsumeQueue extension (enableConsumeQueueExt, with a SQL92 filter's
bitmaps), run as real processes: verify checks CQ units through their ext units and finds corruption planted
in an ext file (file and offset), dump decodes ext files and shows ext addresses as such, inspect lists the
ext files, rebuild (local) writes the ext again while the Spark engine refuses, and consume --sql."""

import json
import os
import struct
import subprocess
import sys

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.maintenance import rebuild as RB
from rocketstore.formats import cq as CQ
from rocketstore.formats import cq_ext as X
from rocketstore.formats.javahash import java_string_hash

EXT_FILE = 1000  # small ext files: several per queue, each ended by the end marker
CONF = (
    "mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\nmaxHashSlotNum=64\nmaxIndexNum=256\n"
    f"enableConsumeQueueExt=true\nenableCalcFilterBitMap=true\nmappedFileSizeConsumeQueueExt={EXT_FILE}\n"
)
SQL = "region = 'eu'"
N = 120
TAGS = ("A", "B", "C")


def run(*args):
    p = subprocess.run([sys.executable, "-m", "rocketstore.cli", *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def run_json(*args):
    code, out, err = run(*args, "--json")
    return code, json.loads(out) if out.strip() else None, err


def run_lines(*args):
    """A stream's JSON Lines (`consume --json`): one object per message."""
    code, out, err = run(*args, "--json")
    return code, [json.loads(line) for line in out.splitlines()], err


def dump_json(*args):
    """`dump --json` prints JSON Lines, one object per record (ext and queue files have no header)."""
    code, out, err = run("dump", *args, "--json")
    return code, {"rows": [json.loads(line) for line in out.splitlines()]}, err


def _props(i):
    return {"i": str(i), "region": "eu" if i % 3 == 0 else "us"}


@pytest.fixture
def ext_store(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    root = str(tmp_path / "store")
    cfg = StoreConfig.from_properties(str(conf))
    with MessageStore.open(root, cfg) as s:
        for i in range(N):
            if i == 30:
                s.register_filter("g1", "Shop", SQL)  # from here on the ext units carry bitmaps
            assert s.put(Message("Shop", f"m{i}".encode(), tags=TAGS[i % 3], properties=_props(i)), queue_id=i % 2).ok
    return root, str(conf)


def _ext_files(root, q=0):
    d = os.path.join(root, "consumequeue_ext", "Shop", str(q))
    return [os.path.join(d, n) for n in sorted(os.listdir(d))]


def _cq_tags(root, q=0):
    with open(os.path.join(root, "consumequeue", "Shop", str(q), "0" * 20), "rb") as fh:
        units = CQ.units(fh.read())
    return [int(t) for t, size in zip(units["tags"], units["size"]) if size > 0]


# ------------------------------------------------------------------ verify
def test_verify_passes_on_a_sound_ext_store(ext_store):
    root, _ = ext_store
    assert len(_ext_files(root)) > 1
    code, report, err = run_json("verify", root)
    assert code == 0 and report["ok"], report["problems"][:5]
    assert report["checked"]["extAddressedUnits"] == N
    assert report["checked"]["consumeQueueExtUnits"] == N
    assert report["checked"]["consumeQueueExtFiles"] == len(_ext_files(root, 0)) + len(_ext_files(root, 1))


def _unit_place(root, k, q=0):
    """(ext file, offset in it) of queue q's k-th unit."""
    real = X.undecorate(_cq_tags(root, q)[k])
    start = max(int(os.path.basename(p)) for p in _ext_files(root, q) if int(os.path.basename(p)) <= real)
    return os.path.join(root, "consumequeue_ext", "Shop", str(q), f"{start:020d}"), real - start


def _patch(path, offset, data):
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


@pytest.mark.parametrize("what", ["tagsCode", "msgStoreTime", "size"])
def test_verify_finds_a_broken_ext_unit_with_file_and_offset(ext_store, what):
    root, _ = ext_store
    k = 40  # queue 0's unit 40: message 80, with a bitmap
    path, off = _unit_place(root, k)
    rel = os.path.relpath(path, root)
    if what == "tagsCode":
        _patch(path, off + 2, struct.pack(">q", java_string_hash("Z")))
    elif what == "msgStoreTime":
        _patch(path, off + 10, struct.pack(">q", 12345))
    else:
        _patch(path, off, struct.pack(">h", 7))  # below the minimum unit size: the walk stops there
    code, report, err = run_json("verify", root)
    assert code == 1 and not report["ok"]
    mine = [p for p in report["problems"] if p["file"] == rel and p["offset"] == off]
    assert mine, report["problems"]
    assert what.lower()[:4] in mine[0]["problem"].lower()
    if what == "size":  # the units after it in that file are no longer reachable: each one reported too
        assert any("past the units" in p["problem"] for p in report["problems"])
    # nothing is reported against the ConsumeQueue's own tagsCode (it is an address, not a hash)
    assert not [
        p
        for p in report["problems"]
        if "the record's tags give" in p["problem"] and p["file"].startswith("consumequeue/")
    ]


def test_verify_reports_a_missing_ext_directory(ext_store):
    root, _ = ext_store
    for p in _ext_files(root, 1):
        os.unlink(p)
    code, report, _ = run_json("verify", root)
    assert code == 1
    assert any(
        p["file"].startswith("consumequeue/Shop/1/") and "ext address" in p["problem"] for p in report["problems"]
    )


# ------------------------------------------------------------------ dump and inspect
def test_dump_decodes_ext_units_and_shows_ext_addresses(ext_store):
    root, _ = ext_store
    first = _ext_files(root)[0]
    code, out, err = dump_json(first)
    assert code == 0, err
    rows = out["rows"]
    assert rows[-1]["kind"] == "END"  # the first file ended with the marker
    units = rows[:-1]
    # queue 0 holds messages 0, 2, 4, ...: their tags hashes, and bitmaps from message 30 on
    assert [u["tagsCode"] for u in units] == [java_string_hash(TAGS[i % 3]) for i in range(0, 2 * len(units), 2)]
    offs = [u["offset"] for u in units]
    assert offs[0] == 0 and all(b - a == u["size"] for a, b, u in zip(offs, offs[1:], units))
    assert all(u["bitmap"] == "" for u in units[:15]) and all(
        len(u["bitmap"]) == 2 * u["bitMapSize"] > 0 for u in units[15:]
    )
    assert all(X.undecorate(u["address"]) == u["offset"] for u in units)

    code, out, err = dump_json(os.path.join(root, "consumequeue", "Shop", "0", "0" * 20), "--limit", "20")
    assert code == 0, err
    for k, row in enumerate(out["rows"]):
        assert row["tagsCode"] == f"ext@{offs[k]}" if k < len(offs) else row["tagsCode"].startswith("ext@")
        assert row["extTagsCode"] == java_string_hash(TAGS[(2 * k) % 3])


def test_inspect_lists_ext_files(ext_store):
    root, conf = ext_store
    code, report, err = run_json("inspect", root, "-c", conf)
    assert code == 0, err
    (ext,) = [f for f in report["files"] if f["directory"] == "consumequeue_ext"]
    assert ext["files"] == len(_ext_files(root, 0)) + len(_ext_files(root, 1))
    assert report["summary"]["consumeQueueExt"] == "on"
    q0 = [q for q in report["queues"] if q["queueId"] == 0][0]
    assert q0["extFiles"] == len(_ext_files(root, 0)) and q0["extBytesWritten"] > 0


# ------------------------------------------------------------------ rebuild
def test_local_rebuild_writes_the_ext_again(ext_store):
    root, conf = ext_store
    old_units = {
        q: [
            X.decode_unit(open(_unit_place(root, k, q)[0], "rb").read(), _unit_place(root, k, q)[1])
            for k in range(N // 2)
        ]
        for q in (0, 1)
    }
    code, report, err = run_json("rebuild", root, "--yes", "-c", conf)
    assert code == 0, err
    assert report["messages"] == N and report["consumeQueueExt"] == "rebuilt"
    for q in (0, 1):
        tags = _cq_tags(root, q)
        assert len(tags) == N // 2 and all(X.is_ext_addr(t) for t in tags)
        new_units = [
            X.decode_unit(open(_unit_place(root, k, q)[0], "rb").read(), _unit_place(root, k, q)[1])
            for k in range(N // 2)
        ]
        assert [(u.tags_code, u.msg_store_time) for u in new_units] == [
            (u.tags_code, u.msg_store_time) for u in old_units[q]
        ]
    assert not [n for n in os.listdir(root) if n.startswith(".rebuild-")]
    code, report, _ = run_json("verify", root)
    assert code == 0 and report["checked"]["extAddressedUnits"] == N
    assert report["checked"]["consumeQueueExtUnits"] == N  # the old ext units went: no leftovers
    assert _cq_tags(root, 0)[0] == X.decorate(0)
    # (the bytes differ from before: re-dispatch gives messages 0..29 the filter's bitmaps too, since the
    # filter is known from the start now)


def test_local_rebuild_without_the_ext_config_drops_it(ext_store):
    root, _ = ext_store
    conf = os.path.join(os.path.dirname(root), "plain.conf")
    with open(conf, "w") as fh:
        fh.write("mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n")
    code, report, err = run_json("rebuild", root, "--yes", "-c", conf)
    assert code == 0, err
    assert report["consumeQueueExt"].startswith("dropped")
    assert not os.path.exists(os.path.join(root, "consumequeue_ext"))
    assert not any(X.is_ext_addr(t) for t in _cq_tags(root))
    assert run_json("verify", root)[0] == 0


def test_spark_rebuild_refuses_the_ext(ext_store):
    root, conf = ext_store
    before = sorted(os.listdir(root))
    code, out, err = run("rebuild", root, "--yes", "--engine", "spark", "-c", conf)
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and "--engine local" in err and "enableConsumeQueueExt" in err
    assert sorted(os.listdir(root)) == before
    with pytest.raises(RB.RebuildError, match="--engine local"):
        RB.rebuild_serial(root, StoreConfig.from_properties(conf))
    assert sorted(os.listdir(root)) == before and os.listdir(os.path.join(root, "consumequeue_ext"))


# ------------------------------------------------------------------ consume --sql
def test_consume_with_sql(ext_store):
    root, conf = ext_store
    code, out, err = run_lines(
        "consume", root, "Shop", "-g", "g2", "--sql", "region = 'eu' AND i >= 60", "--no-commit", "-c", conf
    )
    assert code == 0, err
    got = sorted(int(r["properties"]["i"]) for r in out)
    assert got == [i for i in range(N) if i % 3 == 0 and i >= 60]
    # the group that registered the filter (bitmaps from message 30 on) gets the same answer as the predicate
    code, out, err = run_lines("consume", root, "Shop", "-g", "g1", "--sql", SQL, "-c", conf)
    assert code == 0, err
    assert sorted(int(r["properties"]["i"]) for r in out) == [i for i in range(N) if i % 3 == 0]


def test_consume_with_a_bad_sql_expression(ext_store):
    root, conf = ext_store
    code, out, err = run("consume", root, "Shop", "-g", "g2", "--sql", "region = AND 'eu'", "-c", conf)
    assert code == 1 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("rocketstore: error: --sql") and "column 10" in line
    code, out, err = run("consume", root, "Shop", "-g", "g2", "--sql", SQL, "--tags", "A", "-c", conf)
    assert code == 1 and "not both" in err and len(err.strip().splitlines()) == 1
