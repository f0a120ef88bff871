"""``Distributed``: the add-on that makes an id crawl one worker of a job shared through Redis.

The ``idseq`` spider lists it in ``ADDONS``. When :func:`idcrawl.backends.backend_of` chooses the fleet
(``IDCRAWL_DISTRIBUTED``), it sets the fleet's worker (``IDCRAWL_WORKER_CLASS``) and adds the fleet's
politeness middleware; the rest asks the worker for its parts (docs/distributed.md).
"""

from __future__ import annotations

from scrapy.settings import BaseSettings

from idcrawl.backends import FLEET, backend_of
from idcrawl.components import NamedAddon, raise_dict_priority, setdefault_component

__all__ = ["FLEET_POLITENESS", "Distributed"]

#: Per-host gaps for all workers of a job together.
FLEET_POLITENESS = "idcrawl.distributed.politeness.FleetPoliteness"
#: Last before the download handler: after robots.txt, which may hold a request a while.
FLEET_POLITENESS_ORDER = 950


class Distributed(NamedAddon):
    """Scrapy add-on: with ``IDCRAWL_DISTRIBUTED`` true, the Redis classes in place of the in-process ones."""

    #: After idcrawl's add-on (0) and the profile add-ons (below 0), before the Spidermon switch (100).
    priority = 50

    @classmethod
    def add_to(cls, settings: BaseSettings) -> None:
        """List this add-on in ``ADDONS`` (the ``idseq`` spider's ``update_settings`` does), unless listed."""
        settings.setdefault_in_component_priority_dict("ADDONS", cls, cls.priority)
        raise_dict_priority(settings, "ADDONS", "spider")

    def update_settings(self, settings: BaseSettings) -> None:
        try:
            backend = backend_of(settings)
        except ValueError:  # -s IDCRAWL_DISTRIBUTED=abc: refused in one line by validate_settings
            return
        if backend is not FLEET:
            return
        settings.set("IDCRAWL_WORKER_CLASS", backend.worker, priority="spider")
        setdefault_component(settings, "DOWNLOADER_MIDDLEWARES", FLEET_POLITENESS, FLEET_POLITENESS_ORDER,
                             priority="spider")
