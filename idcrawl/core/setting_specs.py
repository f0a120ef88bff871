"""The table of every ``IDCRAWL_*`` setting (type, range or choices, default) and its typed config.

:class:`IdConfig` is the table: one field per setting with its spec and default. :func:`build_config`
checks every value (accepting exactly what Scrapy's getters accept) and returns the frozen config;
the first bad value is one :class:`SettingError` line naming the setting and the value. The Scrapy
side (:mod:`idcrawl.config`) holds one per crawl. ``default_settings.py`` and the manual's settings
page are tested against the table (``tests/unit/test_settings_check.py``, ``test_docs.py``).
"""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

from idcrawl.core.clock import ClockError, parse_time
from idcrawl.core.inputs import TargetError
from idcrawl.core.limits import RULES, LimitError, parse_count, parse_duration
from idcrawl.core.recrawl import parse_duration as recrawl_duration

__all__ = [
    "DEFAULTS", "SPECS", "IdConfig", "SettingError", "Spec", "build_config", "check_setting", "check_settings",
    "read_setting", "setting_name",
]


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
    #: The value as the components use it (what Scrapy's getter returns), once ``check`` passed
    read: Callable[[Any], Any] = lambda value: value


def _int(minimum: int, maximum: int | None = None, note: str = "") -> Spec:
    def check(value: Any) -> None:
        number = _as_int(value)
        if number < minimum or (maximum is not None and number > maximum):
            raise _Bad

    bound = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
    return Spec(check, f"must be an integer {bound}{note}", read=_as_int)


def _float(minimum: float = 0.0, maximum: float | None = None, *, above: bool = False, note: str = "") -> Spec:
    def check(value: Any) -> None:
        number = _as_float(value)
        if not math.isfinite(number) or number < minimum or (above and number == minimum):
            raise _Bad
        if maximum is not None and number > maximum:
            raise _Bad

    low = f"> {minimum:g}" if above else f">= {minimum:g}"
    bound = low if maximum is None else f"{low} and <= {maximum:g}"
    return Spec(check, f"must be a finite number {bound}{note}", read=_as_float)


def _off_or_at_least(minimum: float, note: str = "") -> Spec:
    """0 (off) or a finite number >= ``minimum``."""
    def check(value: Any) -> None:
        number = _as_float(value)
        if not math.isfinite(number) or (number != 0 and number < minimum):
            raise _Bad

    return Spec(check, f"must be 0 (off) or a finite number >= {minimum:g}{note}", read=_as_float)


def _recrawl_duration() -> Spec:
    """0 (off) or a duration such as ``90d``, ``12h`` or seconds (:func:`idcrawl.core.recrawl.parse_duration`)."""
    def seconds(value: Any) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
            return 0.0
        if isinstance(value, str) and value.strip() in ("0", "0s", "0d"):
            return 0.0
        try:
            return recrawl_duration("", value)
        except TargetError:
            raise _Bad from None

    return Spec(seconds, "must be 0 (off) or a duration such as 90d, 12h, 30m or seconds", read=seconds)


def _bool() -> Spec:
    return Spec(_as_bool, "must be True or False (also 1/0, true/false)", read=_as_bool)


def _choice(choices: Sequence[str], *, fold: bool = True) -> Spec:
    """One of ``choices``; ``fold``: the reader strips and lower-cases the value first."""

    def check(value: Any) -> None:
        if not isinstance(value, str):
            raise _Bad
        if (value.strip().lower() if fold else value) not in choices:
            raise _Bad

    def read(value: Any) -> Any:
        return str(value).strip().lower() if fold else value

    return Spec(check, f"must be one of {', '.join(choices)}", read=read)


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

    def read(value: Any) -> tuple[int, ...]:
        return tuple(_as_int(item.strip() if isinstance(item, str) else item) for item in _as_list(value))

    return Spec(check, "must be a list of HTTP statuses (100..599) such as 404,410", read=read)


def _strings() -> Spec:
    def check(value: Any) -> None:
        if not all(isinstance(item, str) and item.strip() for item in _as_list(value)):
            raise _Bad

    def read(value: Any) -> tuple[str, ...]:
        return tuple(str(item).strip() for item in _as_list(value))

    return Spec(check, "must be a list of names such as finished,closespider_timeout", read=read)


def _addresses() -> Spec:
    """``host:port,host:port`` (or a list of such strings): a tuple of (host, port) pairs."""
    def pairs(value: Any) -> tuple[tuple[str, int], ...]:
        out = []
        for item in _as_list(value):
            host, colon, port = str(item).strip().rpartition(":")
            if not colon or not host.strip("[]") or not port.isdigit() or not 0 < int(port) < 65536:
                raise _Bad
            out.append((host.strip("[]"), int(port)))
        if not out:
            raise _Bad
        return tuple(out)

    return Spec(pairs, "must be host:port addresses separated by commas, such as 10.0.0.1:26379,10.0.0.2:26379",
                optional=True, read=lambda value: pairs(value) if value else None)


