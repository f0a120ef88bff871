"""A fleet worker's parts of the scheduler: retries parked in the job's delayed set (``FleetRetries``,
the ``SharedRetries`` of ``RedisWorker.shared_retries()``) and each slot's next start reserved for the
fleet (``FleetGate``, the ``PolitenessGate`` of ``RedisWorker.politeness_gate()``). Why:
docs/architecture.md, "The fleet's protocol"."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError
from scrapy.utils.asyncio import call_later
from scrapy.utils.request import request_from_dict
from scrapy_redis import picklecompat
from twisted.internet import reactor
from twisted.internet.defer import Deferred

from idcrawl.distributed.replies import PoliteReply
from idcrawl.runtime import DUE_KEY, META_KEY, STATS_PREFIX
from idcrawl.state.keys import glob

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request

    from idcrawl.distributed.frontier import RedisFrontier
    from idcrawl.distributed.job import RedisJob
    from idcrawl.runtime import IdRuntime, Payload

__all__ = ["FleetGate", "FleetRetries"]

logger = logging.getLogger(__name__)

PREFIX = f"{STATS_PREFIX}/redis"
#: A place in flight given back (``FleetGate.release``) rides on this worker's next ``POLITE`` call if one
#: comes within this many seconds (its next request to a host, usually), else goes in a call of its own.
RELEASE_WITHIN = 0.02
#: The longest wait (s) before asking again for a place of a host found full again and again (the waits
#: double from the script's estimate of when its oldest request is done), for a worker whose notifications
#: of freed places do not come (its subscription lost): with them it waits until a place is given back.
FULL_BACKOFF_MAX = 0.25
#: Seconds a lost subscription to freed places is left before it is made anew.
RESUBSCRIBE_AFTER = 5.0


class FleetRetries:
    """Retries of a fleet's job: parked in the job's delayed set (``delay``), taken by any worker when
    they fall due (``due_retry``); kept by this worker while Redis does not answer."""

    def __init__(self, runtime: IdRuntime, frontier: RedisFrontier[Payload], job: RedisJob, worker: str,
                 poll_interval: float, *, outage: Callable[[Exception], None], down: Callable[[], bool],
                 load_targets: Callable[[], None], active: Callable[[], None]) -> None:
        """``outage``: Redis did not answer; ``down``: Redis is not answering (no round trip then);
        ``load_targets``: join the targets added to the job; ``active``: this worker did something."""
        self.runtime = runtime
        self.frontier = frontier
        self.job = job
        self.worker = worker
        self.poll_interval = poll_interval
        self.outage = outage
        self.down = down
        self.load_targets = load_targets
        self.active = active
        self.due: list[Request] = []  # shared retries taken from Redis, not yet handed out
        self.due_at = 0.0  # monotonic time from which a shared retry may be due
        self.local: list[tuple[float, Request]] = []  # retries Redis did not take (an outage)

    def waiting(self) -> bool:
        """Has this worker retries of its own to hand out (taken from Redis, or kept through an outage)?"""
        return bool(self.due or self.local)

    def due_in(self, wait: float) -> None:
        """A poll read that the job's next retry falls due in ``wait`` seconds."""
        self.due_at = min(self.due_at, time.monotonic() + wait)

    def delay(self, request: Request, wait: float) -> None:
        """Park a retry in the job's delayed set; any worker takes it when it falls due."""
        info = request.meta[META_KEY]
        meta = {k: v for k, v in request.meta.items() if k != DUE_KEY}
        crawler = self.runtime.crawler
        blob = picklecompat.dumps(request.replace(meta=meta).to_dict(spider=crawler.spider))
        redis_id = self.frontier.redis_id(info["lane"], info["id"])  # a list lane's position
        member = f"{info['lane']}\t{redis_id}\n".encode() + blob
        try:
            self.job.delay(info["lane"], redis_id, max(1, int(wait * 1000)), member)
        except RedisError as exc:  # kept here instead: this worker retries it itself
            self.outage(exc)
            self.local.append((time.monotonic() + wait, request))
            self.runtime.wake_in(wait)
            return
        self.frontier.inflight.discard((info["lane"], info["id"]))  # the delayed set holds it now
        self.runtime.stats.inc_value(f"{PREFIX}/retries_shared", 1)
        due = time.monotonic() + wait
        self.due_at = min(self.due_at, due)
        self.runtime.wake_in(wait)

    def due_retry(self) -> Request | None:
        """A retry of the job that fell due (taken from Redis in small batches), or None."""
        now = time.monotonic()
        for i, (due, request) in enumerate(self.local):
            if due <= now:
                del self.local[i]
                return request
        if not self.due and now >= self.due_at and not self.down():
            try:
                members = self.job.pop_delayed(self.worker, 16)
            except RedisError as exc:
                self.outage(exc)
                return None
            self.due_at = float("inf")  # the next poll says when the next one is due
            spider = self.runtime.crawler.spider
            for member in members:
                _, _, blob = member.partition(b"\n")
                request = request_from_dict(picklecompat.loads(blob), spider=spider)
                info = request.meta[META_KEY]
                if info["lane"] not in self.frontier.lanes:
                    self.load_targets()  # a target added since the last poll
                if info["lane"] not in self.frontier.lanes:
                    logger.error("idcrawl: a retry of unknown lane %r (id %s) goes back to the job",
                                 info["lane"], info["id"])
                    self.delay(request, self.poll_interval)
                    continue
                self.frontier.inflight.add((info["lane"], info["id"]))
                self.due.append(request)
        if self.due:
            self.active()
            return self.due.pop(0)
        return None


