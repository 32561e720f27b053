"""The request log: who calls `serve`, and what, at INFO on the logger rocketstore.serve.requests
(`rocketstore serve -v`).

One line per call would drown an operator (a consumer long-polls and heartbeats all day), so:
- a line when a client first appears: its id, address, language and client version, its first call;
- every interval, one line per client that called: its calls by kind, and the answers that were not OK by
  code (the busiest clients first, at most MAX_CLIENT_LINES, then one line for the rest), after one line
  with the totals;
- a line when a client says goodbye (NotifyClientTermination), with its calls since the last summary;
- at shutdown, the last summary.
A client is its x-mq-client-id (its address when it sends none). Clients not heard of for idle_s are
forgotten (and greeted again if they come back), so the table stays as small as the set of live clients."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from ..services.service_thread import ServiceThread
from .protocol import definition_pb2 as pb

log = logging.getLogger("rocketstore.serve.requests")
MAX_CLIENT_LINES = 20


class _Caller:
    def __init__(self, peer: str, now: float):
        self.peer = peer
        self.last = now
        self.calls: Counter = Counter()  # kind -> calls since the last summary
        self.refused: dict[str, Counter] = {}  # kind -> answer code name -> calls (not OK)

    def total(self) -> int:
        return sum(self.calls.values())

    def text(self) -> str:
        parts = []
        for kind, n in self.calls.items():
            codes = self.refused.get(kind)
            parts.append(
                f"{kind} {n}" + (" (" + ", ".join(f"{c} {m}" for c, m in codes.items()) + ")" if codes else "")
            )
        return ", ".join(parts)

    def reset(self) -> None:
        self.calls.clear()
        self.refused.clear()


class RequestLog(ServiceThread):
    """The request log; its thread writes a summary every interval_s, and the last one when stopped."""

    name = "request-log"

    def __init__(self, interval_s: float = 60.0, idle_s: float = 120.0, describe=None, clock=time.monotonic):
        super().__init__()
        self.interval_s = interval_s
        self.idle_s = idle_s
        self.describe = describe or (lambda client: "")  # client id -> what it is ("PRODUCER", ...)
        self.clock = clock
        self._callers: dict[str, _Caller] = {}
        self._lock = threading.Lock()
        self._last_summary = clock()
        self.initial_delay_s = self.error_delay_s = interval_s

    @staticmethod
    def enabled() -> bool:
        return log.isEnabledFor(logging.INFO)

    def record(self, metadata, peer: str, kind: str, code: int | None = None) -> None:
        """One call of a kind (a unary call, a ReceiveMessage, a Telemetry stream opened) and its answer's
        code (None: no code, as for a stream)."""
        if not self.enabled():
            return
        md = dict(metadata or ())
        client = md.get("x-mq-client-id") or peer
        now = self.clock()
        with self._lock:
            caller = self._callers.get(client)
            first = caller is None
            if first:
                caller = self._callers[client] = _Caller(peer, now)
            caller.peer, caller.last = peer, now
            caller.calls[kind] += 1
            if code is not None and code != pb.Code.OK:
                name = pb.Code.Name(code) if code in pb.Code.values() else str(code)
                caller.refused.setdefault(kind, Counter())[name] += 1
            if kind == "NotifyClientTermination":
                del self._callers[client]
        if first:
            who = " ".join(x for x in (md.get("x-mq-language"), md.get("x-mq-client-version")) if x)
            log.info("client %s appeared from %s%s: first call %s", client, peer, f" ({who})" if who else "", kind)
        if kind == "NotifyClientTermination":
            log.info(
                "client %s left (NotifyClientTermination)%s",
                client,
                f"; calls since the last summary: {caller.text()}" if caller.total() else "",
            )

    def summarize(self) -> None:
        """The lines of one interval; the counts start again from zero."""
        now = self.clock()
        with self._lock:
            seconds = now - self._last_summary
            self._last_summary = now
            active = [(c, x) for c, x in self._callers.items() if x.calls]
            active.sort(key=lambda item: -item[1].total())
            lines = [(c, x.peer, x.text()) for c, x in active[:MAX_CLIENT_LINES]]
            rest = active[MAX_CLIENT_LINES:]
            rest_calls = sum(x.total() for _, x in rest)
            total = sum(x.total() for _, x in active)
            for _, x in active:
                x.reset()
            for c in [c for c, x in self._callers.items() if now - x.last > self.idle_s]:
                del self._callers[c]
        if not active:
            return
        log.info("requests in the last %.0f s: %d call(s) from %d client(s)", seconds, total, len(active))
        for client, peer, text in lines:
            what = self.describe(client)
            log.info("client %s (%s%s): %s", client, peer, f", {what}" if what else "", text)
        if rest:
            log.info("and %d more client(s): %d call(s)", len(rest), rest_calls)

    def start(self) -> None:
        """The summary thread, when the log is on (`rocketstore serve -v`)."""
        if self.enabled():
            super().start()

    def do_round(self) -> float:
        self.summarize()
        return self.interval_s

    def on_stop(self) -> None:
        """The last summary, at shutdown."""
        if self.enabled():
            self.summarize()


def describe_client(service):
    """What a client said it is in its Telemetry settings (service.client_settings): "PRODUCER of TopicA",
    "SIMPLE_CONSUMER of group g1"."""

    def describe(client_id: str) -> str:
        settings = service.client_settings(client_id)
        if settings is None:
            return ""
        kind = pb.ClientType.Name(settings.client_type) if settings.client_type in pb.ClientType.values() else ""
        if settings.HasField("subscription") and settings.subscription.group.name:
            return f"{kind} of group {settings.subscription.group.name}".strip()
        if settings.HasField("publishing") and settings.publishing.topics:
            return f"{kind} of {', '.join(t.name for t in settings.publishing.topics)}".strip()
        return kind

    return describe