def _resolve() -> Spec:
    """Host names to IP addresses: a dict, its JSON text, or ``name=address,name=address`` text (``-s``)."""
    def pairs(value: Any) -> tuple[tuple[str, str], ...] | None:
        if value is None or value == "" or value == {}:
            return None
        if isinstance(value, str) and value.strip().startswith("{"):
            try:
                value = json.loads(value)
            except ValueError:
                raise _Bad from None
        items: list[tuple[Any, Any]]
        if isinstance(value, Mapping):
            items = list(value.items())
        else:
            items = [(name, address) for name, _, address in (str(item).strip().partition("=")
                                                               for item in _as_list(value))]
        out = []
        for name, address in items:
            if not isinstance(name, str) or not isinstance(address, str) or not name.strip() or " " in name.strip():
                raise _Bad
            try:
                ipaddress.ip_address(address.strip())
            except ValueError:
                raise _Bad from None
            out.append((name.strip().lower().rstrip("."), address.strip()))
        return tuple(out) or None

    return Spec(pairs, 'must map host names to IP addresses: {"gamma.example": "127.0.0.3"} '
                       "or gamma.example=127.0.0.3,alpha.example=127.0.0.2", optional=True, read=pairs)


_INCIDENT_RULES: Final = (*(r.name for r in RULES if r.name != "LT"), "errors")


def _incident_rules() -> Spec:
    known = {name.lower() for name in _INCIDENT_RULES}

    def check(value: Any) -> None:
        if not all(str(item).strip().lower() in known for item in _as_list(value)):
            raise _Bad

    def read(value: Any) -> tuple[Any, ...]:
        return tuple(_as_list(value))

    return Spec(check, f"must be a list of rule names from {', '.join(_INCIDENT_RULES)}", read=read)


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


def _setting(spec: Spec, default: Any) -> Any:
    """One row of the table: the field of :class:`IdConfig` with its spec and its default."""
    return field(default=default, metadata={"spec": spec})


