"""Adaptive recrawl: when each target's tail and each found page is due again, and the margin advice.

The rule (motivate on news, penalise otherwise, clamped; due when ``now - last_crawled > update_duration``)
and why its defaults differ from Nutch's: docs/recrawl.md. Times are epoch seconds from one
:class:`idcrawl.core.clock.Clock`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC
from email.utils import parsedate_to_datetime
from enum import StrEnum
from functools import lru_cache
from itertools import islice, pairwise
from typing import Any, Final

from pyroaring import BitMap64

from idcrawl.core.inputs import TargetError
from idcrawl.core.ranges import gap_histogram, gap_stats, run_bounds

__all__ = [
    "DEFAULT_POLICY",
    "MIN_GAP_RUNS",
    "RECRAWL_KEYS",
    "SIGNATURES",
    "Fetch",
    "Kind",
    "MarginAdvice",
    "Outcome",
    "Policy",
    "Schedule",
    "Visit",
    "advised_margin",
    "body_due",
    "body_older",
    "capture_fields",
    "due",
    "due_order",
    "duration_text",
    "early_cut_chance",
    "gap_runs",
    "http_time",
    "margin_advice",
    "next_duration",
    "overdue",
    "page_schedule",
    "parse_duration",
    "parse_policy",
    "record_of",
    "run_continuation",
    "schedule_of",
    "signature_of",
    "tail_after_run",
    "tail_schedule",
    "visit_page",
    "visit_tail",
]

DAY: Final = 86_400.0


@dataclass(frozen=True, slots=True)
class Policy:
    """The numbers of the rule, per target: Nutch's ``AdaptiveFetchSchedule`` defaults but ``inc_rate``
    (0.8, not 0.4: it meets "80% within a factor 2 after 30 visits" in every class of docs/recrawl.md)."""

    inc_rate: float = 0.8
    dec_rate: float = 0.2
    min_duration: float = 60.0
    max_duration: float = 365 * DAY
    initial_duration: float = DAY
    #: gone revisits in a row after which a page leaves the schedule
    gone_limit: int = 3
    #: what a page revisit compares (:func:`signature_of`): ``body`` (its bytes) or ``text`` (its visible text)
    signature: str = "body"
    #: regular expressions removed from the content before it is hashed (timestamps, tokens)
    signature_drop: tuple[str, ...] = ()
    #: ``Last-Modified`` also sets the next duration (Nutch's ``sync_delta``), not only the validator
    sync: bool = False
    #: late ids (ids below the tail's last found id that were missing): seconds between two re-probes
    #: of them (``late_every``; 0 = never, the default) and the most ids one re-probe takes (``late_max``)
    late_every: float = 0.0
    late_max: int = 1000

    def clamp(self, duration: float) -> float:
        return min(self.max_duration, max(self.min_duration, duration))


DEFAULT_POLICY: Final = Policy()

#: The per-target keys (job file or ``-a``) and the policy field each sets.
RECRAWL_KEYS: Final[Mapping[str, str]] = {
    "recrawl_inc_rate": "inc_rate",
    "recrawl_dec_rate": "dec_rate",
    "recrawl_min": "min_duration",
    "recrawl_max": "max_duration",
    "recrawl_initial": "initial_duration",
    "recrawl_gone": "gone_limit",
    "signature": "signature",
    "signature_drop": "signature_drop",
    "last_modified": "sync",
    "late_every": "late_every",
    "late_max": "late_max",
}
#: The values of ``signature``.
SIGNATURES: Final = ("body", "text")
#: The values of ``last_modified``: only a validator (the default), or also the schedule's evidence.
_LAST_MODIFIED: Final = ("validator", "sync")


def _rate(key: str, value: Any, *, below_one: bool) -> float:
    reason = "must be a number > 0 and < 1" if below_one else "must be a finite number > 0"
    if isinstance(value, bool):
        raise TargetError(key, value, reason)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TargetError(key, value, reason) from None
    if not math.isfinite(number) or number <= 0 or (below_one and number >= 1):
        raise TargetError(key, value, reason)
    return number


_DURATION: Final = re.compile(r"(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>s|m|h|d)?", re.I)
_SECONDS_PER: Final = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": DAY}


def parse_duration(key: str, value: Any) -> float:
    reason = "must be a duration > 0 such as 60s, 15m, 6h, 1d or 3600 (seconds)"
    if isinstance(value, bool):
        raise TargetError(key, value, reason)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value.strip())):
        seconds = float(match["number"]) * _SECONDS_PER[(match["unit"] or "s").lower()]
    else:
        raise TargetError(key, value, reason)
    if not math.isfinite(seconds) or seconds <= 0:
        raise TargetError(key, value, reason)
    return seconds


def parse_policy(raw: Mapping[str, Any], defaults: Policy = DEFAULT_POLICY) -> Policy:
    """The :class:`Policy` of one target from its ``recrawl_*`` keys (other keys are ignored).

    Strings (``-a recrawl_min=5m``) and TOML values are accepted; a bad value
    raises :class:`TargetError`, one line naming the key and the value.
    """
    fields: dict[str, Any] = {}
    for key, value in raw.items():
        name = RECRAWL_KEYS.get(key)
        if name is None:
            continue
        if name == "inc_rate":
            fields[name] = _rate(key, value, below_one=False)
        elif name == "dec_rate":
            fields[name] = _rate(key, value, below_one=True)
        elif name == "signature":
            if not isinstance(value, str) or value.strip().lower() not in SIGNATURES:
                raise TargetError(key, value, f"must be one of {', '.join(SIGNATURES)}")
            fields[name] = value.strip().lower()
        elif name == "signature_drop":
            fields[name] = _patterns(key, value)
        elif name == "sync":
            if not isinstance(value, str) or value.strip().lower() not in _LAST_MODIFIED:
                raise TargetError(key, value, f"must be one of {', '.join(_LAST_MODIFIED)}")
            fields[name] = value.strip().lower() == "sync"
        elif name == "late_every":
            fields[name] = 0.0 if _is_zero(value) else parse_duration(key, value)
        elif name in ("gone_limit", "late_max"):
            text = str(value).strip() if not isinstance(value, bool) else ""
            if not text.isdigit() or int(text) < 1:
                raise TargetError(key, value, "must be an integer >= 1")
            fields[name] = int(text)
        else:
            fields[name] = parse_duration(key, value)
    policy = replace(defaults, **fields)
    if policy.min_duration > policy.max_duration:
        key = "recrawl_min" if "min_duration" in fields else "recrawl_max"
        raise TargetError(key, raw.get(key, getattr(policy, RECRAWL_KEYS[key])),
                          f"makes recrawl_min ({policy.min_duration:g}s) above recrawl_max ({policy.max_duration:g}s)")
    return policy


def _is_zero(value: Any) -> bool:
    """0 (off) as a number or a text (``0``, ``0s``, ``0d``)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == 0
    return isinstance(value, str) and value.strip().lower() in ("0", "0s", "0m", "0h", "0d")


