"""The bitmap dispatcher over a run of records (CalcBitMapDispatcher.dispatch_columns: the referenced properties
gathered once, each filter evaluated once per distinct combination of their values) against the broker's rule
record by record, worked out here from the pure references: parse_properties_py of the record's raw
properties, Filter.matches on them (only TRUE matches), and the bloom positions of every matching filter."""

import logging
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.filter.manager import ConsumerFilterManager
from rocketstore.formats.properties import parse_properties_py
from rocketstore.services.calc_bitmap import CalcBitMapDispatcher

# RocketMQ's SQL92 cases (tests/filter/test_sql92.py, its ParserTest / ExpressionTest): null handling, numbers
# against Integer / Long / Double literals (a value that does not parse is an evaluation error: no match),
# two properties, strings, BETWEEN, IN, IS NULL, the string tests, three-valued logic, a bare property
EXPRESSIONS = [
    "a=3 and b<>4 And c>5 AND d<=4",
    "a=3 or b<>4 Or c>5 OR d<=4",
    "a in ('3', '4', '5')",
    "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
    "(a between 2 and 10) AND (b not between 6 and 9)",
    "a is null",
    "a is not null",
    "a <= now",
    "a=3 and b contains 'xxx' and c not contains 'xxx'",
    "a > 5.5 or b < 2147483648",
    "a >= -3 and a < 1e3",
    "a = b",
    "a > b",
    "a = 'abc' or TAGS = 'TagA'",
    "a startswith 'a' or b endswith 'x' or c contains ''",
    "not a = 1",
    "a",
    "NOT (a IS NULL) AND (b IS NULL OR b <> 'x')",
    "a between 1.5 and 2 or c not between -1 and 1",
    "TRUE",
    "FALSE OR NULL IS NULL",
]
NAMES = ["a", "b", "c", "d", "now", "TAGS", "UNIQ_KEY"]
VALUES = ["1", "3", "4", "5", "5.5", "-3", "10", "2147483648", "1e3", "abc", "axb", "xxx", "x", "TagA", "", "\u00e9"]
PAIR = st.tuples(st.sampled_from(NAMES), st.one_of(st.sampled_from(VALUES), st.text(max_size=3)))
RAW = st.one_of(
    st.none(),
    st.lists(PAIR, max_size=6).map(lambda ps: "".join(f"{k}\x01{v}\x02" for k, v in ps).encode()),
    st.binary(max_size=12),  # junk: parts without \x01, bad UTF-8
)


def _manager(filters):
    m = ConsumerFilterManager(None)
    for k, (topic, expression) in enumerate(filters):
        m.register(f"G{k}", topic, expression)
    return m


def _want(manager, topic, raw):
    """The broker's bitmap of one record, from the pure references."""
    filters = manager.get(topic)
    if not filters:
        return None
    props = parse_properties_py(raw) if raw else {}
    bits = manager.bloom.new_bits()
    for data in filters:
        if data.compiled.matches(props):
            manager.bloom.hash_to(data.bloom, bits)
    return bytes(bits)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["T", "U"]), st.sampled_from(EXPRESSIONS)), min_size=1, max_size=4),
    st.lists(st.tuples(st.sampled_from(["T", "T", "U", "V"]), RAW), max_size=40),
)
def test_run_bitmaps_same_as_record_by_record(filters, records):
    manager = _manager(filters)
    cols = SimpleNamespace(
        topic=[t for t, _ in records], props=[r for _, r in records], phys=list(range(len(records))), bit_map=None
    )
    CalcBitMapDispatcher(manager).dispatch_columns(cols)
    want = [_want(manager, t, r) for t, r in records]
    if all(w is None for w in want):
        assert cols.bit_map is None
    else:
        assert cols.bit_map == want


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(EXPRESSIONS), st.lists(RAW, min_size=1, max_size=40))
def test_one_topic_run_same_as_record_by_record(expression, raws):
    manager = _manager([("T", expression), ("T", "a is not null or b = '3'")])
    cols = SimpleNamespace(topic=["T"] * len(raws), props=raws, phys=list(range(len(raws))), bit_map=None)
    CalcBitMapDispatcher(manager).dispatch_columns(cols)
    assert cols.bit_map == [_want(manager, "T", r) for r in raws]


class _Boom:
    """A compiled filter that fails (not with an evaluation error) when a is 'boom'."""

    property_names = frozenset({"a"})

    def matches(self, props):
        if props.get("a") == "boom":
            raise RuntimeError("boom")
        return props.get("a") == "yes"


def test_a_failing_filter_is_no_match_and_a_log_line_per_record(caplog):
    manager = _manager([("T", "a = 'yes'"), ("T", "b = '1'")])
    manager.get("T")[0].compiled = _Boom()
    raws = [b"a\x01boom\x02b\x011", b"a\x01yes", b"a\x01boom", b"b\x011"]
    cols = SimpleNamespace(topic=["T"] * 4, props=raws, phys=[100, 200, 300, 400], bit_map=None)
    with caplog.at_level(logging.ERROR, logger="rocketstore.filter"):
        CalcBitMapDispatcher(manager).dispatch_columns(cols)
    bloom, (g0, g1) = manager.bloom, manager.get("T")

    def bits(*datas):
        b = bloom.new_bits()
        for d in datas:
            bloom.hash_to(d.bloom, b)
        return bytes(b)

    assert cols.bit_map == [bits(g1), bits(g0), bits(), bits(g1)]
    failed = [r for r in caplog.records if "failed at offset" in r.getMessage()]
    assert [r.getMessage() for r in failed] == [
        "bitmap: filter of G0 on T failed at offset 100",
        "bitmap: filter of G0 on T failed at offset 300",
    ]
    assert all(r.exc_info and isinstance(r.exc_info[1], RuntimeError) for r in failed)
