"""``IdRedirectsMiddleware``: an id page redirected to another host is not followed.

Scrapy's redirect middlewares send a redirected request back through the
scheduler with ``redirect_urls`` in its meta; this one, placed before the
robots.txt middleware, stops a lane request whose redirect leaves the id's
host (:func:`idcrawl.core.templates.same_host`) unless its target says
``follow_redirects = "any"``. The errback records the id ``missing``
(docs/outcomes.md); no request reaches the other host, not even for its robots.txt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from idcrawl.requests import RedirectedOffsite
from idcrawl.runtime import META_KEY, runtime_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

__all__ = ["IdRedirectsMiddleware"]


class IdRedirectsMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdRedirectsMiddleware:
        return cls(crawler)

    def process_request(self, request: Request, spider: Any = None) -> None:
        info = request.meta.get(META_KEY)
        redirected = request.meta.get("redirect_urls")
        if info is None or not redirected:
            return
        runtime = runtime_of(self.crawler)
        target = runtime.frontier.targets.get(info["target"]) if runtime is not None else None
        if target is None or target.may_redirect(redirected[0], request.url):
            return
        raise RedirectedOffsite(f"redirected to another host: {request.url}")
