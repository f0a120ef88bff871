"""``IdWarcMiddleware``: every fetch of a crawl with ``IDCRAWL_WARC_DIR`` as WARC records.

A downloader middleware next to the downloader (it sees the body as received, before decompression):
a ``request`` and a ``response`` record per fetch (robots.txt and sitemaps too), or a ``revisit``
record for a 304 / a body whose payload digest is the stored capture's; :func:`flush_archive` is
called with the feeds' flush before each commit. docs/recrawl.md ("WARC output").
"""

from __future__ import annotations

import base64
import hashlib
import logging
from datetime import UTC, datetime
from http import HTTPStatus
from importlib.metadata import version
from io import BytesIO
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import __version__ as scrapy_version
from scrapy import signals
from scrapy.exceptions import NotConfigured
from warcio.statusandheaders import StatusAndHeaders

from idcrawl.archive.files import ARCHIVES, WarcFiles
from idcrawl.config import config_of
from idcrawl.runtime import META_KEY, SCOPE_KEY, STATS_PREFIX, runtime_of
from idcrawl.storage import report_storage_error, storage_problem

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from idcrawl.core.recrawl import Schedule

__all__ = ["CAPTURE_KEY", "IDENTICAL", "NOT_MODIFIED", "IdWarcMiddleware", "payload_digest", "url_capture", "warc_date"]

logger = logging.getLogger(__name__)

#: ``response.meta`` key: ``(uri, WARC-Date, payload digest)`` of the response record just written
#: (a full capture, which the page record keeps); absent when a revisit record was written.
CAPTURE_KEY = "idcrawl_warc_capture"
#: The WARC-Profile URIs of the two revisit kinds (WARC 1.1).
NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
IDENTICAL = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"

_STATS = f"{STATS_PREFIX}/warc"


def payload_digest(body: bytes) -> str:
    """A WARC payload digest: ``sha1:`` and the base 32 SHA-1 of the body (warcio's form)."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")  # noqa: S324 - WARC's digest


def warc_date(moment: datetime | None = None) -> str:
    """A WARC-Date (WARC 1.1: microseconds), UTC."""
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _header_lines(headers: Any) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    for name, values in headers.items():
        key = name.decode("latin-1")
        if key.lower() == "transfer-encoding":  # the body is stored de-chunked: say how it came
            key = "X-Archive-Orig-Transfer-Encoding"
        lines.extend((key, value.decode("latin-1")) for value in values)
    return lines


def _from_cache(response: Response) -> bool:
    """A response Scrapy's HTTP cache served (``HTTPCACHE_ENABLED``): archived when it was fetched, not again."""
    return "cached" in response.flags


def url_capture(request: Request) -> tuple[str, str, str] | None:
    """A crawl-scope page's stored capture, as the URL queue handed it out with its request
    (:func:`idcrawl.requests.outlink_request`); None: not such a page, or none stored."""
    info = request.meta.get(SCOPE_KEY)
    capture = info.get("capture") if isinstance(info, dict) else None
    if not isinstance(capture, (list, tuple)) or len(capture) != 3 or not (capture[0] and capture[1]):
        return None
    return (str(capture[0]), str(capture[1]), str(capture[2]))


