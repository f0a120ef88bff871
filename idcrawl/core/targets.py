"""Targets: parsing and validation of what to crawl.

Spider arguments arrive as strings (``scrapy crawl -a``, scrapyd's
``schedule.json``, Zyte's ``-a``) and job files arrive as TOML values; both go
through :func:`parse_target` so that every input path gets the same checks and
the same error text.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import string
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from idcrawl.core.lanes import MAX_ID
from idcrawl.core.outcomes import DEFAULT_MISSING_STATUSES, DEFAULT_RULE, OUTCOME_KEYS, OutcomeRule, OutcomeRuleError
from idcrawl.core.recrawl import DEFAULT_POLICY, RECRAWL_KEYS, Policy, parse_policy
from idcrawl.core.recrawl import _duration as _recrawl_duration
from idcrawl.core.safetext import name_problem, safe
from idcrawl.core.scope import SCHEMES, Collection, CrawlProfile, JobScope, ScopeKind, Seed

__all__ = [
    "BOUND_MODES",
    "DEFAULTS",
    "HOLES_MODES",
    "JOB_TARGET_KEYS",
    "MAX_ID",
    "PAGE_TARGET_KEYS",
    "REDIRECT_MODES",
    "RESET_MODES",
    "RESUME_MODES",
    "TARGET_KEYS",
    "Direction",
    "JobFile",
    "PageTarget",
    "Target",
    "TargetError",
    "parse_job",
    "parse_target",
    "parse_targets",
    "read_job",
    "read_job_profile",
    "same_host",
    "template_digits",
    "template_ends",
    "url_template",
]


class TargetError(ValueError):
    """Bad input for a target: names the field and the value.

    ``str(error)`` is the one line shown to the user, for example
    ``target 'sirup': margin='-1': must be an integer >= 0``.
    """

    def __init__(self, field: str, value: Any, reason: str, *, where: str = "") -> None:
        self.field = field
        self.value = value
        self.reason = reason
        self.where = where
        super().__init__(self._line())

    def _line(self) -> str:
        prefix = f"{safe(self.where)}: " if self.where else ""
        if self.value is _MISSING:
            return f"{prefix}{self.field}: {self.reason}"
        return f"{prefix}{self.field}={_shown(self.value)}: {self.reason}"

    def located(self, where: str) -> TargetError:
        """The same error, prefixed with where it was found (job file, target)."""
        inner = f"{where}: {self.where}" if self.where else where
        return TargetError(self.field, self.value, self.reason, where=inner)


def _shown(value: Any) -> str:
    """``repr(value)``, cut in the middle past :data:`_SHOWN` characters (a 5,000-digit id stays one short line)."""
    text = safe(repr(value))  # a password masked before the cut, any control character escaped
    if len(text) <= _SHOWN:
        return text
    return f"{text[:_SHOWN // 2]}...{text[-20:]} ({len(text)} characters)"


_SHOWN = 120


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()


# MAX_ID (idcrawl.core.lanes), the largest id a crawl can store: the state's roaring bitmaps
# (pyroaring ``BitMap64``) hold ids 0..2**64-1. ``start``, ``min``, ``max`` and a ``soft404_probe``
# id above it are refused, and an ascending lane without ``max`` stops there (implicit bound).

#: Widths in a URL's format spec above this are refused (``{id:1000000000d}`` would build a 1 GB URL).
_MAX_WIDTH = 1000


class Direction(StrEnum):
    ASC = "asc"
    DESC = "desc"
    BOTH = "both"


#: Defaults of the per-target keys. The Scrapy settings ``IDCRAWL_MARGIN``,
#: ``IDCRAWL_WINDOW``, ... override them for a whole job (see
#: ``idcrawl.default_settings``); a target's own key overrides both.
DEFAULTS: dict[str, Any] = {
    "direction": "asc",
    "margin": 10,
    "window": 128,
    "rate": 1,
    "attempts": 3,
    "cooldown": 10.0,
    "backoff": 2.0,
    "resume": "auto",
    "holes": "failed",
    "missing_statuses": tuple(sorted(DEFAULT_MISSING_STATUSES)),  # IDCRAWL_MISSING_STATUSES
    # learned soft 404s: a 2xx page at least this similar (Jaccard of 3-word
    # shingles, digits normalised) to the soft404_probe page is missing. High on
    # purpose: a false positive skips a real page, a miss only costs an item.
    "soft404_similarity": 0.9,
    # an id page redirected to another host: "host" = not followed (outcome missing), "any" = followed
    "follow_redirects": "host",
}
#: The values of ``follow_redirects``.
REDIRECT_MODES = ("host", "any")

#: Every key a target accepts, in spider arguments and in job files.
TARGET_KEYS = frozenset(
    {"name", "url", "start", "min", "max", "soft404_probe", *DEFAULTS.keys(), *OUTCOME_KEYS, *RECRAWL_KEYS}
)
#: The keys of crawl scope (seed 003) a target accepts in a job file only: they refer to its ``[[crawl_profiles]]``.
SCOPE_TARGET_KEYS = frozenset({"crawl_profiles", "enabled"})
#: Every key a ``[[targets]]`` table of a job file accepts.
JOB_TARGET_KEYS = TARGET_KEYS | SCOPE_TARGET_KEYS
#: The keys of a page target (a ``url`` without ``{id}``): no lane keys.
PAGE_TARGET_KEYS = frozenset({"name", "url"}) | SCOPE_TARGET_KEYS


@dataclass(frozen=True, slots=True)
class Target:
    """One URL template and the rules for walking its ids.

    ``min`` and ``max`` are inclusive. ``rate_asc``/``rate_desc`` are the
    interleaving weights of the two possible lanes. ``rule`` tells found,
    missing and failed responses apart (the ``missing_statuses`` and soft-404 keys).
    """

    name: str
    url: str
    start: int
    direction: Direction
    margin: int
    window: int
    rate_asc: int = 1
    rate_desc: int = 1
    min: int | None = None
    max: int | None = None
    attempts: int = 3
    cooldown: float = 10.0
    backoff: float = 2.0
    resume: str = "auto"
    holes: str = "failed"
    rule: OutcomeRule = DEFAULT_RULE
    #: URL of a page known not to exist (``soft404_probe``: an id or a URL); None: nothing to learn
    soft404_probe: str | None = None
    soft404_similarity: float = 0.9
    #: the crawl profiles (names, job file only) whose scope the outlinks of its found pages are followed in
    crawl_profiles: tuple[str, ...] = ()
    #: False: deactivated (seed 003: its URLs are postponed, not crawled)
    enabled: bool = True
    #: the adaptive recrawl rule's numbers (the ``recrawl_*`` keys; :mod:`idcrawl.core.recrawl`)
    policy: Policy = DEFAULT_POLICY
    #: ``host``: a redirect of an id page to another host is not followed; ``any``: every redirect is
    follow_redirects: str = "host"

    def url_for(self, id_: int) -> str:
        return self.url.format(id=id_)

    @property
    def host(self) -> str:
        return _template_host(self.url, max(self.start, 0))

    def may_redirect(self, from_url: str, to_url: str) -> bool:
        """May a redirect of one of its id pages from ``from_url`` to ``to_url`` be followed?"""
        return self.follow_redirects == "any" or same_host(from_url, to_url)

    def id_of(self, url: str) -> int | None:
        """The id in ``min..max`` whose URL under this template is exactly ``url``, or None."""
        id_ = id_in_template(self.url, url)
        if id_ is None or (self.min is not None and id_ < self.min) or (self.max is not None and id_ > self.max):
            return None
        return id_


_LAST_NUMBER = re.compile(r"[0-9]+(?=[^0-9]*$)")


def url_template(url: str) -> tuple[str, int] | None:
    """A template and an id for one page's ``url``: its last run of ASCII digits becomes ``{id}`` (braces
    around it escaped), or None when the URL has no digits (``scrapy parse``/``check`` of an id spider
    given a page without ``-a url=``)."""
    match = _LAST_NUMBER.search(url)
    if match is None or len(match.group()) > 20 or int(match.group()) > MAX_ID:
        return None
    before, after = (text.replace("{", "{{").replace("}", "}}") for text in (url[:match.start()], url[match.end():]))
    return before + "{id}" + after, int(match.group())


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_host(url: str) -> tuple[str, int | None]:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    host = host.removeprefix("www.")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None or port == _DEFAULT_PORTS.get(parts.scheme.lower()):
        port = None  # a scheme's own port: http <-> https on one host is the same host
    return host, port


def same_host(a: str, b: str) -> bool:
    """Do two URLs point at the same host: equal host names once a leading ``www.`` is dropped (``www.x`` and
    ``x`` are one site), and equal ports where a port other than the scheme's own is given."""
    return _origin_host(a) == _origin_host(b)


