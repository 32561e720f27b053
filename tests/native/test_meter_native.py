"""The compiled meter_remoting against the pure reference (remoting/broker/metered.py meter_remoting_py): the
same tallies, value and type, for random runs of answered requests; and one send and one pull worked out by hand.
The clock is the test's, so both sides see the same latencies."""

from hypothesis import given, settings
from hypothesis import strategies as st

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


def _play(native_side, runs):
    """The same requests through both sides: their metrics."""
    now = [0.0]
    out = []
    for fn in (native_side, M.meter_remoting_py):
        meter, state = _meter(lambda: now[0])
        for code, answer, size, stored, ext, records, millis in runs:
            cmd = RemotingCommand(code=code, body=None if size is None else b"x" * size, ext_fields=ext)
            response = None if answer is None else RemotingCommand(code=answer, body=b"y" * ((size or 0) // 3))
            if response is not None:
                response.stored, response.records = stored, records
            now[0] = 1000.0 + millis / 1000.0
            fn(state, cmd, response, 1000.0)
        out.append(meter.metrics)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(REQUEST, max_size=12))
def test_meter_remoting_same_as_reference(native, runs):
    got, want = _play(native.meter_remoting, runs)
    for name in ("tally_rpc", "tally_in", "tally_out"):
        g, w = getattr(got, name), getattr(want, name)
        assert g == w
        assert {k: [type(x) for x in t] for k, t in g.items()} == {k: [type(x) for x in t] for k, t in w.items()}


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
    assert m.tally_rpc[("remoting", 310, 0)] == [1, 2.5, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]
    assert m.tally_in[("T", "delay")] == [2, 3000, 1500, 0, 1, 0, 0, 0, 0, 0]
    assert m.tally_out[("T", "G")] == [99, 50]
    # the oneway pull: 1002.5 ms, counted under "oneway" in the 1 s .. 2 s bucket, nothing out
    assert m.tally_rpc[("remoting", 11, "oneway")] == [1, 1002.5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]
