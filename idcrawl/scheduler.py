"""``IdScheduler``: Scrapy's scheduler plus lazily dispensed lane requests.

Follow-up requests keep Scrapy's queues and are served first; retries wait in a
delay queue (or, when the worker shares them, in the fleet's); then the next id
comes from the frontier, on a slot with room (and, in a fleet, one its politeness
gate lets through), taking turns with the crawl scope's URL queue. Without an id
runtime it is Scrapy's scheduler. See docs/architecture.md.
"""

from __future__ import annotations

import shutil
import time
import weakref
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Protocol

from scrapy import Request, signals
from scrapy.core.scheduler import Scheduler

from idcrawl._scrapy import (
    SLOT_CLOCK,
    downloader_crowded,
    slot_has_room,
    slot_key,
    slot_ready_at,
    stats_incrementer,
)
from idcrawl.core.delays import DelayQueue
from idcrawl.core.scope import host_of
from idcrawl.extensions.limits import IdLimits
from idcrawl.runtime import DUE_KEY, META_KEY, STATS_PREFIX, IdRuntime, Limiter, start_runtime
from idcrawl.slots import HostSlots, host_slots
from idcrawl.storage import report_storage_error, storage_problem

if TYPE_CHECKING:
    from scrapy import Spider
    from twisted.internet.defer import Deferred

__all__ = ["IdScheduler", "PolitenessGate", "SharedRetries"]

_DEQUEUED_LANE = f"scheduler/dequeued/{STATS_PREFIX}"


class SharedRetries(Protocol):
    """The worker's part for retries shared by a fleet (``shared_retries()``; None: retries wait here)."""

    def delay(self, request: Request, wait: float) -> None:
        """Park the retry of a lane request for ``wait`` seconds; any worker may take it when it falls due."""

    def due_retry(self) -> Request | None:
        """A parked retry that fell due, or None."""


class PolitenessGate(Protocol):
    """The worker's part for politeness held across a fleet (``politeness_gate()``; None: per process)."""

    @property
    def worker(self) -> str:
        """This worker's id (the reservations' tokens start with it)."""

    def fleet_gate(self, slot: str) -> bool:
        """May the slot take a request, as far as this worker knows (no round trip)?"""

    def reserve(self, slot: str, token: str, *, gap: float, cap: int, life: float = 0.0) -> float:
        """Reserve the slot's next start for request ``token`` or, as it leaves (``life`` > 0), take one
        of the slot's ``cap`` places in flight fleet-wide: 0 = go now, else seconds to wait."""

    def release(self, slot: str, token: str) -> None:
        """Give back the place in flight of request ``token`` (its download ended)."""

    def sleep(self, slot: str, wait: float) -> Deferred[None]:
        """Fires after ``wait`` s, or sooner when the fleet frees a place of the slot."""


