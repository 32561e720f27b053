"""`rocketstore groups | group ... | topic ...`: consumer groups and topics, as mqadmin administers them.

The verbs follow mqadmin's where it has one, in this command's style: a plural lists (`topics`, `groups`,
as mqadmin topicList / consumerProgress without a group), a singular takes one thing and a verb
(`topic create|update|delete`: updateTopic, deleteTopic; `group progress|reset-offset|delete`:
consumerProgress -g, resetOffsetByTime, deleteSubGroup), like kafka-consumer-groups' --describe,
--reset-offsets and --delete. Listing opens the store read-only; the rest take its lock.
"""

from __future__ import annotations

import click

from ..config import topics as TC
from ..errors import RocketStoreError
from ..validation import group_problem
from . import main as M
from . import output as O
from .options import (
    CREATE_HELP,
    check_topic,
    conf_opt,
    json_opt,
    one_line,
    open_store,
    queue_range,
    require_topic,
    small_opt,
    store_arg,
    topic_queue_ids,
)

MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")  # TopicMessageType, attribute message.type
MESSAGE_TYPE = "message.type"


def _check_group(group: str) -> None:
    problem = group_problem(group)
    if problem:
        M.fail(problem)


def _progress_rows(s, group: str, topics: list[str]) -> list[dict]:
    """consumerProgress: per queue the broker's max offset, the group's committed offset, the difference and
    the store time of the last consumed message."""
    rows = []
    for t in topics:
        for q in topic_queue_ids(s, t):
            committed = s.consumer_offsets.query(group, t, q)
            hi = s.max_offset(t, q)
            last = s.store_timestamp_at(t, q, committed - 1) if committed > 0 else -1
            rows.append(
                {
                    "topic": t,
                    "queueId": q,
                    "brokerOffset": hi,
                    "consumerOffset": committed if committed >= 0 else None,
                    "lag": max(hi - max(committed, 0), 0),
                    "lastTimestamp": last if last > 0 else None,
                }
            )
    return rows


@click.command()
@store_arg
@conf_opt
@json_opt
@O.wide_option
def groups(store, conf, as_json, wide):
    """Every consumer group with committed offsets (config/consumerOffset.json): its topics and total lag.
    Opens the store read-only."""
    s = open_store(store, conf, read_only=True)
    try:
        rows = []
        for g, topics in s.consumer_offsets.groups().items():
            progress = _progress_rows(s, g, topics)
            rows.append(
                {
                    "group": g,
                    "topics": " ".join(topics),
                    "queues": len(progress),
                    "lag": sum(r["lag"] for r in progress),
                }
            )
    except (RocketStoreError, ValueError, OSError) as e:
        M.fail(one_line(e))
    finally:
        s.close()
    if as_json:
        M.print_result(f"groups of {s.root}", None, rows, True)
    elif rows:
        O.print_table(f"groups of {s.root}", rows, wide=wide)
    else:
        O.console().print(f"{s.root}: no consumer groups")


@click.group()
def group():
    """One consumer group: progress, reset-offset, delete."""


@group.command()
@store_arg
@click.argument("name", metavar="GROUP")
@click.option("--topic", "-t", default=None, help="Only this topic.")
@conf_opt
@json_opt
@O.wide_option
def progress(store, name, topic, conf, as_json, wide):
    """A group's progress per queue (mqadmin consumerProgress): the queue's max offset, the committed
    offset, the lag and when the last consumed message was stored; the total lag. Read-only."""
    _check_group(name)
    s = open_store(store, conf, read_only=True)
    try:
        known = s.consumer_offsets.groups().get(name)
        if known is None:
            M.fail(f"no consumer group {name} in {s.root} (no committed offsets)")
        if topic is not None:
            require_topic(s, topic)
        rows = _progress_rows(s, name, [topic] if topic else known)
    except (RocketStoreError, ValueError, OSError) as e:
        M.fail(one_line(e))
    finally:
        s.close()
    total = sum(r["lag"] for r in rows)
    if as_json:
        M.print_result(f"progress of {name}", {"group": name, "lag": total}, rows, True)
        return
    O.print_table(f"progress of {name} in {s.root}", rows, wide=wide)
    O.console().print(f"total lag: {total}")


