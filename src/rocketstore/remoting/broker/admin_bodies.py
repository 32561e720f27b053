"""The JSON bodies of the broker's admin answers, as RocketMQ's RemotingSerializable (fastjson 1.2.x) writes them:
TopicConfig, TopicConfigAndMappingSerializeWrapper (GET_ALL_TOPIC_CONFIG), KVTable (runtime info), TopicStatsTable
(GET_TOPIC_STATS_INFO), ConsumeStats (GET_CONSUME_STATS), ConsumerConnection and ProducerConnection; and the text
helpers those bodies and the runtime info need (Java's Double.toString, MixAll.humanReadableByteCount).

TopicStatsTable and ConsumeStats key their offsetTable by a MessageQueue object: fastjson writes such a key as the
object's own JSON, `{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}`, which is not JSON but what the Java client
reads back (fastjson parses object keys); those two bodies are put together here from fastjson-written pieces."""

from __future__ import annotations

import math
from decimal import Decimal

from .. import fastjson
from ..codes import LanguageCode
from ..fastjson import Bean


def java_double(value: float) -> str:
    """Double.toString (fastjson's writeDouble gives the same text): the shortest digits that read back as the
    value, plain for 1e-3 <= |v| < 1e7 with at least one decimal, else d.dddE[-]n."""
    v = float(value)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0:
        return "-0.0" if math.copysign(1, v) < 0 else "0.0"
    if 1e-3 <= abs(v) < 1e7:
        text = repr(v)  # Python's repr is plain in this range and shortest, as Java's is
        return text if "." in text else text + ".0"
    sign, digits, exp = Decimal(repr(v)).normalize().as_tuple()
    text = "".join(map(str, digits))
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{len(text) - 1 + exp}"


def human_bytes(n: int) -> str:
    """MixAll.humanReadableByteCount(n, si=false): binary units, one decimal ("1.5 GiB")."""
    if n < 1024:
        return f"{n} B"
    exp = int(math.log(n) / math.log(1024))
    return f"{n / 1024**exp:.1f} {'KMGTPE'[exp - 1]}iB"


def topic_config_bean(tc) -> Bean:
    """A TopicConfig (namesrv.routes.TopicConfig) as fastjson writes the Java bean (its getters, sorted)."""
    return Bean(
        attributes=dict(sorted(tc.attributes.items())),
        order=tc.order,
        perm=tc.perm,
        readQueueNums=tc.read_queue_nums,
        topicFilterType=tc.topic_filter_type,
        topicName=tc.topic_name,
        topicSysFlag=tc.topic_sys_flag,
        writeQueueNums=tc.write_queue_nums,
    )


def data_version_bean(v) -> Bean:
    return Bean(counter=v.counter, stateVersion=v.state_version, timestamp=v.timestamp)


def topic_config_wrapper_bean(configs: dict, version, mapping_version) -> Bean:
    """TopicConfigAndMappingSerializeWrapper: every topic config, the data versions, no static-topic mappings."""
    table = {name: topic_config_bean(configs[name]) for name in sorted(configs)}
    return Bean(
        dataVersion=data_version_bean(version),
        mappingDataVersion=data_version_bean(mapping_version),
        topicConfigTable=table,
        topicQueueMappingDetailMap={},
        topicQueueMappingInfoMap={},
    )


def topic_config_wrapper(configs: dict, version, mapping_version) -> bytes:
    return fastjson.dumpb(topic_config_wrapper_bean(configs, version, mapping_version))


def kv_table(table: dict[str, str]) -> bytes:
    return fastjson.dumpb(Bean(table=dict(table)))


def _queue_key(topic: str, broker_name: str, queue_id: int) -> str:
    return fastjson.dumps(Bean(brokerName=broker_name, queueId=queue_id, topic=topic))


def _object_keyed(rows: list[tuple[str, Bean]]) -> str:
    return "{" + ",".join(f"{key}:{fastjson.dumps(value)}" for key, value in rows) + "}"


def topic_stats_table(topic: str, broker_name: str, rows: list[tuple[int, int, int, int]], put_tps: float) -> bytes:
    """TopicStatsTable: rows of (queueId, minOffset, maxOffset, lastUpdateTimestamp)."""
    table = [
        (_queue_key(topic, broker_name, q), Bean(lastUpdateTimestamp=ts, maxOffset=hi, minOffset=lo))
        for q, lo, hi, ts in rows
    ]
    return f'{{"offsetTable":{_object_keyed(table)},"topicPutTps":{java_double(put_tps)}}}'.encode()


