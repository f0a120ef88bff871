"""The job limits' parts in a fleet: counters, times and stops shared through Redis, incidents in one list.

A tracker counts locally and syncs with the fleet's totals (``P limits:<level>:<key>``,
the ``LIMITS`` script) each time the extension checks its rules, so a count rule may
fire up to one check interval of the other workers' traffic late; the first worker
to reach a limit writes the incident. See docs/limits.md and docs/distributed.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from idcrawl.core.limits import DomainLimits, JobLimits, Limits, LimitTracker, Trigger
from idcrawl.distributed import scripts
from idcrawl.distributed.connection import RedisUnavailable, connect, job_prefix
from idcrawl.distributed.incidents import RedisIncidentLog, incident_log
from idcrawl.errors import BadInputError
from idcrawl.local.limits import incident_log_path
from idcrawl.state.keys import JobKeys

if TYPE_CHECKING:
    from idcrawl.extensions.limits import LimitParts

__all__ = ["FleetLimitParts", "SharedDomainLimits", "SharedJobLimits", "shared_trackers"]

_COUNTERS = ("iterations", "page_loads", "targets", "found_count")


class _Shared(LimitTracker):
    """Counters, times and stops synced with the fleet's (see the module docstring)."""

    #: the stop came from another worker: act on it, write no incident
    adopted = False
    #: a rule this worker fired that Redis has not heard of yet (an outage)
    _unshared_stop = ""
    #: the fleet's iteration count when its found count last grew, as far as this worker knows (TST)
    _changed_at = 0

    def __init__(self, limits: Limits, key: str = "", *, fleet: FleetLimitParts, redis_key: str) -> None:
        super().__init__(limits, key)
        self.client, self.script, self.fleet_clock = fleet.client, fleet.script, fleet.fleet_clock
        self.redis_key = redis_key
        self._synced = dict.fromkeys(_COUNTERS, 0)  # this tracker's counts already added to the fleet's
        # a domain the fleet stopped before this worker came takes nothing: the trigger is handed
        # out by the extension's next take() (new_trigger), not lost here
        if self.sync(time.monotonic()) is not None:
            self._unreported = True

    def sync(self, now: float) -> Trigger | None:
        """Add this worker's new counts and times, read the fleet's (``LIMITS``); fire what they reach."""
        if self.finished:
            return None
        deltas = [getattr(self, name) - self._synced[name] for name in _COUNTERS]
        # the local counters hold "fleet total at the last sync + own counts since": the own part
        # goes to Redis, and the totals come back; the times go as ages, so Redis's clock places them
        first_age = -1 if self.first_request_at is None else max(0, int((now - self.first_request_at) * 1000))
        last_age = -1 if self.last_iteration_at is None else max(0, int((now - self.last_iteration_at) * 1000))
        try:
            reply = self.script(keys=[self.redis_key],
                                args=[*deltas, first_age, last_age, self._unshared_stop, self._changed_at,
                                      "" if self.fleet_clock is None else self.fleet_clock(now)])
        except RedisError:
            # an outage (the worker's poll reports it): the counts stay unsynced and go with the next
            # sync; a reply lost after Redis applied the script counts them twice: a limit then
            # fires a little early, never late
            return None
        self._unshared_stop = ""
        *totals, stopped, changed, since_first, since_last = reply
        for name, total in zip(_COUNTERS, totals, strict=True):
            setattr(self, name, int(total))
            self._synced[name] = int(total)
        # the fleet's times on this worker's clock (the reply's round trip is their error)
        if int(since_first) >= 0:
            fleet_first = now - int(since_first) / 1000
            mine = self.first_request_at
            self.first_request_at = fleet_first if mine is None else min(mine, fleet_first)
        if int(since_last) >= 0:
            fleet_last = now - int(since_last) / 1000
            mine = self.last_iteration_at
            self.last_iteration_at = fleet_last if mine is None else max(mine, fleet_last)
        self._changed_at = max(self._changed_at, int(changed))
        if self.stopped:
            return None
        stopped = stopped.decode() if isinstance(stopped, bytes) else str(stopped)
        if stopped:
            self.adopted = True
            self._fire(stopped, self.limits.value(stopped), self._observed(stopped, now), now)
            return self.new_trigger()
        limits = self.limits
        if limits.plmax and self.page_loads >= limits.plmax:
            return self.event("PLmax", limits.plmax, self.page_loads, now)
        if limits.ttmax and self.targets >= limits.ttmax:
            return self.event("TTmax", limits.ttmax, self.targets, now)
        return None

    def found(self, count: int = 1) -> None:
        super().found(count)
        if count:
            self._changed_at = max(self._changed_at, self.iterations)

    def take(self, now: float) -> int:
        if self.iterations and not (self.stopped or self.finished):
            # TST on the fleet's count: the iterations since its found count last grew (the one
            # ending now included: LimitTracker.take adds it, the found count being unchanged)
            self.stable = self.iterations - self._changed_at - 1
            self._found_at_start = self.found_count
        return super().take(now)

    def _observed(self, rule: str, now: float) -> int | float:
        """What a rule another worker fired measures, as this worker sees it."""
        return {
            "PLmax": self.page_loads, "TTmax": self.targets, "Imax": self.iterations, "TST": self.stable,
            "TDL": now - self.first_request_at if self.first_request_at is not None else 0,
            "TAC": now - self.last_iteration_at if self.last_iteration_at is not None else 0,
        }.get(rule, 0)

    def _fire(self, name: str, limit: int | float, observed: int | float, now: float) -> None:
        super()._fire(name, limit, observed, now)
        if not self.adopted:
            # the fleet stops too (HSETNX: the first worker's rule stays the domain's rule); during an
            # outage the stop goes with the next sync
            try:
                self.client.hsetnx(self.redis_key, "stopped", name)
            except RedisError:
                self._unshared_stop = name

    def check(self, now: float) -> Trigger | None:
        return self.sync(now) or super().check(now)


