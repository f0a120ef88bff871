"""``IdRobotsTxtMiddleware``: Scrapy's RobotsTxtMiddleware, with every waiting request checked.

It also caps a robots.txt at ``IDCRAWL_ROBOTSTXT_MAXSIZE`` bytes, and answers the sitemap reader's
robots.txt request (``SHARED_ROBOTS_KEY``) from its own one fetch per site. Why: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.httpobj import urlparse_cached

from idcrawl._scrapy import robots_parser
from idcrawl.config import config_of
from idcrawl.core.safetext import safe
from idcrawl.runtime import STATS_PREFIX

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.robotstxt import RobotParser

logger = logging.getLogger(__name__)

#: ``request.meta`` key of a robots.txt download under the cap: the bytes received so far.
_RECEIVED_KEY = "idcrawl_robotstxt_received"

#: ``request.meta`` key of a request for a site's robots.txt whose body someone else reads (the sitemap
#: reader, :mod:`idcrawl.sitemaps`): answered from the middleware's own fetch of it (one per site).
SHARED_ROBOTS_KEY = "idcrawl_robots_shared"

__all__ = ["SHARED_ROBOTS_KEY", "IdRobotsTxtMiddleware"]


def _is_robots_request(request: Request) -> bool:
    """The robots.txt download Scrapy's middleware makes itself (no callback, not checked against robots.txt)."""
    return (
        request.callback is NO_CALLBACK
        and bool(request.meta.get("dont_obey_robotstxt"))
        and urlparse_cached(request).path == "/robots.txt"
    )


class IdRobotsTxtMiddleware(RobotsTxtMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = crawler.settings
        self.maxsize = config_of(crawler).robotstxt_maxsize
        self.download_maxsize = settings.getint("DOWNLOAD_MAXSIZE")
        #: site (netloc) -> its robots.txt response (the body as obeyed), for SHARED_ROBOTS_KEY requests
        self._answers: dict[str, Response] = {}
        if self.maxsize:
            crawler.signals.connect(self._bytes_received, signal=signals.bytes_received)

    # a downloader middleware may answer a request with a response (Scrapy's documented contract); the
    # parent's annotation says None only
    async def process_request(  # type: ignore[override]
        self, request: Request, spider: Any = None,
    ) -> Response | None:
        if request.meta.get(SHARED_ROBOTS_KEY):
            return await self._shared(request)
        if self.maxsize and _is_robots_request(request):
            request.meta[_RECEIVED_KEY] = 0
            request.meta["download_maxsize"] = 0  # the cap stops it, whatever its Content-Length says
            request.meta["download_warnsize"] = 0
            return None
        await super().process_request(request)
        return None

    def _bytes_received(self, data: bytes, request: Request, spider: Any = None) -> None:
        received = request.meta.get(_RECEIVED_KEY)
        if received is None:
            return
        # the handler has read its limit: decompression (HttpCompressionMiddleware) is bounded as usual
        request.meta["download_maxsize"] = self.download_maxsize
        received += len(data)
        request.meta[_RECEIVED_KEY] = received
        if received > self.maxsize:
            raise StopDownload(fail=False)

    async def _shared(self, request: Request) -> Response:
        """A robots.txt another component reads: the one fetch of it this middleware makes (now, or made
        already for the site's first request) answers it; no robots.txt (the fetch failed): ignored."""
        await self.robot_parser(request)
        kept = self._answers.get(urlparse_cached(request).netloc)
        if kept is None:
            raise IgnoreRequest(f"robots.txt of {safe(request.url)} was not read")
        self.crawler.stats.inc_value(f"{STATS_PREFIX}/robotstxt/shared")
        return kept.replace(url=request.url, request=request)

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
        if _is_robots_request(request):
            response = self._capped(request, response)
            self._answers[urlparse_cached(request).netloc] = response
            return response
        return response

    def _capped(self, request: Request, response: Response) -> Response:
        if _RECEIVED_KEY not in request.meta or len(response.body) <= self.maxsize:
            return response
        body = response.body[: self.maxsize]
        body = body[: body.rfind(b"\n") + 1]  # the last complete line under the cap
        self.crawler.stats.inc_value(f"{STATS_PREFIX}/robotstxt/truncated")
        logger.warning(
            "idcrawl: %s is larger than IDCRAWL_ROBOTSTXT_MAXSIZE (%d bytes): only its first %d bytes are obeyed",
            safe(request.url), self.maxsize, len(body),
        )
        return response.replace(body=body)

    async def robot_parser(self, request: Request) -> RobotParser | None:
        parser = await super().robot_parser(request)
        if parser is None:
            return robots_parser(self, urlparse_cached(request).netloc)
        return parser
