"""Sitemaps read through Scrapy's downloader with Scrapy's own utilities, as ``SitemapSpider`` reads them.

``SitemapReader`` makes the requests (``/robots.txt`` for its ``Sitemap:`` lines, else ``/sitemap.xml``,
sitemaps named in the job file, the children of sitemap indexes; gzip up to ``DOWNLOAD_MAXSIZE``) and
hands each target the ``<url>`` entries listed for it; ``seed_urls`` queues them as hop-0 pages of the
target in its scope. The rules are :mod:`idcrawl.core.sitemaps`; docs/scope.md "Sitemaps".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
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

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

__all__ = ["SITEMAP_KEY", "SITEMAP_STATS", "Seeded", "SitemapReader", "Wanted", "seed_urls", "wanted_sitemaps"]

logger = logging.getLogger(__name__)

#: The meta key of a sitemap request: ``{"targets": {target: [crawl profiles] or None (all)}}``.
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


class SitemapReader:
    """Fetches the sitemaps the job's targets want as Scrapy requests (the downloader's politeness,
    ``ROBOTSTXT_OBEY`` and middlewares apply) and calls ``found(target, profiles, entries)`` with the
    ``<url>`` entries of each sitemap read (``profiles``: the crawl profiles they are for, None: all)."""

    def __init__(self, crawler: Crawler, wanted: Mapping[str, Wanted],
                 found: Callable[[str, list[str] | None, list[SitemapUrl]], None]) -> None:
        config = config_of(crawler)
        self.max_files = config.sitemap_max_files
        self.max_urls = config.sitemap_max_urls
        self.max_size = crawler.settings.getint("DOWNLOAD_MAXSIZE")
        self.warn_size = crawler.settings.getint("DOWNLOAD_WARNSIZE")
        self.wanted = wanted
        self.found = found
        stats = crawler.stats
        assert stats is not None
        self.stats = stats
        self._files: dict[str, int] = {}  # site (netloc) -> sitemap files requested
        self._urls: dict[str, int] = {}  # target -> URLs handed over
        self._requested: set[str] = set()

    # -- requests --------------------------------------------------------------------------

    def start_requests(self) -> list[Request]:
        """The first requests of a run (or of a watch wave: the sitemaps are read again, the limits count
        afresh): each site's ``/robots.txt`` (once per site) and the named sitemaps."""
        self._files.clear()
        self._urls.clear()
        self._requested.clear()
        robots: dict[str, dict[str, list[str] | None]] = {}
        named: dict[str, dict[str, list[str] | None]] = {}
        for target, want in self.wanted.items():
            for url, profiles in want.site.items():
                robots.setdefault(url, {})[target] = profiles
            for url, profiles in want.urls.items():
                named.setdefault(url, {})[target] = profiles
        # robots.txt: the robots.txt middleware's one fetch of it answers (ROBOTSTXT_OBEY; else fetched here)
        requests = [Request(url, callback=self._robots, errback=self._robots_failed, dont_filter=True,
                            meta={SITEMAP_KEY: {"targets": targets}, SHARED_ROBOTS_KEY: True})
                    for url, targets in robots.items()]
        requests.extend(r for url, targets in named.items() if (r := self._sitemap_request(url, targets)))
        return requests

    def _sitemap_request(self, url: str, targets: dict[str, list[str] | None]) -> Request | None:
        url = canonical(url)  # http://h:80/s.xml is http://h/s.xml: one site, one robots.txt, one fetch
        if url in self._requested:
            return None
        site = urlsplit(url).netloc
        if self._files.get(site, 0) >= self.max_files:
            self.stats.inc_value(f"{SITEMAP_STATS}/over_limit")
            return None
        self._files[site] = self._files.get(site, 0) + 1
        self._requested.add(url)
        return Request(url, callback=self._sitemap, errback=self._failed, dont_filter=True,
                       meta={SITEMAP_KEY: {"targets": targets}})

    # -- responses -------------------------------------------------------------------------

    def _robots(self, response: Response) -> Iterator[Request]:
        """robots.txt: its ``Sitemap:`` lines, or the site's ``/sitemap.xml`` when it has none."""
        targets = response.meta[SITEMAP_KEY]["targets"]
        urls = list(sitemap_urls_from_robots(response.body, base_url=response.url))
        yield from self._follow(urls or [site_sitemaps(response.url)[1]], targets)

    def _robots_failed(self, failure: Failure) -> Iterator[Request]:
        """No robots.txt: the site's ``/sitemap.xml``."""
        request = getattr(failure, "request", None)
        if request is None:
            return
        yield from self._follow([site_sitemaps(request.url)[1]], request.meta[SITEMAP_KEY]["targets"])

    def _follow(self, urls: Iterable[str], targets: dict[str, list[str] | None]) -> Iterator[Request]:
        for url in urls:
            request = self._sitemap_request(url, targets)
            if request is not None:
                yield request

    def _failed(self, failure: Failure) -> None:
        request = getattr(failure, "request", None)
        self.stats.inc_value(f"{SITEMAP_STATS}/failed")
        logger.info("idcrawl: sitemap %s not read: %s", safe(request.url if request is not None else "?"),
                    safe(failure.getErrorMessage()))

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

    def _sitemap(self, response: Response) -> Iterator[Request]:
        targets: dict[str, list[str] | None] = response.meta[SITEMAP_KEY]["targets"]
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
            return
        self.stats.inc_value(f"{SITEMAP_STATS}/files")
        entries = list(sitemap)
        if kind == "sitemapindex":
            yield from self._follow((e["loc"] for e in entries if e.get("loc")), targets)
            return
        urls = [u for e in entries if (u := sitemap_url(e)) is not None]
        self.stats.inc_value(f"{SITEMAP_STATS}/urls", len(urls))
        for target, profiles in targets.items():
            room = self.max_urls - self._urls.get(target, 0)
            taken = by_priority(urls)[:max(room, 0)]
            if len(taken) < len(urls):
                self.stats.inc_value(f"{SITEMAP_STATS}/over_limit", len(urls) - len(taken))
            if taken:
                self._urls[target] = self._urls.get(target, 0) + len(taken)
                self.found(target, profiles, taken)
