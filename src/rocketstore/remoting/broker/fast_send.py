"""The common send answered in one call: SEND_MESSAGE_V2 (or SEND_MESSAGE) of one plain message to a configured
topic, straight from the decoded request to the answer frame, without the handler's coroutine, its header dict,
its Message of parsed properties or the response command (src/native/fastsend.c; `fast_send_py` below is its
reference, and the pure engine's).

The data path is send.py's, step for step, for the requests it takes: the topic's config and queue id checked
(msgCheck), the properties as the broker stores them (the producer's, in java.util.HashMap's order with CLUSTER
added: properties.py), the store's put, the held pulls told, the answer's header (msgId, queueId, queueOffset,
transactionId, MSG_REGION, TRACE_ON) in fastjson's form, and the metrics' tallies bumped where they are (no
Python call per request). Anything else is answered None before anything is written, and the server hands the
request to send.py: another code or a oneway, a header field missing or not plainly written, a batch, a sysFlag,
a retry or system topic, a topic without a config, a negative or too large queue id, properties that are not
the plain ones (no UNIQ_KEY; CLUSTER, a transaction, a delay, a sharding key or a timer named; an empty or
repeated name), a UNIQ_KEY that JSON would escape. A put that is not PUT_OK is answered by send.py's own
`answer` (the state's `answer`). So the answers and the stored bytes are send.py's: tests/remoting/
test_fast_send.py holds both engines to it."""

from __future__ import annotations

import logging
import re
from time import perf_counter
from typing import Callable, NamedTuple

from ...formats.record import make_msg_id
from ...broker.metrics import TYPED_NAMES
from ...engine import meter_remoting
from ...message import Message, PutStatus
from ..codes import RequestCode
from ..command import ONEWAY_FLAG, RESPONSE_FLAG
from .. import frame
from . import properties as BP
from .metered import count_send_py
from .send import REGION_ID, V2_NAMES, regional
from .topics import RETRY_PREFIX, send_refusal

log = logging.getLogger("rocketstore.remoting")

MAX_CACHED = 4096  # topics, and property name lists: a producer sends a handful of each
# the fields a send's header carries, by their index below: the V2 request's short names, SEND_MESSAGE's long
_FIELDS = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp",
           "flag", "properties", "reconsumeTimes", "maxReconsumeTimes", "batch")  # fmt: skip
_SHORT = {long: short for short, long in V2_NAMES.items()}
NAMES_V2 = tuple(_SHORT[f] for f in _FIELDS)
NAMES_V1 = _FIELDS
# names that send.py or the metrics treat otherwise than a plain message's
NOT_PLAIN = frozenset(TYPED_NAMES | {BP.CLUSTER})
_PLAIN_TEXT = re.compile(r"[ !#-\[\]-~]*\Z")  # printable ASCII but '"' and '\\': JSON writes it as it is
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


class FastSendState(NamedTuple):
    """What fast_send reads (the C side takes the fields by position)."""

    put: Callable  # the store's put(msg, queue_id) -> PutResult
    lane: object  # the store's put lane, or None: the C side hands it a LaneMessage first (not a Message)
    message: type  # Message
    store: object  # its topic_configs: the permits are valid for the dict they were made from
    permits: dict  # topic -> the queue ids it takes (max(write, read) queue nums), for `seen[0]`
    seen: list  # [the topic_configs dict the permits were made from]
    permit: Callable[[str], int | None]  # a topic's permit, made and cached; None: send.py decides
    orders: dict  # a properties' names (bytes, joined by \x01) -> the stored order (indexes; len(names): CLUSTER)
    order: Callable[[bytes], tuple]  # a names key's order, made and cached
    cluster: bytes  # brokerClusterName, UTF-8: CLUSTER's value
    ok: object  # PutStatus.PUT_OK
    waiters: dict  # the pulls held (hold.py's waiters): only while some are is arrived called
    arrived: Callable  # arrived(topic, queue_id, result): held pulls look again
    answer: Callable  # answer(cmd, result, queue_id, uniq, started) -> send.py's answer frame (a put not PUT_OK)
    version: int  # the server's version, on every answer
    meter: object  # the remoting meter's MeterState, or None


