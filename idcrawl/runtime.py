"""The runtime of one id crawl: the one driver of a frontier, found with :func:`runtime_of`.

The spider creates it from its arguments (the targets) and every other
component looks it up by crawler: the scheduler pulls ids from it, the
spider's callbacks push outcomes into it, the limits, the progress lines, the
dupefilter and the attempts middleware read it. It keeps the ``idcrawl/...``
stats current and wakes the engine when a lane that was waiting can dispense
again (or at a time a component asked for), so nobody waits for Scrapy's 5 s
heartbeat.

It has two plug-ins, both given by its *worker* (``IDCRAWL_WORKER_CLASS``):
the frontier (:class:`idcrawl.core.frontier.IdFrontier`) and the durability of
outcomes. :class:`LocalWorker`, the default, keeps the lanes in this process
and the state in a store (SQLite or Redis) through the state recorder; the
distributed layer swaps in :class:`idcrawl.distributed.worker.RedisWorker`
(lanes shared through Redis, durability by acknowledgements).
"""

from __future__ import annotations

import heapq
import logging
import operator
import os
import time
import weakref
from collections.abc import Callable, Container, Hashable, Mapping, Sequence, Sized
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from pyroaring import BitMap64
from scrapy import signals
from scrapy.utils.asyncio import call_later
from scrapy.utils.misc import load_object

from idcrawl import _scrapy, default_settings
from idcrawl.core.clock import Clock, ClockError, format_time
from idcrawl.core.frontier import Dispatch, Frontier, IdFrontier, lane_specs
from idcrawl.core.lanes import Lane, LaneCounts, Outcome
from idcrawl.core.pagebook import PageBook
from idcrawl.core.recrawl import Schedule
from idcrawl.core.resume import IDENTITY_KEYS, due_first, identity, resume_specs, tail_due
from idcrawl.core.safetext import safe
from idcrawl.core.scope import JobScope
from idcrawl.core.talk import NONE_DEPRECATED, forgotten_text, resume_text
from idcrawl.core.targets import RESET_MODES, Target
from idcrawl.errors import BadInputError
from idcrawl.state.base import StateError, StateStore, TargetState
from idcrawl.state.location import STATE_FILENAME, state_path
from idcrawl.state.lock import FileLock, Locks, RedisOwner, lock_path
from idcrawl.state.recorder import (
    OwnLine,
    ReadBack,
    StateRecorder,
    item_fields,
    overwritten_feeds,
    recover_feed_tails,
)
from idcrawl.state.redis import RedisStateStore

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

__all__ = [
    "DUE_KEY", "ITEMS_NOWHERE", "META_KEY", "STATS_PREFIX", "IdRuntime", "Limiter", "LocalWorker", "Worker",
    "is_id_crawl", "items_kept", "lock_jobdir", "own_line", "runtime_of",
]

logger = logging.getLogger(__name__)


class Forgotten:
    """What ``resume=reset`` forgets of the targets it starts over, warned about in one line."""

    def __init__(self) -> None:
        self.targets = self.found = self.lanes = 0
        self.words: set[str] = set()
        self.names: list[str] = []  # reset once every target passed its checks: a refused run changes nothing

    def add(self, name: str, word: str, state: TargetState) -> None:
        self.names.append(name)
        self.targets += 1
        self.found += len(state.outcomes.get(Outcome.FOUND, ()))
        self.lanes += len(state.lanes)
        self.words.add(word)

    def reset(self, store: StateStore | None) -> None:
        """Forget the stored state of the targets added, and say so in one WARNING."""
        if store is None or not self.targets:
            return
        for name in self.names:
            store.reset(name)
        logger.warning("idcrawl: %s", forgotten_text(self.targets, self.found, self.lanes, self.words))


#: Finish reason of a crawl whose Redis state's owner key another process took (its lease ran out).
LOCK_LOST = "idcrawl_state_lock_lost"

#: ``request.meta`` key of lane requests: ``{"lane": str, "id": int, "target": str}``.
META_KEY = "idcrawl"
#: ``request.meta`` key of a retry's due time (``time.monotonic()``): the
#: scheduler holds the request in its delay queue until then.
DUE_KEY = "idcrawl_due"
#: Prefix of every stat idcrawl writes.
STATS_PREFIX = "idcrawl"

