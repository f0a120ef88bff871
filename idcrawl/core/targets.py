"""Targets: what to crawl, one URL template and the rules for walking its ids (:class:`Target`), or a
start page (:class:`PageTarget`), parsed from spider arguments or a job file's tables with the same checks
and the same error text (job files themselves: :mod:`idcrawl.core.jobfile`)."""

from __future__ import annotations

import builtins
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from idcrawl.core.inputs import (
    MISSING,
    TargetError,
    as_bool,
    as_choice,
    as_float,
    as_id,
    as_int,
    as_name,
    as_names,
    check_url,
    refuse_unknown,
)
from idcrawl.core.lanes import MAX_ID
from idcrawl.core.outcomes import DEFAULT_MISSING_STATUSES, DEFAULT_RULE, OUTCOME_KEYS, OutcomeRule, OutcomeRuleError
from idcrawl.core.recrawl import DEFAULT_POLICY, RECRAWL_KEYS, Policy, parse_policy
from idcrawl.core.sitemaps import SitemapSpec, parse_sitemaps
from idcrawl.core.templates import id_in_template, same_host, template_host

__all__ = [
    "BOUND_MODES",
    "DEFAULTS",
    "DEPRECATED_WORDS",
    "HOLES_MODES",
    "JOB_TARGET_KEYS",
    "PAGE_TARGET_KEYS",
    "REDIRECT_MODES",
    "RESET_MODES",
    "RESUME_MODES",
    "RUN_OPTION_KEYS",
    "SCOPE_TARGET_KEYS",
    "TARGET_FIELDS",
    "TARGET_KEYS",
    "Direction",
    "PageTarget",
    "Target",
    "TargetOptions",
    "parse_page_target",
    "parse_run_options",
    "parse_target",
    "parse_targets",
]


# MAX_ID (idcrawl.core.lanes), the largest id a crawl can store: the state's roaring bitmaps
# (pyroaring ``BitMap64``) hold ids 0..2**64-1. ``start``, ``min``, ``max`` and a ``soft404_probe``
# id above it are refused, and an ascending lane without ``max`` stops there (implicit bound).

#: Widths in a URL's format spec above this are refused (``{id:1000000000d}`` would build a 1 GB URL).
_MAX_WIDTH = 1000
_FORMATTER = string.Formatter()
#: Parsed outcome rules and recrawl policies by the values they were parsed from: the targets of a
#: job file mostly share them (one object for 100,000 targets, not one each; they are frozen).
_RULES: dict[str, OutcomeRule] = {}
_POLICIES: dict[str, Policy] = {}
_OPTIONS: dict[str, TargetOptions] = {}
#: At most this many of each are kept (a job whose every target has its own rule parses each once anyway).
_MEMO_SIZE = 4096


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
SCOPE_TARGET_KEYS = frozenset({"crawl_profiles", "enabled", "sitemaps"})
#: Why an id target's ``sitemaps`` key is refused (docs/recrawl.md "Sitemaps as evidence").
NO_ID_TARGET_SITEMAPS = ("is a job file's key: read_job takes an id target's sitemaps (evidence for its "
                         "recrawl) out of its table")
#: Every key a ``[[targets]]`` table of a job file accepts.
JOB_TARGET_KEYS = TARGET_KEYS | SCOPE_TARGET_KEYS
#: The keys of a page target (a ``url`` without ``{id}``): no lane keys.
PAGE_TARGET_KEYS = frozenset({"name", "url"}) | SCOPE_TARGET_KEYS


@dataclass(frozen=True, slots=True)
class TargetOptions:
    """The values of a :class:`Target` that the targets of a job mostly share (one object for all of them,
    not 14 slots in each target): read through the target's properties of the same names."""

    direction: Direction
    margin: int
    window: int
    rate_asc: int = 1
    rate_desc: int = 1
    attempts: int = 3
    cooldown: float = 10.0
    backoff: float = 2.0
    resume: str = "auto"
    holes: str = "failed"
    rule: OutcomeRule = DEFAULT_RULE
    soft404_similarity: float = 0.9
    policy: Policy = DEFAULT_POLICY
    follow_redirects: str = "host"


