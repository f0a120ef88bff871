"""``IdSoft404Middleware``: learn each target's soft-404 page before any of its ids is judged.

Probe requests go ahead of the spider's start requests; a target's lane responses are held until its
probe is settled. Why: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from idcrawl.core.fingerprints import SoftPage
from idcrawl.requests import HANDLED_STATUSES
from idcrawl.responses import page_text
from idcrawl.runtime import META_KEY, STATS_PREFIX, IdRuntime, runtime_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Iterator

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

    from idcrawl.core.targets import Target

__all__ = ["PROBE_KEY", "IdSoft404Middleware"]

logger = logging.getLogger(__name__)

#: ``request.meta`` key of a soft-404 probe request: the target's name.
PROBE_KEY = "idcrawl_soft404_probe"
#: ``request.meta`` key of a probe's try (1 = first).
_PROBE_TRY = "idcrawl_soft404_probe_try"


class IdSoft404Middleware:
    """The soft-404 probes of a crawl's targets, the lane responses that wait for them, what they taught."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        settings = crawler.settings
        # the probe is retried here (_retry), so that a probe that fails is one warning, not Scrapy's error too
        self.retry_statuses = frozenset(int(code) for code in settings.getlist("RETRY_HTTP_CODES"))
        self.retry_times = settings.getint("RETRY_TIMES")
        stats = crawler.stats
        assert stats is not None
        self.stats = stats
        #: target name -> its lane responses that arrived before its probe was settled
        self.waiting: dict[str, list[Response]] = {}
        #: target name -> the soft-404 page learned from its probe
        self.pages: dict[str, SoftPage] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdSoft404Middleware:
        return cls(crawler)

    def _runtime(self) -> IdRuntime | None:
        """The id crawl's runtime (None for a crawl that is not an id crawl)."""
        return runtime_of(self.crawler)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The probe requests first, then the spider's own start requests and items."""
        for request in self.probe_requests():
            yield request
        async for request_or_item in start:
            yield request_or_item

    def probe_requests(self) -> list[Request]:
        """One request per target with a probe; the targets' lane responses wait for it."""
        runtime = self._runtime()
        if runtime is None:
            return []
        spider: Any = self.crawler.spider
        requests = []
        for target in runtime.frontier.targets.values():
            if target.soft404_probe is None:
                continue
            self.waiting[target.name] = []
            requests.append(Request(
                target.soft404_probe, callback=spider.probe_response, errback=spider.probe_failure,
                dont_filter=True, priority=1000,  # queued requests go before lane ids anyway
                # 4xx/5xx reach the callback (a 404 tells us the site has real 404s); redirects are followed;
                # retried here (_retry), so that a probe that fails is one warning, not Scrapy's error too
                meta={PROBE_KEY: target.name, "handle_httpstatus_list": HANDLED_STATUSES, "dont_retry": True},
            ))
        return requests

    # -- what the spider asks ------------------------------------------------------------

    def hold(self, response: Response) -> bool:
        """Hold a lane response whose target's probe is not settled yet (True: held, judged later)."""
        held = self.waiting.get(response.meta[META_KEY]["target"])
        if held is None:
            return False
        held.append(response)
        return True

    def is_soft404(self, response: Response, target: Target) -> bool:
        """Whether a page is similar enough to the target's learned soft-404 page (counted in the stats)."""
        page = self.pages.get(target.name)
        text = page_text(response) if page is not None else None
        if page is None or text is None:
            return False
        similarity = page.similarity(text)
        if similarity < target.soft404_similarity:
            return False
        self.stats.inc_value(f"{STATS_PREFIX}/soft404/learned_missing")
        logger.debug("idcrawl: %s is missing: %.3f similar to the soft-404 page of %r", response.url, similarity,
                     target.name)
        return True

    # -- the probe's answer (through the spider's callbacks) -------------------------------

    def answered(self, response: Response, judge: Callable[[Response], Iterable[Any]]) -> Iterator[Any]:
        """A probe's response: learn from it (or retry it); then judge the lane responses that waited."""
        name = response.meta[PROBE_KEY]
        runtime = self._runtime()
        assert runtime is not None  # it made the probe request
        target = runtime.frontier.targets[name]
        if response.status in self.retry_statuses and response.status not in target.rule.missing_statuses:
            retry = self._retry(response.request, f"status {response.status}")
            if retry is not None:
                yield retry
                return
        if response.status in target.rule.missing_statuses:
            logger.info("idcrawl: target %r: the soft-404 probe %s answered %d: the site has real 404s, "
                        "nothing to learn", name, response.url, response.status)
            result = "real_404"
        elif not 200 <= response.status < 300:
            logger.warning("idcrawl: target %r: the soft-404 probe %s answered %d: nothing learned, "
                           "soft 404s will be items", name, response.url, response.status)
            result = "failed"
        else:
            text = page_text(response)
            page = SoftPage.learn(text) if text is not None else None
            if page is None:
                logger.warning("idcrawl: target %r: the soft-404 probe %s has no text to learn from: nothing "
                               "learned, soft 404s will be items", name, response.url)
                result = "failed"
            else:
                self.pages[name] = page
                logger.info("idcrawl: target %r: learned its soft-404 page from %s (%d shingles); pages at "
                            "least %g similar are missing", name, response.url, len(page.shingles),
                            target.soft404_similarity)
                result = "learned"
        self.stats.set_value(f"{STATS_PREFIX}/soft404/probes/{name}", result)
        yield from self._release(name, judge)

    def failed(self, failure: Failure, judge: Callable[[Response], Iterable[Any]]) -> Iterator[Any]:
        """A probe that got no response: retry it, or give up with one warning; then judge the waiting."""
        request = failure.request  # type: ignore[attr-defined]
        name = request.meta[PROBE_KEY]
        if not isinstance(failure.value, IgnoreRequest):  # robots.txt forbids it: no use trying again
            retry = self._retry(request, failure.value)
            if retry is not None:
                yield retry
                return
        reason = " ".join(str(failure.value).split()) or type(failure.value).__name__
        logger.warning("idcrawl: target %r: the soft-404 probe %s failed (%s): nothing learned, "
                       "soft 404s will be items", name, request.url, reason)
        self.stats.set_value(f"{STATS_PREFIX}/soft404/probes/{name}", "failed")
        yield from self._release(name, judge)

    def _retry(self, request: Request | None, reason: Any) -> Request | None:
        """The probe's next try, or None when ``RETRY_TIMES`` retries are used up.

        Not Scrapy's RetryMiddleware: it logs giving up as an ERROR, and the
        one warning of :meth:`answered` / :meth:`failed` says it all.
        """
        if request is None:
            return None
        tries = int(request.meta.get(_PROBE_TRY, 1))
        if tries > self.retry_times:
            return None
        logger.debug("idcrawl: retrying the soft-404 probe %s (%s)", request.url, reason)
        meta = {key: request.meta[key] for key in (PROBE_KEY, "handle_httpstatus_list", "dont_retry")}
        return request.replace(meta={**meta, _PROBE_TRY: tries + 1}, dont_filter=True)

    def _release(self, name: str, judge: Callable[[Response], Iterable[Any]]) -> Iterator[Any]:
        """Judge the lane responses that waited for the probe (in arrival order)."""
        for response in self.waiting.pop(name, []):
            yield from judge(response)
