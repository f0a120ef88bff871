"""``IdRobotsTxtMiddleware``: Scrapy's RobotsTxtMiddleware, with every waiting request checked.

It also caps a robots.txt at ``IDCRAWL_ROBOTSTXT_MAXSIZE`` bytes. Why: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import StopDownload
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

__all__ = ["IdRobotsTxtMiddleware"]


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
        if self.maxsize:
            crawler.signals.connect(self._bytes_received, signal=signals.bytes_received)

    async def process_request(self, request: Request, spider: Any = None) -> None:
        if self.maxsize and _is_robots_request(request):
            request.meta[_RECEIVED_KEY] = 0
            request.meta["download_maxsize"] = 0  # the cap stops it, whatever its Content-Length says
            request.meta["download_warnsize"] = 0
            return
        await super().process_request(request)

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

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Response:
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