#: A target's values in the order of its constructor's keywords (its :class:`TargetOptions` spread out): what
#: its ``repr`` shows and what :func:`idcrawl.core.overlap.space_key` is made of.
TARGET_FIELDS = ("name", "url", "start", "direction", "margin", "window", "rate_asc", "rate_desc", "min", "max",
                 "attempts", "cooldown", "backoff", "resume", "holes", "rule", "soft404_probe", "soft404_similarity",
                 "crawl_profiles", "enabled", "policy", "follow_redirects")
#: Equal options made anew (``dataclasses.replace``, a spider's own targets) become one shared object again.
_SHARED_OPTIONS: dict[TargetOptions, TargetOptions] = {}


def _shared(options: TargetOptions) -> TargetOptions:
    try:
        shared = _SHARED_OPTIONS.get(options)
    except TypeError:  # a value that does not hash (a hand-made rule): not shared
        return options
    if shared is not None:
        return shared
    if len(_SHARED_OPTIONS) >= _MEMO_SIZE:
        _SHARED_OPTIONS.clear()
    _SHARED_OPTIONS[options] = options
    return options


@dataclass(frozen=True, slots=True, init=False, repr=False)
class Target:
    """One URL template and the rules for walking its ids.

    ``min`` and ``max`` are inclusive. ``rate_asc``/``rate_desc`` are the
    interleaving weights of the two possible lanes. ``rule`` tells found,
    missing and failed responses apart (the ``missing_statuses`` and soft-404 keys).

    The values most targets of a job share (``direction`` ... ``follow_redirects``, see
    :class:`TargetOptions`) live in one shared ``options`` object; the constructor takes them one by
    one as keywords, or as ``options`` (what ``dataclasses.replace`` passes on; a keyword given beside
    it wins, so ``replace(target, resume="due")`` works).
    """

    name: str
    url: str
    start: int
    options: TargetOptions
    min: int | None
    max: int | None
    #: URL of a page known not to exist (``soft404_probe``: an id or a URL); None: nothing to learn
    soft404_probe: str | None
    #: the crawl profiles (names, job file only) whose scope the outlinks of its found pages are followed in
    crawl_profiles: tuple[str, ...]
    #: False: deactivated (seed 003: its URLs are postponed, not crawled)
    enabled: bool
    #: the host name of its start id's URL (its download slot; derived from ``url`` and ``start`` once,
    #: asked for per request)
    host: str = field(init=False, repr=False, compare=False)

    def __init__(
        self, name: str, url: str, start: int, direction: Direction | None = None, margin: int | None = None,
        window: int | None = None, rate_asc: int | None = None, rate_desc: int | None = None,
        min: int | None = None, max: int | None = None,
        attempts: int | None = None, cooldown: float | None = None, backoff: float | None = None,
        resume: str | None = None, holes: str | None = None, rule: OutcomeRule | None = None,
        soft404_probe: str | None = None, soft404_similarity: float | None = None, crawl_profiles: tuple[str, ...] = (),
        enabled: bool = True, policy: Policy | None = None, follow_redirects: str | None = None,
        options: TargetOptions | None = None,
    ) -> None:
        given: dict[str, Any] = {key: value for key, value in (
            ("direction", direction), ("margin", margin), ("window", window), ("rate_asc", rate_asc),
            ("rate_desc", rate_desc), ("attempts", attempts), ("cooldown", cooldown), ("backoff", backoff),
            ("resume", resume), ("holes", holes), ("rule", rule), ("soft404_similarity", soft404_similarity),
            ("policy", policy), ("follow_redirects", follow_redirects)) if value is not None}
        if options is None:
            missing = [key for key in ("direction", "margin", "window") if key not in given]
            if missing:
                raise TypeError(f"Target() missing keyword arguments: {', '.join(missing)}")
            options = _shared(TargetOptions(**given))
        elif given:
            options = _shared(replace(options, **given))
        setattr_ = object.__setattr__
        setattr_(self, "name", name)
        setattr_(self, "url", url)
        setattr_(self, "start", start)
        setattr_(self, "options", options)
        setattr_(self, "min", min)
        setattr_(self, "max", max)
        setattr_(self, "soft404_probe", soft404_probe)
        setattr_(self, "crawl_profiles", crawl_profiles)
        setattr_(self, "enabled", enabled)
        setattr_(self, "host", template_host(url, builtins.max(start, 0)))

    def with_resume(self, resume: str) -> Target:
        """This target with another ``resume`` (its options shared with those of equal targets)."""
        return replace(self, options=_shared(replace(self.options, resume=resume)))

    def __repr__(self) -> str:
        return f"Target({', '.join(f'{key}={getattr(self, key)!r}' for key in TARGET_FIELDS)})"

    @property
    def direction(self) -> Direction:
        return self.options.direction

    @property
    def margin(self) -> int:
        return self.options.margin

    @property
    def window(self) -> int:
        return self.options.window

    @property
    def rate_asc(self) -> int:
        return self.options.rate_asc

    @property
    def rate_desc(self) -> int:
        return self.options.rate_desc

    @property
    def attempts(self) -> int:
        return self.options.attempts

    @property
    def cooldown(self) -> float:
        return self.options.cooldown

    @property
    def backoff(self) -> float:
        return self.options.backoff

    @property
    def resume(self) -> str:
        return self.options.resume

    @property
    def holes(self) -> str:
        return self.options.holes

    @property
    def rule(self) -> OutcomeRule:
        return self.options.rule

    @property
    def soft404_similarity(self) -> float:
        return self.options.soft404_similarity

    @property
    def policy(self) -> Policy:
        """The adaptive recrawl rule's numbers (the ``recrawl_*`` keys; :mod:`idcrawl.core.recrawl`)."""
        return self.options.policy

    @property
    def follow_redirects(self) -> str:
        """``host``: a redirect of an id page to another host is not followed; ``any``: every redirect is."""
        return self.options.follow_redirects

    def url_for(self, id_: int) -> str:
        return self.url.format(id=id_)

    def may_redirect(self, from_url: str, to_url: str) -> bool:
        """May a redirect of one of its id pages from ``from_url`` to ``to_url`` be followed?"""
        return self.follow_redirects == "any" or same_host(from_url, to_url)

    def id_of(self, url: str) -> int | None:
        """The id in ``min..max`` whose URL under this template is exactly ``url``, or None."""
        id_ = id_in_template(self.url, url)
        if id_ is None or (self.min is not None and id_ < self.min) or (self.max is not None and id_ > self.max):
            return None
        return id_


