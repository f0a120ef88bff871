"""Job limits shared by the workers of a distributed job.

:class:`idcrawl.extensions.limits.IdLimits` keeps one tracker per domain (download
slot) and one for the job. In a distributed job those trackers are
:class:`SharedDomainLimits` / :class:`SharedJobLimits`: their counters
(iterations, page loads, targets, found) are the *fleet's* totals, kept in the
hash ``P limits:<level>:<key>``, and a rule that fires in one worker stops that
domain (or the job) in every worker.

To keep Redis off the path of every request, a tracker counts locally and
syncs every time the extension checks its rules (``CHECK_INTERVAL``, 0.25 s):
one script (``LIMITS``, one round trip) adds its unsynced counts and reads the
totals back. Between syncs a tracker sees the fleet's totals as of the last
sync plus its own new counts, so a count rule (PLmax, TTmax, Imax) may fire up
to one check interval of the *other* workers' traffic late; the first worker
whose estimate reaches the limit fires it and writes the one incident, the
others stop the domain when their next sync sees it (their stop writes no
incident).

The time rules and TST count for the fleet too. Each sync sends how long ago
the worker's first and last iterations started; the script places them on
Redis's clock and keeps the fleet's earliest first and latest last start, and
the reply says how long ago those were, which the worker turns back into its
own clock (off by at most the round trip). So TDL runs from the fleet's first
request and TAC from the last iteration any worker started. For TST the
script records the fleet's iteration count whenever the fleet's found count
grows; the fleet's stable run is the iterations since (a worker's own
iterations add to it between syncs), so TST fires once the fleet as a whole
went that many iterations without a new found target.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from idcrawl.core.limits import DomainLimits, JobLimits, Limits, LimitTracker, Trigger
from idcrawl.distributed import scripts
from idcrawl.distributed.connection import RedisUnavailable
from idcrawl.errors import BadInputError
from idcrawl.extensions.incidents import IncidentLog
from idcrawl.extensions.limits import IdLimits, incident_log_path

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["FleetLimits", "SharedDomainLimits", "SharedJobLimits", "shared_trackers"]

_COUNTERS = ("iterations", "page_loads", "targets", "found_count")


class _Shared(LimitTracker):
    """Counters, times and stops synced with the fleet's (see the module docstring)."""

    client: Any = None
    script: Any = None
    #: None: Redis's clock places the times (a crawl); else the fleet's time in ms for a ``now`` (tests)
    fleet_clock: Callable[[float], int] | None = None
    redis_key = ""
    #: the stop came from another worker: act on it, write no incident
    adopted = False
    #: a rule this worker fired that Redis has not heard of yet (an outage)
    _unshared_stop = ""
    #: the fleet's iteration count when its found count last grew, as far as this worker knows (TST)
    _changed_at = 0

    def _bind(self, client: Any, script: Any, redis_key: str, fleet_clock: Callable[[float], int] | None) -> None:
        self.client, self.script, self.redis_key, self.fleet_clock = client, script, redis_key, fleet_clock
        self._synced = dict.fromkeys(_COUNTERS, 0)  # this tracker's counts already added to the fleet's
        # a domain the fleet stopped before this worker came takes nothing: the trigger is handed
        # out by the extension's next take() (new_trigger), not lost here
        if self.sync(time.monotonic()) is not None:
            self._unreported = True

    def sync(self, now: float) -> Trigger | None:
        """Add this worker's new counts and times, read the fleet's (``LIMITS``); fire what they reach."""
        if self.client is None or self.finished:
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
            return self._event("PLmax", limits.plmax, self.page_loads, now)
        if limits.ttmax and self.targets >= limits.ttmax:
            return self._event("TTmax", limits.ttmax, self.targets, now)
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
        if self.client is not None and not self.adopted:
            # the fleet stops too (HSETNX: the first worker's rule stays the domain's rule); during an
            # outage the stop goes with the next sync
            try:
                self.client.hsetnx(self.redis_key, "stopped", name)
            except RedisError:
                self._unshared_stop = name

    def check(self, now: float) -> Trigger | None:
        trigger = self.sync(now) if self.client is not None else None
        return trigger or super().check(now)


class SharedDomainLimits(_Shared, DomainLimits):
    """A domain's tracker with the fleet's counters."""


class SharedJobLimits(_Shared, JobLimits):
    """The job's tracker with the fleet's counters."""


def shared_trackers(
    settings: Any, spider_name: str, stats: Any = None, fleet_clock: Callable[[float], int] | None = None
) -> tuple[Any, Any]:
    """The two factories IdLimits uses in a distributed job: (domain tracker, job tracker).

    ``stats`` counts their calls to Redis; ``fleet_clock`` (tests): the fleet's time in ms for a
    tracker's ``now``, instead of Redis's clock.
    """
    from idcrawl.distributed.connection import connect, job_prefix
    from idcrawl.state.keys import JobKeys

    client = connect(settings, stats=stats)
    script = client.register_script(scripts.LIMITS)
    keys = JobKeys(job_prefix(settings, spider_name))

    def domain(limits: Limits, key: str) -> SharedDomainLimits:
        tracker = SharedDomainLimits(limits, key)
        tracker._bind(client, script, keys.domain_limits(key), fleet_clock)
        return tracker

    def job(limits: Limits) -> SharedJobLimits:
        tracker = SharedJobLimits(limits)
        tracker._bind(client, script, keys.job_limits, fleet_clock)
        return tracker

    return domain, job


class FleetLimits(IdLimits):
    """``IdLimits`` of a distributed worker (the distributed add-on swaps it in): the fleet's
    counters and stops (:func:`shared_trackers`), every worker's incidents in one Redis list."""

    @classmethod
    def _incident_log(cls, crawler: Crawler) -> IncidentLog:
        from idcrawl.distributed.incidents import incident_log

        name = crawler.spidercls.name
        try:
            return incident_log(crawler.settings, name, incident_log_path(crawler.settings, name),
                                stats=crawler.stats)
        except RedisUnavailable as exc:
            raise BadInputError(f"{name}: {exc}") from None

    def _share(self, job: Limits) -> None:
        try:
            self._new_domain, new_job = shared_trackers(self.crawler.settings, self.crawler.spidercls.name,
                                                        self.crawler.stats)
        except RedisUnavailable as exc:
            raise BadInputError(f"{self.crawler.spidercls.name}: {exc}") from None
        self.job = new_job(job)