class SharedDomainLimits(_Shared, DomainLimits):
    """A domain's tracker with the fleet's counters."""


class SharedJobLimits(_Shared, JobLimits):
    """The job's tracker with the fleet's counters."""


class FleetLimitParts:
    """The fleet's trackers (counters in Redis) and its incident list; RedisUnavailable if Redis cannot
    be reached. ``stats`` counts the calls to Redis; ``fleet_clock`` (tests): the fleet's time in ms
    for a tracker's ``now``, instead of Redis's clock."""

    def __init__(self, settings: Any, spider_name: str, stats: Any = None,
                 fleet_clock: Callable[[float], int] | None = None) -> None:
        self.settings, self.spider_name, self.stats = settings, spider_name, stats
        self.client = connect(settings, stats=stats)
        self.script = self.client.register_script(scripts.LIMITS)
        self.keys = JobKeys(job_prefix(settings, spider_name))
        self.fleet_clock = fleet_clock

    def domain_tracker(self, limits: Limits, key: str) -> SharedDomainLimits:
        return SharedDomainLimits(limits, key, fleet=self, redis_key=self.keys.domain_limits(key))

    def job_tracker(self, limits: Limits) -> SharedJobLimits:
        return SharedJobLimits(limits, fleet=self, redis_key=self.keys.job_limits)

    def incident_log(self) -> RedisIncidentLog:
        """Every worker's incidents in one Redis list (the local XML log is the fallback at close)."""
        name = self.spider_name
        try:
            return incident_log(self.settings, name, incident_log_path(self.settings, name), stats=self.stats)
        except RedisUnavailable as exc:
            raise BadInputError(f"{name}: {exc}") from None


def shared_trackers(
    settings: Any, spider_name: str, stats: Any = None, fleet_clock: Callable[[float], int] | None = None
) -> tuple[Callable[[Limits, str], SharedDomainLimits], Callable[[Limits], SharedJobLimits]]:
    """The two tracker factories of a fleet's limits (:class:`FleetLimitParts`): (domain, job)."""
    parts = FleetLimitParts(settings, spider_name, stats, fleet_clock)
    return parts.domain_tracker, parts.job_tracker


if TYPE_CHECKING:  # mypy checks that the fleet's parts are LimitParts

    def _are_limit_parts(parts: FleetLimitParts) -> LimitParts:
        return parts
