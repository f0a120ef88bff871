"""``IdScopeMiddleware``: crawl scope in a crawl (seed 003): page targets, outlinks, hops.

A job file with crawl scope (``[[crawl_profiles]]``, a target's ``crawl_profiles``, page targets:
:mod:`idcrawl.core.scope`) turns this spider middleware on; a plain id crawl has no scope, and the
middleware is not built (``NotConfigured``): its hot path is untouched. What it does:

- its page targets' pages are start requests (before the spider's own), at hop 0;
- the found pages of an id target with crawl profiles are hop 0 too;
- the links of a hop-0 page or an outlink page (Scrapy's ``LinkExtractor``, canonicalised by
  w3lib) go through the job's :class:`~idcrawl.core.scope.ScopeWalk`: a link in the scope of at
  least one crawl profile of the page's target (its owner) is requested once, with the shortest
  hops known; :func:`~idcrawl.core.scope.check_dispatch` then harvests, postpones (a deactivated
  target, crawl profile or collection) or drops it;
- a link to an id page of an id target (an id within its ``min``/``max``) is left to that target's
  lanes: they fetch it, or decide not to (past a cut), and it is never fetched twice.

The outlink requests' callbacks are spider methods (``IdSeqSpider._outlink_response`` and
``_outlink_failure``: Scrapy serialises callbacks by name), which yield what
``IdSeqSpider.parse_outlink`` makes of the page. robots.txt, the dupefilter and politeness apply
to them as to any follow-up request. In this version the walk lives in the process: a postponed
URL is counted, not kept for a later run, and a distributed job does not share it (README, docs/scope.md).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http import TextResponse
from scrapy.linkextractors import LinkExtractor

from idcrawl import default_settings
from idcrawl.core.lanes import Outcome
from idcrawl.core.scope import Harvest, JobScope, ScopeWalk, UrlRecord, Verdict, canonical, check_dispatch
from idcrawl.runtime import META_KEY, STATS_PREFIX, runtime_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

    from idcrawl.core.targets import Target

__all__ = ["SCOPE_KEY", "IdScopeMiddleware"]

#: ``request.meta`` key of a page target's or an outlink's request: its canonical URL, then (set when
#: its response arrives) ``owner``, ``hops``, ``offsite_hops`` and ``crawl_profiles`` as the walk knows them.
SCOPE_KEY = "idcrawl_scope"
#: The stats of one crawl profile: ``.../<name>/queued``, ``fetched``, ``postponed``, ``dropped``,
#: ``not_found``, ``errors``.
PREFIX = f"{STATS_PREFIX}/crawl_profiles"


class IdScopeMiddleware:
    """Follows the outlinks of a job's hop-0 pages in the scope of its crawl profiles."""

    def __init__(self, crawler: Crawler, scope: JobScope, targets: Iterable[Target] = ()) -> None:
        self.crawler = crawler
        self.scope = scope
        stats = crawler.stats
        assert stats is not None
        self.stats = stats
        self.links = LinkExtractor()
        self.missing_statuses = frozenset(
            int(status) for status in crawler.settings.getlist("IDCRAWL_MISSING_STATUSES",
                                                               default_settings.IDCRAWL_MISSING_STATUSES))
        #: the id targets' templates: a link to one of their id pages is theirs (never fetched twice)
        self.id_targets = list(targets)
        self.walk = ScopeWalk(scope, skip=self._id_page if self.id_targets else None)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdScopeMiddleware:
        runtime = runtime_of(crawler)
        if runtime is None or not runtime.scope:
            raise NotConfigured("no crawl scope: the job file has no page target and no target with crawl profiles")
        return cls(crawler, runtime.scope, runtime.targets)

    def _id_page(self, url: str) -> bool:
        """Is ``url`` the page of an id (in its bounds) of an id target? Its lanes fetch it, or decide not to."""
        return any(target.id_of(url) is not None for target in self.id_targets)

    # -- requests --------------------------------------------------------------------------

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The page targets' pages first (hop 0), then the spider's own start requests and items."""
        for name in self.scope.pages:
            record = self.walk.seed(name, canonical(self.scope.seeds[name].url))
            if record is not None:
                request = self._request(record)
                if request is not None:
                    yield request
        async for request_or_item in start:
            yield request_or_item

    def _request(self, record: UrlRecord) -> Request | None:
        """The request of a URL the walk queued, after the checks at dispatch; None: postponed or dropped."""
        decision = check_dispatch(record, self.scope, time.time(), 0.0)
        if decision.verdict is Verdict.POSTPONE:
            self._count(record, "postponed")
            return None
        if decision.verdict is Verdict.DROP:
            self._count(record, "dropped")
            return None
        self._count(decision.record, "queued")
        spider: Any = self.crawler.spider
        return Request(record.url, callback=spider._outlink_response, errback=spider._outlink_failure,
                       priority=-record.hops.hops,  # nearer pages first: a breadth-first order
                       meta={SCOPE_KEY: {"url": record.url}})

    def _count(self, record: UrlRecord, what: str) -> None:
        for name in record.crawl_profiles:
            self.stats.inc_value(f"{PREFIX}/{name}/{what}")

    # -- responses -------------------------------------------------------------------------

    def failed(self, failure: Failure) -> None:
        """A page of the walk answered with an error status or failed (``IdSeqSpider._outlink_failure``):
        its not-found counter (a status the target's rule calls missing: 404, 410 by default) or its
        error counter goes up (``.../not_found``, ``.../errors``)."""
        request = getattr(failure, "request", None)
        info = request.meta.get(SCOPE_KEY) if request is not None else None
        if info is None:
            return
        response = getattr(failure.value, "response", None)
        missing = response is not None and response.status in self.missing_statuses
        record = self.walk.harvested(info["url"], Harvest.NOT_FOUND if missing else Harvest.ERROR, time.time())
        if record is not None:
            self._count(record, "not_found" if missing else "errors")

    def process_spider_input(self, response: Response, spider: Any = None) -> None:
        """An outlink's response: its meta gets the walk's current record (the spider's item shows it)."""
        info = response.meta.get(SCOPE_KEY)
        if info is not None:
            record = self.walk.record(info["url"])
            if record is not None:
                info.update(owner=record.owner, hops=record.hops.hops, offsite_hops=record.hops.offsite,
                            crawl_profiles=list(record.crawl_profiles))

    def process_spider_output(self, response: Response, result: Iterable[Any], spider: Any = None) -> Iterator[Any]:
        yield from result
        yield from self._follow(response)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        # spider: passed by Scrapy before 2.19 (2.19 passes it only when a method requires it)
        async for request_or_item in result:
            yield request_or_item
        for request in self._follow(response):
            yield request

    def _follow(self, response: Response) -> list[Request]:
        """The requests for the in-scope links of ``response``, if it is a hop-0 page or an outlink."""
        info = response.meta.get(SCOPE_KEY)
        if info is not None:
            url = info["url"]
            record = self.walk.record(url)
            if record is None or not 200 <= response.status < 300:
                return []
            self.walk.harvested(url, Harvest.FOUND, time.time())
            if record.hops.hops:
                self._count(record, "fetched")
        else:
            lane = response.meta.get(META_KEY)
            if lane is None or "id" not in lane:
                return []  # not a page of the walk (a site spider's own request, a probe)
            seed = self.scope.seeds.get(lane["target"])
            if seed is None or not seed.crawl_profiles:
                return []
            spider: Any = self.crawler.spider
            if spider.classify(response) is not Outcome.FOUND:
                return []
            url = canonical(response.url)
            self.walk.seed(seed.name, url)
        if not isinstance(response, TextResponse):
            return []
        links = [canonical(link.url) for link in self.links.extract_links(response)]
        requests = []
        for record in self.walk.fetched(url, links):
            request = self._request(record)
            if request is not None:
                requests.append(request)
        return requests
