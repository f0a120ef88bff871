"""``IdProgress``: a periodic log line per target that people can follow;
``IdStateLoader``: the durable state read after the other extensions.

Modelled on Scrapy's LogStats: one looping call, interval from a setting,
``NotConfigured`` when off or when the spider is not an id crawl.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import create_looping_call

from idcrawl import default_settings
from idcrawl.runtime import IdRuntime

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

__all__ = ["IdProgress", "IdStateLoader", "progress_lines"]

logger = logging.getLogger(__name__)


def progress_lines(runtime: IdRuntime, done_before: dict[str, int], interval: float) -> list[str]:
    """One line per target: ids decided, outcomes, lane cursors, rate, share done."""
    lines = []
    frontier = runtime.frontier
    by_target: dict[int, list[tuple[str, Any]]] = {}  # one pass: a scan per target is quadratic in targets
    for key, lane in frontier.lanes.items():
        by_target.setdefault(id(frontier.lane_target[key]), []).append((key, lane))
    for target in runtime.targets:
        lanes = by_target.get(id(target), [])
        found = sum(lane.counts.found for _, lane in lanes)
        missing = sum(lane.counts.missing for _, lane in lanes)
        failed = sum(lane.counts.failed for _, lane in lanes)
        done = found + missing + failed
        rate = (done - done_before.get(target.name, 0)) / interval if interval else 0.0
        done_before[target.name] = done
        parts = []
        for key, lane in lanes:
            direction = frontier.lane_direction[key]
            state = f"{lane.reason}@{lane.cut_at}" if lane.cut_at is not None else (lane.reason or "at")
            share = lane.share_done()
            share_text = f" {share:.0%}" if share is not None else ""
            parts.append(f"{direction} {state} {lane.first_undecided}{share_text}")
        lines.append(
            f"{target.name}: {done} ids done (found {found}, missing {missing}, failed {failed}), "
            f"{rate:.1f} ids/s; {'; '.join(parts)}"
        )
    return lines


class IdProgress:
    def __init__(self, crawler: Crawler, interval: float) -> None:
        self.crawler = crawler
        self.interval = interval
        self._done: dict[str, int] = {}
        self._task: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdProgress:
        interval = crawler.settings.getfloat(
            "IDCRAWL_PROGRESS_INTERVAL", default_settings.IDCRAWL_PROGRESS_INTERVAL
        )
        if interval <= 0:
            raise NotConfigured
        ext = cls(crawler, interval)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_opened(self, spider: Spider) -> None:
        if not isinstance(getattr(spider, "idcrawl", None), IdRuntime):
            return
        self._task = create_looping_call(self.log, spider)
        self._task.start(self.interval, now=False)

    def log(self, spider: Spider) -> None:
        runtime: IdRuntime = spider.idcrawl  # type: ignore[attr-defined]
        for line in progress_lines(runtime, self._done, self.interval):
            logger.info("progress %s", line, extra={"spider": spider})

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._task is not None and self._task.running:
            self._task.stop()
        if isinstance(getattr(spider, "idcrawl", None), IdRuntime):
            self._done.clear()
            for line in progress_lines(spider.idcrawl, self._done, 0):  # type: ignore[attr-defined]
                logger.info("final %s", line, extra={"spider": spider})


class IdStateLoader:
    """Reads an id crawl's durable state once every other extension is built.

    The idseq spider is created before the extensions, but an extension may
    bring the state file in when it is built (Zyte's DotScrapy Persistence
    downloads ``.scrapy`` then). Built last (the spider adds it at order
    ``STATE_LOADER_ORDER``), this one reads the state after them and still
    before the engine exists, so a corrupt, locked or foreign state stops the
    crawl with one line and a non-zero exit, like a bad argument.
    """

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdStateLoader:
        runtime = getattr(crawler.spider, "idcrawl", None)
        if not isinstance(runtime, IdRuntime):
            raise NotConfigured
        runtime.load_state()
        return cls()


#: ``EXTENSIONS`` order of :class:`IdStateLoader`: after every usual extension.
STATE_LOADER_ORDER = 10_000