def id_in_template(template: str, url: str) -> int | None:
    """The id (<= MAX_ID) whose URL under ``template`` is exactly ``url``, or None; bounds aside."""
    middle = template_digits(url, *template_ends(template))
    if middle is None or len(middle) > 20:
        return None
    id_ = int(middle)
    if id_ > MAX_ID:
        return None
    return id_ if template.format(id=id_) == url else None


@functools.lru_cache(maxsize=4096)
def _template_host(template: str, id_: int) -> str:
    """The host name of a template's URL for ``id_`` (asked once per lane request: parsed once)."""
    return urlsplit(template.format(id=id_)).hostname or ""


def template_digits(url: str, before: str, after: str) -> str | None:
    """The ASCII digits ``url`` has between a template's literal text ``before`` and ``after``
    (:func:`template_ends`), or None when it is not ``before + digits + after``."""
    if len(url) <= len(before) + len(after) or not (url.startswith(before) and url.endswith(after)):
        return None
    digits = url[len(before):len(url) - len(after)]
    return digits if digits.isascii() and digits.isdigit() else None


@functools.lru_cache(maxsize=4096)
def template_ends(template: str) -> tuple[str, str]:
    """The literal text before and after a template's one ``{id}`` field, as ``str.format``
    renders it (``{{`` and ``}}`` are one brace)."""
    before: list[str] = []
    after: list[str] = []
    seen_field = False
    for literal, field_name, _, _ in string.Formatter().parse(template):
        (after if seen_field else before).append(literal)
        seen_field = seen_field or field_name is not None
    return "".join(before), "".join(after)


