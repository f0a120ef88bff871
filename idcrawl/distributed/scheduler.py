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

``idseq`` sets this scheduler itself when ``IDCRAWL_DISTRIBUTED`` is on.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import TYPE_CHECKING

from idcrawl.runtime import DUE_KEY, META_KEY, STATS_PREFIX
from idcrawl.scheduler import IdScheduler

if TYPE_CHECKING:
    from scrapy import Request

    from idcrawl.distributed.runtime import RedisRuntime

__all__ = ["RedisIdScheduler"]


class RedisIdScheduler(IdScheduler):
    def _redis(self) -> RedisRuntime | None:
        from idcrawl.distributed.runtime import RedisRuntime

        runtime = self.runtime
        return runtime if isinstance(runtime, RedisRuntime) else None

    def enqueue_request(self, request: Request) -> bool:
        runtime = self._redis()
        due = request.meta.get(DUE_KEY)
        if runtime is None or due is None or META_KEY not in request.meta:
            return super().enqueue_request(request)
        wait = due - time.monotonic()
        if wait <= 0:
            return super().enqueue_request(request)
        runtime.delay(request, wait)
        assert self.stats is not None
        self.stats.inc_value("scheduler/enqueued")
        self.stats.inc_value(f"scheduler/enqueued/{STATS_PREFIX}_delayed")
        return True

    def next_request(self) -> Request | None:
        runtime = self._redis()
        if runtime is not None:
            request = runtime.due_retry()
            if request is not None:
                assert self.stats is not None
                self.stats.inc_value("scheduler/dequeued")
                self.stats.inc_value(f"scheduler/dequeued/{STATS_PREFIX}_delayed")
                return request
        return super().next_request()

    def _group_ready(self, group: Hashable) -> bool:
        if not super()._group_ready(group):
            return False
        runtime = self._redis()
        return runtime is None or runtime.fleet_gate(self._slot_key(str(group)))
