"""`rocketstore produce | consume | query | topics | queues`: the message-level commands.

Registered on the `cli` group by main.py (register(cli)). Like the rest of the command: tables by default,
--json for scripts, one error line on stderr and exit status 1 for bad input. Only `produce` and a
committing `consume` open the store for writing (and so take its lock file); the rest open it read-only.
"""
from __future__ import annotations

import itertools
import json
import os
import random
import struct
import sys
import time

import click
from rich.console import Console

from .. import Message, MessageStore
from ..errors import RocketStoreError, StoreLockedError
from ..formats import properties as P
from ..formats.record import parse_msg_id
from ..topics import queue_type
from ..validation import group_problem, topic_problem
from . import main as M

DEFAULT_QUEUES = 4        # round robin over this many queues for a topic with no config and no queues
SHOWN_PUTS = 20           # produce prints one row per message up to this many, else a summary
FOLLOW_WAIT_MS = 1000     # --follow: long-poll this long, then look at the store again

_store_arg = click.argument("store", type=click.Path(file_okay=False))
_conf_opt = click.option("-c", "--conf", type=click.Path(dir_okay=False), help="A RocketMQ broker.conf.")
_json_opt = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")


def _one_line(e: BaseException | str) -> str:
    return " ".join(str(e).split())


def _check_topic(topic: str) -> None:
    problem = topic_problem(topic)
    if problem:
        M._fail(problem)


def _open(store: str, conf: str | None, read_only: bool = True, create: bool = False,
          locked_hint: str = "", trust_queues: bool = False) -> MessageStore:
    if not os.path.isdir(store):
        if os.path.exists(store):
            M._fail(f"{store}: not a directory")
        if not create:
            M._fail(f"{store}: no store directory here" + ("" if read_only else " (give --create to make one)"))
    cfg = M._config(conf)
    try:
        return M.open_store(store, cfg, read_only=read_only, check_commitlog=not trust_queues)
    except StoreLockedError as e:
        M._fail(_one_line(e) + locked_hint)
    except (RocketStoreError, OSError, ValueError) as e:
        M._fail(f"{store}: {_one_line(e)}")


def _body_text(body: bytes, as_hex: bool) -> str:
    return body.hex() if as_hex else bytes(body).decode("utf-8", "replace")


def _message_row(m, as_hex: bool = False) -> dict:
    return {"topic": m.topic, "queueId": m.queue_id, "queueOffset": m.queue_offset,
            "physicalOffset": m.physical_offset, "msgId": m.msg_id if hasattr(m, "msg_id") else None,
            "uniqKey": m.unique_key, "tags": m.tags, "keys": " ".join(m.keys),
            "storeTimestamp": m.store_timestamp, "bornTimestamp": m.born_timestamp,
            "properties": dict(m.properties), "body": _body_text(m.body, as_hex)}


def _short_row(row: dict) -> dict:
    """The columns a table shows of a message (--json shows every field)."""
    return {k: row[k] for k in ("queueId", "queueOffset", "msgId", "tags", "keys", "body")}


# ---------------------------------------------------------------- produce
_counter = itertools.count(random.randrange(1 << 16))
_PREFIX = struct.pack(">4sHI", bytes([127, 0, 0, 1]), os.getpid() & 0xFFFF, random.getrandbits(32))


def new_unique_key() -> str:
    """A UNIQ_KEY laid out like RocketMQ's MessageClientIDSetter: ip, pid, a random per-process id, the
    milliseconds since the start of the month, a counter; 32 upper-case hex characters."""
    now = time.gmtime()
    month_start = time.mktime((now.tm_year, now.tm_mon, 1, 0, 0, 0, 0, 0, 0)) - time.timezone
    since = int((time.time() - month_start) * 1000) & 0xFFFFFFFF
    return (_PREFIX + struct.pack(">IH", since, next(_counter) & 0xFFFF)).hex().upper()


def _parse_properties(items) -> dict[str, str]:
    props = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            M._fail(f"--property {item!r}: expected KEY=VALUE")
        if any(c in key + value for c in (P.NAME_VALUE_SEPARATOR, P.PROPERTY_SEPARATOR)):
            M._fail(f"--property {item!r}: contains a control character RocketMQ uses as a separator")
        props[key] = value
    return props


def _write_queues(store: MessageStore, topic: str) -> list[int]:
    cfg = store.topic_configs.get(topic)
    if cfg:
        n = int(cfg.get("writeQueueNums") or cfg.get("readQueueNums") or 0)
        if n > 0:
            return list(range(n))
    existing = store.topics().get(topic) or []
    return list(range(max([DEFAULT_QUEUES] + [q + 1 for q in existing])))


