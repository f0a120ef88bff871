"""``IdProgress``: what an id crawl tells people at INFO (plan, progress, summary).

Modelled on Scrapy's LogStats: settings read once, behaviour hung on signals.
The lines themselves are written by :mod:`idcrawl.core.talk` from plain
numbers; this module only copies the frontier's lanes into them.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.extensions.logstats import LogStats
from scrapy.utils.asyncio import call_later

from idcrawl.config import config_of
from idcrawl.core.lanes import Lane
from idcrawl.core.talk import (
    LaneInfo,
    Tally,
    TargetInfo,
    done_by_target,
    plan_lines,
    progress_gaps,
    progress_lines,
    summary_lines,
)
from idcrawl.runtime import STATS_PREFIX, IdRuntime, runtime_of
from idcrawl.settings_profiles import log_profile

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler

__all__ = ["IdLogStats", "IdProgress", "shown_lanes", "snapshot"]

logger = logging.getLogger(__name__)


#: the lane counters the runtime also keeps as job totals (``idcrawl/<name>`` stats)
_TOTALS = ("found", "missing", "failed", "disallowed", "past_cut", "overshoot", "emitted")


def shown_lanes(runtime: IdRuntime, shown: int) -> dict[str, list[str]]:
    """The lane keys of the first ``shown`` targets (one pass over the lanes)."""
    frontier = runtime.frontier
    keys: dict[str, list[str]] = {name: [] for name in islice(frontier.targets, max(0, shown))}
    for key, target in frontier.lane_target.items():
        own = keys.get(target.name)
        if own is not None:
            own.append(key)
    return keys


def snapshot(runtime: IdRuntime, shown: Mapping[str, Sequence[str]], *, full: bool) -> tuple[list[TargetInfo], Tally]:
    """The ``shown`` targets (name -> lane keys) lane by lane, and the sums of the other targets.

    ``full``: the others are summed lane by lane (their lanes' states too: one
    pass over every lane, for the plan and the summary); otherwise from the
    runtime's job totals (stats) minus the shown lanes, in time independent of
    the job's size (progress lines of a job of 650,000 targets).
    """
    frontier = runtime.frontier
    targets = []
    rest = Tally(targets=len(frontier.targets) - len(shown))
    notes = runtime.resume_notes
    for name, keys in shown.items():
        infos = []
        for key in keys:
            lane, counts, direction = frontier.lanes[key], frontier.lanes[key].counts, frontier.lane_direction[key]
            infos.append(LaneInfo(
                key, direction, lane.start, lane.step, lane.stop, 0 if direction == "holes" else lane.margin,
                lane.first_undecided, lane.reason, lane.cut_at, lane.last_found, counts.found, counts.missing,
                counts.failed, counts.disallowed, counts.past_cut, counts.overshoot, counts.emitted,
            ))
        targets.append(TargetInfo(name, frontier.targets[name].url, tuple(infos), notes.get(name)))
    if not rest.targets:
        return targets, rest
    if full:
        skip = {key for keys in shown.values() for key in keys}
        totals = dict.fromkeys(_TOTALS, 0)
        reasons: Counter[str | None] = Counter()
        for key, state in frontier.lane_states():  # a lane not reached yet: its reason, its counts all 0
            if key in skip:
                continue
            if isinstance(state, Lane):
                lane_counts = state.counts
                for name in _TOTALS:
                    totals[name] += getattr(lane_counts, name)
                state = state.reason
            reasons[state] += 1
        for name, total in totals.items():
            setattr(rest, name, total)
        for reason, count in reasons.items():
            rest.add_lanes(reason, count)
        rest.resumed = sum(1 for name, note in notes.items() if name not in shown and note.startswith("resumed"))
        return targets, rest
    stats = runtime.stats
    rest.lanes = len(frontier.lanes) - sum(len(keys) for keys in shown.values())
    for name in _TOTALS:
        total = stats.get_value(f"{STATS_PREFIX}/{name}") or 0
        if name == "found":  # ids an earlier run found are counted found in their lanes, not in the stat
            total += frontier.skipped_found
        mine = sum(getattr(lane, name) for target in targets for lane in target.lanes)
        setattr(rest, name, max(0, total - mine))
    return targets, rest


class IdProgress:
    """Logs the plan when the spider opens, progress lines while it runs, a summary when it closes.

    The first progress line comes ``IDCRAWL_PROGRESS_FIRST`` seconds after the
    spider opened; each gap then doubles until it reaches
    ``IDCRAWL_PROGRESS_INTERVAL`` (``0``: no progress lines; the plan and the
    summary are still logged). ``IDCRAWL_PROGRESS_TARGETS`` targets get lines
    of their own, the others one line of sums.
    """

    def __init__(self, crawler: Crawler, interval: float, first: float, shown: int) -> None:
        self.crawler = crawler
        self.interval = interval
        self.shown = shown
        self._gaps = progress_gaps(first, interval)
        self._before: dict[str, int] = {}
        self._opened_at: float | None = None
        self._last_at = 0.0
        self._call: Any = None
        self._shown: dict[str, list[str]] = {}
        self._frontier: object = None  # the frontier whose lanes _shown lists

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdProgress:
        config = config_of(crawler)
        ext = cls(crawler, max(0.0, config.progress_interval), config.progress_first, config.progress_targets)
        log_profile(crawler.settings)  # the settings profile and what it comes to: one line when the crawl starts
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def _runtime(self, spider: Spider) -> IdRuntime | None:
        return runtime_of(self.crawler)

    def spider_opened(self, spider: Spider) -> None:
        runtime = self._runtime(spider)
        if runtime is None:
            return
        self._opened_at = self._last_at = time.monotonic()
        targets, rest = self._snapshot(runtime, full=True)
        for line in plan_lines(targets, state=runtime.describe_state(), rest=rest):
            logger.info("%s", line, extra={"spider": spider})
        self._before = done_by_target(targets, rest)
        gap = next(self._gaps, None)
        if gap is not None:
            self._call = call_later(gap, self._tick, spider)

    def _snapshot(self, runtime: IdRuntime, *, full: bool) -> tuple[list[TargetInfo], Tally]:
        frontier = runtime.frontier
        # targets were added (Redis feed), or a new frontier plans the next wave (watch mode)
        if len(self._shown) < min(self.shown, len(frontier.targets)) or frontier is not self._frontier:
            self._shown, self._frontier = shown_lanes(runtime, self.shown), frontier
        return snapshot(runtime, self._shown, full=full)

    def _tick(self, spider: Spider) -> None:
        self._call = None
        try:
            self.log(spider)
        finally:
            self._call = call_later(next(self._gaps), self._tick, spider)

    def log(self, spider: Spider) -> None:
        """One progress line per shown target (and one for the rest), rates since the last line."""
        runtime = self._runtime(spider)
        if runtime is None:
            return
        now = time.monotonic()
        targets, rest = self._snapshot(runtime, full=False)
        for line in progress_lines(targets, seconds=now - self._last_at, before=self._before, rest=rest,
                                   scope=runtime.counts_scope):
            logger.info("%s", line, extra={"spider": spider})
        self._before, self._last_at = done_by_target(targets, rest), now

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._call is not None:
            self._call.cancel()
            self._call = None
        runtime = self._runtime(spider)
        if runtime is None or self._opened_at is None:
            return
        targets, rest = self._snapshot(runtime, full=True)
        for line in summary_lines(targets, seconds=time.monotonic() - self._opened_at, reason=reason,
                                  state=runtime.describe_state(), rest=rest, scope=runtime.counts_scope,
                                  known=runtime.frontier.skipped_found):
            logger.info("%s", line, extra={"spider": spider})


class IdLogStats(LogStats):
    """Scrapy's LogStats without its "Crawled N pages" line in an id crawl, where idcrawl's progress
    lines say more (its final ``responses_per_minute`` / ``items_per_minute`` stats are kept); any other
    spider's crawl logs it as Scrapy does. The add-on puts it in LogStats's place while
    ``IDCRAWL_PROGRESS_INTERVAL`` is above 0, unless the project lists either (docs/addon.md)."""

    crawler: Crawler | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        ext = super().from_crawler(crawler)
        ext.crawler = crawler
        return ext

    def log(self, spider: Spider) -> None:
        if self.crawler is not None and runtime_of(self.crawler) is not None:
            self.calculate_stats()  # the rates stay up to date; idcrawl's progress line tells them
            return
        super().log(spider)
