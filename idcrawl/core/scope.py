"""Crawl scope (seed 003): collections, crawl profiles, hops, seed ownership, harvest checks, yields.

The seed document's SEED is a *target* here (an id template, or a *page target*: a start URL
without ``{id}``), its PROFILE a *crawl profile* (never a bare "profile": that word means a settings
profile), its COLLECTION a *collection*, its depth *hops*, its weight a *yield probability*.
Plain data and pure functions, no Scrapy: the job file parser (:mod:`idcrawl.core.targets`) builds
the :class:`Collection` and :class:`CrawlProfile` values, the Scrapy shell
(:mod:`idcrawl.spidermiddlewares.scope`) asks this module what to queue.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from fnmatch import fnmatchcase
from functools import cached_property, lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, Generic, TypeVar
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

from idcrawl.core.recrawl import body_older
from idcrawl.core.sitemaps import DEFAULT_PRIORITY, SitemapSpec

if TYPE_CHECKING:
    import tldextract

__all__ = [
    "SCHEMES",
    "SEED",
    "TRAP_RULES",
    "Candidate",
    "Canonicalise",
    "Claimant",
    "Collection",
    "CrawlProfile",
    "Decision",
    "Harvest",
    "Hops",
    "JobScope",
    "OffSite",
    "Owner",
    "PageRead",
    "ScopeKind",
    "Seed",
    "Traps",
    "UrlRecord",
    "Verdict",
    "canonical",
    "check_dispatch",
    "check_due",
    "choose",
    "choose_owner",
    "expected_shares",
    "harvested",
    "has_news",
    "host_of",
    "in_scope",
    "owner_of",
    "ownership_case",
    "read_into",
    "registered_domain",
    "revisit_of",
    "rule_accepts",
    "scope_marks",
    "specificity",
    "url_body_due",
]

K = TypeVar("K")
T = TypeVar("T")

#: The URL schemes a crawl profile may allow (``schemes``); both by default.
SCHEMES = ("http", "https")


class ScopeKind(StrEnum):
    """A crawl profile's base scope rule, relative to the URL of the target (the seed) that owns a URL."""

    HOST = "host"  # the seed's host name exactly (the default)
    DOMAIN = "domain"  # the seed's registered domain (public-suffix list): www.db.no and img.db.no
    PREFIX = "prefix"  # the URL starts with one of ``url_prefixes`` (default: the seed URL up to its last '/')
    ANY = "any"  # no base rule: only hops, schemes, include/exclude


class OffSite(StrEnum):
    """What starts a crawl profile's off-site counter (``offsite``): a link to another host (the default,
    the seed's "as long as the referrer is the same host"), or to another registered domain (its "if
    the outlink is another domain than the referrer")."""

    HOST = "host"
    DOMAIN = "domain"


@dataclass(frozen=True, slots=True)
class Collection:
    """The seed's COLLECTION: a group of crawl profiles (and so of queued URLs).

    ``yield_probability`` in [0, 1]: the chance that one of its URLs gives its place on a contended
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
    deactivated through one, yield 0 between collections). ``revisit``: seconds from a URL's last
    harvest to its next (the seed's frequency; None: harvested once, :func:`revisit_of`).
    ``signature`` / ``signature_drop``: what its pages' items' ``checksum`` hashes, as an id target's
    keys say (``body`` or ``text``; patterns dropped first: :func:`idcrawl.core.recrawl.signature_of`).
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
    revisit: float | None = None
    #: the sitemaps of each of its targets' sites, whose URLs it takes as hop-0 pages (``idcrawl.core.sitemaps``)
    sitemaps: SitemapSpec | None = None
    # -- the second pass (issue 30): redirects, off-site counting, canonicalisation, traps
    redirect_hops: bool = True
    offsite: OffSite = field(default_factory=lambda: OffSite.HOST)
    canonicalise: Canonicalise = field(default_factory=lambda: Canonicalise())
    traps: Traps = field(default_factory=lambda: Traps())
    # -- signatures per crawl profile (issue 31)
    signature: str = "body"
    signature_drop: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Traps:
    """A crawl profile's limits on URLs that crawler traps make (Heritrix's TooManyPathSegments and
    PathologicalPath decide rules, and its URI length cap): a URL past one is out of scope, counted
    in ``idcrawl/scope/traps/<rule>``. The defaults leave real sites alone: 32 path segments
    (Heritrix: 20), a segment 3 times in a row (Heritrix refuses the third: ``/a/a/a/``; here
    ``/a/a/a/a/``), 2083 characters (Heritrix's and old browsers' cap). 0: no limit."""

    max_path_segments: int = 32
    max_segment_repeats: int = 3
    max_url_length: int = 2083

    def refuses(self, url: str) -> str | None:
        """The rule ``url`` (canonical) breaks: ``url_length``, ``path_segments``, ``repeated_segment``; None."""
        if self.max_url_length and len(url) > self.max_url_length:
            return "url_length"
        segments = [s for s in urlsplit(url).path.split("/") if s]
        if self.max_path_segments and len(segments) > self.max_path_segments:
            return "path_segments"
        if self.max_segment_repeats:
            run = 1
            for before, segment in pairwise(segments):
                run = run + 1 if segment == before else 1
                if run > self.max_segment_repeats:
                    return "repeated_segment"
        return None


#: The trap rules, as :meth:`Traps.refuses` names them (the stats' ``idcrawl/scope/traps/<rule>``).
TRAP_RULES = ("url_length", "path_segments", "repeated_segment")


# -- URLs: canonical form, hosts, registered domains ---------------------------------------------


@lru_cache(maxsize=1)
def _suffixes() -> tldextract.TLDExtract:
    """The public-suffix list: tldextract's bundled snapshot, never fetched (no network, no cache files).

    Imported on first use: tldextract brings ``requests`` and ``urllib3`` (their import time), which a
    crawl without registered-domain scope rules never needs.
    """
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


#: The ports a URL's scheme implies: written out, they are dropped (``http://h:80/`` is ``http://h/``).
DEFAULT_PORTS = {"http": 80, "https": 443}


def canonical(url: str) -> str:
    """The form URLs are compared, deduplicated and stored in: w3lib's ``canonicalize_url`` (query
    arguments sorted, percent-encoding normalised, the fragment dropped), with the host lower-cased
    and the scheme's default port (http 80, https 443) dropped."""
    result = canonicalize_url(url)
    parts = urlsplit(result)
    try:
        port = parts.port
    except ValueError:
        return result
    if port is not None and DEFAULT_PORTS.get(parts.scheme) == port:
        netloc = parts.netloc.rsplit(":", 1)[0]
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return result


