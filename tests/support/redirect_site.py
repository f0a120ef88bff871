"""A link-graph site with redirects, for the crawl-scope rules tests (issue 30: redirects, canonical URLs, traps).

:class:`RedirectSite` serves, on one port of 127.0.0.1, an HTML page per ``(host, path?query)`` of its
``graph`` (links written as the graph gives them, the server's port added to those without one) and a
``302`` per entry of ``redirects`` (page -> the URL its ``Location`` names). Every request is logged.
Host names reach it through ``tests.support.linkgraph.resolver_settings`` (the product's resolver).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["RedirectSite"]


class RedirectSite:
    def __init__(self, graph: Mapping[str, Sequence[str]], redirects: Mapping[str, str] | None = None) -> None:
        self.graph = {k: list(v) for k, v in graph.items()}
        self.redirects = dict(redirects or {})
        self.log: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                host = (self.headers.get("Host") or "").split(":")[0].lower()
                with site._lock:
                    site.log.append((host, self.path))
                page = f"http://{host}{self.path}"
                if page in site.redirects:
                    self.send_response(302)
                    self.send_header("Location", site.url(site.redirects[page]))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if page not in site.graph:
                    self._reply(404, b"<html><body>no such page</body></html>")
                    return
                links = "".join(f'<a href="{site.url(link)}">{link}</a>\n' for link in site.graph[page])
                self._reply(200, f"<html><body><h1>{page}</h1>\n{links}</body></html>".encode())

            def _reply(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> RedirectSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def url(self, page: str) -> str:
        """The address of ``page`` (``http://HOST/PATH``; one with a port of its own is kept) on this server."""
        parts = urlsplit(page)
        if parts.port is not None:
            return page
        return urlunsplit((parts.scheme, f"{parts.hostname}:{self.port}", parts.path, parts.query, parts.fragment))

    def fetched(self, host: str) -> list[str]:
        """The paths requested on ``host``, in order (robots.txt left out)."""
        with self._lock:
            return [path for h, path in self.log if h == host and path != "/robots.txt"]
