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

_REQUESTS = {c.value: c.name.lower() for c in RequestCode}
_RESPONSES = {c.value: c.name.lower() for c in ResponseCode}
_SEND = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
_PULL = (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)
_STORED = (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
           ResponseCode.SLAVE_NOT_AVAILABLE)  # fmt: skip
_DELAY_NAMES = ("\x02DELAY\x01", "\x02__STARTDELIVERTIME\x01", "\x02TIMER_DELIVER_MS\x01", "\x02TIMER_DELAY_SEC\x01",
                "\x02TIMER_DELAY_MS\x01")  # fmt: skip


def message_type(properties: str) -> str:
    """getMessageType over the properties string (name \\x01 value \\x02 ...), without parsing it."""
    p = "\x02" + properties
    if "\x02TRAN_MSG\x01true\x02" in p + "\x02":
        return "transaction"
    if "\x02__SHARDINGKEY\x01" in p:
        return "fifo"
    if any(name in p for name in _DELAY_NAMES):
        return "delay"
    return "normal"


class RemotingMeter:
    def __init__(self, metrics):
        self.metrics = metrics

    def __call__(self, cmd, response, started: float) -> None:
        m = self.metrics
        code = cmd.code
        answer = response.code if response is not None else None
        m.rpc(
            "remoting",
            _REQUESTS.get(code) or str(code),
            "oneway" if answer is None else (_RESPONSES.get(answer) or str(answer)),
            (time.perf_counter() - started) * 1000.0,
        )
        if answer is None or response.code not in _STORED and code in _SEND or answer != 0 and code in _PULL:
            return
        ext = cmd.ext_fields or {}
        if code in _SEND:
            topic = ext.get("topic") or ext.get("b") or ""
            props = ext.get("properties") or ext.get("i") or ""
            batch = code == RequestCode.SEND_BATCH_MESSAGE or (ext.get("batch") or ext.get("m")) == "true"
            count = 1
            if batch:
                ids = (response.ext_fields or {}).get("msgId") or ""
                count = ids.count(",") + 1 if ids else 0
            if count:
                m.message_in(topic, message_type(props), len(cmd.body or b""), count)
        elif code in _PULL and response.body:
            m.message_out(
                ext.get("topic", ""), ext.get("consumerGroup", ""), records_in(response.body), len(response.body)
            )