@dataclass(frozen=True, slots=True)
class Canonicalise:
    """A crawl profile's own canonicalisation rules, on top of :func:`canonical` (``canonicalise``
    in a ``[[crawl_profiles]]`` table): ``drop_query``: query keys dropped, by name or glob
    (``utm_*``, ``jsessionid``; case-insensitive); ``strip_www``: a host's leading ``www.`` dropped.
    A link is canonicalised with the rules of every crawl profile of its page's target
    (:meth:`JobScope.canonical_for`)."""

    drop_query: tuple[str, ...] = ()
    strip_www: bool = False

    def __bool__(self) -> bool:
        return bool(self.drop_query) or self.strip_www

    def merged(self, other: Canonicalise) -> Canonicalise:
        return Canonicalise(tuple(dict.fromkeys(self.drop_query + other.drop_query)),
                            self.strip_www or other.strip_www)

    def apply(self, url: str) -> str:
        """``url`` (canonical) with these rules applied (canonical again)."""
        if not self:
            return url
        parts = urlsplit(url)
        query = parts.query
        if self.drop_query and query:
            kept = [pair for pair in query.split("&") if not any(
                fnmatchcase(unquote_plus(pair.split("=", 1)[0]).lower(), pattern.lower())
                for pattern in self.drop_query)]
            query = "&".join(kept)
        netloc = parts.netloc
        if self.strip_www:
            user, at, hostport = netloc.rpartition("@")
            if hostport.startswith("www.") and hostport.count(".") >= 2 and registered_domain(
                    hostport.partition(":")[0]) != hostport.partition(":")[0]:  # www.co.uk keeps its www
                netloc = f"{user}{at}{hostport[4:]}"
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


@lru_cache(maxsize=1024)
def _canonical_seed(url: str) -> str:
    """:func:`canonical` of a seed URL (asked for every link of every page)."""
    return canonical(url)


@lru_cache(maxsize=1 << 16)
def host_of(url: str) -> str:
    """The host name of ``url``, lower case, without a trailing dot ("" when it has none)."""
    return (urlsplit(url).hostname or "").rstrip(".")


@lru_cache(maxsize=4096)
def registered_domain(host: str) -> str:
    """The host's registered domain by the public-suffix list (``www.db.no`` -> ``db.no``,
    ``www.bbc.co.uk`` -> ``bbc.co.uk``); a host under no known suffix (an IP address, ``a.test``)
    is its own domain."""
    parts = _suffixes()(host)
    return f"{parts.domain}.{parts.suffix}" if parts.domain and parts.suffix else host


def default_prefix(seed_url: str) -> str:
    """A ``prefix`` crawl profile's prefix when it lists none: the seed URL up to its path's last '/'."""
    parts = urlsplit(canonical(seed_url))
    path = parts.path[: parts.path.rfind("/") + 1] or "/"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


