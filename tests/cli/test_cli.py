"""The `rocketstore` command, run as a real process: dump and inspect against golden stores (expected values
from their manifests), JSON output parsed, and one clear error line with a non-zero status for bad input."""

import json
import os
import shutil
import subprocess
import sys

from tests.golden import goldens as G

BASIC = "store-v1-basic"


def run(*args):
    p = subprocess.run([sys.executable, "-m", "rocketstore.cli", *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def run_json(*args):
    code, out, err = run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def dump_json(*args):
    """`dump --json` prints JSON Lines: an optional {"header": ...} line, then one object per record."""
    code, out, err = run("dump", *args, "--json")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    header = lines.pop(0)["header"] if lines and set(lines[0]) == {"header"} else None
    return {"header": header, "rows": lines}


def test_dump_checkpoint_decodes_rocketmqs_fields():
    G.require(BASIC)
    got = dump_json(os.path.join(G.store_dir(BASIC), "checkpoint"))["header"]
    exp = G.manifest(BASIC)["checkpointFile"]
    assert got == {k: exp[k] for k in got}
    assert set(got) == {
        "physicMsgTimestamp",
        "logicsMsgTimestamp",
        "indexMsgTimestamp",
        "masterFlushedOffset",
        "confirmPhyOffset",
    }


def test_dump_commitlog_lists_every_record_then_the_blank():
    G.require(BASIC)
    rows = dump_json(os.path.join(G.store_dir(BASIC), "commitlog", "00000000000000065536"))["rows"]
    derived = G.manifest(BASIC)["derived_by_postprocess_script"]
    expected = [[o, s, v] for o, s, v in derived["commitlogRecords_offset_size_magic"] if 65536 <= o < 131072]
    assert [[r["offset"], r["size"], r["kind"]] for r in rows[:-1]] == expected
    blank = [b for b in derived["blankFillers"] if b["file"] == "00000000000000065536"][0]
    assert rows[-1] == {"offset": blank["physicalOffset"], "size": blank["declaredSize"], "kind": "BLANK"}


def test_dump_consume_queue_and_index_headers():
    G.require(BASIC)
    root = G.store_dir(BASIC)
    derived = G.manifest(BASIC)["derived_by_postprocess_script"]
    cq = derived["consumeQueueFiles"]["consumequeue/TopicA/0"][0]
    rows = dump_json(os.path.join(root, "consumequeue", "TopicA", "0", cq["file"]))["rows"]
    assert len(rows) == cq["nonZeroUnits"] and rows[-1]["queueOffset"] == cq["lastNonZeroUnit"]
    first = derived["indexFileHeaders"][0]
    got = dump_json(os.path.join(root, "index", first["file"]))
    assert {
        k: got["header"][k]
        for k in ("beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset", "hashSlotCount", "indexCount")
    } == {
        k: first[k]
        for k in ("beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset", "hashSlotCount", "indexCount")
    }
    assert len(got["rows"]) == first["indexCount"] - 1 and got["header"]["hashSlotNum"] == 100


def test_inspect_reports_queues_as_rocketmq_answered():
    G.require(BASIC)
    report = run_json("inspect", G.store_dir(BASIC))
    answers = {(q["topic"], q["queueId"]): q for q in G.manifest(BASIC)["answers_after_reopen"]["queues"]}
    for q in report["queues"]:
        a = answers.get((q["topic"], q["queueId"]))
        if a is not None:
            assert (q["minOffset"], q["maxOffset"]) == (a["minOffsetInQueue"], a["maxOffsetInQueue"])
    assert report["summary"]["commitLogMaxOffset"] == G.manifest(BASIC)["answers_after_reopen"]["maxPhyOffset"]
    assert report["summary"]["abortFilePresent"] is False


def test_bad_input_gives_one_error_line_and_a_failure_status(tmp_path):
    code, out, err = run("dump", str(tmp_path / "missing"))
    assert code == 1 and "no such file" in err and err.count("\n") == 1
    (tmp_path / "mystery").write_bytes(b"x")
    code, _, err = run("dump", str(tmp_path / "mystery"))
    assert code == 1 and "--kind" in err
    code, _, err = run("inspect", str(tmp_path / "nostore"))
    assert code == 1 and "no store directory" in err


def test_dump_reports_a_corrupt_record_and_stops(tmp_path):
    G.require(BASIC)
    seg = tmp_path / "commitlog" / "00000000000000000000"
    seg.parent.mkdir()
    shutil.copy(os.path.join(G.store_dir(BASIC), "commitlog", seg.name), seg)
    data = bytearray(seg.read_bytes())
    data[445 + 4] ^= 0xFF  # the second record's magic code
    seg.write_bytes(bytes(data))
    rows = dump_json(str(seg))["rows"]
    assert len(rows) == 2 and rows[0]["kind"] == "V1" and rows[1]["kind"] == "BAD"
    assert "magic" in rows[1]["problem"]


def test_a_corrupt_file_gives_one_error_line_naming_it(tmp_path):
    G.require(BASIC)
    root = tmp_path / "store"
    shutil.copytree(G.store_dir(BASIC), root)
    cq = root / "consumequeue" / "TopicA" / "0" / "00000000000000000000"
    os.chmod(cq, 0o644)
    with open(cq, "r+b") as fh:
        fh.truncate(999)  # not the size every ConsumeQueue file has
    conf = tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in G.manifest(BASIC)["config_all"].items()))
    code, _, err = run("inspect", str(root), "-c", str(conf))
    assert code == 1 and err.count("\n") == 1 and "00000000000000000000" in err and "999" in err
    cp = tmp_path / "checkpoint"
    cp.write_bytes(b"\0" * 10)
    code, _, err = run("dump", str(cp))
    assert code == 1 and "checkpoint" in err and err.count("\n") == 1


def test_inspect_reports_how_far_dispatch_was_behind_at_the_crash():
    G.require("store-abnormal")
    crash = G.manifest("store-abnormal")["crashInfo"]
    report = run_json("inspect", G.store_dir("store-abnormal"))
    assert report["summary"]["abortFilePresent"] is True
    assert (
        report["summary"]["dispatchBehindBytes"] == crash["maxPhyOffsetAtCrash"] - crash["dispatchBlockedFromPhyOffset"]
    )
    assert run_json("inspect", G.store_dir(BASIC))["summary"]["dispatchBehindBytes"] == 0
