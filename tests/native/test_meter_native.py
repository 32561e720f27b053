"""The compiled meter_remoting against the pure reference (remoting/broker/metered.py meter_remoting_py): the
same tallies, value and type, for random runs of answered requests (the native side's tallies Counts, the pure
side's lists); one send and one pull worked out by hand; and Counts against new_tally_py's list. The clock is the
test's, so both sides see the same latencies."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore import engine
from rocketstore.broker import metrics as B
from rocketstore.broker.metrics import BrokerMetrics
from rocketstore.remoting.broker import metered as M
from rocketstore.remoting.command import RemotingCommand


class NoStore:  # the meter never reads the store (only a scrape does)
    pass


def _meter(clock, records_in=len):
    meter = M.RemotingMeter(BrokerMetrics(NoStore()))
    return meter, meter.state._replace(clock=clock, records_in=records_in)


PROPS = st.sampled_from(
    [
        {},
        {"TAGS": "a", "UNIQ_KEY": "u"},
        {"TRAN_MSG": "true"},
        {"TRAN_MSG": "false", "KEYS": "k"},
        {"__SHARDINGKEY": "s"},
        {"DELAY": "3"},
        {"TIMER_DELAY_SEC": None},
    ]
)
SIZES = st.sampled_from([None, 0, 1, 100, 1024, 1025, 4096, 5000, 600_000])  # None: a request without a body
MILLIS = st.one_of(st.sampled_from([0.0, 1.0, 3.0, 2999.5, 3000.0, 9000.0]), st.floats(0, 4000))
REQUEST = st.tuples(
    st.sampled_from([310, 320, 11, 361, 34]),  # send v2, batch, pull, lite pull, heartbeat
    st.sampled_from([0, 1, 17, None]),  # success, system error, topic not exist, oneway
    SIZES,
    st.one_of(st.none(), st.tuples(st.sampled_from(["T", "%RETRY%g", ""]), PROPS, st.integers(1, 7))),
    st.sampled_from([None, {}, {"topic": "T"}, {"topic": "T", "consumerGroup": "G"}]),
    st.one_of(st.none(), st.integers(0, 40)),
    MILLIS,
)


def _play(fn, runs) -> BrokerMetrics:
    """The requests through one side: its metrics."""
    now = [0.0]
    meter, state = _meter(lambda: now[0])
    for code, answer, size, stored, ext, records, millis in runs:
        cmd = RemotingCommand(code=code, body=None if size is None else b"x" * size, ext_fields=ext)
        response = None if answer is None else RemotingCommand(code=answer, body=b"y" * ((size or 0) // 3))
        if response is not None:
            response.stored, response.records = stored, records
        now[0] = 1000.0 + millis / 1000.0
        fn(state, cmd, response, 1000.0)
    return meter.metrics


def _numbers(tallies: dict) -> dict:
    """Each tally's numbers with their types (a Counts and a list alike)."""
    return {k: [(type(x), x) for x in t] for k, t in tallies.items()}


@settings(max_examples=300, deadline=None)
@given(st.lists(REQUEST, max_size=12))
def test_meter_remoting_same_as_reference(native, runs):
    got = _play(native.meter_remoting, runs)
    with engine.using("pure"):
        want = _play(M.meter_remoting_py, runs)
    for name in ("tally_rpc", "tally_in", "tally_out"):
        g, w = getattr(got, name), getattr(want, name)
        assert all(type(t) is native.Counts for t in g.values()) and all(type(t) is list for t in w.values())
        assert _numbers(g) == _numbers(w)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.integers(-1, n - 1),
            st.lists(st.tuples(st.integers(0, n - 1), st.integers(-(2**40), 2**40), st.floats(-1e6, 1e6))),
        )
    )
)
def test_counts_same_as_a_list(native, case):
    n, float_at, adds = case
    got, want = native.Counts(n, float_at), B.new_tally_py(n, float_at)
    for i, whole, part in adds:
        for t in (got, want):
            t[i] += part if i == float_at else whole  # as add_rpc and add_in bump a tally
    assert len(got) == len(want) and [(type(x), x) for x in got] == [(type(x), x) for x in want]
    assert [got[i] for i in range(n)] == want and got[-1] == want[-1]


def test_counts_refuses_what_a_tally_cannot_hold(native):
    t = native.Counts(3, 1)
    with pytest.raises(IndexError):
        t[3]
    with pytest.raises(TypeError):
        t[0] = 1.5  # an int count
    with pytest.raises(OverflowError):
        t[2] = 2**63
    with pytest.raises(ValueError):
        native.Counts(2, 2)
    assert list(t) == [0, 0.0, 0]  # what failed left it as it was


