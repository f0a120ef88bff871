"""A small local site whose pages are addressed by numeric ids, with gaps.

It serves the demo job (README command 1) and the behaviour tests: pages at
``/notice/{id}``, 404 for ids that do not exist, a request log that tests
read, and hooks to script statuses and delays per id. The same notices are at
``/register/{id}`` too, where an id that does not exist answers 200 with a
"could not be found" page (a soft 404: the recorded-page tests judge the
soft-404 rules on it). It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import html
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["DemoModel", "IdSite", "LoggedRequest", "Reply", "serve"]


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    at: float  # time.monotonic() when the request arrived
    host: str  # the Host header, without port
    path: str
    id: int | None
    status: int


class DemoModel:
    """Which ids exist: ``low..high`` minus a deterministic ~8% of gaps.

    Gaps are at most ``max_gap`` long inside the range, so a margin above it
    walks the whole range and stops just past its ends.
    """

    def __init__(self, low: int = 10_000, high: int = 14_999, gap_percent: int = 8, max_gap: int = 4) -> None:
        self.low, self.high, self.gap_percent, self.max_gap = low, high, gap_percent, max_gap

    def exists(self, id_: int) -> bool:
        if not self.low <= id_ <= self.high:
            return False
        if (id_ * 2654435761) % 100 >= self.gap_percent:
            return True
        # keep gap runs short: an id that would extend a run past max_gap exists
        run = 0
        for previous in range(id_ - 1, max(self.low, id_ - self.max_gap) - 1, -1):
            if (previous * 2654435761) % 100 >= self.gap_percent:
                break
            run += 1
        return run >= self.max_gap

    def page(self, id_: int) -> bytes:
        title = f"Procurement notice {id_}"
        value = (id_ * 7919) % 1_000_000
        return (
            "<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title></head><body>"
            f"<h1 class='title'>{html.escape(title)}</h1>"
            f"<dl><dt>Agency</dt><dd class='agency'>Agency {id_ % 37}</dd>"
            f"<dt>Value</dt><dd class='value'>{value}</dd>"
            f"<dt>Published</dt><dd class='published'>2026-{id_ % 12 + 1:02d}-{id_ % 28 + 1:02d}</dd></dl>"
            "</body></html>"
        ).encode()

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        """The answer to the ``nth`` request (1-based) for ``id_``: override to script faults."""
        if self.exists(id_):
            return Reply(200, self.page(id_), (("Content-Type", "text/html; charset=utf-8"),))
        return Reply(404, b"<html><body><h1>Not found</h1></body></html>", (("Content-Type", "text/html"),))

    def reply_to(self, id_: int, host: str, nth: int, headers: Mapping[str, str]) -> Reply:
        """The answer given the request's headers (``If-None-Match``, ...): :meth:`reply` unless overridden."""
        return self.reply(id_, host, nth)

    def soft_reply(self, id_: int, host: str, nth: int) -> Reply:
        """The answer at the soft-404 prefix: a notice, or 200 with a "could not be found" page."""
        reply = self.reply(id_, host, nth)
        if reply.status != 404:
            return reply
        body = (
            "<!doctype html><html><head><meta charset='utf-8'><title>Register</title></head><body>"
            f"<h1 class='notice-missing'>Notice {id_} could not be found</h1>"
            "<p>Check the number and try again, or search the register.</p></body></html>"
        ).encode()
        return Reply(200, body, (("Content-Type", "text/html; charset=utf-8"),))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms stalls
    server: IdSite

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_GET(self) -> None:
        site = self.server
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        path = self.path.split("?", 1)[0]
        id_: int | None = None
        if path == "/robots.txt":
            reply = Reply(200, site.robots_txt.encode(), (("Content-Type", "text/plain"),))
        else:
            prefix, _, last = path.rstrip("/").rpartition("/")
            try:
                id_ = int(last)
            except ValueError:
                id_ = None
            if id_ is None or prefix not in (site.prefix, site.soft_prefix):
                reply = Reply(404, b"no such page")
            else:
                reply = site.answer(id_, host, soft=prefix == site.soft_prefix, headers=dict(self.headers.items()))
        site.record(LoggedRequest(time.monotonic(), host, path, id_, reply.status))
        if reply.delay:
            time.sleep(reply.delay)
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)


class IdSite(ThreadingHTTPServer):
    """The HTTP server; ``log`` lists every request in arrival order."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # the default 5 overflows: dropped SYNs cost a 1 s retransmit

    def __init__(
        self,
        model: DemoModel | None = None,
        *,
        port: int = 0,
        prefix: str = "/notice",
        soft_prefix: str = "/register",
        robots_txt: str = "User-agent: *\nDisallow:\n",
        on_request: Callable[[LoggedRequest], None] | None = None,
    ) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.model = model or DemoModel()
        self.prefix = prefix
        self.soft_prefix = soft_prefix  # the same ids, a soft 404 for those that do not exist
        self.robots_txt = robots_txt
        self.on_request = on_request
        self.log: list[LoggedRequest] = []
        self._counts: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer (a crawler killed or closed) is no error of the site's."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, host: str = "127.0.0.1") -> str:
        """The id template on this site, e.g. ``http://127.0.0.1:PORT/notice/{id}``."""
        return f"http://{host}:{self.port}{self.prefix}/{{id}}"

    def soft_url(self, host: str = "127.0.0.1") -> str:
        """The id template of the soft-404 prefix, e.g. ``http://127.0.0.1:PORT/register/{id}``."""
        return f"http://{host}:{self.port}{self.soft_prefix}/{{id}}"

    def answer(self, id_: int, host: str, *, soft: bool = False, headers: Mapping[str, str] | None = None) -> Reply:
        with self._lock:
            nth = self._counts[(host, id_)] = self._counts.get((host, id_), 0) + 1
        if soft:
            return self.model.soft_reply(id_, host, nth)
        return self.model.reply_to(id_, host, nth, headers or {})

    def record(self, entry: LoggedRequest) -> None:
        with self._lock:
            self.log.append(entry)
        if self.on_request is not None:
            self.on_request(entry)

    def ids(self, host: str | None = None) -> list[int]:
        """Ids requested (page requests only), in arrival order."""
        return [e.id for e in self.log if e.id is not None and (host is None or e.host == host)]

    def start(self) -> IdSite:
        self._thread = threading.Thread(target=self.serve_forever, name="idsite", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def __enter__(self) -> IdSite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(model: DemoModel | None = None, **kwargs: Any) -> IdSite:
    """Start a site in a background thread and return it."""
    return IdSite(model, **kwargs).start()
