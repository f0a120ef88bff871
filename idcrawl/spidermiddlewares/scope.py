"""``IdScopeMiddleware``: crawl scope in a crawl: page targets, outlinks, hops.

A job file with crawl scope (:mod:`idcrawl.core.scope`) turns it on; a plain id crawl does not build it.
It starts the runtime's URL queue (:meth:`idcrawl.runtime.IdRuntime.start_url_queue`; the scheduler takes
its URLs from the runtime), seeds the page targets' pages, offers the in-scope links of the pages of the
walk to the queue, and holds a found page until its items are written (the worker's ``hold_page``).
docs/scope.md says how it behaves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.http import TextResponse
from scrapy.linkextractors import LinkExtractor

from idcrawl.config import config_of
from idcrawl.core.clock import Clock
from idcrawl.core.lanes import Outcome
from idcrawl.core.scope import Harvest, JobScope, UrlRecord, canonical
from idcrawl.core.sitemaps import SitemapUrl
from idcrawl.core.urlqueue import QueueState, Reconciled, UrlQueue
from idcrawl.requests import CONDITIONAL_KEY, RedirectedAsLink
from idcrawl.runtime import META_KEY, PROFILE_STATS, READ_KEY, SCOPE_KEY, STATS_PREFIX, IdRuntime, start_runtime
from idcrawl.sitemaps import SITEMAP_STATS, reader_of, seed_urls, wanted_sitemaps

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

__all__ = ["SCOPE_KEY", "IdScopeMiddleware"]

#: The stats of one crawl profile (``idcrawl.runtime.PROFILE_STATS``).
PREFIX = PROFILE_STATS
#: The stats of the stored URLs reconciled with the job file at a run's start: ``.../dropped/<cause>``,
#: ``forgotten``, ``reowned``, ``postponed``, ``released``, ``requeued``, ``due``, ``not_due``, ``started``.
SCOPE_STATS = f"{STATS_PREFIX}/scope"


class IdScopeMiddleware:
    """Follows the outlinks of a job's hop-0 pages in the scope of its crawl profiles."""

    def __init__(self, crawler: Crawler, runtime: IdRuntime) -> None:
        self.crawler = crawler
        self.runtime = runtime
        self.scope: JobScope = runtime.scope
        stats = crawler.stats
        assert stats is not None
        self.stats = stats
        self.clock: Clock = runtime.clock
        self.links = LinkExtractor()
        self.missing_statuses = frozenset(config_of(crawler).missing_statuses)
        self._count_reconciled(runtime.start_url_queue())
        wanted = wanted_sitemaps(self.scope)  # sitemaps as seeds: the crawler's one reader (idcrawl.sitemaps)
        self.sitemaps = reader_of(crawler) if wanted else None
        if self.sitemaps is not None:
            self.sitemaps.subscribe(wanted, self._sitemap_urls)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdScopeMiddleware:
        runtime = start_runtime(crawler)
        if runtime is None or not runtime.scope:
            raise NotConfigured("no crawl scope: the job file has no page target and no target with crawl profiles")
        return cls(crawler, runtime)

    @property
    def queue(self) -> UrlQueue:
        """The runtime's URL queue (the worker's: in memory with the state, or a fleet's in Redis)."""
        queue = self.runtime.url_queue
        assert queue is not None  # the crawl has scope
        return queue

    def next_wave(self) -> None:
        """Watch mode (``idcrawl.extensions.watch``): a new wave starts, a run of the state with a new
        worker, and of its URL queue: the stored URLs are checked again as at a run's start (revisits due
        queued, URLs that failed queued again: ``idcrawl/scope/...``). A fleet's worker gives the wave a
        new queue, reconciled by the worker that starts the wave's run. The watch then has the sitemaps
        read again (the crawler's one reader)."""
        self._count_reconciled(self.runtime.start_url_queue())

    def _count_reconciled(self, reconciled: Reconciled) -> None:
        """The stored URLs reconciled with the job file at the run's start (``idcrawl/scope/...``)."""
        for cause, count in reconciled.dropped.items():
            self.stats.set_value(f"{SCOPE_STATS}/dropped/{cause}", count)
        for what in ("forgotten", "reowned", "postponed", "released", "requeued", "due", "not_due", "started"):
            count = getattr(reconciled, what)
            if count:
                self.stats.set_value(f"{SCOPE_STATS}/{what}", count)

    # -- requests --------------------------------------------------------------------------

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The page targets' pages are queued first (hop 0), then the spider's own start requests and items."""
        now = self.clock.now()
        for name in self.scope.pages:
            entry = self.queue.seed(name, self.scope.seed_url(name), now)
            if entry is not None:
                self._count(entry.record, entry.state.value)
        self._wake()
        for request in self.sitemaps.requests() if self.sitemaps is not None else ():
            yield request  # the crawler's one reading of the run's sitemaps, if no other component asked first
        async for request_or_item in start:
            yield request_or_item

    def _sitemap_urls(self, owner: str, profiles: list[str] | None, urls: list[SitemapUrl]) -> None:
        """A sitemap's entries for ``owner``: queued as its hop-0 pages in its scope, and its harvested pages
        with a newer ``lastmod`` queued again (``seed_urls``)."""
        ids = self.runtime.targets
        done = seed_urls(self.queue, self.scope, owner, urls, self.clock.now(), profiles,
                         skip=lambda url: any(t.id_of(url) is not None for t in ids))
        for entry in done.queued:
            self._count(entry.record, entry.state.value)
        for what, count in (("seeded", len(done.queued)), ("due", len(done.due)), ("out_of_scope", done.out_of_scope)):
            if count:
                self.stats.inc_value(f"{SITEMAP_STATS}/{what}", count)
        self._wake()

    def _count(self, record: UrlRecord, what: str) -> None:
        for name in record.crawl_profiles:
            self.stats.inc_value(f"{PREFIX}/{name}/{what}")

    def _wake(self) -> None:
        if self.queue.ready():
            self.runtime.wake_engine()

    # -- responses -------------------------------------------------------------------------

    def failed(self, failure: Failure) -> None:
        """A page of the walk answered with an error status or failed (``IdSeqSpider.outlink_failure``):
        its not-found counter (a status the target's rule calls missing: 404, 410 by default) or its
        error counter goes up (``.../not_found``, ``.../errors``); a later run fetches it again."""
        request = getattr(failure, "request", None)
        info = request.meta.get(SCOPE_KEY) if request is not None else None
        if info is None or isinstance(failure.value, RedirectedAsLink):
            return  # a redirect not followed: recorded when it was decided (redirect)
        response = getattr(failure.value, "response", None)
        self._failed(info["url"], response.status if response is not None else None, self.clock.now())

    def _failed(self, url: str, status: int | None, now: float) -> None:
        """``url`` answered ``status`` outside 2xx (None: no answer): its not-found counter (a status the
        target's rule calls missing) or its error counter goes up, counted per crawl profile."""
        missing = status is not None and status in self.missing_statuses
        entry = self.queue.failed(url, Harvest.NOT_FOUND if missing else Harvest.ERROR, now)
        if entry is not None:
            self._count(entry.record, "not_found" if missing else "errors")

    def process_spider_input(self, response: Response, spider: Any = None) -> None:
        """An outlink's response: its meta gets the queue's current record (the spider's item shows it)."""
        info = response.meta.get(SCOPE_KEY)
        if info is not None:
            entry = self.queue.get(info["url"])
            if entry is not None:
                record = entry.record
                info.update(owner=record.owner, hops=record.hops.hops, offsite_hops=record.hops.offsite,
                            crawl_profiles=list(record.crawl_profiles))

    def process_spider_output(self, response: Response, result: Iterable[Any], spider: Any = None) -> Iterator[Any]:
        if SCOPE_KEY in response.meta:  # a page of the walk: its outputs first, held until written
            outputs = list(result)
            self._follow(response, outputs)
            yield from outputs
            return
        yield from result
        self._follow(response)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        # spider: passed by Scrapy before 2.19 (2.19 passes it only when a method requires it)
        if SCOPE_KEY in response.meta:
            outputs = [request_or_item async for request_or_item in result]
            self._follow(response, outputs)
            for request_or_item in outputs:
                yield request_or_item
            return
        async for request_or_item in result:
            yield request_or_item
        self._follow(response)

    def _links(self, response: Response, owner: str | None) -> list[str]:
        """The canonical links of ``response`` (a page of ``owner``), its crawl profiles' canonicalisation
        rules applied; those every crawl profile's trap rules refuse are counted (``.../traps/<rule>``)."""
        if not isinstance(response, TextResponse):
            return []
        rules = self.scope.canonical_for(owner)
        links = [rules.apply(canonical(link.url)) for link in self.links.extract_links(response)]
        if owner is not None:
            for link in links:
                trap = self.scope.trap_of(owner, link)
                if trap is not None:
                    self.stats.inc_value(f"{SCOPE_STATS}/traps/{trap}")
        return links

    # -- redirects -------------------------------------------------------------------------

    def redirect(self, requested: str, location: str) -> str | None:
        """A page of the walk, ``requested``, answered with a redirect to ``location`` (``IdRedirectsMiddleware``
        asks before the redirected request leaves): a redirect is a link. Its target passes the scope rules
        and the URL queue's dedup (:meth:`idcrawl.core.urlqueue.UrlQueue.redirected`); its canonical URL:
        follow it (queued just now and taken for this request), None: not (``.../redirects/<what>``:
        ``out_of_scope``; ``known``: queued, taken or harvested already, or an id page, fetched once;
        ``postponed``: queued for a later run, its crawl profiles deactivated)."""
        entry = self.queue.get(requested)
        if entry is None:
            return None
        owner = entry.record.owner
        target = self.scope.canonical_for(owner).apply(canonical(location))
        if target == requested:  # http://h:80/a -> http://h/a and the like: the same URL
            return target
        before = self.queue.get(target)
        claimed = self.queue.redirected(requested, target, self.clock.now(), hop=self.scope.redirect_hops(owner))
        if claimed is not None:
            what = "followed"
            self._count(claimed.record, "queued")
        else:
            id_page = self.runtime.id_page_of()
            if before is not None or (id_page is not None and id_page(target)):
                what = "known"  # queued, taken or harvested already, or an id page (its lanes fetch it)
            else:
                after = self.queue.get(target)
                what = ("out_of_scope" if after is None else
                        "postponed" if after.state is QueueState.POSTPONED else "known")  # another worker took it
        self.stats.inc_value(f"{SCOPE_STATS}/redirects/{what}")
        self._wake()
        return target if claimed is not None else None

    def _hold(self, url: str, info: dict[str, Any], response: Response, outputs: list[Any], now: float) -> bool:
        """Whether the found page ``url`` stays taken until its items in ``outputs`` are written (the
        worker's acknowledgement path, as found ids: ``hold_page``); then the worker harvests it."""
        owner = info.get("owner")
        if not isinstance(owner, str):
            return False
        queue = self.queue

        read = response.meta.get(READ_KEY)

        def harvest() -> None:
            queue.written(url, now, read)

        shown = (response.meta.get("redirect_urls") or [response.url])[0]  # the items' url (IdSeqSpider)
        return self.runtime.worker.hold_page(owner, shown, outputs, harvest)

    def _follow(self, response: Response, outputs: list[Any] | None = None) -> None:
        """The in-scope links of ``response``, if it is a hop-0 page or an outlink, offered to the queue;
        ``outputs``: a page of the walk's (its harvest waits for their items to be written)."""
        info = response.meta.get(SCOPE_KEY)
        seed_of = None
        hold = False
        read = None
        stored: tuple[str, ...] | None = None  # a 304's links: those of its last found harvest
        now = self.clock.now()
        if info is not None:
            url = info["url"]
            entry = self.queue.get(url)
            if entry is None:
                return
            if (response.status == 304 and response.meta.get(CONDITIONAL_KEY) and info.get("checksum") is not None
                    and entry.links is not None):
                stored = entry.links  # not modified: harvested as found, its signature and capture stay
                self._count(entry.record, "not_modified")
            elif not 200 <= response.status < 300:  # its errback counted it, unless the spider took the status
                if entry.state is QueueState.TAKEN:
                    self._failed(url, response.status, now)
                return
            if entry.record.hops.hops:
                self._count(entry.record, "fetched")
            read = response.meta.get(READ_KEY)
            hold = outputs is not None and self._hold(url, info, response, outputs, now)
        else:
            lane = response.meta.get(META_KEY)
            if lane is None or "id" not in lane:
                return  # not a page of the walk (a site spider's own request, a probe)
            seed = self.scope.seeds.get(lane["target"])
            if seed is None or not seed.crawl_profiles:
                return
            spider: Any = self.crawler.spider
            if spider.classify(response) is not Outcome.FOUND:
                return
            url, seed_of = canonical(response.url), seed.name
        owner = info.get("owner") if info is not None else seed_of
        links = list(stored) if stored is not None else self._links(response, owner if isinstance(owner, str) else None)
        for queued in self.queue.fetched(url, links, now, seed_of=seed_of, hold=hold, read=read):
            self._count(queued.record, queued.state.value)
        self._wake()
