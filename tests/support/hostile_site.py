"""A local site that misbehaves on purpose: huge bodies, a huge robots.txt, slow-loris pages, redirects.

Pages are at ``/notice/{id}`` for ids in ``ids``; others answer 404. ``paths`` logs every request.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["MIB", "HostileSite"]

MIB = 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: HostileSite

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        site = self.server
        path = self.path.split("?", 1)[0]
        with site.lock:
            site.paths.append(path)
        try:
            if path == "/robots.txt":
                self._robots()
                return
            prefix, _, last = path.rpartition("/")
            id_ = int(last) if prefix == "/notice" and last.isdigit() else None
            if id_ is None or id_ not in site.ids:
                self._send(404, b"not found")
            elif id_ in site.redirects:
                self.send_response(302)
                self.send_header("Location", site.redirects[id_])
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif id_ in site.slow and not site.healed.is_set():
                self._trickle(id_)
            elif id_ in site.big:
                self._big(site.big[id_])
            else:
                self._send(200, f"<html><body><h1>Notice {id_}</h1></body></html>".encode())
        except (BrokenPipeError, ConnectionResetError):
            return  # the crawler gave up on the answer

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html" if status != 200 or body[:1] == b"<" else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _robots(self) -> None:
        """``robots``, then ``robots_filler`` bytes of comment lines, then ``robots_tail``: written as it goes."""
        site = self.server
        line = b"# " + b"x" * 97 + b"\n"
        lines = site.robots_filler // len(line)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(site.robots) + lines * len(line) + len(site.robots_tail)))
        self.end_headers()
        self.wfile.write(site.robots)
        block = line * 10_000
        for start in range(0, lines, 10_000):
            self.wfile.write(block if lines - start >= 10_000 else line * (lines - start))
        self.wfile.write(site.robots_tail)

    def _big(self, mode: str) -> None:
        """A body of ``big_size`` bytes: with its Content-Length ("length") or without, ended by closing ("stream")."""
        site = self.server
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if mode == "length":
            self.send_header("Content-Length", str(site.big_size))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        chunk = b"x" * MIB
        for _ in range(site.big_size // MIB):
            self.wfile.write(chunk)

    def _trickle(self, id_: int) -> None:
        """Headers at once, then one byte a second for ``trickle_seconds`` (a slow-loris answer)."""
        site = self.server
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(site.trickle_seconds))
        self.end_headers()
        self.wfile.flush()
        site.trickling.set()
        for _ in range(site.trickle_seconds):
            self.wfile.write(b"x")
            self.wfile.flush()
            if site.healed.wait(1.0):
                return


class HostileSite(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(
        self, ids: range, *, big: dict[int, str] | None = None, big_size: int = 64 * MIB, slow: set[int] | None = None,
        trickle_seconds: int = 120, redirects: dict[int, str] | None = None,
        robots: bytes = b"User-agent: *\nDisallow:\n", robots_filler: int = 0, robots_tail: bytes = b"",
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.ids, self.big, self.big_size = ids, big or {}, big_size
        self.slow, self.trickle_seconds = slow or set(), trickle_seconds
        self.redirects, self.robots = redirects or {}, robots
        self.robots_filler, self.robots_tail = robots_filler, robots_tail
        self.paths: list[str] = []
        self.lock = threading.Lock()
        self.trickling = threading.Event()  # a slow answer has started
        self.healed = threading.Event()  # set: slow ids answer at once
        self._thread: threading.Thread | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A crawler that went away mid-answer (it cancelled or closed) is no error of the site's."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)

    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/notice/{{id}}"

    def start(self) -> HostileSite:
        self._thread = threading.Thread(target=self.serve_forever, name="hostile-site", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.healed.set()
        self.shutdown()
        self.server_close()

    def __enter__(self) -> HostileSite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
