"""SQL92 filters through the store: get(sql=...), the bitmap dispatcher writing ConsumeQueue ext bitmaps, the
consumer, and config/consumerFilter.json. Expected answers come from plain Python predicates over what
was put, never from the filter code."""

import json
import os

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.filter import FilterSyntaxError
from rocketstore.formats import cq as CQ
from rocketstore.formats import cq_ext as X

SQL = "region = 'eu' AND amount > 100"
N = 600


def wanted(i: int) -> bool:
    """The same condition as SQL, by hand, for message i as _put writes it."""
    return i % 3 == 0 and (i * 7) % 250 > 100


def _put(store, start, count):
    for i in range(start, start + count):
        props = {"region": ["eu", "us", "apac"][i % 3], "amount": str((i * 7) % 250), "i": str(i)}
        assert store.put(Message("Shop", f"m{i}".encode(), properties=props), queue_id=i % 2).ok


def _read_all(store, queue_id, **kw):
    out, off = [], 0
    hi = store.max_offset("Shop", queue_id)
    while off < hi:
        g = store.get("g1", "Shop", queue_id, off, max_count=32, **kw)
        out += [int(m.properties["i"]) for m in g.messages]
        assert g.next_begin_offset > off
        off = g.next_begin_offset
    return out


def _config(**kw):
    return StoreConfig(enable_consume_queue_ext=True, enable_calc_filter_bit_map=True, **kw)


def test_get_with_sql_answers_the_predicate_without_bitmaps(tmp_path):
    with MessageStore.open(str(tmp_path / "s")) as s:
        _put(s, 0, N)
        for q in (0, 1):
            assert _read_all(s, q, sql=SQL) == [i for i in range(q, N, 2) if wanted(i)]
        with pytest.raises(FilterSyntaxError) as e:
            s.get("g1", "Shop", 0, 0, sql="region = 'eu' AND AND")
        assert e.value.column == 19
        with pytest.raises(ValueError):
            s.get("g1", "Shop", 0, 0, tags="A", sql=SQL)


