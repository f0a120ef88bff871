"""Job limits (seed 002, Table 3): when a domain crawl, or the whole job, must stop.

Plain data with times passed in, so a test drives a domain without a reactor; the Scrapy extension
feeds the events and acts on the decisions. The rules: docs/limits.md; more: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import math
import re
import sys
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, Final, Literal

__all__ = [
    "JOB_RULES",
    "RULES",
    "SURVEY_TABLE_3",
    "UNLIMITED",
    "Category",
    "DomainLimits",
    "JobLimits",
    "LimitError",
    "LimitTracker",
    "Limits",
    "Rule",
    "Trigger",
    "Unit",
    "parse_count",
    "parse_duration",
    "rule",
]

UNLIMITED: Final = sys.maxsize
"""What :meth:`LimitTracker.take` grants when LT is off (0): no cap in this iteration."""

Level = Literal["domain", "job"]


class LimitError(ValueError):
    """A bad limit value: the message names the setting and the value."""

    def __init__(self, setting: str, value: object, reason: str) -> None:
        super().__init__(f"{setting}={value!r}: {reason}")
        self.setting, self.value, self.reason = setting, value, reason


class Category(StrEnum):
    """The seed's roles of a rule."""

    PRIMARY = "primary"
    """Expected to end a significant number of domain crawls in proper operation."""
    SECONDARY = "secondary"
    """Failure handling: ends crawls blocked by a loop, a trap, an exception or a crash-like event."""
    SPECIAL = "special"
    """Limits the crawl size of a particular research run."""
    CONTROL = "control"
    """Not a stop rule: shapes the crawl (LT)."""


class Unit(StrEnum):
    TARGETS = "targets"
    ITERATIONS = "iterations"
    PAGE_LOADS = "page loads"
    SECONDS = "seconds"


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of Table 3, as data."""

    name: str
    """As in the seed: ``TTmax``."""
    field: str
    """The :class:`Limits` field: ``ttmax``."""
    category: Category
    unit: Unit
    description: str

    @property
    def key(self) -> str:
        """The setting suffix: ``TTMAX`` (the setting is a prefix plus this)."""
        return self.name.upper()

    @property
    def is_duration(self) -> bool:
        return self.unit is Unit.SECONDS


RULES: Final[tuple[Rule, ...]] = (
    Rule("LT", "lt", Category.CONTROL, Unit.TARGETS,
         "load take: requests a domain takes from its ranked frontier per iteration"),
    Rule("Imax", "imax", Category.PRIMARY, Unit.ITERATIONS,
         "iteration limit: a domain stops after this many iterations"),
    Rule("PLmax", "plmax", Category.PRIMARY, Unit.PAGE_LOADS,
         "page-load limit: a domain stops after this many responses received"),
    Rule("TST", "tst", Category.PRIMARY, Unit.ITERATIONS,
         "target-count stability: a domain stops after this many consecutive iterations "
         "in which its count of found targets did not change"),
    Rule("TTmax", "ttmax", Category.SECONDARY, Unit.TARGETS,
         "total-targets limit: a domain stops when it knows this many distinct targets "
         "(reaching it suggests the domain does not belong in the job)"),
    Rule("TDL", "tdl", Category.SECONDARY, Unit.SECONDS,
         "domain crawl time limit: a domain stops this many seconds after its first request"),
    Rule("TAC", "tac", Category.SECONDARY, Unit.SECONDS,
         "inactivity limit: a domain stops when the time between the starts of two of its "
         "iterations exceeds this"),
)  # fmt: skip
"""The rules in the order in which they are evaluated (the first to hold wins)."""

_BY_NAME: Final = {rule.name: rule for rule in RULES}

JOB_RULES: Final = frozenset({"Imax", "PLmax", "TTmax", "TDL", "TAC"})
"""Rules with a job-level meaning: totals over all domains, the job's time, its inactivity."""


def rule(name: str) -> Rule:
    """The rule named ``name`` (``TTmax``); KeyError for an unknown name."""
    return _BY_NAME[name]


# -- values -----------------------------------------------------------------------------