@dataclass(frozen=True, slots=True)
class IdConfig:
    """Every ``IDCRAWL_*`` setting, typed and checked: one attribute per setting, its name lower-cased
    without ``IDCRAWL_`` (``IDCRAWL_REDIS_LEASE_TIMEOUT`` is ``redis_lease_timeout``).

    The class is the table of settings: each field holds the setting's spec (type, range or choices)
    and its default; :data:`SPECS` and :data:`DEFAULTS` are read from it. Lists are tuples, choices
    read as the components read them (``IDCRAWL_STATE_BACKEND`` stripped and lower-cased).
    """

    # targets and lanes (defaults of the per-target keys)
    margin: int = _setting(_int(0), 10)
    window: int = _setting(_int(1), 128)
    max_targets: int = _setting(_int(0, note=" (0 = no limit)"), 100_000)
    lane_stats: int = _setting(_int(0, note=" (0 = every lane)"), 10_000)
    margin_counts_failed: bool = _setting(_bool(), True)
    speculation: str = _setting(_choice(("adaptive", "window")), "adaptive")
    max_held_payloads: int = _setting(_int(0, note=" (0 = no cap)"), 0)
    missing_statuses: tuple[int, ...] = _setting(_statuses(), (404, 410))
    progress_interval: float = _setting(_float(note=" (seconds; 0 = off)"), 60.0)
    progress_first: float = _setting(_float(note=" (seconds)"), 3.0)
    progress_targets: int = _setting(_int(0), 10)
    retry_jitter: float = _setting(_float(), 0.1)
    retry_after_max: float = _setting(_float(note=" (seconds)"), 600.0)
    robotstxt_maxsize: int = _setting(_int(0, note=" (bytes; 0 = no cap)"), 500 * 1024)
    # politeness
    politeness_factor: float = _setting(_float(note=" (0 = off)"), 5.0)
    politeness_max_delay: float = _setting(_float(note=" (seconds)"), 30.0)
    politeness_min_delay: float = _setting(_float(note=" (seconds)"), 1.0)
    # state
    state: bool = _setting(_bool(), True)
    discard_items: bool = _setting(_bool(), False)
    state_commit_items: int = _setting(_int(1, _MANY, note=" (1 commits after every outcome)"), 100)
    state_commit_interval: float = _setting(
        _float(note=" (seconds; 0 = only every IDCRAWL_STATE_COMMIT_ITEMS outcomes)"), 5.0)
    state_emit_once: bool = _setting(_bool(), True)
    state_path: str | None = _setting(_text("a file path (or unset for the default)"), None)
    state_backend: str = _setting(_choice(("sqlite", "redis")), "sqlite")
    state_lease: float = _setting(_float(above=True, note=" (seconds)"), 30.0)
    # limits, as given: a count or a duration such as 15m (idcrawl.core.limits reads them)
    limit_lt: str | float | None = _setting(_limit(duration=False), 1)
    limit_imax: str | float | None = _setting(_limit(duration=False), 0)
    limit_plmax: str | float | None = _setting(_limit(duration=False), 0)
    limit_ttmax: str | float | None = _setting(_limit(duration=False), 0)
    limit_tdl: str | float | None = _setting(_limit(duration=True), 0)
    limit_tac: str | float | None = _setting(_limit(duration=True), 0)
    limit_tst: str | float | None = _setting(_limit(duration=False), 0)
    job_limit_imax: str | float | None = _setting(_limit(duration=False), 0)
    job_limit_plmax: str | float | None = _setting(_limit(duration=False), 0)
    job_limit_ttmax: str | float | None = _setting(_limit(duration=False), 0)
    job_limit_tdl: str | float | None = _setting(_limit(duration=True), 0)
    job_limit_tac: str | float | None = _setting(_limit(duration=True), 0)
    incident_log: str | None = _setting(_text("a file path (or unset for the default)"), None)
    incident_rules: tuple[str, ...] = _setting(_incident_rules(), ("TTmax", "TDL", "TAC"))
    # WARC output (idcrawl.archive)
    warc_dir: str | None = _setting(_text("a folder path (or unset: no WARC output)"), None)
    warc_max_size: int = _setting(_int(0, note=" (bytes; 0 = one file per run)"), 1_000_000_000)
    # profiles
    profile: str | None = _setting(_text("the name of a settings profile (or unset)"), None)
    profiles_dir: str | None = _setting(_text("a folder path (or unset)"), None)
    # monitoring
    spidermon: bool = _setting(_bool(), False)
    monitor_max_failed_ratio: float = _setting(_float(), 0.05)
    monitor_finish_reasons: tuple[str, ...] | None = _setting(replace(_strings(), optional=True), None)
    monitor_max_incidents: int = _setting(_int(0), 0)
    monitor_max_overshoot_ratio: float = _setting(_float(), 0.01)
    # request dupefilter
    dupefilter_backend: str = _setting(_choice(("pybloom", "rbloom", "set"), fold=False), "pybloom")
    dupefilter_error_rate: float = _setting(
        Spec(_rate, "must be a number between 0 and 1 (exclusive), such as 0.001", read=_as_float), 0.001)
    dupefilter_capacity: int = _setting(_int(0, note=" (0 = unknown: the filter grows)"), 0)
    dupefilter_path: str | None = _setting(_text("a file path (or unset for the default)"), None)
    dupefilter_persist: bool = _setting(_bool(), True)
    dupefilter_save_interval: float = _setting(_float(note=" (seconds; 0 = at close only)"), 60.0)
    # content duplicates
    content_duplicates: str = _setting(_choice(("mark", "drop", "off")), "mark")
    content_near_duplicates: float = _setting(
        replace(_float(0.0, 1.0), reason="must be a Jaccard threshold in [0, 1] (0 = off)", optional=True), 0.0)
    # crawl scope (idcrawl.core.urlqueue)
    scope_seed: int = _setting(_int(0, note=" (the seed of the yield draws)"), 0)
    scope_postpone: float = _setting(_float(note=" (seconds)"), 3600.0)
    # sitemaps (idcrawl.sitemaps)
    sitemap_max_files: int = _setting(_int(1, note=" (sitemaps read per site, index children included)"), 100)
    sitemap_max_urls: int = _setting(_int(1, note=" (URLs taken per target from its sitemaps)"), 50000)
    sitemap_max_reach: int = _setting(_int(0, note=" (ids a tail walk goes on to a listed id, 0 = none)"), 1000)
    resolve: tuple[tuple[str, str], ...] | None = _setting(_resolve(), None)
    resolve_only: bool = _setting(_bool(), False)
    # distributed runs
    distributed: bool = _setting(_bool(), False)
    worker_class: str = _setting(
        _text("the import path of a worker class such as idcrawl.local.worker.LocalWorker", optional=False),
        "idcrawl.local.worker.LocalWorker")
    redis_prefix: str = _setting(_text("a non-empty key prefix"), "idcrawl")
    redis_job: str | None = _setting(_text("a job name (or unset for the spider's name)"), None)
    redis_cluster: bool = _setting(_bool(), False)
    redis_lease_timeout: float = _setting(_float(above=True, note=" (seconds)"), 8.0)
    redis_claim_block: int = _setting(_int(1, _MANY), 8)
    redis_poll_interval: float = _setting(_float(above=True, note=" (seconds)"), 0.5)
    redis_idle_timeout: float = _setting(_float(note=" (seconds; 0 = wait while the job is unfinished)"), 0.0)
    redis_no_progress_leases: float = _setting(
        _off_or_at_least(2, " (multiples of IDCRAWL_REDIS_LEASE_TIMEOUT)"), 8.0)
    redis_merge_targets: bool = _setting(_bool(), False)
    redis_sentinels: tuple[tuple[str, int], ...] | None = _setting(_addresses(), None)
    redis_sentinel_service: str = _setting(_text("the name the sentinels monitor the primary by", optional=False),
                                           "mymaster")
    redis_sentinel_password: str | None = _setting(_text("a password (or unset: the sentinels ask none)"), None)
    redis_wait_replicas: int = _setting(_int(0, 16, note=" (0 = off)"), 0)
    redis_wait_timeout: float = _setting(_float(above=True, note=" (seconds)"), 1.0)
    fail_exit_code: int | None = _setting(
        replace(_int(0, 255, note=" (an exit status; unset = the table's)"), optional=True), None)
    fail_reasons: tuple[str, ...] = _setting(_strings(), ("idcrawl_redis_unavailable", "idcrawl_redis_state_lost"))
    # the clock (idcrawl.core.clock): an ISO 8601 time as given, or None
    now: object = _setting(
        Spec(_time, "must be an ISO 8601 time such as 2026-01-12T07:00:00Z (or unset for the real clock)",
             optional=True), None)
    # adaptive recrawl of found pages (idcrawl.core.recrawl)
    recrawl_refetch_after: float = _setting(_recrawl_duration(), 90 * 86_400.0)
    # late ids below a tail's last found id, re-probed by resume=due (defaults of late_every, late_max)
    late_every: float = _setting(_recrawl_duration(), 0.0)
    late_max: int = _setting(_int(1), 1000)
    # watch mode (idcrawl.core.watch)
    watch: bool = _setting(_bool(), False)
    watch_speed: float = _setting(_float(above=True, note=" (clock seconds per real second)"), 1.0)
    # a watch wave's coalescing window (idcrawl.core.watch.Coalescing)
    watch_coalesce: float = _setting(_float(note=" (seconds; 0 = a wave takes only what is due)"), 60.0)
    watch_coalesce_share: float = _setting(_float(0.0, 0.5, note=" (of a schedule's duration)"), 0.05)
    watch_coalesce_max: float = _setting(_float(note=" (seconds)"), 3600.0)

    def target_defaults(self) -> dict[str, Any]:
        """The defaults of the per-target keys a job file or ``-a`` leaves out (``parse_targets``)."""
        return {"margin": self.margin, "window": self.window, "missing_statuses": self.missing_statuses,
                "late_every": self.late_every, "late_max": self.late_max}


