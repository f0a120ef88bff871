"""``FleetPoliteness``: a host's gap and concurrency hold for all workers of a job together.

A downloader middleware (order 950, after robots.txt) that, with the worker's politeness gate
(``politeness_gate()``: the ``POLITE`` script), reserves the start of each request to a host with a gap,
takes one of the host's places in flight fleet-wide as the request leaves for the download handler
(waiting, without blocking other hosts, while other workers hold the host) and gives it back when the
download ends. Without a gate (one process) it does nothing. See docs/distributed.md.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future

from idcrawl._scrapy import (
    before_download,
    download_slot,
    new_slot_concurrency,
    new_slot_delay,
    slot_key,
    total_concurrency,
)
from idcrawl.extensions.politeness import IdPoliteness
from idcrawl.runtime import STATS_PREFIX, runtime_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from idcrawl.scheduler import PolitenessGate

__all__ = ["FleetPoliteness"]

#: The meta key of a reserved request: (slot, token), read as it leaves for the download handler.
RESERVED_KEY = "_idcrawl_polite"
#: The meta key of a request holding a place in flight: (slot, token), read as its download ends.
FLYING_KEY = "_idcrawl_flying"
#: A place in flight is free again this long (s) after its request's download timeout, whatever happened.
LIFE_SLACK = 10.0


class FleetPoliteness:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._tokens = itertools.count(1)
        self._hooked = False
        self._timeout = crawler.settings.getfloat("DOWNLOAD_TIMEOUT")

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

    def cap(self, key: str) -> int:
        """The most requests of slot ``key`` one process has in flight: the slot's concurrency (for a
        slot not made yet, the one it will get: 1 with :class:`IdPoliteness` on), at most
        ``CONCURRENT_REQUESTS``."""
        slot = download_slot(self.crawler, key)
        if slot is not None:
            cap = int(slot.concurrency)
        else:
            cap = 1 if self.crawler.get_extension(IdPoliteness) is not None else new_slot_concurrency(self.crawler, key)
        total = total_concurrency(self.crawler)
        return max(1, min(cap, total) if total > 0 else cap)

    def _gate(self) -> PolitenessGate | None:
        runtime = runtime_of(self.crawler)
        return runtime.worker.politeness_gate() if runtime is not None else None

    async def process_request(self, request: Request, spider: Any = None) -> None:
        gate = self._gate()
        engine = self.crawler.engine
        if gate is None or engine is None or request.url.startswith("data:"):
            return
        if not self._hooked:
            before_download(self.crawler, self.leaving, self.left)
            self._hooked = True
        key = slot_key(self.crawler, request)
        token = f"{gate.worker}#{next(self._tokens)}"
        request.meta[RESERVED_KEY] = (key, token)
        if self.gap(key) > 0:
            await self._reserve(gate, key, token, f"{STATS_PREFIX}/redis/politeness_waits")

    async def leaving(self, request: Request) -> None:
        """As a reserved request leaves for the download handler: the host's next start a gap from now
        (or, if another worker's request took the host since this one's reservation, wait for it), and
        one of the host's places in flight (or wait for one)."""
        reserved = request.meta.pop(RESERVED_KEY, None)
        gate = self._gate() if reserved is not None else None
        if gate is not None:
            key, token = reserved
            life = float(request.meta.get("download_timeout") or self._timeout or 180.0) + LIFE_SLACK
            await self._reserve(gate, key, token, f"{STATS_PREFIX}/redis/politeness_late_waits", life=life)
            request.meta[FLYING_KEY] = (key, token)

    def left(self, request: Request) -> None:
        """Its download ended: the request's place in flight goes back to the fleet."""
        flying = request.meta.pop(FLYING_KEY, None)
        gate = self._gate() if flying is not None else None
        if gate is not None:
            gate.release(*flying)

    async def _reserve(self, gate: PolitenessGate, key: str, token: str, waits: str, *, life: float = 0.0) -> None:
        """Reserve slot ``key`` for request ``token`` (``life`` > 0: as it leaves, a place in flight too),
        waiting while other requests hold it (counted in stat ``waits``)."""
        waited = 0.0
        while True:
            wait = gate.reserve(key, token, gap=self.gap(key), cap=self.cap(key), life=life)
            if wait <= 0:
                break
            waited += wait
            await maybe_deferred_to_future(gate.sleep(key, wait))  # sooner if a place is given back
        if waited and self.crawler.stats is not None:
            self.crawler.stats.inc_value(waits)
            self.crawler.stats.max_value(f"{STATS_PREFIX}/redis/politeness_max_wait", round(waited, 3))