@click.command()
@_store_arg
@click.argument("topic")
@click.argument("bodies", metavar="[BODY]...", nargs=-1)
@click.option("--file", "file_", type=click.Path(dir_okay=False), help="One message whose body is this file.")
@click.option("--stdin", "from_stdin", is_flag=True, help="One message per line of standard input.")
@click.option("--tags", help="The messages' tag.")
@click.option("--keys", help='The messages\' keys, space-separated ("k1 k2"), for query --key.')
@click.option("--property", "props", multiple=True, metavar="K=V", help="A user property (repeatable).")
@click.option("--queue", type=int, default=None, help="Put every message in this queue (default: round robin).")
@click.option("--create", is_flag=True, help="Make the store directory when it does not exist.")
@_conf_opt
@_json_opt
def produce(store, topic, bodies, file_, from_stdin, tags, keys, props, queue, create, conf, as_json):
    """Put messages into a store: one per BODY argument, the content of --file, or one per line of --stdin.
    Each gets a UNIQ_KEY (as a RocketMQ producer assigns one). Without --queue, the messages go round robin
    over the topic's write queues (from config/topics.json, else the queues that exist, else 4)."""
    _check_topic(topic)
    sources = sum(1 for s in (bodies, file_, from_stdin) if s)
    if sources != 1:
        M._fail("give the bodies as arguments, or --file F, or --stdin (exactly one of them)")
    properties = _parse_properties(props)
    if file_ is not None:
        try:
            with open(file_, "rb") as fh:
                payloads = iter([fh.read()])
        except OSError as e:
            M._fail(f"{file_}: {e.strerror or e}")
    elif from_stdin:
        payloads = (line.rstrip(b"\r\n") for line in sys.stdin.buffer)
    else:
        payloads = (b.encode("utf-8", "surrogateescape") for b in bodies)
    s = _open(store, conf, read_only=False, create=create)
    rows, per_queue = [], {}
    try:
        queues = _write_queues(s, topic)
        if queue is not None and (queue < 0 or (s.topic_configs.get(topic) and queue >= len(queues))):
            M._fail(f"--queue {queue} is out of range: topic {topic} has write queues 0..{len(queues) - 1}")
        # round robin from where the queues' totals say the last run stopped
        turn = sum(max(s.max_offset(topic, q), 0) for q in queues) % len(queues)
        for i, body in enumerate(payloads):
            q = queue if queue is not None else queues[(turn + i) % len(queues)]
            msg_props = dict(properties)
            msg_props.setdefault(P.UNIQ_KEY, new_unique_key())
            r = s.put(Message(topic, body, tags=tags or None, keys=keys or None, properties=msg_props), q)
            if not r.ok:
                M._fail(f"put into {topic}/{q} failed: {r.status.name}")
            per_queue[q] = per_queue.get(q, 0) + 1
            rows.append({"msgId": r.msg_id, "uniqKey": msg_props[P.UNIQ_KEY], "queueId": q,
                         "queueOffset": r.queue_offset, "physicalOffset": r.physical_offset, "size": r.size})
    finally:
        if not s._closed:
            s.close()
    header = {"store": s.root, "topic": topic, "messages": len(rows),
              "queues": {str(q): n for q, n in sorted(per_queue.items())}}
    if as_json:
        M._print(f"produce {topic}", header, rows, True)
    elif len(rows) <= SHOWN_PUTS:
        M._print(f"produced {len(rows)} message(s) to {topic}", None, rows, False)
    else:
        header["queues"] = ", ".join(f"{q}: {n}" for q, n in sorted(per_queue.items()))
        M._print(f"produce {topic}", header, [], False)


# ---------------------------------------------------------------- consume
def _start_positions(s: MessageStore, c, start: str) -> None:
    """--from earliest / latest / a time (ms): set every queue's position, ignoring committed offsets."""
    for q in c.queue_ids():
        if start == "earliest":
            c.positions[q] = max(s.min_offset(c.topic, q), 0)
        elif start == "latest":
            c.positions[q] = s.max_offset(c.topic, q)
        elif start.isdigit():
            c.positions[q] = s.offset_by_time(c.topic, q, int(start))


def _print_line(row: dict, as_json: bool, console: Console) -> None:
    if as_json:
        click.echo(json.dumps(row, ensure_ascii=False))
    else:
        console.print(f"{row['queueId']}\t{row['queueOffset']}\t{row['msgId']}\t{row['tags'] or ''}\t"
                      f"{row['keys']}\t{row['body']}", markup=False, highlight=False, soft_wrap=True)


