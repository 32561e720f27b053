"""QueryAssignment (RouteActivity.queryAssignment) and ForwardMessageToDeadLetterQueue
(ForwardMessageToDLQActivity), as MessagingService methods (assigned in the service's class body).

QueryAssignment: for a readable topic, one assignment per broker: the message queue with id -1 (any queue:
the proxy pops all of them) with the topic's permission and the broker (id 0, its endpoints); a FIFO group
(consumeMessageOrderly in subscriptionGroup.json, fifo.py) gets one assignment per read queue instead. No
readable queue: FORBIDDEN "no readable queue"."""

from __future__ import annotations

from . import validator as rules
from ..broker.pop import Handle, HandleError
from .protocol import definition_pb2 as pb
from .protocol import service_pb2 as spb

Code = pb.Code
PERM_READ, PERM_WRITE = 4, 2


def _status(code: int, message: str | None = None) -> pb.Status:
    return pb.Status(code=code, message=message if message is not None else Code.Name(code))


def _permission(perm: int) -> int:
    r, w = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    return {
        (True, True): pb.Permission.READ_WRITE,
        (True, False): pb.Permission.READ,
        (False, True): pb.Permission.WRITE,
    }.get((r, w), pb.Permission.NONE)


def query_assignment(self, request, context):
    topic, group = request.topic.name, request.group.name
    refusal = rules.topic_refusal(topic) or rules.group_refusal(group)
    if refusal:
        return spb.QueryAssignmentResponse(status=_status(*refusal))
    if not self._topic_exists(topic):
        return spb.QueryAssignmentResponse(status=_status(Code.TOPIC_NOT_FOUND, f"topic {topic!r} not found"))
    r, _, perm = self._queue_nums(topic)
    if not (perm & PERM_READ) or r <= 0:
        return spb.QueryAssignmentResponse(status=_status(Code.FORBIDDEN, "no readable queue"))
    broker = pb.Broker(name=self.config.broker_name, id=0, endpoints=self._endpoints())
    groups = getattr(self, "groups", None)  # fifo.SubscriptionGroups: consumeMessageOrderly
    ids = list(range(r)) if (groups is not None and groups.is_fifo(group)) else [-1]
    assignments = [
        pb.Assignment(
            message_queue=pb.MessageQueue(topic=request.topic, id=i, permission=_permission(perm), broker=broker)
        )
        for i in ids
    ]
    return spb.QueryAssignmentResponse(status=_status(Code.OK), assignments=assignments)


def forward_message_to_dead_letter_queue(self, request, context):
    topic, group = request.topic.name, request.group.name
    refusal = rules.topic_refusal(topic) or rules.group_refusal(group)
    if refusal:
        return spb.ForwardMessageToDeadLetterQueueResponse(status=_status(*refusal))
    try:
        handle = Handle.decode(request.receipt_handle)
    except HandleError as e:
        return spb.ForwardMessageToDeadLetterQueueResponse(status=_status(Code.INVALID_RECEIPT_HANDLE, str(e)))
    ok, problem = self.retry.forward_to_dlq(group, topic, handle)
    if not ok:
        return spb.ForwardMessageToDeadLetterQueueResponse(status=_status(Code.INVALID_RECEIPT_HANDLE, problem))
    return spb.ForwardMessageToDeadLetterQueueResponse(status=_status(Code.OK))