@dataclass(frozen=True, slots=True)
class PageTarget:
    """A start page (the seed's SEED without ids: a front page): fetched at hop 0, its outlinks
    followed in the scope of its crawl profiles (:mod:`idcrawl.core.scope`). Job files only."""

    name: str
    url: str
    crawl_profiles: tuple[str, ...] = ()
    enabled: bool = True

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""


# -- value parsers ------------------------------------------------------------


def _id(field: str, value: Any) -> int:
    """An id: an integer in 0..MAX_ID."""
    result = _int(field, value, minimum=0)
    if result > MAX_ID:
        raise TargetError(field, value, f"is above the largest id idcrawl can store (2**64-1 = {MAX_ID})")
    return result


def _int(field: str, value: Any, *, minimum: int | None = None) -> int:
    if isinstance(value, bool):
        raise TargetError(field, value, "must be an integer")
    if isinstance(value, int):
        result = value
    elif isinstance(value, str):
        try:
            result = int(value.strip().replace("_", ""), 10)
        except ValueError:
            raise TargetError(field, value, "must be an integer") from None
    else:
        raise TargetError(field, value, "must be an integer")
    if minimum is not None and result < minimum:
        raise TargetError(field, value, f"must be an integer >= {minimum}")
    return result


def _float(field: str, value: Any, *, minimum: float = 0.0) -> float:
    if isinstance(value, bool):
        raise TargetError(field, value, "must be a number")
    try:
        result = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise TargetError(field, value, "must be a number") from None
    if not result >= minimum or result == float("inf"):  # also rejects NaN
        raise TargetError(field, value, f"must be a finite number >= {minimum:g}")
    return result


def _choice(field: str, value: Any, choices: tuple[str, ...]) -> str:
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text not in choices:
        shown = [choice for choice in choices if choice not in DEPRECATED_WORDS]
        raise TargetError(field, value, f"must be one of {', '.join(shown)}")
    return text


def _template(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TargetError("url", value, "must be a URL template containing {id}")
    url = value.strip()
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(url) if f is not None]
    except ValueError as exc:
        raise TargetError("url", value, f"is not a valid template ({exc})") from None
    if fields != ["id"]:
        found = ", ".join("{" + f + "}" for f in fields) or "none"
        raise TargetError("url", value, f"must contain exactly one {{id}} field (found: {found})")
    specs = [spec for _, f, spec, _ in string.Formatter().parse(url) if f is not None and spec]
    if any(int(width) > _MAX_WIDTH for spec in specs for width in re.findall(r"[0-9]+", spec)):
        raise TargetError("url", value, f"has a format spec wider than {_MAX_WIDTH} characters")
    try:
        sample = url.format(id=12345)
        for id_ in (0, MAX_ID):  # every id a lane may reach must render ({id:c} cannot)
            url.format(id=id_)
    except (ValueError, KeyError, IndexError, OverflowError) as exc:
        raise TargetError("url", value, f"has a bad format spec for an integer id ({exc})") from None
    _check_url("url", value, sample)
    return url


