"""``FleetAcks``: a fleet worker's acknowledgements of released outputs. Their items are expected,
then dropped from the worker's emit hash once written and the feeds flushed; found pages of the crawl
scope are harvested the same way (``hold_page``). Why: docs/architecture.md, "A worker"."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from idcrawl.feeds import UnwrittenItems, flush_feeds, page_key
from idcrawl.runtime import STATS_PREFIX
from idcrawl.storage import storage_failed

if TYPE_CHECKING:
    from collections.abc import Callable

    from idcrawl.distributed.job import RedisJob
    from idcrawl.runtime import IdRuntime

__all__ = ["FleetAcks"]

PREFIX = f"{STATS_PREFIX}/redis"


class FleetAcks:
    """The released outputs of one worker on their way to the feeds, acknowledged in batches."""

    def __init__(self, runtime: IdRuntime, client: Any, job: RedisJob, worker: str, batch: int, interval: float,
                 *, outage: Callable[[Exception], None]) -> None:
        self.runtime = runtime
        self.client = client
        self.job = job
        self.worker = worker
        self.outage = outage
        # acknowledgements of released outputs: tokens are their emit fields, "lane|id"
        self.unwritten = UnwrittenItems()
        self.written: list[str] = []
        #: found pages of the crawl scope whose items are on their way (tokens: what harvests them), and
        #: those written (harvested at the next acknowledgement, after the feeds' flush: hold_page)
        self.unwritten_pages = UnwrittenItems(page_key)
        self.written_pages: list[Callable[[], None]] = []
        self.batch = batch
        self.interval = interval
        self.last_ack = time.monotonic()
        self.acked_recently: set[str] = set()

    def expect(self, target: str, id_: int, outputs: list[Any], field: str) -> None:
        """Expect the items of released outputs (emit field ``field``); none: acknowledged at the next ack."""
        if not self.unwritten.expect(target, id_, outputs, field):
            self.written.append(field)

    def ack_again(self) -> None:
        """After a failover: the last acknowledgement again (its HDEL may be lost with the old primary)."""
        if self.acked_recently:
            self.job.commit("HDEL", self.job.keys.emit(self.worker), *sorted(self.acked_recently))

    def known(self) -> set[str]:
        """The emit fields this worker holds: expected, written, or acknowledged by its last HDEL."""
        return {field for _, field in self.unwritten.pending()} | set(self.written) | self.acked_recently

    def hold_page(self, owner: str, url: str, outputs: list[Any], harvest: Callable[[], None]) -> bool:
        """A found page of the crawl scope: harvested in the fleet's queue (``harvest()``) once the items
        that stand for it are written and acknowledged, as released ids are; False: none, harvest now."""
        return bool(self.unwritten_pages.expect(owner, url, outputs, harvest))

    def _harvest_written_pages(self) -> None:
        """After the feeds' flush: the found pages whose items are written are harvested."""
        while self.written_pages:  # one at a time: an outage leaves the rest for the next acknowledgement
            self.written_pages[0]()
            del self.written_pages[0]

    def item_written(self, item: Any, *args: Any, **kwargs: Any) -> None:
        """``item_scraped`` / ``item_dropped``: one expected item is written."""
        page = self.unwritten_pages.written(item)
        if page is not None:
            self.written_pages.append(page[1])
        else:
            done = self.unwritten.written(item)
            if done is None:
                return
            self.written.append(done[1])
        if len(self.written) + len(self.written_pages) >= self.batch:
            self.ack()

    def ack(self, force: bool = False) -> None:
        """Flush and fsync local feeds, then drop the written outputs from this worker's emit hash (and
        harvest the found pages whose items are written)."""
        if not self.written and not self.written_pages:
            return
        waiting = len(self.written) + len(self.written_pages)
        due = waiting >= self.batch or time.monotonic() - self.last_ack >= self.interval
        if not (force or due):
            return
        crawler = self.runtime.crawler
        if not flush_feeds(crawler) and not force:
            return  # a feed that is only durable at close: the outputs stay unacknowledged until then
        if storage_failed(crawler) is not None:
            return  # a feed write failed: nothing is acknowledged after it (another worker emits them again)
        if self.written_pages:
            try:
                self._harvest_written_pages()
            except RedisError as exc:
                self.outage(exc)
                return
        if not self.written:
            self.last_ack = time.monotonic()
            return
        fields, self.written = self.written, []
        try:
            self.job.commit("HDEL", self.job.keys.emit(self.worker), *fields)
        except RedisError as exc:
            self.written = fields + self.written
            self.outage(exc)
            return
        self.last_ack = time.monotonic()
        self.acked_recently = set(fields)  # an HDEL cut by an outage may not have been applied
        self.runtime.stats.inc_value(f"{PREFIX}/acknowledged", len(fields))
