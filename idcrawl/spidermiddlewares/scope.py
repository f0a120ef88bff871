"""``IdScopeMiddleware``: crawl scope in a crawl (seed 003): page targets, outlinks, hops.

A job file with crawl scope (``[[crawl_profiles]]``, a target's ``crawl_profiles``, page targets:
:mod:`idcrawl.core.scope`) turns this spider middleware on; a plain id crawl has no scope, and the
middleware is not built (``NotConfigured``): its hot path is untouched. What it does:

- it opens the job's URL queue (:mod:`idcrawl.core.urlqueue`): with a SQLite state, the URLs the
  earlier runs stored, reconciled with the current job file (deleted targets, crawl profiles and
  collections drop or hand over their URLs, deactivated ones postpone them; ``idcrawl/scope/...``
  stats); without state, in memory. Its changes are committed with the state's checkpoints;
- its page targets' pages are queued at hop 0 (once: a page harvested in an earlier run is not);
- the found pages of an id target with crawl profiles are hop 0 too;
- the links of a hop-0 page or an outlink page (Scrapy's ``LinkExtractor``, canonicalised by
  w3lib) are offered to the queue: a link in the scope of at least one crawl profile of the page's
  target (its owner) is queued once, with the shortest hops known (or postponed);
- a link to an id page of an id target (an id within its ``min``/``max``) is left to that target's
  lanes: they fetch it, or decide not to (past a cut), and it is never fetched twice;
- a found page of the walk is harvested only once its items are written: its links are offered
  at once, but it stays taken until the worker's acknowledgement path (``hold_page``: the state
  recorder's checkpoint in one process, the acknowledgement of a Redis worker, after the feeds'
  flush) says its items are on disk, so a killed crawl's page is fetched again, never lost.

The queue is not Scrapy's: ``IdScheduler`` takes its URLs host by host when a host has room
(:meth:`IdScopeMiddleware.next_request`), so the yield model decides at dispatch. The outlink
requests' callbacks are spider methods (``IdSeqSpider.outlink_response`` and
``outlink_failure``: Scrapy serialises callbacks by name), which yield what
``IdSeqSpider.parse_outlink`` makes of the page. robots.txt and politeness apply to them as to any
request; the dupefilter does not (the queue keeps each URL once, and fetches a missing page again
in a later run). A worker may bring its own queue (``make_url_queue(scope, rng, skip, postpone_for)``,
a distributed job's shared one).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.http import TextResponse
from scrapy.linkextractors import LinkExtractor

from idcrawl import default_settings
from idcrawl.core.clock import Clock
from idcrawl.core.lanes import Outcome
from idcrawl.core.scope import Harvest, JobScope, UrlRecord, canonical
from idcrawl.core.urlqueue import MemoryUrlQueue, QueueState, Reconciled, UrlQueue
from idcrawl.runtime import META_KEY, STATS_PREFIX, runtime_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Iterator

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure

    from idcrawl.core.targets import Target
    from idcrawl.state.base import StateStore

__all__ = ["SCOPE_KEY", "IdScopeMiddleware"]

#: ``request.meta`` key of a page target's or an outlink's request: its canonical URL, then (set when
#: its response arrives) ``owner``, ``hops``, ``offsite_hops`` and ``crawl_profiles`` as the walk knows them.
SCOPE_KEY = "idcrawl_scope"
#: The stats of one crawl profile: ``.../<name>/queued``, ``fetched``, ``postponed``, ``not_found``, ``errors``,
#: ``revisits``.
PREFIX = f"{STATS_PREFIX}/crawl_profiles"
#: The stats of the stored URLs reconciled with the job file at a run's start: ``.../dropped/<cause>``,
#: ``forgotten``, ``reowned``, ``postponed``, ``released``, ``requeued``, ``due``, ``not_due``, ``started``.
SCOPE_STATS = f"{STATS_PREFIX}/scope"


def _queue_settings(settings: BaseSettings) -> tuple[random.Random, float]:
    """The URL queue's yield draws (``IDCRAWL_SCOPE_SEED``) and postponement (``IDCRAWL_SCOPE_POSTPONE``)."""
    return (random.Random(settings.getint("IDCRAWL_SCOPE_SEED", default_settings.IDCRAWL_SCOPE_SEED)),
            settings.getfloat("IDCRAWL_SCOPE_POSTPONE", default_settings.IDCRAWL_SCOPE_POSTPONE))


