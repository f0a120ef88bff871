"""``IdLimits``: the job limits of seed 002 (Table 3) per domain crawl and per job.

The rules live in :mod:`idcrawl.core.limits`; this extension feeds them Scrapy's
events, admits lane requests for the scheduler and stops a domain (or the job)
when a rule fires. Where the counters live and where incidents go is the worker's
part (:class:`LimitParts`: in-process, or the fleet's). See docs/limits.md.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import call_later, create_looping_call

from idcrawl._scrapy import close_spider, slot_key
from idcrawl.config import config_of
from idcrawl.core.limits import RULES, DomainLimits, JobLimits, LimitError, Limits, Trigger
from idcrawl.errors import BadInputError
from idcrawl.extensions.incidents import Incident, IncidentLog, IncidentLogError
from idcrawl.local.limits import LocalLimitParts
from idcrawl.runtime import META_KEY, STATS_PREFIX, IdRuntime, is_id_crawl, runtime_of
from idcrawl.slots import host_slots
from idcrawl.storage import report_storage_error, storage_problem

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = ["CHECK_INTERVAL", "DOMAIN_SETTINGS", "JOB_SETTINGS", "IdLimits", "LimitParts"]

logger = logging.getLogger(__name__)

PREFIX = f"{STATS_PREFIX}/limits"
#: The name in ``IDCRAWL_INCIDENT_RULES`` that also logs unhandled spider errors as incidents.
ERRORS = "errors"
#: Seconds between two checks of the time rules (TDL, TAC).
CHECK_INTERVAL = 0.25

#: The domain-level settings, one per rule (a contract scripts rely on).
DOMAIN_SETTINGS = (
    "IDCRAWL_LIMIT_LT",
    "IDCRAWL_LIMIT_IMAX",
    "IDCRAWL_LIMIT_PLMAX",
    "IDCRAWL_LIMIT_TTMAX",
    "IDCRAWL_LIMIT_TDL",
    "IDCRAWL_LIMIT_TAC",
    "IDCRAWL_LIMIT_TST",
)
#: The job-level settings: only rules with a job meaning (``JOB_RULES``).
JOB_SETTINGS = (
    "IDCRAWL_JOB_LIMIT_IMAX",
    "IDCRAWL_JOB_LIMIT_PLMAX",
    "IDCRAWL_JOB_LIMIT_TTMAX",
    "IDCRAWL_JOB_LIMIT_TDL",
    "IDCRAWL_JOB_LIMIT_TAC",
)
_DOMAIN_PREFIX = DOMAIN_SETTINGS[0].removesuffix("LT")
_JOB_PREFIX = JOB_SETTINGS[0].removesuffix("IMAX")


class LimitParts(Protocol):
    """What the job limits ask the worker for (``limit_parts()``): the trackers, whose counters are
    this process's or the fleet's, and where incidents go."""

    def domain_tracker(self, limits: Limits, key: str) -> DomainLimits:
        """A new tracker of the domain (download slot) ``key``."""

    def job_tracker(self, limits: Limits) -> JobLimits:
        """The job's tracker."""

    def incident_log(self) -> IncidentLog:
        """Where incidents go; :class:`IncidentLogError` if that cannot be used."""


@dataclass(slots=True, eq=False)
class _Domain:
    tracker: DomainLimits
    left: int = 0  # requests left in the current iteration
    closed: bool = False  # a rule fired: take nothing more, drop queued requests


class _LaneLook(NamedTuple):
    """What the limits read of a lane (:meth:`IdLimits._lanes_by_slot`), read once."""

    stopped: bool
    first_undecided: int


