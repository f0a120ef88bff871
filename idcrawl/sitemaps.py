"""Sitemaps read through Scrapy's downloader with Scrapy's own utilities, as ``SitemapSpider`` reads them.

``SitemapReader``, one per crawler (``reader_of``), makes the requests (``/robots.txt`` for its ``Sitemap:``
lines, else ``/sitemap.xml``, sitemaps named in the job file, the children of sitemap indexes; gzip up to
``DOWNLOAD_MAXSIZE``), each once, and hands each subscriber's targets (crawl scope, id targets' evidence) the
``<url>`` entries listed for them; ``seed_urls`` queues them as hop-0 pages of the target in its scope.
The rules are :mod:`idcrawl.core.sitemaps`; docs/scope.md "Sitemaps".
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.http import Request, XmlResponse
from scrapy.utils.gz import gunzip, gzip_magic_number
from scrapy.utils.sitemap import Sitemap, sitemap_urls_from_robots

from idcrawl._scrapy import DecompressionTooLarge
from idcrawl.config import config_of
from idcrawl.core.safetext import safe
from idcrawl.core.scope import SEED, JobScope, canonical
from idcrawl.core.sitemaps import SitemapSpec, SitemapUrl, by_priority, lastmod_is_news, site_sitemaps, sitemap_url
from idcrawl.core.urlqueue import QueuedUrl, QueueState, UrlQueue
from idcrawl.downloadermiddlewares.robotstxt import SHARED_ROBOTS_KEY
from idcrawl.runtime import runtime_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

__all__ = [
    "SITEMAP_KEY", "SITEMAP_STATS", "Asked", "Found", "Seeded", "SitemapReader", "Wanted", "next_wave", "reader_of",
    "seed_urls", "wanted_sitemaps",
]

logger = logging.getLogger(__name__)

#: The meta key of a sitemap request: ``{"targets": {subscriber: {target: [crawl profiles] or None (all)}}}``.
SITEMAP_KEY = "idcrawl_sitemap"
#: ``files`` (sitemaps read), ``urls`` (entries listed), ``invalid`` (not a sitemap, or too large),
#: ``failed`` (no answer, or an error status), ``over_limit`` (files or URLs past the limits); the scope
#: middleware adds ``seeded``, ``due`` and ``out_of_scope`` (:class:`Seeded`).
SITEMAP_STATS = "idcrawl/sitemaps"


@dataclass
class Wanted:
    """What one target wants: its site's sitemaps (``site``), named sitemaps (``urls``), each with the
    crawl profiles its URLs are taken for (None: all of the target's)."""

    site: dict[str, list[str] | None] = field(default_factory=dict)
    urls: dict[str, list[str] | None] = field(default_factory=dict)


def _merge(into: dict[str, list[str] | None], key: str, profiles: list[str] | None) -> None:
    if key in into:
        before = into[key]
        into[key] = None if before is None or profiles is None else sorted({*before, *profiles})
    else:
        into[key] = profiles


def wanted_sitemaps(scope: JobScope) -> dict[str, Wanted]:
    """Per target, the sitemaps whose URLs it takes as hop-0 pages: a page target's own ``sitemaps`` key
    (for all its crawl profiles) and its crawl profiles' (each for itself). An id target's own key is
    evidence for its recrawl, not seeds: only its crawl profiles' count here."""
    wanted: dict[str, Wanted] = {}
    pages = set(scope.pages)
    for name, seed in scope.seeds.items():
        specs: list[tuple[SitemapSpec | None, list[str] | None]] = [(seed.sitemaps if name in pages else None, None)]
        specs += [(scope.crawl_profiles[p].sitemaps, [p]) for p in seed.crawl_profiles if p in scope.crawl_profiles]
        for spec, profiles in specs:
            if spec is None:
                continue
            want = wanted.setdefault(name, Wanted())
            if spec.site:
                robots, _ = site_sitemaps(canonical(seed.url))  # http://h:80/ and http://h/: one site
                _merge(want.site, robots, profiles)
            for url in spec.urls:
                _merge(want.urls, url, profiles)
    return wanted


@dataclass
class Seeded:
    """What :func:`seed_urls` did: URLs ``queued`` (or postponed) as new hop-0 pages, harvested URLs
    queued again because their ``lastmod`` is newer than their last harvest (``due``), and how many
    entries no crawl profile (of those asked) has in scope (``out_of_scope``)."""

    queued: list[QueuedUrl] = field(default_factory=list)
    due: list[QueuedUrl] = field(default_factory=list)
    out_of_scope: int = 0


def seed_urls(queue: UrlQueue, scope: JobScope, owner: str, urls: Iterable[SitemapUrl], now: float,
              profiles: list[str] | None, *, skip: Callable[[str], bool] | None = None) -> Seeded:
    """Queue ``urls`` (a sitemap's entries) as hop-0 pages of ``owner``, the highest priority first:
    each one in the scope (hops aside) of one of its crawl profiles (of ``profiles``; None: any) that
    no other target holds and that no id target's lanes fetch (``skip``). A URL of ``owner`` harvested
    before its ``lastmod`` is queued again now (sitemaps as evidence: ``UrlQueue.due_now``). Each URL
    keeps the entry's ``priority`` (its yield group's draw takes the highest first)."""
    done = Seeded()
    for entry in by_priority(urls):
        url = canonical(entry.loc)
        if skip is not None and skip(url):
            continue
        names = scope.scoped(owner, url, SEED)
        if profiles is not None:
            names = tuple(n for n in names if n in profiles)
        if not names:
            done.out_of_scope += 1
            continue
        held = queue.get(url)
        if held is not None and held.record.owner != owner:
            continue  # another target's URL stays its own
        if held is not None and held.state is QueueState.HARVESTED and lastmod_is_news(
                entry.lastmod, held.record.last_harvest, now):
            again = queue.due_now(url, now)
            if again is not None:
                done.due.append(again)
            continue
        new = queue.seed(owner, url, now, priority=entry.priority)
        if new is not None and new.state is not QueueState.HARVESTED:
            done.queued.append(new)
    return done


#: What a sitemap request is for: subscriber (its index in the reader) -> target -> crawl profiles (None: all).
Asked = dict[int, dict[str, list[str] | None]]
#: A subscriber's callback: ``found(target, profiles, entries)``.
Found = Callable[[str, list[str] | None, list[SitemapUrl]], None]


def _ask(into: Asked, more: Asked) -> Asked:
    """Merge ``more`` into ``into``; return the (subscriber, target) pairs ``into`` did not ask before."""
    new: Asked = {}
    for sub, targets in more.items():
        have = into.setdefault(sub, {})
        for target, profiles in targets.items():
            if target not in have:
                new.setdefault(sub, {})[target] = profiles
            _merge(have, target, profiles)
    return new


class SitemapReader:
    """The crawler's one sitemap reader (:func:`reader_of`): fetches the sitemaps its subscribers want (the
    crawl scope's seeds, the id targets' evidence) as Scrapy requests (the downloader's politeness,
    ``ROBOTSTXT_OBEY`` and middlewares apply), each sitemap once per run or wave whoever wants it, and calls
    each subscriber's ``found(target, profiles, entries)`` with the ``<url>`` entries of each sitemap read
    for its targets (``profiles``: the crawl profiles they are for, None: all). A fleet reads them once per
    run: the worker that claims them (``Worker.claim_sitemaps``)."""

    def __init__(self, crawler: Crawler) -> None:
        config = config_of(crawler)
        self.crawler = crawler
        self.max_files = config.sitemap_max_files
        self.max_urls = config.sitemap_max_urls
        self.max_size = crawler.settings.getint("DOWNLOAD_MAXSIZE")
        self.warn_size = crawler.settings.getint("DOWNLOAD_WARNSIZE")
        self.subscribers: list[tuple[Mapping[str, Wanted], Found]] = []
        stats = crawler.stats
        assert stats is not None
        self.stats = stats
        self._files: dict[str, int] = {}  # site (netloc) -> sitemap files requested
        self._urls: dict[tuple[int, str], int] = {}  # (subscriber, target) -> URLs handed over
        self._asked: dict[str, Asked] = {}  # canonical URL requested -> what for (the request's meta: one dict)
        self._read: dict[str, tuple[str, list[Any]]] = {}  # URL read while the reading goes on: its result
        self._pending = 0  # requests of the reading not answered yet
        self._wave: int | None = None  # the run's (or watch wave's) reading requested already

    def subscribe(self, wanted: Mapping[str, Wanted], found: Found) -> None:
        """``found`` gets the entries of the sitemaps ``wanted`` (per target) names, from the next reading on."""
        if wanted:
            self.subscribers.append((wanted, found))

    # -- requests --------------------------------------------------------------------------

    def requests(self) -> list[Request]:
        """The first sitemap requests of the run (or of a watch wave), once whichever subscriber asks, if
        this process reads them (a fleet: one worker per run, ``Worker.claim_sitemaps``; the others count
        ``idcrawl/sitemaps/read_elsewhere``)."""
        runtime = runtime_of(self.crawler)
        wave = runtime.wave if runtime is not None else 0
        if wave == self._wave or not self.subscribers:
            return []
        self._wave = wave
        if runtime is not None and not runtime.worker.claim_sitemaps():
            self.stats.set_value(f"{SITEMAP_STATS}/read_elsewhere", 1)
            return []
        return self.start_requests()

    def start_requests(self) -> list[Request]:
        """The first requests of a reading (the sitemaps are read again at each run or wave, the limits
        count afresh): each site's ``/robots.txt`` (once per site) and the named sitemaps."""
        self._files.clear()
        self._urls.clear()
        self._asked.clear()
        self._read.clear()
        self._pending = 0
        robots: dict[str, Asked] = {}
        named: dict[str, Asked] = {}
        for sub, (wanted, _) in enumerate(self.subscribers):
            for target, want in wanted.items():
                for url, profiles in want.site.items():
                    _ask(robots.setdefault(url, {}), {sub: {target: profiles}})
                for url, profiles in want.urls.items():
                    _ask(named.setdefault(url, {}), {sub: {target: profiles}})
        # robots.txt: the robots.txt middleware's one fetch of it answers (ROBOTSTXT_OBEY; else fetched here)
        requests = []
        for url, asked in robots.items():
            self._asked[url] = asked
            self._pending += 1
            requests.append(Request(url, callback=self._robots, errback=self._robots_failed, dont_filter=True,
                                    meta={SITEMAP_KEY: {"targets": asked}, SHARED_ROBOTS_KEY: True}))
        for url, asked in named.items():
            requests.extend(self._sitemap_requests(url, asked))
        return requests

    def _sitemap_requests(self, url: str, asked: Asked) -> list[Request]:
        """The request of sitemap ``url`` for ``asked``; none when it is requested already this reading
        (whoever asked: it is fetched once, its entries go to every asker; one read already hands them over
        now)."""
        url = canonical(url)  # http://h:80/s.xml is http://h/s.xml: one site, one robots.txt, one fetch
        if url in self._asked:
            new = _ask(self._asked[url], asked)
            done = self._read.get(url)
            if not new or done is None:
                return []  # not read yet: its response serves the new askers too (one meta dict)
            kind, found = done
            if kind == "sitemapindex":
                return self._follow(found, new)
            self._hand_over(found, new)
            return []
        site = urlsplit(url).netloc
        if self._files.get(site, 0) >= self.max_files:
            self.stats.inc_value(f"{SITEMAP_STATS}/over_limit")
            return []
        self._files[site] = self._files.get(site, 0) + 1
        self._asked[url] = asked
        self._pending += 1
        return [Request(url, callback=self._sitemap, errback=self._failed, dont_filter=True,
                        meta={SITEMAP_KEY: {"targets": asked}})]

    def _answered(self) -> None:
        """A request of the reading is answered: once all are, what was read is let go (no one asks again)."""
        self._pending = max(0, self._pending - 1)
        if not self._pending:
            self._read.clear()

    # -- responses -------------------------------------------------------------------------

    def _robots(self, response: Response) -> list[Request]:
        """robots.txt: its ``Sitemap:`` lines, or the site's ``/sitemap.xml`` when it has none."""
        asked: Asked = response.meta[SITEMAP_KEY]["targets"]
        urls = list(sitemap_urls_from_robots(response.body, base_url=response.url))
        try:
            return self._follow(urls or [site_sitemaps(response.url)[1]], asked)
        finally:
            self._answered()

    def _robots_failed(self, failure: Failure) -> list[Request]:
        """No robots.txt: the site's ``/sitemap.xml``."""
        request = getattr(failure, "request", None)
        try:
            if request is None:
                return []
            return self._follow([site_sitemaps(request.url)[1]], request.meta[SITEMAP_KEY]["targets"])
        finally:
            self._answered()

    def _follow(self, urls: Iterable[str], asked: Asked) -> list[Request]:
        return [request for url in urls for request in self._sitemap_requests(url, asked)]

    def _failed(self, failure: Failure) -> None:
        request = getattr(failure, "request", None)
        self.stats.inc_value(f"{SITEMAP_STATS}/failed")
        logger.info("idcrawl: sitemap %s not read: %s", safe(request.url if request is not None else "?"),
                    safe(failure.getErrorMessage()))
        self._answered()

    def body(self, response: Response) -> bytes | None:
        """The sitemap in ``response`` (gzip decompressed up to ``DOWNLOAD_MAXSIZE``), as
        ``SitemapSpider._get_sitemap_body`` finds it; None: not a sitemap, or too large."""
        if isinstance(response, XmlResponse):
            return response.body
        if gzip_magic_number(response):
            try:
                body = gunzip(response.body, max_size=self.max_size)
            except DecompressionTooLarge:
                return None
            if len(response.body) < self.warn_size <= len(body):
                logger.warning("idcrawl: sitemap %s is %d bytes decompressed (DOWNLOAD_WARNSIZE %d)",
                               safe(response.url), len(body), self.warn_size)
            return body
        if response.url.endswith((".xml", ".xml.gz")):  # gunzipped by HttpCompressionMiddleware already
            return response.body
        return None

    def _sitemap(self, response: Response) -> list[Request]:
        try:
            return self._parse(response)
        finally:
            self._answered()

    def _parse(self, response: Response) -> list[Request]:
        asked: Asked = response.meta[SITEMAP_KEY]["targets"]
        body = self.body(response)
        kind = None
        if body:
            try:
                sitemap = Sitemap(body)
                kind = sitemap.type
            except Exception:  # lxml's parse errors: not a sitemap
                kind = None
        if kind not in ("sitemapindex", "urlset"):
            self.stats.inc_value(f"{SITEMAP_STATS}/invalid")
            logger.info("idcrawl: ignoring %s: not a sitemap (or over DOWNLOAD_MAXSIZE)", safe(response.url))
            return []
        self.stats.inc_value(f"{SITEMAP_STATS}/files")
        entries = list(sitemap)
        url = canonical(response.request.url if response.request is not None else response.url)
        if kind == "sitemapindex":
            children = [e["loc"] for e in entries if e.get("loc")]
            if self._pending > 1:  # kept for a later asker while the reading goes on
                self._read[url] = (kind, children)
            return self._follow(children, asked)
        listed = [u for e in entries if (u := sitemap_url(e)) is not None]
        self.stats.inc_value(f"{SITEMAP_STATS}/urls", len(listed))
        urls = by_priority(listed)
        if self._pending > 1:
            self._read[url] = (kind, urls)
        self._hand_over(urls, asked)
        return []

    def _hand_over(self, urls: list[SitemapUrl], asked: Asked) -> None:
        """A urlset's entries (highest priority first) to each subscriber's targets in ``asked``, within
        ``IDCRAWL_SITEMAP_MAX_URLS`` per target."""
        for sub, targets in asked.items():
            found = self.subscribers[sub][1]
            for target, profiles in targets.items():
                room = self.max_urls - self._urls.get((sub, target), 0)
                taken = urls[:max(room, 0)]
                if len(taken) < len(urls):
                    self.stats.inc_value(f"{SITEMAP_STATS}/over_limit", len(urls) - len(taken))
                if taken:
                    self._urls[sub, target] = self._urls.get((sub, target), 0) + len(taken)
                    found(target, profiles, taken)


#: crawler -> its one sitemap reader (:func:`reader_of`)
_READERS: weakref.WeakKeyDictionary[Crawler, SitemapReader] = weakref.WeakKeyDictionary()


def reader_of(crawler: Crawler) -> SitemapReader:
    """The crawler's one :class:`SitemapReader`, made by the first component that asks."""
    reader = _READERS.get(crawler)
    if reader is None:
        reader = _READERS[crawler] = SitemapReader(crawler)
    return reader


def next_wave(crawler: Crawler) -> None:
    """Watch mode (``idcrawl.extensions.watch``): a new wave reads the sitemaps again, once for every
    component that reads them (none: nothing to read)."""
    reader = _READERS.get(crawler)
    engine = crawler.engine
    for request in reader.requests() if reader is not None and engine is not None else ():
        engine.crawl(request)
