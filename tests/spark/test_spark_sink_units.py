"""The Spark sink's logic without Spark: validation, staging, the commit and the streaming record, called
directly with pyarrow batches (tests/spark/test_sink.py runs the same through Spark)."""

import json
import os

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")
from pyspark.sql import types as T  # noqa: E402

from rocketstore import MessageStore, StoreConfig  # noqa: E402
from rocketstore.message import PutBatchResult, PutStatus  # noqa: E402
from rocketstore.spark import sink as S  # noqa: E402

SEGMENT = 64 * 1024
SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("body", T.BinaryType()),
        T.StructField("tags", T.StringType()),
        T.StructField("keys", T.ArrayType(T.StringType())),
        T.StructField("properties", T.MapType(T.StringType(), T.StringType())),
        T.StructField("queueId", T.IntegerType()),
    ]
)
ARROW = pa.schema(
    [
        ("topic", pa.string()),
        ("body", pa.binary()),
        ("tags", pa.string()),
        ("keys", pa.list_(pa.string())),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("queueId", pa.int32()),
    ]
)


def rows_batch(rows):
    return pa.RecordBatch.from_pylist(rows, schema=ARROW)


def row(topic="Orders", body=b"x", tags=None, keys=None, properties=None, queueId=None):
    return dict(topic=topic, body=body, tags=tags, keys=keys, properties=properties, queueId=queueId)


def options(root, **extra):
    return {"path": str(root), "mappedFileSizeCommitLog": str(SEGMENT), **extra}


def read_all(root):
    """Every message in the store, by (topic, queue) through the ConsumeQueues, in queue order."""
    out = {}
    with MessageStore.open(root, StoreConfig(mapped_file_size_commit_log=SEGMENT), read_only=True) as s:
        for topic, queues in s.topics().items():
            for q in queues:
                offset = 0
                while True:
                    g = s.get("test", topic, q, offset, max_count=32)
                    if not g.messages:
                        break
                    out.setdefault((topic, q), []).extend(g.messages)
                    offset = g.next_begin_offset
    return out


def stage(writer, batches, partition_id=0):
    return S.stage_partition(iter(batches), writer.limits, writer._task_staging(), partition_id, 0)


# ------------------------------------------------------------------------------------------ validation
def test_valid_rows_become_rocketmq_properties(tmp_path):
    w = S.RocketStoreBatchWriter(options(tmp_path), SCHEMA, False)
    staged = S.validate_batch(
        rows_batch(
            [
                row(tags="TagA", keys=["k1", "k2"], properties={"color": "red", "empty": "", "none": None}),
                row(properties={"__SHARDINGKEY": "order-7"}, queueId=None),
                row(queueId=3),
            ]
        ),
        w.limits,
        S._Rows(0, 0),
    )
    assert staged.column("props").to_pylist() == [
        b"KEYS\x01k1 k2\x02TAGS\x01TagA\x02color\x01red\x02",
        b"__SHARDINGKEY\x01order-7\x02",
        b"",
    ]
    assert staged.column("shardingKey").to_pylist() == [None, "order-7", None]
    assert staged.column("queueId").to_pylist() == [None, None, 3]


def test_string_body_and_string_keys():
    b = pa.RecordBatch.from_pylist(
        [{"topic": "T", "body": "héllo", "keys": "a b"}],
        schema=pa.schema([("topic", pa.large_string()), ("body", pa.large_string()), ("keys", pa.large_string())]),
    )
    limits = S.Limits(4 << 20, 30000, SEGMENT, True)
    staged = S.validate_batch(b, limits, S._Rows(0, 0))
    assert staged.column("body").to_pylist() == ["héllo".encode()]
    assert staged.column("props").to_pylist() == [b"KEYS\x01a b\x02"]


