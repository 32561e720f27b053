"""`rocketstore produce | consume | query | topics | queues`: the message-level commands.

Registered on the `cli` group by main.py (register(cli)). Like the rest of the command: tables by default,
--json for scripts, one error line on stderr and exit status 1 for bad input. Only `produce` and a
committing `consume` open the store for writing (and so take its lock file); the rest open it read-only.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import signal
import struct
import sys
import time

import click

from .. import Message, MessageStore
from ..store.consumer import ConsumerOffsets
from ..errors import InvalidMessageIdError, RocketStoreError, StoreLockedError
from ..store.lock import StoreLock
from ..formats import properties as P
from ..config.topics import queue_type
from ..validation import group_problem, property_name_problem
from . import archive_hint as AH
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

SHOWN_PUTS = 20  # produce prints one row per message up to this many, else a summary
FOLLOW_WAIT_MS = 1000  # --follow: long-poll this long, then look at the store again
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
COMMIT_EVERY_S = 5.0  # --follow commits this often while it moves (a RocketMQ client's persistConsumerOffsetInterval)


def _message_row(m, as_hex: bool = False, as_json: bool = False) -> dict:
    """A message as a row: every field; the body as text or base64 (bodyEncoding) for JSON, as text or hex
    for a table."""
    row = {
        "topic": m.topic,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "physicalOffset": m.physical_offset,
        "msgId": m.msg_id if hasattr(m, "msg_id") else None,
        "uniqKey": m.unique_key,
        "tags": m.tags,
        "keys": " ".join(m.keys),
        "storeTimestamp": m.store_timestamp,
        "bornTimestamp": m.born_timestamp,
        "properties": dict(m.properties),
    }
    row.update(O.body_json(m.body) if as_json else {"body": O.body_text(m.body, as_hex)})
    return row


SHORT_COLUMNS = ["queueId", "queueOffset", "storeTimestamp", "tags", "keys", "body"]


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
            M.fail(f"--property {item!r}: expected KEY=VALUE")
        problem = property_name_problem(key, " (use --tags / --keys)")
        if problem:  # UNIQ_KEY, KEYS, TAGS, DELAY...: set by the store or other options, never forged
            raise click.BadParameter(problem, param_hint="--property")
        if any(c in key + value for c in (P.NAME_VALUE_SEPARATOR, P.PROPERTY_SEPARATOR)):
            M.fail(f"--property {item!r}: contains a control character RocketMQ uses as a separator")
        props[key] = value
    return props


def _refusal(r, body: bytes, max_message_size: int) -> str:
    """Why a put was refused (the store's reason) and, for a body over maxMessageSize, how to allow it."""
    text = f": {r.reason}" if r.reason else ""
    if len(body) > max_message_size:
        text += (
            f"; to allow it, give -c broker.conf with maxMessageSize={len(body)} or more "
            f"(RocketMQ's default is {4 * 1024 * 1024}, 4 MiB; the broker and clients must allow it too)"
        )
    return text


def _write_queues(store: MessageStore, topic: str) -> list[int]:
    """The topic's write queues; a new topic is created first (config/topics.json), with the store's default
    queue count as every tool gives it (topics.DEFAULT_QUEUE_NUMS)."""
    store.ensure_topic(topic)
    cfg = store.topic_configs[topic]
    return list(range(int(cfg.get("writeQueueNums") or cfg.get("readQueueNums") or 1)))


@click.command()
@store_arg
@click.argument("topic")
@click.argument("bodies", metavar="[BODY]...", nargs=-1)
@click.option("--file", "file_", type=click.Path(dir_okay=False), help="One message whose body is this file.")
@click.option("--stdin", "from_stdin", is_flag=True, help="One message per line of standard input.")
@click.option("--tags", help="The messages' tag.")
@click.option("--keys", help='The messages\' keys, space-separated ("k1 k2"), for query --key.')
@click.option(
    "--property",
    "props",
    multiple=True,
    metavar="K=V",
    help="A user property (repeatable); RocketMQ's system properties (UNIQ_KEY, KEYS, TAGS, DELAY, ...) are refused.",
)
@click.option("--queue", type=int, default=None, help="Put every message in this queue (default: round robin).")
@click.option("--create", is_flag=True, help=CREATE_HELP)
@small_opt
@conf_opt
@json_opt
@O.wide_option
def produce(store, topic, bodies, file_, from_stdin, tags, keys, props, queue, create, small, conf, as_json, wide):
    """Put messages into a store: one per BODY argument, the content of --file, or one per line of --stdin.
    Each gets a UNIQ_KEY (as a RocketMQ producer assigns one). Without --queue, the messages go round robin
    over the topic's write queues (config/topics.json; a new topic gets 8, RocketMQ's defaultTopicQueueNums)."""
    check_topic(topic)
    sources = sum(1 for s in (bodies, file_, from_stdin) if s)
    if sources != 1:
        M.fail("give the bodies as arguments, or --file F, or --stdin (exactly one of them)")
    properties = _parse_properties(props)
    if file_ is not None:
        try:
            with open(file_, "rb") as fh:
                payloads = iter([fh.read()])
        except OSError as e:
            M.fail(f"{file_}: {e.strerror or e}")
    elif from_stdin:
        payloads = (line.rstrip(b"\r\n") for line in sys.stdin.buffer)
    else:
        payloads = (b.encode("utf-8", "surrogateescape") for b in bodies)
    s = open_store(store, conf, read_only=False, create=create, small=small)
    rows, per_queue = [], {}
    try:
        queues = _write_queues(s, topic)
        if queue is not None and not 0 <= queue < len(queues):
            M.fail(f"--queue {queue} is out of range: topic {topic} has write queues 0..{len(queues) - 1}")
        # round robin from where the queues' totals say the last run stopped
        turn = sum(max(s.max_offset(topic, q), 0) for q in queues) % len(queues)
        for i, body in enumerate(payloads):
            q = queue if queue is not None else queues[(turn + i) % len(queues)]
            msg_props = dict(properties)
            msg_props.setdefault(P.UNIQ_KEY, new_unique_key())
            r = s.put(Message(topic, body, tags=tags or None, keys=keys or None, properties=msg_props), q)
            if not r.ok:
                M.fail(f"put into {topic}/{q} failed: {r.status.name}" + _refusal(r, body, s.config.max_message_size))
            per_queue[q] = per_queue.get(q, 0) + 1
            rows.append(
                {
                    "msgId": r.msg_id,
                    "uniqKey": msg_props[P.UNIQ_KEY],
                    "queueId": q,
                    "queueOffset": r.queue_offset,
                    "physicalOffset": r.physical_offset,
                    "size": r.size,
                }
            )
    finally:
        s.close()  # idempotent
    header = {
        "store": s.root,
        "topic": topic,
        "messages": len(rows),
        "queues": {str(q): n for q, n in sorted(per_queue.items())},
    }
    if as_json:
        M.print_result(f"produce {topic}", header, rows, True)
    elif len(rows) <= SHOWN_PUTS:
        O.print_table(
            f"produced {len(rows)} message(s) to {topic}",
            rows,
            None if wide else ["msgId", "uniqKey", "queueId", "queueOffset"],
            wide=wide,
        )
    else:
        header["queues"] = ", ".join(f"{q}: {n}" for q, n in sorted(per_queue.items()))
        M.print_result(f"produce {topic}", header, [], False)


# ---------------------------------------------------------------- consume
READER_GROUP = "rocketstore-cli"  # the group a consume without --group reads as (it commits nothing)
FORMAT_TOKENS = (
    "%t topic, %p queue id, %o queue offset, %k keys, %g tags, %s body (raw bytes), %S body length, "
    "%T store time (ms), %i msgId, %u UNIQ_KEY (the id clients print), %h properties, %%; \\n \\t"
)


def _start_positions(s: MessageStore, c, start: str | None, offset: int | None, last: int | None) -> None:
    """Where each queue starts: --offset N, --last N, --from earliest / latest / a time; else (committed)
    the group's committed offsets, as the consumer finds them."""
    for q in c.queue_ids():
        lo, hi = max(s.min_offset(c.topic, q), 0), s.max_offset(c.topic, q)
        if offset is not None:
            c.positions[q] = min(max(offset, lo), hi)
        elif last is not None:
            c.positions[q] = max(hi - last, lo)
        elif start == "earliest":
            c.positions[q] = lo
        elif start == "latest":
            c.positions[q] = hi
        elif start not in (None, "committed"):
            c.positions[q] = s.offset_by_time(c.topic, q, O.parse_time(start, "--from"))


def _say_if_archived(s: MessageStore, archive, topic: str, queues, start, offset) -> None:
    """One line when --offset or --from TIME asks for messages cleanup deleted that the archive holds."""
    if offset is None and start in (None, "earliest", "latest", "committed"):
        return
    dest = AH.archive_dest(s, archive)
    if dest is not None:
        since = None if offset is not None else O.parse_time(start, "--from")
        line = AH.below_min(s, dest, topic, queues, offset, since)
        if line:
            click.echo(line, err=True)


def _formatter(fmt: str):
    """A kcat-style format string -> a function of a message giving the bytes to write (the body raw)."""
    fmt = fmt.replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\")
    fields = {
        "t": lambda m: m.topic,
        "p": lambda m: str(m.queue_id),
        "o": lambda m: str(m.queue_offset),
        "k": lambda m: " ".join(m.keys),
        "g": lambda m: m.tags or "",
        "S": lambda m: str(len(m.body)),
        "T": lambda m: str(m.store_timestamp),
        "i": lambda m: getattr(m, "msg_id", "") or "",
        "u": lambda m: m.unique_key or "",
        "%": lambda m: "%",
        "h": lambda m: ",".join(f"{k}={v}" for k, v in m.properties.items()),
    }
    parts: list = []
    i = 0
    while i < len(fmt):
        j = fmt.find("%", i)
        if j < 0 or j + 1 >= len(fmt):
            parts.append(fmt[i:].encode())
            break
        parts.append(fmt[i:j].encode())
        token = fmt[j + 1]
        if token == "s":
            parts.append(lambda m: bytes(m.body))
        elif token in fields:
            get = fields[token]
            parts.append(lambda m, get=get: get(m).encode("utf-8", "surrogateescape"))
        else:
            raise click.BadParameter(f"unknown token %{token} (tokens: {FORMAT_TOKENS})", param_hint="--format")
        i = j + 2
    return lambda m: b"".join(p if isinstance(p, bytes) else p(m) for p in parts)


class _Printer:
    """Writes consumed messages as they come: a format string or bodies (raw bytes, for pipes), JSON Lines
    (--json: one object per message), or tables page by page."""

    def __init__(self, fmt: str | None, as_json: bool, as_hex: bool, title: str, wide: bool = False):
        self.format = _formatter(fmt) if fmt is not None else None
        self.as_json, self.as_hex, self.title, self.wide = as_json, as_hex, title, wide
        self.page: list[dict] = []
        self.out = O.console()

    def add(self, messages) -> None:
        if self.format is not None:
            out = sys.stdout.buffer
            for m in messages:
                out.write(self.format(m))
            out.flush()
        elif self.as_json:
            for m in messages:
                O.echo_json(_message_row(m, as_json=True))
            sys.stdout.flush()
        else:
            self.page.extend(_message_row(m, self.as_hex) for m in messages)
            if len(self.page) >= O.PAGE_ROWS:
                self.flush()

    def flush(self) -> None:
        if self.page:
            O.print_table(self.title, self.page, None if self.wide else SHORT_COLUMNS, self.out, wide=self.wide)
            self.title, self.page = None, []


@click.command()
@store_arg
@click.argument("topic")
@click.option(
    "--group", "-g", default=None, help="The consumer group (default: read without a group, committing nothing)."
)
@click.option("--tags", default=None, help='A subscription: "*" (default) or "TagA || TagB".')
@click.option(
    "--sql",
    default=None,
    metavar="EXPR",
    help="A SQL92 subscription on the messages' properties instead of --tags, e.g. "
    "\"region = 'eu' AND amount > 100\" (RocketMQ's grammar). A committing consume registers it "
    "for the group (config/consumerFilter.json).",
)
@click.option(
    "--from",
    "start",
    default=None,
    metavar="committed|earliest|latest|TIME",
    help="Where to start: the group's committed offsets (the default with --group; else the "
    "earliest), the earliest or latest offsets, or the first message stored at or after a time "
    "(ms since the epoch or ISO, e.g. 2026-11-22T08:00:00Z).",
)
@click.option(
    "--queue",
    "-q",
    "queue",
    type=click.IntRange(min=0, max=O.JAVA_LONG_MAX),
    default=None,
    help="Only this queue (kcat -p).",
)
@click.option(
    "--offset",
    type=click.IntRange(min=0, max=O.JAVA_LONG_MAX),
    default=None,
    help="Start at this queue offset (kcat -o N), in --queue or in every queue.",
)
@click.option(
    "--last",
    type=click.IntRange(min=1, max=O.JAVA_LONG_MAX),
    default=None,
    help="The last N messages of each queue (kcat -o -N).",
)
@click.option(
    "--max",
    "max_count",
    type=click.IntRange(min=1, max=O.JAVA_LONG_MAX),
    default=None,
    help="Stop after this many messages.",
)
@click.option("--follow", is_flag=True, help="Wait for new messages until Ctrl-C (long polling).")
@click.option(
    "--commit/--no-commit",
    default=True,
    show_default=True,
    help="With --group: commit how far the group got at the end (opens the store for writing).",
)
@click.option(
    "--format",
    "-f",
    "fmt",
    default=None,
    metavar="FMT",
    help=f"Print each message by a kcat-style format instead of a table: {FORMAT_TOKENS}.",
)
@click.option("--body-only", is_flag=True, help="Only the bodies, as they are, one per line (--format '%s\\n').")
@click.option("--hex", "as_hex", is_flag=True, help="Bodies in hex in tables (else text when they are UTF-8).")
@conf_opt
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="JSON Lines: one object per message as it comes (the summary line goes to stderr).",
)
@AH.archive_opt
@O.wide_option
def consume(
    store,
    topic,
    group,
    tags,
    sql,
    start,
    queue,
    offset,
    last,
    max_count,
    follow,
    commit,
    fmt,
    body_only,
    as_hex,
    conf,
    as_json,
    archive,
    wide,
):
    """Read a topic: every queue in turn (or one, --queue), from the group's committed offsets or where
    --from, --offset or --last say, filtered by --tags or by a SQL92 expression (--sql). With --group the
    group's offsets are committed at the end unless --no-commit. With --follow the store is read read-only
    (a producer may write meanwhile) and the offsets are committed on Ctrl-C. Messages print as they come."""
    _check_consume_options(topic, group, start, offset, last, tags, sql)
    commit = commit and group is not None
    fmt = _output_format(fmt, body_only, as_json)
    # reading with the lock held only when committing and not following: a follower must let producers write
    s = open_store(
        store, conf, read_only=follow or not commit, locked_hint=" (committing needs the lock: read with --no-commit)"
    )
    require_topic(s, topic)
    if queue is not None and queue not in topic_queue_ids(s, topic):
        ids = topic_queue_ids(s, topic)
        s.close()
        M.fail(
            f"--queue {queue}: topic {topic} has queues {ids[0]}..{ids[-1]}"
            if ids
            else f"--queue {queue}: topic {topic} has no queues"
        )
    title = f"{topic}" + (f" as {group}" if group else "")
    printer = _Printer(fmt, as_json, as_hex, title, wide)
    seen = 0
    try:
        c = s.consumer(
            group or READER_GROUP,
            topic,
            tags,
            "latest" if start == "latest" else "earliest",
            sql=sql,
            queues=None if queue is None else [queue],
        )
        if group is None and start is None and offset is None and last is None:
            start = "earliest"
        _start_positions(s, c, start, offset, last)
        _say_if_archived(s, archive, topic, c.queue_ids(), start, offset)
        if follow:
            committer = _Committer(store, group, topic) if commit else None
            s, c, seen = _follow(store, conf, s, c, tags, max_count, printer, sql, committer)
        else:
            seen = _read_to_end(c, max_count, printer)
        positions = dict(c.positions)
        lag = c.lag()
        if commit and not follow:
            c.commit()
    except (RocketStoreError, ValueError, OSError) as e:
        M.fail(one_line(e))
    finally:
        s.close()  # idempotent
    if commit and follow:
        _commit_later(store, group, topic, positions)
    if fmt is None:
        # after a table on stdout; on stderr after a stream (--follow, JSON Lines: stdout holds messages only)
        what = "committed" if commit else "not committed" if group else "no group"
        left = sum(lag.values())
        O.console(stderr=follow or as_json).print(f"{seen} message(s) of {title} ({what}); {left} left after them")