def _check_url(field: str, value: Any, url: str) -> None:
    """``url`` (``value`` as given) must be an http(s) URL with a host that can be requested."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of 0..65535 or not a number
    except ValueError as exc:
        raise TargetError(field, value, f"is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise TargetError(field, value, "must be an http or https URL")
    if not parts.hostname:
        raise TargetError(field, value, "has no host")
    if any(ch.isspace() or not ch.isprintable() for ch in parts.netloc):
        raise TargetError(field, value, "has spaces or control characters in its host")
    host = parts.hostname.rstrip(".")
    if not host.startswith("[") and (len(host) > 253 or any(not 0 < len(label) <= 63 for label in host.split("."))):
        raise TargetError(field, value, f"has an invalid host name {parts.hostname!r} (labels of 1 to 63 characters)")


def _is_page_url(value: Any) -> bool:
    """A job file's ``url`` without any ``{...}`` field: a page target's start page."""
    return isinstance(value, str) and bool(value.strip()) and "{" not in value and "}" not in value


def _bool(field: str, value: Any) -> bool:
    """A switch: a TOML boolean, or the strings true/false (yes/no, 1/0)."""
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise TargetError(field, value, "must be true or false")


def _name(field: str, value: Any) -> str:
    """The name of a target, crawl profile or collection: it keys stats (``.../<name>/...``) and is
    printed in log lines and tables, so it is printable, one line and bounded (:func:`name_problem`)."""
    problem = _name_problem(value)
    if problem is not None:
        raise TargetError(field, value, problem)
    return str(value).strip()


def _name_problem(value: Any) -> str | None:
    """Why ``value`` is not a name (what follows ``name=...:`` in the error line), or None."""
    if not isinstance(value, str) or not value.strip() or "/" in value:
        return "must be a non-empty string without '/'"
    problem = name_problem(value.strip())
    return problem


def _names(field: str, value: Any) -> tuple[str, ...]:
    """A list of names (``crawl_profiles = ["a", "b"]``; a string "a,b" from text), each once."""
    if isinstance(value, str):
        items: list[Any] = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise TargetError(field, value, "must be a list of names")
    names: list[str] = []
    for item in items:
        problem = _name_problem(item)
        if problem is not None:
            why = "(a non-empty string without '/')" if problem.startswith("must") else f"({problem})"
            raise TargetError(field, value, f"{_shown(item)} is not a name {why}")
        if item.strip() in names:
            raise TargetError(field, value, f"names {item.strip()!r} twice")
        names.append(item.strip())
    return tuple(names)


def _rate(value: Any, direction: Direction) -> tuple[int, int]:
    text = str(value).strip() if not isinstance(value, bool) else ""
    parts = text.split(":")
    if len(parts) == 2 and direction is not Direction.BOTH:
        raise TargetError("rate", value, "ASC:DESC needs direction='both'")
    if len(parts) not in (1, 2):
        raise TargetError("rate", value, "must be a positive integer W or ASC:DESC")
    try:
        weights = [_int("rate", p, minimum=1) for p in parts]
    except TargetError:
        raise TargetError("rate", value, "must be a positive integer W or ASC:DESC") from None
    return (weights[0], weights[-1])


def _statuses(value: Any) -> frozenset[int]:
    """``missing_statuses``: "404,410", a list of integers or strings, or one integer."""
    if isinstance(value, str):
        parts: list[Any] = [p for p in value.replace(" ", ",").split(",") if p]
    elif isinstance(value, int) and not isinstance(value, bool):
        parts = [value]
    elif isinstance(value, list | tuple | set | frozenset):
        parts = list(value)
    else:
        raise TargetError("missing_statuses", value, "must be a list of HTTP statuses such as 404,410")
    statuses: set[int] = set()
    for part in parts:
        try:
            status = _int("missing_statuses", part)
        except TargetError:
            raise TargetError("missing_statuses", value, f"{part!r} is not an integer HTTP status") from None
        if not 100 <= status <= 599:
            raise TargetError("missing_statuses", value, f"{part!r} is not an HTTP status (100..599)")
        statuses.add(status)
    return frozenset(statuses)


def _probe(value: Any, url: str) -> str | None:
    """``soft404_probe``: an id known not to exist (rendered with the template) or a full URL; empty = none."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    reason = "must be an id known not to exist (an integer >= 0) or an http(s) URL"
    if isinstance(value, bool):
        raise TargetError("soft404_probe", value, reason)
    if isinstance(value, int) or (isinstance(value, str) and value.strip().replace("_", "").isdecimal()):
        id_ = _int("soft404_probe", value)
        if id_ < 0:
            raise TargetError("soft404_probe", value, reason)
        return url.format(id=_id("soft404_probe", id_))
    if isinstance(value, str):
        text = value.strip()
        parts = urlsplit(text)
        if parts.scheme in ("http", "https") and parts.hostname:
            return text
    raise TargetError("soft404_probe", value, reason)


def _similarity(value: Any) -> float:
    result = _float("soft404_similarity", value)
    if not 0.0 < result <= 1.0:
        raise TargetError("soft404_similarity", value, "must be a number > 0 and <= 1 (a Jaccard similarity)")
    return result


def _outcome_rule(merged: Mapping[str, Any]) -> OutcomeRule:
    """The outcome rule from the ``missing_statuses`` and soft-404 keys (empty = not set)."""
    texts: dict[str, str | None] = {}
    for key in ("soft404_regex", "soft404_css", "soft404_xpath", "found_css", "found_xpath"):
        value = merged.get(key)
        if value is None:
            texts[key] = None
        elif not isinstance(value, str):
            raise TargetError(key, value, "must be a string")
        else:
            # a regex is taken as written; selectors may carry stray spaces
            text = value if key == "soft404_regex" else value.strip()
            texts[key] = text or None
    raw_limit = merged.get("soft404_max_bytes")
    limit = None if raw_limit in (None, "") else _int("soft404_max_bytes", raw_limit, minimum=0)
    try:
        return OutcomeRule(
            missing_statuses=_statuses(merged["missing_statuses"]),
            soft404_regex=texts["soft404_regex"],
            soft404_css=texts["soft404_css"],
            soft404_xpath=texts["soft404_xpath"],
            found_css=texts["found_css"],
            found_xpath=texts["found_xpath"],
            soft404_max_bytes=limit,
        )
    except OutcomeRuleError as exc:
        raise TargetError(exc.field, merged.get(exc.field, exc.value), exc.reason) from None


# -- targets ------------------------------------------------------------------