def consume_stats(broker_name: str, rows: list[tuple[str, int, int, int, int, int]], consume_tps: float) -> bytes:
    """ConsumeStats: rows of (topic, queueId, brokerOffset, consumerOffset, pullOffset, lastTimestamp)."""
    table = [
        (
            _queue_key(topic, broker_name, q),
            Bean(brokerOffset=broker, consumerOffset=consumer, lastTimestamp=last, pullOffset=pull),
        )
        for topic, q, broker, consumer, pull, last in rows
    ]
    return f'{{"consumeTps":{java_double(consume_tps)},"offsetTable":{_object_keyed(table)}}}'.encode()


def language_name(code: int) -> str:
    try:
        return LanguageCode(code).name
    except ValueError:
        return LanguageCode.OTHER.name


def connection_bean(channel) -> Bean:
    """A Connection: the client's id, address, language (the enum's name) and version."""
    return Bean(
        clientAddr=channel.connection.remote,
        clientId=channel.client_id,
        language=language_name(channel.language),
        version=channel.version,
    )


_CONSUME_TYPES = {0: "CONSUME_ACTIVELY", 1: "CONSUME_PASSIVELY", 2: "CONSUME_POP"}
_MESSAGE_MODELS = {0: "BROADCASTING", 1: "CLUSTERING"}
_FROM_WHERE = {0: "CONSUME_FROM_LAST_OFFSET", 1: "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
               2: "CONSUME_FROM_MIN_OFFSET", 3: "CONSUME_FROM_MAX_OFFSET", 4: "CONSUME_FROM_FIRST_OFFSET",
               5: "CONSUME_FROM_TIMESTAMP"}  # fmt: skip


def _enum_name(value, names: dict[int, str]):
    """An enum as the Java client names it; the C++ core's heartbeat gives the ordinal instead."""
    if isinstance(value, int) and not isinstance(value, bool):
        return names.get(value)
    return value


def _long(value) -> int:
    """A number the client wrote as a number or as text (the C++ core writes subVersion as a string)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def subscription_bean(sub: dict) -> Bean:
    """A SubscriptionData as the Java bean writes it (filterClassSource is not serialized)."""
    return Bean(
        classFilterMode=bool(sub.get("classFilterMode", False)),
        codeSet=sorted(_long(c) for c in sub.get("codeSet") or ()),
        expressionType=sub.get("expressionType") or "TAG",
        subString=sub.get("subString"),
        subVersion=_long(sub.get("subVersion")),
        tagsSet=sorted(str(t) for t in sub.get("tagsSet") or ()),
        topic=sub.get("topic"),
    )


def consumer_connection(group) -> bytes:
    """ConsumerConnection of a clients.ConsumerGroup."""
    return fastjson.dumpb(
        Bean(
            connectionSet=[connection_bean(c) for c in group.channels.values()],
            consumeFromWhere=_enum_name(group.consume_from_where, _FROM_WHERE),
            consumeType=_enum_name(group.consume_type, _CONSUME_TYPES),
            messageModel=_enum_name(group.message_model, _MESSAGE_MODELS),
            subscriptionTable={t: subscription_bean(s) for t, s in sorted(group.subscriptions.items())},
        )
    )


def producer_connection(channels) -> bytes:
    return fastjson.dumpb(Bean(connectionSet=[connection_bean(c) for c in channels]))


def producer_table(producers: dict) -> bytes:
    """ProducerTableInfo (GET_ALL_PRODUCER_INFO): every producer group's ProducerInfo list; remoteIP as Netty's
    InetSocketAddress prints it ("/ip:port")."""
    data = {
        group: [
            Bean(
                clientId=ch.client_id,
                language=language_name(ch.language),
                lastUpdateTimestamp=ch.last_update_ms,
                remoteIP="/" + ch.connection.remote,
                version=ch.version,
            )
            for ch in channels.values()
        ]
        for group, channels in sorted(producers.items())
    }
    return fastjson.dumpb(Bean(data=data))