_DURATION = re.compile(r"(?P<number>[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>[A-Za-z]*)")
_SECONDS_PER: Final = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(name: str, value: object) -> float:
    """Seconds from ``15m``, ``900s``, ``900``, ``1h``, ``1.5m`` or a number (seconds).

    Units: ``s``/``sec``, ``m``/``min``, ``h``. Raises :class:`LimitError`
    naming ``name`` for a negative, non-finite, non-numeric or unknown-unit value.
    """
    if isinstance(value, bool):
        raise LimitError(name, value, "must be a duration such as 15m, 900s or 900 (seconds)")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if text.startswith("-"):
            raise LimitError(name, value, "must not be negative (0 turns the limit off)")
        match = _DURATION.fullmatch(text)
        if match is None:
            raise LimitError(name, value, "must be a duration such as 15m, 900s or 900 (seconds)")
        unit = match["unit"].lower()
        if unit not in _SECONDS_PER:
            raise LimitError(name, value, f"unknown unit {match['unit']!r} (use s, m or h: 15m, 900s, 900)")
        seconds = float(match["number"]) * _SECONDS_PER[unit]
    else:
        raise LimitError(name, value, "must be a duration such as 15m, 900s or 900 (seconds)")
    if not math.isfinite(seconds):
        raise LimitError(name, value, "must be finite")
    if seconds < 0:
        raise LimitError(name, value, "must not be negative (0 turns the limit off)")
    return seconds


def parse_count(name: str, value: object) -> int:
    """A non-negative integer from an int or a string of digits (``500``)."""
    if isinstance(value, bool):
        raise LimitError(name, value, "must be a whole number >= 0")
    if isinstance(value, int):
        count = value
    elif (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value)
    ):
        count = int(value)
    else:
        raise LimitError(name, value, "must be a whole number >= 0")
    if count < 0:
        raise LimitError(name, value, "must not be negative (0 turns the limit off)")
    return count


@dataclass(frozen=True, slots=True)
class Limits:
    """The values of the seven rules at one level; 0 = off.

    Counts are ints, durations (TDL, TAC) seconds. The defaults turn every
    stop rule off and take one request per iteration.
    """

    lt: int = 1
    imax: int = 0
    plmax: int = 0
    ttmax: int = 0
    tdl: float = 0.0
    tac: float = 0.0
    tst: int = 0

    def __post_init__(self) -> None:
        for r in RULES:
            value = getattr(self, r.field)
            if r.is_duration:
                parse_duration(r.name, value)
            else:
                parse_count(r.name, value)

    @classmethod
    def from_settings(cls, get: Callable[[str], Any], prefix: str, *, level: Level = "domain") -> Limits:
        """Read ``prefix + rule.key`` for each rule (``LT``, ``IMAX``, ..., ``TST``).

        ``get`` is a settings-like lookup (``crawler.settings.get``) returning
        None for an unset name, which keeps the default. At the ``job`` level
        LT defaults to 0 and only :data:`JOB_RULES` may be set: LT or TST set
        there is an error, not silently ignored.
        """
        values: dict[str, int | float] = {}
        for r in RULES:
            setting = prefix + r.key
            raw = get(setting)
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                continue
            value = parse_duration(setting, raw) if r.is_duration else parse_count(setting, raw)
            if level == "job" and r.name not in JOB_RULES and value:
                raise LimitError(setting, raw, f"{r.name} is a domain rule and has no job-level meaning")
            values[r.field] = value
        if level == "job":
            values.setdefault("lt", 0)
        return cls(**values)  # type: ignore[arg-type]

    def value(self, name: str) -> int | float:
        """The value of the rule named ``name`` (``TTmax``)."""
        return getattr(self, rule(name).field)  # type: ignore[no-any-return]

    def enabled(self) -> Iterator[Rule]:
        """The stop rules that are on (LT, a control parameter, is never listed)."""
        return (r for r in RULES if r.category is not Category.CONTROL and getattr(self, r.field))

    def as_settings(self, prefix: str) -> dict[str, int | float]:
        """Settings that reproduce these values (for a settings profile): ``{prefix + key: value}``."""
        by_field = {r.field: r for r in RULES}
        return {prefix + by_field[f.name].key: getattr(self, f.name) for f in fields(self)}


SURVEY_TABLE_3: Final = Limits(lt=1, imax=100, ttmax=10_000, plmax=500, tdl=15 * 60.0, tac=60.0, tst=3)
"""The values of the seed's preliminary survey (Table 3): TDL 15 min, TAC 1 min."""


