"""``IdCrawl``: the Scrapy add-on that wires idcrawl into a project in one line,
``ADDONS = {"idcrawl.addon.IdCrawl": 0}``; and ``IdSeqNeeds``, the smaller add-on the ``idseq``
spider lists for itself. Each piece is written at Scrapy's ``addon`` priority and only when the
project does not list it, so any one stays overridable: docs/addon.md has the table.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.settings import BaseSettings, get_settings_priority
from scrapy.utils.misc import load_object

from idcrawl.components import (
    ADDON_PRIORITY,
    NamedAddon,
    component_disabled,
    raise_dict_priority,
    setdefault_component,
    swap_component,
)
from idcrawl.config import setting
from idcrawl.errors import install_log_filter
from idcrawl.runtime import is_id_crawl
from idcrawl.settings_profiles import apply_profile
from idcrawl.validation import validate_settings

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["BOUNDS", "POLITE", "POLITENESS", "IdCrawl", "IdSeqNeeds", "set_bounds", "wire_needs"]

logger = logging.getLogger(__name__)

SCHEDULER = "idcrawl.scheduler.IdScheduler"
ATTEMPTS_MIDDLEWARE = "idcrawl.downloadermiddlewares.attempts.IdAttemptsMiddleware"
ATTEMPTS_ORDER = 549  # beside Scrapy's RetryMiddleware (550), which lane requests skip (dont_retry)
REDIRECTS_MIDDLEWARE = "idcrawl.downloadermiddlewares.redirects.IdRedirectsMiddleware"
REDIRECTS_ORDER = 40  # before robots.txt (100): a redirect to another host sends it nothing, not even for robots.txt
WARC_MIDDLEWARE = "idcrawl.archive.middleware.IdWarcMiddleware"
WARC_ORDER = 950  # next to the downloader (past HttpCompression 590, HttpCache 900): the body as received
#: Bounds of an id crawl unless the project, the spider or -s set them (a profile sets its own): a body over
#: DOWNLOAD_MAXSIZE is cancelled (the id fails), a response slower than DOWNLOAD_TIMEOUT fails its attempt.
BOUNDS: dict[str, int] = {
    "DOWNLOAD_MAXSIZE": 32 * 1024 * 1024,
    "DOWNLOAD_WARNSIZE": 8 * 1024 * 1024,
    "DOWNLOAD_TIMEOUT": 30,
}
#: What the add-on makes polite by default, unless the project, the spider or -s set it: robots.txt obeyed
#: (Scrapy's own default is False; its startproject template sets True). The per-host gaps are
#: IDCRAWL_POLITENESS_* (on by default, idcrawl.default_settings) applied by the IdPoliteness extension.
POLITE: dict[str, bool] = {"ROBOTSTXT_OBEY": True}
SOFT404_MIDDLEWARE = "idcrawl.spidermiddlewares.soft404.IdSoft404Middleware"
SOFT404_ORDER = 1100  # spider side of Scrapy's own (up to 1000): its probes pass them all, as start requests do
SCRAPY_ROBOTS = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
ID_ROBOTS = "idcrawl.downloadermiddlewares.robotstxt.IdRobotsTxtMiddleware"
ROBOTS_ORDER = 100  # Scrapy's own position for robots.txt
SCRAPY_METAREFRESH = "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware"
ID_METAREFRESH = "idcrawl.downloadermiddlewares.metarefresh.IdMetaRefreshMiddleware"
METAREFRESH_ORDER = 580  # Scrapy's own position for meta refresh
PROGRESS = "idcrawl.extensions.progress.IdProgress"
#: The politeness extension (the seed's per-host gaps, IDCRAWL_POLITENESS_*): an idseq spider has it with or
#: without :class:`IdCrawl` (IdSeqNeeds).
POLITENESS = "idcrawl.extensions.politeness.IdPoliteness"
EXTENSIONS = {
    PROGRESS: 500,
    POLITENESS: 100,
    "idcrawl.extensions.limits.IdLimits": 200,
}
DUPEFILTER = "idcrawl.dupefilters.IdDupeFilter"
CONTENT_PIPELINE = "idcrawl.pipelines.ContentDuplicates"
FEED_STORAGE = "idcrawl.storage.GuardedFileFeedStorage"
SCRAPY_SPIDERSTATE = "scrapy.extensions.spiderstate.SpiderState"
ID_SPIDERSTATE = "idcrawl.extensions.spiderstate.IdSpiderState"
SPIDERSTATE_ORDER = 0  # Scrapy's own
SCRAPY_LOGSTATS = "scrapy.extensions.logstats.LogStats"
ID_LOGSTATS = "idcrawl.extensions.progress.IdLogStats"
LOGSTATS_ORDER = 0  # Scrapy's own
FEED_SCHEMES = ("", "file")  # Scrapy's FileFeedStorage
CONTENT_ORDER = 100  # early, so that later pipelines see its duplicate_of marks


def _set_unless_given(settings: BaseSettings, values: dict[str, object]) -> None:
    for name, value in values.items():
        if (settings.getpriority(name) or 0) < get_settings_priority(ADDON_PRIORITY):
            settings.set(name, value, priority=ADDON_PRIORITY)


def set_bounds(settings: BaseSettings) -> None:
    """idcrawl's :data:`BOUNDS` at ``addon`` priority, each unless something above Scrapy's defaults set it."""
    _set_unless_given(settings, dict(BOUNDS))


def wire_needs(settings: BaseSettings, priority: int | str) -> None:
    """The middlewares an id crawl cannot run without, each unless listed, and the :data:`BOUNDS`:
    the attempts middleware (lane requests carry ``dont_retry``), the redirects middleware and the
    soft-404 probe (without it ``soft404_probe`` learns nothing)."""
    setdefault_component(settings, "DOWNLOADER_MIDDLEWARES", ATTEMPTS_MIDDLEWARE, ATTEMPTS_ORDER, priority=priority)
    setdefault_component(settings, "DOWNLOADER_MIDDLEWARES", REDIRECTS_MIDDLEWARE, REDIRECTS_ORDER, priority=priority)
    # off (NotConfigured) without IDCRAWL_WARC_DIR
    setdefault_component(settings, "DOWNLOADER_MIDDLEWARES", WARC_MIDDLEWARE, WARC_ORDER, priority=priority)
    setdefault_component(settings, "SPIDER_MIDDLEWARES", SOFT404_MIDDLEWARE, SOFT404_ORDER, priority=priority)
    set_bounds(settings)


class IdSeqNeeds(NamedAddon):
    """Add-on the ``idseq`` spider lists for itself: what an id crawl cannot run without, so that a
    project without :class:`IdCrawl` keeps working. An ``IdScheduler`` (forced: another scheduler would
    never dispense an id; a project's subclass is kept), :func:`wire_needs` and the politeness extension
    (polite by default, as with the add-on), unless listed, at ``spider`` priority."""

    #: Before the job's profile (-1) and idcrawl's add-on (0): as the spider's own wiring, first.
    priority = -10

    @classmethod
    def add_to(cls, settings: BaseSettings) -> None:
        """List this add-on in ``ADDONS`` (the ``idseq`` spider's ``update_settings`` does), unless listed."""
        settings.setdefault_in_component_priority_dict("ADDONS", cls, cls.priority)
        raise_dict_priority(settings, "ADDONS", "spider")

    def update_settings(self, settings: BaseSettings) -> None:
        from idcrawl.scheduler import IdScheduler

        current = settings.get("SCHEDULER")
        scheduler = load_object(current) if current else None
        # the MRO, not issubclass(): Scrapy's BaseSchedulerMeta makes every scheduler a "subclass" of any other
        if not (isinstance(scheduler, type) and IdScheduler in scheduler.__mro__):
            settings.set("SCHEDULER", SCHEDULER, priority="spider")
        wire_needs(settings, "spider")
        setdefault_component(settings, "EXTENSIONS", POLITENESS, EXTENSIONS[POLITENESS], priority="spider")


class IdCrawl(NamedAddon):
    """The idcrawl add-on: ``ADDONS = {"idcrawl.addon.IdCrawl": 0}``."""

    def __init__(self, crawler: Crawler | None = None) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdCrawl:
        return cls(crawler)

    def update_settings(self, settings: BaseSettings) -> None:
        # per crawler, not in update_pre_crawler_settings: an unknown profile raised there (while
        # Scrapy builds its crawler process) would be a traceback instead of one line. For idseq
        # spiders the profile is already applied (their update_settings runs first); again is a no-op.
        install_log_filter()  # a crawl starts: its refusals of bad input are one line (idcrawl.errors)
        apply_profile(settings)
        if self.crawler is None or not is_id_crawl(self.crawler):
            # every IDCRAWL_* setting, one line for the first bad one; an id crawl's spider checked
            # them already (from_crawler), and the JobProfile add-on checks what a job's profile brings
            validate_settings(settings)
        settings.set("SCHEDULER", SCHEDULER, priority=ADDON_PRIORITY)
        # Bloom-filter request dedup for follow-up pages that outlives the run (lane requests are never filtered)
        settings.set("DUPEFILTER_CLASS", DUPEFILTER, priority=ADDON_PRIORITY)
        wire_needs(settings, ADDON_PRIORITY)
        _set_unless_given(settings, dict(POLITE))
        swap_component(settings, "DOWNLOADER_MIDDLEWARES", SCRAPY_ROBOTS, ID_ROBOTS, ROBOTS_ORDER)
        swap_component(settings, "DOWNLOADER_MIDDLEWARES", SCRAPY_METAREFRESH, ID_METAREFRESH, METAREFRESH_ORDER)
        for path, order in EXTENSIONS.items():
            setdefault_component(settings, "EXTENSIONS", path, order)
        swap_component(settings, "EXTENSIONS", SCRAPY_SPIDERSTATE, ID_SPIDERSTATE, SPIDERSTATE_ORDER)
        progress_on = not component_disabled(settings, "EXTENSIONS", PROGRESS)
        if progress_on and (setting(settings, "IDCRAWL_PROGRESS_INTERVAL") or 0) > 0:
            # idcrawl's progress lines in place of Scrapy's "Crawled N pages" line, not beside it
            swap_component(settings, "EXTENSIONS", SCRAPY_LOGSTATS, ID_LOGSTATS, LOGSTATS_ORDER)
        # a local feed's failed write closes the crawl (idcrawl_storage_error) instead of a traceback per item
        for scheme in FEED_SCHEMES:
            setdefault_component(settings, "FEED_STORAGES", scheme, FEED_STORAGE)  # type: ignore[arg-type]
        # marks (IDCRAWL_CONTENT_DUPLICATES = "mark", the default) or drops items whose body an earlier item had
        setdefault_component(settings, "ITEM_PIPELINES", CONTENT_PIPELINE, CONTENT_ORDER)
