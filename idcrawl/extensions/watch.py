"""``IdWatch``: watch mode (``-a watch=true`` or ``IDCRAWL_WATCH``), one ``scrapy crawl`` that keeps running.

Keeps the spider open between ``resume=due`` waves, sleeps until the next falls due
(:func:`idcrawl.core.watch.next_wave_at`) and starts it. docs/recrawl.md ("Watch mode"); how a wave
ends and the next starts, in one process and in a fleet: docs/architecture.md ("Module notes").
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.asyncio import call_later

from idcrawl._scrapy import close_spider
from idcrawl.config import config_of
from idcrawl.core.clock import Clock, ClockError, format_time, stamp
from idcrawl.core.recrawl import duration_text
from idcrawl.core.watch import TICK, late_times, next_wave_at, real_sleep
from idcrawl.errors import BadInputError
from idcrawl.runtime import STATS_PREFIX, runtime_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from idcrawl.spidermiddlewares.scope import IdScopeMiddleware

__all__ = ["IdWatch"]

logger = logging.getLogger(__name__)

PREFIX = f"{STATS_PREFIX}/watch"
#: Real seconds between two looks at a fleet's reading of the run's sitemaps, while another worker reads them
SITEMAP_POLL = 0.2

class IdWatch:
    """Keeps a watching crawl open between its waves and starts each wave when it falls due."""

    def __init__(self, crawler: Crawler, speed: float) -> None:
        self.crawler = crawler
        self.speed = speed
        self.waves = 0
        self._timer: Any = None
        self._wave_at = 0.0  # the clock time of the next wave, while asleep
        self._slept_from = 0.0  # the clock time the sleep began
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self._spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)

    @classmethod
    def install(cls, crawler: Crawler) -> IdWatch | None:
        """The watch of ``crawler``'s id crawl when watch mode is on (``IDCRAWL_WATCH``, which
        ``-a watch=true`` sets), else None. The idseq spider installs it when it is created, after
        its own idle handler (an ``EXTENSIONS`` dict given on the command line cannot drop it);
        bad input is one line (:class:`~idcrawl.errors.BadInputError`), before any state is read."""
        config = config_of(crawler)  # checked by the spider before (validate_settings)
        if not config.watch:
            return None
        name = getattr(crawler.spidercls, "name", "idseq")
        if not config.state:
            raise BadInputError(f"{name}: bad input: watch=true needs the state (IDCRAWL_STATE = True): "
                                "each wave is planned from the schedules the last one wrote")
        speed = config.watch_speed
        try:
            fixed = Clock.from_setting(config.now).fixed
        except ClockError:
            fixed = True  # the runtime refuses the value in its own line
        if speed != 1 and not fixed:
            raise BadInputError(f"bad setting: IDCRAWL_WATCH_SPEED={speed:g}: needs a fixed clock (IDCRAWL_NOW); "
                                "the real clock runs at speed 1")
        return cls(crawler, speed)

    def _spider_opened(self, spider: Any = None) -> None:  # the first wave: the run itself
        self.waves = 1
        self._stats().set_value(f"{PREFIX}/waves", 1)

    def _stats(self) -> Any:
        stats = self.crawler.stats
        assert stats is not None
        return stats

    def _spider_idle(self, spider: Any = None) -> None:
        if self._timer is not None:  # asleep until the next wave
            raise DontCloseSpider
        runtime = runtime_of(self.crawler)
        engine = self.crawler.engine
        assert runtime is not None and engine is not None
        if not runtime.frontier.finished or not engine.spider_is_idle():
            return  # the wave goes on (the spider's idle handler keeps the engine open)
        runtime.end_wave()
        if self._plan_next():
            raise DontCloseSpider

    def _plan_next(self) -> bool:
        """After the wave's close: sleep until the next wave (True), or nothing will fall due again (False).
        A fleet's worker first waits while another worker still reads the run's sitemaps (what they make
        due wakes the next wave: ``Worker.sitemaps_pending``, ``watch_evidence``)."""
        runtime = runtime_of(self.crawler)
        assert runtime is not None
        worker = runtime.worker  # a LocalWorker, or a RedisWorker of a watching fleet
        now = runtime.clock.now()
        try:
            if worker.sitemaps_pending():
                self._timer = call_later(SITEMAP_POLL, self._sitemaps_polled)
                return True
            schedules, pages, evidence = worker.watch_schedules(), worker.watch_pages(), worker.watch_evidence()
        except BadInputError as exc:  # a fleet's schedules in Redis could not be read
            logger.error("%s", exc)
            close_spider(self.crawler, "idcrawl_watch_error")
            return False
        late = late_times(runtime.targets, schedules)  # re-probes of late ids wake a wave of their own
        at = next_wave_at(schedules, now, pages=[*pages, *late], harvests=self._harvests())
        if evidence is not None:  # made due by a sitemap: at its time, even past (the fleet agrees on it)
            at = evidence + TICK if at is None else min(at, evidence + TICK)
        if at is None:
            logger.info("idcrawl: watch: wave %d done; nothing will fall due again, the crawl ends", self.waves)
            return False
        sleep = real_sleep(at, now, self.speed)
        self._wave_at, self._slept_from = at, now
        self._stats().set_value(f"{PREFIX}/next_wave", stamp(at))
        logger.info("idcrawl: watch: wave %d done; next wave at %s (in %s%s)", self.waves, format_time(at),
                    duration_text(max(0.0, at - now)), "" if self.speed == 1 else f", {sleep:.3g} s of real time")
        self._timer = call_later(sleep, self._wake)
        return True

    def _sitemaps_polled(self) -> None:
        """Waiting for another worker's reading of the run's sitemaps: plan again (the crawl ends when
        nothing will fall due)."""
        self._timer = None
        if not self._plan_next():
            close_spider(self.crawler, "finished")

    def _wake(self) -> None:
        runtime = runtime_of(self.crawler)
        assert runtime is not None
        clock = runtime.clock
        if clock.fixed:
            clock.set(max(self._wave_at, clock.now()))
        elif clock.now() <= self._wave_at:  # the real clock is a little behind the timer: sleep the rest
            self._timer = call_later(real_sleep(self._wave_at, clock.now()) + 0.001, self._wake)
            return
        self._timer = None
        stats = self._stats()
        stats.inc_value(f"{PREFIX}/slept", clock.now() - self._slept_from)
        runtime.wave_at = self._wave_at  # a fleet's workers name the wave by it (idcrawl.distributed.worker)
        try:
            runtime.next_wave()
        except BadInputError as exc:  # the state became unusable between waves (a Redis server gone)
            logger.error("%s", exc)
            close_spider(self.crawler, "idcrawl_watch_error")
            return
        scope = self._scope()
        if scope is not None:  # crawl scope: the wave is a run of the URL queue too
            scope.next_wave()
        if runtime.scope or runtime.sitemaps:  # the sitemaps (seeds, evidence): read again each wave, once
            from idcrawl.sitemaps import next_wave

            next_wave(self.crawler)
        if runtime.limiter is not None:  # the job limits (idcrawl.extensions.limits.IdLimits): per process
            runtime.limiter.new_wave()
        self.waves += 1
        stats.set_value(f"{PREFIX}/waves", self.waves)
        logger.info("idcrawl: watch: wave %d at %s", self.waves, format_time(clock.now()))
        runtime.wake_engine()

    def _scope(self) -> IdScopeMiddleware | None:
        """The crawl scope's middleware (``IdScopeMiddleware``: its URL queue), or None: no crawl scope."""
        runtime = runtime_of(self.crawler)
        if runtime is None or not runtime.scope:
            return None
        from idcrawl.spidermiddlewares.scope import IdScopeMiddleware

        return cast("IdScopeMiddleware | None", self.crawler.get_spider_middleware(IdScopeMiddleware))

    def _harvests(self) -> list[float]:
        """The URL queue's earliest next harvest (a crawl profile's ``revisit``), if it waits for one."""
        runtime = runtime_of(self.crawler)
        queue = runtime.url_queue if runtime is not None and self._scope() is not None else None
        at = queue.next_harvest() if queue is not None else None
        return [] if at is None else [at]

    def _spider_closed(self, spider: Any = None, reason: str = "") -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