def _check_consume_options(topic, group, start, offset, last, tags, sql) -> None:
    """consume's options that do not go together, or do not parse: one error line each."""
    check_topic(topic)
    if group is not None:
        problem = group_problem(group)
        if problem:
            M.fail(problem)
    elif start == "committed":
        M.fail("--from committed needs --group")
    if start not in (None, "earliest", "latest", "committed"):
        O.parse_time(start, "--from")
    if sum(x is not None for x in (start, offset, last)) > 1:
        M.fail("give one of --from, --offset, --last")
    if sql is not None:
        if tags is not None:
            M.fail("give --tags or --sql, not both: a subscription is by tag or by SQL92")
        _check_sql(sql)


def _output_format(fmt, body_only: bool, as_json: bool):
    """The --format to print with (--body-only is the body and a newline), or None for the table / JSON Lines."""
    if body_only:
        if fmt is not None:
            M.fail("give --format or --body-only, not both")
        fmt = "%s\\n"
    if fmt is not None and as_json:
        M.fail("give --format (or --body-only) or --json, not both")
    return fmt


def _read_to_end(c, max_count, printer) -> int:
    """Poll until nothing is left (or --max), printing as it goes; how many were read. A poll past --max is cut
    there, and the consumer's position with it."""
    seen = 0
    while max_count is None or seen < max_count:
        got = c.poll(max_count=32 if max_count is None else min(32, max_count - seen))
        if not got:
            break
        if max_count is not None and seen + len(got) > max_count:
            got = got[: max_count - seen]
            c.positions[got[-1].queue_id] = got[-1].queue_offset + 1
        seen += len(got)
        printer.add(got)
    printer.flush()
    return seen