def test_meter_remoting_by_hand(native):
    assert M.meter_remoting is native.meter_remoting
    meter, state = _meter(lambda: 0.0025, records_in=lambda body: 99)
    send = RemotingCommand(code=310, body=b"x" * 3000)
    answer = RemotingCommand(code=0)
    answer.stored = ("T", {"KEYS": "k", "DELAY": "2"}, 2)
    native.meter_remoting(state, send, answer, 0.0)
    pull = RemotingCommand(code=11, ext_fields={"topic": "T", "consumerGroup": "G"})
    native.meter_remoting(state, pull, RemotingCommand(code=0, body=b"z" * 50), 0.0)
    native.meter_remoting(state, pull, None, -1.0)
    m = meter.metrics
    # 2.5 ms: the second latency bucket (1 < 2.5 <= 3); 3000 bytes of 2 messages: one 1500-byte observation, in
    # the second size bucket (1 KiB < 1500 <= 4 KiB); the pull's 50 bytes of 99 records (records_in's answer)
    assert list(m.tally_rpc[("remoting", 310, 0)]) == [1, 2.5, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    assert list(m.tally_in[("T", "delay")]) == [2, 3000, 1500, 0, 1, 0, 0, 0, 0, 0]
    assert list(m.tally_out[("T", "G")]) == [99, 50]
    # the oneway pull: 1002.5 ms, counted under "oneway" in the 1 s .. 2 s bucket, nothing out
    assert list(m.tally_rpc[("remoting", 11, "oneway")]) == [1, 1002.5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]


def test_counts_bounds_its_size_before_allocating(native):
    # a tally is a dozen numbers: a size from a bug (or an overflowing n) is refused, never allocated short
    for n in (0, 4097, 2**61, -1):
        with pytest.raises(ValueError, match="1 <= n <= 4096"):
            native.Counts(n)
    t = native.Counts(4096, float_at=1)
    with pytest.raises(IndexError):
        t[4096] = 7
    assert len(t) == 4096 and t[4095] == 0 and t[1] == 0.0


def test_counts_refuse_to_wrap_past_int64(native):
    meter, state = _meter(lambda: 0.0)
    send = RemotingCommand(code=310, body=b"x")
    answer = RemotingCommand(code=0)
    native.meter_remoting(state, send, answer, 0.0)
    t = meter.metrics.tally_rpc[("remoting", 310, 0)]
    t[0] = 2**63 - 1
    with pytest.raises(OverflowError):
        native.meter_remoting(state, send, answer, 0.0)
    assert t[0] == 2**63 - 1  # not wrapped to -2**63


def test_list_tallies_add_as_python_does(native):
    # a tally made by the pure engine (a list) bumped by the C meter: beyond int64 it grows as Python's ints do
    meter, state = _meter(lambda: 0.0)
    meter.metrics.tally_rpc[("remoting", 310, 0)] = t = [2**63 - 1, 0.5] + [0] * 10
    state.rpc.setdefault(310, {})[0] = t
    native.meter_remoting(state, RemotingCommand(code=310), RemotingCommand(code=0), 0.0)
    assert t[:3] == [2**63, 0.5, 1]


def test_labels_changed_by_records_in_are_read_after_it(native):
    # records_in is Python: it may change the request's fields under the meter; both sides read the labels after
    # it, and the C side holds them while `miss` runs (it used to read them borrowed from the dict)
    got = []
    for fn in (native.meter_remoting, M.meter_remoting_py):
        pull = RemotingCommand(code=11, ext_fields={"topic": "T" * 50, "consumerGroup": "G"})

        def records_in(body, pull=pull):
            pull.ext_fields["topic"] = "U" * 50  # the old topic string's last reference goes
            pull.ext_fields = {"topic": "V", "consumerGroup": "H"}
            return 3

        meter, state = _meter(lambda: 0.0, records_in=records_in)
        fn(state, pull, RemotingCommand(code=0, body=b"z" * 9), 0.0)
        got.append({k: list(v) for k, v in meter.metrics.tally_out.items()})
    assert got[0] == got[1] == {("V", "H"): [3, 9]}


def test_a_cached_none_is_a_miss_and_bad_bounds_are_refused(native):
    meter, state = _meter(lambda: 0.0)
    state.rpc[310] = {0: None}
    native.meter_remoting(state, RemotingCommand(code=310), RemotingCommand(code=0), 0.0)
    assert meter.metrics.tally_rpc[("remoting", 310, 0)][0] == 1
    with pytest.raises(TypeError, match="tuples of floats"):
        native.meter_remoting(state._replace(rpc_bounds=[1.0, 3.0]), RemotingCommand(code=310), None, 0.0)
    with pytest.raises(TypeError, match="tuples of floats"):
        native.meter_remoting(state._replace(size_bounds=(1024, 4096)), RemotingCommand(code=310), None, 0.0)
