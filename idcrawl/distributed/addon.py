"""``Distributed``: the add-on that makes an id crawl one worker of a job shared through Redis.

The ``idseq`` spider lists it in ``ADDONS`` for itself (as it lists the
Spidermon switch); it reads its own switch, ``IDCRAWL_DISTRIBUTED`` (the
``distributed`` settings profile sets it), and when it is on swaps the Redis
classes in, the way scrapy-redis swaps ``SCHEDULER`` and ``DUPEFILTER_CLASS``:

==========================  ==============================================================
``IDCRAWL_WORKER_CLASS``    :class:`idcrawl.distributed.worker.RedisWorker` (lanes in Redis)
``DOWNLOADER_MIDDLEWARES``  :class:`idcrawl.distributed.politeness.FleetPoliteness` at 950
==========================  ==============================================================

Nothing outside :mod:`idcrawl.distributed` tests for distributed mode.
"""

from __future__ import annotations

from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object

from idcrawl.addon import mentions_component, raise_dict_priority, setdefault_component
from idcrawl.distributed.connection import distributed

__all__ = ["FLEET_POLITENESS", "WORKER", "Distributed"]

WORKER = "idcrawl.distributed.worker.RedisWorker"
#: Per-host gaps for all workers of a job together.
FLEET_POLITENESS = "idcrawl.distributed.politeness.FleetPoliteness"
#: Last before the download handler: after robots.txt, which may hold a request a while.
FLEET_POLITENESS_ORDER = 950


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
        settings.set("IDCRAWL_WORKER_CLASS", WORKER, priority="spider")
        setdefault_component(settings, "DOWNLOADER_MIDDLEWARES", FLEET_POLITENESS, FLEET_POLITENESS_ORDER,
                             priority="spider")


def _swap_component(settings: BaseSettings, name: str, path: str, replacement: str) -> None:
    """Put ``replacement`` in the place (order and priority) of ``path`` in the component dict ``name``."""
    if not mentions_component(settings, name, path) or mentions_component(settings, name, replacement):
        return
    current = settings.get(name)
    components = current if isinstance(current, BaseSettings) else BaseSettings(settings.getdict(name),
                                                                              settings.getpriority(name) or 0)
    wanted = load_object(path)
    for key in list(components):
        try:
            same = key == path or load_object(key) is wanted
        except (AttributeError, ImportError, NameError, TypeError, ValueError):
            same = False
        if same:
            priority = components.getpriority(key) or 0
            order = components[key]
            components.set(key, None, priority=priority)
            components.set(replacement, order, priority=priority)
    settings.set(name, components, priority=max(settings.getpriority(name) or 0, components.maxpriority()))
