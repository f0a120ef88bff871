"""A test-only downloader middleware: a worker's first request leaves long after its fleet reservation.

Ordered after :class:`idcrawl.distributed.politeness.FleetPoliteness` (950), it holds the first request
that reaches it (a worker's robots.txt, with ``ROBOTSTXT_OBEY``) until ``LATE_SEND_WORKERS`` workers have
joined the job (``P workers``: a condition, so that the first requests of all of them are held at once),
then ``LATE_SEND_DELAY`` seconds more: what a busy machine does to a worker's first request (start-up
work on its reactor, a new connection) between its reservation and the moment it leaves.

Every request that passes is written to ``LATE_SEND_LOG`` as ``<time.monotonic()> <path>``: a moment
before it leaves for the download handler (the slot's queue and the fleet's check as it leaves come
after), on the clock of the test site's log.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet import reactor
from twisted.internet.task import deferLater

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


class LateFirstSend:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.url = settings["REDIS_URL"]
        self.workers_key = f"idcrawl:{{{settings['IDCRAWL_REDIS_JOB']}}}:workers"
        self.workers = settings.getint("LATE_SEND_WORKERS", 1)
        self.delay = settings.getfloat("LATE_SEND_DELAY", 0.2)
        self.log = settings["LATE_SEND_LOG"]
        self.held = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LateFirstSend:
        return cls(crawler)

    async def process_request(self, request: Request, spider: Any = None) -> None:
        if not self.held:
            self.held = True
            await self._hold()
        with open(self.log, "a") as fh:
            fh.write(f"{time.monotonic()} {urlparse_cached(request).path}\n")

    async def _hold(self) -> None:
        import redis

        client = redis.Redis.from_url(self.url)
        try:
            while client.zcard(self.workers_key) < self.workers:
                await maybe_deferred_to_future(deferLater(reactor, 0.01, lambda: None))
        finally:
            client.close()
        await maybe_deferred_to_future(deferLater(reactor, self.delay, lambda: None))