# -- hops ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class Hops:
    """How far a URL is from its target's hop-0 pages (the seed's depth), by the shortest path known.

    ``hops`` counts every link followed. ``offsite`` is the second counter of the seed's last
    section: 0 while each link of the path stayed on its referrer's host; the first link to another
    host makes it 1, and from there every link adds 1 (wherever it goes). Ordered by (hops, offsite):
    the smaller is the better path.
    """

    hops: int = 0
    offsite: int = 0

    def follow(self, referrer_url: str, url: str, *, by_domain: bool = False) -> Hops:
        """The counters of ``url`` reached by a link on the page ``referrer_url`` (whose counters these are);
        ``by_domain``: the off-site counter starts on a change of registered domain, not of host
        (:meth:`JobScope.offsite_by_domain`)."""
        if self.offsite > 0:
            leaves = True
        elif by_domain:
            leaves = registered_domain(host_of(url)) != registered_domain(host_of(referrer_url))
        else:
            leaves = host_of(url) != host_of(referrer_url)
        return Hops(self.hops + 1, self.offsite + 1 if leaves else 0)

    def redirect(self, referrer_url: str, url: str, *, hop: bool = True, by_domain: bool = False) -> Hops:
        """The counters of ``url`` that ``referrer_url`` redirects to: a link (:meth:`follow`), except
        that with ``hop`` False (every crawl profile's ``redirect_hops = false``) the hops stay; the
        off-site counter follows the host change all the same. A hop-0 page's redirect leads to a hop-0
        page (both counters 0), as Heritrix's ``seedsRedirectNewSeeds``: ``http://a/`` -> ``https://a/``
        does not push a target's whole walk one hop further."""
        if self == SEED:
            return self
        followed = self.follow(referrer_url, url, by_domain=by_domain)
        return followed if hop else Hops(self.hops, followed.offsite)


#: A seed's page: hop 0.
SEED = Hops(0, 0)


# -- scope rules -----------------------------------------------------------------------------------


def rule_accepts(crawl_profile: CrawlProfile, seed_url: str, url: str) -> bool:
    """The base rule and the include regexes (not hops, schemes or exclude): is ``url`` on the
    crawl profile's site, relative to the seed ``seed_url``? Both URLs canonical."""
    if any(pattern.search(url) for pattern in crawl_profile.include):
        return True
    kind = crawl_profile.kind
    if kind is ScopeKind.ANY:
        return True
    if kind is ScopeKind.HOST:
        return host_of(url) == host_of(seed_url)
    if kind is ScopeKind.DOMAIN:
        return registered_domain(host_of(url)) == registered_domain(host_of(seed_url))
    prefixes = crawl_profile.url_prefixes or (default_prefix(seed_url),)
    return any(url.startswith(prefix) for prefix in prefixes)


def in_scope(crawl_profile: CrawlProfile, seed_url: str, url: str, hops: Hops) -> bool:
    """Is ``url`` (canonical) with counters ``hops`` in the crawl profile's scope relative to ``seed_url``?

    Its scheme is allowed, no ``exclude`` regex matches, ``hops.hops <= max_hops``, ``hops.offsite
    <= max_offsite_hops`` (when set), no trap rule refuses it (:class:`Traps`), and
    :func:`rule_accepts`. ``enabled`` is not looked at:
    deactivation postpones, it does not take a URL out of scope (:func:`check_dispatch`).
    """
    if hops.hops > crawl_profile.max_hops:
        return False
    if crawl_profile.max_offsite_hops is not None and hops.offsite > crawl_profile.max_offsite_hops:
        return False
    if urlsplit(url).scheme not in crawl_profile.schemes:
        return False
    if any(pattern.search(url) for pattern in crawl_profile.exclude):
        return False
    if crawl_profile.traps.refuses(url) is not None:
        return False
    return rule_accepts(crawl_profile, seed_url, url)


@dataclass(frozen=True, slots=True)
class Seed:
    """A target as the scope sees it: its name, its seed URL (a page target's page; an id target's
    first id page), its crawl profiles and ``enabled``."""

    name: str
    url: str
    crawl_profiles: tuple[str, ...] = ()
    enabled: bool = True
    #: the target's own ``sitemaps`` (``idcrawl.core.sitemaps``; its crawl profiles may have theirs)
    sitemaps: SitemapSpec | None = None