def parse_target(raw: Mapping[str, Any], defaults: Mapping[str, Any] | None = None, *, job: bool = False) -> Target:
    """Validate one target description (strings or TOML values).

    ``defaults`` fills keys the description leaves out (job-wide settings);
    unknown keys are errors, since a typo such as ``margn`` would otherwise
    silently crawl with the default. ``job``: a job file's ``[[targets]]`` table, which
    may also have the scope keys (``crawl_profiles``, ``enabled``: :data:`JOB_TARGET_KEYS`).
    """
    _refuse_unknown(raw, JOB_TARGET_KEYS if job else TARGET_KEYS)
    merged: dict[str, Any] = {**DEFAULTS, **(defaults or {}), **raw}
    if "url" not in raw:
        raise TargetError("url", _MISSING, "is required (a URL template containing {id})")
    url = _template(raw["url"])

    dvalue = merged["direction"]
    try:
        direction = Direction(str(dvalue).strip().lower())
    except ValueError:
        raise TargetError("direction", dvalue, "must be one of asc, desc, both") from None

    lo = _id("min", merged["min"]) if merged.get("min") not in (None, "") else None
    hi = _id("max", merged["max"]) if merged.get("max") not in (None, "") else None
    if lo is not None and hi is not None and lo > hi:
        raise TargetError("min", merged["min"], f"must be <= max ({hi})")

    if merged.get("start") not in (None, ""):
        start = _id("start", merged["start"])
    elif direction is Direction.ASC and lo is not None:
        start = lo
    elif direction is Direction.DESC and hi is not None:
        start = hi
    else:
        raise TargetError("start", _MISSING, "is required (or give min for asc, max for desc)")
    if lo is not None and start < lo:
        raise TargetError("start", merged["start"], f"is below min ({lo})")
    if hi is not None and start > hi:
        raise TargetError("start", merged["start"], f"is above max ({hi})")

    margin = _int("margin", merged["margin"], minimum=0)
    if margin == 0:
        if direction in (Direction.ASC, Direction.BOTH) and hi is None:
            raise TargetError("margin", merged["margin"], "0 (no cut) needs max: the asc lane would never end")
        if direction in (Direction.DESC, Direction.BOTH) and lo is None:
            raise TargetError("margin", merged["margin"], "0 (no cut) needs min: the desc lane would never end")
    window = _int("window", merged["window"], minimum=1)
    rate_asc, rate_desc = _rate(merged["rate"], direction)
    attempts = _int("attempts", merged["attempts"], minimum=1)
    cooldown = _float("cooldown", merged["cooldown"])
    backoff = _float("backoff", merged["backoff"], minimum=1.0)
    resume = _choice("resume", merged["resume"], RESUME_MODES)
    holes = _choice("holes", merged["holes"], HOLES_MODES)
    rule = _outcome_rule(merged)
    probe = _probe(merged.get("soft404_probe"), url)
    policy = parse_policy({key: value for key, value in merged.items() if value not in (None, "")})
    follow_redirects = _choice("follow_redirects", merged["follow_redirects"], REDIRECT_MODES)
    raw_similarity = merged["soft404_similarity"]
    similarity = _similarity(DEFAULTS["soft404_similarity"] if raw_similarity in (None, "") else raw_similarity)

    name_value = merged.get("name")
    if name_value in (None, ""):
        name = urlsplit(url.format(id=start)).hostname or "target"
    else:
        name = _name("name", name_value)

    return Target(
        name=name,
        url=url,
        start=start,
        direction=direction,
        margin=margin,
        window=window,
        rate_asc=rate_asc,
        rate_desc=rate_desc,
        min=lo,
        max=hi,
        attempts=attempts,
        cooldown=cooldown,
        backoff=backoff,
        resume=resume,
        holes=holes,
        rule=rule,
        soft404_probe=probe,
        soft404_similarity=similarity,
        crawl_profiles=_names("crawl_profiles", raw["crawl_profiles"]) if "crawl_profiles" in raw else (),
        enabled=_bool("enabled", raw["enabled"]) if "enabled" in raw else True,
        policy=policy,
        follow_redirects=follow_redirects,
    )


def parse_page_target(raw: Mapping[str, Any]) -> PageTarget:
    """Validate one page target of a job file (a ``url`` without ``{id}``): ``name``, ``url``,
    ``crawl_profiles``, ``enabled``; a lane key (``start``, ``margin``, ...) is refused."""
    lane_keys = sorted(set(raw) - PAGE_TARGET_KEYS)
    if lane_keys:
        key = lane_keys[0]
        reason = ("a page target (a url without {id}) has no ids: lane keys do not apply "
                  f"(a page target's keys: {', '.join(sorted(PAGE_TARGET_KEYS))})")
        if key not in JOB_TARGET_KEYS:
            reason = f"unknown key (known: {', '.join(sorted(PAGE_TARGET_KEYS))} for a page target)"
        raise TargetError(key, raw[key], reason)
    url = raw["url"].strip()
    _check_url("url", raw["url"], url)
    name_value = raw.get("name")
    name = (urlsplit(url).hostname or "page") if name_value in (None, "") else _name("name", name_value)
    return PageTarget(
        name=name,
        url=url,
        crawl_profiles=_names("crawl_profiles", raw["crawl_profiles"]) if "crawl_profiles" in raw else (),
        enabled=_bool("enabled", raw["enabled"]) if "enabled" in raw else True,
    )


RUN_OPTION_KEYS = ("resume", "holes")
#: The values of a target's ``resume`` key (seed 000's resume plan; ``auto``, the default: ``bound`` when
#: there is stored state, fresh otherwise; ``reset``: start over, forgetting the stored outcomes; ``none``:
#: the old default's word, a deprecated synonym of ``reset``; ``due``: only the tails and pages due again,
#: :mod:`idcrawl.core.recrawl`) and of ``holes``.
RESUME_MODES = ("auto", "reset", "bound", "holes", "all", "due", "none")
#: Words still accepted but not offered in error lines.
DEPRECATED_WORDS = frozenset({"none"})
#: The ``resume`` words that start a target over (``none``: deprecated, warned about where the crawl starts).
RESET_MODES = ("reset", "none")
#: The ``resume`` words that continue each lane as ``bound`` does (``auto``: when there is stored state).
BOUND_MODES = ("auto", "bound")
HOLES_MODES = ("failed", "all")


