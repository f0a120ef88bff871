"""Job limits shared by the workers of a distributed job.

:class:`idcrawl.extensions.limits.IdLimits` keeps one tracker per domain (download
slot) and one for the job. In a distributed job those trackers are
:class:`SharedDomainLimits` / :class:`SharedJobLimits`: their counters
(iterations, page loads, targets, found) are the *fleet's* totals, kept in the
hash ``P limits:<level>:<key>``, and a rule that fires in one worker stops that
domain (or the job) in every worker.

To keep Redis off the path of every request, a tracker counts locally and
syncs every time the extension checks its rules (``CHECK_INTERVAL``, 0.25 s):
one pipelined round trip adds its unsynced counts and reads the totals back.
Between syncs a tracker sees the fleet's totals as of the last sync plus its
own new counts, so a count rule (PLmax, TTmax, Imax) may fire up to one check
interval of the *other* workers' traffic late; the first worker whose
estimate reaches the limit fires it and writes the one incident, the others
stop the domain when their next sync sees it (their stop writes no incident).
The time rules (TDL, TAC) and TST stay per worker: they measure a worker's
own iterations on its own clock.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from idcrawl.core.limits import DomainLimits, JobLimits, Limits, LimitTracker, Trigger
from idcrawl.distributed.connection import RedisUnavailable
from idcrawl.errors import BadInputError
from idcrawl.extensions.incidents import IncidentLog
from idcrawl.extensions.limits import IdLimits, incident_log_path

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["FleetLimits", "SharedDomainLimits", "SharedJobLimits", "shared_trackers"]

_COUNTERS = ("iterations", "page_loads", "targets", "found_count")


class _Shared(LimitTracker):
    """Counters synced with the fleet's (see the module docstring)."""

    client: Any = None
    redis_key = ""
    #: the stop came from another worker: act on it, write no incident
    adopted = False
    #: a rule this worker fired that Redis has not heard of yet (an outage)
    _unshared_stop = ""

    def _bind(self, client: Any, redis_key: str) -> None:
        self.client, self.redis_key = client, redis_key
        self._synced = dict.fromkeys(_COUNTERS, 0)  # this tracker's counts already added to the fleet's
        # a domain the fleet stopped before this worker came takes nothing: the trigger is handed
        # out by the extension's next take() (new_trigger), not lost here
        if self.sync(time.monotonic()) is not None:
            self._unreported = True

    def sync(self, now: float) -> Trigger | None:
        """Add this worker's new counts, read the fleet's totals; fire what they reach."""
        if self.client is None or self.finished:
            return None
        deltas = {name: getattr(self, name) - self._synced[name] for name in _COUNTERS}
        # the local counters hold "fleet total at the last sync + own counts since": the own part
        # goes to Redis, and the totals come back
        pipe = self.client.pipeline(transaction=False)
        if self._unshared_stop:
            pipe.hsetnx(self.redis_key, "stopped", self._unshared_stop)
        for name in _COUNTERS:
            pipe.hincrby(self.redis_key, name, deltas[name])
        pipe.hget(self.redis_key, "stopped")
        try:
            *totals, stopped = pipe.execute()
        except RedisError:
            # an outage (the worker's poll reports it): the counts stay unsynced and go with the next
            # sync; a pipeline cut midway may have added some of them, so the fleet may count a few
            # twice: a limit then fires a little early, never late
            return None
        if self._unshared_stop:
            self._unshared_stop = ""
            totals = totals[1:]
        for name, total in zip(_COUNTERS, totals, strict=True):
            setattr(self, name, int(total))
            self._synced[name] = int(total)
        if self.stopped:
            return None
        if stopped is not None:
            rule = stopped.decode() if isinstance(stopped, bytes) else str(stopped)
            self.adopted = True
            self._fire(rule, self.limits.value(rule), self._observed(rule), now)
            return self.new_trigger()
        limits = self.limits
        if limits.plmax and self.page_loads >= limits.plmax:
            return self._event("PLmax", limits.plmax, self.page_loads, now)
        if limits.ttmax and self.targets >= limits.ttmax:
            return self._event("TTmax", limits.ttmax, self.targets, now)
        return None

    def _observed(self, rule: str) -> int | float:
        return {"PLmax": self.page_loads, "TTmax": self.targets, "Imax": self.iterations}.get(rule, 0)

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


def shared_trackers(settings: Any, spider_name: str, stats: Any = None) -> tuple[Any, Any]:
    """The two factories IdLimits uses in a distributed job: (domain tracker, job tracker); ``stats``
    counts their calls to Redis."""
    from idcrawl.distributed.connection import connect, job_prefix

    client = connect(settings, stats=stats)
    prefix = job_prefix(settings, spider_name)

    def domain(limits: Limits, key: str) -> SharedDomainLimits:
        tracker = SharedDomainLimits(limits, key)
        tracker._bind(client, f"{prefix}limits:domain:{key}")
        return tracker

    def job(limits: Limits) -> SharedJobLimits:
        tracker = SharedJobLimits(limits)
        tracker._bind(client, f"{prefix}limits:job")
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