@dataclass(frozen=True)
class JobScope:
    """The crawl scope of one job: its seeds (its targets), crawl profiles and collections, by name
    (job file order); ``pages``: the names of the seeds that are page targets (started at hop 0)."""

    seeds: dict[str, Seed] = field(default_factory=dict)
    crawl_profiles: dict[str, CrawlProfile] = field(default_factory=dict)
    collections: dict[str, Collection] = field(default_factory=dict)
    pages: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        """True when some target has a crawl profile or is a page target (a plain id crawl has no scope)."""
        return bool(self.pages) or any(seed.crawl_profiles for seed in self.seeds.values())

    def signature_of(self, profiles: Iterable[str]) -> tuple[str, tuple[str, ...]]:
        """The signature keys (``signature``, ``signature_drop``) of a page harvested for ``profiles`` (its
        crawl profiles, in their order): the first of them that sets any; the SHA-1 of the body if none."""
        for name in profiles:
            profile = self.crawl_profiles.get(name)
            if profile is not None and (profile.signature != "body" or profile.signature_drop):
                return profile.signature, profile.signature_drop
        return "body", ()

    def scoped(self, owner: str, url: str, hops: Hops) -> tuple[str, ...]:
        """The crawl profiles of the seed ``owner`` that ``url`` with ``hops`` is in scope of
        (enabled or not), in the seed's order; a deleted crawl profile contributes nothing."""
        seed = self.seeds[owner]
        seed_url = self.seed_url(owner)
        return tuple(name for name in seed.crawl_profiles
                     if name in self.crawl_profiles and in_scope(self.crawl_profiles[name], seed_url, url, hops))

    def seed_url(self, owner: str) -> str:
        """The canonical URL of the seed ``owner``, its crawl profiles' canonicalisation rules applied."""
        url = self._seed_urls.get(owner)
        if url is None:
            url = self._seed_urls[owner] = self.canonical_for(owner).apply(_canonical_seed(self.seeds[owner].url))
        return url

    @cached_property
    def _seed_urls(self) -> dict[str, str]:
        return {}

    def canonical_for(self, owner: str | None) -> Canonicalise:
        """The canonicalisation rules links of ``owner``'s pages get: those of all its crawl profiles."""
        rules = Canonicalise()
        seed = self.seeds.get(owner) if owner is not None else None
        for name in seed.crawl_profiles if seed is not None else ():
            profile = self.crawl_profiles.get(name)
            if profile is not None:
                rules = rules.merged(profile.canonicalise)
        return rules

    def trap_of(self, owner: str, url: str) -> str | None:
        """The trap rule that keeps ``url`` (canonical) out of the scope of every crawl profile of
        ``owner`` (the first profile's rule); None when some crawl profile's traps let it pass."""
        seed = self.seeds.get(owner)
        rules = [self.crawl_profiles[name].traps.refuses(url) for name in (seed.crawl_profiles if seed else ())
                 if name in self.crawl_profiles]
        return rules[0] if rules and all(rules) else None

    def offsite_by_domain(self, owner: str) -> bool:
        """Does the off-site counter of ``owner``'s links start on a change of registered domain? Only
        when every crawl profile of the target says ``offsite = "domain"``: a URL has one off-site counter
        per path, and counting by host (the stricter) never walks a host profile further than it admits."""
        seed = self.seeds.get(owner)
        names = [name for name in (seed.crawl_profiles if seed else ()) if name in self.crawl_profiles]
        return bool(names) and all(self.crawl_profiles[name].offsite is OffSite.DOMAIN for name in names)

    def redirect_hops(self, owner: str) -> bool:
        """Does a redirect of ``owner``'s pages count as a hop? Yes unless every crawl profile of the
        target says ``redirect_hops = false`` (a profile is never walked further than it admits)."""
        seed = self.seeds.get(owner)
        names = [name for name in (seed.crawl_profiles if seed else ()) if name in self.crawl_profiles]
        return not names or any(self.crawl_profiles[name].redirect_hops for name in names)
    def active(self, name: str) -> bool:
        """Is the crawl profile ``name`` there and enabled, and its collection (if any) there and enabled?"""
        profile = self.crawl_profiles.get(name)
        if profile is None or not profile.enabled:
            return False
        collection = profile.collection
        return collection is None or (collection in self.collections and self.collections[collection].enabled)

    def filed(self, crawl_profiles: Iterable[str]) -> tuple[str | None, tuple[str, ...]]:
        """Where a URL in the scope of ``crawl_profiles`` is filed: the collection it contends under, and
        the crawl profiles (those the job has) in filing order, the first its yield group's. The rule,
        independent of the order the job file lists them in: active crawl profiles first
        (:meth:`active`); then the group least willing to give way: the collection with the smallest
        yield probability (no collection: 0), then the collection name (none first), then the crawl
        profile with the smallest yield probability, then its name."""
        known = [name for name in dict.fromkeys(crawl_profiles) if name in self.crawl_profiles]

        def rank(name: str) -> tuple[bool, float, str, float, str]:
            profile = self.crawl_profiles[name]
            collection = self.collections.get(profile.collection or "")
            return (not self.active(name), collection.yield_probability if collection is not None else 0.0,
                    profile.collection or "", profile.yield_probability, name)

        order = tuple(sorted(known, key=rank))
        return (self.crawl_profiles[order[0]].collection if order else None), order

    def collection_of(self, crawl_profiles: Iterable[str]) -> str | None:
        """The collection a URL in the scope of ``crawl_profiles`` is filed under (:meth:`filed`)."""
        return self.filed(crawl_profiles)[0]


