"""Sitemaps as evidence for id targets' recrawl: the reader of a job whose id targets have ``sitemaps``.

A job file's id target with ``sitemaps`` (no crawl scope needed) gets its sitemaps read at the run's start
(and each watch wave's) through the crawler's one :class:`idcrawl.sitemaps.SitemapReader` (crawl scope's
sitemaps too: a sitemap both name is fetched once); the entries that are its id pages
go to the worker (``Worker.sitemap_evidence``), which moves the stored page records and the tail's
schedule by the rules of :mod:`idcrawl.core.sitemaps`: the next run's (or wave's) plan takes them.
docs/recrawl.md "Sitemaps as evidence".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from idcrawl.core.scope import canonical
from idcrawl.core.sitemaps import SitemapUrl, site_sitemaps
from idcrawl.runtime import IdRuntime, start_runtime
from idcrawl.sitemaps import SITEMAP_STATS, Wanted, reader_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy.crawler import Crawler

__all__ = ["IdSitemapEvidenceMiddleware", "wanted_evidence"]


def wanted_evidence(runtime: IdRuntime) -> dict[str, Wanted]:
    """Per id target with ``sitemaps``: its site's (from the robots.txt of its first id's URL) and the
    sitemaps its key names."""
    wanted: dict[str, Wanted] = {}
    for target in runtime.targets:
        spec = runtime.sitemaps.get(target.name)
        if spec is None:
            continue
        want = wanted[target.name] = Wanted()
        if spec.site:
            robots, _ = site_sitemaps(canonical(target.url_for(target.start)))
            want.site[robots] = None
        for url in spec.urls:
            want.urls[url] = None
    return wanted


class IdSitemapEvidenceMiddleware:
    """Reads the id targets' sitemaps and hands the entries of their id pages to the worker."""

    def __init__(self, crawler: Crawler, runtime: IdRuntime) -> None:
        self.runtime = runtime
        stats = crawler.stats
        assert stats is not None
        self.stats = stats
        self.crawler = crawler
        self.targets = {t.name: t for t in runtime.targets}
        self.reader = reader_of(crawler)
        self.reader.subscribe(wanted_evidence(runtime), self._found)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdSitemapEvidenceMiddleware:
        runtime = start_runtime(crawler)
        if runtime is None or not runtime.sitemaps:
            raise NotConfigured("no id target has sitemaps")
        return cls(crawler, runtime)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The run's sitemap requests (the crawler's one reading, if no other component asked first)."""
        for request in self.reader.requests():
            yield request
        async for request_or_item in start:
            yield request_or_item

    def _found(self, name: str, profiles: list[str] | None, urls: list[SitemapUrl]) -> None:
        """A sitemap's entries for id target ``name``: those that are its id pages, as evidence."""
        target = self.targets.get(name)
        if target is None:
            return
        entries: dict[int, SitemapUrl] = {}
        for entry in urls:  # the highest priority first (SitemapReader): the first listing of an id kept
            id_ = target.id_of(entry.loc)
            if id_ is None:
                id_ = target.id_of(canonical(entry.loc))
            if id_ is not None:
                entries.setdefault(id_, entry)
        if not entries:
            return
        evidence = self.runtime.worker.sitemap_evidence(name, entries, self.runtime.clock.now())
        self.stats.inc_value(f"{SITEMAP_STATS}/id_pages", len(entries))
        if evidence.pages:
            self.stats.inc_value(f"{SITEMAP_STATS}/pages_moved", evidence.pages)
        if evidence.tail:
            self.stats.inc_value(f"{SITEMAP_STATS}/tails_due")