def parse_run_options(raw: Mapping[str, Any]) -> dict[str, str]:
    """Validate the keys that may also override a whole job (``-a resume=`` with ``-a job=``)."""
    choices = {"resume": RESUME_MODES, "holes": HOLES_MODES}
    return {key: _choice(key, raw[key], choices[key]) for key in RUN_OPTION_KEYS if key in raw}


def parse_targets(
    raws: Iterable[Mapping[str, Any]], defaults: Mapping[str, Any] | None = None, *, where: str = "",
    job: bool = False, indexes: Sequence[int] | None = None,
) -> list[Target]:
    """Parse many targets; names must be unique (they key stats and state).

    ``job``: tables of a job file (:func:`parse_target`); ``indexes``: each raw's position among the
    file's ``[[targets]]`` (errors name it), when some (page targets) were taken out.
    """
    targets: list[Target] = []
    seen: dict[str, int] = {}
    for position, raw in enumerate(raws):
        index = indexes[position] if indexes is not None else position
        label = f"{where}targets[{index}]"
        if not isinstance(raw, Mapping):
            raise TargetError(label, raw, "must be a table of target keys")
        try:
            target = parse_target(raw, defaults, job=job)
        except TargetError as exc:
            raise exc.located(label) from None
        if target.name in seen:
            raise TargetError(
                "name", target.name, f"is used by targets[{seen[target.name]}] too; names must be unique",
                where=label,
            )
        seen[target.name] = index
        targets.append(target)
    if not targets:
        raise TargetError(f"{where}targets", _MISSING, "no target given")
    return targets


def _read_job_file(path: str | Path, *, max_targets: int = 0, where: str = "") -> dict[str, Any]:
    """The TOML of a job file, read once; with ``max_targets``, a job with more ``[[targets]]`` tables
    is refused from the bytes, before they are parsed (a 50 MB file takes a minute to parse)."""
    try:
        mode = os.stat(path).st_mode
    except ValueError:  # a NUL in the path (scrapyd's schedule.json can pass one)
        raise TargetError("job", str(path), "is not a valid file path") from None
    except OSError:
        mode = stat.S_IFREG  # open() below says what is wrong
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):  # a FIFO would block the open, /dev/zero never ends
        raise TargetError("job", str(path), "is not a regular file")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise TargetError("job", str(path), "file not found") from None
    except IsADirectoryError:
        raise TargetError("job", str(path), "is a folder, not a TOML file") from None
    except OSError as exc:
        raise TargetError("job", str(path), f"cannot be read ({exc.strerror})") from None
    if max_targets:
        count = sum(1 for _ in _TABLE.finditer(data))
        if count > max_targets:
            raise TargetError("targets", _MISSING, _too_many(count, max_targets), where=where)
    try:
        return tomllib.loads(data.decode())
    except tomllib.TOMLDecodeError as exc:
        raise TargetError("job", str(path), f"is not valid TOML ({exc})") from None
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise TargetError("job", str(path), f"is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} on line {line})"
                          ) from None


def _job_profile(data: Mapping[str, Any], where: str) -> str | None:
    profile = data.get("profile")
    if profile is not None and not (isinstance(profile, str) and profile.strip()):
        raise TargetError("profile", profile, "must be the name of a settings profile (a non-empty string)",
                          where=where)
    return profile


def read_job_profile(path: str | Path) -> str | None:
    """The ``profile = "NAME"`` key at the top of a job file, or None (a :class:`JobFile` holds it too)."""
    return _job_profile(_read_job_file(path), f"job file {str(path)!r}")


@dataclass(frozen=True)
class JobFile:
    """A job file, read once: its targets, the settings profile its ``profile`` key names (or None),
    and its crawl scope (seed 003): page targets, ``[[collections]]`` and ``[[crawl_profiles]]`` by name."""

    path: str
    targets: list[Target]
    profile: str | None
    page_targets: list[PageTarget] = field(default_factory=list)
    collections: dict[str, Collection] = field(default_factory=dict)
    crawl_profiles: dict[str, CrawlProfile] = field(default_factory=dict)

    @property
    def has_scope(self) -> bool:
        """Does the job follow links (a page target, or a target with crawl profiles)? ``bool(scope())``, cheaply."""
        return bool(self.page_targets) or any(t.crawl_profiles for t in self.targets)

    def scope(self) -> JobScope:
        """The job's crawl scope (:class:`idcrawl.core.scope.JobScope`): every target as a seed (a page
        target's page; an id target's first id page), its crawl profiles and collections."""
        seeds = {t.name: Seed(t.name, t.url_for(t.start), t.crawl_profiles, t.enabled) for t in self.targets}
        seeds.update((p.name, Seed(p.name, p.url, p.crawl_profiles, p.enabled)) for p in self.page_targets)
        return JobScope(seeds, dict(self.crawl_profiles), dict(self.collections),
                        tuple(p.name for p in self.page_targets))