# -- decisions --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Trigger:
    """Why a domain (or the job) stopped: the rule, its limit and what was observed."""

    rule: str
    limit: int | float
    observed: int | float
    at: float
    """The ``now`` of the call that fired it."""
    level: Level = "domain"
    key: str = ""
    """The domain (download slot) it stopped; empty for the job."""

    @property
    def category(self) -> Category:
        return rule(self.rule).category

    @property
    def unit(self) -> Unit:
        return rule(self.rule).unit

    @property
    def message(self) -> str:
        who = f"domain {self.key}" if self.level == "domain" else "job"
        observed = _number(self.observed)
        limit = _number(self.limit)
        unit = self.unit.value
        match self.rule:
            case "Imax":
                what = f"{observed} iterations done, Imax is {limit}"
            case "PLmax":
                what = f"{observed} responses received, PLmax is {limit}"
            case "TTmax":
                what = f"{observed} distinct targets known, TTmax is {limit}"
            case "TST":
                what = f"found-target count unchanged for {observed} iterations, TST is {limit}"
            case "TDL":
                what = f"{observed} s since the first request, TDL is {limit} s"
            case "TAC":
                what = f"{observed} s since the start of the last iteration, TAC is {limit} s"
            case _:  # pragma: no cover - every stop rule is listed above
                what = f"{observed} {unit}, limit {limit}"
        return f"{who} stopped by {self.rule} ({self.category.value}): {what}"


def _number(value: int | float) -> str:
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


