"""The "rocketstore" source, batch and streaming, against the library's own reads (store.get)."""

import os
import subprocess
import sys
import textwrap
import time

import pytest

from rocketstore import Message, MessageStore, StoreConfig

T0 = 1_700_000_000_000
N = 3000


class Clock:
    """10 ms later at every call."""

    def __init__(self):
        self.i = 0

    def __call__(self):
        self.i += 1
        return T0 + 10 * (self.i - 1)


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    return make_source_store(str(tmp_path_factory.mktemp("spark-src") / "store"))


def make_source_store(root):
    """Two topics over several small CommitLog segments, tags, keys and properties; one queue of `Pay`
    starts past 0 offsets-wise only through its time."""
    cfg = StoreConfig(mapped_file_size_commit_log=256 * 1024, mapped_file_size_consume_queue=100 * 20, clock=Clock())
    with MessageStore.open(root, cfg) as s:
        for i in range(N):
            topic = "Orders" if i % 3 else "Pay"
            props = {"region": ["eu", "us"][i % 2], "n": str(i)}
            if i % 7 == 0:
                props["odd\u00e9"] = "v\u00e9"  # non-ASCII names and values
            s.put(
                Message(
                    topic,
                    f"body-{i}".encode() * (1 + i % 5),
                    tags=f"Tag{i % 4}" if i % 11 else None,
                    keys=[f"k{i}", f"x{i % 10}"],
                    properties=props,
                ),
                queue_id=i % 4,
            )
    return root


def _expected(root, topic, queue, start=0, end=None):
    """Rows as store.get answers them, in the columns the source gives."""
    rows = []
    with MessageStore.open(root, read_only=True) as s:
        end = s.max_offset(topic, queue) if end is None else end
        at = start
        while at < end:
            g = s.get("test", topic, queue, at, max_count=32)
            for m in g.messages:
                if m.queue_offset < end:
                    rows.append(_row(m))
            at = g.next_begin_offset
    return rows


def _row(m):
    props = m.properties
    return (
        m.topic,
        m.queue_id,
        m.queue_offset,
        m.physical_offset,
        m.msg_id,
        props.get("TAGS"),
        props.get("KEYS"),
        bytes(m.body),
        dict(props),
        m.born_timestamp,
        m.store_timestamp,
        m.born_host,
        m.store_host,
        m.sys_flag,
        m.reconsume_times,
        m.flag,
        m.body_crc,
    )


COLUMNS = (
    "topic, queueId, queueOffset, physicalOffset, msgId, tags, keys, body, properties, "
    "unix_millis(bornTimestamp), unix_millis(storeTimestamp), bornHost, storeHost, sysFlag, "
    "reconsumeTimes, flag, bodyCRC"
)


def _rows(df):
    return [
        (r[0], r[1], r[2], r[3], r[4], r[5], r[6], bytes(r[7]), dict(r[8]), *r[9:])
        for r in df.selectExpr(*COLUMNS.split(", ")).collect()
    ]


def _read(spark, root, **opts):
    reader = spark.read.format("rocketstore").option("path", root)
    for k, v in opts.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_equals_store_get(spark, store_dir):
    df = _read(spark, store_dir, topics="Orders,Pay")
    # a read this small is one partition, not one per queue (8): the session's parallelism, which the
    # planner packs partitions by, reached it; and the rows come in the order the topics and queues are listed
    assert df.rdd.getNumPartitions() == 1
    want = [r for t in ("Orders", "Pay") for q in range(4) for r in _expected(store_dir, t, q)]
    assert len(want) == N
    assert _rows(df) == want
    # offset ranges as JSON (exclusive end), and minPartitions cutting the queues into pieces
    df = _read(
        spark,
        store_dir,
        topics="Orders",
        startingOffsets='{"Orders": {"1": 100, "2": -2}}',
        endingOffsets='{"Orders": {"1": 250, "2": 10}}',
        minPartitions=9,
    )
    assert df.rdd.getNumPartitions() >= 9
    got = sorted(_rows(df), key=lambda r: (r[1], r[2]))
    want = _expected(store_dir, "Orders", 1, 100, 250) + _expected(store_dir, "Orders", 2, 0, 10)
    want += _expected(store_dir, "Orders", 0) + _expected(store_dir, "Orders", 3)  # not listed: all of it
    assert got == sorted(want, key=lambda r: (r[1], r[2]))


