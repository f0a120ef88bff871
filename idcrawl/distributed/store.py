"""The Redis state store of a crawl or a command (``IDCRAWL_STATE_BACKEND = "redis"``), opened for ``idcrawl.state``."""

from __future__ import annotations

import logging
from typing import Any

from idcrawl.distributed.connection import RedisUnavailable, check_no_eviction, connect, job_prefix
from idcrawl.distributed.state import JobStateStore
from idcrawl.state.base import StateError

__all__ = ["open_job_store"]


def open_job_store(settings: Any, spider_name: str, *, read_only: bool = False, stats: Any = None) -> JobStateStore:
    """The job's store in Redis (it reads a distributed job's lanes too); StateError names what is wrong.
    ``stats``: the crawl's, which count every call to Redis (``idcrawl/redis/calls``)."""
    try:
        client = connect(settings, idempotent=True, stats=stats)
        # a store that writes: a Redis that may evict its keys is refused
        warning = None if read_only else check_no_eviction(client, settings)
    except RedisUnavailable as exc:
        raise StateError(str(exc)) from None
    if warning:
        logging.getLogger(__name__).warning("idcrawl: %s", warning)
    return JobStateStore(client, job_prefix(settings, spider_name), read_only=read_only)