def _patterns(key: str, value: Any) -> tuple[str, ...]:
    """``signature_drop``: a regular expression or a list of them (a job file), each one that compiles."""
    patterns = [value] if isinstance(value, str) else value
    if not isinstance(patterns, list | tuple) or not all(isinstance(p, str) and p for p in patterns):
        raise TargetError(key, value, "must be a regular expression or a list of them")
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise TargetError(key, pattern, f"is not a regular expression ({exc})") from None
    return tuple(patterns)


@lru_cache(maxsize=64)
def _compiled(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


def signature_of(
    body: bytes, policy: Policy = DEFAULT_POLICY, *, text: Callable[[], str | None] | None = None,
    decoded: Callable[[], str | None] | None = None,
) -> str:
    """What a page revisit compares (the item's ``checksum``): the SHA-1 hex of the body, or with
    ``signature = "text"`` of its visible text (``text()``; None for a binary body: the body is used),
    whitespace folded; ``signature_drop`` patterns are removed first (from the decoded body,
    ``decoded()``, in ``body`` mode; a binary body is read as latin-1)."""
    drop = _compiled(policy.signature_drop)
    if policy.signature == "text":
        content = text() if text is not None else None
        if content is None:
            content = body.decode("latin-1")
        content = " ".join(content.split())
        if drop is not None:
            content = " ".join(drop.sub("", content).split())
        return hashlib.sha1(content.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()
    if drop is None:
        return hashlib.sha1(body, usedforsecurity=False).hexdigest()
    content = decoded() if decoded is not None else None
    if content is None:
        content = body.decode("latin-1")
    return hashlib.sha1(drop.sub("", content).encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()


def http_time(value: str | None, now: float) -> float | None:
    """An HTTP date (``Last-Modified``) as epoch seconds, no later than ``now``; None if absent or bad."""
    if not value:
        return None
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:  # RFC 9110 dates are GMT
        moment = moment.replace(tzinfo=UTC)
    try:
        seconds = moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return None
    return min(seconds, now) if math.isfinite(seconds) else None


def duration_text(seconds: float) -> str:
    """A duration for people, to the minute (``1d 9h 36m``, ``45m``; ``30s`` under a minute)."""
    if seconds < 60:
        return f"{seconds:g}s"
    minutes = round(seconds / 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days}d"] if days else []
    parts += [f"{hours}h"] if hours else []
    parts += [f"{minutes}m"] if minutes else []
    return " ".join(parts)


def next_duration(duration: float, news: bool, policy: Policy = DEFAULT_POLICY) -> float:
    """The seed's rule: motivate (``x (1 - dec_rate)``) on news, else penalise (``x (1 + inc_rate)``); clamped."""
    factor = (1.0 - policy.dec_rate) if news else (1.0 + policy.inc_rate)
    return policy.clamp(duration * factor)


class Kind(StrEnum):
    TAIL = "tail"
    PAGE = "page"


@dataclass(frozen=True, slots=True)
class Schedule:
    """One revisited thing: a target's tail (``key`` = the target) or a found page (``key`` = target/id)."""

    kind: Kind
    key: str
    last_crawled: float
    update_duration: float
    #: tail: the highest found id so far
    last_found: int | None = None
    #: page: what the last 200 returned, the validators to send next time, the last status
    checksum: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    last_status: int | None = None
    #: page: gone revisits in a row
    gone: int = 0
    #: revisits that found news (a page's revision number)
    revision: int = 0
    #: page: the latest moment it is known to have changed (``Last-Modified``, or a visit that found
    #: news), for ``last_modified = "sync"``; None: no evidence
    modified: float | None = None
    #: page: when a body was last read (a 200), for the forced refetch; None: a record of before 0.2
    body_at: float | None = None
    #: tail: when the last re-probe of its late ids was planned (None: never) and the id it stopped at
    #: (the next one goes on below it; None: from the top); :mod:`idcrawl.core.resume`
    late_at: float | None = None
    late_below: int | None = None
    #: page: the stored WARC capture of its body (a response record): its URI, WARC-Date and payload
    #: digest, which a revisit record refers to; None: no WARC output, or none written yet
    capture_uri: str | None = None
    capture_date: str | None = None
    capture_digest: str | None = None
    #: tail: the highest id a sitemap listed above ``last_found`` that no walk has passed yet: the next
    #: walk goes on to it whatever the misses (its lane's reach, :func:`idcrawl.core.resume.tail_specs`);
    #: None: none (:func:`idcrawl.core.sitemaps.tail_due_by_sitemap` sets it, :func:`tail_after_run` clears it)
    listed: int | None = None

    def due_at(self) -> float:
        """The moment after which the thing is due (due when now is strictly later)."""
        return self.last_crawled + self.update_duration


_SCHEDULE_FIELDS: Final = tuple(f.name for f in fields(Schedule))


def tail_schedule(key: str, now: float, last_found: int | None, policy: Policy = DEFAULT_POLICY) -> Schedule:
    """A tail first seen at ``now`` (the end of the run that walked it)."""
    return Schedule(Kind.TAIL, key, now, policy.clamp(policy.initial_duration), last_found=last_found)


def tail_after_run(
    previous: Schedule | None, key: str, last_found: int | None, now: float, policy: Policy = DEFAULT_POLICY,
    cut: int | None = None,
) -> Schedule:
    """A tail's schedule once a run walked it to its margin at ``now``, ``last_found`` the highest id
    that run found on it (None: none): the rule applied to ``previous``, or the first schedule.
    ``cut``: where the margin cut the walk (None: not known): a listed id (:attr:`Schedule.listed`)
    before it, or at or below the new last found id, was passed and is forgotten."""
    if previous is None:
        return tail_schedule(key, now, last_found, policy)
    schedule = visit_tail(previous, () if last_found is None else (last_found,), now, policy).schedule
    assert schedule is not None
    listed = schedule.listed
    if listed is not None and ((cut is not None and cut > listed)
                               or (schedule.last_found is not None and schedule.last_found >= listed)):
        schedule = replace(schedule, listed=None)
    return schedule


def record_of(schedule: Schedule) -> dict[str, Any]:
    """A schedule as a JSON object (what the state stores keep; ids stay exact, above 2**63 too)."""
    record = {f: getattr(schedule, f) for f in _SCHEDULE_FIELDS if getattr(schedule, f) is not None}
    record["kind"] = schedule.kind.value
    return record


def schedule_of(record: Mapping[str, Any]) -> Schedule:
    """A schedule back from :func:`record_of`'s object (fields it does not know are ignored)."""
    values = {f: record[f] for f in _SCHEDULE_FIELDS if f in record}
    values["kind"] = Kind(values["kind"])
    return Schedule(**values)


def page_schedule(
    key: str,
    now: float,
    checksum: str | None,
    *,
    etag: str | None = None,
    last_modified: str | None = None,
    status: int = 200,
    policy: Policy = DEFAULT_POLICY,
    capture: tuple[str, str, str] | None = None,
) -> Schedule:
    """A page first found at ``now`` (``capture``: its WARC capture, :attr:`Fetch.capture`)."""
    uri, date, digest = capture_fields(None, capture)
    return Schedule(
        Kind.PAGE, key, now, policy.clamp(policy.initial_duration),
        checksum=checksum, etag=etag, last_modified=last_modified, last_status=status,
        modified=http_time(last_modified, now), body_at=now, capture_uri=uri, capture_date=date,
        capture_digest=digest,
    )


def due(schedule: Schedule, now: float) -> bool:
    """``now - last_crawled > update_duration``."""
    return now - schedule.last_crawled > schedule.update_duration


def overdue(schedule: Schedule, now: float) -> float:
    """How overdue, in durations: ``(now - last_crawled - duration) / duration`` (> 0 when due)."""
    return (now - schedule.last_crawled - schedule.update_duration) / schedule.update_duration


def due_order(schedules: Iterable[Schedule], now: float) -> list[Schedule]:
    """What is due at ``now``, in fetch order: tails first, then pages, most overdue first (then by key)."""
    ready = [s for s in schedules if due(s, now)]
    ready.sort(key=lambda s: (s.kind is not Kind.TAIL, -overdue(s, now), s.key))
    return ready


@dataclass(frozen=True, slots=True)
class Visit:
    """What one revisit did: the new schedule (None: the page left it), whether it found news, whether gone."""

    schedule: Schedule | None
    news: bool
    gone: bool = False
    #: the page's checksum before this visit (for the item of a changed page)
    previous_checksum: str | None = None


def visit_tail(schedule: Schedule, found: Iterable[int], now: float, policy: Policy = DEFAULT_POLICY) -> Visit:
    """A tail walked at ``now`` found ``found`` ids; news = any of them above the previous ``last_found``."""
    if now <= schedule.last_crawled:
        return Visit(schedule, False)  # a replay (a rerun after a kill): applied once already
    best = max(found, default=None)
    previous = schedule.last_found
    news = best is not None and (previous is None or best > previous)
    return Visit(
        replace(
            schedule,
            last_crawled=now,
            update_duration=next_duration(schedule.update_duration, news, policy),
            last_found=best if news else previous,
            revision=schedule.revision + news,
        ),
        news,
    )


class Outcome(StrEnum):
    """What a page revisit returned."""

    OK = "ok"  # a 200 with a body (checksum)
    NOT_MODIFIED = "not_modified"  # a 304
    MISSING = "missing"  # the id's outcome is missing (404/410, soft 404)
    FAILED = "failed"  # errors on every attempt: no observation


@dataclass(frozen=True, slots=True)
class Fetch:
    """One revisit's answer: the outcome and, for a 200, its signature (``checksum``) and validators
    (a 304's ``last_modified``, if it has one, is evidence for ``sync``; the stored validators stay)."""

    outcome: Outcome
    checksum: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    #: a 200 written as a full WARC response record: ``(uri, WARC-Date, payload digest)``; None: none
    #: written (no WARC output, or a revisit record), the stored capture stays
    capture: tuple[str, str, str] | None = None


def capture_fields(schedule: Schedule | None, capture: tuple[str, str, str] | None) -> tuple[str | None, ...]:
    """A page record's ``(capture_uri, capture_date, capture_digest)``: :attr:`Fetch.capture`'s, or
    when None (no full response record written) the stored ones (``schedule``'s; none without)."""
    if capture is not None:
        return capture
    if schedule is None:
        return (None, None, None)
    return (schedule.capture_uri, schedule.capture_date, schedule.capture_digest)


def visit_page(schedule: Schedule, fetch: Fetch, now: float, policy: Policy = DEFAULT_POLICY) -> Visit:
    """A page revisited at ``now``: the rule applied to what came back. News = a signature
    (``checksum``) other than the stored one, whatever the last status was; a 304 is unchanged."""
    if fetch.outcome is Outcome.FAILED or now <= schedule.last_crawled:
        return Visit(schedule, False)  # no observation, or a replay applied once already
    duration = schedule.update_duration
    if fetch.outcome is Outcome.MISSING:
        gone = schedule.gone + 1
        if gone >= policy.gone_limit:
            return Visit(None, False, gone=True, previous_checksum=schedule.checksum)
        return Visit(
            replace(schedule, last_crawled=now, update_duration=next_duration(duration, False, policy), gone=gone),
            False, gone=True, previous_checksum=schedule.checksum,
        )
    if fetch.outcome is Outcome.NOT_MODIFIED:
        modified = _latest(schedule.modified, http_time(fetch.last_modified, now))
        return Visit(
            replace(schedule, last_crawled=now, update_duration=_unchanged_duration(duration, modified, now, policy),
                    gone=0, last_status=304, modified=modified),
            False, previous_checksum=schedule.checksum,
        )
    news = fetch.checksum != schedule.checksum
    uri, date, digest = capture_fields(schedule, fetch.capture)
    modified = now if news else _latest(schedule.modified, http_time(fetch.last_modified, now))
    return Visit(
        replace(
            schedule,
            last_crawled=now,
            update_duration=(next_duration(duration, True, policy) if news
                             else _unchanged_duration(duration, modified, now, policy)),
            checksum=fetch.checksum,
            etag=fetch.etag,
            last_modified=fetch.last_modified,
            last_status=200,
            gone=0,
            revision=schedule.revision + news,
            modified=modified,
            body_at=now,
            capture_uri=uri,
            capture_date=date,
            capture_digest=digest,
        ),
        news, previous_checksum=schedule.checksum,
    )


def _latest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _unchanged_duration(duration: float, modified: float | None, now: float, policy: Policy) -> float:
    """The penalised duration of a visit without news; with ``sync``, at least the page's age
    (``now - modified``, Nutch's ``sync_delta``), clamped."""
    longer = duration * (1.0 + policy.inc_rate)
    if policy.sync and modified is not None:
        longer = max(longer, now - modified)
    return policy.clamp(longer)


def body_due(schedule: Schedule, now: float, refetch_after: float) -> bool:
    """Is a page's revisit at ``now`` a forced unconditional refetch (no validators)? Yes when its last
    body (a 200) is more than ``refetch_after`` seconds old (0: never); a record of before 0.2 that
    last answered 304 has no such time and is refetched."""
    seen = schedule.body_at
    if seen is None:
        seen = schedule.last_crawled if schedule.last_status == 200 else -math.inf
    return body_older(seen, now, refetch_after)


def body_older(seen: float, now: float, refetch_after: float) -> bool:
    """Is a body read at ``seen`` (``-inf``: at an unknown time) more than ``refetch_after`` seconds old at
    ``now`` (0: never), so that a revisit is a forced unconditional refetch? Id pages (:func:`body_due`)
    and crawl-scope pages (:func:`idcrawl.core.scope.url_body_due`) alike."""
    return refetch_after > 0 and now - seen > refetch_after


# -- margin advice (issue 17, point 7) ----------------------------------------------------------


def gap_runs(found: Iterable[int]) -> list[int]:
    """The lengths of the runs of missing ids between consecutive found ids (0 for neighbours)."""
    ids = sorted(set(found))
    return [b - a - 1 for a, b in pairwise(ids)]


def run_continuation(runs: Iterable[int]) -> float:
    """``r`` of a geometric fit to gap-run lengths (``P(run >= m) = r**m``), by maximum likelihood:
    ``r = mean / (1 + mean)``; 0.0 for no runs or only neighbours."""
    lengths = list(runs)
    if not lengths:
        return 0.0
    mean = sum(lengths) / len(lengths)
    return mean / (1.0 + mean)


def early_cut_chance(r: float, margin: int, gaps: int) -> float:
    """The chance that a lane crossing ``gaps`` gap runs (each ``P(run >= m) = r**m``) is cut by
    ``margin`` before its real end: some run reaches the margin. ``margin`` 0 (no cut) never cuts."""
    if margin <= 0 or gaps <= 0:
        return 0.0
    return -math.expm1(gaps * math.log1p(-(r**margin))) if r < 1.0 else 1.0


def advised_margin(runs: Iterable[int], gaps: int | None = None, risk: float = 0.01) -> int:
    """The smallest margin whose early-cut chance over ``gaps`` gap runs (default: as many as
    ``runs`` has) is below ``risk``, for runs like ``runs`` (a geometric fit: :func:`run_continuation`).

    Runs read from a state are censored at the margin in use (a longer one cut the lane), so the fit
    is a lower bound when many runs come near it; the advice is then worth a second look.
    """
    lengths = list(runs)
    return _advised(run_continuation(lengths), len(lengths) if gaps is None else gaps, risk)


def _advised(r: float, n: int, risk: float) -> int:
    """:func:`advised_margin` from the fit's ``r`` and the number of gap runs ``n``."""
    if r <= 0.0 or n <= 0:
        return 1
    r = min(r, math.nextafter(1.0, 0.0))  # a gap of ~2**64 ids rounds r to 1.0
    # 1 - (1 - r**m)**n < risk  <=>  r**m < 1 - (1 - risk)**(1/n)
    per_gap = -math.expm1(math.log1p(-risk) / n)
    margin = max(1, math.ceil(math.log(per_gap) / math.log(r)))
    while margin > 1 and early_cut_chance(r, margin - 1, n) < risk:  # float edges
        margin -= 1
    while early_cut_chance(r, margin, n) >= risk:
        margin += 1
    return margin


#: Fewer gap runs than this are too thin to advise from: the advice says so instead (issue 31, finding 6).
MIN_GAP_RUNS: Final = 30
#: The geometric fit is dropped when it expects more than this many runs longer than the largest
#: seen (none seen: the tail is shorter than geometric; a true geometric tail shows none with
#: chance ``exp(-5)`` < 1%): the advice is then the largest gap plus one.
FIT_REFUTED_AT: Final = 5.0


@dataclass(frozen=True, slots=True)
class MarginAdvice:
    """What the gap runs of a target's found ids say about its margin (``scrapy idplan``)."""

    #: the gap runs the fit saw, and the geometric fit's ``r`` (:func:`run_continuation`)
    runs: int
    r: float
    #: the margin in use (None: not known), and the chance it cut a lane before its real end
    margin: int | None
    early_cut: float | None
    #: the advised margin, never below ``largest + 1``; None: too few gap runs (``< MIN_GAP_RUNS``) to advise
    advised: int | None
    risk: float
    #: runs within reach of the margin in use (``>= margin - 1``): a longer run would have cut the lane
    #: and is not in the state, so the fit is a lower bound (the advice worth a second look)
    censored: int
    #: the longest gap run seen, and the gap-length histogram: rows of (first, last length, how many)
    #: (:func:`idcrawl.core.ranges.gap_histogram`)
    largest: int = 0
    histogram: tuple[tuple[int, int, int], ...] = ()
    #: how the advice was made: ``fit`` (the geometric fit, raised to ``largest + 1``), ``largest``
    #: (the fit refuted by the data: the largest gap plus one), ``thin`` (no advice)
    basis: str = "fit"


def margin_advice(found: Iterable[int], margin: int | None, risk: float = 0.01) -> MarginAdvice:
    """Margin advice from the found ids of a target (their gap runs: :func:`gap_runs`), for a lane
    crossing as many gap runs as the state holds. A bitmap's gap runs are counted, not listed.

    The advice is never below the longest gap run seen plus one (a margin that cuts a gap already
    seen cuts the next crawl); from fewer than :data:`MIN_GAP_RUNS` runs there is none
    (``advised`` None). Above that floor the geometric fit decides, unless the data refutes it
    (it expects more than :data:`FIT_REFUTED_AT` runs longer than the largest, and none was seen):
    gaps that are all one id long advise 2, not the fit's 15."""
    ids = found if isinstance(found, BitMap64) else BitMap64(found)
    n, total, censored = gap_stats(ids, margin - 1 if margin else 0)
    censored = censored if margin else 0
    mean = total / n if n else 0.0
    r = mean / (1.0 + mean) if n else 0.0
    histogram = tuple(gap_histogram(ids))
    largest = max((high for _, high, count in histogram if count), default=0)
    if histogram and histogram[-1][0] != histogram[-1][1]:  # the last bucket is a range: the exact largest
        largest = _largest_gap(ids)
    early = early_cut_chance(r, margin, n) if margin else None
    if n < MIN_GAP_RUNS:
        advised, basis = None, "thin"
    elif n * r ** (largest + 1) > FIT_REFUTED_AT:
        advised, basis = largest + 1, "largest"
    else:
        advised, basis = max(largest + 1, _advised(r, n, risk)), "fit"
    return MarginAdvice(n, r, margin, early, advised, risk, censored, largest, histogram, basis)


def _largest_gap(ids: BitMap64) -> int:
    """The longest gap run between consecutive ids of ``ids`` (O(maximal runs))."""
    firsts, lasts = run_bounds(ids)
    return max((first - last - 1 for last, first in zip(lasts, islice(firsts, 1, None), strict=False)), default=0)