@group.command(name="reset-offset")
@store_arg
@click.argument("name", metavar="GROUP")
@click.option("--topic", "-t", required=True, help="The topic whose offsets to reset.")
@click.option(
    "--to-time",
    default=None,
    metavar="TIME",
    help="The first message stored at or after this time "
    "(ms or ISO, e.g. 2026-11-22T08:00:00Z; 'now' for the end), as mqadmin resetOffsetByTime.",
)
@click.option(
    "--to-offset",
    type=click.IntRange(min=0, max=O.JAVA_LONG_MAX),
    default=None,
    help="This queue offset (clamped to each queue's range).",
)
@click.option("--to-earliest", is_flag=True, help="Each queue's first offset.")
@click.option("--to-latest", is_flag=True, help="Each queue's end (skip everything stored so far).")
@click.option("--queue", "-q", type=click.IntRange(min=0, max=O.JAVA_LONG_MAX), default=None, help="Only this queue.")
@conf_opt
@json_opt
@O.wide_option
def reset_offset(store, name, topic, to_time, to_offset, to_earliest, to_latest, queue, conf, as_json, wide):
    """Set a group's committed offsets for a topic (mqadmin resetOffsetByTime, kafka-consumer-groups
    --reset-offsets): to a time, an offset, the earliest or the latest. Takes the store's lock."""
    _check_group(name)
    check_topic(topic)
    if sum((to_time is not None, to_offset is not None, to_earliest, to_latest)) != 1:
        M.fail("give one of --to-time, --to-offset, --to-earliest, --to-latest")
    when = None
    if to_time is not None and to_time != "now":
        when = O.parse_time(to_time, "--to-time")
    s = open_store(store, conf, read_only=False, locked_hint=" (a reset writes config/consumerOffset.json)")
    try:
        require_topic(s, topic)
        ids = topic_queue_ids(s, topic)
        if queue is not None:
            if queue not in ids:
                M.fail(f"--queue {queue}: topic {topic} has queues 0..{len(ids) - 1}")
            ids = [queue]
        rows, new = [], {}
        for q in ids:
            lo, hi = max(s.min_offset(topic, q), 0), s.max_offset(topic, q)
            if to_offset is not None:
                off = min(max(to_offset, lo), hi)
            elif to_earliest:
                off = lo
            elif to_latest or to_time == "now":
                off = hi
            else:
                off = s.offset_by_time(topic, q, when)
            old = s.consumer_offsets.query(name, topic, q)
            new[q] = off
            rows.append({"topic": topic, "queueId": q, "before": old if old >= 0 else None, "after": off})
        s.consumer_offsets.commit(name, topic, new)
    except (RocketStoreError, ValueError, OSError) as e:
        M.fail(one_line(e))
    finally:
        s.close()  # idempotent
    M.print_result(f"reset {name} on {topic}", None, rows, as_json, wide)


@group.command(name="delete")
@store_arg
@click.argument("name", metavar="GROUP")
@conf_opt
@json_opt
def delete_group(store, name, conf, as_json):
    """Delete a group (mqadmin deleteSubGroup with its offsets): its committed offsets for every topic and
    its SQL92 filter registration. Takes the store's lock."""
    _check_group(name)
    s = open_store(store, conf, read_only=False, locked_hint=" (a delete writes config/consumerOffset.json)")
    try:
        topics = s.consumer_offsets.groups().get(name, [])
        registered = name in s.filter_groups()
        if not topics and not registered:
            M.fail(f"no consumer group {name} in {s.root}")
        s.consumer_offsets.remove_group(name)
        if registered:
            s.unregister_filter(name)
    except (RocketStoreError, ValueError, OSError) as e:
        M.fail(one_line(e))
    finally:
        s.close()  # idempotent
    summary = {"group": name, "deleted": True, "topics": topics}
    if as_json:
        O.echo_json(summary)
    else:
        O.console().print(f"deleted group {name} (offsets for {', '.join(topics) or 'no topic'})")


# ---------------------------------------------------------------- topics
@click.group()
def topic():
    """One topic: create, update, delete (config/topics.json, as mqadmin updateTopic / deleteTopic)."""


def _attributes(batch_cq: bool, message_type: str | None, current: dict | None) -> dict:
    attrs = dict((current or {}).get("attributes") or {})
    if batch_cq:
        attrs[TC.QUEUE_TYPE] = TC.BATCH_CQ
    if message_type is not None:
        attrs[MESSAGE_TYPE] = message_type.upper()
    return attrs


