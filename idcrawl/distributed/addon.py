"""``Distributed``: the add-on that makes an id crawl one worker of a job shared through Redis.

The ``idseq`` spider lists it in ``ADDONS`` for itself (as it lists the
Spidermon switch); it reads its own switch, ``IDCRAWL_DISTRIBUTED`` (the
``distributed`` settings profile sets it), and when it is on swaps the Redis
classes in, the way scrapy-redis swaps ``SCHEDULER`` and ``DUPEFILTER_CLASS``:

==========================  ==============================================================
``IDCRAWL_WORKER_CLASS``    :class:`idcrawl.distributed.worker.RedisWorker` (lanes in Redis)
``SCHEDULER``               :class:`idcrawl.distributed.scheduler.RedisIdScheduler`, in place
                            of ``IdScheduler`` (a project's own subclass is kept)
``DOWNLOADER_MIDDLEWARES``  :class:`idcrawl.distributed.politeness.FleetPoliteness` at 950
``EXTENSIONS``              :class:`idcrawl.distributed.limits.FleetLimits` in place of
                            ``IdLimits`` (counters, stops and incidents of the fleet)
==========================  ==============================================================

Nothing outside :mod:`idcrawl.distributed` tests for distributed mode.
"""

from __future__ import annotations

from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object

from idcrawl.addon import raise_dict_priority, setdefault_component, swap_component
from idcrawl.distributed.connection import distributed

__all__ = ["FLEET_LIMITS", "FLEET_POLITENESS", "REDIS_SCHEDULER", "WORKER", "Distributed"]

WORKER = "idcrawl.distributed.worker.RedisWorker"
REDIS_SCHEDULER = "idcrawl.distributed.scheduler.RedisIdScheduler"
#: Per-host gaps for all workers of a job together.
FLEET_POLITENESS = "idcrawl.distributed.politeness.FleetPoliteness"
#: Last before the download handler: after robots.txt, which may hold a request a while.
FLEET_POLITENESS_ORDER = 950
LIMITS = "idcrawl.extensions.limits.IdLimits"
FLEET_LIMITS = "idcrawl.distributed.limits.FleetLimits"


class Distributed:
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
            on = distributed(settings)
        except ValueError:  # -s IDCRAWL_DISTRIBUTED=abc: refused in one line by validate_settings
            return
        if not on:
            return
        from idcrawl.scheduler import IdScheduler

        settings.set("IDCRAWL_WORKER_CLASS", WORKER, priority="spider")
        current = settings.get("SCHEDULER")
        if current and load_object(current) is IdScheduler:
            # shared retries and fleet-wide politeness through Redis
            settings.set("SCHEDULER", REDIS_SCHEDULER, priority="spider")
        setdefault_component(settings, "DOWNLOADER_MIDDLEWARES", FLEET_POLITENESS, FLEET_POLITENESS_ORDER,
                             priority="spider")
        swap_component(settings, "EXTENSIONS", LIMITS, FLEET_LIMITS)