@click.command()
@_store_arg
@click.argument("topic")
@click.option("--group", "-g", required=True, help="The consumer group.")
@click.option("--tags", default=None, help='A subscription: "*" (default) or "TagA || TagB".')
@click.option("--sql", default=None, metavar="EXPR",
              help="A SQL92 subscription on the messages' properties instead of --tags, e.g. "
                   "\"region = 'eu' AND amount > 100\" (RocketMQ's grammar). A committing consume registers it "
                   "for the group (config/consumerFilter.json).")
@click.option("--from", "start", default="committed", show_default=True, metavar="earliest|latest|committed|MS",
              help="Where to start: the group's committed offsets (else the earliest), the earliest or latest "
                   "offsets, or the first message stored at or after a time in milliseconds.")
@click.option("--max", "max_count", type=int, default=None, help="Stop after this many messages.")
@click.option("--follow", is_flag=True, help="Wait for new messages until Ctrl-C (long polling).")
@click.option("--commit/--no-commit", default=True, show_default=True,
              help="Commit how far the group got at the end (opens the store for writing).")
@click.option("--hex", "as_hex", is_flag=True, help="Bodies in hex instead of UTF-8.")
@_conf_opt
@_json_opt
def consume(store, topic, group, tags, sql, start, max_count, follow, commit, as_hex, conf, as_json):
    """Read a topic as a consumer group: every queue in turn, from the group's committed offsets (or
    --from), filtered by --tags or by a SQL92 expression (--sql); commits the group's offsets at the end unless --no-commit. With --follow
    the store is read read-only (a producer may write meanwhile) and the offsets are committed on Ctrl-C."""
    _check_topic(topic)
    problem = group_problem(group)
    if problem:
        M._fail(problem)
    if start not in ("earliest", "latest", "committed") and not start.isdigit():
        M._fail(f"--from {start!r}: expected earliest, latest, committed or a time in milliseconds")
    if max_count is not None and max_count <= 0:
        M._fail(f"--max {max_count}: must be positive")
    if sql is not None:
        if tags is not None:
            M._fail("give --tags or --sql, not both: a subscription is by tag or by SQL92")
        _check_sql(sql)
    # reading with the lock held only when committing and not following: a follower must let producers write
    s = _open(store, conf, read_only=follow or not commit,
              locked_hint=" (committing needs the lock: read with --no-commit)")
    console = Console()
    rows: list[dict] = []
    seen = 0
    try:
        c = s.consumer(group, topic, tags, "latest" if start == "latest" else "earliest", sql=sql)
        _start_positions(s, c, start)
        if follow:
            s, c, seen = _follow(store, conf, s, c, tags, max_count, as_hex, as_json, console, sql)
        else:
            while max_count is None or seen < max_count:
                got = c.poll(max_count=32 if max_count is None else min(32, max_count - seen))
                if not got:
                    break
                if max_count is not None and seen + len(got) > max_count:
                    got = got[:max_count - seen]
                    c.positions[got[-1].queue_id] = got[-1].queue_offset + 1
                seen += len(got)
                rows.extend(_message_row(m, as_hex) for m in got)
        positions = dict(c.positions)
        lag = c.lag()
        if commit and not follow:
            c.commit()
    except (RocketStoreError, ValueError, OSError) as e:
        M._fail(_one_line(e))
    finally:
        if not s._closed:
            s.close()
    if commit and follow:
        _commit_later(store, conf, group, topic, positions)
    header = {"group": group, "topic": topic, **({"sql": sql} if sql is not None else {}),
              "consumed": seen, "committed": commit,
              "positions": {str(q): o for q, o in sorted(positions.items())},
              "lag": {str(q): n for q, n in sorted(lag.items())}}
    if follow:
        if not as_json:
            Console(stderr=True).print(f"consumed {seen} message(s){', committed' if commit else ''}",
                                       highlight=False)
        return
    if as_json:
        M._print(f"consume {topic} as {group}", header, rows, True)
    elif rows:
        M._print(f"consumed {seen} message(s) of {topic} as {group}"
                 f"{' (committed)' if commit else ' (not committed)'}", None,
                 [_short_row(r) for r in rows], False)
    else:
        console.print(f"no new messages in {topic} for {group}", highlight=False)