class IdScheduler(Scheduler):
    runtime: IdRuntime | None = None

    def open(self, spider: Spider) -> Deferred[None] | None:
        result = super().open(spider)
        self.runtime = start_runtime(self.crawler)
        assert self.crawler is not None
        self._slots: HostSlots = host_slots(self.crawler)
        # lane requests handed to the engine that have not reached their slot yet
        self._entering: dict[str, weakref.WeakSet[Request]] = {}
        #: slot -> the end of its delay (SLOT_CLOCK) a wake-up is armed for, and when (monotonic): one
        #: wake-up per gap, not one per refusal
        self._armed: dict[str, tuple[float, float]] = {}
        self._delayed: DelayQueue[Request] = DelayQueue()
        self._outlinks_first = False
        assert self.stats is not None
        self._stats_inc = stats_incrementer(self.stats)  # two increments per lane request
        if self.runtime is not None:
            limits = self.crawler.get_extension(IdLimits)
            if limits is not None and limits.parts is None:  # the limits take the worker's parts before the crawl
                limits.open(self.runtime.worker.limit_parts())
            self.runtime.open()
            self.crawler.signals.connect(self._reached_downloader, signal=signals.request_reached_downloader)
        return result

    def close(self, reason: str) -> Deferred[None] | None:
        if self._delayed:
            assert self.stats is not None
            self.stats.set_value(f"{STATS_PREFIX}/attempts/pending_at_close", len(self._delayed))
        try:
            return super().close(reason)
        except OSError as exc:  # JOBDIR's queue could not be saved: dropped, the dupefilter still closes
            self._queue_failed(exc)
            return self.df.close(reason)

    def _queue_failed(self, exc: OSError) -> None:
        """A write of JOBDIR's request queue failed: a storage error (else raised); the queue is removed
        (its requests are lost: a resumed run gets the ids from the state), or rebuilt at the next start."""
        problem = storage_problem(exc)
        if problem is None:
            raise exc
        where = getattr(self, "dqdir", None) or "JOBDIR/requests.queue"
        assert self.crawler is not None
        report_storage_error(self.crawler, where, problem)
        dqdir = getattr(self, "dqdir", None)
        if self.dqs is not None and dqdir:
            shutil.rmtree(dqdir, ignore_errors=True)
        self.dqs = None

    def has_pending_requests(self) -> bool:
        if super().has_pending_requests() or self._delayed:
            return True
        runtime = self.runtime
        return runtime is not None and (runtime.outlinks_ready() or runtime.frontier.can_dispense())

    def _shared_retries(self) -> SharedRetries | None:
        return self.runtime.worker.shared_retries() if self.runtime is not None else None

    def enqueue_request(self, request: Request) -> bool:
        """Requests with a due time in the future (retries) wait in the delay queue (lane requests in
        the fleet's, when the worker shares retries)."""
        due = request.meta.get(DUE_KEY)
        if due is None or (wait := due - time.monotonic()) <= 0:
            try:
                return super().enqueue_request(request)
            except OSError as exc:
                self._queue_failed(exc)
                return False
        shared = self._shared_retries() if META_KEY in request.meta else None
        if shared is not None:
            shared.delay(request, wait)
        else:
            self._delayed.push(due, request)
        assert self.stats is not None
        self.stats.inc_value("scheduler/enqueued")
        self.stats.inc_value(f"scheduler/enqueued/{STATS_PREFIX}_delayed")
        if shared is None:
            self._arm_timer()
        return True

    def next_request(self) -> Request | None:
        shared = self._shared_retries()
        if shared is not None and (request := shared.due_retry()) is not None:
            assert self.stats is not None
            self.stats.inc_value("scheduler/dequeued")
            self.stats.inc_value(f"scheduler/dequeued/{STATS_PREFIX}_delayed")
            return request
        limiter = self.runtime.limiter if self.runtime is not None else None
        while True:
            request = self._next_queued()
            if request is None or limiter is None or not self._limited(request, limiter):
                break
        if request is not None or self.runtime is None:
            return request
        outlinks = self.runtime.serves_outlinks
        if outlinks:  # crawl scope: lanes and the URL queue take turns
            self._outlinks_first = not self._outlinks_first
            if self._outlinks_first and (request := self._next_outlink()) is not None:
                return request
        dispatch = self.runtime.next(self._group_ready)
        if dispatch is None:
            return self._next_outlink() if outlinks and not self._outlinks_first else None
        assert self.stats is not None
        inc = self._stats_inc
        inc("scheduler/dequeued")
        inc(_DEQUEUED_LANE)
        lane_request: Request = self.spider.make_id_request(dispatch)  # type: ignore[attr-defined]
        # lane requests are never filtered (a false positive would lose a page and bend a margin;
        # overlapping targets share outcomes in the frontier instead), but the filter learns them,
        # so a follow-up link to a lane's page is not fetched again
        self.df.request_seen(lane_request)
        slot_key = self._slots.of(dispatch.target.host)
        self._entering.setdefault(slot_key, weakref.WeakSet()).add(lane_request)
        if limiter is not None:
            limiter.taken(slot_key)
        return lane_request

    def _next_outlink(self) -> Request | None:
        """The next URL of the crawl scope's queue on a host with room (the yield model chooses)."""
        assert self.runtime is not None
        request = self.runtime.next_outlink(self._group_ready)
        if request is not None:
            assert self.stats is not None
            self.stats.inc_value("scheduler/dequeued")
            self.stats.inc_value(f"scheduler/dequeued/{STATS_PREFIX}_scope")
            self._entering.setdefault(self._slots.of(host_of(request.url)), weakref.WeakSet()).add(request)
        return request

    def _next_queued(self) -> Request | None:
        """A due retry, else a request of Scrapy's queues (follow-ups)."""
        request = self._delayed.pop_due(time.monotonic())
        if request is not None:
            assert self.stats is not None
            self.stats.inc_value("scheduler/dequeued")
            self.stats.inc_value(f"scheduler/dequeued/{STATS_PREFIX}_delayed")
            self._arm_timer()
            return request
        try:
            return super().next_request()
        except OSError as exc:
            self._queue_failed(exc)
            return None

    def _limited(self, request: Request, limiter: Limiter) -> bool:
        """Drop a queued request of a slot that a job limit stopped."""
        assert self.crawler is not None and self.crawler.engine is not None
        if request.url.startswith("data:"):
            return False
        if not limiter.closed(slot_key(self.crawler, request)):
            return False
        assert self.stats is not None
        self.stats.inc_value(f"{STATS_PREFIX}/limits/dropped")
        return True

    # -- delay queue ------------------------------------------------------------------

    def _arm_timer(self) -> None:
        """Wake the engine when the earliest delayed request falls due (the runtime's timer).

        Without it, a retry would wait for Scrapy's 5 s heartbeat.
        """
        due = self._delayed.next_due()
        if due is not None and self.runtime is not None:
            self.runtime.wake_at(due)

    # -- download-slot awareness ---------------------------------------------------

    def _group_ready(self, group: Hashable) -> bool:
        """A slot is ready while it has free concurrency and nothing waiting on its delay
        (and, with job limits, while the limits admit it).

        Requests on their way through the downloader middlewares are not in
        the slot yet; counting them too keeps one host from taking more than
        its share of CONCURRENT_REQUESTS (they are held weakly, so one that a
        middleware drops is forgotten with it).
        """
        assert self.crawler is not None and self.crawler.engine is not None
        key = self._slots.of(str(group))
        entering = self._entering.get(key)
        pending = len(entering) if entering is not None else 0
        if not slot_has_room(self.crawler, key, pending):
            return False
        runtime = self.runtime
        # a request handed out now waits out the slot's delay in its queue (to the millisecond), counted
        # against CONCURRENT_REQUESTS the while: once the downloader is half full, a host in its gap would
        # hold back the others, so its request is handed out when the gap has run (a wake-up is armed)
        ready_at = slot_ready_at(self.crawler, key)
        wait = 0.0 if ready_at is None else ready_at - SLOT_CLOCK()
        if wait > 0 and downloader_crowded(self.crawler):
            armed = self._armed.get(key)
            now = time.monotonic()
            # asked again before the gap ends: its wake-up is armed already (armed again from 2 ms before
            # it is due: wake_at rounds to the millisecond, so the timer may fire a little early)
            if runtime is not None and (armed is None or armed[0] != ready_at or now >= armed[1] - 0.002):
                assert ready_at is not None
                self._armed[key] = (ready_at, now + wait)
                runtime.wake_at(now + wait)
            return False
        if ready_at is not None and wait <= 0:
            self._armed.pop(key, None)
        limiter = runtime.limiter if runtime is not None else None
        # the job limits: may the slot take one more request (LT per iteration, stop rules)?
        if limiter is not None and not limiter.admit(key):
            return False
        gate = runtime.worker.politeness_gate() if runtime is not None else None
        return gate is None or gate.fleet_gate(key)

    def _reached_downloader(self, request: Request, spider: Any = None) -> None:
        entering = self._entering.get(request.meta.get("download_slot", ""))
        if entering is not None:
            entering.discard(request)