@pytest.mark.parametrize(
    "bad, column, problem",
    [
        (row(topic="bad topic"), "topic", "illegal characters"),
        (row(topic=None), "topic", "NULL"),
        (row(body=None), "body", "NULL"),
        (row(body=b"x" * 2000), "body", "maxMessageSize is 1024"),
        (row(tags="a\x02b"), "tags", "separators"),
        (row(keys=["has space"]), "keys", "space"),
        (row(keys=["ok", None]), "keys", "NULL"),
        (row(properties={"UNIQ_KEY": "u"}), "properties", "reserved by RocketMQ"),
        (row(properties={"TAGS": "t"}), "properties", "use the tags / keys columns"),
        (row(properties={"a": "x\x01y"}), "properties", "separators"),
        (row(properties={"v": "x" * 40000}), "properties", "bytes; at most"),
        (row(queueId=-1), "queueId", "negative"),
    ],
)
def test_bad_row_names_column_row_and_problem(bad, column, problem):
    limits = S.Limits(1024, 32000, SEGMENT, True)
    batch = rows_batch([row(), row(), bad])
    with pytest.raises(S.SinkDataError) as e:
        S.validate_batch(batch, limits, S._Rows(4, 10))
    text = str(e.value)
    assert f"partition 4, row 12: column '{column}'" in text and problem in text, text
    assert "nothing of this batch was appended" in text


def test_schema_and_mode_refusals(tmp_path):
    with pytest.raises(S.SinkError, match="append-only"):
        S.RocketStoreBatchWriter(options(tmp_path), SCHEMA, True)
    with pytest.raises(S.SinkDataError, match="unknown column.*tag"):
        S.RocketStoreBatchWriter(
            options(tmp_path), T.StructType(SCHEMA.fields + [T.StructField("tag", T.StringType())]), False
        )
    with pytest.raises(S.SinkDataError, match="'body' is required"):
        S.RocketStoreBatchWriter(options(tmp_path), T.StructType(SCHEMA.fields[:1]), False)
    with pytest.raises(S.SinkDataError, match="column 'queueId' has type string"):
        S.RocketStoreBatchWriter(
            options(tmp_path), T.StructType(SCHEMA.fields[:2] + [T.StructField("queueId", T.StringType())]), False
        )


# ------------------------------------------------------------------------------------ batch commit
def test_staged_partitions_are_appended_in_order_and_staging_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "PUT_MAX_ROWS", 7)  # several puts per group
    w = S.RocketStoreBatchWriter(options(tmp_path), SCHEMA, False)
    p0 = [row(body=b"a%d" % i, tags="T", queueId=1) for i in range(20)]
    p1 = [row(body=b"b%d" % i, keys=["k%d" % i], queueId=1) for i in range(15)] + [row(topic="Other", body=b"o")]
    msgs = [stage(w, [rows_batch(p1)], 1), stage(w, [], 2), stage(w, [rows_batch(p0[:9]), rows_batch(p0[9:])], 0)]
    assert [m.rows for m in msgs] == [16, 0, 20] and msgs[1].path is None
    w.commit(msgs)
    got = read_all(tmp_path)
    assert [m.body for m in got[("Orders", 1)]] == [r["body"] for r in p0 + p1[:15]]  # partition order
    assert got[("Orders", 1)][0].tags == "T" and got[("Orders", 1)][25].keys == ["k5"]
    assert [m.body for m in got[("Other", 0)]] == [b"o"]  # round robin starts at queue 0
    assert not os.listdir(os.path.join(tmp_path, S.STAGING_DIR))


def test_rows_without_queue_are_spread_a_put_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "PUT_MAX_ROWS", 5)
    w = S.RocketStoreBatchWriter(options(tmp_path), SCHEMA, False)
    w.commit([stage(w, [rows_batch([row(body=b"%d" % i) for i in range(20)])])])
    got = read_all(tmp_path)
    assert {k: len(v) for k, v in got.items()} == {("Orders", q): 5 for q in range(4)}


def test_locked_store_fails_clearly_and_staging_is_removed(tmp_path):
    w = S.RocketStoreBatchWriter(options(tmp_path), SCHEMA, False)
    msg = stage(w, [rows_batch([row()])])
    with MessageStore.open(tmp_path, StoreConfig(mapped_file_size_commit_log=SEGMENT)):
        with pytest.raises(S.SinkError, match="cannot append to .*already open for writing"):
            w.commit([msg])
    assert not os.path.exists(msg.path)
    assert read_all(tmp_path) == {}


# -------------------------------------------------------------------------------------- streaming
def stream_writer(root, **extra):
    return S.RocketStoreStreamWriter(options(root, **{"sinkId": "q1", **extra}), SCHEMA, False)


