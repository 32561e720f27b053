"""What each console page shows and does, as plain data over the store's public API (no HTML here: pages.py
renders it). Bad input raises BadInput with a sentence saying what is wrong; the page shows it beside the form."""

from __future__ import annotations

import base64
import datetime
import os
import shutil
import time

from .. import engine
from ..broker.metrics import DLQ_PREFIX, RETRY_PREFIX, lag_rows, queue_groups
from ..broker.rules import is_system_topic
from ..config import topics as TC
from ..errors import RocketStoreError
from ..formats import properties as P
from ..message import Message
from ..validation import STRING_HASH_SET, group_problem, topic_problem

MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED")  # TopicMessageType, attribute message.type
MAX_QUEUES = 1024
SEARCH_LIMIT = 64  # messages a search shows at most
JAVA_LONG_MAX = 2**63 - 1


class BadInput(RocketStoreError, ValueError):
    """A form's input the console refuses: the message says what is wrong."""


# ---------------------------------------------------------------- input
def parse_int(text, what: str, low: int = 0, high: int = JAVA_LONG_MAX) -> int:
    text = (text or "").strip()
    if not text:
        raise BadInput(f"{what} is missing")
    try:
        n = int(text)
    except ValueError:
        raise BadInput(f"{what} must be a whole number, not {text!r}") from None
    if not low <= n <= high:
        raise BadInput(f"{what} must be between {low} and {high}, not {n}")
    return n


