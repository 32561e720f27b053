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
from ..broker.pop import Handle, PopState, Popped, now_ms

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
NORMAL_TOPIC_TYPE = "0"
RETRY_TOPIC_TYPE = "1"  # ExtraInfoUtil: RETRY_TOPIC; "2" is RETRY_TOPIC_V2
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
    return Message(
        topic=topic,
        body=stored.body or b"",
        properties=props,
        flag=stored.flag,
        sys_flag=stored.sys_flag,
        born_timestamp=stored.born_timestamp,
        born_host=stored.born_host,
        reconsume_times=reconsume,
    )


class RetryManager:
    """Revives expired in-flight messages into the retry topic, pops the retry topic with the topic, and
    moves messages to the dead-letter topic. Works on one PopState (each step one of its operations)."""

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
        count = 0
        for t in (topic, retry_topic(group, topic)):
            count += self.pop_state.release_due(
                group, t, lambda msg, pop_time, t=t: self._put(self._revived(msg, group, t, pop_time)), now
            )
        return count

    # ------------------------------------------------------------------ pop
    def pop(
        self,
        group: str,
        topic: str,
        queue_ids: list[int],
        batch: int,
        invisible_ms: int,
        tags=None,
        sql: str | None = None,
        max_attempts: int = 17,
        fifo: bool = False,
    ) -> list[Popped]:
        """PopState.pop over the topic's queues and its retry topic; messages past max_attempts go to the DLQ.
        `fifo`: redeliver in place (no revive into the retry topic), as orderly pop does."""
        ps = self.pop_state
        rt = retry_topic(group, topic)
        if not fifo:
            self.revive_due(group, topic)
        sources = [(topic, queue_ids)]
        retry_first = random.randrange(100) < POP_FROM_RETRY_PROBABILITY
        if rt in self.store.topic_configs or rt in self.store.topics():
            sources.insert(0 if retry_first else 1, (rt, [0]))
        result = []
        for t, p in ps.pop_topics(group, sources, batch, invisible_ms, tags=tags, sql=sql):
            if t == rt:
                p.handle.topic_type = RETRY_TOPIC_TYPE
            # the delivery attempt counts the revivals (the record's reconsume times) too
            p.attempt = p.message.reconsume_times + p.attempt
            if max_attempts > 0 and p.message.reconsume_times >= max_attempts:
                self.to_dlq(group, topic, p.message)
                ps.ack(group, self.topic_of(group, topic, p.handle), p.handle)
                continue
            result.append(p)
        return result

    # ------------------------------------------------------------------ dead letter
    def to_dlq(self, group: str, origin_topic: str, stored) -> None:
        """A stored message of `origin_topic` (or of its retry topic) put into %DLQ%group."""
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
        t = self.topic_of(group, topic, handle)
        problem = self.pop_state.ack_after(group, t, handle, lambda msg: self.to_dlq(group, topic, msg))
        return not problem, problem
