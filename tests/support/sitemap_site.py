"""A test site with sitemaps: robots.txt ``Sitemap:`` lines, a sitemap index, a gzip sitemap, ``lastmod``,
``priority`` and ``changefreq`` (docs/scope.md "Sitemaps").

:class:`SitemapSite` serves, on a free port of 127.0.0.1, the HTML pages of a link graph (path -> linked
paths) and any file put with :meth:`SitemapSite.put`; every request's path is logged. :func:`urlset` and
:func:`sitemap_index` write the XML, :func:`gzipped` compresses it.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["SitemapSite", "gzipped", "sitemap_index", "urlset"]

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(entries: Iterable[Mapping[str, Any]]) -> bytes:
    """A ``<urlset>``: each entry's ``loc`` and, when given, ``lastmod``, ``changefreq``, ``priority``."""
    rows = []
    for entry in entries:
        fields = "".join(f"<{key}>{entry[key]}</{key}>" for key in ("loc", "lastmod", "changefreq", "priority")
                         if key in entry)
        rows.append(f"<url>{fields}</url>")
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="{NS}">{"".join(rows)}</urlset>'.encode()


def sitemap_index(locs: Sequence[str]) -> bytes:
    rows = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="{NS}">{rows}</sitemapindex>'.encode()


def gzipped(body: bytes) -> bytes:
    return gzip.compress(body, mtime=0)


class SitemapSite:
    """Pages of ``graph`` (path -> the paths it links to) as HTML, and files :meth:`put` there; on ``port``
    (0: a free one; binding 80 needs root, :class:`OSError` when it cannot)."""

    def __init__(self, graph: Mapping[str, Sequence[str]], port: int = 0) -> None:
        self.files: dict[str, tuple[int, str, bytes]] = {}
        self.later: dict[str, list[tuple[int, str, bytes]]] = {}
        self.log: list[str] = []
        self._lock = threading.Lock()
        self.held: set[str] = set()  # paths whose requests wait while the gate is closed (hold, release)
        self.gate = threading.Event()
        self.gate.set()
        for path, links in graph.items():
            anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
            self.files[path] = (200, "text/html", f"<html><body>{path} {anchors}</body></html>".encode())
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path in site.held:
                    assert site.gate.wait(120), "the gate was never opened"
                with site._lock:
                    site.log.append(self.path)
                    later = site.later.get(self.path)
                    if later and site.log.count(self.path) > 1:
                        site.files[self.path] = later.pop(0)  # its next version, from its second request on
                    status, kind, body = site.files.get(self.path, (404, "text/html", b"<html>no</html>"))
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def put(self, path: str, body: bytes, content_type: str = "application/xml", status: int = 200) -> None:
        with self._lock:
            self.files[path] = (status, content_type, body)

    def then(self, path: str, body: bytes, content_type: str = "application/xml") -> None:
        """``path`` answers ``body`` from its next request on (one more version each call)."""
        with self._lock:
            self.later.setdefault(path, []).append((200, content_type, body))

    def hold(self, *paths: str) -> None:
        """Requests of ``paths`` wait from now until :meth:`release`."""
        self.held.update(paths)
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()

    def fetched(self) -> list[str]:
        with self._lock:
            return list(self.log)

    def start(self) -> SitemapSite:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