def _write_topic(store, name, conf, as_json, done: str, plan, create: bool = False, small: bool = False) -> None:
    """What `topic create` and `topic update` share (both mqadmin updateTopic): the store opened writable
    (its lock), `plan(store)` answers the topic's queue count and attributes (or fails), the topic is
    written to config/topics.json, and its config as written is printed ("<done> topic <name>")."""
    s = open_store(store, conf, read_only=False, create=create, small=small)
    try:
        queues, attrs = plan(s)
        s.create_topic(name, queues, attrs)
        cfg = s.topic_configs[name]
    except (RocketStoreError, ValueError, OSError) as e:
        M.fail(one_line(e))
    finally:
        s.close()  # idempotent
    M.print_result(f"{done} topic {name}", cfg, [], as_json)


_queues_opt = click.option(
    "--queues",
    type=click.IntRange(1, 1024),
    default=None,
    help=f"Read and write queues (default {TC.DEFAULT_QUEUE_NUMS}, RocketMQ's defaultTopicQueueNums).",
)
_type_opt = click.option(
    "--message-type",
    type=click.Choice(MESSAGE_TYPES, case_sensitive=False),
    default=None,
    help="The topic's message.type attribute (RocketMQ 5).",
)


@topic.command(name="create")
@store_arg
@click.argument("name", metavar="TOPIC")
@_queues_opt
@click.option("--batch-cq", is_flag=True, help="A batch ConsumeQueue topic (queue.type=BatchCQ, RIP-26).")
@_type_opt
@click.option("--create", is_flag=True, help=CREATE_HELP)
@small_opt
@conf_opt
@json_opt
def create_topic(store, name, queues, batch_cq, message_type, create, small, conf, as_json):
    """Create a topic in config/topics.json (mqadmin updateTopic for a new topic)."""
    check_topic(name)

    def plan(s):
        if name in s.topic_configs or name in s.topics():
            M.fail(f"topic {name} already exists in {s.root} (change it with `rocketstore topic update`)")
        return queues or TC.DEFAULT_QUEUE_NUMS, _attributes(batch_cq, message_type, None)

    _write_topic(store, name, conf, as_json, "created", plan, create=create, small=small)


@topic.command(name="update")
@store_arg
@click.argument("name", metavar="TOPIC")
@_queues_opt
@_type_opt
@conf_opt
@json_opt
def update_topic(store, name, queues, message_type, conf, as_json):
    """Change a topic's queue count or message type (mqadmin updateTopic); its queue type cannot change."""
    check_topic(name)
    if queues is None and message_type is None:
        M.fail("give --queues or --message-type")

    def plan(s):
        require_topic(s, name)
        current = s.topic_configs.get(name)
        n = queues or int((current or {}).get("writeQueueNums") or len(topic_queue_ids(s, name)))
        return n, _attributes(False, message_type, current)

    _write_topic(store, name, conf, as_json, "updated", plan)


@topic.command(name="delete")
@store_arg
@click.argument("name", metavar="TOPIC")
@click.option("--yes", is_flag=True, help="Do not ask first.")
@conf_opt
@json_opt
def delete_topic(store, name, yes, conf, as_json):
    """Delete a topic as mqadmin deleteTopic does in a broker: its topics.json entry, its queues and the
    groups' offsets for it. Its CommitLog records stay until they expire (as in RocketMQ)."""
    check_topic(name)
    s = open_store(store, conf, read_only=False)
    try:
        require_topic(s, name)
        messages = sum(queue_range(s, name, q)[2] for q in topic_queue_ids(s, name))
        if not yes and not as_json:
            click.confirm(f"delete topic {name} ({messages} message(s) in its queues) from {s.root}?", abort=True)
        s.delete_topic(name)
    except (RocketStoreError, ValueError, OSError) as e:
        M.fail(one_line(e))
    finally:
        s.close()  # idempotent
    summary = {"topic": name, "deleted": True, "messages": messages}
    if as_json:
        O.echo_json(summary)
    else:
        O.console().print(
            f"deleted topic {name} ({messages} message(s) in its queues; the CommitLog keeps "
            "their records until they expire)"
        )


COMMANDS = (groups, group, topic)


def register(cli: click.Group) -> None:
    for command in COMMANDS:
        cli.add_command(command)