Payload = tuple[str, int, list[Any]]  # (lane, id, outputs): what one found id produced
_COUNT_FIELDS = tuple(f.name for f in fields(LaneCounts))
#: ``idcrawl/<name>`` stats that are set (the wave's figure), not counted: kept as they are in a wave's totals.
_GAUGES = frozenset({"targets", "lanes"})
#: The counters as a tuple: ``dataclasses.astuple`` deep-copies and costs ~40x more per call.
_counts_of = operator.attrgetter(*_COUNT_FIELDS)


def _rebind(payload: Payload | None, lane_key: str, id_: int) -> Payload:
    """Another lane's payload for a shared id (its items once; ``None``: already emitted)."""
    return (lane_key, id_, payload[2] if payload is not None else [])


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


class Worker(Protocol):
    """The runtime's plug-ins: the frontier it drives, and what makes outcomes durable.

    Built by the runtime from ``IDCRAWL_WORKER_CLASS`` (``cls(runtime)``) when
    the crawl's components first look the runtime up, after every extension
    was built: an extension may bring the state in (Zyte's DotScrapy
    Persistence), and a bad state or an unreachable server raises
    :class:`~idcrawl.errors.BadInputError` there, before the engine starts.
    """

    @property
    def frontier(self) -> IdFrontier[Payload]:
        """The lanes this worker dispenses from and records outcomes in."""

    @property
    def counts_scope(self) -> str:
        """What follows the counts in progress and summary lines when they are not the whole job's."""

    @property
    def resume_notes(self) -> dict[str, str]:
        """Target name -> what it takes from earlier runs, for the plan line (``idcrawl.core.talk.resume_text``)."""

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        """Exceptions of frontier calls this worker handles (a server outage); others propagate."""

    def describe_state(self) -> str:
        """Where the durable state is, for the plan and summary lines."""

    def open(self) -> None:
        """The crawl opens (stats are available)."""

    def unavailable(self, exc: Exception) -> None:
        """A frontier call raised one of :attr:`errors` while dispensing."""

    def record_failed(
        self, exc: Exception, lane_key: str, id_: int, outcome: Outcome, outputs: list[Any] | None, attempt: int
    ) -> list[Any]:
        """Recording an outcome raised one of :attr:`errors`: keep it (or emit its outputs); returns outputs."""

    def decided(self, target: str, outcome: Outcome, id_: int) -> None:
        """An id of ``target`` got its final outcome (made durable at the next commit)."""

    def released(self, lane_key: str, id_: int, outputs: list[Any]) -> None:
        """The outputs of a found id are about to be emitted."""

    def stop(self, reason: str) -> None:
        """The crawl is closing: stop timers and loops; lanes that go no further stop."""

    def close(self, reason: str) -> None:
        """Last: commit or acknowledge, and the worker's own closing figures."""


