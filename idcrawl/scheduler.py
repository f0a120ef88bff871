"""``IdScheduler``: Scrapy's scheduler plus lazily dispensed lane requests.

Requests the spider yields (follow-up pages, retries) keep Scrapy's own
queues, priorities, dupefilter and JOBDIR persistence and are served first:
they were already produced and draining them bounds memory. When they are
empty, the next id comes from the frontier, which interleaves lanes by weight
and skips lanes whose download slot is busy, so a slow host never holds up
the others (no head-of-line blocking).

Set ``SCHEDULER = "idcrawl.scheduler.IdScheduler"`` (the idseq spider does
it for you). With a spider that has no ``idcrawl`` runtime it behaves exactly
like Scrapy's default scheduler.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.core.scheduler import Scheduler

from idcrawl.runtime import STATS_PREFIX, IdRuntime

if TYPE_CHECKING:
    from scrapy import Spider
    from twisted.internet.defer import Deferred

__all__ = ["IdScheduler"]


class IdScheduler(Scheduler):
    runtime: IdRuntime | None = None

    def open(self, spider: Spider) -> Deferred[None] | None:
        result = super().open(spider)
        runtime = getattr(spider, "idcrawl", None)
        self.runtime = runtime if isinstance(runtime, IdRuntime) else None
        self._slot_of_host: dict[str, str] = {}
        # lane requests handed to the engine that have not reached their slot yet
        self._entering: dict[str, weakref.WeakSet[Request]] = {}
        if self.runtime is not None:
            self.runtime.open()
            assert self.crawler is not None
            self.crawler.signals.connect(self._reached_downloader, signal=signals.request_reached_downloader)
        return result

    def has_pending_requests(self) -> bool:
        if super().has_pending_requests():
            return True
        return self.runtime is not None and self.runtime.frontier.can_dispense()

    def next_request(self) -> Request | None:
        request = super().next_request()
        if request is not None or self.runtime is None:
            return request
        dispatch = self.runtime.next(self._group_ready)
        if dispatch is None:
            return None
        assert self.stats is not None
        self.stats.inc_value("scheduler/dequeued")
        self.stats.inc_value(f"scheduler/dequeued/{STATS_PREFIX}")
        lane_request: Request = self.spider.make_id_request(dispatch)  # type: ignore[attr-defined]
        slot_key = self._slot_key(dispatch.target.host)
        self._entering.setdefault(slot_key, weakref.WeakSet()).add(lane_request)
        return lane_request

    # -- download-slot awareness ---------------------------------------------------

    def _slot_key(self, host: str) -> str:
        """The downloader slot that serves a host (hostname, or IP with PER_IP)."""
        key = self._slot_of_host.get(host)
        if key is None:
            assert self.crawler is not None and self.crawler.engine is not None
            downloader = self.crawler.engine.downloader
            key = downloader.get_slot_key(Request(f"http://{host}/"))
            self._slot_of_host[host] = key
        return key

    def _group_ready(self, group: Hashable) -> bool:
        """A slot is ready while it has free concurrency and nothing waiting on its delay.

        Requests on their way through the downloader middlewares are not in
        the slot yet; counting them too keeps one host from taking more than
        its share of CONCURRENT_REQUESTS (they are held weakly, so one that a
        middleware drops is forgotten with it).
        """
        assert self.crawler is not None and self.crawler.engine is not None
        key = self._slot_key(str(group))
        entering = self._entering.get(key)
        pending = len(entering) if entering is not None else 0
        slot = self.crawler.engine.downloader.slots.get(key)
        if slot is None:
            return pending < self.crawler.engine.downloader.domain_concurrency
        if slot.delay and (slot.queue or pending):
            return False
        return len(slot.active) + pending < slot.concurrency

    def _reached_downloader(self, request: Request, spider: Any = None) -> None:
        entering = self._entering.get(request.meta.get("download_slot", ""))
        if entering is not None:
            entering.discard(request)
