"""Retry and dead letter for pop consumption, as RocketMQ 5's broker and proxy do them.

- Revive (PopReviveService.reviveRetry): a message popped by a group and not acked before its invisible time
  ends is written again, to the group's pop retry topic for that topic, KeyBuilder.buildPopRetryTopic:
  `%RETRY%<group>_<topic>` (enableRetryTopicV2=false, RocketMQ's default), queue 0, with the record's
  reconsume times + 1 (RECONSUME_TIME kept equal to it), all properties kept (UNIQ_KEY: the same message id)
  and 1ST_POP_TIME added. The in-flight entry in the original queue is then done with (the group's offset
  moves on). Revival happens when the group next receives from the topic (nothing is lost in between:
  the in-flight state is persisted).
- Pop: the retry topic is popped together with the topic's queues (first in one pop of five, as
  popFromRetryProbability=20, else after them), its messages delivered under the original topic with
  delivery_attempt = reconsume times + 1 and receipt handles of topic type "1" (retry), so acks and
  ChangeInvisibleDuration go to the retry topic.
- Dead letter (PopMessageResultFilterImpl -> TO_DLQ, SendMessageProcessor.consumerSendMsgBack): a popped message
  whose reconsume times reach the max attempts (the settings' backoff_policy.max_attempts: retryMaxTimes + 1)
  is not delivered but put into `%DLQ%<group>` (1 queue, created on demand) and acked. The
  ForwardMessageToDeadLetterQueue RPC does the same for one received message (the PushConsumer's own max
  attempts). DLQ messages carry RETRY_TOPIC, ORIGIN_MESSAGE_ID, DLQ_ORIGIN_TOPIC and DLQ_ORIGIN_MESSAGE_ID.
"""
from __future__ import annotations

import random
import threading

from ..message import Message
from . import convert as C
from .pop import Handle, PopState, Popped, now_ms

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
NORMAL_TOPIC_TYPE = "0"
RETRY_TOPIC_TYPE = "1"          # ExtraInfoUtil: RETRY_TOPIC; "2" is RETRY_TOPIC_V2
RETRY_TOPIC_V2_TYPE = "2"
FIRST_POP_TIME = "1ST_POP_TIME"
RETRY_TOPIC_PROPERTY = "RETRY_TOPIC"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
POP_FROM_RETRY_PROBABILITY = 20


def retry_topic(group: str, topic: str) -> str:
    """KeyBuilder.buildPopRetryTopicV1."""
    return f"{RETRY_PREFIX}{group}_{topic}"


def dlq_topic(group: str) -> str:
    """MixAll.getDLQTopic."""
    return f"{DLQ_PREFIX}{group}"


def _copy(stored, topic: str, props: dict, reconsume: int) -> Message:
    return Message(topic=topic, body=stored.body or b"", properties=props, flag=stored.flag,
                   sys_flag=stored.sys_flag, born_timestamp=stored.born_timestamp, born_host=stored.born_host,
                   reconsume_times=reconsume)