#: Crawl profile fields that do not change what a walk admits (left out of :func:`scope_marks`).
_NOT_SCOPE = frozenset({"yield_probability", "revisit", "signature", "signature_drop"})


def scope_marks(scope: JobScope) -> dict[str, str]:
    """Per seed, a fingerprint of what its walk admits: its URL, and each of its crawl profiles' fields
    but the yield probability, the revisit and the signature keys (a field added later counts by
    itself). A seed whose mark differs from the last run's walks its stored links again (docs/scope.md,
    "Scope changes")."""
    marks = {}
    for name, seed in scope.seeds.items():
        parts = [seed.url]
        for profile_name in seed.crawl_profiles:
            profile = scope.crawl_profiles.get(profile_name)
            parts.append(repr((profile_name, None if profile is None else tuple(
                (f.name, getattr(profile, f.name)) for f in fields(profile) if f.name not in _NOT_SCOPE))))
        marks[name] = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return marks


# -- seed ownership (the seed's "processing outlinks", step 2.3, table a-f) ------------------------


class Owner(StrEnum):
    CONTEXT = "context"  # the seed whose page linked to the URL now
    QUEUED = "queued"  # the seed the URL is queued with


def _segments(url: str) -> tuple[str, tuple[str, ...]]:
    parts = urlsplit(canonical(url))
    return host_of(url), tuple(s for s in parts.path.split("/") if s)


def specificity(seed_url: str, url: str) -> int:
    """How specifically the seed ``seed_url`` covers ``url``: -1 unless it is on the same host and
    its path segments begin ``url``'s; else 1 + the number of the seed's path segments
    (``http://www.db.no`` -> 1, ``http://www.db.no/artikkel`` -> 2 for ``http://www.db.no/artikkel/to``)."""
    seed_host, seed_path = _segments(seed_url)
    host, path = _segments(url)
    if seed_host != host or path[: len(seed_path)] != seed_path:
        return -1
    return 1 + len(seed_path)


def ownership_case(url: str, context_seed: str, queued_seed: str) -> int:
    """Which case (1..6) of the seed's step 2.3 a URL in scope of two seeds falls in.

    1: the URL is the context seed; 2: it is the queued seed; 3: it shares its registered domain
    with both; 4: with the context seed only; 5: with the queued seed only; 6: with neither.
    """
    link = canonical(url)
    if link == canonical(context_seed):
        return 1
    if link == canonical(queued_seed):
        return 2
    domain = registered_domain(host_of(link))
    with_context = registered_domain(host_of(context_seed)) == domain
    with_queued = registered_domain(host_of(queued_seed)) == domain
    if with_context and with_queued:
        return 3
    if with_context:
        return 4
    return 5 if with_queued else 6


@dataclass(frozen=True, slots=True)
class Claimant:
    """A seed that has a URL in the scope of its crawl profiles by some path (a *claim*): its name,
    its seed URL, whether the URL is one of its hop-0 pages, and the next harvest time it would give
    the URL (:func:`idcrawl.core.urlqueue.next_harvest_of`; 0 for a URL not harvested yet)."""

    name: str
    seed_url: str
    hop0: bool = False
    next_harvest: float = 0.0


def owner_of(url: str, claimants: Sequence[Claimant]) -> Claimant:
    """The seed that owns ``url`` among every seed that claims it (the seed's step 2.3 over all the
    paths known, not only the last two offers): the least of the ranks

    1. the URL is the claimant's hop-0 page (its seed URL, or a found id page): first (cases 1, 2);
    2. when two claimants or more share the URL's registered domain, those of them whose seed is
       more specific (:func:`specificity`) first; the others count as not specific (case 3);
    3. the earliest next harvest time (cases 3-6);
    4. the tie rule: the claimant whose name is the smallest (in code point order).

    For two claimants this is :func:`choose_owner`, the seed's table a-f. The rank does not depend on
    the order the claims were made in, so neither does the owner (docs/scope.md, "Who owns a URL").
    """
    if not claimants:
        raise ValueError("no claimant")
    link = canonical(url)
    domain = registered_domain(host_of(link))
    shared = [registered_domain(host_of(_canonical_seed(c.seed_url))) == domain for c in claimants]
    by_spec = sum(shared) >= 2

    def rank(i: int) -> tuple[bool, int, float, str]:
        c = claimants[i]
        hop0 = c.hop0 or link == _canonical_seed(c.seed_url)
        spec = specificity(c.seed_url, link) if by_spec and shared[i] else -1
        return (not hop0, -spec, c.next_harvest, c.name)

    return claimants[min(range(len(claimants)), key=rank)]