def test_replayed_batch_is_not_appended_twice(tmp_path):
    batch = [row(body=b"%d" % i, queueId=0) for i in range(10)]
    for attempt in range(2):  # Spark replays batch 0 after a failure before its commit was recorded
        w = stream_writer(tmp_path)
        w.commit([stage(w, [rows_batch(batch)])], 0)
    w = stream_writer(tmp_path)
    w.commit([stage(w, [rows_batch(batch[:3])])], 1)
    got = read_all(tmp_path)[("Orders", 0)]
    assert [m.body for m in got] == [r["body"] for r in batch + batch[:3]]
    assert got[0].properties[S.MARKER] == f"{S.sink_tag('q1')}:0:0"
    state = json.load(open(os.path.join(tmp_path, S.STATE_FILE)))
    assert state["sinks"]["q1"] == {"committed": 1}
    # another sinkId is another sink: its batch 0 is appended
    w = stream_writer(tmp_path, sinkId="q2")
    w.commit([stage(w, [rows_batch(batch[:1])])], 0)
    assert len(read_all(tmp_path)[("Orders", 0)]) == 14


def test_commit_cut_short_appends_only_the_rest_on_replay(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "PUT_MAX_ROWS", 4)
    batch = [row(body=b"%d" % i, queueId=0) for i in range(10)]  # puts of 4, 4, 2
    real_put = MessageStore.put_batch
    calls = []

    def failing_second_put(self, msgs, queue_id=None):
        calls.append(len(msgs))
        if len(calls) == 2:
            return PutBatchResult(PutStatus.SERVICE_NOT_AVAILABLE)  # say, the disk filled up
        return real_put(self, msgs, queue_id)

    monkeypatch.setattr(MessageStore, "put_batch", failing_second_put)
    w = stream_writer(tmp_path)
    with pytest.raises(S.SinkError, match=r"SERVICE_NOT_AVAILABLE; 4 of this batch's 10 rows were appended"):
        w.commit([stage(w, [rows_batch(batch)])], 5)
    state = json.load(open(os.path.join(tmp_path, S.STATE_FILE)))
    assert state["sinks"]["q1"]["intent"]["batchId"] == 5
    w = stream_writer(tmp_path)  # the replay, staged again by new tasks
    w.commit([stage(w, [rows_batch(batch)])], 5)
    assert [m.body for m in read_all(tmp_path)[("Orders", 0)]] == [r["body"] for r in batch]
    state = json.load(open(os.path.join(tmp_path, S.STATE_FILE)))
    assert state["sinks"]["q1"] == {"committed": 5}


def test_replay_that_differs_from_what_landed_fails_loudly(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "PUT_MAX_ROWS", 4)
    w = stream_writer(tmp_path)
    msg = stage(w, [rows_batch([row(queueId=0)] * 10)])
    with MessageStore.open(tmp_path, StoreConfig(mapped_file_size_commit_log=SEGMENT)) as s:
        S.save_state(str(tmp_path), {"sinks": {"q1": {"intent": {"batchId": 2, "startOffset": 0}}}})
        store_appender = S.Appender(s, w.limits, f"{S.sink_tag('q1')}:2:")
        table = pa.ipc.open_file(pa.memory_map(msg.path)).read_all()
        store_appender._put(table, [S.PutPlan(0, "Orders", 0, [0, 1, 2])], 10)  # 3 rows of a put of 4
    with pytest.raises(S.SinkError, match="put 0 had 3 rows in the store and has 4 now"):
        w.commit([msg], 2)


def test_a_new_checkpoint_at_the_same_place_starts_again(tmp_path):
    cp = tmp_path / "cp"
    cp.mkdir()
    store = tmp_path / "store"
    (cp / "metadata").write_text('{"id":"query-1"}\n')
    opts = {**options(store), "checkpointLocation": str(cp)}
    for query in ("query-1", "query-2"):
        (cp / "metadata").write_text(json.dumps({"id": query}) + "\n")
        w = S.RocketStoreStreamWriter(opts, SCHEMA, False)
        assert w.sink_id == str(cp)
        w.commit([stage(w, [rows_batch([row(queueId=0)])])], 0)
    assert len(read_all(store)[("Orders", 0)]) == 2
