"""The compiled Arrow filler of the Spark source (arrow_columns, behind spark.record_batch.from_records)
against the numpy reference (from_records_py): the same RecordBatch, or the same error, on random records
(V1 and V2, IPv4 and IPv6 hosts, non-ASCII topics and properties, with and without TAGS / KEYS, repeated
and empty names, inner batches) and on corrupted ones."""

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.formats import record as R

from ._records import PLAIN, corrupted, record_params

RB = pytest.importorskip("rocketstore.spark.record_batch")


def _records(params_list):
    buf = bytearray()
    positions, sizes = [], []
    for params in params_list:
        rec = R.encode_record(physical_offset=len(buf), **params)
        positions.append(len(buf))
        sizes.append(len(rec))
        buf += rec
    return bytes(buf), positions, sizes


def _params(**fields):
    """One record's fields for _records: PLAIN (a V1 record, every field zero or empty) but for `fields`."""
    return {**{k: v for k, v in PLAIN.items() if k != "physical_offset"}, **fields}


def _outcome(fn, buf, positions, sizes):
    try:
        return fn(buf, positions, sizes)
    except Exception as e:  # the same kind of error from both is what is compared
        return type(e)


def _same(buf, positions, sizes):
    want = _outcome(RB.from_records_py, buf, positions, sizes)
    got = _outcome(RB.from_records_native, buf, positions, sizes)
    if isinstance(want, pa.RecordBatch):
        assert isinstance(got, pa.RecordBatch), got
        got.validate(full=True)
        assert got.schema == want.schema and got.num_rows == want.num_rows
        differ = [f.name for f in want.schema if not got.column(f.name).equals(want.column(f.name))]
        assert not differ, differ
    else:
        assert got is want
    return got


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_params(), max_size=10), st.data())
def test_same_batch_as_reference(native, params_list, data):
    buf, positions, sizes = _records(params_list)
    # a window of the records, as a queue's units pick them (not necessarily all, not necessarily from 0)
    a = data.draw(st.integers(0, len(positions)))
    b = data.draw(st.integers(a, len(positions)))
    got = _same(buf, positions[a:b], sizes[a:b])
    # and the rows hold what was written (an expectation of its own, not the reference's)
    if isinstance(got, pa.RecordBatch):
        rows = got.to_pylist()
        assert [r["body"] for r in rows] == [p["body"] for p in params_list[a:b]]
        assert [r["bornHost"] for r in rows] == [R.host_from_bytes(p["born_host"]) for p in params_list[a:b]]
        assert [r["physicalOffset"] for r in rows] == positions[a:b]


@settings(max_examples=200, deadline=None)
@given(st.lists(record_params(), min_size=1, max_size=6))
def test_native_fills_valid_text_itself(native, params_list):
    """Records with UTF-8 text and no inner batch are filled by arrow_columns, not handed back."""
    params_list = [dict(p, sys_flag=p["sys_flag"] & ~R.INNER_BATCH_FLAG) for p in params_list]
    buf, positions, sizes = _records(params_list)
    texts_ok = True
    for p in params_list:
        try:
            p["topic"].decode("utf-8")
            p["props"].decode("utf-8")
        except UnicodeDecodeError:
            texts_ok = False
    import numpy as np

    got = native.arrow_columns(buf, np.array(positions, np.int64), np.array(sizes, np.int64))
    if texts_ok:
        assert got is not None and got[0] == len(positions)
    else:
        assert got is None
    _same(buf, positions, sizes)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_params(), min_size=1, max_size=5), st.data())
def test_same_on_corrupted(native, params_list, data):
    buf, positions, sizes = _records(params_list)
    bad = data.draw(corrupted(buf))
    keep = [i for i, (p, s) in enumerate(zip(positions, sizes)) if p + s <= len(bad)]  # as queue_read checks
    _same(bad, [positions[i] for i in keep], [sizes[i] for i in keep])


def test_ipv6_and_unusual_properties_by_hand(native):
    """An IPv6 store host makes a 56-digit msgId; properties without a final \\x02 are parsed as
    parse_properties (empty values dropped, the last of a repeated name)."""
    buf, positions, sizes = _records(
        [
            _params(
                props=b"TAGS\x01x\x02a\x01\x02TAGS\x01y",
                queue_id=1,
                sys_flag=0x30,
                born_timestamp=5,
                born_host=R.host_to_bytes("[2001:db8::7]:40013"),
                store_timestamp=6,
                store_host=R.host_to_bytes("[fd00::5]:10911"),
                reconsume_times=2,
                queue_offset=3,
                v2=True,
            )
        ]
    )
    row = _same(buf, positions, sizes).to_pylist()[0]
    assert row["msgId"] == "FD000000000000000000000000000005" + "00002A9F" + "0000000000000000"
    assert row["bornHost"] == "2001:db8:0:0:0:0:0:7:40013" and row["storeHost"] == "fd00:0:0:0:0:0:0:5:10911"
    assert row["properties"] == [("TAGS", "y")] and row["tags"] == "y" and row["keys"] is None
    assert row["reconsumeTimes"] == 2 and row["bornTimestamp"].timestamp() == 0.005


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_params(), max_size=8), st.data())
def test_some_columns_as_the_whole_batch_has_them(native, params_list, data):
    """Asked for some columns (any subset, any order), both sides give exactly those columns of the whole
    batch, or the error the whole batch gives: the compiled side fills no other buffer, and which records
    it takes and when it defers to the reference never depend on the columns."""
    buf, positions, sizes = _records(params_list)
    if data.draw(st.booleans()):
        buf = data.draw(corrupted(buf))
        keep = [i for i, (p, s) in enumerate(zip(positions, sizes)) if p + s <= len(buf)]
        positions, sizes = [positions[i] for i in keep], [sizes[i] for i in keep]
    columns = tuple(data.draw(st.permutations(RB.SCHEMA.names))[: data.draw(st.integers(1, len(RB.SCHEMA)))])
    whole = _outcome(RB.from_records_py, buf, positions, sizes)
    for fn in (RB.from_records_py, RB.from_records_native):
        got = _outcome(lambda b, p, s: fn(b, p, s, columns), buf, positions, sizes)
        if isinstance(whole, pa.RecordBatch):
            assert isinstance(got, pa.RecordBatch), got
            got.validate(full=True)
            assert got.schema.names == list(columns) and got.num_rows == whole.num_rows
            assert all(got.column(c).equals(whole.column(c)) for c in columns), fn
        else:
            assert got is whole


def test_columns_not_asked_for_are_not_filled(native):
    """A batch of topic and queueOffset copies no body: the body's buffers come back empty."""
    import numpy as np

    params = [_params(body=b"x" * 1000, props=b"TAGS\x01a\x02", queue_offset=q) for q in range(3)]
    buf, positions, sizes = _records(params)
    want = (1 << RB.SCHEMA.get_field_index("topic")) | (1 << RB.SCHEMA.get_field_index("queueOffset"))
    count, _, buffers = native.arrow_columns(buf, np.array(positions, np.int64), np.array(sizes, np.int64), want)
    assert count == 3
    assert sum(len(b) for b in buffers) == 4 * 4 + 3 + 3 * 8  # topic offsets and bytes, three int64 offsets
    batch = RB.from_records_native(buf, positions, sizes, ("queueOffset", "topic"))
    assert batch.to_pydict() == {"queueOffset": [0, 1, 2], "topic": ["T", "T", "T"]}
