"""``IdRobotsTxtMiddleware``: Scrapy's RobotsTxtMiddleware, with every waiting request checked.

In Scrapy 2.19 the requests of a host that arrive while its robots.txt is
still downloading all await one Deferred through ``maybe_deferred_to_future``.
Twisted hands the parser to the first of them only; the others get ``None``,
which the middleware reads as "no robots.txt", so they are fetched unchecked
(an id crawl dispenses a window of ids at once: up to
``CONCURRENT_REQUESTS_PER_DOMAIN`` disallowed pages could be fetched). Once
the Deferred has fired the middleware's own table holds the parser (or
``None`` after a download error), so a waiter that got ``None`` reads it
from there. Everything else, including the ``IgnoreRequest("Forbidden by
robots.txt")`` that idcrawl counts as ``disallowed``, is Scrapy's.

The project settings swap it in for Scrapy's (same order, 100); drop it once
Scrapy hands the parser to every waiter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.utils.httpobj import urlparse_cached

from idcrawl._scrapy import robots_parser

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.robotstxt import RobotParser

__all__ = ["IdRobotsTxtMiddleware"]


class IdRobotsTxtMiddleware(RobotsTxtMiddleware):
    async def robot_parser(self, request: Request) -> RobotParser | None:
        parser = await super().robot_parser(request)
        if parser is None:
            return robots_parser(self, urlparse_cached(request).netloc)
        return parser
