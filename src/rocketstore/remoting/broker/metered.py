"""The remoting side's requests counted in the broker's metrics (broker/metrics.py), from the one place every
request is answered (RemotingServer's on_response, wired by `rocketstore serve`): each request's latency under
RocketMQ's request and response code names (rocketmq_rpc_latency, protocol_type "remoting", as
NettyRemotingAbstract.writeResponse records it), the messages a successful send stored (messages and bytes in,
the message type from its properties, as BrokerMetricsManager.getMessageType) and the records a successful pull
returned (messages and bytes out). Only the request's header fields and the answer are read: the send path
itself is untouched. Sizes are the request's body bytes (a batch's: its encoded body, one size observation of
body / count)."""

from __future__ import annotations

import time

from ..codes import RequestCode, ResponseCode
from .stats import records_in

_REQUESTS = {c.value: c.name.lower() for c in RequestCode}  # RemotingHelper.getRequestCodeDesc
_RESPONSES = {c.value: c.name.lower() for c in ResponseCode}
_SEND = frozenset((RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE))
_BATCH = RequestCode.SEND_BATCH_MESSAGE
_PULL = frozenset((RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE))
_STORED = frozenset((ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                     ResponseCode.SLAVE_NOT_AVAILABLE))  # fmt: skip
_DELAY_NAMES = ("\x02DELAY\x01", "\x02__STARTDELIVERTIME\x01", "\x02TIMER_DELIVER_MS\x01", "\x02TIMER_DELAY_SEC\x01",
                "\x02TIMER_DELAY_MS\x01")  # fmt: skip


def message_type(properties: str) -> str:
    """getMessageType over the properties string (name \\x01 value \\x02 ...), without parsing it: the common
    message (none of the names below) costs a few substring searches."""
    if (
        "TRAN_MSG" not in properties
        and "__SHARDINGKEY" not in properties
        and "DEL" not in properties
        and ("TIMER_" not in properties)
    ):
        return "normal"
    p = "\x02" + properties + "\x02"
    if "\x02TRAN_MSG\x01true\x02" in p:
        return "transaction"
    if "\x02__SHARDINGKEY\x01" in p:
        return "fifo"
    if any(name in p for name in _DELAY_NAMES):
        return "delay"
    return "normal"


class RemotingMeter:
    def __init__(self, metrics):
        self.metrics = metrics
        metrics.code_names["remoting"] = (_REQUESTS, _RESPONSES)

    def __call__(self, cmd, response, started: float) -> None:
        m = self.metrics
        code = cmd.code
        answer = response.code if response is not None else "oneway"
        m.rpc("remoting", code, answer, (time.perf_counter() - started) * 1000.0)
        if code in _SEND:
            if answer not in _STORED:
                return
            ext = cmd.ext_fields or {}
            count = 1
            if code == _BATCH or (ext.get("batch") or ext.get("m")) == "true":
                ids = (response.ext_fields or {}).get("msgId") or ""
                count = ids.count(",") + 1 if ids else 0
            if count:
                props = ext.get("properties") or ext.get("i") or ""
                m.message_in(ext.get("topic") or ext.get("b") or "", message_type(props), len(cmd.body or b""), count)
        elif code in _PULL and answer == 0 and response.body:
            ext = cmd.ext_fields or {}
            n = response.records if response.records is not None else records_in(response.body)
            m.message_out(ext.get("topic", ""), ext.get("consumerGroup", ""), n, len(response.body))