class LimitTracker:
    """The counters of one domain crawl (or of the job) and the rules' decisions.

    Counters:

    - ``iterations``: iterations started (:meth:`take` calls that granted requests);
    - ``page_loads``: responses received (:meth:`response`), also after a stop:
      in-flight requests finish and count;
    - ``targets``: distinct targets known, i.e. ids dispensed plus discovered
      requests (:meth:`new_targets`; the caller counts each target once);
    - ``found``: targets found (:meth:`found`), whose changes TST watches;
    - ``first_request_at``: the start of the first iteration, from which TDL runs;
    - ``last_iteration_at``: the start of the last iteration, from which TAC runs;
    - ``stable``: consecutive finished iterations in which ``found`` did not change.

    Once a rule fires the tracker is stopped for good and :attr:`trigger`
    remembers it. Each trigger is handed out exactly once: as the return value
    of the event call that fired it, or (when :meth:`take` fired it) by
    :meth:`new_trigger`.
    """

    level: Level = "domain"

    def __init__(self, limits: Limits, key: str = "", *, recent: int = 5) -> None:
        self.limits, self.key = limits, key
        self.iterations = self.page_loads = self.targets = self.found_count = 0
        self.stable = 0
        self.first_request_at: float | None = None
        self.last_iteration_at: float | None = None
        self.trigger: Trigger | None = None
        self.finished = False
        self.recent_urls: deque[str] = deque(maxlen=recent)
        self._found_at_start = 0
        self._unreported = False

    # -- state ---------------------------------------------------------------------

    @property
    def stopped(self) -> bool:
        """A rule fired: take nothing more (in-flight requests finish and count)."""
        return self.trigger is not None

    def counters(self) -> dict[str, int | float | None]:
        """The counters as plain data (for stats and incidents)."""
        return {
            "iterations": self.iterations,
            "page_loads": self.page_loads,
            "targets": self.targets,
            "found": self.found_count,
            "stable_iterations": self.stable,
            "first_request_at": self.first_request_at,
            "last_iteration_at": self.last_iteration_at,
        }

    def new_trigger(self) -> Trigger | None:
        """The trigger, the first time it is asked for after it fired and was not yet handed out."""
        if not self._unreported:
            return None
        self._unreported = False
        return self.trigger

    # -- events --------------------------------------------------------------------

    def take(self, now: float) -> int:
        """Start an iteration: how many requests the domain may take from its frontier now.

        0 when stopped: by an earlier trigger, or by this call, when starting
        another iteration would break Imax (``iterations`` already reached it),
        TST (``stable`` already reached it, counting the iteration that ends
        here), TDL or TAC (measured at ``now``). Otherwise the iteration
        starts (``iterations`` + 1, ``last_iteration_at = now``) and LT is
        granted (:data:`UNLIMITED` when LT is 0). Call it only when the domain
        has requests ready: Imax and TST fire when a domain wants more, not
        when it ended on its own.
        """
        if self.stopped or self.finished:
            return 0
        if self.iterations:
            self.stable = self.stable + 1 if self.found_count == self._found_at_start else 0
        limits = self.limits
        if limits.imax and self.iterations >= limits.imax:
            self._fire("Imax", limits.imax, self.iterations, now)
        elif limits.tst and self.stable >= limits.tst:
            self._fire("TST", limits.tst, self.stable, now)
        else:
            self._check_time(now)
        if self.stopped:
            return 0
        self.iterations += 1
        self._found_at_start = self.found_count
        if self.first_request_at is None:
            self.first_request_at = now
        self.last_iteration_at = now
        return self.limits.lt or UNLIMITED

    def response(self, now: float, url: str | None = None) -> Trigger | None:
        """A response arrived (a page load). Fires PLmax when ``page_loads`` reaches it."""
        self.page_loads += 1
        if url is not None:
            self.recent_urls.append(url)
        if self.limits.plmax and self.page_loads >= self.limits.plmax:
            return self.event("PLmax", self.limits.plmax, self.page_loads, now)
        return None

    def new_targets(self, now: float, count: int = 1) -> Trigger | None:
        """``count`` distinct targets became known. Fires TTmax when ``targets`` reaches it."""
        if count < 0:
            raise ValueError(f"count must be >= 0, not {count!r}")
        self.targets += count
        if self.limits.ttmax and self.targets >= self.limits.ttmax:
            return self.event("TTmax", self.limits.ttmax, self.targets, now)
        return None

    def found(self, count: int = 1) -> None:
        """``count`` more targets were found (what TST watches)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, not {count!r}")
        self.found_count += count

    def check(self, now: float) -> Trigger | None:
        """Evaluate the time rules at ``now`` (call it periodically).

        TDL: ``now - first_request_at >= TDL``. TAC: ``now - last_iteration_at
        > TAC``: the gap to the next iteration start already exceeds TAC, so a
        stuck domain is stopped without waiting for a start that may never
        come. Does nothing before the first iteration or after :meth:`finish`.
        """
        if self.stopped or self.finished:
            return None
        self._check_time(now)
        return self.new_trigger()

    def finish(self) -> None:
        """The domain ended on its own (frontier exhausted): no rule fires any more."""
        self.finished = True

    # -- internals -----------------------------------------------------------------

    def _check_time(self, now: float) -> None:
        limits = self.limits
        if limits.tdl and self.first_request_at is not None and now - self.first_request_at >= limits.tdl:
            self._fire("TDL", limits.tdl, now - self.first_request_at, now)
        elif limits.tac and self.last_iteration_at is not None and now - self.last_iteration_at > limits.tac:
            self._fire("TAC", limits.tac, now - self.last_iteration_at, now)

    def event(self, name: str, limit: int | float, observed: int | float, now: float) -> Trigger | None:
        if self.stopped or self.finished:
            return None
        self._fire(name, limit, observed, now)
        return self.new_trigger()

    def _fire(self, name: str, limit: int | float, observed: int | float, now: float) -> None:
        self.trigger = Trigger(name, limit, observed, now, self.level, self.key)
        self._unreported = True


class DomainLimits(LimitTracker):
    """A domain crawl's tracker (see :class:`LimitTracker`); ``key`` names the domain."""

    level: Level = "domain"


class JobLimits(LimitTracker):
    """The job's tracker: the extension feeds it every domain's events too.

    Its iterations are all domains' iterations, its page loads and targets the
    totals; TDL runs from the job's first request and TAC between any two
    iteration starts in the job. Only :data:`JOB_RULES` apply: LT and TST must
    be 0 (:meth:`take` grants :data:`UNLIMITED` until a job rule fires).
    """

    level: Level = "job"

    def __init__(self, limits: Limits, key: str = "", *, recent: int = 5) -> None:
        for r in RULES:
            if r.name not in JOB_RULES and getattr(limits, r.field):
                raise LimitError(r.name, getattr(limits, r.field), "has no job-level meaning; use 0")
        super().__init__(limits, key, recent=recent)
