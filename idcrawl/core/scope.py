"""Crawl scope (seed 003): collections, crawl profiles, hops, seed ownership, harvest checks, yields.

The seed document's SEED is a *target* here (an id template, or a *page target*: a start URL
without ``{id}``), its PROFILE a *crawl profile* (never a bare "profile": that word means a settings
profile), its COLLECTION a *collection*, its depth *hops*, its weight a *yield probability*.
Plain data and pure functions, no Scrapy: the job file parser (:mod:`idcrawl.core.targets`) builds
the :class:`Collection` and :class:`CrawlProfile` values, the Scrapy shell
(:mod:`idcrawl.spidermiddlewares.scope`) asks this module what to queue.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "SCHEMES",
    "Collection",
    "CrawlProfile",
    "ScopeKind",
]

#: The URL schemes a crawl profile may allow (``schemes``); both by default.
SCHEMES = ("http", "https")


class ScopeKind(StrEnum):
    """A crawl profile's base scope rule, relative to the URL of the target (the seed) that owns a URL."""

    HOST = "host"  # the seed's host name exactly (the default)
    DOMAIN = "domain"  # the seed's registered domain (public-suffix list): www.db.no and img.db.no
    PREFIX = "prefix"  # the URL starts with one of ``url_prefixes`` (default: the seed URL up to its last '/')
    ANY = "any"  # no base rule: only hops, schemes, include/exclude


@dataclass(frozen=True, slots=True)
class Collection:
    """The seed's COLLECTION: a group of crawl profiles (and so of queued URLs).

    ``yield_probability`` in [0, 1): the chance that one of its URLs gives its place on a contended
    host slot to another collection (:func:`choose`). ``enabled`` False postpones its URLs.
    """

    name: str
    yield_probability: float = 0.0
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class CrawlProfile:
    """The seed's PROFILE: which outlinks of a target's pages are followed, and how far.

    A URL is in scope when its scheme is one of ``schemes``, no ``exclude`` regex matches it,
    ``hops <= max_hops``, its off-site hops are at most ``max_offsite_hops`` (None: no limit of
    its own), and either the base rule ``kind`` accepts it or an ``include`` regex matches it
    (:func:`in_scope`). ``collection`` None: the profile belongs to no collection (never
    deactivated through one, yield 0 between collections).
    """

    name: str
    max_hops: int
    collection: str | None = None
    max_offsite_hops: int | None = None
    kind: ScopeKind = ScopeKind.HOST
    url_prefixes: tuple[str, ...] = ()
    include: tuple[re.Pattern[str], ...] = ()
    exclude: tuple[re.Pattern[str], ...] = ()
    schemes: tuple[str, ...] = SCHEMES
    yield_probability: float = 0.0
    enabled: bool = True
