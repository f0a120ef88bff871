"""The runtime of one id crawl: the one driver of a frontier, found with :func:`runtime_of`.

The spider creates it; every other component looks it up by crawler. It drives the frontier of its
worker (:class:`idcrawl.worker.Worker`: one process or a fleet), keeps the ``idcrawl/...`` stats,
owns the crawl scope's URL queue and wakes the engine when a lane can dispense again.
"""

from __future__ import annotations

import heapq
import logging
import operator
import os
import random
import time
import weakref
from collections.abc import Callable, Container, Hashable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from scrapy import Request, signals
from scrapy.utils.asyncio import call_later
from scrapy.utils.misc import load_object

from idcrawl import _scrapy
from idcrawl.config import config_of
from idcrawl.core.clock import Clock, ClockError
from idcrawl.core.frontier import Dispatch, IdFrontier, Touched
from idcrawl.core.lanes import Lane, LaneCounts, Outcome
from idcrawl.core.pagebook import PageBook
from idcrawl.core.safetext import safe
from idcrawl.core.scope import JobScope
from idcrawl.core.sitemaps import SitemapSpec
from idcrawl.core.targets import Target
from idcrawl.core.watch import NO_COALESCING, Coalescing
from idcrawl.errors import BadInputError
from idcrawl.feeds import item_fields
from idcrawl.state.base import StateError
from idcrawl.state.location import STATE_FILENAME
from idcrawl.state.lock import FileLock, Locks, RedisOwner, lock_path
from idcrawl.worker import Payload, Worker

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from idcrawl.core.urlqueue import Reconciled, UrlQueue

__all__ = [
    "DUE_KEY", "ITEMS_NOWHERE", "META_KEY", "PROFILE_STATS", "READ_KEY", "SCOPE_KEY", "STATS_PREFIX", "IdRuntime",
    "Limiter", "Payload", "Worker", "is_id_crawl", "items_kept", "lock_jobdir", "runtime_of", "start_runtime",
]

logger = logging.getLogger(__name__)


#: Finish reason of a crawl whose Redis state's owner key another process took (its lease ran out).
LOCK_LOST = "idcrawl_state_lock_lost"

#: ``request.meta`` key of lane requests: ``{"lane": str, "id": int, "target": str}``.
META_KEY = "idcrawl"
#: ``request.meta`` key of a retry's due time (``time.monotonic()``): the
#: scheduler holds the request in its delay queue until then.
DUE_KEY = "idcrawl_due"
#: Prefix of every stat idcrawl writes.
STATS_PREFIX = "idcrawl"
#: ``request.meta`` key of a page target's or an outlink's request: its canonical URL, then (set when
#: its response arrives) ``owner``, ``hops``, ``offsite_hops`` and ``crawl_profiles`` as the walk knows them.
SCOPE_KEY = "idcrawl_scope"
#: ``response.meta`` key of a crawl-scope page's 200: what its harvest read
#: (:class:`idcrawl.core.scope.PageRead`), set by the spider, kept in its URL record by the scope middleware.
READ_KEY = "idcrawl_page_read"
#: The crawl scope's refusals and redirects kept with a run's record (``scope/traps/<rule>``,
#: ``scope/redirects/<what>``), which ``scrapy idplan``'s scope report shows.
SCOPE_REFUSALS = ("idcrawl/scope/traps/", "idcrawl/scope/redirects/")
#: The stats of one crawl profile: ``.../<name>/queued``, ``fetched``, ``postponed``, ``not_found``, ``errors``,
#: ``revisits``.
PROFILE_STATS = f"{STATS_PREFIX}/crawl_profiles"

_COUNT_FIELDS = tuple(f.name for f in fields(LaneCounts))
#: ``idcrawl/<name>`` stats that are set (the wave's figure), not counted: kept as they are in a wave's totals.
_GAUGES = frozenset({"targets", "lanes"})
#: The counters as a tuple: ``dataclasses.astuple`` deep-copies and costs ~40x more per call.
_counts_of = operator.attrgetter(*_COUNT_FIELDS)


