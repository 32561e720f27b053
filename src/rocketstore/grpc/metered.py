"""The gRPC side's calls counted in the broker's metrics (broker/metrics.py): each answered call's latency under
its method name and status code (rocketmq_rpc_latency, protocol_type "grpc"), the messages a SendMessage stored
(rocketmq_messages_in_total ...) and those a ReceiveMessage handed out (rocketmq_messages_out_total ...).
Called once per call by aio_service.py, after the answer is made; sizes are the message bodies' bytes."""

from __future__ import annotations

import time

from .protocol import definition_pb2 as pb

_OK = pb.Code.OK
_KINDS = {pb.MessageType.FIFO: "fifo", pb.MessageType.DELAY: "delay", pb.MessageType.TRANSACTION: "transaction"}
_CODES = {v: k.lower() for k, v in pb.Code.items()}


class GrpcMeter:
    def __init__(self, metrics):
        self.metrics = metrics
        metrics.code_names["grpc"] = ({}, _CODES)

    def answered(self, name: str, request, responses, started: float) -> None:
        m = self.metrics
        code = responses[0].status.code if responses else _OK
        m.rpc("grpc", name, code, (time.perf_counter() - started) * 1000.0)
        if name == "SendMessage":
            entries = responses[0].entries
            for msg, entry in zip(request.messages, entries):
                if entry.status.code == _OK:
                    m.message_in(
                        msg.topic.name, _KINDS.get(msg.system_properties.message_type, "normal"), len(msg.body)
                    )
        elif name == "ReceiveMessage":
            got: dict[str, list[int]] = {}
            for r in responses:
                if r.HasField("message"):
                    seen = got.setdefault(r.message.topic.name, [0, 0])
                    seen[0] += 1
                    seen[1] += len(r.message.body)
            for topic, (n, size) in got.items():
                m.message_out(topic, request.group.name, n, size)
