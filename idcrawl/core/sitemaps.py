"""Sitemaps as seeds and as evidence for the recrawl: the rules, without Scrapy (issues 30 and 31).

A job file's ``sitemaps`` value, what one sitemap ``<url>`` carries (``lastmod`` as seconds, ``priority``,
``changefreq``), the order its URLs are queued in (higher priority first), and what a sitemap tells the
recrawl: a page listed with a ``lastmod`` newer than its last fetch is due now, a ``changefreq`` may seed a
first interval, and a tail is told whether ids above its last found id are listed.
Fetching and parsing (Scrapy's ``scrapy.utils.sitemap``) is :mod:`idcrawl.sitemaps`; docs/scope.md "Sitemaps".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from idcrawl.core.inputs import TargetError, check_url
from idcrawl.core.recrawl import Policy, Schedule

__all__ = [
    "CHANGEFREQ_SECONDS",
    "DEFAULT_PRIORITY",
    "Evidence",
    "SitemapSpec",
    "SitemapUrl",
    "TailNews",
    "by_priority",
    "due_by_sitemap",
    "evidence_due",
    "first_interval",
    "lastmod_is_news",
    "page_by_sitemap",
    "pages_by_sitemap",
    "parse_lastmod",
    "parse_priority",
    "parse_sitemaps",
    "site_sitemaps",
    "sitemap_url",
    "tail_due_by_sitemap",
    "tail_news",
]

#: The sitemaps protocol's default ``<priority>``.
DEFAULT_PRIORITY = 0.5
#: ``<changefreq>`` as a first recrawl interval (seconds); ``never`` seeds none (the policy's own).
CHANGEFREQ_SECONDS: dict[str, float | None] = {
    "always": 60.0,
    "hourly": 3600.0,
    "daily": 86400.0,
    "weekly": 7 * 86400.0,
    "monthly": 30 * 86400.0,
    "yearly": 365 * 86400.0,
    "never": None,
}


@dataclass(frozen=True, slots=True)
class SitemapSpec:
    """A job file's ``sitemaps``: ``site`` (``true``): the site's own, found from its ``/robots.txt``
    ``Sitemap:`` lines, else ``/sitemap.xml``; ``urls``: sitemaps (or sitemap indexes) named in the file."""

    site: bool = False
    urls: tuple[str, ...] = ()


def parse_sitemaps(value: Any) -> SitemapSpec | None:
    """A job file's ``sitemaps`` key: ``true`` (the site's), ``false`` (none: None), or a URL or a list of
    http(s) URLs of sitemaps; anything else is one :class:`TargetError` naming the field and value."""
    if isinstance(value, bool):
        return SitemapSpec(site=True) if value else None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(item, str) for item in items):
        raise TargetError("sitemaps", value, "must be true, false, or a non-empty list of http(s) sitemap URLs")
    for item in items:
        check_url("sitemaps", value, item.strip())
    return SitemapSpec(urls=tuple(dict.fromkeys(item.strip() for item in items)))


def site_sitemaps(seed_url: str) -> tuple[str, str]:
    """The ``/robots.txt`` and the ``/sitemap.xml`` of the site of ``seed_url``."""
    parts = urlsplit(seed_url)
    return (urlunsplit((parts.scheme, parts.netloc, "/robots.txt", "", "")),
            urlunsplit((parts.scheme, parts.netloc, "/sitemap.xml", "", "")))


@dataclass(frozen=True, slots=True)
class SitemapUrl:
    """One ``<url>`` of a sitemap: ``loc``, ``lastmod`` (seconds since the epoch, UTC; None: not given or
    not a W3C date), ``priority`` in [0, 1] (0.5 when not given) and ``changefreq`` (a protocol word or None)."""

    loc: str
    lastmod: float | None = None
    priority: float = DEFAULT_PRIORITY
    changefreq: str | None = None


_YEAR_MONTH = re.compile(r"^(\d{4})(?:-(\d{2}))?$")


def parse_lastmod(text: str | None) -> float | None:
    """A W3C datetime (``2026-11-28``, ``2026-11-28T10:00:00+01:00``, ``...Z``, ``2026``, ``2026-11``) as
    seconds since the epoch; a date without a zone is UTC. None: missing or not such a date."""
    if not text:
        return None
    text = text.strip()
    short = _YEAR_MONTH.match(text)
    try:
        if short:
            moment = datetime(int(short[1]), int(short[2] or 1), 1, tzinfo=UTC)
        else:
            moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def parse_priority(text: str | None) -> float:
    """``<priority>`` in [0, 1]; missing, not a number or out of range: the default 0.5."""
    try:
        value = float(text) if text is not None else DEFAULT_PRIORITY
    except ValueError:
        return DEFAULT_PRIORITY
    return value if 0.0 <= value <= 1.0 else DEFAULT_PRIORITY


def sitemap_url(entry: dict[str, Any]) -> SitemapUrl | None:
    """One entry as Scrapy's ``Sitemap`` yields it (``loc``, ``lastmod``, ``priority``, ``changefreq``
    as text) as a :class:`SitemapUrl`; None: no ``loc``."""
    loc = entry.get("loc")
    if not isinstance(loc, str) or not loc.strip():
        return None
    changefreq = entry.get("changefreq")
    changefreq = changefreq.strip().lower() if isinstance(changefreq, str) else None
    return SitemapUrl(loc.strip(), parse_lastmod(entry.get("lastmod")), parse_priority(entry.get("priority")),
                      changefreq if changefreq in CHANGEFREQ_SECONDS else None)


def by_priority(urls: Iterable[SitemapUrl]) -> list[SitemapUrl]:
    """The order sitemap URLs are queued in: higher ``priority`` first, then the newer ``lastmod`` (none
    last), then by URL; one entry per URL (the first listed)."""
    unique = {u.loc: u for u in reversed(list(urls))}
    return sorted(unique.values(), key=lambda u: (-u.priority, -(u.lastmod if u.lastmod is not None else -1e18),
                                                  u.loc))


def first_interval(changefreq: str | None, clamp: Callable[[float], float]) -> float | None:
    """A first recrawl interval from ``changefreq`` (clamped by the target's policy); None: none given,
    or ``never``: the policy's initial interval applies."""
    seconds = CHANGEFREQ_SECONDS.get(changefreq or "")
    return clamp(seconds) if seconds is not None else None


def lastmod_is_news(lastmod: float | None, last_fetch: float | None, now: float) -> bool:
    """A sitemap's ``lastmod`` newer than the page's last fetch: the page changed since, it is due now.
    A ``lastmod`` after ``now`` (the sitemap's reading) is no evidence: a fetch after it could never
    catch up, and each reader (each worker of a fleet) would fetch the page again."""
    return lastmod is not None and last_fetch is not None and last_fetch < lastmod <= now


class TailNews(StrEnum):
    #: the sitemap lists ids above the tail's last found id: walk to them
    NEWS = "news"
    #: it lists ids of the target, none above the last found: a due tail may skip its walk
    NONE = "none"
    #: it lists no id of the target (or the tail found none yet): no evidence, the tail walks as it would
    UNKNOWN = "unknown"


def tail_news(listed: Iterable[int], last_found: int | None) -> tuple[TailNews, int | None]:
    """What the ids a sitemap lists tell a tail whose highest found id is ``last_found``, and the
    highest id listed (None: none)."""
    top = max(listed, default=None)
    if top is None or last_found is None:
        return TailNews.UNKNOWN, top
    return (TailNews.NEWS if top > last_found else TailNews.NONE), top


def _due_now(schedule: Schedule, now: float, policy: Policy) -> Schedule | None:
    """``schedule`` due at ``now`` (not before its policy's floor after its last visit): its duration
    cut to the time since that visit, its last visit kept; None: due by then already."""
    duration = max(policy.min_duration, now - schedule.last_crawled)
    return replace(schedule, update_duration=duration) if duration < schedule.update_duration else None


def due_by_sitemap(schedule: Schedule, lastmod: float | None, now: float, policy: Policy) -> Schedule | None:
    """A found id page's record (``resume=due``) moved by its sitemap entry: a ``lastmod`` newer than
    its last visit (:func:`lastmod_is_news`) makes it due now, its interval cut to the time since
    that visit (the page changed within it: the next visit's rule starts from there). None: no
    evidence, or due already."""
    return _due_now(schedule, now, policy) if lastmod_is_news(lastmod, schedule.last_crawled, now) else None


def tail_due_by_sitemap(schedule: Schedule, listed: Iterable[int], now: float, policy: Policy) -> Schedule | None:
    """A tail's record moved by the ids a sitemap lists: ids above its last found id are news
    (:func:`tail_news`), so it is probed now, its interval cut as :func:`due_by_sitemap` cuts a page's,
    and the highest of them is kept (:attr:`Schedule.listed`, when above the one kept): the next walk
    goes on to it whatever the misses. None: no news (none listed above, or nothing listed), or due
    already and no higher id listed."""
    news, top = tail_news(listed, schedule.last_found)
    if news is not TailNews.NEWS or top is None:
        return None
    moved = _due_now(schedule, now, policy)
    if schedule.listed is not None and top <= schedule.listed:
        return moved
    return replace(moved or schedule, listed=top)


def page_by_sitemap(schedule: Schedule, entry: SitemapUrl, now: float, policy: Policy) -> Schedule | None:
    """A found id page's record moved by its sitemap entry: due now by a newer ``lastmod``
    (:func:`due_by_sitemap`), else, for a page not revisited yet (its first interval: revision 1, the
    policy's initial duration), the entry's ``changefreq`` as that interval (:func:`first_interval`).
    None: the record stays as it is."""
    moved = due_by_sitemap(schedule, entry.lastmod, now, policy)
    if moved is not None:
        return moved
    first = first_interval(entry.changefreq, policy.clamp)
    if (first is None or schedule.revision > 1 or schedule.update_duration != policy.clamp(policy.initial_duration)
            or first == schedule.update_duration):
        return None
    return replace(schedule, update_duration=first)


def pages_by_sitemap(records: Mapping[int, Schedule], entries: Mapping[int, SitemapUrl], now: float,
                     policy: Policy) -> dict[int, Schedule]:
    """The stored records (id -> record) of a target's found pages that its sitemap entries (id -> entry)
    move (:func:`page_by_sitemap`); ids without a record (not found yet) are left alone."""
    moved: dict[int, Schedule] = {}
    for id_, entry in entries.items():
        record = records.get(id_)
        if record is not None and (new := page_by_sitemap(record, entry, now, policy)) is not None:
            moved[id_] = new
    return moved


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a target's sitemap told its recrawl: found pages moved (``pages``), and whether its tail was
    told of news (``tail``: due now, its ids above the last found listed)."""

    pages: int = 0
    tail: bool = False


def evidence_due(earliest: float | None, times: Iterable[float]) -> float | None:
    """The earliest due time of what sitemaps moved in a wave so far (``earliest``; None: nothing yet),
    with the due ``times`` of what one more sitemap moved: when it wakes a watch's next wave."""
    return min(times, default=None) if earliest is None else min((*times, earliest))