def _check_sql(sql: str) -> None:
    """A bad SQL92 expression: one error line naming where it goes wrong, exit status 1."""
    from ..filter import FilterSyntaxError, compile as compile_sql

    try:
        compile_sql(sql)
    except FilterSyntaxError as e:
        M.fail(f"--sql {sql!r}: line {e.line}, column {e.column}: {one_line(e.reason)}")


def _follow(store, conf, s, c, tags, max_count, printer, sql=None, committer=None):
    """Print messages as they come until Ctrl-C, SIGTERM (systemd, docker stop) or --max, committing every
    COMMIT_EVERY_S seconds on the way when `committer` is given. A read-only store sees only what was there
    when it was opened, so when a long poll finds nothing the store is opened again (positions kept),
    trusting its ConsumeQueues: no CommitLog recovery, so a look costs the queues' loading, not a scan of
    the log."""
    seen = 0
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        while max_count is None or seen < max_count:
            if committer is not None:
                committer.maybe(c.positions)
            got = c.poll(max_count=32, wait_ms=FOLLOW_WAIT_MS)
            if not got:
                printer.flush()
                # an interrupt inside the close or the open would leave either half done (a service thread
                # told to stop but not joined, a store half loaded) for the exit to wait on: Ctrl-C waits for
                # the reopen instead, a moment
                with _signals_deferred():
                    s.close()
                    s = open_store(store, conf, read_only=True, trust_queues=True)
                    c = c.on(s)
                continue
            if max_count is not None and seen + len(got) > max_count:
                got = got[: max_count - seen]
                c.positions[got[-1].queue_id] = got[-1].queue_offset + 1
            printer.add(got)  # a table page shows when full, or when the queues go quiet
            seen += len(got)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    printer.flush()
    return s, c, seen


