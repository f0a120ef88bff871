"""``RedisIdScheduler``: the IdScheduler of a distributed worker.

Two things change against :class:`idcrawl.scheduler.IdScheduler`, both
through Redis:

- **Retries wait in the job's shared delayed set** (``P delayed``, a sorted set
  by due time on the Redis clock), not in the worker's memory: any worker
  takes a retry that falls due, and a worker that stops loses none.
- **Politeness holds for the fleet.** The downloader middleware
  :class:`idcrawl.distributed.politeness.FleetPoliteness` reserves each
  request's start in Redis so that a host's gap holds between the requests of
  all workers together; here a host that another worker reserved is skipped
  (the other hosts go on) until the time it left, without a round trip.

The distributed add-on (:mod:`idcrawl.distributed.addon`) swaps it in for
``IdScheduler``.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import TYPE_CHECKING

from idcrawl.runtime import DUE_KEY, META_KEY, STATS_PREFIX
from idcrawl.scheduler import IdScheduler

if TYPE_CHECKING:
    from scrapy import Request

    from idcrawl.distributed.worker import RedisWorker

__all__ = ["RedisIdScheduler"]


class RedisIdScheduler(IdScheduler):
    def _redis(self) -> RedisWorker | None:
        from idcrawl.distributed.worker import RedisWorker

        worker = self.runtime.worker if self.runtime is not None else None
        return worker if isinstance(worker, RedisWorker) else None

    def enqueue_request(self, request: Request) -> bool:
        worker = self._redis()
        due = request.meta.get(DUE_KEY)
        if worker is None or due is None or META_KEY not in request.meta:
            return super().enqueue_request(request)
        wait = due - time.monotonic()
        if wait <= 0:
            return super().enqueue_request(request)
        worker.delay(request, wait)
        assert self.stats is not None
        self.stats.inc_value("scheduler/enqueued")
        self.stats.inc_value(f"scheduler/enqueued/{STATS_PREFIX}_delayed")
        return True

    def next_request(self) -> Request | None:
        worker = self._redis()
        if worker is not None:
            request = worker.due_retry()
            if request is not None:
                assert self.stats is not None
                self.stats.inc_value("scheduler/dequeued")
                self.stats.inc_value(f"scheduler/dequeued/{STATS_PREFIX}_delayed")
                return request
        return super().next_request()

    def _group_ready(self, group: Hashable) -> bool:
        if not super()._group_ready(group):
            return False
        worker = self._redis()
        return worker is None or worker.fleet_gate(self._slot_key(str(group)))
