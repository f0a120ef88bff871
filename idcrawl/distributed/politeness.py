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

The first request of a host in a worker (its robots.txt, with
``ROBOTSTXT_OBEY``) comes before Scrapy made the host's slot: its gap is the
one the slot will get (its ``DOWNLOAD_SLOTS`` entry, else ``DOWNLOAD_DELAY``,
and IdPoliteness's first gap when that is on), so each worker's robots.txt
fetch takes its place in the fleet's gaps too.

The gap runs from the moment a request leaves for the download handler, as a
single process's slot delay does (Scrapy's slot measures from its last
request's send): a request is reserved when this middleware lets it through,
and reserved again as it leaves (:func:`idcrawl._scrapy.before_download`, the
same ``POLITE`` script with the request's token). If no other request took the
host in between, the host's next start moves to a gap after that moment,
however late the request left (a worker's first request can leave a tenth of a
second after its reservation on a busy machine: start-up work, a new
connection); if another did, the late request waits its turn and is reserved
anew (stat ``idcrawl/redis/politeness_late_waits``). So the moments requests to
a host leave, fleet-wide, are at least a gap apart on the one clock of the
script (Redis's). What the server sees differs by the local transit of each
request, as in one process. Scrapy's ``DOWNLOAD_DELAY_JITTER`` (or
``RANDOMIZE_DOWNLOAD_DELAY``) applies per worker on top, so set it to 0 for
exact fleet gaps.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import reactor
from twisted.internet.task import deferLater

from idcrawl._scrapy import before_download, download_slot, new_slot_delay, slot_key
from idcrawl.extensions.politeness import IdPoliteness
from idcrawl.runtime import STATS_PREFIX, runtime_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

__all__ = ["FleetPoliteness"]

#: The meta key of a reserved request: (slot, token), read as it leaves for the download handler.
RESERVED_KEY = "_idcrawl_polite"


class FleetPoliteness:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._tokens = itertools.count(1)
        self._hooked = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FleetPoliteness:
        return cls(crawler)

    def gap(self, key: str) -> float:
        """The gap of slot ``key``: its delay; for a slot not made yet (the first request of a host, which
        is its robots.txt), the delay the slot will get: its ``DOWNLOAD_SLOTS`` entry or
        ``DOWNLOAD_DELAY``, and the first gap of :class:`IdPoliteness` if it is on."""
        slot = download_slot(self.crawler, key)
        if slot is not None:
            return float(slot.delay)
        gap = new_slot_delay(self.crawler, key)
        politeness = self.crawler.get_extension(IdPoliteness)
        return politeness.first_gap(key, gap) if politeness is not None else gap

    async def process_request(self, request: Request, spider: Any = None) -> None:
        from idcrawl.distributed.worker import RedisWorker

        runtime = runtime_of(self.crawler)
        worker = runtime.worker if runtime is not None else None
        engine = self.crawler.engine
        if not isinstance(worker, RedisWorker) or engine is None or request.url.startswith("data:"):
            return
        if not self._hooked:
            before_download(self.crawler, self.leaving)
            self._hooked = True
        key = slot_key(self.crawler, request)
        token = f"{worker.worker}#{next(self._tokens)}"
        if await self._reserve(worker, key, token, f"{STATS_PREFIX}/redis/politeness_waits"):
            request.meta[RESERVED_KEY] = (key, token)

    async def leaving(self, request: Request) -> None:
        """As a reserved request leaves for the download handler: the host's next start a gap from now,
        or, if another worker's request took the host since this one's reservation, wait for it."""
        from idcrawl.distributed.worker import RedisWorker

        reserved = request.meta.pop(RESERVED_KEY, None)
        runtime = runtime_of(self.crawler)
        worker = runtime.worker if runtime is not None else None
        if reserved is not None and isinstance(worker, RedisWorker):
            key, token = reserved
            await self._reserve(worker, key, token, f"{STATS_PREFIX}/redis/politeness_late_waits")

    async def _reserve(self, worker: Any, key: str, token: str, waits: str) -> bool:
        """Reserve slot ``key`` for request ``token``, waiting while another request holds it (counted
        in stat ``waits``); False when the slot has no gap."""
        waited, reserved = 0.0, False
        while True:
            gap = self.gap(key)
            if gap <= 0:
                break
            wait = worker.reserve(key, gap, token)
            reserved = True
            if wait <= 0:
                break
            waited += wait
            await maybe_deferred_to_future(deferLater(reactor, wait, lambda: None))
        if waited and self.crawler.stats is not None:
            self.crawler.stats.inc_value(waits)
            self.crawler.stats.max_value(f"{STATS_PREFIX}/redis/politeness_max_wait", round(waited, 3))
        return reserved