def _interrupt(signum, frame):
    raise KeyboardInterrupt  # SIGTERM ends a follow as Ctrl-C does: its offsets are committed


class _Committer:
    """A follow's commits on the way: the positions, when they moved, every COMMIT_EVERY_S seconds, under the
    store's lock taken for the write alone (a store someone else has open for writing is left for the next
    round; the commit at the end says so if it still cannot)."""

    def __init__(self, store: str, group: str, topic: str):
        self.store, self.group, self.topic = store, group, topic
        self.done: dict[int, int] = {}
        self.at = time.monotonic()

    def maybe(self, positions: dict[int, int]) -> None:
        if time.monotonic() - self.at < COMMIT_EVERY_S or positions == self.done:
            return
        self.at = time.monotonic()
        try:
            with _signals_deferred():
                commit_offsets(self.store, self.group, self.topic, positions)
            self.done = dict(positions)
        except StoreLockedError:
            pass


@contextlib.contextmanager
def _signals_deferred():
    """Ctrl-C or SIGTERM during a commit or a reopen waits for its end (an interrupt inside one could leave the
    store's lock or the lock registry held, and the commit at the end would wait on it), then ends the follow."""
    got = []
    previous = {sig: signal.signal(sig, lambda signum, frame: got.append(signum)) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if got:
        raise KeyboardInterrupt


def commit_offsets(store: str, group: str, topic: str, positions: dict[int, int]) -> None:
    """config/consumerOffset.json updated under the store's lock, without opening the store (no recovery,
    nothing else written): what MessageStore's consumer_offsets.commit writes."""
    lock = StoreLock.take(store)
    try:
        ConsumerOffsets(store, writable=True).commit(group, topic, positions)
    finally:
        lock.release()


def _commit_later(store, group, topic, positions) -> None:
    if not positions:
        return
    try:
        with _signals_deferred():
            commit_offsets(store, group, topic, positions)
    except KeyboardInterrupt:  # a second Ctrl-C came while it committed: the commit is done
        pass
    except StoreLockedError as e:
        M.fail(f"{one_line(e)}: the offsets were not committed ({positions})")
    except (RocketStoreError, OSError) as e:
        M.fail(f"{store}: {one_line(e)}: the offsets were not committed")


# ---------------------------------------------------------------- query
def _all_topics(s: MessageStore, topic: str | None) -> list[str]:
    return [topic] if topic is not None else sorted(set(s.topics()) | set(s.topic_configs))


def _by_key(s: MessageStore, topics: list[str], key: str, max_count: int, begin: int, end: int | None) -> list:
    found = []
    for t in topics:
        found.extend(s.query(t, key, max_count, begin, end))
    return sorted(found, key=lambda m: m.physical_offset)[:max_count]


def _by_unique_key(s: MessageStore, topics: list[str], key: str) -> list:
    """The messages whose UNIQ_KEY is `key`, in any of the topics (mqadmin's queryMsgByUniqueKey)."""
    found = []
    for t in topics:
        found.extend(m for m in s.query(t, key, s.config.max_msgs_num_batch) if m.unique_key == key)
    return found


def _by_id(s: MessageStore, topics: list[str], msg_id: str) -> list:
    """mqadmin queryMsgById: an offset msgId (store host + physical offset) if it decodes to a message,
    else the id a producer gave the message (UNIQ_KEY: what RocketMQ 5 clients print, 34 characters, and
    what 4.x clients print as msgId) searched across the topics."""
    try:
        m = s.by_msg_id(msg_id)
    except InvalidMessageIdError:  # not an offset msgId; maybe a producer's id
        m = None
    if m is not None and (len(topics) != 1 or m.topic == topics[0]):
        return [m]
    return _by_unique_key(s, topics, msg_id)


def _not_an_offset_msg_id(s: MessageStore, msg_id: str) -> str:
    """Why msg_id is no offset msgId ("" when it is a well-formed one)."""
    try:
        s.by_msg_id(msg_id)
    except InvalidMessageIdError as e:
        return f": not an offset msgId ({e.problem})"
    return ""


def _by_time(s: MessageStore, topics: list[str], begin: int, end: int | None, max_count: int) -> list:
    """Messages stored within [begin, end], the first max_count by store time: each queue from its offset
    for `begin` (the ConsumeQueue's time lookup) until a message stored after `end`."""
    found = []
    end = end if end is not None else (1 << 63) - 1
    for t in topics:
        for q in topic_queue_ids(s, t):
            off, hi, taken = s.offset_by_time(t, q, begin), s.max_offset(t, q), 0
            while off < hi and taken < max_count:
                r = s.get(READER_GROUP, t, q, off, 32)
                if not r.messages:
                    break
                got = r.unpacked()
                fresh = [m for m in got if begin <= m.store_timestamp <= end]
                found.extend(fresh)
                taken += len(fresh)
                if any(m.store_timestamp > end for m in got) or r.next_begin_offset <= off:
                    break
                off = r.next_begin_offset
    return sorted(found, key=lambda m: (m.store_timestamp, m.physical_offset))[:max_count]


@click.command()
@store_arg
@click.option("--topic", "-t", help="Only this topic (default: every topic).")
@click.option("--key", help="Messages whose KEYS hold this key (the index).")
@click.option(
    "--msg-id",
    "--id",
    "msg_id",
    help="A message id as clients and `produce` print it: an offset "
    "msgId (store host + physical offset), or the id a producer gave it (UNIQ_KEY; RocketMQ 5 "
    "clients print 34 characters), as mqadmin queryMsgById.",
)
@click.option("--unique-key", help="The message with this UNIQ_KEY (the id its producer assigned).")
@click.option(
    "--offset",
    "phys",
    type=click.IntRange(min=0, max=O.JAVA_LONG_MAX),
    help="The message whose record starts at this CommitLog offset.",
)
@click.option(
    "--begin",
    default=None,
    metavar="TIME",
    help="Stored at or after (ms or ISO, e.g. "
    "2026-11-22T08:00:00Z). Alone (or with --end): every message of the time range.",
)
@click.option("--end", default=None, metavar="TIME", help="Stored at or before (ms or ISO).")
@click.option(
    "--max",
    "max_count",
    type=click.IntRange(min=1, max=O.JAVA_LONG_MAX),
    default=32,
    show_default=True,
    help="With --key or a time range: at most this many.",
)
@click.option("--hex", "as_hex", is_flag=True, help="Bodies in hex in tables (else text when they are UTF-8).")
@conf_opt
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="JSON Lines: one object per message found (none when nothing is found).",
)
@AH.archive_opt
@O.wide_option
def query(store, topic, key, msg_id, unique_key, phys, begin, end, max_count, as_hex, conf, as_json, archive, wide):
    """Find messages by key (--key), by id (--msg-id: an offset msgId or a producer's id), by unique key
    (--unique-key), by physical offset (--offset) or by time range (--begin/--end alone), in --topic or in
    every topic. Opens the store read-only."""
    given = [
        n
        for n, v in (("--key", key), ("--unique-key", unique_key), ("--msg-id", msg_id), ("--offset", phys))
        if v is not None
    ]
    if len(given) > 1 or (not given and begin is None and end is None):
        M.fail("give one of --key, --msg-id, --unique-key, --offset, or a time range (--begin/--end)")
    if topic is not None:
        check_topic(topic)
    begin_ms = O.parse_time(begin, "--begin") if begin is not None else 0
    end_ms = O.parse_time(end, "--end") if end is not None else None
    s = open_store(store, conf, read_only=True)
    if topic is not None:
        require_topic(s, topic)
    topics = _all_topics(s, topic)
    where = f" in {topic}" if topic else ""
    hint = None
    try:
        dest = AH.archive_dest(s, archive)  # (a bad --archive is a usage error whatever is asked)
        if key is not None:
            found, what = _by_key(s, topics, key, max_count, begin_ms, end_ms), f"key {key}{where}"
        elif unique_key is not None:
            found, what = _by_unique_key(s, topics, unique_key), f"unique key {unique_key}{where}"
        elif msg_id is not None:
            found, what = _by_id(s, topics, msg_id), f"id {msg_id}{where}"
            if not found:
                M.fail(
                    f"id {msg_id}: no such message in {s.root} (neither an offset msgId nor a "
                    f"producer's id{where or ' in any topic'}){_not_an_offset_msg_id(s, msg_id)}"
                )
        elif phys is not None:
            lo, hi = s.min_physical_offset, s.max_physical_offset
            if not lo <= phys < hi:
                M.fail(f"offset {phys} is out of range: the CommitLog holds [{lo}, {hi}){_archived_at(s, dest, phys)}")
            m = s.look(phys)
            if m is None or m.physical_offset != phys:
                M.fail(f"offset {phys}: no message record starts there")
            found, what = [m], f"offset {phys}"
        else:
            found = _by_time(s, topics, begin_ms, end_ms, max_count)
            what = f"stored {O.iso_time(begin_ms)} .. {O.iso_time(end_ms) if end_ms is not None else 'now'}{where}"
            hint = AH.before_earliest(s, dest, topics, begin_ms, end_ms) if dest else None
        rows = [_message_row(m, as_hex, as_json) for m in found]
    except (RocketStoreError, ValueError, OSError) as e:
        M.fail(one_line(e))
    finally:
        s.close()
    if as_json:
        O.print_json_lines(rows)
    elif rows:
        O.print_table(
            f"query {what}: {len(rows)} found",
            rows,
            None if wide else ["topic", *SHORT_COLUMNS] if topic is None else ["physicalOffset", *SHORT_COLUMNS],
            wide=wide,
        )
    else:
        O.console().print(f"query {what}: nothing found")
    if hint:
        click.echo(hint, err=True)


