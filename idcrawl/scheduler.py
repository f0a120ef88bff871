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

from collections.abc import Hashable
from typing import TYPE_CHECKING

from scrapy import Request
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
        if self.runtime is not None:
            self.runtime.open()
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
        """A slot is ready while it has free concurrency and nothing waiting on its delay."""
        assert self.crawler is not None and self.crawler.engine is not None
        slot = self.crawler.engine.downloader.slots.get(self._slot_key(str(group)))
        if slot is None:
            return True
        if slot.delay and slot.queue:
            return False
        return len(slot.active) < slot.concurrency
