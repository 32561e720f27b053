"""The HTTP side: `GET /metrics` (Prometheus' text format, prometheus_client's exposition of the broker's registry)
and the console's pages, on one port, served by a threading HTTP server of the standard library in a thread of its
own (so it shares nothing with serve's event loop but the store, which is thread-safe).

Pages are rendered on the server (jinja2, autoescaped: everything from the store shows as text); forms post
back and, sent by htmx (the HX-Request header), get the result as a fragment, else the whole page. Static files
(htmx, uPlot, the stylesheet) are the package's own: nothing loads from elsewhere. A form posted from another
origin (a page on another site) is refused."""

from __future__ import annotations

import json
import logging
import mimetypes
import os
import threading
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from jinja2 import Environment, FileSystemLoader, select_autoescape

from ..errors import RocketStoreError
from . import views as V
from .source import Hooks, Sampler

log = logging.getLogger("rocketstore.console")
HERE = os.path.dirname(os.path.abspath(__file__))
STATIC = os.path.join(HERE, "static")
MAX_FORM = 64 * 1024
PAGES = (("/", "Overview"), ("/topics", "Topics"), ("/groups", "Consumer groups"), ("/messages", "Messages"),
         ("/health", "Health"))  # fmt: skip


class Console:
    """The pages over a source (source.py), the process's hooks, and the broker's metrics registry if any."""

    def __init__(self, source, hooks: Hooks | None = None, registry=None, store_config=None):
        self.source = source
        self.hooks = hooks or Hooks()
        self.registry = registry
        self.store_config = store_config
        self.sampler = Sampler(source, self.hooks)
        self.env = Environment(
            loader=FileSystemLoader(os.path.join(HERE, "templates")),
            autoescape=select_autoescape(["html"]),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals.update(pages=PAGES, size_text=V.size_text)
        self._verify_lock = threading.Lock()

    def render(self, template: str, **context) -> str:
        return self.env.get_template(template).render(writable=self.source.writable, **context)

    # ------------------------------------------------------------------ GET
    def get(self, path: str, q: dict) -> tuple[int, str, bytes]:
        if path == "/api/rates":
            return 200, "application/json", json.dumps(self.sampler.series()).encode()
        pages = {
            "/": self.overview,
            "/topics": self.topics,
            "/topic": self.topic,
            "/groups": self.groups,
            "/group": self.group,
            "/messages": self.messages,
            "/message": self.message,
            "/health": self.health,
        }
        page = pages.get(path)
        if page is None:
            return (
                404,
                "text/html; charset=utf-8",
                self.render("error.html", status=404, error=f"no page {path}").encode(),
            )
        status, html = page(q)
        return status, "text/html; charset=utf-8", html.encode()

    def _page(self, template: str, active: str, build, q: dict, **extra) -> tuple[int, str]:
        """Render `template` with build(store) -> dict; BadInput shows on the page with status 400."""
        error = None
        data = {}
        with self.source.store() as store:
            try:
                data = build(store)
            except (V.BadInput, RocketStoreError, ValueError) as e:
                error = str(e)
        status = 400 if error else 200
        return status, self.render(template, active=active, error=error, q=q, **data, **extra)

    def overview(self, q):
        return self._page("overview.html", "/", lambda s: {"o": V.overview(s, self.hooks, self.source)}, q)

    def topics(self, q, flash=None):
        rates = self.sampler.topic_rates()
        return self._page(
            "topics.html",
            "/topics",
            lambda s: {"rows": V.topic_rows(s, rates)},
            q,
            flash=flash,
            message_types=V.MESSAGE_TYPES,
        )

    def topic(self, q, flash=None):
        return self._page(
            "topic.html", "/topics", lambda s: {"t": V.topic_detail(s, q.get("name", ""), self.hooks)}, q, flash=flash,
            message_types=V.MESSAGE_TYPES,
        )  # fmt: skip

    def groups(self, q):
        rates = self.sampler.group_rates()
        return self._page("groups.html", "/groups", lambda s: {"rows": V.group_rows(s, self.hooks, rates)}, q)

    def group(self, q, flash=None):
        return self._page(
            "group.html", "/groups", lambda s: {"g": V.group_detail(s, self.hooks, q.get("name", ""))}, q, flash=flash
        )

    def messages(self, q):
        def build(store):
            topics = sorted(store.topics())
            if not q.get("by"):
                return {"topics": topics, "result": None}
            return {"topics": topics, "result": V.search(store, q)}

        return self._page("messages.html", "/messages", build, q)

    def message(self, q, flash=None):
        return self._page(
            "message.html", "/messages", lambda s: {"d": V.message_detail(s, self.hooks, q.get("offset"))}, q,
            flash=flash, view=q.get("view", "text"),
        )  # fmt: skip

    def health(self, q):
        def build(store):
            out = {"h": V.health(store, self.source), "parts": list(V.VERIFY_PARTS), "report": None}
            if q.get("verify"):
                root = store.root
                with self._verify_lock:  # one verify at a time: it reads the whole store
                    out["report"] = V.run_verify(
                        root, self.store_config, q.get("part", "all"), q.get("limit"), q.get("from"), q.get("to")
                    )
            return out

        return self._page("health.html", "/health", build, q)

    # ------------------------------------------------------------------ POST
    def post(self, path: str, form: dict) -> tuple[int, str, str]:
        """(status, the flash text, the page to show it on) for a form."""
        actions = {
            "/topics/create": (lambda s: V.create_or_update_topic(s, self.source, form, True), "topics"),
            "/topics/update": (lambda s: V.create_or_update_topic(s, self.source, form, False), "topic"),
            "/topics/delete": (lambda s: V.delete_topic(s, self.source, form), "topics"),
            "/groups/reset": (lambda s: V.reset_offset(s, self.source, self.hooks, form), "group"),
            "/message/resend": (lambda s: V.resend(s, self.source, form), "message"),
        }
        action = actions.get(path)
        if action is None:
            return 404, f"no form {path}", "topics"
        fn, page = action
        with self.source.store() as store:
            try:
                text = fn(store)
            except (V.BadInput, RocketStoreError, ValueError, OSError) as e:
                return 400, str(e), page
        if path.startswith("/topics") and self.hooks.topic_changed is not None:
            self.hooks.topic_changed()
        return 200, text, page


class Handler(BaseHTTPRequestHandler):
    server_version = "rocketstore-console"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # the request log at DEBUG, not on stderr
        log.debug("%s %s", self.address_string(), fmt % args)

    def _send(self, status: int, ctype: str, body: bytes, extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        try:
            if url.path == "/metrics":
                self._metrics()
            elif url.path.startswith("/static/"):
                self._static(url.path[len("/static/") :])
            else:
                self._send(*self.server.console.get(url.path, q))
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # a page's bug: an error page, the server goes on
            log.exception("GET %s failed", self.path)
            self._send(500, "text/plain; charset=utf-8", f"internal error: {type(e).__name__}: {e}".encode())

    def _metrics(self):
        if self.server.registry is None:
            body = b"no metrics here: the broker's metrics are served by `rocketstore serve` (--http)\n"
            self._send(404, "text/plain; charset=utf-8", body)
            return
        from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

        with self.server.console.source.store():
            body = generate_latest(self.server.registry)
        self._send(200, CONTENT_TYPE_LATEST, body)

    def _static(self, name: str):
        path = os.path.join(STATIC, os.path.basename(name))
        if not name or "/" in name or not os.path.isfile(path):
            self._send(404, "text/plain; charset=utf-8", b"not found\n")
            return
        with open(path, "rb") as f:
            body = f.read()
        ctype = mimetypes.guess_type(path)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype.endswith("javascript"):
            ctype += "; charset=utf-8"
        self._send(200, ctype, body, {"Cache-Control": "max-age=3600"})

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        origin = self.headers.get("Origin")
        if origin and urllib.parse.urlsplit(origin).netloc != self.headers.get("Host"):
            self._send(403, "text/plain; charset=utf-8", b"a form from another origin is refused\n")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_FORM:
            self._send(413, "text/plain; charset=utf-8", b"the form is too large\n")
            return
        raw = self.rfile.read(length).decode("utf-8", "replace")
        form = {k: v[-1] for k, v in urllib.parse.parse_qs(raw, keep_blank_values=True).items()}
        try:
            status, text, page = self.server.console.post(url.path, form)
            if self.headers.get("HX-Request"):
                html = self.server.console.render("flash.html", ok=status == 200, text=text)
                self._send(status, "text/html; charset=utf-8", html.encode())
                return
            flash = {"ok": status == 200, "text": text}
            if page == "topic" and status == 200:
                _, html = self.server.console.topic({"name": form.get("name", "")}, flash)
            elif page == "group":
                _, html = self.server.console.group({"name": form.get("group", "")}, flash)
            elif page == "message":
                _, html = self.server.console.message({"offset": form.get("offset", "")}, flash)
            else:
                _, html = self.server.console.topics({}, flash)
            self._send(status, "text/html; charset=utf-8", html.encode())
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:
            log.exception("POST %s failed", self.path)
            self._send(500, "text/plain; charset=utf-8", f"internal error: {type(e).__name__}: {e}".encode())


class HttpSide:
    """The HTTP port: start() binds and serves in a thread; stop() ends it (and the console's sampler)."""

    def __init__(self, host: str, port: int, console: Console, registry=None):
        self.host, self.port = host, port
        self.console = console
        self.registry = registry
        self.httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        Server = ThreadingHTTPServer
        if ":" in self.host:
            import socket

            class Server(ThreadingHTTPServer):  # noqa: F811 (an IPv6 listen address)
                address_family = socket.AF_INET6

        self.httpd = Server((self.host, self.port), Handler)
        self.httpd.console, self.httpd.registry = self.console, self.registry
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.console.sampler.start()
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="http", daemon=True)
        self._thread.start()
        return self.port

    def stop(self) -> None:
        self.console.sampler.stop()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"


def status_phrase(code: int) -> str:
    return HTTPStatus(code).phrase
