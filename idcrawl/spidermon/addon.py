"""``IDCRAWL_SPIDERMON``: turn on Spidermon with idcrawl's monitor suite.

:class:`Monitoring`, an add-on the ``idseq`` spider adds for itself; it does not import Spidermon.
The suite: :mod:`idcrawl.spidermon.monitors`.
"""

from __future__ import annotations

import importlib.util

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings
from scrapy.utils.misc import load_object

from idcrawl.components import NamedAddon
from idcrawl.config import setting
from idcrawl.errors import BadInputError

__all__ = ["EXTENSION", "EXTENSION_PRIORITY", "SUITE", "Monitoring", "enable_spidermon"]

EXTENSION = "spidermon.contrib.scrapy.extensions.Spidermon"
#: Spidermon's ``spider_closed`` must run after the handlers that write the final
#: figures: the spider's own (connected first), CoreStats (0: the finish reason),
#: IdLimits (200) and IdProgress (500). Signal handlers run in the order the
#: extensions were built, lowest number first.
EXTENSION_PRIORITY = 1000
SUITE = "idcrawl.spidermon.monitors.IdCrawlMonitorSuite"


def enable_spidermon(settings: BaseSettings) -> None:
    """Spidermon's extension and idcrawl's close suite, each overridable.

    ``SPIDERMON_ENABLED`` is set at ``addon`` priority, so a project or ``-s``
    value still wins; the extension is added only if ``EXTENSIONS`` does not
    name it (``None`` there turns it off); the suite is appended to whatever
    ``SPIDERMON_SPIDER_CLOSE_MONITORS`` holds, unless that already lists it or a
    subclass of it (one that adds actions, say).
    """
    if importlib.util.find_spec("spidermon") is None:
        raise BadInputError(
            "IDCRAWL_SPIDERMON=True: spidermon is not installed (pip install 'idcrawl[monitoring]')"
        )
    settings.set("SPIDERMON_ENABLED", True, priority="addon")
    settings.setdefault_in_component_priority_dict("EXTENSIONS", load_object(EXTENSION), EXTENSION_PRIORITY)
    suite = load_object(SUITE)
    listed = [load_object(s) if isinstance(s, str) else s for s in settings.getlist("SPIDERMON_SPIDER_CLOSE_MONITORS")]
    if not any(isinstance(s, type) and issubclass(s, suite) for s in listed):  # a subclass with actions is enough
        settings.add_to_list("SPIDERMON_SPIDER_CLOSE_MONITORS", SUITE)


class Monitoring(NamedAddon):
    """Scrapy add-on: with ``IDCRAWL_SPIDERMON`` true, :func:`enable_spidermon`."""

    #: After idcrawl's add-on (0) and the profile add-ons (below 0), which may set the switch.
    priority = 100

    @classmethod
    def add_to(cls, settings: BaseSettings) -> None:
        """List this add-on in ``ADDONS`` (the ``idseq`` spider's ``update_settings`` does), unless listed.

        ``ADDONS`` as a whole is raised to ``spider`` priority: ``scrapy crawl``
        merges the project's settings into the crawler's again after the spider's
        ``update_settings``, and that replaces a dict of no higher priority.
        """
        settings.setdefault_in_component_priority_dict("ADDONS", cls, cls.priority)
        wanted = SETTINGS_PRIORITIES["spider"]
        if (settings.getpriority("ADDONS") or 0) < wanted:
            settings.set("ADDONS", settings["ADDONS"], priority=wanted)

    def update_settings(self, settings: BaseSettings) -> None:
        if setting(settings, "IDCRAWL_SPIDERMON"):
            enable_spidermon(settings)