class IdWarcMiddleware:
    """Writes the WARC records of every download (on when ``IDCRAWL_WARC_DIR`` is set)."""

    def __init__(self, crawler: Crawler, folder: str) -> None:
        from idcrawl import __version__

        config = config_of(crawler)
        self.crawler = crawler
        spider_name = getattr(crawler.spidercls, "name", None) or "crawl"
        self.job = config.redis_job or spider_name
        info = {
            "software": f"idcrawl/{__version__} Scrapy/{scrapy_version} warcio/{version('warcio')}",
            "format": "WARC File Format 1.1",
            "isPartOf": self.job,
            "profile": config.profile or "",
            "robots": "obey" if crawler.settings.getbool("ROBOTSTXT_OBEY") else "ignore",
        }
        self.files = WarcFiles(folder, self.job, info, config.warc_max_size)
        self._sync_captures: bool | None = None  # the worker's answer (:meth:`sync_captures`), once asked
        ARCHIVES[crawler] = self.files
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdWarcMiddleware:
        folder = config_of(crawler).warc_dir
        if not folder:
            raise NotConfigured
        return cls(crawler, folder)

    def spider_opened(self) -> None:
        for path, cut in self.files.open():
            self._inc("repaired")
            logger.info("idcrawl: WARC file %s finished (a killed run left it; %d bytes cut)", path.name, cut)

    def spider_closed(self) -> None:
        try:
            self.files.close()  # the last file finished, every finished file's index written
        except OSError as exc:
            report_storage_error(self.crawler, self.files.path or self.files.folder, storage_problem(exc) or str(exc))
        ARCHIVES.pop(self.crawler, None)
        stats = self.crawler.stats
        if stats is not None:
            stats.set_value(f"{_STATS}/files", len(self.files.finished))
            stats.set_value(f"{_STATS}/bytes", self.files.bytes)

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"{_STATS}/{key}")

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        if _from_cache(response):
            self._inc("cached")
            return response
        try:
            self._write(request, response)
        except OSError as exc:
            problem = storage_problem(exc)
            if problem is None:
                raise
            report_storage_error(self.crawler, self.files.path or self.files.folder, problem)
        return response

    def sync_captures(self) -> bool:
        """Whether each new capture of an id page is flushed and fsync'd at once: the worker records page
        records (which name their capture) with their outcome, not at a checkpoint after the feeds' flush
        (:attr:`idcrawl.worker.Worker.records_pages_at_once`); asked once the crawl's worker exists."""
        if self._sync_captures is None:
            runtime = runtime_of(self.crawler)
            try:
                self._sync_captures = runtime is not None and runtime.worker.records_pages_at_once
            except RuntimeError:  # not started: nothing is recorded yet
                return False
        return self._sync_captures

    def _stored(self, request: Request) -> Schedule | None:
        """The page record of a lane request's id (its stored capture), if the crawl keeps page records."""
        info = request.meta.get(META_KEY)
        runtime = runtime_of(self.crawler)
        try:
            pages = runtime.pages if runtime is not None else None
        except RuntimeError:  # not started: no page records yet
            return None
        if pages is None or not isinstance(info, dict) or "id" not in info:
            return None
        return pages.get(info["target"], info["id"])

    def _capture(self, request: Request) -> tuple[str, str, str] | None:
        """The stored capture ``(uri, WARC-Date, payload digest)`` a revisit record would refer to: an id
        page's (its page record), or a crawl-scope page's (its URL record's, in the request's meta)."""
        stored = self._stored(request)
        if stored is not None:
            if stored.capture_uri and stored.capture_date:
                return (stored.capture_uri, stored.capture_date, stored.capture_digest or "")
            return None
        return url_capture(request)

    def _write(self, request: Request, response: Response) -> None:
        writer = self.files.current()
        date = warc_date()
        uri = response.url
        body = response.body
        digest = payload_digest(body)
        ip = getattr(response, "ip_address", None)
        common = {"WARC-Date": date}
        if ip is not None:
            common["WARC-IP-Address"] = str(ip)
        try:
            phrase = HTTPStatus(response.status).phrase
        except ValueError:
            phrase = ""
        protocol = response.protocol or "HTTP/1.1"
        http = StatusAndHeaders(f"{response.status} {phrase}".strip(), _header_lines(response.headers),
                                protocol=protocol.upper())
        stored = self._capture(request)
        refers = None
        if stored is not None:
            if response.status == 304:
                refers = NOT_MODIFIED
            elif response.status == 200 and stored[2] == digest:
                refers = IDENTICAL
        if refers is not None:
            assert stored is not None
            # a 304's payload is the stored capture's; an identical body's is its own (the same digest)
            headers = {**common, "WARC-Profile": refers, "WARC-Refers-To-Target-URI": stored[0],
                       "WARC-Refers-To-Date": stored[1], "WARC-Payload-Digest": stored[2] or digest}
            # A 304's revisit has no HTTP block: a wayback replays a block with a 3xx status line as that
            # status with no body (pywb), instead of the stored capture it stands for.
            main = writer.create_warc_record(uri, "revisit", http_headers=None if refers == NOT_MODIFIED else http,
                                             warc_headers_dict=headers)
            self._inc("revisit/" + ("not_modified" if refers == NOT_MODIFIED else "identical"))
        else:
            main = writer.create_warc_record(uri, "response", payload=BytesIO(body), length=len(body),
                                             http_headers=http, warc_headers_dict={**common,
                                                                                   "WARC-Payload-Digest": digest})
            if response.status == 200:
                request.meta[CAPTURE_KEY] = (uri, date, digest)  # response.meta, once tied
            self._inc("response")
        record_id = main.rec_headers.get_header("WARC-Record-ID")
        self.files.write(self._request_record(request, uri, date, record_id), main)
        self._inc("request")
        new_capture = refers is None and (isinstance(request.meta.get(META_KEY), dict) or SCOPE_KEY in request.meta)
        if new_capture and self.sync_captures():
            self.files.flush()  # a new capture, which its page (or URL) record names once recorded

    def _request_record(self, request: Request, uri: str, date: str, concurrent: str) -> Any:
        parts = urlsplit(request.url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = _header_lines(request.headers)
        if not any(name.lower() == "host" for name, _ in lines):
            lines.insert(0, ("Host", parts.netloc))
        http = StatusAndHeaders(f"{request.method} {target} HTTP/1.1", lines, is_http_request=True)
        body = request.body or b""
        writer = self.files.current()
        return writer.create_warc_record(request.url, "request", payload=BytesIO(body), length=len(body),
                                         http_headers=http,
                                         warc_headers_dict={"WARC-Date": date, "WARC-Concurrent-To": concurrent})