def parse_time(text, what: str) -> int:
    """Milliseconds since the epoch, or an ISO date-time (UTC when it names no zone)."""
    text = (text or "").strip()
    if not text:
        raise BadInput(f"{what} is missing")
    if text.lstrip("-").isdigit():
        return parse_int(text, what)
    try:
        dt = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(
            f"{what}: {text!r} is neither milliseconds nor an ISO date-time (2026-11-22T08:00:00Z)"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return int(dt.timestamp() * 1000)


def check_topic_name(name) -> str:
    name = (name or "").strip()
    problem = topic_problem(name, allow_long=False)
    if problem:
        raise BadInput(problem)
    return name


def queue_ids(store, name: str) -> list[int]:
    """A topic's queues: those with files and those its config names (a new topic's queues have no file yet)."""
    cfg = store.topic_configs.get(name) or {}
    n = max(int(cfg.get("writeQueueNums") or 0), int(cfg.get("readQueueNums") or 0))
    return sorted(set(store.topics().get(name, [])) | set(range(n)))


def require_topic(store, name: str) -> str:
    name = check_topic_name(name)
    if name not in store.topic_configs and name not in store.topics():
        raise BadInput(f"no topic {name} in this store")
    return name


def iso(ms: int | None) -> str:
    if not ms or ms <= 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def size_text(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# ---------------------------------------------------------------- overview
def overview(store, hooks, source) -> dict:
    usage = shutil.disk_usage(store.root)
    clients = hooks.clients() if hooks.clients is not None else []
    by_protocol: dict[tuple[str, str], int] = {}
    for c in clients:
        key = (c.get("protocol", "?"), c.get("kind", "?"))
        by_protocol[key] = by_protocol.get(key, 0) + 1
    earliest = store.earliest_store_time()
    return {
        "root": store.root,
        "mode": "read-only (rocketstore console)" if source.standalone else "served (rocketstore serve)",
        "engine": engine.describe(),
        "protocols": ", ".join(hooks.protocols) or "none (a read-only console)",
        "disk_total": size_text(usage.total),
        "disk_used": size_text(usage.total - usage.free),
        "disk_free": size_text(usage.free),
        "disk_ratio": f"{(usage.total - usage.free) / usage.total:.1%}" if usage.total else "-",
        "commitlog_bytes": size_text(store.max_physical_offset - store.min_physical_offset),
        "min_physical_offset": store.min_physical_offset,
        "max_physical_offset": store.max_physical_offset,
        "flush_behind": store.flush_behind_bytes,
        "dispatch_behind": store.dispatch_behind_bytes,
        "earliest": iso(earliest),
        "topics": len(set(store.topic_configs) | set(store.topics())),
        "groups": len(store.consumer_offsets.groups()),
        "clients": [{"protocol": p, "kind": k, "count": n} for (p, k), n in sorted(by_protocol.items())],
        "client_list": clients,
    }


# ---------------------------------------------------------------- topics
def topic_rows(store, rates: dict[str, float]) -> list[dict]:
    configs = store.topic_configs
    queues = store.topics()
    rows = []
    for name in sorted(set(configs) | set(queues)):
        cfg = configs.get(name) or {}
        ids = queues.get(name, [])
        lo = [max(store.min_offset(name, q), 0) for q in ids]
        hi = [store.max_offset(name, q) for q in ids]
        rows.append(
            {
                "name": name,
                "queues": cfg.get("writeQueueNums", len(ids)),
                "queue_type": TC.queue_type(cfg) if cfg else "-",
                "message_type": ((cfg.get("attributes") or {}).get("message.type") or "-"),
                "messages": sum(h - low for low, h in zip(lo, hi)),
                "rate": round(rates.get(name, 0.0), 2),
                "system": is_system_topic(name),
                "kind": "retry" if name.startswith(RETRY_PREFIX) else "dlq" if name.startswith(DLQ_PREFIX) else "",
            }
        )
    return rows


def topic_detail(store, name: str, hooks=None) -> dict:
    name = require_topic(store, name)
    cfg = store.topic_configs.get(name) or {}
    queues = []
    for q in queue_ids(store, name):
        lo, hi = max(store.min_offset(name, q), 0), store.max_offset(name, q)
        last = store.store_timestamp_at(name, q, hi - 1) if hi > 0 else -1
        queues.append({"queue": q, "min": lo, "max": hi, "messages": hi - lo, "last": iso(last)})
    groups = []
    for group, topics in sorted(queue_groups(store, hooks.groups if hooks else None).items()):
        if name in topics:
            rows = lag_rows(store, group, name, hooks.committed if hooks else None)
            groups.append({"group": group, "lag": sum(r["lag"] for r in rows)})
    return {"name": name, "config": cfg, "queues": queues, "groups": groups}


def _check_writable(source) -> None:
    if not source.writable:
        raise BadInput("the store is open read-only here (rocketstore console): change it through rocketstore serve")


def create_or_update_topic(store, source, form: dict, create: bool) -> str:
    """mqadmin updateTopic's rules: a valid name (TopicValidator), no system topic, 1..1024 queues; create refuses
    an existing topic, update one that does not exist; the queue type never changes."""
    _check_writable(source)
    name = check_topic_name(form.get("name"))
    if is_system_topic(name):
        raise BadInput(f"The topic[{name}] is conflict with system topic.")
    queues_text = (form.get("queues") or "").strip()
    kind = (form.get("message_type") or "").strip().upper()
    if kind and kind not in MESSAGE_TYPES:
        raise BadInput(f"message type must be one of {', '.join(MESSAGE_TYPES)}, not {kind!r}")
    exists = name in store.topic_configs or name in store.topics()
    if create and exists:
        raise BadInput(f"topic {name} already exists (update it instead)")
    if not create and not exists:
        raise BadInput(f"no topic {name} in this store")
    current = store.topic_configs.get(name)
    if queues_text:
        queues = parse_int(queues_text, "queues", 1, MAX_QUEUES)
    elif create:
        queues = TC.DEFAULT_QUEUE_NUMS
    else:
        queues = int(
            (current or {}).get("writeQueueNums") or len(store.topics().get(name, [])) or TC.DEFAULT_QUEUE_NUMS
        )
    attrs = dict((current or {}).get("attributes") or {})
    if create and form.get("batch_cq"):
        attrs[TC.QUEUE_TYPE] = TC.BATCH_CQ
    if kind:
        attrs["message.type"] = kind
    store.create_topic(name, queues, attrs)
    return f"{'created' if create else 'updated'} topic {name}: {queues} queue(s)"


def delete_topic(store, source, form: dict) -> str:
    _check_writable(source)
    name = require_topic(store, form.get("name"))
    if is_system_topic(name):
        raise BadInput(f"The topic[{name}] is conflict with system topic.")
    if form.get("confirm") != name:
        raise BadInput(f"type the topic's name ({name}) in the confirmation box to delete it")
    store.delete_topic(name)
    return f"deleted topic {name} (its CommitLog records stay until they expire)"


# ---------------------------------------------------------------- groups
def group_rows(store, hooks, rates: dict[str, float] | None = None) -> list[dict]:
    online: dict[str, int] = {}
    for c in hooks.clients() if hooks.clients is not None else []:
        if c.get("kind") == "consumer" and c.get("group"):
            online[c["group"]] = online.get(c["group"], 0) + 1
    rows = []
    groups = queue_groups(store, hooks.groups)
    for group in sorted(set(groups) | set(online)):
        topics = [t for t in groups.get(group, []) if t in store.topics()]
        lag = sum(r["lag"] for t in topics for r in lag_rows(store, group, t, hooks.committed))
        rows.append({"group": group, "topics": ", ".join(topics), "lag": lag, "clients": online.get(group, 0),
                     "rate": round((rates or {}).get(group, 0.0), 2)})  # fmt: skip
    return rows


def group_detail(store, hooks, group: str) -> dict:
    problem = group_problem((group or "").strip())
    if problem:
        raise BadInput(problem)
    group = group.strip()
    topics = queue_groups(store, hooks.groups).get(group, [])
    now = int(time.time() * 1000)
    out = []
    for t in topics:
        if t not in store.topics():
            continue
        for r in lag_rows(store, group, t, hooks.committed):
            first = r["first_unconsumed_ms"]
            out.append(
                {
                    "topic": t,
                    "queue": r["queue"],
                    "max": r["max"],
                    "committed": r["committed"] if r["committed"] >= 0 else "-",
                    "lag": r["lag"],
                    "latency_s": round((now - first) / 1000, 1) if first else 0,
                }
            )
    inflight = {t: hooks.inflight(group, t) for t in topics} if hooks.inflight is not None else {}
    clients = [c for c in (hooks.clients() if hooks.clients is not None else []) if c.get("group") == group]
    return {"group": group, "queues": out, "lag": sum(r["lag"] for r in out), "inflight": inflight,
            "clients": clients, "topics": topics}  # fmt: skip


def reset_offset(store, source, hooks, form: dict) -> str:
    """resetOffsetByTime / kafka-consumer-groups --reset-offsets: to a time, an offset, the earliest or the latest,
    each queue's offset clamped to its range."""
    _check_writable(source)
    group = (form.get("group") or "").strip()
    problem = group_problem(group)
    if problem:
        raise BadInput(problem)
    topic = require_topic(store, form.get("topic"))
    to = form.get("to") or ""
    ids = queue_ids(store, topic)
    queue_text = (form.get("queue") or "").strip()
    if queue_text:
        q = parse_int(queue_text, "queue", 0, max(len(ids) - 1, 0))
        if q not in ids:
            raise BadInput(f"topic {topic} has no queue {q}")
        ids = [q]
    when = offset = None
    if to == "time":
        when = parse_time(form.get("value"), "time")
    elif to == "offset":
        offset = parse_int(form.get("value"), "offset")
    elif to not in ("earliest", "latest"):
        raise BadInput("choose where to reset to: earliest, latest, a time or an offset")
    new = {}
    for q in ids:
        lo, hi = max(store.min_offset(topic, q), 0), store.max_offset(topic, q)
        if to == "earliest":
            new[q] = lo
        elif to == "latest":
            new[q] = hi
        elif to == "offset":
            new[q] = min(max(offset, lo), hi)
        else:
            new[q] = store.offset_by_time(topic, q, when)
    if hooks.reset is not None:
        hooks.reset(group, topic, new)
    else:
        store.consumer_offsets.commit(group, topic, new)
    shown = ", ".join(f"{q}: {o}" for q, o in sorted(new.items()))
    return f"reset {group} on {topic} to {to}: {shown}"


# ---------------------------------------------------------------- messages
def _summary(m) -> dict:
    return {
        "offset": m.physical_offset,
        "msg_id": m.msg_id,
        "uniq": m.properties.get(P.UNIQ_KEY, ""),
        "topic": m.topic,
        "queue": m.queue_id,
        "queue_offset": m.queue_offset,
        "tags": m.tags or "",
        "key_text": " ".join(m.keys),
        "size": m.size,
        "store_time": iso(m.store_timestamp),
    }


def search(store, form: dict) -> dict:
    """One of: topic + key, msgId (an offset id or a client's UNIQ_KEY), topic + queue + offset, topic + time range."""
    by = form.get("by") or ""
    found = []
    if by == "key":
        topic = require_topic(store, form.get("topic"))
        key = (form.get("key") or "").strip()
        if not key:
            raise BadInput("the key is missing")
        found = list(store.query(topic, key, SEARCH_LIMIT))
    elif by == "id":
        found = by_id(store, form.get("msg_id"))
    elif by == "offset":
        topic = require_topic(store, form.get("topic"))
        q = parse_int(form.get("queue"), "queue", 0, 2**31 - 1)
        if q not in store.topics().get(topic, []):
            raise BadInput(f"topic {topic} has no queue {q}")
        off = parse_int(form.get("offset"), "offset")
        lo, hi = max(store.min_offset(topic, q), 0), store.max_offset(topic, q)
        if not lo <= off < hi:
            raise BadInput(f"queue {q} of {topic} holds offsets {lo} to {hi - 1}, not {off}")
        found = _range(store, topic, q, off, off + 1)
    elif by == "time":
        topic = require_topic(store, form.get("topic"))
        begin = parse_time(form.get("begin"), "begin")
        end = parse_time(form.get("end"), "end")
        if end < begin:
            raise BadInput("the end is before the begin")
        for q in store.topics().get(topic, []):
            lo = store.offset_by_time(topic, q, begin, "lower")
            hi = store.offset_by_time(topic, q, end, "upper") + 1
            found += [m for m in _range(store, topic, q, lo, hi) if begin <= m.store_timestamp <= end]
            if len(found) >= SEARCH_LIMIT:
                break
        found.sort(key=lambda m: m.store_timestamp)
    else:
        raise BadInput("choose a search: by key, by message id, by queue offset or by time range")
    rows = [_summary(m) for m in found[:SEARCH_LIMIT]]
    return {"rows": rows, "more": len(found) > SEARCH_LIMIT}


def _range(store, topic: str, q: int, lo: int, hi: int) -> list:
    out = []
    for off in range(max(lo, 0), min(hi, lo + SEARCH_LIMIT)):
        u = store.queue_unit(topic, q, off)
        if u is None:
            continue
        m = store.look(u[0])
        if m is not None:
            out.append(m)
    return out


def by_id(store, text) -> list:
    msg_id = (text or "").strip()
    if not msg_id:
        raise BadInput("the message id is missing")
    if any(c not in "0123456789abcdefABCDEF" for c in msg_id):
        raise BadInput(f"{msg_id!r} is no message id: an id is hexadecimal (an offset msgId or a client's id)")
    found = []
    if len(msg_id) in (32, 56):  # an offset msgId (store host + physical offset)
        try:
            m = store.by_msg_id(msg_id)
        except RocketStoreError:
            m = None
        if m is not None and m.msg_id.upper() == msg_id.upper():  # not a client id that happens to decode
            found.append(m)
    if not found:  # a client's id (UNIQ_KEY), in any topic
        for topic in store.topics():
            m = store.by_unique_key(topic, msg_id.upper())
            if m is not None:
                found.append(m)
    return sorted(found, key=lambda m: m.physical_offset)  # a client id: its copies in retry / DLQ topics too


def message_detail(store, hooks, offset_text) -> dict:
    offset = parse_int(offset_text, "offset")
    m = store.look(offset)
    if m is None:
        raise BadInput(f"no message starts at physical offset {offset}")
    body = bytes(m.body or b"")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    uniq = m.properties.get(P.UNIQ_KEY) or ""
    segment, in_segment = store.commitlog_position(offset)
    return {
        "m": _summary(m),
        "properties": sorted(m.properties.items()),
        "text": text,
        "hex": body.hex(" ", 1) if len(body) <= 65536 else body[:65536].hex(" ", 1) + " ...",
        "base64": base64.b64encode(body).decode(),
        "body_size": len(body),
        "born_time": iso(m.born_timestamp),
        "born_host": m.born_host,
        "store_host": m.store_host,
        "reconsume_times": m.reconsume_times,
        "segment": os.path.relpath(segment, store.root),
        "in_segment": in_segment,
        "trace": trace(store, m, uniq),
        "is_dlq": m.topic.startswith(DLQ_PREFIX),
    }


def trace(store, m, uniq: str) -> list[dict]:
    """Which groups consumed the message (their committed offset past it), its retries and whether it reached a
    dead-letter queue (copies in %RETRY% and %DLQ% topics found by its UNIQ_KEY through the index)."""
    out = []
    for group, topics in sorted(store.consumer_offsets.groups().items()):
        if m.topic in topics:
            committed = store.consumer_offsets.query(group, m.topic, m.queue_id)
            out.append(
                {
                    "group": group,
                    "what": "consumed" if committed > m.queue_offset else "not consumed yet",
                    "detail": f"committed offset {committed} of queue {m.queue_id}",
                }
            )
    if not uniq:
        return out
    copies_found = []
    for topic in sorted(store.topics()):
        if not (topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX)) or topic == m.topic:
            continue
        copies = list(store.query(topic, uniq, SEARCH_LIMIT))
        if not copies:
            continue
        dlq = topic.startswith(DLQ_PREFIX)
        group = topic[len(DLQ_PREFIX if dlq else RETRY_PREFIX) :]
        for c in copies:
            copies_found.append(
                {
                    "group": group,
                    "what": "reached the dead-letter queue" if dlq else f"retried (attempt {c.reconsume_times})",
                    "detail": f"{topic} at {iso(c.store_timestamp)}",
                    "offset": c.physical_offset,
                }
            )
    return out + sorted(copies_found, key=lambda t: t["offset"])  # in the order they were stored


_DROPPED = {"RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "RECONSUME_TIME",
            "MAX_OFFSET", "MIN_OFFSET", "REAL_TOPIC", "REAL_QID", "DELAY", "CLUSTER", "WAIT"}  # fmt: skip


def resend(store, source, form: dict) -> str:
    """A dead-letter message put again into the topic it first came from (its RETRY_TOPIC / DLQ_ORIGIN_TOPIC
    property), with its body, tags, keys, client id and user properties."""
    _check_writable(source)
    offset = parse_int(form.get("offset"), "offset")
    m = store.look(offset)
    if m is None:
        raise BadInput(f"no message starts at physical offset {offset}")
    if not m.topic.startswith(DLQ_PREFIX):
        raise BadInput(f"the message is in {m.topic}, not in a dead-letter queue (%DLQ%...)")
    props = m.properties
    target = props.get("DLQ_ORIGIN_TOPIC") or props.get("RETRY_TOPIC") or ""
    if not target or target.startswith(RETRY_PREFIX) or target.startswith(DLQ_PREFIX):
        raise BadInput("the message names no topic it came from (no RETRY_TOPIC or DLQ_ORIGIN_TOPIC property)")
    kept = {k: v for k, v in props.items() if k not in _DROPPED and (k not in STRING_HASH_SET or k == P.UNIQ_KEY)}
    r = store.put(Message(target, bytes(m.body or b""), tags=m.tags, keys=m.keys or None, properties=kept))
    if r.status.name != "PUT_OK":
        raise BadInput(f"the store refused the message: {r.status.name} ({r.reason})")
    return f"resent to {target}: queue {r.queue_id}, offset {r.queue_offset}, msgId {r.msg_id}"


# ---------------------------------------------------------------- health
def health(store, source) -> dict:
    root = store.root
    return {
        "engine": engine.describe(),
        "read_only": not source.writable,
        "abort_file": os.path.exists(os.path.join(root, "abort")),
        "writeable": store.writeable,
        "disk_full": store.disk_full,
        "flush_behind": store.flush_behind_bytes,
        "dispatch_behind": store.dispatch_behind_bytes,
        "min_physical_offset": store.min_physical_offset,
        "max_physical_offset": store.max_physical_offset,
    }


VERIFY_PARTS = {"all": "", "commitlog": "commitlog", "consumequeue": "consumequeue", "index": "index"}


def run_verify(root: str, config, part: str, limit_text, begin_text=None, end_text=None) -> dict:
    """verify's findings (the whole store checked read-only), shown for one part of it (the CommitLog, the queues,
    the index, or all), within a range of CommitLog offsets if one is given (the findings that name a physical
    offset: records, and the units and index entries pointing at them), up to `limit`."""
    from ..maintenance.verify import verify_store

    if part not in VERIFY_PARTS:
        raise BadInput(f"part must be one of {', '.join(VERIFY_PARTS)}, not {part!r}")
    limit = parse_int(limit_text or "100", "limit", 1, 10000)
    begin = parse_int(begin_text, "from offset") if (begin_text or "").strip() else None
    end = parse_int(end_text, "to offset") if (end_text or "").strip() else None
    if begin is not None and end is not None and end <= begin:
        raise BadInput(f"the range's end ({end}) must be past its start ({begin})")
    started = time.monotonic()
    report = verify_store(root, config)
    prefix = VERIFY_PARTS[part]
    problems = [p for p in report.get("problems", []) if str(p.get("file", "")).startswith(prefix)]
    if begin is not None or end is not None:
        lo, hi = begin or 0, end if end is not None else JAVA_LONG_MAX

        def within(p) -> bool:
            phys = p.get("physicalOffset")
            return isinstance(phys, int) and lo <= phys < hi

        problems = [p for p in problems if within(p)]
    return {
        "ok": not problems,
        "range": ""
        if begin is None and end is None
        else f"CommitLog offsets {begin or 0} to {end if end is not None else 'the end'}",
        "part": part,
        "problems": problems[:limit],
        "more": max(len(problems) - limit, 0),
        "checked": report.get("checked", {}),
        "notes": report.get("notes", []),
        "seconds": round(time.monotonic() - started, 2),
    }