#: The top-level keys of a job file.
JOB_KEYS = ("collections", "crawl_profiles", "defaults", "profile", "targets")
#: The keys of a ``[[collections]]`` table.
COLLECTION_KEYS = frozenset({"name", "yield_probability", "enabled"})
#: The keys of a ``[[crawl_profiles]]`` table.
CRAWL_PROFILE_KEYS = frozenset({"name", "collection", "max_hops", "max_offsite_hops", "scope", "url_prefixes",
                                "include", "exclude", "schemes", "yield_probability", "enabled", "revisit"})


def read_job(path: str | Path, defaults: Mapping[str, Any] | None = None, *, max_targets: int = 0) -> JobFile:
    """Read a TOML job file: ``[[targets]]`` tables with the spider-argument keys.

    A top-level ``[defaults]`` table sets keys for every target of the file;
    a top-level ``profile = "NAME"`` picks a settings profile for the job
    (the Scrapy shell applies it: ``idcrawl.settings_profiles.JobProfile``).
    Crawl scope (seed 003, :mod:`idcrawl.core.scope`): ``[[collections]]`` and ``[[crawl_profiles]]``
    tables, a target's ``crawl_profiles = [...]`` and ``enabled``, and page targets (a ``url``
    without ``{id}``). With ``max_targets``, a file with more targets is refused before it is parsed.
    """
    where = f"job file {str(path)!r}"
    data = _read_job_file(path, max_targets=max_targets, where=where)
    unknown = sorted(set(data) - set(JOB_KEYS))
    if unknown:
        raise TargetError(unknown[0], data[unknown[0]], f"unknown top-level key (known: {', '.join(JOB_KEYS)})",
                          where=where)
    profile = _job_profile(data, where)
    file_defaults = data.get("defaults", {})
    if not isinstance(file_defaults, dict):
        raise TargetError("defaults", file_defaults, "must be a table", where=where)
    bad = sorted(set(file_defaults) - (TARGET_KEYS - {"name", "url"}))
    if bad:
        raise TargetError(f"defaults.{bad[0]}", file_defaults[bad[0]], "unknown key", where=where)
    raws = data.get("targets")
    if not isinstance(raws, list):
        raise TargetError("targets", raws if raws is not None else _MISSING,
                          "must be an array of [[targets]] tables", where=where)
    if max_targets and len(raws) > max_targets:
        raise TargetError("targets", _MISSING, _too_many(len(raws), max_targets), where=where)
    collections = _collections(data.get("collections", []), where)
    crawl_profiles = _crawl_profiles(data.get("crawl_profiles", []), collections, where)
    page_indexes = [i for i, raw in enumerate(raws) if isinstance(raw, Mapping) and _is_page_url(raw.get("url"))]
    page_targets: list[PageTarget] = []
    for index in page_indexes:
        try:
            page_targets.append(parse_page_target(raws[index]))
        except TargetError as exc:
            raise exc.located(f"{where}: targets[{index}]") from None
    id_raws = [raw for i, raw in enumerate(raws) if i not in set(page_indexes)]
    id_indexes = [i for i in range(len(raws)) if i not in set(page_indexes)]
    targets = (
        parse_targets(id_raws, {**(defaults or {}), **file_defaults}, where=f"{where}: ", job=True,
                      indexes=id_indexes)
        if id_raws else []
    )
    if not targets and not page_targets:
        raise TargetError(f"{where}: targets", _MISSING, "no target given")
    seen = {t.name: i for t, i in zip(targets, id_indexes, strict=True)}
    for page, index in zip(page_targets, page_indexes, strict=True):
        if page.name in seen:
            raise TargetError("name", page.name,
                              f"is used by targets[{seen[page.name]}] too; names must be unique",
                              where=f"{where}: targets[{index}]")
        seen[page.name] = index
    referring: list[tuple[int, tuple[str, ...]]] = [
        *((i, t.crawl_profiles) for i, t in zip(id_indexes, targets, strict=True)),
        *((i, p.crawl_profiles) for i, p in zip(page_indexes, page_targets, strict=True)),
    ]
    for index, names in sorted(referring):
        for name in names:
            if name not in crawl_profiles:
                known = ", ".join(crawl_profiles) or "none: the job file has no [[crawl_profiles]]"
                raise TargetError("crawl_profiles", list(names),
                                  f"unknown crawl profile {name!r} (known: {known})",
                                  where=f"{where}: targets[{index}]")
    return JobFile(str(path), targets, profile, page_targets, collections, crawl_profiles)


def _refuse_unknown(raw: Mapping[str, Any], known: Iterable[str]) -> None:
    """One line for the first unknown key of a table (a typo such as ``margn`` would otherwise
    silently take the default), listing the known ones."""
    known = frozenset(known)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise TargetError(unknown[0], raw[unknown[0]], f"unknown key (known: {', '.join(sorted(known))})")