class RetryManager:
    """Revives expired in-flight messages into the retry topic, pops the retry topic with the topic, and
    moves messages to the dead-letter topic. Works on one PopState (under its lock)."""

    def __init__(self, store, pop: PopState):
        self.store = store
        self.pop_state = pop
        self._topic_lock = threading.Lock()

    # ------------------------------------------------------------------ topics
    def _ensure_topic(self, topic: str) -> None:
        if topic in self.store.topic_configs or topic in self.store.topics():
            return
        with self._topic_lock:
            if topic not in self.store.topic_configs and topic not in self.store.topics():
                self.store.create_topic(topic, 1)

    def _put(self, msg: Message) -> None:
        self._ensure_topic(msg.topic)
        r = self.store.put(msg, 0)
        if not r.ok:
            raise OSError(f"cannot put into {msg.topic}: {r.status.name}")

    @staticmethod
    def topic_of(group: str, topic: str, handle: Handle) -> str:
        """The topic whose queue a receipt handle points into: the retry topic for retry handles."""
        if handle.topic_type in (RETRY_TOPIC_TYPE, RETRY_TOPIC_V2_TYPE) and not topic.startswith(RETRY_PREFIX):
            return retry_topic(group, topic)
        return topic

    # ------------------------------------------------------------------ revive
    def _revived(self, stored, group: str, topic: str, pop_time: int) -> Message:
        props = dict(stored.properties)
        reconsume = stored.reconsume_times + 1
        props[C.RECONSUME_TIME] = str(reconsume)
        if stored.reconsume_times == 0 or FIRST_POP_TIME not in props:
            props[FIRST_POP_TIME] = str(pop_time)
        target = topic if topic.startswith(RETRY_PREFIX) else retry_topic(group, topic)
        return _copy(stored, target, props, reconsume)

    def revive_due(self, group: str, topic: str, now: int | None = None) -> int:
        """Move the group's in-flight messages of `topic` (and of its retry topic) whose invisible time ended
        into the retry topic. Returns how many were revived."""
        now = now_ms() if now is None else now
        ps = self.pop_state
        count = 0
        with ps._lock:
            for t in (topic, retry_topic(group, topic)):
                queues = ps.table.get(f"{t}@{group}")
                if not queues:
                    continue
                touched = False
                for q, qs in queues.items():
                    for off in sorted(int(o) for o, e in qs["inflight"].items() if e[0] + e[1] <= now):
                        entry = qs["inflight"][str(off)]
                        msg = ps._read(group, t, int(q), off)
                        if msg is not None:
                            self._put(self._revived(msg, group, t, entry[0]))
                            count += 1
                        del qs["inflight"][str(off)]
                        touched = True
                if touched:
                    ps._save({(group, t)})
        return count

    # ------------------------------------------------------------------ pop
    def pop(self, group: str, topic: str, queue_ids: list[int], batch: int, invisible_ms: int, tags=None,
            sql: str | None = None, max_attempts: int = 17, fifo: bool = False) -> list[Popped]:
        """PopState.pop over the topic's queues and its retry topic; messages past max_attempts go to the DLQ.
        `fifo`: redeliver in place (no revive into the retry topic), as orderly pop does."""
        ps = self.pop_state
        rt = retry_topic(group, topic)
        with ps._lock:
            if not fifo:
                self.revive_due(group, topic)
            has_retry = rt in self.store.topic_configs or rt in self.store.topics()
            out: list[Popped] = []

            def from_retry():
                if has_retry and len(out) < batch:
                    got = ps.pop(group, rt, [0], batch - len(out), invisible_ms, tags=tags, sql=sql)
                    for p in got:
                        p.handle.topic_type = RETRY_TOPIC_TYPE
                    out.extend(got)

            retry_first = random.randrange(100) < POP_FROM_RETRY_PROBABILITY
            if retry_first:
                from_retry()
            if len(out) < batch:
                out.extend(ps.pop(group, topic, queue_ids, batch - len(out), invisible_ms, tags=tags, sql=sql))
            if not retry_first:
                from_retry()
            result = []
            for p in out:
                # the delivery attempt counts the revivals (the record's reconsume times) too
                p.attempt = p.message.reconsume_times + p.attempt
                if max_attempts > 0 and p.message.reconsume_times >= max_attempts:
                    self._to_dlq(group, topic, p.message)
                    ps.ack(group, self.topic_of(group, topic, p.handle), p.handle)
                    continue
                result.append(p)
            return result

    # ------------------------------------------------------------------ dead letter
    def _to_dlq(self, group: str, origin_topic: str, stored) -> None:
        props = dict(stored.properties)
        props.setdefault(RETRY_TOPIC_PROPERTY, stored.topic)
        props.setdefault(ORIGIN_MESSAGE_ID, stored.properties.get(C.UNIQ_KEY) or stored.msg_id)
        props[C.DLQ_ORIGIN_TOPIC] = origin_topic
        props[C.DLQ_ORIGIN_MESSAGE_ID] = stored.properties.get(C.UNIQ_KEY) or stored.msg_id
        reconsume = stored.reconsume_times + 1
        props[C.RECONSUME_TIME] = str(reconsume)
        self._put(_copy(stored, dlq_topic(group), props, reconsume))

    def forward_to_dlq(self, group: str, topic: str, handle: Handle) -> tuple[bool, str]:
        """ForwardMessageToDeadLetterQueue: the message of a live receipt handle into %DLQ%group, then acked.
        (ok, problem)."""
        ps = self.pop_state
        t = self.topic_of(group, topic, handle)
        with ps._lock:
            if handle.expired():
                return False, "receipt handle is expired"
            qs = ps.table.get(f"{t}@{group}", {}).get(str(handle.queue_id))
            entry = qs["inflight"].get(str(handle.offset)) if qs else None
            if entry is None or entry[0] != handle.retrieve_time:
                return False, "receipt handle is acked or superseded"
            msg = ps._read(group, t, handle.queue_id, handle.offset)
            if msg is None:
                return False, "the message is gone from the store"
            self._to_dlq(group, topic, msg)
            ps.ack(group, t, handle)
        return True, ""
