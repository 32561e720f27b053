"""`rocketstore produce | consume | query | topics | queues`, run as real processes on small stores in
tmp_path (sizes from a broker.conf given with -c): JSON output parsed and checked, and one error line with
exit status 1 for bad input."""

import json
import signal
import subprocess
import sys

import pytest

CONF = "mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\nmaxHashSlotNum=64\nmaxIndexNum=256\n"


def run(*args, stdin=None):
    p = subprocess.run(
        [sys.executable, "-m", "rocketstore.cli", *args], capture_output=True, text=True, input=stdin, timeout=60
    )
    return p.returncode, p.stdout, p.stderr


def run_json(*args, stdin=None):
    code, out, err = run(*args, "--json", stdin=stdin)
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def store(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    root = str(tmp_path / "store")

    def cmd(name, *args, **kw):
        return run_json(name, root, *args, "-c", str(conf), **kw)

    def lines(name, *args, **kw):
        """A stream (`consume`, `query`): JSON Lines, one object per message."""
        code, out, err = run(name, root, *args, "-c", str(conf), "--json", **kw)
        assert code == 0, err
        return [json.loads(line) for line in out.splitlines()]

    cmd.root, cmd.conf, cmd.lines = root, str(conf), lines
    return cmd


def test_produce_then_every_query_finds_the_same_message(store):
    put = store(
        "produce",
        "Orders",
        "hello",
        "--tags",
        "TagA",
        "--keys",
        "order-1 order-2",
        "--property",
        "color=red",
        "--queue",
        "1",
        "--create",
    )
    assert put["header"]["messages"] == 1
    (row,) = put["rows"]
    assert row["queueId"] == 1 and row["queueOffset"] == 0
    by_key = store.lines("query", "--key", "order-2", "--topic", "Orders")
    by_id = store.lines("query", "--msg-id", row["msgId"])
    by_uniq = store.lines("query", "--unique-key", row["uniqKey"], "--topic", "Orders")
    by_off = store.lines("query", "--offset", str(row["physicalOffset"]))
    for found in (by_key, by_id, by_uniq, by_off):
        assert len(found) == 1
        m = found[0]
        assert (m["msgId"], m["uniqKey"], m["queueId"], m["physicalOffset"]) == (
            row["msgId"],
            row["uniqKey"],
            1,
            row["physicalOffset"],
        )
        assert m["body"] == "hello" and m["tags"] == "TagA" and m["keys"] == "order-1 order-2"
        assert m["properties"]["color"] == "red"
    assert store.lines("query", "--key", "nobody", "--topic", "Orders") == []


def test_round_robin_then_consume_commit_and_nothing_new(store):
    lines = "".join(f"m{i}\n" for i in range(10))
    put = store("produce", "T", "--stdin", "--create", stdin=lines)
    assert put["header"]["messages"] == 10
    # a new topic gets RocketMQ's defaultTopicQueueNums: 8 queues
    assert put["header"]["queues"] == {"0": 2, "1": 2, **{str(q): 1 for q in range(2, 8)}}
    put = store("produce", "T", "a", "b")  # goes on where the totals say: queues 2 and 3
    assert [r["queueId"] for r in put["rows"]] == [2, 3]
    got = store.lines("consume", "T", "--group", "g")
    assert sorted(r["body"] for r in got) == sorted([f"m{i}" for i in range(10)] + ["a", "b"])
    committed = {r["queueId"]: r["groups"]["g"]["committed"] for r in store("queues", "T")["rows"]}
    assert committed == {**{q: 2 for q in range(4)}, **{q: 1 for q in range(4, 8)}}
    assert store.lines("consume", "T", "--group", "g", "--from", "committed") == []
    replay = store.lines("consume", "T", "--group", "g", "--from", "earliest", "--max", "5", "--no-commit")
    assert len(replay) == 5


def test_topics_and_queues_report_counts_and_lag(store):
    store("produce", "A", "--stdin", "--create", stdin="".join(f"{i}\n" for i in range(8)))
    store("produce", "B", "x", "--queue", "0")
    store.lines("consume", "A", "--group", "g1", "--max", "3")  # one queue's poll, cut at 3 and committed
    topics = {r["topic"]: r for r in store("topics")["rows"]}
    assert topics["A"]["queues"] == 8 and topics["A"]["messages"] == 8 and topics["A"]["queueType"] == "SimpleCQ"
    assert topics["B"]["queues"] == 8 and topics["B"]["messages"] == 1  # created with the default 8
    rows = store("queues", "A")["rows"]
    assert [(r["queueId"], r["minOffset"], r["maxOffset"], r["messages"]) for r in rows] == [
        (q, 0, 1, 1) for q in range(8)
    ]
    lag = {r["queueId"]: r["groups"]["g1"] for r in rows}
    assert sum(v["committed"] or 0 for v in lag.values()) == 3
    assert all(v["lag"] == 1 - v["committed"] for v in lag.values() if v["committed"] is not None)
    store.lines("consume", "A", "--group", "g1")
    assert all(r["groups"]["g1"] == {"committed": 1, "lag": 0} for r in store("queues", "A")["rows"])
    assert {r["topic"] for r in store("queues")["rows"]} == {"A", "B"}


def test_bad_input_gives_one_error_line(store, tmp_path):
    store("produce", "T", "x", "--create")
    cases = [
        (("topics", str(tmp_path / "missing")), "no store directory"),
        (("produce", str(tmp_path / "missing"), "T", "x"), "no store directory"),
        (("produce", store.root, "bad/topic", "x"), "illegal characters"),
        (("consume", store.root, "bad topic", "--group", "g"), "illegal characters"),
        (("queues", store.root, "Absent"), "no topic Absent"),
        (("query", store.root, "--msg-id", "not-a-msg-id"), "msgId"),
        (("query", store.root, "--msg-id", "7F00000100002A9F00000000000FFFFF"), "no such message"),
        (("query", store.root, "--offset", "99999999"), "out of range"),
        (("query", store.root, "--offset", "3"), "no message record starts"),
    ]
    for args, words in cases:
        code, out, err = run(*args, "-c", store.conf)
        assert code == 1, (args, out, err)
        assert words in err and err.count("\n") == 1 and err.startswith("rocketstore: error:"), (args, err)


def test_follow_sees_what_another_process_produces(store):
    store("produce", "F", "first", "--queue", "0", "--create")
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rocketstore.cli",
            "consume",
            store.root,
            "F",
            "--group",
            "fg",
            "--follow",
            "--json",
            "-c",
            store.conf,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert json.loads(p.stdout.readline())["body"] == "first"
        store("produce", "F", "second", "--queue", "0")  # the follower holds no lock: this can write
        assert json.loads(p.stdout.readline())["body"] == "second"
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=20)
    assert p.returncode == 0
    rows = store("queues", "F")["rows"]
    assert rows[0]["groups"]["fg"] == {"committed": 2, "lag": 0} and all(r["groups"]["fg"]["lag"] == 0 for r in rows)
