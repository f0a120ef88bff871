"""The Scrapy-side companion of the core frontier for one running crawl.

The spider creates it (targets come from spider arguments); the scheduler
pulls ids from it; the spider's callbacks push outcomes into it. It keeps the
``idcrawl/...`` stats current and wakes the engine when a lane that was
waiting can dispense again, so nobody waits for Scrapy's 5 s heartbeat.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Container, Hashable, Sequence, Sized
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from pyroaring import BitMap64

from idcrawl import _scrapy, default_settings
from idcrawl.core.frontier import Dispatch, Frontier, lane_specs
from idcrawl.core.lanes import Lane, LaneCounts, Outcome
from idcrawl.core.resume import IDENTITY_KEYS, identity, resume_specs
from idcrawl.core.talk import resume_text
from idcrawl.core.targets import Target
from idcrawl.errors import BadInputError
from idcrawl.state.base import StateStore
from idcrawl.state.recorder import StateRecorder, overwritten_feeds, recover_feed_tails

if TYPE_CHECKING:
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


def _rebind(payload: Payload | None, lane_key: str, id_: int) -> Payload:
    """Another lane's payload for a shared id (its items once; ``None``: already emitted)."""
    return (lane_key, id_, payload[2] if payload is not None else [])


class Limiter(Protocol):
    """What the scheduler and the runtime ask of the job limits (``idcrawl.extensions.limits.IdLimits``)."""

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

    def __init__(
        self,
        targets: Sequence[Target],
        crawler: Crawler,
        store: StateStore | Callable[[], StateStore | None] | None = None,
    ) -> None:
        """``store`` may be a function that opens it: then the state is read in :meth:`open`.

        The spider passes a function, because the state must be read after the
        extensions are built: an extension such as Zyte's DotScrapy Persistence
        brings the state file in when it is built. ``IdStateLoader``, the last
        extension, reads it (a bad state then stops the crawl as cleanly as bad
        arguments do); without it, the scheduler's ``open`` does.
        """
        self.crawler = crawler
        self.targets = list(targets)
        settings = crawler.settings
        counts_failed = settings.getbool("IDCRAWL_MARGIN_COUNTS_FAILED", default_settings.IDCRAWL_MARGIN_COUNTS_FAILED)
        neutral = frozenset() if counts_failed else frozenset({Outcome.FAILED})
        self.frontier: Frontier[Payload] = Frontier([], neutral=neutral, rebind=_rebind)
        self._orphans: list[Any] = []  # outputs released at dispatch (overlapping targets), not yet emitted
        self.recorder: StateRecorder | None = None
        #: target name -> what it takes from earlier runs, for the plan line (``idcrawl.core.talk.resume_text``)
        self.resume_notes: dict[str, str] = {}
        self._recovered_count = 0  # found ids read back from the last run's feed tails
        self._opener: Callable[[], StateStore | None] | None = None
        if callable(store):
            self._opener = store
        else:
            self._load(store)

    def _load(self, store: StateStore | None) -> None:
        """The targets' lanes, planned from the stored state when there is one."""
        settings = self.crawler.settings
        origins: dict[str, int] = {}
        emit_once = settings.getbool("IDCRAWL_STATE_EMIT_ONCE", default_settings.IDCRAWL_STATE_EMIT_ONCE)
        # ids the last run wrote to its feeds after its last commit: found already, never emitted again
        recovered = (recover_feed_tails(store.feed_marks(), skip=overwritten_feeds(self.crawler))
                     if store is not None and emit_once else {})
        for target in self.targets:
            if target.resume == "none":
                recovered.pop(target.name, None)  # the target starts over
            self._add_target(target, store, origins, recovered.get(target.name))
        self._recovered_count = sum(len(ids) for ids in recovered.values())
        if store is not None:
            self.recorder = StateRecorder(
                store, self.crawler, self.frontier, origins,
                batch=settings.getint("IDCRAWL_STATE_COMMIT_ITEMS", default_settings.IDCRAWL_STATE_COMMIT_ITEMS),
                interval=settings.getfloat(
                    "IDCRAWL_STATE_COMMIT_INTERVAL", default_settings.IDCRAWL_STATE_COMMIT_INTERVAL
                ),
                emit_once=emit_once,
                recovered=recovered,
            )

    def _add_target(
        self, target: Target, store: StateStore | None, origins: dict[str, int], recovered: BitMap64 | None = None
    ) -> None:
        """Fresh lanes, or the lanes of the resume plan of the target's stored past
        (``recovered``: found ids read back from the last run's feeds, not in the state yet)."""
        state = store.load(target.name) if store is not None else None
        if state is None or target.resume == "none":
            note = resume_text(target.resume, stored=state is not None)
            if note is not None:
                self.resume_notes[target.name] = note
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
        if recovered:
            found = state.outcomes.get(Outcome.FOUND)
            state.outcomes[Outcome.FOUND] = recovered | found if found is not None else recovered
        specs = resume_specs(target, state.lanes, state.outcomes, target.resume, target.holes)
        origins.update({key: record.start for key, record in state.lanes.items()})
        known = cast("Container[int] | None", state.outcomes.get(Outcome.FOUND))  # a roaring bitmap
        self.frontier.add_target(target, specs, known_found=known)
        continued = {spec.key for spec in specs}
        note = resume_text(
            target.resume, stored=True, known_found=len(known) if isinstance(known, Sized) else 0,
            finished=[spec.direction for spec in lane_specs(target) if spec.key not in continued],
        )
        if note is not None:
            self.resume_notes[target.name] = note

    #: what follows the counts in progress and summary lines when they are not the whole job's
    counts_scope = ""

    def describe_state(self) -> str:
        """Where the durable state is, for the plan and summary lines."""
        if self.recorder is None:
            return "state off"
        where = self.recorder.store.path if hasattr(self.recorder.store, "path") else None
        if isinstance(where, Path):
            return f"state {where.resolve()}"
        return f"state in Redis ({where})" if where else f"state in {type(self.recorder.store).__name__}"

    @property
    def stats(self) -> StatsCollector:
        # the crawler's stats exist only once the crawl starts, after the spider
        stats = self.crawler.stats
        assert stats is not None
        return stats

    def load_state(self) -> None:
        """Open the state store and plan the lanes (once); BadInputError if the state cannot be used."""
        if self._opener is not None:
            opener, self._opener = self._opener, None
            self._load(opener())

    def open(self) -> None:
        self.load_state()  # normally done already by the IdStateLoader extension
        self.stats.set_value(f"{STATS_PREFIX}/targets", len(self.targets))
        self.stats.set_value(f"{STATS_PREFIX}/lanes", len(self.frontier.lanes))
        if self._recovered_count:
            self.stats.set_value(f"{STATS_PREFIX}/resume/recovered_from_feed", self._recovered_count)
        if self.recorder is not None:
            self.recorder.open()

    # -- dispensing (scheduler side) -------------------------------------------

    def next(self, group_ready: Callable[[Hashable], bool] | None = None) -> Dispatch | None:
        frontier = self.frontier
        skipped, deduplicated = frontier.skipped_found, frontier.deduplicated
        dispatch = frontier.next(group_ready)
        if frontier.skipped_found != skipped:
            self._inc(f"{STATS_PREFIX}/resume/skipped_found", frontier.skipped_found - skipped)
        if frontier.deduplicated != deduplicated:
            # ids an overlapping target fetched (or is fetching): served without a request
            self._inc(f"{STATS_PREFIX}/deduplicated", frontier.deduplicated - deduplicated)
            self._inc("dupefilter/filtered", frontier.deduplicated - deduplicated)
        if frontier.touched:
            self._take_touched()
        if frontier.released:
            released, frontier.released = frontier.released, []
            self._orphans += self._released(released)
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
        self._count(lane_key, before, _counts_of(lane.counts))
        if lane.stopped and not was_stopped:
            self._lane_stopped(lane_key, lane)
        if rec.became_ready:
            self.wake_engine()
        if outcome is Outcome.FOUND and self.limiter is not None:
            self.limiter.found(frontier.lane_target[lane_key].host)
        if self.recorder is not None:
            self.recorder.outcome(frontier.lane_target[lane_key].name, outcome, id_)
        if frontier.touched:
            self._take_touched()
        outputs = self._released(rec.released)
        if self._orphans:
            outputs, self._orphans = self._orphans + outputs, []
        return outputs

    def _released(self, released: list[Payload]) -> list[Any]:
        """The outputs of released payloads, told to the state recorder."""
        if self.recorder is not None:
            lane_target = self.frontier.lane_target
            for released_lane, released_id, released_outputs in released:
                self.recorder.released(lane_target[released_lane].name, released_lane, released_id, released_outputs)
        return [output for _, _, released_outputs in released for output in released_outputs]

    def _take_touched(self) -> None:
        """Stats and state of lanes that another lane's fetch decided an id of."""
        frontier = self.frontier
        touched, frontier.touched = frontier.touched, []
        for change in touched:
            lane = frontier.lanes[change.lane]
            self._count(change.lane, _counts_of(change.before), _counts_of(change.after))
            if change.recorded.stopped:
                self._lane_stopped(change.lane, lane)
            if change.recorded.became_ready:
                self.wake_engine()
            if self.recorder is not None:
                self.recorder.outcome(frontier.lane_target[change.lane].name, change.outcome, change.id)

    def _count(self, lane_key: str, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        """Move the change of a lane's counters into stats (per lane, and job totals)."""
        for name, old, new in zip(_COUNT_FIELDS, before, after, strict=True):
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
        """Ask the engine to call ``next_request()`` soon (:func:`idcrawl._scrapy.wake_engine`).

        Without it, a lane freed by a late outcome would wait for the 5 s heartbeat.
        """
        _scrapy.wake_engine(self.crawler)

    # -- end of crawl --------------------------------------------------------------

    def take_orphans(self) -> list[Any]:
        """Outputs released while dispensing (no callback carried them yet)."""
        outputs, self._orphans = self._orphans, []
        return outputs

    def abandon_lost(self) -> list[Any]:
        """Outcome ``failed`` for ids whose requests vanished (engine idle)."""
        outputs: list[Any] = self.take_orphans()
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
