"""``FleetPoliteness``: a host's gap holds for all workers of a job together.

A downloader middleware (order 950, after robots.txt) that reserves each request's
start with the worker's politeness gate (``politeness_gate()``: the ``POLITE``
script, ``P polite:<slot>``), waiting without blocking other hosts while another
worker holds the host, and reserves again as the request leaves for the download
handler. Without a gate (one process) it does nothing. See docs/distributed.md.
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

    from idcrawl.scheduler import PolitenessGate

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

    def _gate(self) -> PolitenessGate | None:
        runtime = runtime_of(self.crawler)
        return runtime.worker.politeness_gate() if runtime is not None else None

    async def process_request(self, request: Request, spider: Any = None) -> None:
        gate = self._gate()
        engine = self.crawler.engine
        if gate is None or engine is None or request.url.startswith("data:"):
            return
        if not self._hooked:
            before_download(self.crawler, self.leaving)
            self._hooked = True
        key = slot_key(self.crawler, request)
        token = f"{gate.worker}#{next(self._tokens)}"
        if await self._reserve(gate, key, token, f"{STATS_PREFIX}/redis/politeness_waits"):
            request.meta[RESERVED_KEY] = (key, token)

    async def leaving(self, request: Request) -> None:
        """As a reserved request leaves for the download handler: the host's next start a gap from now,
        or, if another worker's request took the host since this one's reservation, wait for it."""
        reserved = request.meta.pop(RESERVED_KEY, None)
        gate = self._gate() if reserved is not None else None
        if gate is not None:
            key, token = reserved
            await self._reserve(gate, key, token, f"{STATS_PREFIX}/redis/politeness_late_waits")

    async def _reserve(self, gate: PolitenessGate, key: str, token: str, waits: str) -> bool:
        """Reserve slot ``key`` for request ``token``, waiting while another request holds it (counted
        in stat ``waits``); False when the slot has no gap."""
        waited, reserved = 0.0, False
        while True:
            gap = self.gap(key)
            if gap <= 0:
                break
            wait = gate.reserve(key, gap, token)
            reserved = True
            if wait <= 0:
                break
            waited += wait
            await maybe_deferred_to_future(deferLater(reactor, wait, lambda: None))
        if waited and self.crawler.stats is not None:
            self.crawler.stats.inc_value(waits)
            self.crawler.stats.max_value(f"{STATS_PREFIX}/redis/politeness_max_wait", round(waited, 3))
        return reserved