def fast_send_py(s: FastSendState, cmd, remote: str) -> bytes | None:
    """The answer frame of a plain send, the message put; None for a request send.py must answer. The reference
    of the C fast_send."""
    started = perf_counter()
    h = _header(cmd)
    if h is None:
        return None
    topic, qid, born, flag, reconsume, props_text = h
    if s.seen[0] is not s.store.topic_configs:  # a topic created, changed or deleted since: permits anew
        s.permits.clear()
        s.seen[0] = s.store.topic_configs
    limit = s.permits.get(topic)
    if limit is None and (limit := s.permit(topic)) is None:
        return None
    if not 0 <= qid < limit:
        return None
    stored = _stored_properties(s, props_text)
    if stored is None:
        return None
    raw, uniq = stored
    msg = s.message(topic, cmd.body, flag=flag, sys_flag=0, born_timestamp=born, born_host=remote,
                    reconsume_times=reconsume, raw_properties=raw)  # fmt: skip
    r = s.put(msg, qid)
    if r.status is not s.ok or r.store_host is None or len(r.store_host) != 8:
        return s.answer(cmd, r, qid, uniq, started)  # send.py's answer
    if s.waiters:
        s.arrived(topic, qid, r)
    data = _answer(s, cmd, make_msg_id(r.store_host, r.physical_offset), qid, r.queue_offset, uniq)
    if s.meter is not None:
        try:
            count_send_py(s.meter, cmd.code, topic, len(cmd.body or b""), (perf_counter() - started) * 1000.0)
        except Exception:  # the message is stored: its answer goes out, uncounted
            log.exception("counting a send to %s failed", topic)
    return data


def _header(cmd) -> tuple | None:
    """(topic, queue id, born timestamp, flag, reconsume times, properties) of a plain send's header, else None."""
    code = cmd.code
    if code == RequestCode.SEND_MESSAGE_V2:
        names = NAMES_V2
    elif code == RequestCode.SEND_MESSAGE:
        names = NAMES_V1
    else:
        return None
    ext = cmd.ext_fields
    if cmd.flag & ONEWAY_FLAG or ext.__class__ is not dict:
        return None
    h = [ext.get(n) for n in names]
    if any(v is not None and v.__class__ is not str for v in h) or any(v is None for v in h[:8]):
        return None
    qid, sys_flag, born = _number(h[4], _INT32), _number(h[5], _INT32), _number(h[6], _INT64)
    flag, reconsume = _number(h[7], _INT32), _number(h[9], _INT32) if h[9] is not None else 0
    if None in (qid, sys_flag, born, flag, reconsume, _number(h[3], _INT32)) or sys_flag != 0:
        return None
    if h[10] is not None and _number(h[10], _INT32) is None or h[11] is not None and h[11].lower() == "true":
        return None
    return h[1], qid, born, flag, reconsume, h[8]


def _stored_properties(s: FastSendState, text: str | None) -> tuple[bytes, str] | None:
    """A plain properties text as the broker stores it (its pairs in HashMap order, CLUSTER added), and its
    UNIQ_KEY; None for any other text."""
    pairs = _plain_pairs(text)
    if pairs is None:
        return None
    raw = text.encode("utf-8")
    key = b"\x01".join(raw[a:b] for a, b, _, _ in pairs)
    order = s.orders.get(key)
    if order is None:
        order = s.order(key)
    if sorted(order) != list(range(len(pairs) + 1)):  # as the C refuses it (it sizes the text by the pairs)
        raise TypeError("a properties order is a permutation of range(len(names) + 1)")
    out = []
    for i in order:
        if i == len(pairs):
            out.append(b"CLUSTER\x01" + s.cluster + b"\x02")
        else:
            a, _, _, e = pairs[i]
            out.append(raw[a:e] + b"\x02")
    uniq = next(raw[c:e] for a, b, c, e in pairs if raw[a:b] == b"UNIQ_KEY").decode()
    return b"".join(out), uniq


def _number(text: str | None, bounds) -> int | None:
    """A header number written plainly (an optional '-', ASCII digits: what clients write), in range; else None
    (send.py reads the other forms, or refuses them). 19 digits at most: a long's."""
    if not text:
        return None
    digits = text[1:] if text[0] == "-" else text
    if not (0 < len(digits) <= 19 and digits.isascii() and digits.isdigit()):
        return None
    value = int(text)
    return value if bounds[0] <= value <= bounds[1] else None