class FleetGate:
    """Politeness held across a fleet: each slot's next start and its places in flight, in the job
    (``POLITE``), and what this worker knows of other workers' hold on a slot (no round trip)."""

    def __init__(self, runtime: IdRuntime, job: RedisJob, worker: str, *, lease: float,
                 outage: Callable[[Exception], None]) -> None:
        """``lease``: the workers' lease (s): a stopped worker's places in flight are free after it."""
        self.runtime = runtime
        self.job = job
        self.worker = worker
        self.lease_ms = max(1, int(lease * 1000))
        self.outage = outage
        self.until: dict[str, float] = {}  # slot -> monotonic time another worker holds it until
        self.flying: set[str] = set()  # tokens of this worker's requests holding a place in flight
        self.full_until: dict[str, float] = {}  # slot -> monotonic time its places were all taken until
        self.releases: list[tuple[str, str]] = []  # (slot, token): places given back with the next call
        self.full_streak: dict[str, int] = {}  # slot -> replies in a row that found its places all taken
        self._flush_armed = False
        #: requests waiting for a place of a slot: woken by a notification that one was given back
        self._sleepers: dict[str, list[Deferred[None]]] = {}
        self._notes: Any = None  # the subscription to freed places (P busy:* channels), its thread
        self._notes_thread: Any = None
        self._notes_lost_at: float | None = None
        #: notifications of freed places received (stat idcrawl/redis/host_freed_notes)
        self.notes = 0

    # -- notifications of freed places -------------------------------------------------------------------

    def listen(self) -> None:
        """Subscribe to the job's freed places (``POLITE`` publishes on ``P busy:<slot>`` when a place of a
        slot someone waits for is given back), read in a thread of redis-py's own (``run_in_thread``)."""
        if self._notes_thread is not None:
            return
        try:
            client: Any = self.job.client
            notes = client.pubsub(ignore_subscribe_messages=True)
            notes.psubscribe(**{glob(self.job.keys.busy("")) + "*": self._noted})
            self._notes_thread = notes.run_in_thread(sleep_time=1.0, daemon=True,
                                                     exception_handler=self._notes_failed)
            self._notes = notes
            self._notes_lost_at = None
        except RedisError as exc:
            logger.debug("idcrawl: no notifications of freed places (%s): asking again instead", exc)
            self._notes_lost_at = time.monotonic()

    def _noted(self, message: dict[str, Any]) -> None:  # the subscription's thread
        channel, token = message.get("channel"), message.get("data")
        if isinstance(channel, bytes):
            channel = channel.decode("utf-8", "replace")
        if isinstance(token, bytes):
            token = token.decode("utf-8", "replace")
        if isinstance(token, str) and token.startswith(f"{self.worker}#"):
            return  # this worker's own give-back: its release() woke one of its requests already
        if isinstance(channel, str):
            reactor.callFromThread(self.freed, channel[len(self.job.keys.busy("")):])

    def _notes_failed(self, exc: BaseException, pubsub: Any, thread: Any) -> None:  # the subscription's thread
        thread.stop()
        reactor.callFromThread(self._notes_gone, exc)

    def _notes_gone(self, exc: BaseException) -> None:
        logger.debug("idcrawl: notifications of freed places lost (%s): asking again until resubscribed", exc)
        self._notes_thread = self._notes = None
        self._notes_lost_at = time.monotonic()
        for slot, sleepers in list(self._sleepers.items()):  # their wait counted on a notification: ask now
            del self._sleepers[slot]
            for sleeper in sleepers:
                if not sleeper.called:
                    sleeper.callback(None)

    def listening(self) -> bool:
        """Do notifications of freed places come? (Made anew ``RESUBSCRIBE_AFTER`` s after they were lost.)"""
        lost_at = self._notes_lost_at
        if self._notes_thread is None and lost_at is not None and time.monotonic() - lost_at >= RESUBSCRIBE_AFTER:
            self.listen()
        return self._notes_thread is not None

    def freed(self, slot: str) -> None:
        """A place of ``slot`` was given back (a notification): one of its waiting requests asks now."""
        self.notes += 1
        self.runtime.stats.inc_value(f"{PREFIX}/host_freed_notes")
        self.full_until.pop(slot, None)
        self.until.pop(slot, None)
        self._wake_one(slot)
        self.runtime.wake_engine()

    def _wake_one(self, slot: str) -> None:
        """One request waiting for a place of ``slot`` asks now (a place was freed: one, not every waiting
        request, so that a freed place costs a call or two, not one per waiting request)."""
        sleepers = self._sleepers.get(slot)
        while sleepers:
            sleeper = sleepers.pop(0)
            if not sleeper.called:
                sleeper.callback(None)
                break
        if not sleepers:
            self._sleepers.pop(slot, None)

    def sleep(self, slot: str, wait: float) -> Deferred[None]:
        """Fires after ``wait`` s, or sooner when a place of ``slot`` is given back (a notification)."""
        sleeper: Deferred[None] = Deferred()

        def fire() -> None:
            if not sleeper.called:
                sleeper.callback(None)

        timer = call_later(wait, fire)

        def woken(result: None) -> None:
            timer.cancel()  # nothing if it fired
            return result

        sleeper.addCallback(woken)
        self._sleepers.setdefault(slot, []).append(sleeper)
        return sleeper

    def close(self) -> None:
        """Stop the subscription's thread."""
        thread, self._notes_thread = self._notes_thread, None
        if thread is not None:
            thread.stop()

    def fleet_gate(self, slot: str) -> bool:
        """Whether the slot may take a request as far as this worker knows (no round trip):
        False while another worker holds the slot's next start or all its places (a wake-up is armed)."""
        until = self.until.get(slot)
        if until is None:
            return True
        wait = until - time.monotonic()
        if wait <= 0:
            del self.until[slot]
            return True
        self.runtime.wake_in(wait)
        return False

    def reserve(self, slot: str, token: str, *, gap: float, cap: int, life: float = 0.0) -> float:
        """Reserve the slot's next start for request ``token`` (``life`` 0), or, as it leaves (``life``:
        the longest it may be in flight), move the next start to a gap after now and take one of the
        slot's ``cap`` places in flight fleet-wide (0: no cap). 0 = go now, else seconds to wait.
        While the slot's places were all taken a moment ago, wait for that without a round trip."""
        now = time.monotonic()
        full = self.full_until.get(slot, 0.0) - now
        if full > 0:
            return full
        gap_ms = max(1, int(gap * 1000)) if gap > 0 else 0
        releases, self.releases = self.releases, []
        try:
            reply = self.job.polite("go" if life > 0 else "reserve", slot, token, gap_ms=gap_ms, cap=cap,
                                    life_ms=max(1, int(life * 1000)), lease_ms=self.lease_ms, releases=releases)
        except RedisError as exc:
            self.releases = releases + self.releases  # given back with a later call
            self.outage(exc)
            return gap  # no reservation possible: wait a whole gap (none: this worker's own limits)
        stats = self.runtime.stats
        stats.max_value(f"{PREFIX}/host_max_in_flight", reply.flying)
        if reply.wait_ms <= 0:
            if life > 0 and cap > 0:
                self.flying.add(token)
                self.full_streak.pop(slot, None)
            return 0.0
        wait = reply.wait_ms / 1000
        if reply.why == PoliteReply.FULL:
            stats.inc_value(f"{PREFIX}/host_full_waits")
            if not self.listening():
                # no notifications: found full again and again (another worker keeps the places busy), ask
                # less often, from when the oldest request should be done
                estimate = reply.estimate_ms / 1000
                self.full_streak[slot] = streak = self.full_streak.get(slot, 0) + 1
                wait = max(estimate, min(FULL_BACKOFF_MAX, estimate * 2 ** min(streak - 1, 8)))
            # else until a place is given back (the notification), or frees itself (the reply's wait)
            self.full_until[slot] = now + wait
        self.until[slot] = now + wait
        return wait

    def release(self, slot: str, token: str) -> None:
        """Give back the place in flight request ``token`` took (its download ended): with this worker's
        next call to ``POLITE``, at most ``RELEASE_WITHIN`` s later. Redis not answering: the place is
        free once its life ends, or this worker's lease."""
        if token not in self.flying:
            return
        self.flying.discard(token)
        if self.full_until.pop(slot, None) is not None:  # a place is free: this worker's requests may ask
            self.until.pop(slot, None)
        self.releases.append((slot, token))
        self._wake_one(slot)  # it asks now, giving the place back first (releases)
        if not self._flush_armed:
            self._flush_armed = True
            call_later(RELEASE_WITHIN, self.flush)

    def flush(self) -> None:
        """Give back the places of downloads that ended, unless a call since took them along."""
        self._flush_armed = False
        if not self.releases:
            return
        (slot, token), *rest = releases = self.releases
        self.releases = []
        try:
            self.job.polite("done", slot, token, gap_ms=0, cap=0, life_ms=1, lease_ms=self.lease_ms, releases=rest)
        except RedisError as exc:
            self.releases = releases + self.releases
            self.outage(exc)  # kept for the next call


if TYPE_CHECKING:  # mypy checks that the parts are the scheduler's

    from idcrawl.scheduler import PolitenessGate, SharedRetries

    def _are_parts(retries: FleetRetries, gate: FleetGate) -> tuple[SharedRetries, PolitenessGate]:
        return retries, gate
