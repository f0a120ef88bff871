"""A link-graph site for crawl-scope tests: several host names on one local server, and the resolver
that sends them to 127.0.0.1.

:class:`LinkGraphSite` serves, on one port of 127.0.0.1, one HTML page per ``(host, path)`` of its
graph, whose body links to the pages the graph lists; the ``Host`` header tells the hosts apart.
Every request is logged (host, path), ``/robots.txt`` included (404 unless ``robots`` gives one).

:func:`resolver_settings` installs the product's resolver (``idcrawl.resolver.IdResolver``): the
test hosts resolve to 127.0.0.1, and every other name fails, so a test never makes a real DNS lookup.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LinkGraphSite", "resolver_settings"]

#: the product's resolver (docs/scope.md, "Try it locally"): the test hosts only, no real DNS lookup
RESOLVER = "idcrawl.resolver.IdResolver"


def resolver_settings(hosts: Sequence[str]) -> dict[str, Any]:
    """The settings that send ``hosts`` to 127.0.0.1 and fail every other name (both names of the resolver
    setting; text, as -s passes it)."""
    return {"TWISTED_DNS_RESOLVER": RESOLVER, "DNS_RESOLVER": RESOLVER,
            "IDCRAWL_RESOLVE": ",".join(f"{host}=127.0.0.1" for host in (*hosts, "localhost")),
            "IDCRAWL_RESOLVE_ONLY": True}


class LinkGraphSite:
    """``graph``: page URL (``http://HOST/PATH``, no port) -> the URLs it links to (same form).

    ``url(page)`` gives the address a crawl requests (the server's port added); ``fetched(host)``
    the paths requested on ``host``, in order, robots.txt included.
    """

    def __init__(self, graph: Mapping[str, Sequence[str]], robots: Mapping[str, str] | None = None,
                 delay: float = 0.0, gate: threading.Event | None = None, ungated: Collection[str] = (),
                 delays: Mapping[str, float] | None = None, clock: bool = False,
                 etags: Collection[str] = ()) -> None:
        """``delay``: seconds each page takes to answer (so that a crawl can be stopped mid-way);
        ``delays``: seconds more for some pages (``http://HOST/PATH``: a response order to try);
        ``gate``: while it is clear, pages (but the ``ungated`` ones and robots.txt) are
        answered only once it is set (logged at once: a crawl held mid-way, without timing);
        ``clock``: each page says how many pages were served before it (``<p>served N</p>``), so its
        body changes at every fetch, as a page with a clock or a token in it; ``etags``: pages answered
        with an ``ETag`` (the SHA-1 of the body) and a 304 to a request whose ``If-None-Match`` is theirs
        (a set the test may change between runs: a backend that ignores validators)."""
        self.clock = clock
        self.etags = set(etags)
        self.served = 0
        self.graph = {k: list(v) for k, v in graph.items()}
        self.delay = delay
        self.delays = dict(delays or {})
        self.gate = gate
        self.ungated = frozenset(ungated)
        self.robots = dict(robots or {})
        self.log: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                host = (self.headers.get("Host") or "").split(":")[0].lower()
                with site._lock:
                    site.log.append((host, self.path))
                if self.path == "/robots.txt" and host in site.robots:
                    self._reply(200, site.robots[host].encode(), "text/plain")
                    return
                page = f"http://{host}{self.path}"
                if site.gate is not None and page not in site.ungated and self.path != "/robots.txt":
                    site.gate.wait()
                if site.delay or page in site.delays:
                    time.sleep(site.delay + site.delays.get(page, 0.0))
                if page not in site.graph:
                    self._reply(404, b"<html><body>no such page</body></html>", "text/html")
                    return
                links = "".join(f'<a href="{site.url(link)}">{link}</a>\n' for link in site.graph[page])
                if site.clock:
                    with site._lock:
                        site.served += 1
                        links += f"<p>served {site.served}</p>\n"
                body = f"<html><body><h1>{page}</h1>\n{links}</body></html>".encode()
                if page in site.etags:
                    tag = f'"{hashlib.sha1(body).hexdigest()}"'
                    if self.headers.get("If-None-Match") == tag:
                        self._reply(304, b"", "text/html", tag)
                        return
                    self._reply(200, body, "text/html", tag)
                    return
                self._reply(200, body, "text/html")

            def _reply(self, status: int, body: bytes, kind: str, etag: str | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", f"{kind}; charset=utf-8")
                if etag is not None:
                    self.send_header("ETag", etag)
                if status != 304:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> LinkGraphSite:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def url(self, page: str) -> str:
        """The address of ``page`` (``http://HOST/PATH``) on this server."""
        scheme, rest = page.split("://", 1)
        host, _, path = rest.partition("/")
        return f"{scheme}://{host}:{self.port}/{path}"

    def fetched(self, host: str) -> list[str]:
        with self._lock:
            return [path for h, path in self.log if h == host]