def test_tags_and_timestamps(spark, store_dir):
    everything = _expected(store_dir, "Orders", 0) + _expected(store_dir, "Orders", 3)
    # the tags option (RocketMQ's expression) and a pushed-down filter answer alike
    want = sorted(r for r in everything if r[5] in ("Tag1", "Tag3"))
    opt = _read(spark, store_dir, topicPattern="Ord.*", tags="Tag1 || Tag3").where("queueId in (0, 3)")
    assert sorted(_rows(opt)) == want
    # Spark's own filter answers alike, and leaves the DataFrame it came from whole (a pushed-down filter
    # would stick to it in PySpark 4.3: the source takes none)
    df = _read(spark, store_dir, topics="Orders")
    assert sorted(_rows(df.where("tags in ('Tag1', 'Tag3') and queueId in (0, 3)"))) == want
    assert df.where("tags = 'NoSuchTag'").count() == 0
    assert df.count() == len([i for i in range(N) if i % 3])
    # a SQL92 filter on the properties (RocketMQ's grammar: n is compared as a number)
    df = _read(spark, store_dir, topics="Orders", sql="region = 'eu' AND n > 1000")
    want = sorted(
        r
        for q in range(4)
        for r in _expected(store_dir, "Orders", q)
        if r[8]["region"] == "eu" and int(r[8]["n"]) > 1000
    )
    assert len(want) > 100 and sorted(_rows(df)) == want
    # store times grow by 10 ms a clock call: the range holds exactly the messages stored within it
    df = _read(
        spark,
        store_dir,
        topics="Orders,Pay",
        startingTimestamp=str(T0 + 6005),
        endingTimestamp="2023-11-14T22:13:32.005+00:00",
    )  # T0 + 12005
    got = sorted(_rows(df))
    want = sorted(
        r
        for t in ("Orders", "Pay")
        for q in range(4)
        for r in _expected(store_dir, t, q)
        if T0 + 6005 <= r[10] < T0 + 12005
    )
    assert 250 < len(want) < 350 and got == want


def test_some_columns_by_schema_or_option(spark, store_dir):
    """A schema (or the columns option) naming some columns reads those, in its order, as store.get has
    them; with the tags option (checked on the tags column) and a SQL filter (on the properties) too."""
    everything = [r for q in range(4) for r in _expected(store_dir, "Orders", q)]
    by_schema = (
        spark.read.format("rocketstore")
        .schema("queueOffset BIGINT, topic STRING NOT NULL, body BINARY")
        .option("path", store_dir)
        .option("topics", "Orders")
        .load()
    )
    assert [(f.name, f.nullable) for f in by_schema.schema.fields] == [
        ("queueOffset", True),
        ("topic", False),
        ("body", True),
    ]
    assert sorted((r[0], r[1], bytes(r[2])) for r in by_schema.collect()) == sorted(
        (r[2], r[0], r[7]) for r in everything
    )
    tagged = _read(spark, store_dir, topics="Orders", tags="Tag2", columns="queueId, queueOffset")
    assert tagged.columns == ["queueId", "queueOffset"]
    assert sorted(tuple(r) for r in tagged.collect()) == sorted((r[1], r[2]) for r in everything if r[5] == "Tag2")
    filtered = _read(spark, store_dir, topics="Orders", sql="region = 'us'", columns="msgId")
    assert sorted(r[0] for r in filtered.collect()) == sorted(r[4] for r in everything if r[8]["region"] == "us")
    assert _read(spark, store_dir, topics="Orders", columns="bodyCRC").count() == len(everything)


def test_bad_options_name_the_option(spark, store_dir, tmp_path):
    cases = [
        ({}, "'topics'"),
        ({"topics": "Orders", "startingOffsets": "soon"}, "'startingOffsets'"),
        ({"topics": "Orders", "startingOffsets": '{"Orders": {"0": 999999}}'}, "'startingOffsets'"),
        ({"topics": "Nope"}, "no such topic"),
        ({"topics": "Orders", "minPartitions": "0"}, "'minPartitions'"),
        ({"topics": "Orders", "startingTimestamp": "yesterday"}, "'startingTimestamp'"),
        ({"topics": "Orders", "startingOffset": "earliest"}, "startingOffset"),  # a typo
        ({"topics": "Orders", "mappedFileSizeCommitLog": "big"}, "mappedFileSizeCommitLog"),
        ({"topicPattern": "("}, "'topicPattern'"),
        ({"topics": "Orders", "sql": "region = = 'x'"}, "'sql'"),
        ({"topics": "Orders", "sql": "a > 1", "tags": "A"}, "'sql'"),
        ({"topics": "Orders", "columns": "topic, size"}, "no such column 'size'"),
        ({"topics": "Orders", "columns": "topic, topic"}, "'columns': a column named twice"),
    ]
    for opts, needle in cases:
        with pytest.raises(Exception) as e:
            _read(spark, store_dir, **opts).count()
        assert needle in str(e.value), (opts, str(e.value)[:400])
    for schema, needle in [
        ("topic INT", "column 'topic' is string, not int"),
        ("tags STRING NOT NULL", "column 'tags' can be null"),
        ("Topic STRING", "no column 'Topic'"),
    ]:
        with pytest.raises(Exception) as e:
            spark.read.format("rocketstore").schema(schema).option("path", store_dir).option(
                "topics", "Orders"
            ).load().count()
        assert needle in str(e.value), (schema, str(e.value)[:400])
    with pytest.raises(Exception) as e:
        spark.read.format("rocketstore").option("path", str(tmp_path / "none")).option("topics", "A").load().count()
    assert "'path'" in str(e.value)