def emitted_as(outputs: list[Any], name: str, id_: int, names: Container[str]) -> None:
    """Items of found id ``id_`` that name another target (the lane that fetched a shared id)
    take ``name``, the target of the lane that emits them; items of other ids, or whose
    ``target`` names no target of the job (a spider's own field), are left as they are."""
    for output in outputs:
        adapter: Any = item_fields(output)
        if adapter is None:
            continue  # a request
        try:
            if adapter.get("id") == id_ and adapter.get("target") != name and adapter.get("target") in names:
                adapter["target"] = name
        except (KeyError, TypeError):  # an item class without a settable target field
            continue


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

    def new_wave(self) -> None:
        """Watch mode: a new wave starts (limits apply per process)."""


class IdRuntime:
    """Drives the frontier of one crawl: dispensing, outcomes, stats, engine wake-ups."""

    #: Set by the job-limits extension when a limit is configured; None: no limits.
    limiter: Limiter | None = None
    #: Watch mode: the time of the wave the next worker plans (the watch sets it; None: the first wave).
    wave_at: float | None = None

    def __init__(
        self, crawler: Crawler, targets: Sequence[Target], *, missing_targets: BadInputError | None = None,
        scope: JobScope | None = None, sitemaps: Mapping[str, SitemapSpec] | None = None,
    ) -> None:
        """The runtime of ``crawler``'s crawl of ``targets`` (what :func:`runtime_of` returns from now on).

        ``missing_targets``: no targets were given, and why that is bad input
        for a worker that needs some (a distributed worker waits for pushed ones).
        ``scope``: the job file's crawl scope (page targets, crawl profiles, collections; empty for a
        plain id crawl), which ``idcrawl.spidermiddlewares.scope.IdScopeMiddleware`` follows.
        ``sitemaps``: id target -> its ``sitemaps`` (evidence for its recrawl), which
        ``idcrawl.spidermiddlewares.evidence.IdSitemapEvidenceMiddleware`` reads.
        The worker is built on first use (:meth:`start`).
        """
        self.crawler = crawler
        self.targets = list(targets)
        self.missing_targets = missing_targets
        self.scope = scope if scope is not None else JobScope()
        self.sitemaps: dict[str, SitemapSpec] = dict(sitemaps or {})
        self._orphans: list[Any] = []  # outputs released at dispatch (overlapping targets), not yet emitted
        self._wakes: list[float] = []  # heap of monotonic times the engine is to be woken at
        self._wake_set: set[float] = set()  # the same times, to keep each once
        self._timer: Any = None
        self._timer_due = 0.0
        self._worker: Worker | None = None
        self._url_queue: UrlQueue | None = None  # the crawl scope's (url_queue)
        self._lane_stats_max: int | None = None  # IDCRAWL_LANE_STATS, read at first use (lane_stats)
        self._previous_queue: UrlQueue | None = None  # watch mode: the last wave's, until the next one's is built
        self._queue_started = False  # the crawl scope's user started the URL queue: its URLs go out
        self._clock: Clock | None = None
        self._wave_ended = False  # watch mode: the wave's worker has closed, the next one is not built yet
        #: watch mode: the wave this runtime's worker plans (1: the run itself)
        self.wave = 1
        self._counts_before: dict[str, int] = {}  # watch mode: the job totals when this wave began
        #: watch mode: the session's run row (the first wave began it; None before, or without a state)
        self.watch_run: int | None = None
        self._watch_said: dict[str, int] = {}  # watch mode: the counters a fleet worker added to the session's
        self._stats_inc: Callable[..., None] | None = None  # _scrapy.stats_incrementer, on first use
        #: one process per state (idcrawl.state.lock): held from the first worker until the engine stops
        self.locks = Locks()
        self._renewal: Any = None
        _RUNTIMES[crawler] = self
        # the runtime refers to its crawler: left in the registry, a finished crawler would stay in memory
        crawler.signals.connect(self.release, signal=signals.engine_stopped)

    def release(self) -> None:
        """Stop renewing, release the locks and leave the registry (when the engine stops; a recorded crawl
        without an engine calls it itself)."""
        if self._renewal is not None and self._renewal.running:
            self._renewal.stop()
        self.locks.release()
        _RUNTIMES.pop(self.crawler, None)

    def hold(self, key: str, lock: FileLock | RedisOwner) -> None:
        """Take ``lock`` for the whole crawl (once: watch mode's waves reopen the state); BadInputError naming
        its holder if another process has it. A Redis owner key's lease is renewed while the crawl runs."""
        name = getattr(self.crawler.spidercls, "name", "idseq")
        try:
            if not self.locks.take(key, lock):
                return
        except StateError as exc:
            self.locks.release()
            raise BadInputError(f"{name}: {exc}") from None
        if lock.left_by is not None:
            logger.warning("idcrawl: %s: its last holder (%s) ended without releasing it (killed?); taken over",
                           lock.what, lock.left_by)
        if isinstance(lock, RedisOwner):
            from scrapy.utils.asyncio import create_looping_call

            self._renewal = create_looping_call(self._renew, lock)
            self._renewal.start(lock.lease_ms / 3000, now=False)

    def _renew(self, owner: RedisOwner) -> None:
        import redis

        try:
            kept = owner.renew()
        except redis.RedisError as exc:
            logger.warning("idcrawl: %s: cannot renew its owner key's lease: %s", owner.what, safe(exc))
            return
        if kept or not owner.held:
            return
        owner.held = False
        logger.error("idcrawl: %s: its owner key %r expired and another process took it; this crawl stops "
                     "and commits nothing more", owner.what, owner.key)
        if self._worker is not None:
            self._worker.lock_lost()
        if self._renewal is not None and self._renewal.running:
            self._renewal.stop()
        _scrapy.close_spider(self.crawler, LOCK_LOST)

    def lock_jobdir(self) -> None:
        """Scrapy's own files in ``JOBDIR`` (request queues, spider state) have one writer too, state or not:
        taken once, by the first caller (``IdSpiderState``, before it repairs them; else the worker's start).
        BadInputError naming the holder if another process has it (then nothing is left held)."""
        jobdir = self.crawler.settings.get("JOBDIR")
        if jobdir:
            path = lock_path(Path(jobdir) / STATE_FILENAME)
            self.hold(str(path.resolve()), FileLock(path, f"JOBDIR {str(jobdir)!r}"))

    def start(self) -> None:
        """Build the worker (its frontier, the state loaded) once; BadInputError if it cannot be used."""
        if self._worker is None:
            config = config_of(self.crawler)
            path = config.worker_class
            try:
                worker_cls = load_object(path) if isinstance(path, str) else path
            except (ImportError, AttributeError, NameError, ValueError) as exc:
                raise BadInputError(f"bad setting: IDCRAWL_WORKER_CLASS={path!r}: cannot be imported ({exc})") from None
            if worker_cls.keeps_state(config) and not config.discard_items and not items_kept(self.crawler.settings):
                raise BadInputError(ITEMS_NOWHERE)
            try:
                self.lock_jobdir()
                self._worker = worker_cls(self)
            except BaseException:
                if self.wave == 1:  # refused: the locks go with it (a later wave's crawl stops holding them)
                    self.locks.release()
                raise

    @property
    def clock(self) -> Clock:
        """The crawl's one clock (``IDCRAWL_NOW``: real, or fixed): ``fetched_at``, the runs' times, recrawl."""
        if self._clock is None:
            try:
                self._clock = Clock.from_setting(config_of(self.crawler).now)
            except ClockError as exc:
                raise BadInputError(f"bad setting: {exc}") from None
        return self._clock

    @property
    def coalescing(self) -> Coalescing:
        """Watch mode: a wave's coalescing window (``IDCRAWL_WATCH_COALESCE*``); else none."""
        config = config_of(self.crawler)
        if not config.watch:
            return NO_COALESCING
        return Coalescing(config.watch_coalesce, config.watch_coalesce_share, config.watch_coalesce_max)

    def wave_time(self) -> float:
        """Watch mode: the time of the wave a new worker plans (its wake-up time; the clock's now for the
        first), which the pages it fetches share (:attr:`idcrawl.core.pagebook.PageBook.wave_at`)."""
        return self.clock.now() if self.wave_at is None else self.wave_at

    @property
    def worker(self) -> Worker:
        """The worker :meth:`start` built (the first component to need it starts the runtime)."""
        worker = self._worker
        if worker is None:
            raise RuntimeError("the id crawl's runtime is not started yet: IdRuntime.start() builds its worker")
        return worker

    @property
    def frontier(self) -> IdFrontier[Payload]:
        return self.worker.frontier

    @property
    def resume_notes(self) -> dict[str, str]:
        return self.worker.resume_notes

    @property
    def pages(self) -> PageBook | None:
        """The page schedule records (recrawl of found pages); None: the worker keeps none."""
        return self.worker.pages

    @property
    def url_queue(self) -> UrlQueue | None:
        """The crawl scope's URL queue (None: no crawl scope), the worker's (:meth:`Worker.url_queue`):
        built on first use, and again for each wave of a watching crawl (:meth:`next_wave`). Its user
        (``IdScopeMiddleware``) starts it: reconciles the stored URLs with the job file."""
        if self._url_queue is None and self.scope:
            config = config_of(self.crawler)
            previous, self._previous_queue = self._previous_queue, None
            # the draws go on from the last wave's
            rng = previous.rng if previous is not None else random.Random(config.scope_seed)
            self._url_queue = self.worker.url_queue(self.scope, rng, self.id_page_of(), config.scope_postpone,
                                                    previous)
        return self._url_queue

    def start_url_queue(self) -> Reconciled:
        """Start this wave's URL queue: its stored URLs reconciled with the job file at the clock's now. Its
        user (``IdScopeMiddleware``) calls it, at the crawl's start and at each wave's; from then on the
        scheduler takes outlinks from the runtime (:meth:`next_outlink`)."""
        queue = self.url_queue
        assert queue is not None, "no crawl scope: no URL queue"
        reconciled = queue.start(self.scope, self.clock.now())
        self._queue_started = True
        return reconciled

    @property
    def serves_outlinks(self) -> bool:
        """The crawl scope's URL queue was started: lanes and outlinks take turns in the scheduler."""
        return self._queue_started

    def outlinks_ready(self) -> bool:
        """A URL of the started queue can be taken now (the engine must not go idle)."""
        queue = self.url_queue if self._queue_started else None
        return queue is not None and bool(queue.ready())

    def next_outlink(self, room: Callable[[str], bool]) -> Request | None:
        """The request of the next URL of the crawl scope's queue on a host that ``room(host)`` admits
        (None: none now, or the queue is not started). A found page's URL that came due is a revisit
        (``idcrawl/crawl_profiles/<name>/revisits``)."""
        queue = self.url_queue if self._queue_started else None
        record = queue.take(room, self.clock.now()) if queue is not None else None
        if record is None:
            return None
        if record.last_harvest is not None and not (record.not_found or record.errors):
            for name in record.crawl_profiles:  # found before: its revisit came due
                self.stats.inc_value(f"{PROFILE_STATS}/{name}/revisits")
        spider: Any = self.crawler.spider
        return spider.make_outlink_request(record)  # type: ignore[no-any-return]

    def id_page_of(self) -> Callable[[str], bool] | None:
        """Is a URL the page of an id (in its bounds) of one of the id targets? Its lanes fetch it, or decide
        not to (the URL queue skips it). None: there are none."""
        id_targets = list(self.targets)
        if not id_targets:
            return None
        return lambda url: any(target.id_of(url) is not None for target in id_targets)

    @property
    def counts_scope(self) -> str:
        return self.worker.counts_scope

    def describe_state(self) -> str:
        """Where the durable state is, for the plan and summary lines."""
        return self.worker.describe_state()

    @property
    def stats(self) -> StatsCollector:
        # the crawler's stats exist only once the crawl starts, after the spider
        stats = self.crawler.stats
        assert stats is not None
        return stats

    @property
    def lane_stats(self) -> bool:
        """Whether stats are kept per lane (``IDCRAWL_LANE_STATS``: not for a job of more lanes)."""
        most = self._lane_stats_max
        if most is None:
            most = self._lane_stats_max = config_of(self.crawler).lane_stats
        return not most or len(self.frontier.lanes) <= most

    def open(self) -> None:
        frontier = self.frontier
        self.stats.set_value(f"{STATS_PREFIX}/targets", len(self.targets))
        self.stats.set_value(f"{STATS_PREFIX}/lanes", len(frontier.lanes))
        self.worker.open()
        # a SIGTERM or SIGINT closes at once: downloads in flight are cancelled, their ids stay undecided
        _scrapy.cancel_downloads_on_shutdown(self.crawler)

    # -- dispensing (scheduler side) -------------------------------------------

    def next(self, group_ready: Callable[[Hashable], bool] | None = None) -> Dispatch | None:
        worker = self.worker
        frontier = worker.frontier
        try:
            dispensed = frontier.next(group_ready)
        except worker.errors as exc:
            worker.unavailable(exc)
            return None
        if dispensed.skipped_found:
            self.inc_stat(f"{STATS_PREFIX}/resume/skipped_found", dispensed.skipped_found)
            for lane_key, before, after in dispensed.counted:  # known found ids count as found, in stats too
                self._count(lane_key, _counts_of(before), _counts_of(after))
        if dispensed.deduplicated:
            # ids an overlapping target fetched (or is fetching): served without a request
            self.inc_stat(f"{STATS_PREFIX}/deduplicated", dispensed.deduplicated)
            self.inc_stat("dupefilter/filtered", dispensed.deduplicated)
        if dispensed.touched:
            self._take_touched(dispensed.touched)
        if dispensed.released:
            self._orphans += self.emit_released(dispensed.released)
        dispatch = dispensed.dispatch
        if dispatch is not None:
            self.inc_stat(f"{STATS_PREFIX}/dispensed")
            lane = frontier.lanes[dispatch.lane]
            if lane.stopped:
                self._lane_stopped(dispatch.lane, lane)
        return dispatch

    # -- outcomes (spider side) ------------------------------------------------

    def record(
        self, lane_key: str, id_: int, outcome: Outcome, outputs: list[Any] | None = None, *, attempt: int = 1
    ) -> list[Any]:
        """Record an id's final outcome; returns the outputs now safe to emit, in order."""
        worker = self.worker
        frontier = worker.frontier
        if lane_key not in frontier.lanes:
            logger.warning("idcrawl: outcome for unknown lane %r (id %s) ignored", lane_key, id_)
            return []
        payload = (lane_key, id_, outputs) if outputs is not None else None
        lane = frontier.lanes[lane_key]
        before = _counts_of(lane.counts)
        try:
            rec = frontier.record(lane_key, id_, outcome, payload)
        except worker.errors as exc:
            return worker.record_failed(exc, lane_key, id_, outcome, outputs, attempt)
        self.inc_stat(f"{STATS_PREFIX}/attempts/{outcome.value}_on/{attempt}")
        self._count(lane_key, before, _counts_of(lane.counts))
        if rec.stopped:
            self._lane_stopped(lane_key, lane)
        if rec.became_ready:
            self.wake_engine()
        target = frontier.lane_target[lane_key]
        if outcome is Outcome.FOUND and self.limiter is not None:
            self.limiter.found(target.host)
        worker.decided(target.name, outcome, id_)
        if rec.touched:
            self._take_touched(rec.touched)
        outputs = self.emit_released(rec.released)
        if self._orphans:
            outputs, self._orphans = self._orphans + outputs, []
        return outputs

    def emit_released(self, released: Sequence[Payload]) -> list[Any]:
        """The outputs of released payloads (a found id's items, released to the lane that emits
        them), told to the worker. A shared id's items were made by the lane that fetched it; they
        carry the ``target`` of the lane that emits them (``idcrawl.core.overlap.emitting_rank``),
        which may be another target of the id space (see :func:`emitted_as`)."""
        worker, lane_target, names = self.worker, self.frontier.lane_target, self.frontier.targets
        outputs: list[Any] = []
        for released_lane, released_id, released_outputs in released:
            target = lane_target.get(released_lane)  # None: a lane of another worker (adopted outputs)
            name = target.name if target is not None else released_lane.rpartition(":")[0]
            emitted_as(released_outputs, name, released_id, names)
            worker.released(released_lane, released_id, released_outputs)
            outputs += released_outputs
        return outputs

    def _take_touched(self, touched: Sequence[Touched]) -> None:
        """Stats and state of lanes that another lane's fetch decided an id of."""
        frontier = self.frontier
        for change in touched:
            lane = frontier.lanes[change.lane]
            self._count(change.lane, _counts_of(change.before), _counts_of(change.after))
            if change.stopped:
                self._lane_stopped(change.lane, lane)
            if change.became_ready:
                self.wake_engine()
            self.worker.decided(frontier.lane_target[change.lane].name, change.outcome, change.id)

    def _count(self, lane_key: str, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        """Move the change of a lane's counters into stats (per lane, and job totals)."""
        for name, old, new in zip(_COUNT_FIELDS, before, after, strict=True):
            if new != old and name != "dispensed":
                self.inc_stat(f"{STATS_PREFIX}/{name}", new - old)
                if self.lane_stats:
                    self.inc_stat(f"{STATS_PREFIX}/lanes/{lane_key}/{name}", new - old)

    def close_lane(self, lane_key: str, reason: str) -> None:
        """Stop dispensing a lane (a limit stopped its slot): its stats; the payloads its closing released
        in an overlapping lane are emitted with the next outputs (:meth:`take_orphans`)."""
        frontier = self.frontier
        decided = frontier.close_lane(lane_key, reason)
        if self.lane_stats:  # (a lane not reached yet is not made for nothing: Frontier.lanes)
            self._lane_stopped(lane_key, frontier.lanes[lane_key])
        if decided.touched:
            self._take_touched(decided.touched)
        if decided.released:
            self._orphans += self.emit_released(decided.released)

    def _lane_stopped(self, lane_key: str, lane: Lane[Payload]) -> None:
        if not self.lane_stats:
            return
        prefix = f"{STATS_PREFIX}/lanes/{lane_key}"
        self.stats.set_value(f"{prefix}/cut_reason", lane.reason)
        if lane.cut_at is not None:
            self.stats.set_value(f"{prefix}/cut_at", lane.cut_at)

    def inc_stat(self, key: str, count: int = 1) -> None:
        """``stats.inc_value(key, count)`` for a counter bumped per response (``_scrapy.stats_incrementer``)."""
        inc = self._stats_inc
        if inc is None:  # about 6 increments per response: without Scrapy's wrapping of each call
            inc = self._stats_inc = _scrapy.stats_incrementer(self.stats)
        inc(key, count)

    # -- waking the engine ---------------------------------------------------------

    def wake_engine(self) -> None:
        """Ask the engine to call ``next_request()`` soon (:func:`idcrawl._scrapy.wake_engine`).

        Without it, a lane freed by a late outcome would wait for the 5 s heartbeat.
        """
        _scrapy.wake_engine(self.crawler)

    def wake_at(self, due: float) -> None:
        """Wake the engine at ``due`` (``time.monotonic()``): a retry falls due, a host's gap ends.

        One timer for every component: it is set for the earliest time asked
        for, and when it fires it is set again for the next one.
        """
        due = round(due, 3)  # asked again and again (a host's gap): kept once
        if due not in self._wake_set:
            self._wake_set.add(due)
            heapq.heappush(self._wakes, due)
        if self._timer is not None and self._timer_due <= due:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        self._timer = call_later(max(0.0, due - time.monotonic()), self._timer_fired)

    def wake_in(self, wait: float) -> None:
        """:meth:`wake_at` ``wait`` seconds from now."""
        self.wake_at(time.monotonic() + wait)

    def _timer_fired(self) -> None:
        self._timer = None
        now = time.monotonic()
        wakes = self._wakes
        while wakes and wakes[0] <= now:
            self._wake_set.discard(heapq.heappop(wakes))
        if wakes:
            self._timer_due = wakes[0]
            self._timer = call_later(max(0.0, wakes[0] - now), self._timer_fired)
        self.wake_engine()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wakes.clear()
        self._wake_set.clear()

    def take_orphans(self) -> list[Any]:
        """Outputs released while dispensing (no callback carried them yet)."""
        outputs, self._orphans = self._orphans, []
        return outputs

    def abandon_lost(self) -> list[Any]:
        """Outcome ``failed`` for ids whose requests vanished (engine idle)."""
        outputs: list[Any] = self.take_orphans()
        for key, lost in self.frontier.lost():
            logger.warning("idcrawl: lane %s: ids %s never got an outcome; counted as failed", key, lost[:10])
            self.inc_stat(f"{STATS_PREFIX}/lost", len(lost))
            for id_ in lost:
                outputs.extend(self.record(key, id_, Outcome.FAILED))
        return outputs

    # -- watch mode (idcrawl.extensions.watch) ------------------------------------------

    def end_wave(self) -> None:
        """Watch mode: the wave that just ended closes as a run does (its last commit, the tails'
        schedules, the run's record); the crawl goes on, and :meth:`next_wave` plans the next one."""
        self.close("finished")
        self._wave_ended = True
        self.worker.wave_ended()

    def next_wave(self) -> None:
        """Watch mode: a new worker plans the next wave from the stored state at the clock's now."""
        self._counts_before = self.job_counts(per_wave=False)
        self.worker.retire()
        self._previous_queue, self._url_queue = self._url_queue, None
        self._worker, self._wave_ended = None, False
        self.wave += 1
        self.start()
        self.open()

    # -- end of crawl --------------------------------------------------------------

    def close(self, reason: str) -> None:
        """Spider closing: the worker stops, lanes' final figures into stats, the last commit
        (nothing when a watching crawl closes between waves: the last wave committed already)."""
        if self._wave_ended:
            return
        self._cancel_timer()
        if self._worker is None:  # watch mode: the next wave's worker was refused; built again here, as ever
            self.start()
        worker = self.worker
        worker.stop(reason)
        frontier = worker.frontier
        for key, lane in frontier.read_lanes() if self.lane_stats else ():
            if lane.reason is not None:
                self._lane_stopped(key, lane)
            self.stats.set_value(f"{STATS_PREFIX}/lanes/{key}/cursor", lane.first_undecided)
        held = sum(lane.held for _, lane in frontier.lane_states() if isinstance(lane, Lane))
        if held:
            logger.info("idcrawl: %d found ids held at close were not emitted (reason %s)", held, reason)
            self.inc_stat(f"{STATS_PREFIX}/held_at_close", held)
        worker.close(reason)

    @property
    def watching(self) -> bool:
        """Watch mode (``IDCRAWL_WATCH``): one run row per session, with its counters (:meth:`watch_counters`)."""
        return config_of(self.crawler).watch

    def watch_counters(self) -> dict[str, int] | None:
        """Watch mode: the session's counters for its run row (``WATCH_COUNTERS``): waves started so
        far, responses downloaded (``downloader/response_count``), pages with news (``idcrawl/pages/new``
        and ``.../changed``: new ids and changed pages, each an item); None without watch mode."""
        if not self.watching:
            return None
        stats = self.stats.get_stats()
        news = sum(int(stats.get(f"{STATS_PREFIX}/pages/{event}", 0)) for event in ("new", "changed"))
        return {"waves": self.wave, "fetches": int(stats.get("downloader/response_count", 0)), "news": news}

    def watch_deltas(self) -> dict[str, int] | None:
        """Watch mode in a fleet: this worker's fetches and news since it last added them to the session's
        counters (:func:`idcrawl.distributed.runs.record_run_end`); None without watch mode."""
        counters = self.watch_counters()
        if counters is None:
            return None
        deltas = {name: counters[name] - self._watch_said.get(name, 0) for name in ("fetches", "news")}
        self._watch_said = counters
        return deltas

    def job_counts(self, *, per_wave: bool = True) -> dict[str, int]:
        """The job totals of this run (``idcrawl/<name>`` stats), for the run's record; in watch mode
        this wave's (``per_wave``), each wave being a run of the state."""
        totals = {k.split("/", 1)[1]: v for k, v in self.stats.get_stats().items()
                  if k.startswith(f"{STATS_PREFIX}/") and isinstance(v, int)
                  and (k.count("/") == 1 or k.startswith(SCOPE_REFUSALS))}
        if not per_wave or not self._counts_before:
            return totals
        before = self._counts_before
        return {key: value if key in _GAUGES else value - before.get(key, 0) for key, value in totals.items()}


#: crawler -> its id crawl's runtime, until the crawler's engine stops
_RUNTIMES: weakref.WeakKeyDictionary[Crawler, IdRuntime] = weakref.WeakKeyDictionary()


def is_id_crawl(crawler: Crawler) -> bool:
    """Whether ``crawler`` runs an id crawl (its spider made a runtime), without building the worker."""
    return crawler in _RUNTIMES


def lock_jobdir(crawler: Crawler) -> None:
    """Take the ``JOBDIR`` lock of ``crawler``'s id crawl now, without building its worker (none for another
    crawl, or without ``JOBDIR``); BadInputError naming the holder if another process has it."""
    runtime = _RUNTIMES.get(crawler)
    if runtime is not None:
        runtime.lock_jobdir()


def runtime_of(crawler: Crawler | None) -> IdRuntime | None:
    """The runtime of ``crawler``'s id crawl (the spider made it); None if not an id crawl. A lookup only:
    the first component built after the extensions calls :func:`start_runtime`."""
    return _RUNTIMES.get(crawler) if crawler is not None else None


def start_runtime(crawler: Crawler | None) -> IdRuntime | None:
    """:func:`runtime_of`, its worker built now if it is not yet (:meth:`IdRuntime.start`: the state read,
    :class:`~idcrawl.errors.BadInputError` if it cannot be used). Called by the components built after
    every extension and before the engine starts (``IdStateLoader``, else the attempts middleware, else
    the scheduler), so a bad state is one line before the crawl begins."""
    runtime = runtime_of(crawler)
    if runtime is not None:
        runtime.start()
    return runtime


#: The refusal of a crawl that keeps state but whose items go nowhere (:func:`items_kept`).
ITEMS_NOWHERE = (
    "items go nowhere: this crawl has no feed and no item pipeline, yet its state remembers the ids it finds "
    "and no later run fetches them again; keep the items with -o items.jsonl, the FEEDS setting or scrapyd's "
    "items_dir, or set IDCRAWL_DISCARD_ITEMS=True to drop them on purpose"
)


def items_kept(settings: BaseSettings, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a crawl's items reach something that keeps them: a feed (``FEEDS``: ``-o``/``-O``,
    scrapyd's ``items_dir``), an item pipeline that is not idcrawl's own, or Zyte Scrapy Cloud's item
    storage (its job environment or its extension). An extension of the project's own cannot be seen."""
    if settings.getdict("FEEDS") or settings.get("FEED_URI"):
        return True
    for path, order in settings.getwithbase("ITEM_PIPELINES").items():
        if order is None:
            continue
        try:
            module = getattr(load_object(path) if isinstance(path, str) else path, "__module__", "") or ""
        except (AttributeError, ImportError, NameError, TypeError, ValueError):
            return True  # not loadable: Scrapy says why when it builds the pipelines
        if module != "idcrawl" and not module.startswith("idcrawl."):
            return True
    environ = os.environ if environ is None else environ
    return bool(environ.get("SHUB_JOBKEY")) or any(
        "sh_scrapy" in str(path) for path, order in settings.getwithbase("EXTENSIONS").items() if order is not None
    )


