"""Every ``IDCRAWL_*`` setting's type and range, checked in one place.

A setting arrives as a Python value (a settings module, a profile's TOML) or
as a string (``-s NAME=VALUE``, scrapyd's ``setting=``, Zyte's ``-s``). The
components read them with Scrapy's ``getint``/``getfloat``/``getbool``/
``getlist``, which raise a bare ``ValueError`` deep inside a crawl for
``-s IDCRAWL_WINDOW=abc``. :func:`check_settings` runs once when the crawler
starts, before any request, and turns the first bad value into one
:class:`SettingError` line naming the setting and the value.

The conversions here accept exactly what Scrapy's getters accept (so a value
that passes is read the same way later), then check the range. The table
:data:`SPECS` has an entry for every setting of :mod:`idcrawl.default_settings`;
``tests/unit/test_settings_check.py`` fails for a new setting without one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from idcrawl.core.clock import ClockError, parse_time
from idcrawl.core.limits import RULES, LimitError, parse_count, parse_duration

__all__ = ["SPECS", "SettingError", "Spec", "check_setting", "check_settings"]


class SettingError(ValueError):
    """A bad setting value; ``str(error)`` is the one line: ``IDCRAWL_WINDOW='abc': must be an integer >= 1``."""

    def __init__(self, name: str, value: Any, reason: str) -> None:
        self.name, self.value, self.reason = name, value, reason
        super().__init__(f"{name}={value!r}: {reason}")


class _Bad(Exception):
    """Raised by a check with the reason only; :func:`check_setting` adds the name and the value."""


# -- conversions that mirror Scrapy's getters ------------------------------------------


def _as_int(value: Any) -> int:
    """What ``Settings.getint`` returns (``int(value)``), refusing what it would silently truncate."""
    if isinstance(value, bool):
        raise _Bad
    if isinstance(value, float):
        if not value.is_integer():
            raise _Bad
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise _Bad from None
    raise _Bad


def _as_float(value: Any) -> float:
    """What ``Settings.getfloat`` returns (``float(value)``)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _Bad
    try:
        return float(value)
    except ValueError:
        raise _Bad from None