def choose_owner(url: str, context_seed: str, queued_seed: str, *, context_next: float = 0.0,
                 queued_next: float = 0.0, context_name: str = "", queued_name: str = "") -> Owner:
    """The seed that owns ``url``, reached from ``context_seed`` while queued with ``queued_seed``
    (:func:`owner_of` of the two).

    The specific seed wins (cases 1, 2); sharing the domain with both, the most specific seed
    (:func:`specificity`) wins (case 3); otherwise (cases 4-6, and a tie in 3) the seed that gives
    the earliest next harvest time (``context_next``, ``queued_next``) wins; a tie goes to the
    smaller name (``context_name``, ``queued_name``), and keeps the queued seed when they are equal.
    """
    queued = Claimant(queued_name, queued_seed, next_harvest=queued_next)
    context = Claimant(context_name, context_seed, next_harvest=context_next)
    return Owner.QUEUED if owner_of(url, [queued, context]) is queued else Owner.CONTEXT


# -- per-URL records, harvest checks at dispatch ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class UrlRecord:
    """A queued (or harvested) outlink and its counters (the seed's context of a queued URL).

    ``owner``: the target (seed) it belongs to; ``collection`` and ``crawl_profiles``: those it was
    queued in; ``hops``; ``next_harvest``/``last_harvest`` (seconds on the job's clock, None: not
    yet); ``not_found``, ``errors``: consecutive not-found answers and errors; ``cycles``: how many
    times it was harvested; ``priority``: its sitemap ``<priority>`` (0.5, the protocol's default, for a
    URL no sitemap lists): within its yield group the highest is taken first (docs/scope.md "Sitemaps").
    ``checksum``, ``etag``, ``last_modified``, ``capture``, ``read_at``: what its last found harvest read
    (:class:`PageRead`): its signature (a revisit with another one is news: an item), the validators a
    revisit sends, its stored WARC capture ``(uri, WARC-Date, payload digest)`` and when that body was
    read (a revisit after ``IDCRAWL_RECRAWL_REFETCH_AFTER`` is unconditional: :func:`url_body_due`);
    None: none yet.
    """

    url: str
    owner: str
    collection: str | None
    crawl_profiles: tuple[str, ...]
    hops: Hops = SEED
    next_harvest: float | None = None
    last_harvest: float | None = None
    not_found: int = 0
    errors: int = 0
    cycles: int = 0
    priority: float = DEFAULT_PRIORITY
    checksum: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    capture: tuple[str, str, str] | None = None
    read_at: float | None = None


@dataclass(frozen=True, slots=True)
class PageRead:
    """What a found harvest of a crawl-scope page read (a 200): its signature (``checksum``), its
    validators, the WARC response record written of it (``capture``; None: none written, the
    stored capture stays) and when (``at``, the job's clock). A 304 reads nothing: the stored
    signature, validators, capture and time stay."""

    checksum: str | None
    etag: str | None = None
    last_modified: str | None = None
    capture: tuple[str, str, str] | None = None
    at: float | None = None


def read_into(record: UrlRecord, read: PageRead | None) -> UrlRecord:
    """``record`` after a found harvest that read ``read`` (None: a 304, or nothing read: as it is)."""
    if read is None:
        return record
    return replace(record, checksum=read.checksum, etag=read.etag, last_modified=read.last_modified,
                   capture=read.capture or record.capture, read_at=record.read_at if read.at is None else read.at)


def url_body_due(record: UrlRecord, now: float, refetch_after: float) -> bool:
    """Is a crawl-scope page's revisit at ``now`` a forced unconditional refetch (no validators), as an
    id page's (:func:`idcrawl.core.recrawl.body_due`)? Yes when it has a stored body whose read is more
    than ``refetch_after`` seconds old (0: never), or of unknown age."""
    seen = -math.inf if record.read_at is None else record.read_at
    return record.checksum is not None and body_older(seen, now, refetch_after)


def has_news(stored: str | None, checksum: str | None) -> bool:
    """Is a crawl-scope page read with signature ``checksum`` news (an item), its record's stored one
    being ``stored``? Yes when the signature differs from it (none stored: a first harvest), as an
    id page's (:func:`idcrawl.core.recrawl.visit_page`)."""
    return stored is None or checksum != stored


class Harvest(StrEnum):
    """What an answer to a harvested URL was, for its counters."""

    FOUND = "found"
    NOT_FOUND = "not_found"
    ERROR = "error"