WRITER = textwrap.dedent("""
    import sys, time
    from rocketstore import MessageStore, Message, StoreConfig
    path, n = sys.argv[1], int(sys.argv[2])
    with MessageStore.open(path, StoreConfig(mapped_file_size_commit_log=256 * 1024)) as s:
        for i in range(n):
            # queues 4 and 5 appear half way through
            s.put(Message("Live", f"m-{i}".encode()), queue_id=i % (4 if i < n // 2 else 6))
            if i % 100 == 0:
                time.sleep(0.02)
""")


def test_stream_from_a_live_store_exactly_once_across_restart(spark, tmp_path):
    root, out, ck = str(tmp_path / "live"), str(tmp_path / "out"), str(tmp_path / "ck")
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=256 * 1024)) as s:
        s.put(Message("Live", b"before"), queue_id=0)
    n = 6000
    writer = subprocess.Popen([sys.executable, "-c", WRITER, root, str(n)])

    def start():
        df = (
            spark.readStream.format("rocketstore")
            .option("path", root)
            .option("topics", "Live")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 700)
            .load()
        )
        return df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ck).start()

    try:
        q = start()
        deadline = time.monotonic() + 120
        while sum(p["numInputRows"] for p in q.recentProgress) < 700:
            assert writer.poll() in (None, 0) and time.monotonic() < deadline, "the writer failed or the stream stalled"
            q.awaitTermination(0.2)
        q.stop()  # mid-stream: the restart must pick up exactly where it stopped
        q = start()
        assert writer.wait(timeout=120) == 0
        q.processAllAvailable()
        sizes = [p["numInputRows"] for p in q.recentProgress]
        q.stop()
    finally:
        writer.kill()
    assert max(sizes) <= 700  # admission control
    got = [(r.queueId, r.queueOffset, bytes(r.body)) for r in spark.read.parquet(out).collect()]
    assert len(got) == len(set(got)) == n + 1
    want = []
    with MessageStore.open(root, read_only=True) as s:
        for qid in range(6):
            for off in range(s.max_offset("Live", qid)):
                want.append((qid, off, bytes(s.get("t", "Live", qid, off, max_count=1).messages[0].body)))
    assert sorted(got) == sorted(want)


def test_commitlog_scan_returns_every_record_even_those_no_queue_points_at(spark, tmp_path):
    from rocketstore.formats.record import TRANSACTION_PREPARED_TYPE

    root = str(tmp_path / "txn")
    put = []
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=64 * 1024)) as s:
        for i in range(900):
            flag = TRANSACTION_PREPARED_TYPE if i % 10 == 3 else 0
            m = Message("Txn" if i % 2 else "Plain", f"r{i}".encode() * 20, tags=f"T{i % 3}", sys_flag=flag)
            assert s.put(m, queue_id=0).ok
            put.append(("Txn" if i % 2 else "Plain", f"r{i}".encode() * 20, flag))
    df = spark.read.format("rocketstore_commitlog").option("path", root).load()
    segments = len(os.listdir(os.path.join(root, "commitlog")))
    assert segments > 2 and df.rdd.getNumPartitions() == segments  # one partition per segment
    rows = df.selectExpr("*", "unix_millis(storeTimestamp) AS storeMs").orderBy("physicalOffset").collect()
    assert [(r.topic, bytes(r.body), r.sysFlag) for r in rows] == put
    with MessageStore.open(root, read_only=True) as s:
        for r in rows[::37]:
            m = s.look(r.physicalOffset)
            assert (m.msg_id, m.store_timestamp, m.body_crc) == (r.msgId, r.storeMs, r.bodyCRC)
    queued = spark.read.format("rocketstore").option("path", root).option("topics", "Txn,Plain").load()
    assert queued.count() == sum(1 for p in put if p[2] == 0)  # the prepared ones are in no queue
    # an export: the topics filter, written to Parquet and read back
    spark.read.format("rocketstore_commitlog").option("path", root).option("topics", "Txn").load().write.parquet(
        str(tmp_path / "export")
    )
    assert spark.read.parquet(str(tmp_path / "export")).count() == sum(1 for p in put if p[0] == "Txn")


def test_offsets_already_cleaned_fail_or_are_skipped(spark, tmp_path):
    import time as _time

    root = str(tmp_path / "cleaned")
    cfg = StoreConfig(mapped_file_size_commit_log=32 * 1024, mapped_file_size_consume_queue=50 * 20)
    with MessageStore.open(root, cfg) as s:
        for i in range(600):
            s.put(Message("Old", f"old-{i}".encode() * 10), queue_id=0)
        s.flush()
        assert s.delete_expired_files(now_ms=int(_time.time() * 1000) + 100 * 3600 * 1000) > 0
        low = s.min_offset("Old", 0)
    assert low > 0
    asked = '{"Old": {"0": 0}}'
    with pytest.raises(Exception) as e:
        _read(spark, root, topics="Old", startingOffsets=asked).count()
    assert "failOnDataLoss" in str(e.value) and "startingOffsets" in str(e.value)
    df = _read(spark, root, topics="Old", startingOffsets=asked, failOnDataLoss="false")
    assert sorted(_rows(df)) == sorted(_expected(root, "Old", 0, low))