def _as_bool(value: Any) -> bool:
    """What ``Settings.getbool`` accepts: True/False, 0/1, "0"/"1", "true"/"false" (any case Scrapy allows)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        if value in ("True", "true"):
            return True
        if value in ("False", "false"):
            return False
        try:
            number = int(value)
        except ValueError:
            raise _Bad from None
        if number in (0, 1):
            return bool(number)
    raise _Bad


def _as_list(value: Any) -> list[Any]:
    """What ``Settings.getlist`` returns: a comma-separated string split, a list or tuple as it is."""
    if value is None:
        return []
    if isinstance(value, str):
        return value.split(",")
    if isinstance(value, list | tuple):
        return list(value)
    raise _Bad


# -- specs ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Spec:
    """How one setting is checked: ``check`` raises :class:`_Bad` and ``reason`` says what is wanted."""

    check: Callable[[Any], object]
    reason: str
    #: None (or an empty string) is a valid value: "unset", "the default path", "none"
    optional: bool = False


def _int(minimum: int, maximum: int | None = None, note: str = "") -> Spec:
    def check(value: Any) -> None:
        number = _as_int(value)
        if number < minimum or (maximum is not None and number > maximum):
            raise _Bad

    bound = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
    return Spec(check, f"must be an integer {bound}{note}")


def _float(minimum: float = 0.0, maximum: float | None = None, *, above: bool = False, note: str = "") -> Spec:
    def check(value: Any) -> None:
        number = _as_float(value)
        if not math.isfinite(number) or number < minimum or (above and number == minimum):
            raise _Bad
        if maximum is not None and number > maximum:
            raise _Bad

    low = f"> {minimum:g}" if above else f">= {minimum:g}"
    bound = low if maximum is None else f"{low} and <= {maximum:g}"
    return Spec(check, f"must be a finite number {bound}{note}")


def _off_or_at_least(minimum: float, note: str = "") -> Spec:
    """0 (off) or a finite number >= ``minimum``."""
    def check(value: Any) -> None:
        number = _as_float(value)
        if not math.isfinite(number) or (number != 0 and number < minimum):
            raise _Bad

    return Spec(check, f"must be 0 (off) or a finite number >= {minimum:g}{note}")


def _bool() -> Spec:
    return Spec(_as_bool, "must be True or False (also 1/0, true/false)")


def _choice(choices: Sequence[str], *, fold: bool = True) -> Spec:
    """One of ``choices``; ``fold``: the reader strips and lower-cases the value first."""

    def check(value: Any) -> None:
        if not isinstance(value, str):
            raise _Bad
        if (value.strip().lower() if fold else value) not in choices:
            raise _Bad

    return Spec(check, f"must be one of {', '.join(choices)}")


def _text(note: str, *, optional: bool = True) -> Spec:
    def check(value: Any) -> None:
        if not isinstance(value, str) or not value.strip() or "\x00" in value:
            raise _Bad

    return Spec(check, f"must be {note}", optional=optional)


def _statuses() -> Spec:
    def check(value: Any) -> None:
        items = _as_list(value)
        if not items:
            raise _Bad
        for item in items:
            if not 100 <= _as_int(item.strip() if isinstance(item, str) else item) <= 599:
                raise _Bad

    return Spec(check, "must be a list of HTTP statuses (100..599) such as 404,410")


def _strings() -> Spec:
    def check(value: Any) -> None:
        if not all(isinstance(item, str) and item.strip() for item in _as_list(value)):
            raise _Bad

    return Spec(check, "must be a list of names such as finished,closespider_timeout")


_INCIDENT_RULES: Final = (*(r.name for r in RULES if r.name != "LT"), "errors")


def _incident_rules() -> Spec:
    known = {name.lower() for name in _INCIDENT_RULES}

    def check(value: Any) -> None:
        if not all(str(item).strip().lower() in known for item in _as_list(value)):
            raise _Bad

    return Spec(check, f"must be a list of rule names from {', '.join(_INCIDENT_RULES)}")


def _limit(*, duration: bool) -> Spec:
    def check(value: Any) -> None:
        if isinstance(value, str) and not value.strip():
            return  # an empty string keeps the default (idcrawl.core.limits.Limits.from_settings)
        try:
            (parse_duration if duration else parse_count)("", value)
        except LimitError:
            raise _Bad from None

    if duration:
        return Spec(check, "must be a duration >= 0 such as 15m, 900s or 900 (seconds; 0 = off)", optional=True)
    return Spec(check, "must be a whole number >= 0 (0 = off)", optional=True)


def _time(value: Any) -> None:
    try:
        parse_time(value)
    except ClockError:
        raise _Bad from None


def _rate(value: Any) -> None:
    if not 0.0 < _as_float(value) < 1.0:
        raise _Bad


#: The largest sensible number of ids between two commits / claimed at once: a guard against typos.
_MANY: Final = 10**9

#: One entry per setting of ``idcrawl.default_settings``.
SPECS: Final[dict[str, Spec]] = {
    # targets and lanes (defaults of the per-target keys)
    "IDCRAWL_MARGIN": _int(0),
    "IDCRAWL_WINDOW": _int(1),
    "IDCRAWL_MAX_TARGETS": _int(0, note=" (0 = no limit)"),
    "IDCRAWL_MARGIN_COUNTS_FAILED": _bool(),
    "IDCRAWL_SPECULATION": _choice(("adaptive", "window")),
    "IDCRAWL_MAX_HELD_PAYLOADS": _int(0, note=" (0 = no cap)"),
    "IDCRAWL_MISSING_STATUSES": _statuses(),
    "IDCRAWL_PROGRESS_INTERVAL": _float(note=" (seconds; 0 = off)"),
    "IDCRAWL_PROGRESS_FIRST": _float(note=" (seconds)"),
    "IDCRAWL_PROGRESS_TARGETS": _int(0),
    "IDCRAWL_RETRY_JITTER": _float(),
    "IDCRAWL_RETRY_AFTER_MAX": _float(note=" (seconds)"),
    "IDCRAWL_ROBOTSTXT_MAXSIZE": _int(0, note=" (bytes; 0 = no cap)"),
    # politeness
    "IDCRAWL_POLITENESS_FACTOR": _float(note=" (0 = off)"),
    "IDCRAWL_POLITENESS_MAX_DELAY": _float(note=" (seconds)"),
    "IDCRAWL_POLITENESS_MIN_DELAY": _float(note=" (seconds)"),
    # state
    "IDCRAWL_STATE": _bool(),
    "IDCRAWL_DISCARD_ITEMS": _bool(),
    "IDCRAWL_STATE_COMMIT_ITEMS": _int(1, _MANY, note=" (1 commits after every outcome)"),
    "IDCRAWL_STATE_COMMIT_INTERVAL": _float(note=" (seconds; 0 = only every IDCRAWL_STATE_COMMIT_ITEMS outcomes)"),
    "IDCRAWL_STATE_EMIT_ONCE": _bool(),
    "IDCRAWL_STATE_PATH": _text("a file path (or unset for the default)"),
    "IDCRAWL_STATE_BACKEND": _choice(("sqlite", "redis")),
    "IDCRAWL_STATE_LEASE": _float(above=True, note=" (seconds)"),
    # limits (idcrawl.core.limits checks them the same way)
    **{f"IDCRAWL_LIMIT_{key}": _limit(duration=key in ("TDL", "TAC"))
       for key in ("LT", "IMAX", "PLMAX", "TTMAX", "TDL", "TAC", "TST")},
    **{f"IDCRAWL_JOB_LIMIT_{key}": _limit(duration=key in ("TDL", "TAC"))
       for key in ("IMAX", "PLMAX", "TTMAX", "TDL", "TAC")},
    "IDCRAWL_INCIDENT_LOG": _text("a file path (or unset for the default)"),
    "IDCRAWL_INCIDENT_RULES": _incident_rules(),
    # profiles
    "IDCRAWL_PROFILE": _text("the name of a settings profile (or unset)"),
    "IDCRAWL_PROFILES_DIR": _text("a folder path (or unset)"),
    # monitoring
    "IDCRAWL_SPIDERMON": _bool(),
    "IDCRAWL_MONITOR_MAX_FAILED_RATIO": _float(),
    "IDCRAWL_MONITOR_FINISH_REASONS": replace(_strings(), optional=True),
    "IDCRAWL_MONITOR_MAX_INCIDENTS": _int(0),
    "IDCRAWL_MONITOR_MAX_OVERSHOOT_RATIO": _float(),
    # request dupefilter
    "IDCRAWL_DUPEFILTER_BACKEND": _choice(("pybloom", "rbloom", "set"), fold=False),
    "IDCRAWL_DUPEFILTER_ERROR_RATE": Spec(_rate, "must be a number between 0 and 1 (exclusive), such as 0.001"),
    "IDCRAWL_DUPEFILTER_CAPACITY": _int(0, note=" (0 = unknown: the filter grows)"),
    "IDCRAWL_DUPEFILTER_PATH": _text("a file path (or unset for the default)"),
    "IDCRAWL_DUPEFILTER_PERSIST": _bool(),
    "IDCRAWL_DUPEFILTER_SAVE_INTERVAL": _float(note=" (seconds; 0 = at close only)"),
    # content duplicates
    "IDCRAWL_CONTENT_DUPLICATES": _choice(("mark", "drop", "off")),
    "IDCRAWL_CONTENT_NEAR_DUPLICATES": Spec(_float(0.0, 1.0).check, "must be a Jaccard threshold in [0, 1] (0 = off)",
                                            optional=True),
    # crawl scope (idcrawl.core.urlqueue)
    "IDCRAWL_SCOPE_SEED": _int(0, note=" (the seed of the yield draws)"),
    "IDCRAWL_SCOPE_POSTPONE": _float(note=" (seconds)"),
    # distributed runs
    "IDCRAWL_DISTRIBUTED": _bool(),
    "IDCRAWL_WORKER_CLASS": _text("the import path of a worker class such as idcrawl.local.worker.LocalWorker",
                                  optional=False),
    "IDCRAWL_REDIS_PREFIX": _text("a non-empty key prefix"),
    "IDCRAWL_REDIS_JOB": _text("a job name (or unset for the spider's name)"),
    "IDCRAWL_REDIS_LEASE_TIMEOUT": _float(above=True, note=" (seconds)"),
    "IDCRAWL_REDIS_CLAIM_BLOCK": _int(1, _MANY),
    "IDCRAWL_REDIS_POLL_INTERVAL": _float(above=True, note=" (seconds)"),
    "IDCRAWL_REDIS_IDLE_TIMEOUT": _float(note=" (seconds; 0 = wait while the job is unfinished)"),
    "IDCRAWL_REDIS_NO_PROGRESS_LEASES": _off_or_at_least(2, " (multiples of IDCRAWL_REDIS_LEASE_TIMEOUT)"),
    "IDCRAWL_REDIS_MERGE_TARGETS": _bool(),
    "IDCRAWL_FAIL_EXIT_CODE": replace(_int(0, 255, note=" (an exit status; unset = the table's)"),
                                                  optional=True),
    "IDCRAWL_FAIL_REASONS": _strings(),
    # the clock (idcrawl.core.clock)
    "IDCRAWL_NOW": Spec(_time, "must be an ISO 8601 time such as 2026-01-12T07:00:00Z (or unset for the real clock)",
                        optional=True),
    # watch mode (idcrawl.core.watch)
    "IDCRAWL_WATCH": _bool(),
    "IDCRAWL_WATCH_SPEED": _float(above=True, note=" (clock seconds per real second)"),
}


def check_setting(name: str, value: Any) -> None:
    """Raise :class:`SettingError` if ``value`` is not valid for setting ``name`` (unknown names pass)."""
    spec = SPECS.get(name)
    if spec is None:
        return
    if value is None or (spec.optional and isinstance(value, str) and not value.strip()):
        if spec.optional:
            return
        raise SettingError(name, value, spec.reason)
    try:
        spec.check(value)
    except _Bad:
        raise SettingError(name, value, spec.reason) from None
    except (TypeError, ValueError, OverflowError):  # a value no getter could read
        raise SettingError(name, value, spec.reason) from None


def check_settings(get: Callable[[str], Any], names: Sequence[str] | None = None) -> None:
    """Check every setting of the table (or ``names``) as ``get`` returns it; the first bad one raises.

    ``get`` is a settings lookup (``crawler.settings.get``); a setting it does
    not have (None) keeps the documented default, which is valid, except for
    the few settings whose default is a value and that None would break.
    """
    for name in names if names is not None else SPECS:
        value = get(name)
        if value is None:
            continue  # unset: the component uses the documented default
        check_setting(name, value)