def harvested(record: UrlRecord, result: Harvest, now: float, next_harvest: float | None = None) -> UrlRecord:
    """The record after a harvest (the seed's "processing the URL itself"): last harvest = now,
    the not-found counter incremented on a not-found answer and reset by any other answer, the error
    counter incremented on an error and reset by any answer, hops left as they are, one cycle more."""
    return replace(
        record,
        last_harvest=now,
        next_harvest=next_harvest,
        not_found=record.not_found + 1 if result is Harvest.NOT_FOUND else (
            record.not_found if result is Harvest.ERROR else 0),
        errors=record.errors + 1 if result is Harvest.ERROR else 0,
        cycles=record.cycles + 1,
    )


class Verdict(StrEnum):
    HARVEST = "harvest"
    POSTPONE = "postpone"  # deactivated: kept, with a next harvest time in the future
    DROP = "drop"  # deleted or out of scope: taken out of the queue
    REOWN = "reown"  # its target was deleted; another target's crawl profiles take it
    WAIT = "wait"  # harvested, its revisit not due yet (step 6.3): kept until ``next_harvest``


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    record: UrlRecord
    reason: str


def check_dispatch(record: UrlRecord, scope: JobScope, now: float, postpone_for: float) -> Decision:
    """The seed's "harvesting a queued URL", steps 1-7, against the job's current scope.

    A URL belongs to every collection of every crawl profile of its target that has it in scope.

    1. Its target is gone: another target with a crawl profile that has the URL in scope (at the
       record's hops) takes it (``REOWN``, the first in job order), else ``DROP``.
    2. Every collection of its crawl profiles is gone: ``DROP``. 3. Its target is deactivated:
       ``POSTPONE`` (next harvest ``now + postpone_for``). 5-6. None of the target's crawl profiles
       has it in scope: ``DROP``; 4, 6.2: only crawl profiles deactivated or of deactivated
       collections: ``POSTPONE``. 6.3. Harvested before
       (its last answer a found page) with a revisit frequency (:func:`revisit_of`, the enabled crawl
       profiles that have it in scope) and ``last_harvest + revisit > now``: ``WAIT``, its next harvest
       ``last_harvest + revisit`` (a crawl profile slowed down since the URL was queued puts it back).
       7. ``HARVEST`` with the active crawl profiles that have it in scope, filed under the collection
       :meth:`JobScope.filed` says.
    """
    def postpone(reason: str) -> Decision:
        return Decision(Verdict.POSTPONE, replace(record, next_harvest=now + postpone_for), reason)

    def held(names: Iterable[str]) -> tuple[str, ...]:  # of collections the job still has
        return tuple(name for name in names if (collection := scope.crawl_profiles[name].collection) is None
                     or collection in scope.collections)

    if record.owner not in scope.seeds:
        for seed in scope.seeds.values():
            names = held(scope.scoped(seed.name, record.url, record.hops))
            if names:
                collection, names = scope.filed(names)
                return Decision(Verdict.REOWN, replace(record, owner=seed.name, collection=collection,
                                                       crawl_profiles=names), f"target {record.owner!r} deleted")
        return Decision(Verdict.DROP, record, f"target {record.owner!r} deleted")
    scoped = scope.scoped(record.owner, record.url, record.hops)
    names = held(scoped)
    if not names and (scoped or (record.collection is not None and record.collection not in scope.collections)):
        gone = sorted({scope.crawl_profiles[name].collection or "" for name in scoped} or {record.collection or ""})
        return Decision(Verdict.DROP, record, f"collection {', '.join(map(repr, gone))} deleted")
    if not scope.seeds[record.owner].enabled:
        return postpone(f"target {record.owner!r} deactivated")
    if not names:
        return Decision(Verdict.DROP, record, "in the scope of none of its target's crawl profiles")
    active = tuple(name for name in names if scope.active(name))
    if not active:
        if all(scope.crawl_profiles[name].enabled for name in names):
            off = sorted({scope.crawl_profiles[name].collection or "" for name in names})
            return postpone(f"collection {', '.join(map(repr, off))} deactivated")
        return postpone(f"crawl profiles {', '.join(names)} deactivated")
    collection, active = scope.filed(active)
    if (collection, active) != (record.collection, record.crawl_profiles):
        record = replace(record, collection=collection, crawl_profiles=active)
    return check_due(record, scope, now)


def check_due(record: UrlRecord, scope: JobScope, now: float) -> Decision:
    """Step 6.3 of :func:`check_dispatch` for a ``record`` in scope of enabled crawl profiles whose
    last answer was a found page: ``WAIT`` (next harvest ``last_harvest + revisit``) when its revisit
    frequency (:func:`revisit_of`) is not over at ``now``, or (record unchanged) when it has none:
    harvested once. Otherwise (never harvested, or "not found" or an error last) ``HARVEST``."""
    if record.last_harvest is None or record.not_found or record.errors:
        return Decision(Verdict.HARVEST, record, "")
    revisit = revisit_of(record, scope)
    if revisit is None:
        return Decision(Verdict.WAIT, record, "harvested once: no revisit frequency")
    if record.last_harvest + revisit > now:
        return Decision(Verdict.WAIT, replace(record, next_harvest=record.last_harvest + revisit), "not due")
    return Decision(Verdict.HARVEST, record, "")