class IdRuntime:
    """Drives the frontier of one crawl: dispensing, outcomes, stats, engine wake-ups."""

    #: Set by the job-limits extension when a limit is configured; None: no limits.
    limiter: Limiter | None = None
    #: Watch mode: the time of the wave the next worker plans (the watch sets it; None: the first wave).
    wave_at: float | None = None

    def __init__(
        self, crawler: Crawler, targets: Sequence[Target], *, missing_targets: BadInputError | None = None,
        scope: JobScope | None = None,
    ) -> None:
        """The runtime of ``crawler``'s crawl of ``targets`` (what :func:`runtime_of` returns from now on).

        ``missing_targets``: no targets were given, and why that is bad input
        for a worker that needs some (a distributed worker waits for pushed ones).
        ``scope``: the job file's crawl scope (page targets, crawl profiles, collections; empty for a
        plain id crawl), which ``idcrawl.spidermiddlewares.scope.IdScopeMiddleware`` follows.
        The worker is built on first use (:meth:`start`).
        """
        self.crawler = crawler
        self.targets = list(targets)
        self.missing_targets = missing_targets
        self.scope = scope if scope is not None else JobScope()
        self._orphans: list[Any] = []  # outputs released at dispatch (overlapping targets), not yet emitted
        self._wakes: list[float] = []  # heap of monotonic times the engine is to be woken at
        self._wake_set: set[float] = set()  # the same times, to keep each once
        self._timer: Any = None
        self._timer_due = 0.0
        self._worker: Worker | None = None
        self._clock: Clock | None = None
        self._wave_ended = False  # watch mode: the wave's worker has closed, the next one is not built yet
        #: watch mode: the wave this runtime's worker plans (1: the run itself)
        self.wave = 1
        self._counts_before: dict[str, int] = {}  # watch mode: the job totals when this wave began
        self._stats_inc: Callable[..., None] | None = None  # _scrapy.stats_incrementer, on first use
        #: one process per state (idcrawl.state.lock): held from the first worker until the engine stops
        self.locks = Locks()
        self._renewal: Any = None
        _RUNTIMES[crawler] = self
        # the runtime refers to its crawler: left in the registry, a finished crawler would stay in memory
        crawler.signals.connect(self._forget, signal=signals.engine_stopped)

    def _forget(self) -> None:
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
        recorder = getattr(self._worker, "recorder", None)
        if recorder is not None:
            recorder.abandon()
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
            path = self.crawler.settings.get("IDCRAWL_WORKER_CLASS") or default_settings.IDCRAWL_WORKER_CLASS
            try:
                worker_cls = load_object(path) if isinstance(path, str) else path
            except (ImportError, AttributeError, NameError, ValueError) as exc:
                raise BadInputError(f"bad setting: IDCRAWL_WORKER_CLASS={path!r}: cannot be imported ({exc})") from None
            settings = self.crawler.settings
            keeps_state = not (isinstance(worker_cls, type) and issubclass(worker_cls, LocalWorker)) or \
                settings.getbool("IDCRAWL_STATE", default_settings.IDCRAWL_STATE)
            if keeps_state and not settings.getbool("IDCRAWL_DISCARD_ITEMS", default_settings.IDCRAWL_DISCARD_ITEMS) \
                    and not items_kept(settings):
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
                self._clock = Clock.from_setting(self.crawler.settings.get("IDCRAWL_NOW"))
            except ClockError as exc:
                raise BadInputError(f"bad setting: {exc}") from None
        return self._clock

    @property
    def worker(self) -> Worker:
        worker = self._worker
        if worker is None:
            self.start()
            worker = self._worker
            assert worker is not None
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
        pages: PageBook | None = getattr(self.worker, "pages", None)
        return pages

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
        skipped, deduplicated = frontier.skipped_found, frontier.deduplicated
        try:
            dispatch = frontier.next(group_ready)
        except worker.errors as exc:
            worker.unavailable(exc)
            return None
        if frontier.skipped_found != skipped:
            self.inc_stat(f"{STATS_PREFIX}/resume/skipped_found", frontier.skipped_found - skipped)
        if frontier.deduplicated != deduplicated:
            # ids an overlapping target fetched (or is fetching): served without a request
            self.inc_stat(f"{STATS_PREFIX}/deduplicated", frontier.deduplicated - deduplicated)
            self.inc_stat("dupefilter/filtered", frontier.deduplicated - deduplicated)
        if frontier.touched:
            self._take_touched()
        if frontier.released:
            released, frontier.released = frontier.released, []
            self._orphans += self.emit_released(released)
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
        if frontier.touched:
            self._take_touched()
        outputs = self.emit_released(rec.released)
        if self._orphans:
            outputs, self._orphans = self._orphans + outputs, []
        return outputs

    def emit_released(self, released: list[Payload]) -> list[Any]:
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
            self.worker.decided(frontier.lane_target[change.lane].name, change.outcome, change.id)

    def _count(self, lane_key: str, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        """Move the change of a lane's counters into stats (per lane, and job totals)."""
        for name, old, new in zip(_COUNT_FIELDS, before, after, strict=True):
            if new != old and name != "dispensed":
                self.inc_stat(f"{STATS_PREFIX}/{name}", new - old)
                self.inc_stat(f"{STATS_PREFIX}/lanes/{lane_key}/{name}", new - old)

    def lane_stopped(self, lane_key: str, lane: Lane[Payload]) -> None:
        """Stats of a lane that stopped (its reason, where it was cut)."""
        self._lane_stopped(lane_key, lane)

    def _lane_stopped(self, lane_key: str, lane: Lane[Payload]) -> None:
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
        recorder = getattr(self.worker, "recorder", None)
        if recorder is not None:
            recorder.detach()

    def next_wave(self) -> None:
        """Watch mode: a new worker plans the next wave from the stored state at the clock's now."""
        self._counts_before = self.job_counts(per_wave=False)
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
        worker = self.worker
        worker.stop(reason)
        frontier = worker.frontier
        for key, lane in frontier.lanes.items():
            if lane.reason is not None:
                self._lane_stopped(key, lane)
            self.stats.set_value(f"{STATS_PREFIX}/lanes/{key}/cursor", lane.first_undecided)
        held = sum(lane.held for lane in frontier.lanes.values())
        if held:
            logger.info("idcrawl: %d found ids held at close were not emitted (reason %s)", held, reason)
            self.inc_stat(f"{STATS_PREFIX}/held_at_close", held)
        worker.close(reason)

    def job_counts(self, *, per_wave: bool = True) -> dict[str, int]:
        """The job totals of this run (``idcrawl/<name>`` stats), for the run's record; in watch mode
        this wave's (``per_wave``), each wave being a run of the state."""
        totals = {k.split("/", 1)[1]: v for k, v in self.stats.get_stats().items()
                  if k.startswith(f"{STATS_PREFIX}/") and k.count("/") == 1 and isinstance(v, int)}
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
    """The runtime of ``crawler``'s id crawl, its worker built (state loaded) on first use; None if not an id crawl.

    Components call it once they are built (from ``from_crawler`` at the
    earliest: after the spider, which creates the runtime); the first call
    builds the worker (:meth:`IdRuntime.start`), which may raise
    :class:`~idcrawl.errors.BadInputError`.
    """
    runtime = _RUNTIMES.get(crawler) if crawler is not None else None
    if runtime is not None and runtime._worker is None:
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


def own_line(targets: Sequence[Target]) -> OwnLine:
    """Whether a feed line's ``(target, id, url)`` is an item of one of ``targets``' own pages: a target of
    the job, an id in its bounds, and the URL its template renders for that id (emit-once read-back)."""
    by_name = {target.name: target for target in targets}

    def own(name: str, id_: int, url: Any) -> bool:
        target = by_name.get(name)
        return target is not None and isinstance(url, str) and target.id_of(url) == id_

    return own


class LocalWorker:
    """Lanes in this process (:class:`~idcrawl.core.frontier.Frontier`), state through the state recorder."""

    counts_scope = ""
    errors: tuple[type[Exception], ...] = ()

    def __init__(self, runtime: IdRuntime) -> None:
        """The runtime's targets planned from the stored state (``IDCRAWL_STATE``), or fresh."""
        if runtime.missing_targets is not None:
            raise runtime.missing_targets
        self.runtime = runtime
        self.crawler = crawler = runtime.crawler
        settings = crawler.settings
        counts_failed = settings.getbool("IDCRAWL_MARGIN_COUNTS_FAILED", default_settings.IDCRAWL_MARGIN_COUNTS_FAILED)
        neutral = frozenset() if counts_failed else frozenset({Outcome.FAILED})
        speculation = settings.get("IDCRAWL_SPECULATION", default_settings.IDCRAWL_SPECULATION)
        adaptive = str(speculation).strip().lower() == "adaptive"
        max_held = settings.getint("IDCRAWL_MAX_HELD_PAYLOADS", default_settings.IDCRAWL_MAX_HELD_PAYLOADS)
        self.frontier: Frontier[Payload] = Frontier(
            [], neutral=neutral, rebind=_rebind, adaptive=adaptive, max_held=max_held,
            sequential=lambda target: _scrapy.sequential_host(settings, target.host),
        )
        self.recorder: StateRecorder | None = None
        self.resume_notes: dict[str, str] = {}
        #: the page schedule records of the targets (conditional revisits, due pages, items of changes
        #: only), kept with the state (None: state off, every found page is new)
        self.pages: PageBook | None = None
        self._recovered_count = 0  # found ids read back from the last run's feed tails
        self._foreign_lines = 0  # lines of those tails that are not this job's (skipped)
        self._due_pages = 0  # page ids due (resume=due)
        store = None
        name = getattr(crawler.spidercls, "name", "idseq")
        if settings.getbool("IDCRAWL_STATE", default_settings.IDCRAWL_STATE):
            from idcrawl.state.factory import configured_backend, open_store

            if configured_backend(settings) == "sqlite":  # locked before the file is opened
                path = state_path(settings, name)
                runtime.hold(str(lock_path(path).resolve()), FileLock(lock_path(path), f"state file {str(path)!r}"))
            try:
                store = open_store(settings, name, stats=crawler.stats)  # IDCRAWL_STATE_BACKEND: sqlite or redis
            except StateError as exc:
                raise BadInputError(f"{name}: {exc}") from None
            if isinstance(store, RedisStateStore):  # locked before anything is read or written
                lease = settings.getfloat("IDCRAWL_STATE_LEASE", default_settings.IDCRAWL_STATE_LEASE)
                fleet = settings.getfloat("IDCRAWL_REDIS_LEASE_TIMEOUT", default_settings.IDCRAWL_REDIS_LEASE_TIMEOUT)
                runtime.hold(f"redis {store.prefix}", RedisOwner(
                    store.client, store.keys.owner, lease, f"Redis state {store.prefix!r}", fleet_lease=fleet))
        try:
            self._load(store)
        except StateError as exc:  # damaged state (idcrawl.state.decode): one line, nothing written
            if store is not None:
                store.close()
            raise BadInputError(f"{name}: {exc}") from None

    def _load(self, store: StateStore | None) -> None:
        """The targets' lanes, planned from the stored state when there is one."""
        settings = self.crawler.settings
        self._store = store
        if store is not None:
            self.pages = PageBook(self.runtime.clock, {t.name: t.policy for t in self.runtime.targets}, retain=False)
        origins: dict[str, int] = {}
        self._found_max: dict[str, int] = {}  # target -> the highest id its stored state found
        self._last_found: dict[str, int] = {}  # continued lane -> its stored last found id
        emit_once = settings.getbool("IDCRAWL_STATE_EMIT_ONCE", default_settings.IDCRAWL_STATE_EMIT_ONCE)
        # ids the last run wrote to its feeds after its last commit: found already, never emitted again
        # (not in a watching crawl's later waves: the feeds are this process's own, committed at the last wave's end)
        # only this job's lines: another job appending to the same file writes lines that are not
        read = (recover_feed_tails(store.feed_marks(), skip=overwritten_feeds(self.crawler),
                                   own=own_line(self.runtime.targets))
                if store is not None and emit_once and self.runtime.wave == 1 else ReadBack())
        recovered, self._foreign_lines = read.found, read.foreign
        # the tails' schedules (idcrawl.core.recrawl), read once: resume=due plans with them, the recorder
        # applies the recrawl rule to them at the run's end
        self._tails: dict[str, Schedule] = store.tail_schedules() if store is not None else {}
        self._forgotten = Forgotten()  # resume=reset: what the stored state held, warned about once
        # every target's state read (and checked) before any target's is reset
        states = {t.name: store.load(t.name) for t in self.runtime.targets} if store is not None else {}
        for target in self._in_due_order(self.runtime.targets):
            if target.resume in RESET_MODES:
                recovered.pop(target.name, None)  # the target starts over
            self._add_target(target, store, origins, recovered.get(target.name), states.pop(target.name, None))
        self._forgotten.reset(store)
        if any(target.resume == "none" for target in self.runtime.targets):
            logger.warning("idcrawl: %s", NONE_DEPRECATED)
        self._recovered_count = sum(len(ids) for ids in recovered.values())
        if self._foreign_lines:
            logger.warning("idcrawl: resume: %d feed lines past the last commit are not this job's (another "
                           "target, URL or id: another job appends to the same feed?); skipped, their ids "
                           "are fetched again", self._foreign_lines)
        if store is not None:
            self.recorder = StateRecorder(
                store, self.crawler, self.frontier, origins,
                batch=settings.getint("IDCRAWL_STATE_COMMIT_ITEMS", default_settings.IDCRAWL_STATE_COMMIT_ITEMS),
                interval=settings.getfloat(
                    "IDCRAWL_STATE_COMMIT_INTERVAL", default_settings.IDCRAWL_STATE_COMMIT_INTERVAL
                ),
                emit_once=emit_once,
                recovered=recovered,
                clock=self.runtime.clock,
                found_max=self._found_max,
                last_found=self._last_found,
                pages=self.pages,
                tails=self._tails,
            )
            # watch mode: the wave's last commit tells when its earliest found page falls due
            self.recorder.watch = settings.getbool("IDCRAWL_WATCH", default_settings.IDCRAWL_WATCH)

    def _add_target(
        self, target: Target, store: StateStore | None, origins: dict[str, int], recovered: BitMap64 | None = None,
        state: TargetState | None = None,
    ) -> None:
        """Fresh lanes, or the lanes of the resume plan of the target's stored past ``state``
        (``recovered``: found ids read back from the last run's feeds, not in the state yet)."""
        if state is None or target.resume in RESET_MODES:
            note = resume_text(target.resume, stored=state is not None)
            if note is not None:
                self.resume_notes[target.name] = note
            if state is not None and store is not None:
                self._forgotten.add(target.name, target.resume, state)  # reset once every target is checked
            elif target.resume not in ("auto", *RESET_MODES):
                logger.warning("idcrawl: target %r has no stored state; resume=%s starts fresh",
                               target.name, target.resume)
            self.frontier.add_target(target)
            return
        stored, current = state.params, identity(target)
        for key in IDENTITY_KEYS:
            if key in stored and stored[key] != current[key]:
                raise BadInputError(
                    f"target {target.name!r}: {key}={current[key]!r} differs from the stored state "
                    f"({key}={stored[key]!r}): -a resume=reset starts the target over (forgetting its "
                    "stored outcomes), or give another JOBDIR / IDCRAWL_STATE_PATH"
                )
        if recovered:
            found = state.outcomes.get(Outcome.FOUND)
            if found is not None:
                # a line past the last commit is of an id not found then: one found before is not this job's
                before = recovered & found
                if before:
                    self._foreign_lines += len(before)
                    recovered -= before
                state.outcomes[Outcome.FOUND] = recovered | found
            else:
                state.outcomes[Outcome.FOUND] = recovered
        walk_tail = True
        if target.resume == "due":
            schedule = self._tails.get(target.name)
            walk_tail = tail_due(schedule, self.runtime.clock.now())
            if not walk_tail and schedule is not None:
                self.resume_notes[target.name] = (
                    f"resume=due: tail not due until {format_time(schedule.due_at())}, nothing to fetch"
                )
        specs = resume_specs(target, state.lanes, state.outcomes, target.resume, target.holes,
                             walk_tail=walk_tail, due_pages=self.due_pages(target, state))
        origins.update({key: record.start for key, record in state.lanes.items()})
        known = cast("Container[int] | None", state.outcomes.get(Outcome.FOUND))  # a roaring bitmap
        if isinstance(known, BitMap64) and known:
            self._found_max[target.name] = known.max()
        self.frontier.add_target(target, specs, known_found=known)
        continued = {spec.key for spec in specs}
        self._last_found.update((key, record.last_found) for key, record in state.lanes.items()
                                if key in continued and record.last_found is not None)
        note = resume_text(
            target.resume, stored=True, known_found=len(known) if isinstance(known, Sized) else 0,
            finished=[spec.direction for spec in lane_specs(target) if spec.key not in continued],
        )
        if note is not None and target.name not in self.resume_notes:
            self.resume_notes[target.name] = note

    def _in_due_order(self, targets: Sequence[Target]) -> list[Target]:
        """``resume=due``: the targets whose tails are most overdue first (they win the interleaving's
        ties, so a run cut short by a limit has walked them); the others as given."""
        return due_first(targets, self._tails, self.runtime.clock.now()) if self._tails else list(targets)

    def due_pages(self, target: Target, state: TargetState) -> list[int]:
        """``resume=due``: the found ids of ``target`` due for a revisit at the clock's now, most overdue
        first (:func:`idcrawl.core.recrawl.due_order`); walked after its tail, as conditional requests.
        Only a due run loads the page records: other runs never fetch a found id again."""
        if target.resume != "due" or self._store is None or self.pages is None:
            return []
        self.pages.load(target.name, self._store.load_pages(target.name))
        due = self.pages.due_ids(target.name, found=state.outcomes.get(Outcome.FOUND, ()))
        self._due_pages += len(due)
        return due

    def watch_schedules(self) -> list[Schedule]:
        """Watch mode, after the wave's last commit: the schedules of this job's targets as stored now
        (the tails just walked with the rule applied; the others as they were). The next wave starts
        when the earliest of them falls due (:func:`idcrawl.core.watch.next_wave_at`)."""
        if self.recorder is None:
            return []
        targets = self.frontier.targets
        return [schedule for name, schedule in self.recorder.schedules.items() if name in targets]

    def watch_pages(self) -> list[float]:
        """Watch mode, after the wave's last commit: the earliest due time of this job's found pages
        not before the wave's end, as stored then (one indexed query per target: no walk over the
        pages), so a page falling due before the next tail wakes a wave of its own."""
        at = self.recorder.next_page_at if self.recorder is not None else None
        return [] if at is None else [at]

    def describe_state(self) -> str:
        if self.recorder is None:
            return "state off"
        where = self.recorder.store.path if hasattr(self.recorder.store, "path") else None
        if isinstance(where, Path):
            return f"state {where.resolve()}"
        return f"state in Redis ({where})" if where else f"state in {type(self.recorder.store).__name__}"

    def open(self) -> None:
        if self._recovered_count:
            self.runtime.stats.set_value(f"{STATS_PREFIX}/resume/recovered_from_feed", self._recovered_count)
        if self._foreign_lines:
            self.runtime.stats.set_value(f"{STATS_PREFIX}/resume/foreign_feed_lines", self._foreign_lines)
        if self._due_pages:
            self.runtime.stats.set_value(f"{STATS_PREFIX}/pages/due", self._due_pages)
        if self.recorder is not None:
            self.recorder.open()

    def unavailable(self, exc: Exception) -> None:  # pragma: no cover - errors is empty
        raise exc

    def record_failed(
        self, exc: Exception, lane_key: str, id_: int, outcome: Outcome, outputs: list[Any] | None, attempt: int
    ) -> list[Any]:  # pragma: no cover - errors is empty
        raise exc

    def decided(self, target: str, outcome: Outcome, id_: int) -> None:
        if self.recorder is not None:
            self.recorder.outcome(target, outcome, id_)

    def released(self, lane_key: str, id_: int, outputs: list[Any]) -> None:
        if self.recorder is not None:
            self.recorder.released(self.frontier.lane_target[lane_key].name, lane_key, id_, outputs)

    def hold_page(self, owner: str, url: str, outputs: list[Any], harvest: Callable[[], None]) -> bool:
        """A found page of the crawl scope: harvested once its items are written (the recorder's
        checkpoint, as found ids); False (no state, or no item of its own): harvest it now."""
        return self.recorder is not None and self.recorder.hold_page(owner, url, outputs, harvest)

    def stop(self, reason: str) -> None:
        """Lanes still running stop with the close reason."""
        for key, lane in self.frontier.lanes.items():
            if not lane.stopped:
                self.frontier.close_lane(key, reason)

    def close(self, reason: str) -> None:
        """The last commit of the state, with the run's totals."""
        if self.recorder is not None:
            self.recorder.close(reason, self.runtime.job_counts())
            self.runtime.stats.set_value(f"{STATS_PREFIX}/state/commits", self.recorder.commits)


if TYPE_CHECKING:  # mypy checks that the in-process worker is a Worker and its frontier an IdFrontier

    def _is_a_worker(worker: LocalWorker) -> Worker:
        return worker
