"""Settings profiles: named sets of settings a job picks with ``IDCRAWL_PROFILE``.

The profiles are TOML package data here, read with :mod:`importlib.resources`; ``IDCRAWL_PROFILES_DIR``
is searched first. Applied at :data:`PROFILE_PRIORITY`, a table merged key by key; a job file's
``profile`` by the :class:`JobProfile` add-on. Precedence, packaging: docs/profiles.md; where a
profile is applied: docs/architecture.md ("Module notes").
"""

from __future__ import annotations

import logging
import tomllib
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings

from idcrawl import default_settings
from idcrawl.components import NamedAddon, setdefault_component
from idcrawl.config import setting
from idcrawl.core.inputs import TargetError
from idcrawl.core.jobfile import JobFile, read_job_profile
from idcrawl.errors import BadInputError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = [
    "PACKAGE",
    "PROFILE_PRIORITY",
    "JobProfile",
    "apply_job_profile",
    "apply_profile",
    "known_profiles",
    "load_profile",
    "log_profile",
    "profile_conflicts",
    "profile_line",
    "profile_sources",
    "read_at_spider_creation",
]

logger = logging.getLogger(__name__)

#: The package whose ``*.toml`` files are idcrawl's own profiles.
PACKAGE = "idcrawl.settings_profiles"

#: Between ``spider`` (30: custom_settings) and ``cmdline`` (40: ``-s``).
PROFILE_PRIORITY = SETTINGS_PRIORITIES["spider"] + 5
#: The crawl scope middleware :class:`JobProfile` adds for a job file with crawl scope.
SCOPE_MIDDLEWARE = "idcrawl.spidermiddlewares.scope.IdScopeMiddleware"
SCOPE_ORDER = 1050  # spider side of Scrapy's own: its outlink requests pass them (depth, referer), as a spider's do
#: The middleware :class:`JobProfile` adds for a job file whose id targets have ``sitemaps`` (evidence).
EVIDENCE_MIDDLEWARE = "idcrawl.spidermiddlewares.evidence.IdSitemapEvidenceMiddleware"
EVIDENCE_ORDER = 1060

#: Settings a profile must not set: they choose profiles.
_NOT_IN_A_PROFILE = frozenset({"IDCRAWL_PROFILE", "IDCRAWL_PROFILES_DIR"})

#: Settings the idseq spider reads when it is created (target defaults, state
#: location and backend, Redis), before a job file's profile can be applied.
_SPIDER_CREATION_NAMES = frozenset({"JOBDIR", "IDCRAWL_MARGIN", "IDCRAWL_MARGIN_COUNTS_FAILED", "IDCRAWL_WINDOW",
                                    "IDCRAWL_MISSING_STATUSES", "IDCRAWL_STATE", "IDCRAWL_DISTRIBUTED"})
#: ... and every setting that starts with one of these (a trailing "_" marks a prefix, not a setting)
_SPIDER_CREATION_PREFIXES = ("IDCRAWL_STATE_", "IDCRAWL_REDIS_", "REDIS_")


def read_at_spider_creation(name: str) -> bool:
    """Whether the idseq spider reads setting ``name`` when it is created (before a job file's profile)."""
    return name in _SPIDER_CREATION_NAMES or name.startswith(_SPIDER_CREATION_PREFIXES)


def profile_sources(settings: BaseSettings | None = None) -> dict[str, Traversable]:
    """Every known profile name and its file: ``IDCRAWL_PROFILES_DIR`` first, then the packaged ones."""
    sources: dict[str, Traversable] = {}
    folders: list[Traversable] = []
    extra = setting(settings, "IDCRAWL_PROFILES_DIR") if settings is not None else None
    if extra:
        folders.append(Path(extra))
    folders.append(resources.files(PACKAGE))
    for folder in folders:
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            if entry.name.endswith(".toml") and entry.is_file():
                sources.setdefault(entry.name.removesuffix(".toml"), entry)
    return sources


def known_profiles(settings: BaseSettings | None = None) -> list[str]:
    return sorted(profile_sources(settings))