def _archived_at(s: MessageStore, dest: str | None, phys: int) -> str:
    """For an offset below the CommitLog: where the archive holds it, if it does."""
    segment = AH.archived_segment(dest, phys) if dest and phys < s.min_physical_offset else None
    if segment is None:
        return ""
    return (
        f"; cleanup deleted its segment {segment}, which the archive {dest} holds: "
        f'spark.read.parquet("{dest}").where("physicalOffset = {phys}").show()'
    )


# ---------------------------------------------------------------- topics and queues
@click.command()
@store_arg
@conf_opt
@json_opt
@O.wide_option
def topics(store, conf, as_json, wide):
    """Every topic: its queues, queue type (SimpleCQ or BatchCQ), configured queue count and messages.
    Opens the store read-only."""
    s = open_store(store, conf, read_only=True)
    try:
        names = sorted(set(s.topics()) | set(s.topic_configs))
        rows = []
        for t in names:
            cfg = s.topic_configs.get(t)
            ids = topic_queue_ids(s, t)
            rows.append(
                {
                    "topic": t,
                    "queues": len(ids),
                    "readQueueNums": cfg.get("readQueueNums") if cfg else None,
                    "writeQueueNums": cfg.get("writeQueueNums") if cfg else None,
                    "queueType": queue_type(cfg) if cfg else ("BatchCQ" if t in s.batch_topics else "SimpleCQ"),
                    "messages": sum(queue_range(s, t, q)[2] for q in ids),
                }
            )
    except (RocketStoreError, ValueError, OSError) as e:
        M.fail(one_line(e))
    finally:
        s.close()
    if rows or as_json:
        M.print_result(f"topics of {s.root}", None, rows, as_json, wide)
    else:
        O.console().print(f"{s.root}: no topics")


