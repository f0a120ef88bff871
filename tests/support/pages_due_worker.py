"""A Redis worker whose plan has found pages due (``-s IDCRAWL_WORKER_CLASS=...``): what a fleet refuses."""

from __future__ import annotations

from idcrawl.core.targets import Target
from idcrawl.distributed.worker import RedisWorker


class PagesDueWorker(RedisWorker):
    def due_pages(self, target: Target) -> list[int]:
        return [1005, 1007]
