"""Which state store a crawl (or a command reading its state) opens: SQLite or Redis.

``IDCRAWL_STATE_BACKEND`` picks it (``sqlite``, the default, or ``redis``); a
command that found the state in Redis says so with ``backend``.
"""

from __future__ import annotations

import logging
from typing import Any

from idcrawl import default_settings
from idcrawl.state.base import StateError, StateStore
from idcrawl.state.location import state_path
from idcrawl.state.sqlite import SqliteStateStore

__all__ = ["BACKENDS", "configured_backend", "open_store"]

BACKENDS = ("sqlite", "redis")


def configured_backend(settings: Any) -> str:
    """``IDCRAWL_STATE_BACKEND`` as given (stripped, lower case; checked by :func:`open_store`)."""
    return str(settings.get("IDCRAWL_STATE_BACKEND") or default_settings.IDCRAWL_STATE_BACKEND).strip().lower()


def open_store(
    settings: Any, spider_name: str, *, read_only: bool = False, backend: str | None = None, stats: Any = None,
) -> StateStore:
    """The store of a crawl of ``spider_name`` with these settings; StateError names what is wrong.

    ``backend``: ``sqlite`` or ``redis``; None: ``IDCRAWL_STATE_BACKEND``. ``stats``: the crawl's stats,
    which count every call to Redis (``idcrawl/redis/calls``).
    """
    if backend is None:
        backend = configured_backend(settings)
    if backend == "sqlite":
        return SqliteStateStore(state_path(settings, spider_name), read_only=read_only)
    if backend != "redis":
        raise StateError(f"bad setting: IDCRAWL_STATE_BACKEND={backend!r}: must be one of {', '.join(BACKENDS)}")
    from idcrawl.distributed.connection import RedisUnavailable, check_no_eviction, connect, job_prefix
    from idcrawl.distributed.state import JobStateStore  # reads a distributed job's lanes too

    try:
        client = connect(settings, idempotent=True, stats=stats)
        # a store that writes: a Redis that may evict its keys is refused
        warning = None if read_only else check_no_eviction(client, settings)
    except RedisUnavailable as exc:
        raise StateError(str(exc)) from None
    if warning:
        logging.getLogger(__name__).warning("idcrawl: %s", warning)
    return JobStateStore(client, job_prefix(settings, spider_name), read_only=read_only)
