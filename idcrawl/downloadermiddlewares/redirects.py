"""``IdRedirectsMiddleware``: redirects of id pages and of crawl-scope pages, checked before they leave.

Scrapy's redirect middlewares send a redirected request back through the scheduler with
``redirect_urls`` in its meta; this one, placed before the robots.txt middleware, stops a lane
request whose redirect leaves the id's host unless its target says ``follow_redirects = "any"``
(the id is ``missing``, docs/outcomes.md), and treats a crawl-scope page's redirect as a link
(``IdScopeMiddleware.redirect``, docs/scope.md "Redirects"). Nothing stopped reaches the other host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from idcrawl.requests import RedirectedAsLink, RedirectedOffsite
from idcrawl.runtime import META_KEY, SCOPE_KEY, runtime_of

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
        if not redirected:
            return
        if info is None:
            self._scope_redirect(request)
            return
        runtime = runtime_of(self.crawler)
        target = runtime.frontier.targets.get(info["target"]) if runtime is not None else None
        if target is None or target.may_redirect(redirected[0], request.url):
            return
        raise RedirectedOffsite(f"redirected to another host: {request.url}")

    def _scope_redirect(self, request: Request) -> None:
        """A crawl-scope page redirected: followed only if its target was queued just now for this
        request (its meta then names the target, ``requested`` the URL first asked for)."""
        info = request.meta.get(SCOPE_KEY)
        if info is None or info.get("location") == request.url:
            return  # not a page of the walk, or this redirect was decided (a retry of it)
        from idcrawl.spidermiddlewares.scope import IdScopeMiddleware

        scope: IdScopeMiddleware | None = self.crawler.get_spider_middleware(IdScopeMiddleware)
        if scope is None:
            return
        target = scope.redirect(info["url"], request.url)
        if target is None:
            raise RedirectedAsLink(f"redirect to {request.url} not followed: a link of {info['url']}")
        # to another spelling of itself (the same canonical URL): still the page its record stored, with
        # its signature and capture; another URL: a page of its own
        kept = info if target == info["url"] else {}
        request.meta[SCOPE_KEY] = {**kept, "url": target, "location": request.url}