class IdScopeMiddleware:
    """Follows the outlinks of a job's hop-0 pages in the scope of its crawl profiles."""

    def __init__(self, crawler: Crawler, scope: JobScope, targets: Iterable[Target] = (),
                 queue: UrlQueue | None = None, store: StateStore | None = None, clock: Clock | None = None) -> None:
        """``queue``: the URL queue (None: a new one, in memory, with the URLs ``store`` keeps); ``clock``:
        the crawl's one clock (None: one from ``IDCRAWL_NOW``)."""
        self.crawler = crawler
        self.scope = scope
        stats = crawler.stats
        assert stats is not None
        self.stats = stats
        settings = crawler.settings
        self.clock = clock if clock is not None else Clock.from_setting(settings.get("IDCRAWL_NOW"))
        self.links = LinkExtractor()
        self.missing_statuses = frozenset(
            int(status) for status in settings.getlist("IDCRAWL_MISSING_STATUSES",
                                                       default_settings.IDCRAWL_MISSING_STATUSES))
        #: a link to an id page of an id target is theirs (never fetched twice)
        skip = self._id_page_of(targets)
        if queue is None:
            rng, postpone_for = _queue_settings(settings)
            stored = store.load_urls() if store is not None else ()
            queue = MemoryUrlQueue(stored, rng=rng, skip=skip, postpone_for=postpone_for)
        self.queue: UrlQueue = queue
        self._commits: tuple[list[Callable[[], None]], Callable[[], None]] | None = None  # (recorder's list, hook)
        self._count_reconciled(queue.start(scope, self.clock.now()))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdScopeMiddleware:
        runtime = runtime_of(crawler)
        if runtime is None or not runtime.scope:
            raise NotConfigured("no crawl scope: the job file has no page target and no target with crawl profiles")
        worker: Any = runtime.worker
        settings = crawler.settings
        make = getattr(worker, "make_url_queue", None)
        if make is not None:  # the worker's own queue (a distributed job's, shared)
            rng, postpone_for = _queue_settings(settings)
            queue = make(runtime.scope, rng, cls._id_page_of(runtime.targets), postpone_for)
            return cls(crawler, runtime.scope, runtime.targets, queue, clock=runtime.clock)
        recorder = getattr(worker, "recorder", None)
        store = recorder.store if recorder is not None and recorder.store.keeps_urls else None
        middleware = cls(crawler, runtime.scope, runtime.targets, store=store, clock=runtime.clock)
        middleware._commit_with(recorder)
        return middleware

    def _commit_with(self, recorder: Any) -> None:
        """The queue's changes are committed at the checkpoints of ``recorder`` (the worker's state
        recorder; None: no state, or a queue that is not kept in memory), and no longer at an earlier one's."""
        if self._commits is not None:
            hooks, hook = self._commits
            hooks.remove(hook)
            self._commits = None
        store = recorder.store if recorder is not None and recorder.store.keeps_urls else None
        queue = self.queue
        if store is None or not isinstance(queue, MemoryUrlQueue):
            return

        def commit() -> None:
            store.commit_urls(*queue.changes())

        recorder.also_commit.append(commit)
        self._commits = (recorder.also_commit, commit)

    def next_wave(self, worker: Any) -> None:
        """Watch mode (``idcrawl.extensions.watch``): a new wave starts, a run of the state with a new
        ``worker``: the stored URLs are checked again as at a run's start (revisits due queued, URLs
        that failed queued again: ``idcrawl/scope/...``), and the queue commits with the new recorder. A
        worker that brings its own queue (a fleet's: each wave a worker and a run of the fleet of its own)
        gives the wave a new one, reconciled by the worker that starts the wave's run."""
        make = getattr(worker, "make_url_queue", None)
        if make is not None:
            runtime = runtime_of(self.crawler)
            rng, postpone_for = _queue_settings(self.crawler.settings)
            rng = getattr(self.queue, "rng", rng)  # the draws go on from the last wave's
            self.queue = make(self.scope, rng, self._id_page_of(runtime.targets if runtime else ()), postpone_for)
        self._count_reconciled(self.queue.start(self.scope, self.clock.now()))
        self._commit_with(getattr(worker, "recorder", None))

    @staticmethod
    def _id_page_of(targets: Iterable[Target]) -> Callable[[str], bool] | None:
        """Is a URL the page of an id (in its bounds) of one of the id ``targets``? Its lanes fetch it,
        or decide not to. None: there are none."""
        id_targets = list(targets)
        if not id_targets:
            return None
        return lambda url: any(target.id_of(url) is not None for target in id_targets)

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
            entry = self.queue.seed(name, canonical(self.scope.seeds[name].url), now)
            if entry is not None:
                self._count(entry.record, entry.state.value)
        self._wake()
        async for request_or_item in start:
            yield request_or_item

    def next_request(self, room: Callable[[str], bool]) -> Request | None:
        """The request of the next URL of the queue on a host that ``room(host)`` admits (the scheduler asks)."""
        record = self.queue.take(room, self.clock.now())
        if record is None:
            return None
        if record.last_harvest is not None and not (record.not_found or record.errors):
            self._count(record, "revisits")  # found before: its revisit came due
        spider: Any = self.crawler.spider
        return Request(record.url, callback=spider.outlink_response, errback=spider.outlink_failure,
                       dont_filter=True, meta={SCOPE_KEY: {"url": record.url}})

    def _count(self, record: UrlRecord, what: str) -> None:
        for name in record.crawl_profiles:
            self.stats.inc_value(f"{PREFIX}/{name}/{what}")

    def _wake(self) -> None:
        if self.queue.ready():
            runtime = runtime_of(self.crawler)
            if runtime is not None:
                runtime.wake_engine()

    # -- responses -------------------------------------------------------------------------

    def failed(self, failure: Failure) -> None:
        """A page of the walk answered with an error status or failed (``IdSeqSpider.outlink_failure``):
        its not-found counter (a status the target's rule calls missing: 404, 410 by default) or its
        error counter goes up (``.../not_found``, ``.../errors``); a later run fetches it again."""
        request = getattr(failure, "request", None)
        info = request.meta.get(SCOPE_KEY) if request is not None else None
        if info is None:
            return
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

    def _hold(self, url: str, info: dict[str, Any], response: Response, outputs: list[Any], now: float) -> bool:
        """Whether the found page ``url`` stays taken until its items in ``outputs`` are written (the
        worker's acknowledgement path, as found ids: ``hold_page``); then the worker harvests it."""
        owner = info.get("owner")
        runtime = runtime_of(self.crawler)
        hold_page = getattr(runtime.worker, "hold_page", None) if runtime is not None else None
        if not isinstance(owner, str) or hold_page is None:
            return False
        queue = self.queue
        return bool(hold_page(owner, response.url, outputs, lambda: queue.written(url, now)))

    def _follow(self, response: Response, outputs: list[Any] | None = None) -> None:
        """The in-scope links of ``response``, if it is a hop-0 page or an outlink, offered to the queue;
        ``outputs``: a page of the walk's (its harvest waits for their items to be written)."""
        info = response.meta.get(SCOPE_KEY)
        seed_of = None
        hold = False
        now = self.clock.now()
        if info is not None:
            url = info["url"]
            entry = self.queue.get(url)
            if entry is None:
                return
            if not 200 <= response.status < 300:  # its errback counted it, unless the spider took the status
                if entry.state is QueueState.TAKEN:
                    self._failed(url, response.status, now)
                return
            if entry.record.hops.hops:
                self._count(entry.record, "fetched")
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
        links = ([canonical(link.url) for link in self.links.extract_links(response)]
                 if isinstance(response, TextResponse) else [])
        for queued in self.queue.fetched(url, links, now, seed_of=seed_of, hold=hold):
            self._count(queued.record, queued.state.value)
        self._wake()
