"""Which state store a crawl (or a command reading its state) opens: SQLite or Redis (``IDCRAWL_STATE_BACKEND``).

The Redis store is :data:`idcrawl.backends.STATE_STORES`'s, loaded when chosen.
"""

from __future__ import annotations

from typing import Any

from idcrawl import default_settings
from idcrawl.backends import STATE_STORES, load
from idcrawl.config import given
from idcrawl.state.base import StateError, StateStore
from idcrawl.state.location import state_path
from idcrawl.state.sqlite import SqliteStateStore

__all__ = ["BACKENDS", "configured_backend", "open_store"]

BACKENDS = ("sqlite", *STATE_STORES)


def configured_backend(settings: Any) -> str:
    """``IDCRAWL_STATE_BACKEND`` as given (stripped, lower case; checked by :func:`open_store`)."""
    return str(given(settings, "IDCRAWL_STATE_BACKEND") or default_settings.IDCRAWL_STATE_BACKEND).strip().lower()


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
    opener = STATE_STORES.get(backend)
    if opener is None:
        raise StateError(f"bad setting: IDCRAWL_STATE_BACKEND={backend!r}: must be one of {', '.join(BACKENDS)}")
    store: StateStore = load(opener)(settings, spider_name, read_only=read_only, stats=stats)
    return store