def _check_sql(sql: str) -> None:
    """A bad SQL92 expression: one error line naming where it goes wrong, exit status 1."""
    from ..filter import FilterSyntaxError, compile as compile_sql
    try:
        compile_sql(sql)
    except FilterSyntaxError as e:
        M._fail(f"--sql {sql!r}: line {e.line}, column {e.column}: {_one_line(e.reason)}")


def _follow(store, conf, s, c, tags, max_count, as_hex, as_json, console, sql=None):
    """Print messages as they come until Ctrl-C or --max. A read-only store sees only what was there when
    it was opened, so when a long poll finds nothing the store is opened again (positions kept), trusting
    its ConsumeQueues: no CommitLog recovery, so a look costs the queues' loading, not a scan of the log."""
    seen = 0
    try:
        while max_count is None or seen < max_count:
            got = c.poll(max_count=32, wait_ms=FOLLOW_WAIT_MS)
            if not got:
                positions, turn = dict(c.positions), c._turn
                s.close()
                s = _open(store, conf, read_only=True, trust_queues=True)
                c = s.consumer(c.group, c.topic, tags, c.start, sql=sql)
                c.positions.update(positions)
                c._turn = turn
                continue
            if max_count is not None and seen + len(got) > max_count:
                got = got[:max_count - seen]
                c.positions[got[-1].queue_id] = got[-1].queue_offset + 1
            for m in got:
                _print_line(_message_row(m, as_hex), as_json, console)
            sys.stdout.flush()
            seen += len(got)
    except KeyboardInterrupt:
        pass
    return s, c, seen


def _commit_later(store, conf, group, topic, positions) -> None:
    if not positions:
        return
    try:
        with M.open_store(store, M._config(conf)) as w:
            w.consumer_offsets.commit(group, topic, positions)
    except StoreLockedError as e:
        M._fail(f"{_one_line(e)}: the offsets were not committed ({positions})")
    except (RocketStoreError, OSError) as e:
        M._fail(f"{store}: {_one_line(e)}: the offsets were not committed")


# ---------------------------------------------------------------- query
@click.command()
@_store_arg
@click.option("--topic", "-t", help="The topic (with --key and --unique-key).")
@click.option("--key", help="Messages whose KEYS hold this key (the index).")
@click.option("--unique-key", help="The message with this UNIQ_KEY (the id its producer assigned).")
@click.option("--msg-id", help="The message an offset msgId names (store host + physical offset).")
@click.option("--offset", "phys", type=int, help="The message whose record starts at this CommitLog offset.")
@click.option("--begin", type=int, default=0, help="With --key: stored at or after (ms).")
@click.option("--end", type=int, default=None, help="With --key: stored at or before (ms).")
@click.option("--max", "max_count", type=int, default=32, show_default=True, help="With --key: at most this many.")
@click.option("--hex", "as_hex", is_flag=True, help="Bodies in hex instead of UTF-8.")
@_conf_opt
@_json_opt
def query(store, topic, key, unique_key, msg_id, phys, begin, end, max_count, as_hex, conf, as_json):
    """Find messages by key (--key K --topic T), by unique key (--unique-key U --topic T), by msgId
    (--msg-id) or by physical offset (--offset). Opens the store read-only."""
    given = [n for n, v in (("--key", key), ("--unique-key", unique_key), ("--msg-id", msg_id),
                            ("--offset", phys)) if v is not None]
    if len(given) != 1:
        M._fail("give exactly one of --key, --unique-key, --msg-id, --offset")
    if (key is not None or unique_key is not None) and topic is None:
        M._fail(f"{given[0]} needs --topic")
    if topic is not None:
        _check_topic(topic)
    if msg_id is not None:
        try:
            parse_msg_id(msg_id)
        except ValueError as e:
            M._fail(f"bad msgId: {_one_line(e)}")
    if max_count <= 0:
        M._fail(f"--max {max_count}: must be positive")
    s = _open(store, conf, read_only=True)
    try:
        if key is not None:
            found = list(s.query(topic, key, max_count, begin, end))
            what = f"key {key} in {topic}"
        elif unique_key is not None:
            m = s.by_unique_key(topic, unique_key)
            found = [m] if m else []
            what = f"unique key {unique_key} in {topic}"
        elif msg_id is not None:
            m = s.by_msg_id(msg_id)
            if m is None:
                M._fail(f"msgId {msg_id}: no such message in {s.root}")
            found, what = [m], f"msgId {msg_id}"
        else:
            lo, hi = s.min_physical_offset, s.max_physical_offset
            if not lo <= phys < hi:
                M._fail(f"offset {phys} is out of range: the CommitLog holds [{lo}, {hi})")
            m = s.look(phys)
            if m is None or m.physical_offset != phys:
                M._fail(f"offset {phys}: no message record starts there")
            found, what = [m], f"offset {phys}"
        rows = [_message_row(m, as_hex) for m in found]
    except (RocketStoreError, ValueError, OSError) as e:
        M._fail(_one_line(e))
    finally:
        s.close()
    if as_json:
        M._print(f"query {what}", {"found": len(rows)}, rows, True)
    elif rows:
        M._print(f"query {what}: {len(rows)} found", None,
                 [{"physicalOffset": r["physicalOffset"], **_short_row(r)} for r in rows], False)
    else:
        Console().print(f"query {what}: nothing found", highlight=False)


