"""The remoting side's requests counted in the broker's metrics (broker/metrics.py), from the one place every
request is answered (RemotingServer's on_response, wired by `rocketstore serve`): each request's latency under
RocketMQ's request and response code names (rocketmq_rpc_latency, protocol_type "remoting", as
NettyRemotingAbstract.writeResponse records it), the messages a successful send stored (messages and bytes in,
the message type from its properties, as BrokerMetricsManager.getMessageType: the send processor hangs what it
stored on its answer) and the records a successful pull returned (messages and bytes out, the count the pull
processor hangs on its answer). Sizes are the request's body bytes (a batch's: its encoded body, one size
observation of body / count)."""

from __future__ import annotations

from bisect import bisect_left
from time import perf_counter

from ...broker.metrics import MESSAGE_SIZE_BUCKETS, RPC_LATENCY_BUCKETS_MS, TYPED_NAMES, message_type
from ..codes import RequestCode, ResponseCode
from .stats import records_in

_REQUESTS = {c.value: c.name.lower() for c in RequestCode}  # RemotingHelper.getRequestCodeDesc
_RESPONSES = {c.value: c.name.lower() for c in ResponseCode}
_PULL = frozenset((RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE))
_NONE: dict = {}
_TYPED = TYPED_NAMES
_FIRST_MS, _FIRST_SIZE = RPC_LATENCY_BUCKETS_MS[0], MESSAGE_SIZE_BUCKETS[0]


class RemotingMeter:
    """Called once per answered request, on the loop: it keeps the tallies it bumps at hand (by request and
    response code, by topic and message type), so a send costs two dict lookups and a few additions."""

    def __init__(self, metrics):
        self.metrics = metrics
        metrics.code_names["remoting"] = (_REQUESTS, _RESPONSES)
        self._rpc: dict[tuple, list] = {}  # (request code, response code) -> the metrics' rpc tally
        self._in: dict[tuple[str, str], list] = {}  # (topic, message type) -> the metrics' in tally

    def __call__(self, cmd, response, started: float) -> None:
        # add_rpc and add_in (broker/metrics.py) written out here: their calls were a third of a send's metering
        millis = (perf_counter() - started) * 1000.0
        code = cmd.code
        answer = "oneway" if response is None else response.code
        t = self._rpc.get((code, answer))
        if t is None:
            t = self._rpc[(code, answer)] = self.metrics.rpc_tally("remoting", code, answer)
        t[0] += 1
        t[1] += millis
        t[2 if millis <= _FIRST_MS else 2 + bisect_left(RPC_LATENCY_BUCKETS_MS, millis)] += 1
        if response is None:
            return
        stored = response.stored
        if stored is not None:  # a send's messages, stored (send.py says what they were)
            topic, props, count = stored
            kind = "normal" if _TYPED.isdisjoint(props) else message_type(props)
            t = self._in.get((topic, kind))
            if t is None:
                t = self._in[(topic, kind)] = self.metrics.in_tally(topic, kind)
            size = len(cmd.body or b"")
            each = size // count if count > 1 else size
            t[0] += count
            t[1] += size
            t[2] += each
            t[3 if each <= _FIRST_SIZE else 3 + bisect_left(MESSAGE_SIZE_BUCKETS, each)] += 1
        elif answer == 0 and code in _PULL and response.body:
            ext = cmd.ext_fields or _NONE
            n = response.records if response.records is not None else records_in(response.body)
            self.metrics.message_out(ext.get("topic", ""), ext.get("consumerGroup", ""), n, len(response.body))
