"""``IdAttemptsMiddleware``: attempts of lane requests after a cool-down.

Lane requests carry ``dont_retry``; this middleware retries them with the target's ``attempts``,
``cooldown`` and ``backoff``, honouring ``Retry-After``, without sleeping. Why: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING, Any

from scrapy.utils.misc import load_object

from idcrawl.config import config_of
from idcrawl.core.attempts import parse_retry_after, retry_delay
from idcrawl.runtime import DUE_KEY, META_KEY, STATS_PREFIX, runtime_of, start_runtime

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = ["IdAttemptsMiddleware"]

logger = logging.getLogger(__name__)


class IdAttemptsMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.retry_codes = {int(code) for code in settings.getlist("RETRY_HTTP_CODES")}
        self.exceptions = tuple(
            load_object(path) if isinstance(path, str) else path for path in settings.getlist("RETRY_EXCEPTIONS")
        )
        config = config_of(crawler)
        self.jitter = config.retry_jitter
        self.retry_after_max = config.retry_after_max
        self.rng = random.Random()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdAttemptsMiddleware:
        # built after the extensions and before the engine starts: if a project's explicit
        # EXTENSIONS left IdStateLoader out, the runtime's worker is built (its state read) here,
        # still failing cleanly
        start_runtime(crawler)
        return cls(crawler)

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Request | Response:
        if META_KEY not in request.meta or response.status not in self.retry_codes:
            return response
        header = response.headers.get("Retry-After")
        retry_after = parse_retry_after(header, cap=self.retry_after_max)
        if header is not None and retry_after is None:
            logger.debug("idcrawl: ignoring unparsable Retry-After %r from %s", header, response.url)
        return self._retry(request, str(response.status), retry_after) or response

    def process_exception(self, request: Request, exception: Exception, spider: Any = None) -> Request | None:
        if META_KEY not in request.meta or not isinstance(exception, self.exceptions):
            return None
        return self._retry(request, type(exception).__name__, None)

    def _retry(self, request: Request, reason: str, retry_after: float | None) -> Request | None:
        runtime = runtime_of(self.crawler)
        info = request.meta[META_KEY]
        stats = self.crawler.stats
        assert stats is not None
        if runtime is None or info["target"] not in runtime.frontier.targets:
            return None
        target = runtime.frontier.targets[info["target"]]
        attempt = int(info.get("attempt", 1))
        if attempt >= target.attempts:
            stats.inc_value(f"{STATS_PREFIX}/attempts/gave_up")
            logger.debug("idcrawl: %s gave up after %d attempts (%s)", request.url, attempt, reason)
            return None
        delay = retry_delay(
            attempt, cooldown=target.cooldown, backoff=target.backoff,
            jitter=self.jitter, retry_after=retry_after, rng=self.rng,
        )
        stats.inc_value(f"{STATS_PREFIX}/attempts/retried")
        stats.inc_value(f"{STATS_PREFIX}/attempts/reason/{reason}")
        logger.debug("idcrawl: %s attempt %d failed (%s); next in %.2fs", request.url, attempt, reason, delay)
        meta = {**request.meta, META_KEY: {**info, "attempt": attempt + 1}, DUE_KEY: time.monotonic() + delay}
        return request.replace(meta=meta, dont_filter=True)
