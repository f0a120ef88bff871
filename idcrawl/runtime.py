"""The Scrapy-side companion of the core frontier for one running crawl.

The spider creates it (targets come from spider arguments); the scheduler
pulls ids from it; the spider's callbacks push outcomes into it. It keeps the
``idcrawl/...`` stats current and wakes the engine when a lane that was
waiting can dispense again, so nobody waits for Scrapy's 5 s heartbeat.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Container, Hashable, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Protocol, cast

from idcrawl import default_settings
from idcrawl.core.frontier import Dispatch, Frontier
from idcrawl.core.lanes import Lane, LaneCounts, Outcome
from idcrawl.core.resume import IDENTITY_KEYS, identity, resume_specs
from idcrawl.core.targets import Target
from idcrawl.errors import BadInputError
from idcrawl.recorder import StateRecorder
from idcrawl.state.base import StateStore

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

__all__ = ["DUE_KEY", "META_KEY", "STATS_PREFIX", "IdRuntime", "Limiter"]

logger = logging.getLogger(__name__)

#: ``request.meta`` key of lane requests: ``{"lane": str, "id": int, "target": str}``.
META_KEY = "idcrawl"
#: ``request.meta`` key of a retry's due time (``time.monotonic()``): the
#: scheduler holds the request in its delay queue until then.
DUE_KEY = "idcrawl_due"
#: Prefix of every stat idcrawl writes.
STATS_PREFIX = "idcrawl"

Payload = tuple[str, int, list[Any]]  # (lane, id, outputs): what one found id produced
_COUNT_FIELDS = tuple(f.name for f in fields(LaneCounts))
#: The counters as a tuple: ``dataclasses.astuple`` deep-copies and costs ~40x more per call.
_counts_of = operator.attrgetter(*_COUNT_FIELDS)


class Limiter(Protocol):
    """What the scheduler and the runtime ask of the job limits (``idcrawl.limits.IdLimits``)."""

    def admit(self, slot: str) -> bool:
        """May the download slot take a lane request now (it has free concurrency)?"""

    def taken(self, slot: str) -> None:
        """The slot took a lane request."""

    def closed(self, slot: str) -> bool:
        """A limit stopped the slot: drop its queued requests."""

    def found(self, host: str) -> None:
        """A lane id of a target on ``host`` was found."""


class IdRuntime:
    """Frontier + stats + engine wake-up for one crawl."""

    #: Set by the job-limits extension when a limit is configured; None: no limits.
    limiter: Limiter | None = None

    def __init__(self, targets: Sequence[Target], crawler: Crawler, store: StateStore | None = None) -> None:
        self.crawler = crawler
        self.targets = list(targets)
        settings = crawler.settings
        counts_failed = settings.getbool("IDCRAWL_MARGIN_COUNTS_FAILED", default_settings.IDCRAWL_MARGIN_COUNTS_FAILED)
        neutral = frozenset() if counts_failed else frozenset({Outcome.FAILED})
        self.frontier: Frontier[Payload] = Frontier([], neutral=neutral)
        origins: dict[str, int] = {}
        for target in self.targets:
            self._add_target(target, store, origins)
        self.recorder: StateRecorder | None = None
        if store is not None:
            self.recorder = StateRecorder(
                store, crawler, self.frontier, origins,
                batch=settings.getint("IDCRAWL_STATE_COMMIT_ITEMS", default_settings.IDCRAWL_STATE_COMMIT_ITEMS),
                interval=settings.getfloat(
                    "IDCRAWL_STATE_COMMIT_INTERVAL", default_settings.IDCRAWL_STATE_COMMIT_INTERVAL
                ),
            )

    def _add_target(self, target: Target, store: StateStore | None, origins: dict[str, int]) -> None:
        """Fresh lanes, or the lanes of the resume plan of the target's stored past."""
        state = store.load(target.name) if store is not None else None
        if state is None or target.resume == "none":
            if state is not None and store is not None:
                store.reset(target.name)
            elif target.resume != "none":
                logger.warning("idcrawl: target %r has no stored state; resume=%s starts fresh",
                               target.name, target.resume)
            self.frontier.add_target(target)
            return
        stored, current = state.params, identity(target)
        for key in IDENTITY_KEYS:
            if key in stored and stored[key] != current[key]:
                raise BadInputError(
                    f"target {target.name!r}: {key}={current[key]!r} differs from the stored state "
                    f"({key}={stored[key]!r}); resume=none starts the target over"
                )
        specs = resume_specs(target, state.lanes, state.outcomes, target.resume, target.holes)
        origins.update({key: record.start for key, record in state.lanes.items()})
        known = cast("Container[int] | None", state.outcomes.get(Outcome.FOUND))  # a roaring bitmap
        self.frontier.add_target(target, specs, known_found=known)

    @property
    def stats(self) -> StatsCollector:
        # the crawler's stats exist only once the crawl starts, after the spider
        stats = self.crawler.stats
        assert stats is not None
        return stats

    def open(self) -> None:
        self.stats.set_value(f"{STATS_PREFIX}/targets", len(self.targets))
        self.stats.set_value(f"{STATS_PREFIX}/lanes", len(self.frontier.lanes))
        if self.recorder is not None:
            self.recorder.open()

    # -- dispensing (scheduler side) -------------------------------------------

    def next(self, group_ready: Callable[[Hashable], bool] | None = None) -> Dispatch | None:
        skipped = self.frontier.skipped_found
        dispatch = self.frontier.next(group_ready)
        if self.frontier.skipped_found != skipped:
            self._inc(f"{STATS_PREFIX}/resume/skipped_found", self.frontier.skipped_found - skipped)
        if dispatch is not None:
            self._inc(f"{STATS_PREFIX}/dispensed")
            lane = self.frontier.lanes[dispatch.lane]
            if lane.stopped:
                self._lane_stopped(dispatch.lane, lane)
        return dispatch

    # -- outcomes (spider side) ------------------------------------------------

    def record(
        self, lane_key: str, id_: int, outcome: Outcome, outputs: list[Any] | None = None, *, attempt: int = 1
    ) -> list[Any]:
        """Record an id's final outcome; returns the outputs now safe to emit, in order."""
        payload = (lane_key, id_, outputs) if outputs is not None else None
        frontier = self.frontier
        if lane_key not in frontier.lanes:
            logger.warning("idcrawl: outcome for unknown lane %r (id %s) ignored", lane_key, id_)
            return []
        lane = frontier.lanes[lane_key]
        was_stopped = lane.stopped
        before = _counts_of(lane.counts)
        rec = frontier.record(lane_key, id_, outcome, payload)
        self._inc(f"{STATS_PREFIX}/attempts/{outcome.value}_on/{attempt}")
        self._count(lane_key, lane, before)
        if lane.stopped and not was_stopped:
            self._lane_stopped(lane_key, lane)
        if rec.became_ready:
            self.wake_engine()
        target = frontier.lane_target[lane_key].name
        if outcome is Outcome.FOUND and self.limiter is not None:
            self.limiter.found(frontier.lane_target[lane_key].host)
        if self.recorder is not None:
            self.recorder.outcome(target, outcome, id_)
            for released_lane, released_id, released_outputs in rec.released:
                self.recorder.released(target, released_lane, released_id, released_outputs)
        return [output for _, _, released_outputs in rec.released for output in released_outputs]

    def _count(self, lane_key: str, lane: Lane[Payload], before: tuple[int, ...]) -> None:
        """Move the lane's counters into stats (per lane, and job totals)."""
        for name, old, new in zip(_COUNT_FIELDS, before, _counts_of(lane.counts), strict=True):
            if new != old and name != "dispensed":
                self._inc(f"{STATS_PREFIX}/{name}", new - old)
                self._inc(f"{STATS_PREFIX}/lanes/{lane_key}/{name}", new - old)

    def lane_stopped(self, lane_key: str, lane: Lane[Payload]) -> None:
        """Stats of a lane that stopped (its reason, where it was cut)."""
        self._lane_stopped(lane_key, lane)

    def _lane_stopped(self, lane_key: str, lane: Lane[Payload]) -> None:
        prefix = f"{STATS_PREFIX}/lanes/{lane_key}"
        self.stats.set_value(f"{prefix}/cut_reason", lane.reason)
        if lane.cut_at is not None:
            self.stats.set_value(f"{prefix}/cut_at", lane.cut_at)

    def _inc(self, key: str, count: int = 1) -> None:
        self.stats.inc_value(key, count)

    def wake_engine(self) -> None:
        """Ask the engine to call ``next_request()`` soon.

        Scrapy has no public call for this; ``engine._slot.nextcall`` is what
        ``engine.crawl()`` itself uses. Without it, a lane freed by a late
        outcome would wait for the 5 s heartbeat.
        """
        engine = getattr(self.crawler, "engine", None)
        slot = getattr(engine, "_slot", None)
        nextcall = getattr(slot, "nextcall", None)
        if nextcall is not None:
            nextcall.schedule()

    # -- end of crawl --------------------------------------------------------------

    def abandon_lost(self) -> list[Any]:
        """Outcome ``failed`` for ids whose requests vanished (engine idle)."""
        outputs: list[Any] = []
        for key, lane in self.frontier.lanes.items():
            lost = lane.outstanding() if lane.cut_at is None else []
            if not lost:
                continue
            logger.warning("idcrawl: lane %s: ids %s never got an outcome; counted as failed", key, lost[:10])
            self._inc(f"{STATS_PREFIX}/lost", len(lost))
            for id_ in lost:
                outputs.extend(self.record(key, id_, Outcome.FAILED))
        return outputs

    def close(self, reason: str) -> None:
        """Spider closing: lanes still running stop with the close reason; last commit."""
        for key, lane in self.frontier.lanes.items():
            if not lane.stopped:
                self.frontier.close_lane(key, reason)
            self._lane_stopped(key, lane)
            self.stats.set_value(f"{STATS_PREFIX}/lanes/{key}/cursor", lane.first_undecided)
        held = sum(lane.held for lane in self.frontier.lanes.values())
        if held:
            logger.info("idcrawl: %d found ids held at close were not emitted (reason %s)", held, reason)
            self._inc(f"{STATS_PREFIX}/held_at_close", held)
        if self.recorder is not None:
            counts = {k.split("/", 1)[1]: v for k, v in self.stats.get_stats().items()
                      if k.startswith(f"{STATS_PREFIX}/") and k.count("/") == 1 and isinstance(v, int)}
            self.recorder.close(reason, counts)
            self.stats.set_value(f"{STATS_PREFIX}/state/commits", self.recorder.commits)