# ---------------------------------------------------------------- topics and queues
def _topic_queue_ids(s: MessageStore, topic: str) -> list[int]:
    ids = set(s.topics().get(topic, []))
    cfg = s.topic_configs.get(topic)
    if cfg:
        ids.update(range(int(cfg.get("readQueueNums") or 0)))
    return sorted(ids)


def _queue_range(s: MessageStore, topic: str, q: int) -> tuple[int, int, int]:
    lo, hi = s.min_offset(topic, q), s.max_offset(topic, q)
    return lo, hi, max(hi - max(lo, 0), 0)


@click.command()
@_store_arg
@_conf_opt
@_json_opt
def topics(store, conf, as_json):
    """Every topic: its queues, queue type (SimpleCQ or BatchCQ), configured queue count and messages.
    Opens the store read-only."""
    s = _open(store, conf, read_only=True)
    try:
        names = sorted(set(s.topics()) | set(s.topic_configs))
        rows = []
        for t in names:
            cfg = s.topic_configs.get(t)
            ids = _topic_queue_ids(s, t)
            rows.append({"topic": t, "queues": len(ids),
                         "readQueueNums": cfg.get("readQueueNums") if cfg else None,
                         "writeQueueNums": cfg.get("writeQueueNums") if cfg else None,
                         "queueType": queue_type(cfg) if cfg else ("BatchCQ" if t in s.batch_topics else "SimpleCQ"),
                         "messages": sum(_queue_range(s, t, q)[2] for q in ids)})
    except (RocketStoreError, ValueError, OSError) as e:
        M._fail(_one_line(e))
    finally:
        s.close()
    if rows or as_json:
        M._print(f"topics of {s.root}", None, rows, as_json)
    else:
        Console().print(f"{s.root}: no topics", highlight=False)


@click.command()
@_store_arg
@click.argument("topic", required=False)
@_conf_opt
@_json_opt
def queues(store, topic, conf, as_json):
    """Every queue (of TOPIC, or of all topics): min and max offsets, message count, and each consumer
    group's committed offset and lag. Opens the store read-only."""
    if topic is not None:
        _check_topic(topic)
    s = _open(store, conf, read_only=True)
    try:
        known = set(s.topics()) | set(s.topic_configs)
        if topic is not None and topic not in known:
            M._fail(f"no topic {topic} in {s.root}")
        table = s.consumer_offsets.table
        rows = []
        for t in sorted(known) if topic is None else [topic]:
            groups = sorted(k.rsplit("@", 1)[1] for k in table if k.rsplit("@", 1)[0] == t and "@" in k)
            for q in _topic_queue_ids(s, t):
                lo, hi, n = _queue_range(s, t, q)
                row = {"topic": t, "queueId": q, "minOffset": lo, "maxOffset": hi, "messages": n, "groups": {}}
                for g in groups:
                    committed = table[f"{t}@{g}"].get(q)
                    row["groups"][g] = {"committed": committed,
                                        "lag": None if committed is None else max(hi - committed, 0)}
                rows.append(row)
    except (RocketStoreError, ValueError, OSError) as e:
        M._fail(_one_line(e))
    finally:
        s.close()
    title = f"queues of {topic or 'every topic'} in {s.root}"
    if as_json:
        M._print(title, None, rows, True)
        return
    flat = []
    for r in rows:
        f = {k: v for k, v in r.items() if k != "groups"}
        for g, v in r["groups"].items():
            f[f"{g} committed"] = "-" if v["committed"] is None else v["committed"]
            f[f"{g} lag"] = "-" if v["lag"] is None else v["lag"]
        flat.append(f)
    if flat:
        M._print(title, None, flat, False)
    else:
        Console().print(f"{title}: no queues", highlight=False)


COMMANDS = (produce, consume, query, topics, queues)


def register(group: click.Group) -> None:
    for command in COMMANDS:
        group.add_command(command)