def revisit_of(record: UrlRecord, scope: JobScope) -> float | None:
    """The seconds from ``record``'s last harvest to its next: the shortest ``revisit`` among its
    crawl profiles (``record.crawl_profiles``: those that have it in scope) that are active
    (:meth:`JobScope.active`); None: it is harvested once. A hop-0 page of an id target (its lanes fetch it) is
    never revisited here."""
    if record.hops == SEED and record.owner not in scope.pages:
        return None
    profiles = scope.crawl_profiles
    revisits = [profile.revisit for name in record.crawl_profiles if (profile := profiles.get(name)) is not None
                and profile.revisit is not None and scope.active(name)]
    return min(revisits, default=None)


# -- yields: who gets a contended host slot --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Candidate(Generic[K]):
    """A URL ready for a host slot: its key, collection and crawl profile with their yield probabilities."""

    key: K
    collection: str | None
    crawl_profile: str
    collection_yield: float = 0.0
    crawl_profile_yield: float = 0.0


def _pick_group(pool: list[Candidate[K]], group: Callable[[Candidate[K]], object],
                yield_of: Callable[[Candidate[K]], float], rng: random.Random) -> list[Candidate[K]]:
    """One level of :func:`choose`: the candidates of the group that keeps the slot."""
    while True:
        groups = {group(c) for c in pool}
        if len(groups) <= 1:
            return pool
        drawn = pool[rng.randrange(len(pool))]
        if rng.random() >= yield_of(drawn):
            return [c for c in pool if group(c) == group(drawn)]
        pool = [c for c in pool if group(c) != group(drawn)]  # its group gives way


def choose(candidates: Sequence[Candidate[K]], rng: random.Random) -> Candidate[K]:
    """The URL that gets one host slot when ``candidates`` (all ready on that host) contend for it.

    The model (seed 003, "priority between collections / crawl profiles / URLs"): draw one of the
    remaining candidates uniformly at random; if another collection is among them, the drawn URL's
    collection gives way with its ``yield_probability`` (all its URLs leave the draw, and the draw
    starts again among the rest), else it keeps the slot. The last collection left keeps it. Then the
    same among the crawl profiles of the collection that kept the slot, and last a uniform draw among
    its URLs of the crawl profile that kept it. Without contention a yield probability does nothing.

    The seed's example: 1 "frontpages" URL and 19 "daily" URLs (yield 0.9) in one collection:
    "frontpages" gets the slot with probability 1/20 + 19/20 * 0.9 = 0.905, about 18 times in 20
    (:func:`expected_shares`). ``rng``: a seeded ``random.Random`` makes a run reproducible.
    """
    if not candidates:
        raise ValueError("no candidate for the slot")
    pool = _pick_group(list(candidates), lambda c: c.collection, lambda c: c.collection_yield, rng)
    pool = _pick_group(pool, lambda c: c.crawl_profile, lambda c: c.crawl_profile_yield, rng)
    return pool[rng.randrange(len(pool))]


def _group_shares(counts: Mapping[T, int], yields: Mapping[T, float]) -> dict[T, float]:
    """The exact probability that each group keeps the slot in one level of :func:`choose`."""
    shares = dict.fromkeys(counts, 0.0)

    def walk(left: frozenset[T], weight: float) -> None:
        if len(left) == 1:
            shares[next(iter(left))] += weight
            return
        total = sum(counts[g] for g in left)
        for g in left:
            drawn = weight * counts[g] / total
            shares[g] += drawn * (1.0 - yields[g])
            walk(left - {g}, drawn * yields[g])

    walk(frozenset(counts), 1.0)
    return shares


def expected_shares(candidates: Sequence[Candidate[K]]) -> dict[tuple[str | None, str], float]:
    """The probability that :func:`choose` gives the slot to each (collection, crawl profile)."""
    by_collection: dict[str | None, list[Candidate[K]]] = {}
    for c in candidates:
        by_collection.setdefault(c.collection, []).append(c)
    collection_shares = _group_shares({k: len(v) for k, v in by_collection.items()},
                                      {k: v[0].collection_yield for k, v in by_collection.items()})
    result: dict[tuple[str | None, str], float] = {}
    for collection, members in by_collection.items():
        counts: dict[str, int] = {}
        yields: dict[str, float] = {}
        for c in members:
            counts[c.crawl_profile] = counts.get(c.crawl_profile, 0) + 1
            yields[c.crawl_profile] = c.crawl_profile_yield
        for name, share in _group_shares(counts, yields).items():
            result[(collection, name)] = collection_shares[collection] * share
    return result