class IdLimits:
    def __init__(
        self, crawler: Crawler, domain: Limits, job: Limits, incident_rules: frozenset[str]
    ) -> None:
        self.crawler = crawler
        self.limits = domain
        self._job_limits = job
        self.incident_rules = incident_rules
        self.runtime: IdRuntime | None = None
        #: the worker's parts, once opened (:meth:`open`)
        self.parts: LimitParts | None = None
        self.log: IncidentLog
        self.job: JobLimits
        self._domains: dict[str, _Domain] = {}
        self._slots = host_slots(crawler)
        self._job_closing = False
        self._task: Any = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdLimits:
        settings = crawler.settings
        try:
            domain = Limits.from_settings(settings.get, _DOMAIN_PREFIX)
            job = Limits.from_settings(settings.get, _JOB_PREFIX, level="job")
        except LimitError as exc:
            raise BadInputError(f"bad setting: {exc}") from None
        names = {r.name.lower(): r.name for r in RULES if r.name != "LT"}
        names[ERRORS] = ERRORS
        rules: set[str] = set()
        for raw in config_of(crawler).incident_rules:
            name = names.get(str(raw).strip().lower())
            if name is None:
                raise BadInputError(
                    f"bad setting: IDCRAWL_INCIDENT_RULES: unknown rule {raw!r} (known: {', '.join(names.values())})"
                )
            rules.add(name)
        if not any(domain.enabled()) and not any(job.enabled()):
            raise NotConfigured  # every rule off (the default): the crawl is exactly as without limits
        ext = cls(crawler, domain, job, frozenset(rules))
        if not is_id_crawl(crawler):  # no worker to ask: the in-process parts, now
            ext.open(LocalLimitParts(settings, crawler.spidercls.name))
        crawler.signals.connect(ext._spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext._spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(ext._response_received, signal=signals.response_received)
        crawler.signals.connect(ext._request_scheduled, signal=signals.request_scheduled)
        if ERRORS in rules:
            crawler.signals.connect(ext._spider_error, signal=signals.spider_error)
        return ext

    def open(self, parts: LimitParts) -> None:
        """Take the worker's parts (the scheduler's open, once the worker is built: a bad incident log
        stops the crawl there, before any request); BadInputError if the incident log cannot be used."""
        try:
            self.log = parts.incident_log()
        except IncidentLogError as exc:
            raise BadInputError(f"bad setting: IDCRAWL_INCIDENT_LOG: {exc}") from None
        self.job = parts.job_tracker(self._job_limits)
        self.parts = parts

    # -- lifecycle ------------------------------------------------------------------

    def _spider_opened(self, spider: Spider) -> None:
        runtime = runtime_of(self.crawler)
        if runtime is None:
            return
        if self.parts is None:  # a scheduler other than IdScheduler did not open them
            self.open(runtime.worker.limit_parts())
        self.runtime = runtime
        runtime.limiter = self
        enabled = [f"{r.name}={self.limits.value(r.name):g}" for r in self.limits.enabled()]
        job = [f"{r.name}={self.job.limits.value(r.name):g}" for r in self.job.limits.enabled()]
        logger.info(
            "idcrawl limits: per domain LT=%s %s; per job %s; incident log %s",
            self.limits.lt or "off", " ".join(enabled) or "-", " ".join(job) or "-", self.log.path,
        )
        self._task = create_looping_call(self.check)
        self._task.start(CHECK_INTERVAL, now=False)

    def _spider_closed(self, spider: Spider, reason: str) -> None:
        if self._task is not None and self._task.running:
            self._task.stop()
        self._figures()
        if self.parts is not None:
            self.log.close()

    def _figures(self, only: str | None = None) -> None:
        """Per-domain counters into stats (kept current: other spider_closed listeners may run first)."""
        stats = self.crawler.stats
        if stats is None:
            return
        for key, domain in self._domains.items():
            if only is not None and key != only:
                continue
            for name, value in domain.tracker.counters().items():
                if name in ("iterations", "page_loads", "targets", "found"):
                    stats.set_value(f"{PREFIX}/domains/{key}/{name}", value)

    # -- the scheduler's hook -------------------------------------------------------------

    def admit(self, slot: str) -> bool:
        """May ``slot`` take a lane request now? Starts an iteration when the last one is used up."""
        domain = self._domain(slot)
        if domain.closed or self._job_closing:
            return False
        if domain.left > 0:
            return True
        now = time.monotonic()
        granted = domain.tracker.take(now)
        if not granted:
            trigger = domain.tracker.new_trigger()
            if trigger is not None:
                self._domain_trigger(domain, trigger)
            return False
        if not self.job.take(now):
            self._job_event(self.job.new_trigger())
            return False
        domain.left = granted
        return True

    def taken(self, slot: str) -> None:
        """``slot`` took a lane request: one of its iteration's LT, and a new target."""
        domain = self._domain(slot)
        domain.left = max(0, domain.left - 1)
        self._new_target(domain)

    def closed(self, slot: str) -> bool:
        """A rule stopped ``slot``: its queued requests are dropped."""
        domain = self._domains.get(slot)
        return domain is not None and domain.closed

    def found(self, host: str) -> None:
        """A lane id of a target on ``host`` was found."""
        self._domain(self._slots.of(host)).tracker.found()
        self.job.found()

    # -- signals ----------------------------------------------------------------------

    def _request_scheduled(self, request: Request, spider: Any = None) -> None:
        if META_KEY in request.meta or request.url.startswith("data:"):
            return  # a retry of a lane id (counted when dispensed), or the spider's internal emitter
        self._new_target(self._domain(self._request_slot(request)))

    def _response_received(self, response: Response, request: Request, spider: Any = None) -> None:
        if request.url.startswith("data:") or (
            request.meta.get("dont_obey_robotstxt") and request.url.endswith("/robots.txt")
        ):
            return  # the spider's internal emitter; robots.txt is no target
        now = time.monotonic()
        domain = self._domain(self._request_slot(request))
        trigger = domain.tracker.response(now, response.url)
        if trigger is not None:
            self._domain_trigger(domain, trigger)
        self._job_event(self.job.response(now, response.url))

    def check(self) -> None:
        """The time rules, and domains that ended on their own."""
        now = time.monotonic()
        lanes = self._lanes_by_slot()
        for key, domain in self._domains.items():
            tracker = domain.tracker
            if domain.closed or tracker.finished:
                continue
            own = lanes.get(key)
            if own and all(lane.stopped for lane in own.values()):
                tracker.finish()
                continue
            trigger = tracker.check(now)
            if trigger is not None:
                self._domain_trigger(domain, trigger)
        self._job_event(self.job.check(now))
        self._figures()

    # -- decisions --------------------------------------------------------------------

    def _new_target(self, domain: _Domain) -> None:
        now = time.monotonic()
        trigger = domain.tracker.new_targets(now, 1)
        if trigger is not None:
            self._domain_trigger(domain, trigger)
        self._job_event(self.job.new_targets(now, 1))

    def _domain_trigger(self, domain: _Domain, trigger: Trigger) -> None:
        domain.closed = True
        domain.left = 0
        self._report(trigger, domain.tracker)
        stats = self.crawler.stats
        if stats is not None:
            stats.set_value(f"{PREFIX}/domains/{trigger.key}/rule", trigger.rule)
        self._figures(trigger.key)
        # lanes are closed outside the frontier's pick that may be running now
        call_later(0, self._close_lanes, trigger.key, f"limit:{trigger.rule}")

    def _close_lanes(self, slot: str, reason: str) -> None:
        runtime = self.runtime
        if runtime is None:
            return
        for key, lane in self._lanes_by_slot().get(slot, {}).items():
            if not lane.stopped:
                runtime.close_lane(key, reason)
        runtime.wake_engine()

    def new_wave(self) -> None:
        """Watch mode (``idcrawl.extensions.watch``): limits apply per process, so the lanes a new wave
        planned on a domain that a rule stopped are closed at once, with that rule as their reason; a
        domain that ended on its own has new work (its counts go on)."""
        stats = self.crawler.stats
        for slot, domain in self._domains.items():
            domain.tracker.finished = False
            if domain.closed:
                rule = stats.get_value(f"{PREFIX}/domains/{slot}/rule") if stats is not None else None
                self._close_lanes(slot, f"limit:{rule or 'closed'}")

    def _job_event(self, trigger: Trigger | None) -> None:
        if trigger is None or self._job_closing:
            return
        self._job_closing = True
        self._report(trigger, self.job)
        close_spider(self.crawler, f"idcrawl_limit_{trigger.rule}")

    def _report(self, trigger: Trigger, tracker: DomainLimits | JobLimits) -> None:
        logger.warning("idcrawl limits: %s", trigger.message)
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"{PREFIX}/{trigger.rule}")
        if trigger.rule not in self.incident_rules or getattr(tracker, "adopted", False):
            return  # (adopted: another worker of a distributed job fired it and wrote the incident)
        cursors: dict[str, object] = {}
        if self.runtime is not None:
            lanes = self._lanes_by_slot()
            chosen = lanes.get(trigger.key, {}) if trigger.level == "domain" else {
                k: v for own in lanes.values() for k, v in own.items()
            }
            cursors = {key: lane.first_undecided for key, lane in chosen.items()}
        incident = Incident.from_trigger(
            trigger,
            domain=trigger.key or "*",
            counters=tracker.counters(),
            cursors=cursors,
            urls=list(tracker.recent_urls),
        )
        self._append(incident)

    def _spider_error(self, failure: Any, response: Any = None, spider: Any = None) -> None:
        """An unhandled exception in a spider callback, logged as an ``error`` incident."""
        url = getattr(response, "url", "") or ""
        slot = self._slot_of_url(url) if url else "*"
        message = f"{type(failure.value).__name__}: {failure.value}"
        tracker = self._domains[slot].tracker if slot in self._domains else None
        incident = Incident.error(
            slot, message, counters=tracker.counters() if tracker else {}, urls=[url] if url else [],
        )
        self._append(incident)

    def _append(self, incident: Incident) -> None:
        """Write an incident; ``idcrawl/incidents`` counts those written (the Spidermon suite checks it)."""
        try:
            self.log.append(incident)
        except IncidentLogError as exc:
            problem = storage_problem(exc.os_error) if exc.os_error is not None else None
            if problem is not None:  # a full disk: the crawl closes (idcrawl_storage_error)
                report_storage_error(self.crawler, self.log.path, problem)
            else:
                logger.error("idcrawl limits: incident not written: %s", exc)
            return
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"{STATS_PREFIX}/incidents")

    def _slot_of_url(self, url: str) -> str:
        host = urlsplit(url).hostname or ""
        return self._slots.known(host) or host

    # -- slots ------------------------------------------------------------------------

    def _domain(self, slot: str) -> _Domain:
        domain = self._domains.get(slot)
        if domain is None:
            assert self.parts is not None
            domain = self._domains[slot] = _Domain(self.parts.domain_tracker(self.limits, slot))
        return domain

    def _request_slot(self, request: Request) -> str:
        assert self.crawler.engine is not None
        return str(slot_key(self.crawler, request))

    def _lanes_by_slot(self) -> dict[str, dict[str, _LaneLook]]:
        runtime = self.runtime
        if runtime is None:
            return {}
        frontier = runtime.frontier
        by_slot: dict[str, dict[str, Any]] = {}
        lane_target = frontier.lane_target
        for key, lane in frontier.read_lanes():  # what is read of each lane, not the lane (not kept)
            by_slot.setdefault(self._slots.of(lane_target[key].host), {})[key] = _LaneLook(lane.stopped,
                                                                                          lane.first_undecided)
        return by_slot