def setting_name(attribute: str) -> str:
    """``redis_job`` -> ``IDCRAWL_REDIS_JOB``."""
    return f"IDCRAWL_{attribute.upper()}"


_FIELDS: Final = {setting_name(f.name): f for f in fields(IdConfig)}

#: Every setting's spec (type and range), by setting name.
SPECS: Final[dict[str, Spec]] = {name: f.metadata["spec"] for name, f in _FIELDS.items()}

#: Every setting's default, as :class:`IdConfig` holds it (lists are tuples).
DEFAULTS: Final[dict[str, Any]] = {name: f.default for name, f in _FIELDS.items()}


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



def _unset(spec: Spec, value: Any) -> bool:
    """None, or an empty string for a setting that may be unset: the default applies."""
    return value is None or (spec.optional and isinstance(value, str) and not value.strip())


def build_config(get: Callable[[str], Any]) -> IdConfig:
    """The typed config of the settings ``get`` looks up (``settings.get``, ``dict.get``): a setting
    it does not have keeps its default; the first bad value raises :class:`SettingError`."""
    values: dict[str, Any] = {}
    for name, spec in SPECS.items():
        value = get(name)
        if _unset(spec, value):
            continue
        check_setting(name, value)
        values[_FIELDS[name].name] = spec.read(value)
    return IdConfig(**values)


def read_setting(get: Callable[[str], Any], name: str) -> Any:
    """One setting as :class:`IdConfig` would hold it, unchecked beyond what its type needs: for the
    few reads made while the settings are still being assembled (add-ons, profiles)."""
    spec = SPECS[name]
    value = get(name)
    if _unset(spec, value):
        return DEFAULTS[name]
    try:
        return spec.read(value)
    except (_Bad, TypeError, ValueError, OverflowError):
        raise SettingError(name, value, spec.reason) from None