def load_profile(name: str, settings: BaseSettings | None = None) -> dict[str, Any]:
    """The settings of profile ``name``; one-line :class:`BadInputError` if unknown or broken."""
    sources = profile_sources(settings)
    source = sources.get(name)  # looked up by name: a value never becomes a path
    if source is None:
        known = ", ".join(sorted(sources)) or "none"
        raise BadInputError(f"IDCRAWL_PROFILE={name!r}: unknown profile (known: {known})")
    try:
        values = tomllib.loads(source.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInputError(f"IDCRAWL_PROFILE={name!r}: {source} is not valid TOML ({exc})") from None
    forbidden = sorted(set(values) & _NOT_IN_A_PROFILE)
    if forbidden:
        raise BadInputError(f"IDCRAWL_PROFILE={name!r}: {source} sets {forbidden[0]}; a profile cannot pick profiles")
    # Scrapy settings and other add-ons' settings pass as they are; only idcrawl's own names are checked
    unknown = sorted(k for k in values if k.startswith("IDCRAWL_") and not hasattr(default_settings, k))
    for key in unknown:
        logger.warning("idcrawl: profile %r sets %s, which this version of idcrawl does not know: it has no effect",
                       name, key)
    return values


def _apply_values(settings: BaseSettings, values: dict[str, Any]) -> None:
    for key, value in values.items():
        current = settings.get(key)
        if isinstance(value, dict) and isinstance(current, BaseSettings):
            current.update(value, priority=PROFILE_PRIORITY)  # a table adds to a component dict, key by key
            if (settings.getpriority(key) or 0) < PROFILE_PRIORITY:
                # so that scrapy crawl's second merge of the process settings does not replace the dict
                settings.set(key, current, priority=PROFILE_PRIORITY)
        else:
            settings.set(key, value, priority=PROFILE_PRIORITY)


def apply_profile(settings: BaseSettings) -> str | None:
    """Apply the profile ``IDCRAWL_PROFILE`` names, if any; returns its name.

    Idempotent: the same profile applied again sets the same values at the same priority.
    """
    name = setting(settings, "IDCRAWL_PROFILE")
    if not name:
        return None
    _apply_values(settings, load_profile(str(name), settings))
    return str(name)


def apply_job_profile(settings: BaseSettings, job: JobFile | str | None) -> str | None:
    """Apply the ``profile`` key of a job file, if it has one; returns the profile applied by it.

    ``job``: the job file as the spider read it (its profile is not read again), or its path.
    The job's profile counts as ``IDCRAWL_PROFILE`` at ``spider`` priority: ``-s IDCRAWL_PROFILE``
    beats it; a different profile from the project's settings, already applied, is a conflict.
    """
    if not job:
        return None
    if isinstance(job, JobFile):
        job_path, name = job.path, job.profile
    else:
        job_path = job
        try:
            name = read_job_profile(job_path)
        except TargetError as exc:
            raise BadInputError(f"bad input: {exc}") from None
    if name is None:
        return None
    where = f"job file {job_path!r}: profile={name!r}"
    current = setting(settings, "IDCRAWL_PROFILE")
    if current == name:
        return None  # already applied from the settings
    if current and (settings.getpriority("IDCRAWL_PROFILE") or 0) >= SETTINGS_PRIORITIES["cmdline"]:
        logger.info("idcrawl: %s is overridden by -s IDCRAWL_PROFILE=%s", where, current)
        return None
    if current:
        raise BadInputError(
            f"{where}: the settings already applied IDCRAWL_PROFILE={current!r}; "
            f"remove one, or pick it with -s IDCRAWL_PROFILE={name}"
        )
    values = load_profile(name, settings)
    early = sorted(k for k in values if read_at_spider_creation(k))
    if early:
        raise BadInputError(
            f"{where}: the profile sets {early[0]}, which is read before the job file; "
            f"pick it with -s IDCRAWL_PROFILE={name} instead"
        )
    settings.set("IDCRAWL_PROFILE", name, priority="spider")
    _apply_values(settings, values)
    return name


#: Who sets a setting at each priority, for the start line and the warnings.
_SOURCES = {0: "Scrapy's or idcrawl's defaults", 10: "the command", 15: "an add-on", 20: "the project's settings",
            30: "the spider", PROFILE_PRIORITY: "the profile", 40: "the command line"}


def _source(settings: BaseSettings, name: str) -> str:
    priority = settings.getpriority(name) or 0
    return _SOURCES.get(priority, f"priority {priority}")


def _number(value: object) -> str:
    return f"{float(value):g}" if isinstance(value, int | float | str) and str(value).strip() else repr(value)


def profile_line(settings: BaseSettings) -> str:
    """The start line: the profile in force and what it comes to, read from the crawl's final settings."""
    name = setting(settings, "IDCRAWL_PROFILE") or None
    factor = float(setting(settings, "IDCRAWL_POLITENESS_FACTOR") or 0)
    per_host = f"{settings.getint('CONCURRENT_REQUESTS_PER_DOMAIN')} per host"
    if factor > 0:
        per_host = "1 per host (politeness)"
        low, high = setting(settings, "IDCRAWL_POLITENESS_MIN_DELAY"), setting(settings, "IDCRAWL_POLITENESS_MAX_DELAY")
        politeness = f"politeness on ({factor:g}x the last fetch, {low:g} to {high:g} s apart)"
    else:
        politeness = "politeness off"
    said = f"settings profile {name!r}" if name else "no settings profile"
    line = (f"idcrawl: {said}: CONCURRENT_REQUESTS={settings.getint('CONCURRENT_REQUESTS')}, {per_host}, "
            f"DOWNLOAD_DELAY={_number(settings.get('DOWNLOAD_DELAY'))} s"
            f"{', AutoThrottle on' if settings.getbool('AUTOTHROTTLE_ENABLED') else ''}, {politeness}, "
            f"robots.txt {'obeyed' if settings.getbool('ROBOTSTXT_OBEY') else 'ignored'}")
    if name:
        try:
            values = load_profile(str(name), settings)
        except BadInputError:
            return line
        over = sorted(key for key, value in values.items() if not isinstance(value, dict)
                      and (settings.getpriority(key) or 0) > PROFILE_PRIORITY and settings.get(key) != value)
        if over:
            line += f"; -s overrides the profile's {', '.join(over)}"
    return line


#: What a profile with politeness off promises (hosts asked as fast as their concurrency allows), and the
#: settings it leaves alone that break it: name, whether the value breaks it, what the value does instead.
_UNPOLITE_BREAKERS: tuple[tuple[str, Any, str], ...] = (
    ("DOWNLOAD_DELAY", lambda v: float(v or 0) > 0, "keeps that many seconds between two requests to a host"),
    ("AUTOTHROTTLE_ENABLED", lambda v: str(v).lower() in ("1", "true"), "slows each host down to its latency"),
)


def profile_conflicts(settings: BaseSettings) -> list[str]:
    """One line for each setting the profile in force leaves alone that keeps it from doing what it says
    (``DOWNLOAD_DELAY = 1`` of a ``scrapy startproject`` project's settings under a profile with
    politeness off, say); empty without a profile or a conflict."""
    name = setting(settings, "IDCRAWL_PROFILE") or None
    if not name:
        return []
    try:
        values = load_profile(str(name), settings)
    except BadInputError:
        return []
    lines = []
    if float(values.get("IDCRAWL_POLITENESS_FACTOR", 1) or 0) == 0:
        for key, breaks, does in _UNPOLITE_BREAKERS:
            value = settings.get(key)
            if key in values or (settings.getpriority(key) or 0) <= SETTINGS_PRIORITIES["default"]:
                continue
            try:
                broken = breaks(value)
            except (TypeError, ValueError):
                continue
            if broken:
                lines.append(
                    f"idcrawl: profile {name!r} turns politeness off, but {key}={value!r} from "
                    f"{_source(settings, key)} {does}: remove it there, or run with -s {key}=... to choose"
                )
    return lines


def log_profile(settings: BaseSettings) -> None:
    """The start line (:func:`profile_line`) at INFO and a WARNING per :func:`profile_conflicts` line."""
    logger.info("%s", profile_line(settings))
    for line in profile_conflicts(settings):
        logger.warning("%s", line)


class JobProfile(NamedAddon):
    """Add-on that applies a job file's ``profile`` key (the idseq spider registers it), and adds the
    crawl-scope middleware (``idcrawl.spidermiddlewares.scope.IdScopeMiddleware``) when the job file has
    crawl scope (page targets, crawl profiles): a plain id crawl's middleware chain stays as it was.

    Scrapy runs add-ons after it has created the spider and before it freezes
    the settings: the one moment when both the spider's ``-a job=`` argument
    and writable settings exist.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> JobProfile:
        return cls(crawler)

    def update_settings(self, settings: BaseSettings) -> None:
        spider = self.crawler.spider
        job_path = getattr(spider, "_job_path", None) if spider is not None else None
        # the idseq spider read the job file with its targets, when it was created: the profile came with them
        job = getattr(spider, "_job_file", None)
        if isinstance(job, JobFile) and job.has_scope:
            setdefault_component(settings, "SPIDER_MIDDLEWARES", SCOPE_MIDDLEWARE, SCOPE_ORDER, priority="spider")
        if isinstance(job, JobFile) and job.id_sitemaps:  # sitemaps as evidence for id targets' recrawl
            setdefault_component(settings, "SPIDER_MIDDLEWARES", EVIDENCE_MIDDLEWARE, EVIDENCE_ORDER, priority="spider")
        if isinstance(job, JobFile) and job.warc_dir and (settings.getpriority("IDCRAWL_WARC_DIR") or 0) < \
                SETTINGS_PRIORITIES["spider"]:
            settings.set("IDCRAWL_WARC_DIR", job.warc_dir, priority="spider")  # -s IDCRAWL_WARC_DIR beats it
        if apply_job_profile(settings, job if isinstance(job, JobFile) else job_path):
            from idcrawl.validation import validate_settings

            validate_settings(settings)  # the job's profile may have brought bad values
            logger.info("idcrawl: settings profile %r from job file %s", setting(settings, "IDCRAWL_PROFILE"), job_path)