def _tables(value: Any, key: str, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise TargetError(key, value, f"must be an array of [[{key}]] tables", where=where)
    return value


def _probability(field: str, value: Any) -> float:
    """A yield probability: a number in [0, 1)."""
    result = _float(field, value)
    if not result < 1.0:
        raise TargetError(field, value, "must be a number >= 0 and < 1 (the chance to give way)")
    return result


def _collections(value: Any, where: str) -> dict[str, Collection]:
    collections: dict[str, Collection] = {}
    for index, raw in enumerate(_tables(value, "collections", where)):
        label = f"{where}: collections[{index}]"
        try:
            _refuse_unknown(raw, COLLECTION_KEYS)
            if "name" not in raw:
                raise TargetError("name", _MISSING, "is required (the collection's name)")
            name = _name("name", raw["name"])
            if name in collections:
                raise TargetError("name", name, "is used by another collection too; names must be unique")
            collections[name] = Collection(
                name=name,
                yield_probability=_probability("yield_probability", raw.get("yield_probability", 0.0)),
                enabled=_bool("enabled", raw.get("enabled", True)),
            )
        except TargetError as exc:
            raise exc.located(label) from None
    return collections


def _regexes(field: str, value: Any) -> tuple[re.Pattern[str], ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise TargetError(field, value, "must be a list of regular expressions")
    patterns = []
    for item in value:
        if not isinstance(item, str) or not item:
            raise TargetError(field, value, f"{item!r} is not a regular expression (a non-empty string)")
        try:
            patterns.append(re.compile(item))
        except re.error as exc:
            raise TargetError(field, value, f"{item!r} is not a valid regular expression ({exc})") from None
    return tuple(patterns)


def _crawl_profile(raw: Mapping[str, Any], collections: Mapping[str, Collection]) -> CrawlProfile:
    _refuse_unknown(raw, CRAWL_PROFILE_KEYS)
    if "name" not in raw:
        raise TargetError("name", _MISSING, "is required (the crawl profile's name)")
    name = _name("name", raw["name"])
    if "max_hops" not in raw:
        raise TargetError("max_hops", _MISSING, "is required (0: the target's own pages only)")
    max_hops = _int("max_hops", raw["max_hops"], minimum=0)
    offsite = raw.get("max_offsite_hops")
    max_offsite = None if offsite is None else _int("max_offsite_hops", offsite, minimum=0)
    collection = raw.get("collection")
    if collection is not None:
        collection = _name("collection", collection)
        if collection not in collections:
            known = ", ".join(collections) or "none: the job file has no [[collections]]"
            raise TargetError("collection", collection, f"unknown collection (known: {known})")
    kind_value = raw.get("scope", ScopeKind.HOST.value)
    kind = ScopeKind(_choice("scope", kind_value, tuple(k.value for k in ScopeKind)))
    prefixes: tuple[str, ...] = ()
    if "url_prefixes" in raw:
        value = raw["url_prefixes"]
        if kind is not ScopeKind.PREFIX:
            raise TargetError("url_prefixes", value, f"applies to scope = \"prefix\" only (this one: {kind.value!r})")
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise TargetError("url_prefixes", value, "must be a non-empty list of http(s) URLs")
        for item in items:
            if not isinstance(item, str):
                raise TargetError("url_prefixes", value, f"{item!r} is not an http(s) URL")
            _check_url("url_prefixes", value, item.strip())
        prefixes = tuple(item.strip() for item in items)
    schemes = SCHEMES
    if "schemes" in raw:
        value = raw["schemes"]
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or any(
            not isinstance(item, str) or item.strip().lower() not in SCHEMES for item in items
        ):
            raise TargetError("schemes", value, f"must be a non-empty list of {', '.join(SCHEMES)}")
        schemes = tuple(dict.fromkeys(item.strip().lower() for item in items))
    return CrawlProfile(
        name=name,
        max_hops=max_hops,
        collection=collection,
        max_offsite_hops=max_offsite,
        kind=kind,
        url_prefixes=prefixes,
        include=_regexes("include", raw.get("include", [])),
        exclude=_regexes("exclude", raw.get("exclude", [])),
        schemes=schemes,
        yield_probability=_probability("yield_probability", raw.get("yield_probability", 0.0)),
        enabled=_bool("enabled", raw.get("enabled", True)),
        revisit=_recrawl_duration("revisit", raw["revisit"]) if "revisit" in raw else None,
    )


def _crawl_profiles(value: Any, collections: Mapping[str, Collection], where: str) -> dict[str, CrawlProfile]:
    profiles: dict[str, CrawlProfile] = {}
    for index, raw in enumerate(_tables(value, "crawl_profiles", where)):
        try:
            crawl_profile = _crawl_profile(raw, collections)
            if crawl_profile.name in profiles:
                raise TargetError("name", crawl_profile.name,
                                  "is used by another crawl profile too; names must be unique")
        except TargetError as exc:
            raise exc.located(f"{where}: crawl_profiles[{index}]") from None
        profiles[crawl_profile.name] = crawl_profile
    return profiles


def parse_job(
    path: str | Path, defaults: Mapping[str, Any] | None = None, *, max_targets: int = 0
) -> list[Target]:
    """The targets of a job file (:func:`read_job`)."""
    return read_job(path, defaults, max_targets=max_targets).targets


#: A ``[[targets]]`` table header at the start of a line (counted before the file is parsed).
_TABLE = re.compile(rb"^[ \t]*\[\[[ \t]*targets[ \t]*\]\]", re.MULTILINE)


def _too_many(count: int, limit: int) -> str:
    return (f"has {count} targets, more than IDCRAWL_MAX_TARGETS={limit} "
            "(split the job, or raise the setting: about 0.2 s and 5 MB per 1,000 targets to start)")
