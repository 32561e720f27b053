"""The remoting side's requests counted in the broker's metrics (broker/metrics.py), from the one place every
request is answered (RemotingServer's on_response, wired by `rocketstore serve`): each request's latency under
RocketMQ's request and response code names (rocketmq_rpc_latency, protocol_type "remoting", as
NettyRemotingAbstract.writeResponse records it), the messages a successful send stored (messages and bytes in,
the message type from its properties, as BrokerMetricsManager.getMessageType: the send processor hangs what it
stored on its answer) and the records a successful pull returned (messages and bytes out, the count the pull
processor hangs on its answer). Sizes are the request's body bytes (a batch's: its encoded body, one size
observation of body / count).

With the extension the whole count is one C call (src/native/meter.c) bumping the metrics' Counts in place:
about 2.5k instructions a send, against 8-9k for the Python below (4% of a pipelined send's server time)."""

from __future__ import annotations

from bisect import bisect_left
from functools import partial
from time import perf_counter
from typing import Callable, NamedTuple

from ...broker.metrics import MESSAGE_SIZE_BUCKETS, RPC_LATENCY_BUCKETS_MS, TYPED_NAMES, message_type
from ..codes import RequestCode, ResponseCode
from .stats import records_in

_REQUESTS = {c.value: c.name.lower() for c in RequestCode}  # RemotingHelper.getRequestCodeDesc
_RESPONSES = {c.value: c.name.lower() for c in ResponseCode}
_PULL = frozenset((RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE))
_NONE: dict = {}
_FIRST_MS, _FIRST_SIZE = RPC_LATENCY_BUCKETS_MS[0], MESSAGE_SIZE_BUCKETS[0]


class MeterState(NamedTuple):
    """What meter_remoting reads and bumps (the C side, src/native/meter.c, takes the fields by position): the
    broker's tallies, kept at hand in two-level caches, and the constants of the counting."""

    clock: Callable[[], float]  # perf_counter: the clock `started` was read from
    rpc: dict  # request code -> response code (None: a oneway request) -> the metrics' rpc tally
    ins: dict  # topic -> message type -> the metrics' in tally
    outs: dict  # topic -> consumer group -> the metrics' out tally
    miss: Callable  # miss(0 | 1 | 2, a, b): the rpc / in / out tally of labels (a, b), made and cached
    typed: frozenset  # TYPED_NAMES: a message naming none of them is "normal"
    message_type: Callable[[dict], str]
    pull: frozenset  # the pull request codes
    records_in: Callable[[bytes], int]  # a pull's records, when its processor did not say
    rpc_bounds: tuple  # RPC_LATENCY_BUCKETS_MS
    size_bounds: tuple  # MESSAGE_SIZE_BUCKETS


def meter_remoting_py(s: MeterState, cmd, response, started: float) -> None:
    """One answered request into the broker's tallies: its latency under its request and response codes, a
    successful send's messages in, a successful pull's records out. The reference of the C meter_remoting."""
    # add_rpc and add_in (broker/metrics.py) written out here: their calls were a third of a send's metering
    millis = (s.clock() - started) * 1000.0
    code = cmd.code
    answer = None if response is None else response.code
    t = s.rpc.get(code, _NONE).get(answer)
    if t is None:
        t = s.miss(0, code, answer)
    t[0] += 1
    t[1] += millis
    t[2 if millis <= _FIRST_MS else 2 + bisect_left(s.rpc_bounds, millis)] += 1
    if response is None:
        return
    stored = response.stored
    if stored is not None:  # a send's messages, stored (send.py says what they were)
        topic, props, count = stored
        kind = "normal" if s.typed.isdisjoint(props) else s.message_type(props)
        t = s.ins.get(topic, _NONE).get(kind)
        if t is None:
            t = s.miss(1, topic, kind)
        size = len(cmd.body or b"")  # a send without a body: 0 bytes
        each = size // count if count > 1 else size
        t[0] += count
        t[1] += size
        t[2] += each
        t[3 if each <= _FIRST_SIZE else 3 + bisect_left(s.size_bounds, each)] += 1
    elif answer == 0 and code in s.pull and response.body:
        _count_out(s, cmd, response)


def count_send_py(s: MeterState, code: int, topic: str, size: int, millis: float) -> None:
    """meter_remoting_py's bumps for a plain send answered SUCCESS, one "normal" message of `size` bytes (what
    fast_send counts where it answers: C's rs_meter_send)."""
    t = s.rpc.get(code, _NONE).get(0)
    if t is None:
        t = s.miss(0, code, 0)
    t[0] += 1
    t[1] += millis
    t[2 if millis <= _FIRST_MS else 2 + bisect_left(s.rpc_bounds, millis)] += 1
    t = s.ins.get(topic, _NONE).get("normal")
    if t is None:
        t = s.miss(1, topic, "normal")
    t[0] += 1
    t[1] += size
    t[2] += size
    t[3 if size <= _FIRST_SIZE else 3 + bisect_left(s.size_bounds, size)] += 1


def _count_out(s: MeterState, cmd, response) -> None:
    n = response.records if response.records is not None else s.records_in(response.body)
    ext = cmd.ext_fields or _NONE
    topic, group = ext.get("topic", ""), ext.get("consumerGroup", "")
    t = s.outs.get(topic, _NONE).get(group)
    if t is None:
        t = s.miss(2, topic, group)
    t[0] += n
    t[1] += len(response.body)


# the chosen twin (rocketstore.engine.TWINS); meter_remoting_py stays the reference
from ...engine import meter_remoting  # noqa: E402


class RemotingMeter:
    """The remoting side's meter over one broker's metrics. `observe(cmd, response, started)` is what the
    server calls once per answered request, on the loop: meter_remoting with the meter's state, so a send costs
    one call (into C, with the extension) that finds its tallies in the caches and bumps them."""

    def __init__(self, metrics):
        self.metrics = metrics
        metrics.code_names["remoting"] = (_REQUESTS, _RESPONSES)
        self.state = MeterState(
            perf_counter, {}, {}, {}, self._miss, TYPED_NAMES, message_type, _PULL, records_in,
            tuple(map(float, RPC_LATENCY_BUCKETS_MS)), tuple(map(float, MESSAGE_SIZE_BUCKETS)),
        )  # fmt: skip
        self.observe = partial(meter_remoting, self.state)

    def __call__(self, cmd, response, started: float) -> None:
        self.observe(cmd, response, started)

    def _miss(self, which: int, a, b) -> list:
        """The metrics' tally of a label set first seen, kept in the state's cache."""
        m, s = self.metrics, self.state
        if which == 0:
            t = m.rpc_tally("remoting", a, "oneway" if b is None else b)
        else:
            t = m.in_tally(a, b) if which == 1 else m.out_tally(a, b)
        (s.rpc, s.ins, s.outs)[which].setdefault(a, {})[b] = t
        return t
