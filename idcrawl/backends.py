"""One process or a fleet: what each backend brings, by import path, chosen once from the settings.

``IDCRAWL_DISTRIBUTED`` (the ``distributed`` profile sets it) picks the worker (:class:`idcrawl.worker.Worker`)
and where the request dupefilter's fingerprints live; ``IDCRAWL_STATE_BACKEND`` the state store. Paths are
loaded only when chosen: ``state/`` never imports ``distributed/``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from idcrawl.config import setting

__all__ = ["FLEET", "LOCAL", "STATE_STORES", "Backend", "backend_of", "load"]


@dataclass(frozen=True)
class Backend:
    """One side of the seam: its name and the import paths of its parts."""

    name: str
    #: the worker (``IDCRAWL_WORKER_CLASS``)
    worker: str
    #: the request dupefilter's fingerprints (``idcrawl.dupefilters.SeenStore``; ``.of(crawler, config)`` builds it)
    seen: str


#: Lanes in this process, the state in a store (SQLite or Redis).
LOCAL = Backend("local", "idcrawl.local.worker.LocalWorker", "idcrawl.dupefilters.FileSeen")
#: One worker of a job shared through Redis (the add-on ``idcrawl.distributed.addon.Distributed`` swaps it in).
FLEET = Backend("distributed", "idcrawl.distributed.worker.RedisWorker", "idcrawl.distributed.dupefilters.RedisSeen")

#: ``IDCRAWL_STATE_BACKEND`` values other than ``sqlite`` (in ``idcrawl.state``) -> the function that opens
#: the store: ``(settings, spider_name, *, read_only, stats) -> StateStore``.
STATE_STORES = {"redis": "idcrawl.distributed.store.open_job_store"}


def backend_of(settings: Any) -> Backend:
    """The backend these settings choose: the fleet when ``IDCRAWL_DISTRIBUTED`` is on, else one process."""
    return FLEET if setting(settings, "IDCRAWL_DISTRIBUTED") else LOCAL


def load(path: str) -> Any:
    """The object at the import path ``module.name`` (a backend's part, imported when it is chosen)."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)
