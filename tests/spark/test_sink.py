"""The rocketstore sink through Spark: a batch write read back field by field, a bad row failing the job
with nothing appended, and a streaming query whose replayed batch is not appended twice."""

import json
import os

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from rocketstore import MessageStore, StoreConfig  # noqa: E402
from rocketstore.spark import sink as S  # noqa: E402

SEGMENT = 256 * 1024
SCHEMA = "topic string, body binary, tags string, keys array<string>, properties map<string,string>, queueId int"
FORMAT = "rocketstore"


def write(df, root):
    (
        df.write.format(FORMAT)
        .mode("append")
        .option("path", str(root))
        .option("mappedFileSizeCommitLog", str(SEGMENT))
        .save()
    )


def stored(root):
    """Every message in the store through its ConsumeQueues: (topic, queueId) -> messages in queue order."""
    out = {}
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=SEGMENT), read_only=True) as s:
        for topic, queues in s.topics().items():
            for q in queues:
                offset = 0
                while (g := s.get("test", topic, q, offset, max_count=32)).messages:
                    out.setdefault((topic, q), []).extend(g.messages)
                    offset = g.next_begin_offset
    return out


def sink_rows():
    rows = [
        ("Orders", b"order-%d" % i, "Tag%d" % (i % 3), ["k%d" % i, "all"], {"n": str(i), "color": "red"}, i % 2)
        for i in range(40)
    ]
    return rows + [("Audit", b"audit-%d" % i, None, None, None, None) for i in range(12)]  # the store picks queues


def test_batch_write_reads_back_field_by_field(spark, tmp_path):
    rows = sink_rows()
    df = spark.createDataFrame(rows, SCHEMA).repartition(3)
    write(df, tmp_path)
    assert_read_back(rows, tmp_path)


def assert_read_back(rows, root):
    """The store written by the sink from `rows` (a batch write): every row once, field by field."""
    got = stored(root)
    assert sorted(k for k in got if k[0] == "Orders") == [("Orders", 0), ("Orders", 1)]
    by_body = {m.body: (t, q, m) for (t, q), ms in got.items() for m in ms}
    assert len(by_body) == len(rows) == sum(map(len, got.values()))
    for topic, body, tags, keys, props, queue in rows:
        t, q, m = by_body[body]
        assert (t, m.topic, m.tags, m.keys or None) == (topic, topic, tags, keys)
        assert {k: v for k, v in m.properties.items() if k not in ("TAGS", "KEYS")} == (props or {})
        if queue is not None:
            assert q == queue
    assert {q for t, q in got if t == "Audit"} <= set(range(4))
    assert not os.listdir(os.path.join(root, S.STAGING_DIR))
    # and each queue keeps the order of the rows within a partition (Spark's partition order between them)
    for (t, q), ms in got.items():
        assert [m.queue_offset for m in ms] == list(range(len(ms)))


@pytest.mark.parametrize(
    "bad, problem",
    [
        (("bad topic!", b"x", None, None, None, None), r"column 'topic': topic 'bad topic!' contains illegal"),
        (("Orders", None, None, None, None, None), r"column 'body': NULL"),
    ],
)
def test_a_bad_row_fails_the_job_and_appends_nothing(spark, tmp_path, bad, problem):
    write(spark.createDataFrame([("Orders", b"before", None, None, None, 0)], SCHEMA), tmp_path)
    before = stored(tmp_path)
    good = [("Orders", b"ok-%d" % i, None, None, None, 0) for i in range(30)]
    df = spark.createDataFrame(good + [bad] + good, SCHEMA).repartition(2)
    with pytest.raises(Exception, match=problem) as e:
        write(df, tmp_path)
    assert "nothing of this batch was appended" in str(e.value)
    assert {k: [m.body for m in v] for k, v in stored(tmp_path).items()} == {
        k: [m.body for m in v] for k, v in before.items()
    }
    assert not os.listdir(tmp_path / S.STAGING_DIR)


def test_streaming_sink_appends_each_batch_once_across_a_replay(spark, tmp_path):
    source, store, checkpoint = tmp_path / "in", tmp_path / "store", tmp_path / "cp"
    source.mkdir()

    def add_file(name, first, n):
        table = pa.table(
            {
                "topic": ["Stream"] * n,
                "body": [b"m-%d" % i for i in range(first, first + n)],
                "queueId": pa.array([0] * n, pa.int32()),
            }
        )
        pq.write_table(table, source / name)

    def run():
        q = (
            spark.readStream.schema("topic string, body binary, queueId int")
            .parquet(str(source))
            .writeStream.format(FORMAT)
            .option("path", str(store))
            .option("mappedFileSizeCommitLog", str(SEGMENT))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()

    def bodies():
        return [m.body for m in stored(store)[("Stream", 0)]]

    add_file("a.parquet", 0, 50)
    run()
    add_file("b.parquet", 50, 30)
    run()
    assert bodies() == [b"m-%d" % i for i in range(80)]
    # Spark replays a batch whose commit it did not record: forget batch 1's commit, as a crash after the
    # sink's commit and before Spark's would
    commits = sorted((n for n in os.listdir(checkpoint / "commits") if not n.startswith(".")), key=int)
    assert commits == ["0", "1"]
    for name in ("1", ".1.crc"):
        os.unlink(checkpoint / "commits" / name)
    run()
    assert bodies() == [b"m-%d" % i for i in range(80)]  # batch 1 not appended twice
    state = json.loads((store / S.STATE_FILE).read_text())
    assert state["sinks"][str(checkpoint)]["committed"] == 1  # keyed by the checkpoint location
    add_file("c.parquet", 80, 5)
    run()
    assert bodies() == [b"m-%d" % i for i in range(85)]


def test_errors_lead_with_what_is_wrong(spark, tmp_path):
    """A user's mistake reads as one line (no Python traceback inside Spark's AnalysisException); a write
    without .mode("append") is told to use it."""
    from pyspark.errors import AnalysisException

    df = spark.createDataFrame([("Orders", b"x", None, None, None, 0)], SCHEMA)
    with pytest.raises(AnalysisException) as e:
        df.write.format(FORMAT).mode("overwrite").option("path", str(tmp_path)).save()
    assert 'mode("append")' in str(e.value) and "Traceback" not in str(e.value)
    with pytest.raises(AnalysisException) as e:
        spark.read.format(FORMAT).option("path", str(tmp_path / "nowhere")).load().count()
    first = str(e.value).strip().splitlines()[0]
    assert "OptionError: option 'path'" in first and "is not a store directory" in first, first
    assert "Traceback" not in str(e.value)


SHOW = """
import sys
from rocketstore import Message, MessageStore
import rocketstore.spark
with MessageStore.open(sys.argv[1]) as s:
    for _ in range(200):   # enough rows that the reader is still writing when show() has its 3
        assert s.put_batch([Message("Orders", b"m" * 100) for _ in range(1000)], 0).ok
spark = rocketstore.spark.session("local[1]")
spark.read.format("rocketstore").option("path", sys.argv[1]).option("topics", "Orders").load().show(3)
spark.stop()
"""


def test_show_stops_a_read_early_without_a_traceback(tmp_path):
    """show(3) closes the Python worker's socket while it still writes: pyspark's own daemon prints a
    BrokenPipeError traceback there; the session's daemon (quiet_daemon) does not. A process of its own,
    since the JVM's stderr is the console's."""
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-c", SHOW, str(tmp_path / "store")], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "only showing top 3 rows" in p.stdout
    assert "BrokenPipeError" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]