def _plain_pairs(text: str | None) -> list[tuple[int, int, int, int]] | None:
    """The (name start, name end, value start, pair end) byte offsets of a plain properties text: every pair a
    non-empty name, \\x01, a non-empty value; no name repeated or NOT_PLAIN; UNIQ_KEY among them with a value
    JSON writes as it is. None otherwise."""
    if not text:
        return None
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None
    pairs, names, pos, uniq = [], set(), 0, False
    for part in raw.split(b"\x02"):
        end = pos + len(part)
        if part:
            sep = part.find(b"\x01")
            if sep <= 0 or sep == len(part) - 1:
                return None
            name = part[:sep]
            if name in names or name.decode() in NOT_PLAIN:
                return None
            names.add(name)
            if name == b"UNIQ_KEY":
                if not _PLAIN_TEXT.match(part[sep + 1 :].decode()):
                    return None
                uniq = True
            pairs.append((pos, pos + sep, pos + sep + 1, end))
        elif end != len(raw):  # an empty pair inside: parse_properties drops it, a plain text has none
            return None
        pos = end + 1
    return pairs if uniq else None


def _answer(s: FastSendState, cmd, msg_id: str, qid: int, queue_offset: int, uniq: str) -> bytes:
    """send.py's answer frame: the JSON header fastjson writes for its response, no body."""
    header = (
        b'{"code":0,"extFields":{"msgId":"%s","queueId":"%d","queueOffset":"%d","transactionId":"%s",'
        b'"MSG_REGION":"%s","TRACE_ON":"true"},"flag":%d,"language":"JAVA","opaque":%d,'
        b'"serializeTypeCurrentRPC":"JSON","version":%d}'
    ) % (msg_id.encode(), qid, queue_offset, uniq.encode(), REGION_ID.encode(), RESPONSE_FLAG, cmd.opaque, s.version)
    return (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header


# ---------------------------------------------------------------- the state, from a broker
def state_for(broker, answer: Callable, meter=None) -> FastSendState:
    """The fast path's state over a broker and its store; `answer(cmd, result, msg_id, queue_id, queue_offset,
    uniq, stored)` is SendProcessor's, for a put that was not PUT_OK."""
    store = broker.store
    permits: dict = {}
    orders: dict = {}

    def permit(topic: str) -> int | None:
        """A configured, sendable topic's queue id limit, kept for the configs seen; None: send.py decides."""
        if topic.__class__ is not str or topic.startswith(RETRY_PREFIX) or send_refusal(topic) is not None:
            return None
        if topic in broker.topics.system or topic not in store.topic_configs:
            return None  # unconfigured topics' queues change with the store's: not cached
        tc = broker.topics.get(topic)
        if tc is None:
            return None
        if len(permits) >= MAX_CACHED:
            permits.clear()
        limit = permits[topic] = max(tc.write_queue_nums, tc.read_queue_nums)
        return limit

    def order(key: bytes) -> tuple:
        names = [n.decode() for n in key.split(b"\x01")] + [BP.CLUSTER]
        place = {n: i for i, n in enumerate(names)}
        if len(orders) >= MAX_CACHED:
            orders.clear()
        found = orders[key] = tuple(place[n] for n in BP.hashmap_order(names))
        return found

    def answer_py(cmd, r, qid: int, uniq: str, started: float) -> bytes:
        """send.py's answer to a put that was not PUT_OK, counted as the server counts a handler's."""
        response = regional(answer(cmd, r, r.msg_id, qid, r.queue_offset, uniq, None))
        response.opaque, response.flag, response.version = cmd.opaque, RESPONSE_FLAG, broker.server.version
        if meter is not None:
            try:
                meter_remoting(meter, cmd, response, started)
            except Exception:
                log.exception("counting a send to %s failed", r)
        return frame.encode(response)

    return FastSendState(
        store.put, store.lane, Message, store, permits, [store.topic_configs], permit, orders, order,
        broker.settings.brokerClusterName.encode("utf-8"), PutStatus.PUT_OK, broker.hold.waiters, broker.hold.arrived,
        answer_py,
        broker.server.version, meter,
    )  # fmt: skip