def test_bitmaps_mark_matches_and_let_get_skip_reading(tmp_path):
    root = str(tmp_path / "s")
    with MessageStore.open(root, _config()) as s:
        _put(s, 0, 60)  # before the filter exists: no verdict in their bitmaps
        data = s.register_filter("g1", "Shop", SQL)
        _put(s, 60, N - 60)
        for q in (0, 1):
            assert _read_all(s, q, sql=SQL) == [i for i in range(q, N, 2) if wanted(i)]
        mf = s.message_filter("g1", "Shop", SQL)
        off, hi = 0, s.max_offset("Shop", 0)
        while off < hi:
            g = s.get("g1", "Shop", 0, off, max_count=32, matches=mf.matches)
            off = g.next_begin_offset
        # every live message that does not match was refused by its bitmap alone (one filter: no false hits)
        assert mf.bitmap_checks == sum(1 for i in range(60, N, 2) if not wanted(i))
        positions = data.bloom.bit_pos
    # the bytes: each unit's tagsCode slot is an ext address; the ext unit's bitmap holds the group's bits
    # exactly for the messages the predicate wants
    cq = CQ.units(open(os.path.join(root, "consumequeue", "Shop", "0", "0" * 20), "rb").read())
    ext_dir = os.path.join(root, "consumequeue_ext", "Shop", "0")
    ext = open(os.path.join(ext_dir, sorted(os.listdir(ext_dir))[0]), "rb").read()
    for k, i in enumerate(range(0, N, 2)):
        addr = int(cq[k]["tags"])
        assert X.is_ext_addr(addr)
        unit = X.decode_unit(ext, X.undecorate(addr))
        if i < 60:
            assert unit.filter_bit_map is None or not any(unit.filter_bit_map)
            continue
        bits = unit.filter_bit_map
        assert len(bits) == 14  # m = 112 bits for RocketMQ's defaults (20 %, 32 consumers)
        hit = all(bits[p // 8] >> (p % 8) & 1 for p in positions)
        assert hit == wanted(i), i
        assert sum(bin(b).count("1") for b in bits) == (len(set(positions)) if wanted(i) else 0)


def test_filters_persist_as_rocketmq_writes_them_and_survive_reopen(tmp_path):
    root = str(tmp_path / "s")
    with MessageStore.open(root, _config()) as s:
        c = s.consumer("g1", "Shop", sql=SQL)  # a consumer with sql registers it
        _put(s, 0, 100)
        got = [int(m.properties["i"]) for m in c]
        assert sorted(got) == [i for i in range(100) if wanted(i)]
    doc = json.load(open(os.path.join(root, "config", "consumerFilter.json")))
    entry = doc["filterDataByTopic"]["Shop"]["groupFilterData"]["g1"]
    assert entry["expression"] == SQL and entry["expressionType"] == "SQL92" and entry["consumerGroup"] == "g1"
    assert entry["bloomFilterData"]["bitNum"] == 112 and len(entry["bloomFilterData"]["bitPos"]) == 3
    assert entry["deadTime"] == 0 and entry["dead"] is False
    with MessageStore.open(root, _config()) as s:
        data = s._filters.get("Shop", "g1")
        assert data is not None and data.dead  # RocketMQ: every loaded filter is dead until it registers
        _put(s, 100, 100)  # dead filters still get their bits until cleaned
        for q in (0, 1):
            assert _read_all(s, q, sql=SQL) == [i for i in range(q, 200, 2) if wanted(i)]
    with MessageStore.open(root, read_only=True) as s:  # a read-only open reads them, writes nothing
        assert s._filters.get("Shop", "g1").expression == SQL


def _assert_ext_bitmaps(root, positions, count):
    """Queue 0's ext units: the filter's bits exactly for the messages the predicate wants."""
    cq = CQ.units(open(os.path.join(root, "consumequeue", "Shop", "0", "0" * 20), "rb").read())
    ext_dir = os.path.join(root, "consumequeue_ext", "Shop", "0")
    ext = open(os.path.join(ext_dir, sorted(os.listdir(ext_dir))[0]), "rb").read()
    for k, i in enumerate(range(0, count, 2)):
        unit = X.decode_unit(ext, X.undecorate(int(cq[k]["tags"])))
        hit = all(unit.filter_bit_map[p // 8] >> (p % 8) & 1 for p in positions)
        assert hit == wanted(i), i
        assert sum(bin(b).count("1") for b in unit.filter_bit_map) == (len(set(positions)) if wanted(i) else 0)


@pytest.mark.parametrize("how", ["reput", "recovery"])
def test_bitmaps_keep_reput_and_recovery_on_the_bulk_path(tmp_path, monkeypatch, how):
    """With SQL92 bitmaps on, reput (the put path not dispatching) and recovery (the queues deleted) still
    dispatch runs of records through the bulk decoder: the careful one-record decoder is asked only about
    the few records at a run's edges, not once per record; and the ext bitmaps are the filter's bits."""
    import rocketstore.services.recovery as recovery_module
    import rocketstore.services.reput as reput_module

    module = reput_module if how == "reput" else recovery_module
    careful = []
    real = module.check_record
    monkeypatch.setattr(module, "check_record", lambda *a, **kw: careful.append(a[1]) or real(*a, **kw))
    root = str(tmp_path / "s")
    with MessageStore.open(root, _config(dispatch_in_put_path=how == "recovery")) as s:
        positions = s.register_filter("g1", "Shop", SQL).bloom.bit_pos
        _put(s, 0, N)
        assert s.wait_dispatched(30)
    if how == "recovery":
        import shutil

        shutil.rmtree(os.path.join(root, "consumequeue"))
        shutil.rmtree(os.path.join(root, "consumequeue_ext"))
        careful.clear()
        with MessageStore.open(root, _config()) as s:
            assert s.max_offset("Shop", 0) == N // 2
    assert len(careful) < 10, len(careful)  # one per record (600) when runs are refused
    _assert_ext_bitmaps(root, positions, N)