@dataclass(frozen=True, slots=True)
class PageTarget:
    """A start page (the seed's SEED without ids: a front page): fetched at hop 0, its outlinks
    followed in the scope of its crawl profiles (:mod:`idcrawl.core.scope`). Job files only."""

    name: str
    url: str
    crawl_profiles: tuple[str, ...] = ()
    enabled: bool = True
    #: its site's sitemaps: their URLs are hop-0 pages of the target (``idcrawl.core.sitemaps``)
    sitemaps: SitemapSpec | None = None

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""


# -- value parsers ------------------------------------------------------------

def _template(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TargetError("url", value, "must be a URL template containing {id}")
    url = value.strip()
    if url.count("{") == 1 and url.count("}") == 1 and "{id}" in url:  # a plain {id}, the usual case
        sample = url.format(id=12345)
        check_url("url", value, sample)
        return url
    try:
        parsed = [(f, spec, conversion) for _, f, spec, conversion in _FORMATTER.parse(url) if f is not None]
    except ValueError as exc:
        raise TargetError("url", value, f"is not a valid template ({exc})") from None
    fields = [f for f, _, _ in parsed]
    if fields != ["id"]:
        found = ", ".join("{" + f + "}" for f in fields) or "none"
        raise TargetError("url", value, f"must contain exactly one {{id}} field (found: {found})")
    specs = [spec for _, spec, _ in parsed if spec]
    if any(int(width) > _MAX_WIDTH for spec in specs for width in re.findall(r"[0-9]+", spec)):
        raise TargetError("url", value, f"has a format spec wider than {_MAX_WIDTH} characters")
    try:
        sample = url.format(id=12345)
        if specs or parsed[0][2] is not None:  # a plain {id} renders every integer
            for id_ in (0, MAX_ID):  # every id a lane may reach must render ({id:c} cannot)
                url.format(id=id_)
    except (ValueError, KeyError, IndexError, OverflowError) as exc:
        raise TargetError("url", value, f"has a bad format spec for an integer id ({exc})") from None
    check_url("url", value, sample)
    return url


def _rate(value: Any, direction: Direction) -> tuple[int, int]:
    text = str(value).strip() if not isinstance(value, bool) else ""
    parts = text.split(":")
    if len(parts) == 2 and direction is not Direction.BOTH:
        raise TargetError("rate", value, "ASC:DESC needs direction='both'")
    if len(parts) not in (1, 2):
        raise TargetError("rate", value, "must be a positive integer W or ASC:DESC")
    try:
        weights = [as_int("rate", p, minimum=1) for p in parts]
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
            status = as_int("missing_statuses", part)
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
        id_ = as_int("soft404_probe", value)
        if id_ < 0:
            raise TargetError("soft404_probe", value, reason)
        return url.format(id=as_id("soft404_probe", id_))
    if isinstance(value, str):
        text = value.strip()
        parts = urlsplit(text)
        if parts.scheme in ("http", "https") and parts.hostname:
            return text
    raise TargetError("soft404_probe", value, reason)


def _similarity(value: Any) -> float:
    result = as_float("soft404_similarity", value)
    if not 0.0 < result <= 1.0:
        raise TargetError("soft404_similarity", value, "must be a number > 0 and <= 1 (a Jaccard similarity)")
    return result


_RULE_KEYS = ("missing_statuses", "soft404_regex", "soft404_css", "soft404_xpath", "found_css", "found_xpath",
              "soft404_max_bytes")
#: Every key whose value a target's :class:`TargetOptions` are parsed from.
_OPTION_KEYS = ("direction", "margin", "window", "rate", "attempts", "cooldown", "backoff", "resume", "holes",
                *_RULE_KEYS, *RECRAWL_KEYS, "follow_redirects", "soft404_similarity")


def _memo(memo: dict[str, Any], key: str, parse: Callable[[], Any]) -> Any:
    """``parse()``, remembered in ``memo`` under ``key`` (the ``repr`` of the values it parses:
    ``1``, ``1.0``, ``True`` and ``"1"`` are told apart). A value that does not parse is not remembered."""
    result = memo.get(key)
    if result is not None:
        return result
    result = memo[key] = parse()
    if len(memo) > _MEMO_SIZE:
        memo.clear()
    return result


def _outcome_rule(merged: Mapping[str, Any]) -> OutcomeRule:
    """The outcome rule from the ``missing_statuses`` and soft-404 keys (empty = not set)."""
    rule: OutcomeRule = _memo(_RULES, repr([merged.get(key) for key in _RULE_KEYS]),
                              lambda: _parse_outcome_rule(merged))
    return rule


def _parse_outcome_rule(merged: Mapping[str, Any]) -> OutcomeRule:
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
    limit = None if raw_limit in (None, "") else as_int("soft404_max_bytes", raw_limit, minimum=0)
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
    refuse_unknown(raw, JOB_TARGET_KEYS if job else TARGET_KEYS)
    if "sitemaps" in raw:  # an id target's: evidence for its recrawl, taken out by read_job (JobFile.id_sitemaps)
        raise TargetError("sitemaps", raw["sitemaps"], NO_ID_TARGET_SITEMAPS)
    merged: dict[str, Any] = {**DEFAULTS, **(defaults or {}), **raw}
    if "url" not in raw:
        raise TargetError("url", MISSING, "is required (a URL template containing {id})")
    url = _template(raw["url"])

    # the options below depend on these values only: parsed once per distinct set (a job's targets share them)
    options_key = repr([merged.get(key) for key in _OPTION_KEYS])
    options: TargetOptions | None = _OPTIONS.get(options_key)
    if options is not None:
        direction = options.direction
    else:
        dvalue = merged["direction"]
        try:
            direction = Direction(str(dvalue).strip().lower())
        except ValueError:
            raise TargetError("direction", dvalue, "must be one of asc, desc, both") from None

    lo = as_id("min", merged["min"]) if merged.get("min") not in (None, "") else None
    hi = as_id("max", merged["max"]) if merged.get("max") not in (None, "") else None
    if lo is not None and hi is not None and lo > hi:
        raise TargetError("min", merged["min"], f"must be <= max ({hi})")

    if merged.get("start") not in (None, ""):
        start = as_id("start", merged["start"])
    elif direction is Direction.ASC and lo is not None:
        start = lo
    elif direction is Direction.DESC and hi is not None:
        start = hi
    else:
        raise TargetError("start", MISSING, "is required (or give min for asc, max for desc)")
    if lo is not None and start < lo:
        raise TargetError("start", merged["start"], f"is below min ({lo})")
    if hi is not None and start > hi:
        raise TargetError("start", merged["start"], f"is above max ({hi})")

    margin = options.margin if options is not None else as_int("margin", merged["margin"], minimum=0)
    if margin == 0:
        if direction in (Direction.ASC, Direction.BOTH) and hi is None:
            raise TargetError("margin", merged["margin"], "0 (no cut) needs max: the asc lane would never end")
        if direction in (Direction.DESC, Direction.BOTH) and lo is None:
            raise TargetError("margin", merged["margin"], "0 (no cut) needs min: the desc lane would never end")
    if options is None:
        parsed = _parse_options(merged, direction, margin)
        options = _memo(_OPTIONS, options_key, lambda: _shared(parsed))
    probe = _probe(merged.get("soft404_probe"), url)

    name_value = merged.get("name")
    if name_value in (None, ""):
        name = urlsplit(url.format(id=start)).hostname or "target"
    else:
        name = as_name("name", name_value)

    return Target(
        name=name,
        url=url,
        start=start,
        min=lo,
        max=hi,
        soft404_probe=probe,
        crawl_profiles=as_names("crawl_profiles", raw["crawl_profiles"]) if "crawl_profiles" in raw else (),
        enabled=as_bool("enabled", raw["enabled"]) if "enabled" in raw else True,
        options=options,
    )


def _parse_options(merged: Mapping[str, Any], direction: Direction, margin: int) -> TargetOptions:
    """The options after ``margin``, in the order (and with the error lines) of their keys' checks."""
    window = as_int("window", merged["window"], minimum=1)
    rate_asc, rate_desc = _rate(merged["rate"], direction)
    attempts = as_int("attempts", merged["attempts"], minimum=1)
    cooldown = as_float("cooldown", merged["cooldown"])
    backoff = as_float("backoff", merged["backoff"], minimum=1.0)
    resume = as_choice("resume", merged["resume"], RESUME_MODES, hidden=DEPRECATED_WORDS)
    holes = as_choice("holes", merged["holes"], HOLES_MODES)
    rule = _outcome_rule(merged)
    recrawl = {key: value for key, value in merged.items() if key in RECRAWL_KEYS and value not in (None, "")}
    policy: Policy = _memo(_POLICIES, repr(sorted(recrawl.items())), lambda: parse_policy(recrawl))
    follow_redirects = as_choice("follow_redirects", merged["follow_redirects"], REDIRECT_MODES)
    raw_similarity = merged["soft404_similarity"]
    similarity = _similarity(DEFAULTS["soft404_similarity"] if raw_similarity in (None, "") else raw_similarity)
    return TargetOptions(direction, margin, window, rate_asc, rate_desc, attempts, cooldown, backoff, resume, holes,
                         rule, similarity, policy, follow_redirects)


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
    check_url("url", raw["url"], url)
    name_value = raw.get("name")
    name = (urlsplit(url).hostname or "page") if name_value in (None, "") else as_name("name", name_value)
    return PageTarget(
        name=name,
        url=url,
        crawl_profiles=as_names("crawl_profiles", raw["crawl_profiles"]) if "crawl_profiles" in raw else (),
        enabled=as_bool("enabled", raw["enabled"]) if "enabled" in raw else True,
        sitemaps=parse_sitemaps(raw["sitemaps"]) if "sitemaps" in raw else None,
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
    return {key: as_choice(key, raw[key], choices[key], hidden=DEPRECATED_WORDS)
            for key in RUN_OPTION_KEYS if key in raw}


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
        raise TargetError(f"{where}targets", MISSING, "no target given")
    return targets
