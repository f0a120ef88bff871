"""``FleetPoliteness``: a host's gap holds for all workers of a job together.

A download slot's delay (``DOWNLOAD_DELAY``, a ``DOWNLOAD_SLOTS`` entry, or
the gap :class:`idcrawl.extensions.politeness.IdPoliteness` derived from fetch times)
spaces the requests of *one* process. With N workers on one host that would
be N requests per gap. This downloader middleware, the last before the
download handler (order 950: after robots.txt, which may hold a request for a
while), reserves the host's next start time in Redis (``P polite:<slot>``, the
``POLITE`` script): the request goes on when the reservation succeeds, and
otherwise waits (without blocking other hosts) until the time another worker
left it. The scheduler meanwhile skips a host it knows to be reserved
(:meth:`RedisWorker.fleet_gate`), so the waiting is short.

The gap is measured from reservation to reservation; the request leaves a few
milliseconds later (the slot's queue), so the gaps a server sees may be a few
milliseconds shorter or longer. Scrapy's ``DOWNLOAD_DELAY_JITTER`` (or
``RANDOMIZE_DOWNLOAD_DELAY``) applies per worker on top, so set it to 0 for
exact fleet gaps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import reactor
from twisted.internet.task import deferLater

from idcrawl._scrapy import download_slot, slot_key
from idcrawl.runtime import STATS_PREFIX, runtime_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

__all__ = ["FleetPoliteness"]


class FleetPoliteness:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FleetPoliteness:
        return cls(crawler)

    async def process_request(self, request: Request, spider: Any = None) -> None:
        from idcrawl.distributed.worker import RedisWorker

        runtime = runtime_of(self.crawler)
        worker = runtime.worker if runtime is not None else None
        engine = self.crawler.engine
        if not isinstance(worker, RedisWorker) or engine is None or request.url.startswith("data:"):
            return
        key = slot_key(self.crawler, request)
        waited = 0.0
        while True:
            slot = download_slot(self.crawler, key)
            gap = slot.delay if slot is not None else self.crawler.settings.getfloat("DOWNLOAD_DELAY")
            if gap <= 0:
                break
            wait = worker.reserve(key, gap)
            if wait <= 0:
                break
            waited += wait
            await maybe_deferred_to_future(deferLater(reactor, wait, lambda: None))
        if waited and self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"{STATS_PREFIX}/redis/politeness_waits")
            self.crawler.stats.max_value(f"{STATS_PREFIX}/redis/politeness_max_wait", round(waited, 3))