@click.command()
@store_arg
@click.argument("topic", required=False)
@conf_opt
@json_opt
@O.wide_option
def queues(store, topic, conf, as_json, wide):
    """Every queue (of TOPIC, or of all topics): min and max offsets, message count, and each consumer
    group's committed offset and lag. Opens the store read-only."""
    if topic is not None:
        check_topic(topic)
    s = open_store(store, conf, read_only=True)
    try:
        known = set(s.topics()) | set(s.topic_configs)
        if topic is not None and topic not in known:
            M.fail(f"no topic {topic} in {s.root}")
        table = s.consumer_offsets.table
        rows = []
        for t in sorted(known) if topic is None else [topic]:
            groups = sorted(k.rsplit("@", 1)[1] for k in table if k.rsplit("@", 1)[0] == t and "@" in k)
            for q in topic_queue_ids(s, t):
                lo, hi, n = queue_range(s, t, q)
                row = {"topic": t, "queueId": q, "minOffset": lo, "maxOffset": hi, "messages": n, "groups": {}}
                for g in groups:
                    committed = table[f"{t}@{g}"].get(q)
                    row["groups"][g] = {
                        "committed": committed,
                        "lag": None if committed is None else max(hi - committed, 0),
                    }
                rows.append(row)
    except (RocketStoreError, ValueError, OSError) as e:
        M.fail(one_line(e))
    finally:
        s.close()
    title = f"queues of {topic or 'every topic'} in {s.root}"
    if as_json:
        M.print_result(title, None, rows, True)
        return
    flat = []
    for r in rows:
        f = {k: v for k, v in r.items() if k != "groups"}
        for g, v in r["groups"].items():
            f[f"{g} committed"] = "-" if v["committed"] is None else v["committed"]
            f[f"{g} lag"] = "-" if v["lag"] is None else v["lag"]
        flat.append(f)
    if flat:
        M.print_result(title, None, flat, False, wide)
    else:
        O.console().print(f"{title}: no queues")


COMMANDS = (produce, consume, query, topics, queues)


def register(group: click.Group) -> None:
    for command in COMMANDS:
        group.add_command(command)
