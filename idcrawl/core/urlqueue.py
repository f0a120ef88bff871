"""The durable URL queue of crawl scope (seed 003): outlinks queued, taken host by host, harvested.

:class:`UrlQueue` is the interface the Scrapy shell drives; :class:`MemoryUrlQueue` implements it in
memory. No Scrapy; times are passed in. The states of a URL and the life of a run: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Protocol, TypeVar

from idcrawl.core.scope import (
    SEED,
    Claimant,
    Collection,
    CrawlProfile,
    Decision,
    Harvest,
    Hops,
    JobScope,
    PageRead,
    UrlRecord,
    Verdict,
    check_dispatch,
    check_due,
    harvested,
    host_of,
    owner_of,
    read_into,
    revisit_of,
    scope_marks,
)
from idcrawl.core.sitemaps import DEFAULT_PRIORITY

__all__ = [
    "Group",
    "MemoryUrlQueue",
    "QueueState",
    "QueuedUrl",
    "Reconciled",
    "UrlCount",
    "UrlQueue",
    "check_queued",
    "choose_group",
    "claims_of",
    "count_urls",
    "group_of",
    "next_harvest_of",
    "own",
    "reconcile",
    "waits",
    "walk_stored",
]

N = TypeVar("N")

#: A seed's claim on a URL: the seed (target) name and the counters of one path of its walk to it.
Claim = tuple[str, Hops]

#: A URL's yield group on its host: (collection, crawl profile): its record's collection and the
#: first of its crawl profiles (the one it is filed under).
Group = tuple[str | None, str]


class QueueState(StrEnum):
    QUEUED = "queued"
    POSTPONED = "postponed"
    TAKEN = "taken"
    HARVESTED = "harvested"


@dataclass(frozen=True, slots=True)
class QueuedUrl:
    """One URL of the queue: its record and state; ``paths``: the counters of every path of its owner's
    walk to it that no other beats on both hops and off-site hops (its record shows the fewest hops);
    ``links``: a found page's canonical links (None: not fetched yet), followed again when a better
    path turns up; ``claims``: (seed, counters) of every seed's paths to it, the owner's included, each
    seed's unbeaten ones, sorted (empty: only the owner's ``paths``, as a state written before claims)."""

    record: UrlRecord
    state: QueueState = QueueState.QUEUED
    paths: tuple[Hops, ...] = (SEED,)
    links: tuple[str, ...] | None = None
    claims: tuple[Claim, ...] = ()

    @property
    def url(self) -> str:
        return self.record.url


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What :meth:`UrlQueue.start` did to the stored URLs against the current job file.

    ``dropped``: queued or postponed URLs taken out of the queue, by cause (``target``: its target
    deleted and no other takes it; ``collection``: its collection deleted; ``scope``: in the scope
    of none of its target's crawl profiles any more); ``forgotten``: harvested URLs dropped the same
    way (their records); ``reowned``: URLs another target took over (its target deleted);
    ``postponed``: URLs kept for a later run (deactivated); ``released``: postponed URLs active
    again; ``requeued``: URLs harvested with "not found" or an error, or taken and never answered,
    queued again; ``due``: harvested URLs whose revisit is due, queued again; ``not_due``: URLs
    queued for a revisit (or postponed) whose crawl profiles' revisit frequency now puts their next
    harvest later (a crawl profile slowed down: the seed's step 6.3), harvested until then;
    ``started``: URLs queued because their target's scope changed since the last run (a crawl profile
    assigned, activated again, widened: the seed's "how to start harvesting"; the stored links of the
    pages it claims are walked again in its new scope, :func:`~idcrawl.core.scope.scope_marks`).
    """

    dropped: Mapping[str, int] = field(default_factory=dict)
    forgotten: int = 0
    reowned: int = 0
    postponed: int = 0
    released: int = 0
    requeued: int = 0
    due: int = 0
    not_due: int = 0
    started: int = 0

    @classmethod
    def of_counts(cls, counts: Mapping[str, int], started: int) -> Reconciled:
        """From a start's event counts (the events :func:`reconcile` gives, ``dropped/<cause>`` included)
        and the number of URLs ``started``."""
        return cls(
            dropped={key.split("/", 1)[1]: n for key, n in sorted(counts.items()) if key.startswith("dropped/")},
            forgotten=counts.get("forgotten", 0), reowned=counts.get("reowned", 0),
            postponed=counts.get("postponed", 0), released=counts.get("released", 0),
            requeued=counts.get("requeued", 0), due=counts.get("due", 0), not_due=counts.get("not_due", 0),
            started=started,
        )


@dataclass(frozen=True, slots=True, order=True)
class UrlCount:
    """``count`` URLs of ``target``, ``crawl_profile`` (of ``collection``), at ``hops``, in ``state``
    (a URL in the scope of several crawl profiles is counted under each)."""

    target: str
    crawl_profile: str
    collection: str
    hops: int
    state: QueueState
    count: int


class UrlQueue(Protocol):
    """The outlink frontier of crawl scope: what the scope middleware and the scheduler drive.

    Implementations: :class:`MemoryUrlQueue` (one process; the SQLite store persists it), and a
    shared queue in Redis for a distributed job. ``now``: seconds on the job's clock.
    """

    #: the yield model's draws (seeded): a watching crawl's next wave goes on with the last one's
    rng: random.Random

    def start(self, scope: JobScope, now: float) -> Reconciled:
        """A run starts with the job file's ``scope``: every stored URL is checked against it."""
        ...

    def seed(self, owner: str, url: str, now: float, *, priority: float | None = None) -> QueuedUrl | None:
        """Queue ``url`` (canonical) as a hop-0 page of the target ``owner`` (a page target's page),
        ready now, or postponed when ``owner`` is deactivated. None: it already is ``owner``'s hop-0
        page (queued, postponed or harvested: a page is not fetched twice). ``priority``: a sitemap's
        ``<priority>`` of it, kept in its record (also when it was queued before; None: as it is)."""
        ...

    def fetched(self, url: str, links: Sequence[str], now: float, *, seed_of: str | None = None,
                hold: bool = False, read: PageRead | None = None) -> list[QueuedUrl]:
        """``url`` answered with a page whose canonical links are ``links``: its record counts a
        found harvest, and the links in scope of its owner's crawl profiles are queued. ``seed_of``:
        ``url`` is a hop-0 page of that target fetched elsewhere (an id target's found id page),
        recorded here as harvested. ``hold``: its links are kept and followed, but the page stays
        taken until :meth:`written` harvests it (its items are not written yet: a kill in between
        fetches it again). ``read``: what the harvest read (kept in its record with the found harvest,
        :func:`~idcrawl.core.scope.read_into`; None: a 304, the stored one stays). Returns the URLs queued
        or postponed now (new, or taken over from another target), for the stats."""
        ...

    def due_now(self, url: str, now: float) -> QueuedUrl | None:
        """Evidence that the harvested ``url`` changed since its last harvest (a sitemap's ``lastmod``,
        :mod:`idcrawl.sitemaps`): it is queued again now (postponed if deactivated), whatever its next
        harvest time. None: not in the queue, or not harvested (queued or taken already)."""
        ...

    def redirected(self, url: str, target: str, now: float, *, hop: bool = True) -> QueuedUrl | None:
        """``url`` (taken) answered with a redirect to ``target`` (canonical): a redirect is a link.
        ``url`` is harvested with ``target`` as its one link, offered at ``url``'s counters
        (:meth:`idcrawl.core.scope.Hops.redirect`; ``hop`` False: the hops stay). If that queued
        ``target`` just now (new, or taken over, and ready), it is taken for the caller, who follows
        the redirect: its entry is returned. None: not to be followed (out of scope, or already
        queued, taken or harvested: it is fetched once, by the queue)."""
        ...

    def written(self, url: str, now: float, read: PageRead | None = None) -> QueuedUrl | None:
        """The items of ``url``, fetched with ``hold`` at ``now``, are written: its found harvest is
        recorded (counters, cycles, last harvest ``now``, what it ``read``). None: not in the queue."""
        ...

    def failed(self, url: str, result: Harvest, now: float) -> QueuedUrl | None:
        """``url`` answered "not found" or failed (``result``): its counters; None: not in the queue."""
        ...

    def take(self, room: Callable[[str], bool], now: float) -> UrlRecord | None:
        """The next URL to fetch: of the next host (round robin) with URLs ready that ``room(host)``
        admits, the group the yield model chooses among them, and in that group one of the highest
        ``priority`` (:attr:`UrlRecord.priority`), drawn uniformly; marked taken. None: nothing ready
        on a host with room. Harvested URLs whose revisit is due at ``now`` are queued first."""
        ...

    def ready(self) -> int:
        """How many URLs are queued and ready (a crawl is not finished while some are)."""
        ...

    def get(self, url: str) -> QueuedUrl | None:
        """The entry of ``url``, or None."""
        ...

    def counts(self) -> list[UrlCount]:
        """The URLs by target, crawl profile, collection, hops and state (``scrapy idplan``)."""
        ...

    def next_harvest(self) -> float | None:
        """The earliest next harvest of the harvested URLs waiting for a revisit (watch mode wakes for it)."""
        ...


# -- pure rules both implementations share ---------------------------------------------------------


def group_of(record: UrlRecord) -> Group:
    """The yield group a URL contends in: its collection and the first of its crawl profiles."""
    return (record.collection, record.crawl_profiles[0] if record.crawl_profiles else "")


def _keep(counts: Mapping[N, int], yields: Mapping[N, float], rng: random.Random) -> N:
    """One level of the yield model over groups with ``counts`` ready URLs: the group that keeps the
    slot (a URL drawn at random; its group gives way with its yield probability while another is left)."""
    left = [name for name, n in counts.items() if n > 0]
    while len(left) > 1:
        drawn_at = rng.randrange(sum(counts[name] for name in left))
        drawn = left[-1]
        for name in left:
            drawn_at -= counts[name]
            if drawn_at < 0:
                drawn = name
                break
        if rng.random() >= yields.get(drawn, 0.0):
            return drawn
        left.remove(drawn)
    return left[0]


def choose_group(counts: Mapping[Group, int], scope: JobScope, rng: random.Random) -> Group:
    """The group whose URL gets a host slot when ``counts`` URLs of each group are ready on it:
    :func:`idcrawl.core.scope.choose` over counts (the same distribution, without a candidate per
    URL): collections first, then the crawl profiles of the collection that kept the slot; the URL
    itself is then drawn uniformly within the group. Yield probabilities come from ``scope``
    (a deleted collection or crawl profile yields 0)."""
    by_collection: dict[str | None, int] = {}
    for (collection, _), n in counts.items():
        by_collection[collection] = by_collection.get(collection, 0) + n
    collection_yields = {name: _collection(scope, name).yield_probability for name in by_collection}
    kept = _keep(by_collection, collection_yields, rng)
    profiles = {name: n for (collection, name), n in counts.items() if collection == kept}
    profile_yields = {name: _crawl_profile(scope, name).yield_probability for name in profiles}
    return (kept, _keep(profiles, profile_yields, rng))


def _collection(scope: JobScope, name: str | None) -> Collection:
    return scope.collections.get(name or "", Collection(name or ""))


def _crawl_profile(scope: JobScope, name: str | None) -> CrawlProfile:
    return scope.crawl_profiles.get(name or "", CrawlProfile(name or "", 0))


def check_queued(record: UrlRecord, scope: JobScope, now: float, postpone_for: float) -> Decision:
    """:func:`check_dispatch`, except that a target's own hop-0 page is never out of its scope (its
    revisit still checked: :func:`check_due`)."""
    decision = check_dispatch(record, scope, now, postpone_for)
    if (decision.verdict is Verdict.DROP and record.hops == SEED and record.owner in scope.seeds
            and decision.reason.startswith("in the scope of none")):
        seed = scope.seeds[record.owner]
        if not seed.enabled:
            return Decision(Verdict.POSTPONE, replace(record, next_harvest=now + postpone_for),
                            f"target {record.owner!r} deactivated")
        return check_due(record, scope, now)
    return decision


def reconcile(entry: QueuedUrl, scope: JobScope, now: float, postpone_for: float,
              stale: Container[str] = ()) -> tuple[QueuedUrl | None, tuple[str, ...]]:
    """One stored URL at a run's start against the job file's ``scope``: its new entry (None:
    dropped) and what happened to it, each of ``dropped/<cause>``, ``forgotten``, ``reowned``,
    ``postponed``, ``released``, ``requeued``, ``due``, ``not_due`` (the fields of :class:`Reconciled`).

    A URL taken and never answered, or harvested with "not found" or an error, is queued again; a
    found page stays harvested, unless its revisit is due (``due``). Then the checks at dispatch
    (:func:`check_dispatch`) against the current job file: dropped (a harvested URL's record is
    forgotten), re-owned, postponed, (a postponed URL whose target, collection and crawl profiles
    are active again) released, or (a URL queued for a revisit whose frequency is not over now: the
    seed's step 6.3) harvested again until its next harvest time (``not_due``).

    First its claims: those of targets deleted go, and those of the targets in ``stale`` (whose
    scope changed since the last run: :func:`~idcrawl.core.scope.scope_marks`) that their crawl
    profiles no longer admit; the owner is ranked again among the claimants left (``reowned``).
    """
    events: list[str] = []
    claims = claims_of(entry)
    kept = tuple(claim for claim in claims if claim[0] in scope.seeds and (
        claim[0] not in stale or claim[1] == SEED or scope.scoped(claim[0], entry.url, claim[1])))
    if kept and kept != claims:
        owned = own(entry, kept, scope)
        if owned.record.owner != entry.record.owner:
            events.append("reowned")
        entry = owned
    state = entry.state
    record = entry.record
    if state is QueueState.TAKEN or (
            state is QueueState.HARVESTED and (record.not_found or record.errors)):
        state = QueueState.QUEUED
        events.append("requeued")
    decision = check_queued(record, scope, now, postpone_for)
    if decision.verdict is Verdict.DROP:
        if state is QueueState.HARVESTED:
            return None, ("forgotten",)
        cause = decision.reason.split()[0]
        return None, (f"dropped/{cause if cause in ('target', 'collection') else 'scope'}",)
    record = decision.record
    if decision.verdict is Verdict.REOWN:
        events.append("reowned")
        decision = check_queued(record, scope, now, postpone_for)
        record = decision.record
    if state is QueueState.HARVESTED:
        if decision.verdict is Verdict.HARVEST and revisit_of(record, scope) is not None:
            events.append("due")
            return replace(entry, record=replace(record, next_harvest=None), state=QueueState.QUEUED), tuple(events)
        return replace(entry, record=record), tuple(events)
    if decision.verdict is Verdict.POSTPONE:
        if entry.state is not QueueState.POSTPONED:
            events.append("postponed")
        return replace(entry, record=record, state=QueueState.POSTPONED), tuple(events)
    if decision.verdict is Verdict.WAIT:
        events.append("not_due")
        return replace(entry, record=record, state=QueueState.HARVESTED), tuple(events)
    if entry.state is QueueState.POSTPONED:
        events.append("released")
    if record.next_harvest is not None:
        record = replace(record, next_harvest=None)
    if record is entry.record and entry.state is QueueState.QUEUED:  # as it was (most URLs of a big queue)
        return entry, tuple(events)
    return replace(entry, record=record, state=QueueState.QUEUED), tuple(events)


def next_harvest_of(state: QueueState, record: UrlRecord, scope: JobScope) -> float:
    """When a URL in ``state`` with ``record`` is harvested next, for seed ownership (cases 3-6):
    a found page at its last harvest + its revisit frequency (never: infinity), any other now (0)."""
    if state is not QueueState.HARVESTED or record.last_harvest is None or record.not_found or record.errors:
        return 0.0
    revisit = revisit_of(record, scope)
    return math.inf if revisit is None else record.last_harvest + revisit


def waits(entry: QueuedUrl, scope: JobScope, now: float, postpone_for: float) -> bool:
    """Whether a URL reconciled at a run's start (:func:`reconcile`) waits for its revisit: harvested,
    with a revisit frequency, not due at ``now`` (it is queued again at its next harvest time)."""
    return (entry.state is QueueState.HARVESTED and revisit_of(entry.record, scope) is not None
            and check_queued(entry.record, scope, now, postpone_for).verdict is Verdict.WAIT)


def _beaten(hops: Hops, by: Hops) -> bool:
    return by.hops <= hops.hops and by.offsite <= hops.offsite


def claims_of(entry: QueuedUrl) -> tuple[Claim, ...]:
    """Every seed's claims on ``entry`` (its owner's paths when it has no claims of its own)."""
    return entry.claims or tuple((entry.record.owner, hops) for hops in entry.paths)


def add_claim(claims: Sequence[Claim], seed: str, hops: Hops) -> tuple[Claim, ...] | None:
    """``claims`` with the path ``hops`` of ``seed`` (the seed's paths it beats on both counters
    dropped), sorted; None: a known path of ``seed`` beats it (nothing new)."""
    if any(name == seed and _beaten(hops, by=path) for name, path in claims):
        return None
    return tuple(sorted((*((name, path) for name, path in claims if name != seed or not _beaten(path, by=hops)),
                         (seed, hops))))


def _owned_record(record: UrlRecord, seed: str, paths: Sequence[Hops], scope: JobScope) -> UrlRecord:
    """``record`` as ``seed``'s with its ``paths``: the crawl profiles that have the URL in scope by one
    of them (all the seed's on its hop-0 page), in filing order (:meth:`JobScope.filed`); its fewest hops."""
    names = scope.seeds[seed].crawl_profiles
    if SEED not in paths:
        admit = {name for hops in paths for name in scope.scoped(seed, record.url, hops)}
        names = tuple(name for name in names if name in admit)
    collection, names = scope.filed(names)
    return replace(record, owner=seed, collection=collection, crawl_profiles=names, hops=min(paths))


def own(entry: QueuedUrl, claims: Sequence[Claim], scope: JobScope) -> QueuedUrl:
    """``entry`` with ``claims`` (those of seeds the job still has; all when none has): its owner the
    seed :func:`idcrawl.core.scope.owner_of` ranks first among the claimants, its record and ``paths``
    that seed's. The same claims give the same owner, hops and crawl profiles in whatever order they
    came: one rule for the in-memory queue and the fleet's."""
    live = tuple(sorted(claim for claim in claims if claim[0] in scope.seeds))
    if not live:
        return replace(entry, claims=tuple(sorted(claims)))
    by_seed: dict[str, list[Hops]] = {}
    for name, hops in live:
        by_seed.setdefault(name, []).append(hops)
    record = entry.record
    if len(by_seed) == 1:
        owner = live[0][0]
    else:
        claimants = []
        for name, paths in by_seed.items():
            mine = _owned_record(record, name, paths, scope)
            claimants.append(Claimant(name, scope.seeds[name].url, SEED in paths,
                                      next_harvest_of(entry.state, mine, scope)))
        owner = owner_of(record.url, claimants).name
    owned = tuple(by_seed[owner])
    return replace(entry, record=_owned_record(record, owner, owned, scope), paths=owned, claims=live)


# -- in memory -------------------------------------------------------------------------------------


def walk_stored(starts: Iterable[QueuedUrl], seed: str, get: Callable[[str], QueuedUrl | None],
                offer: Callable[[str, Hops, str, list[tuple[str, Hops]]], None]) -> None:
    """The walk of "starting a seed" in the context of ``seed`` (a seed added on a page already
    harvested, a crawl profile assigned to or activated again on its target, a scope widened): the
    stored links of the pages ``starts`` and of the pages ``seed`` claims from them, each page and path once, each
    link given to ``offer(page, hops, link, work)``, which may push pages reached again by a better path
    onto ``work``. ``get``: a URL's stored entry. One walk for the in-memory queue and the fleet's
    (:mod:`idcrawl.distributed.urlqueue`)."""
    seen: set[tuple[str, Hops]] = set()
    work = [(start.url, hops) for start in starts for name, hops in claims_of(start) if name == seed]
    while work:
        page, hops = work.pop()
        if (page, hops) in seen:
            continue
        seen.add((page, hops))
        source = get(page)
        if source is None or (seed, hops) not in claims_of(source) or source.links is None:
            continue
        for link in source.links:
            offer(page, hops, link, work)
            entry = get(link)
            if entry is not None and entry.links is not None:
                work.extend((link, path) for name, path in claims_of(entry) if name == seed)


class _SeedWork:
    """The work list of :func:`walk_stored` (pages, counters) seen as :meth:`MemoryUrlQueue._offer`'s
    (page, seed, counters): the walk is of one seed."""

    def __init__(self, work: list[tuple[str, Hops]], seed: str) -> None:
        self.work = work
        self.seed = seed

    def append(self, item: tuple[str, str, Hops]) -> None:
        page, seed, hops = item
        if seed == self.seed:
            self.work.append((page, hops))


class MemoryUrlQueue:
    """:class:`UrlQueue` in memory. ``entries``: stored URLs to start from (the SQLite store's);
    ``rng``: the yield model's draws (seeded: a run is reproducible); ``skip(url)``: URLs never
    queued (another target's id pages: its lanes fetch them); ``postpone_for``: seconds from now
    to a postponed URL's next harvest time; ``marks``: the scope marks the last run stored (None or
    empty: unknown, every target's stored links are walked again once).

    Changed and deleted URLs are remembered until :meth:`changes` hands them over (to commit), the
    scope marks until :meth:`marks_changed` does.
    """

    def __init__(self, entries: Iterable[QueuedUrl] = (), *, rng: random.Random | None = None,
                 skip: Callable[[str], bool] | None = None, postpone_for: float = 3600.0,
                 marks: Mapping[str, str] | None = None) -> None:
        self.scope = JobScope()
        #: the targets' scope marks of the last run that started (:func:`~idcrawl.core.scope.scope_marks`)
        self.marks: dict[str, str] = dict(marks or {})
        self._marks_changed = False
        self.rng = rng if rng is not None else random.Random(0)
        self._skip = skip
        self.postpone_for = postpone_for
        self._entries: dict[str, QueuedUrl] = {entry.url: entry for entry in entries}
        #: ready URLs by host, then by yield group, then by priority (lists: a uniform draw among the
        #: group's highest priority, then a swap-remove); ``_sizes``: the ready URLs of each group
        self._ready: dict[str, dict[Group, dict[float, list[str]]]] = {}
        self._sizes: dict[str, dict[Group, int]] = {}
        self._where: dict[str, int] = {}  # a ready URL's index in its list
        self._hosts: deque[str] = deque()  # hosts with ready URLs, round robin
        self._changed: set[str] = set()
        self._deleted: set[str] = set()
        #: (next harvest, URL) of harvested URLs waiting for their revisit (a heap; stale pairs skipped)
        self._waiting: list[tuple[float, str]] = []
        for entry in self._entries.values():
            if entry.state is QueueState.QUEUED:
                self._push(entry.record)

    # -- bookkeeping -------------------------------------------------------------------------

    def _push(self, record: UrlRecord) -> None:
        host = host_of(record.url)
        groups = self._ready.get(host)
        if groups is None:
            groups = self._ready[host] = {}
            self._sizes[host] = {}
            self._hosts.append(host)
        group = group_of(record)
        urls = groups.setdefault(group, {}).setdefault(record.priority, [])
        self._where[record.url] = len(urls)
        urls.append(record.url)
        sizes = self._sizes[host]
        sizes[group] = sizes.get(group, 0) + 1

    def _pull(self, record: UrlRecord) -> None:
        """Take a ready URL out of its host's lists (swap-remove)."""
        index = self._where.pop(record.url, None)
        if index is None:
            return
        host = host_of(record.url)
        groups = self._ready[host]
        group = group_of(record)
        buckets = groups[group]
        urls = buckets[record.priority]
        last = urls.pop()
        if index < len(urls):
            urls[index] = last
            self._where[last] = index
        sizes = self._sizes[host]
        sizes[group] -= 1
        if not urls:
            del buckets[record.priority]
            if not buckets:
                del groups[group]
                del sizes[group]
                if not groups:
                    del self._ready[host]
                    del self._sizes[host]
                    self._hosts.remove(host)

    def _put(self, entry: QueuedUrl) -> None:
        """Store ``entry``, keeping the ready lists in step with its state and group."""
        old = self._entries.get(entry.url)
        if old is not None and old.state is QueueState.QUEUED:
            self._pull(old.record)
        self._entries[entry.url] = entry
        if entry.state is QueueState.QUEUED:
            self._push(entry.record)
        self._changed.add(entry.url)
        self._deleted.discard(entry.url)

    def _delete(self, url: str) -> None:
        old = self._entries.pop(url)
        if old.state is QueueState.QUEUED:
            self._pull(old.record)
        self._changed.discard(url)
        self._deleted.add(url)

    def changes(self) -> tuple[list[QueuedUrl], list[str]]:
        """The entries changed and the URLs deleted since the last call (to commit), then forgotten."""
        changed = [self._entries[url] for url in sorted(self._changed)]
        deleted = sorted(self._deleted)
        self._changed.clear()
        self._deleted.clear()
        return changed, deleted

    def marks_changed(self) -> dict[str, str] | None:
        """The scope marks of the run started since the last call (to commit), or None: unchanged."""
        if not self._marks_changed:
            return None
        self._marks_changed = False
        return dict(self.marks)

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[QueuedUrl]:
        return list(self._entries.values())

    # -- the interface -----------------------------------------------------------------------

    def start(self, scope: JobScope, now: float) -> Reconciled:
        self.scope = scope
        counts: dict[str, int] = {}
        marks = scope_marks(scope)
        #: targets whose scope changed since the last run (a crawl profile assigned, activated, widened,
        #: narrowed): their claims are checked again and their stored links walked again
        stale = {name for name, mark in marks.items() if self.marks.get(name) != mark} if self._entries else set()
        for entry in list(self._entries.values()):
            new, events = reconcile(entry, scope, now, self.postpone_for, stale)
            for what in events:
                counts[what] = counts.get(what, 0) + 1
            if new is None:
                self._delete(entry.url)
                continue
            if new != entry:
                self._put(new)
            if waits(new, scope, now, self.postpone_for):
                self._wait(new)
        started: dict[str, QueuedUrl] = {}
        for name in sorted(stale):
            starts = [entry for entry in self._entries.values()
                      if entry.links is not None and any(seed == name for seed, _ in claims_of(entry))]
            if starts:
                self._walk(starts, name, now, started)
        if marks != self.marks:
            self.marks = marks
            self._marks_changed = True
        return Reconciled.of_counts(counts, len(started))

    def _walk(self, start: QueuedUrl | Sequence[QueuedUrl], seed: str, now: float, new: dict[str, QueuedUrl]) -> None:
        """:func:`walk_stored` from ``start`` (a page or pages) in the context of ``seed`` (URLs filed or
        re-owned into ``new``)."""
        if seed not in self.scope.seeds:
            return
        walk_stored([start] if isinstance(start, QueuedUrl) else start, seed, self._entries.get,
                    lambda page, hops, link, work: self._offer(
                        page, seed, hops, link, now, new, _SeedWork(work, seed)))

    def seed(self, owner: str, url: str, now: float, *, priority: float | None = None) -> QueuedUrl | None:
        entry = self._entries.get(url)
        if entry is not None and priority is not None and entry.record.priority != priority:
            entry = replace(entry, record=replace(entry.record, priority=priority))
            self._put(entry)
        if entry is not None and (owner, SEED) in claims_of(entry):
            return None
        names = self.scope.seeds[owner].crawl_profiles
        if entry is None:
            record = UrlRecord(url, owner, *self.scope.filed(names), SEED,
                               priority=DEFAULT_PRIORITY if priority is None else priority)
            new = self._queue(QueuedUrl(record, QueueState.QUEUED, (SEED,), None, ((owner, SEED),)), now)
            self._put(new)
            return new
        claims = add_claim(claims_of(entry), owner, SEED)
        assert claims is not None
        # its own target's page: the specific seed wins (case 1); counters kept
        new = own(entry, claims, self.scope)
        if new.record.owner != entry.record.owner:
            new = self._schedule(self._queue(new, now))
        self._put(new)
        if new.links is not None:  # harvested before: the new seed walks its stored links (no refetch)
            self._walk(new, owner, now, {})
        return self._entries[url]

    def _schedule(self, entry: QueuedUrl) -> QueuedUrl:
        """A harvested ``entry`` with a revisit frequency: its next harvest = last harvest + that
        frequency, waiting for it (:meth:`_promote`); any other entry as it is."""
        record = entry.record
        if entry.state is not QueueState.HARVESTED or record.last_harvest is None:
            return entry
        revisit = revisit_of(record, self.scope)
        if revisit is None:
            return entry
        entry = replace(entry, record=replace(record, next_harvest=record.last_harvest + revisit))
        self._wait(entry)
        return entry

    def _wait(self, entry: QueuedUrl) -> None:
        assert entry.record.next_harvest is not None
        heapq.heappush(self._waiting, (entry.record.next_harvest, entry.url))

    def _promote(self, now: float) -> None:
        """Harvested URLs whose revisit is due at ``now`` are queued again."""
        waiting = self._waiting
        while waiting and waiting[0][0] <= now:
            at, url = heapq.heappop(waiting)
            entry = self._entries.get(url)
            if entry is not None and entry.state is QueueState.HARVESTED and entry.record.next_harvest == at:
                self._put(replace(entry, state=QueueState.QUEUED, record=replace(entry.record, next_harvest=None)))

    def next_harvest(self) -> float | None:
        """The earliest next harvest time of the harvested URLs waiting for a revisit (watch mode's
        wake-up); None: none waits. Stale heap pairs on top are dropped on the way (amortised
        O(log n), no walk over the URLs)."""
        waiting = self._waiting
        while waiting:
            at, url = waiting[0]
            entry = self._entries.get(url)
            if entry is not None and entry.state is QueueState.HARVESTED and entry.record.next_harvest == at:
                return at
            heapq.heappop(waiting)
        return None

    def _queue(self, entry: QueuedUrl, now: float) -> QueuedUrl:
        """A URL (re)queued now: the checks at dispatch say queued or postponed (a harvested page
        that changes owner or path keeps its state)."""
        if entry.state is QueueState.HARVESTED or entry.state is QueueState.TAKEN:
            return entry
        if self._active(entry.record):  # the common case, without checking the scope again
            return replace(entry, state=QueueState.QUEUED) if entry.state is not QueueState.QUEUED else entry
        decision = check_queued(entry.record, self.scope, now, self.postpone_for)
        if decision.verdict is Verdict.POSTPONE:
            return replace(entry, record=decision.record, state=QueueState.POSTPONED)
        return replace(entry, state=QueueState.QUEUED)

    def _active(self, record: UrlRecord) -> bool:
        """Is the target of a record just put together from the scope there and enabled, and one of its
        crawl profiles active (enabled, of an enabled collection or none)? Then it is queued."""
        scope = self.scope
        seed = scope.seeds.get(record.owner)
        if seed is None or not seed.enabled:
            return False
        return any(scope.active(name) for name in record.crawl_profiles)

    def fetched(self, url: str, links: Sequence[str], now: float, *, seed_of: str | None = None,
                hold: bool = False, read: PageRead | None = None) -> list[QueuedUrl]:
        if seed_of is not None:
            entry = self._entries.get(url)
            if entry is None or entry.record.owner != seed_of or entry.record.hops != SEED:
                known = claims_of(entry) if entry is not None else ()
                claims = add_claim(known, seed_of, SEED) or known
                base = entry.record if entry is not None else UrlRecord(url, seed_of, None, ())
                record = _owned_record(base, seed_of, (SEED,), self.scope)  # its hop-0 page: it owns it
                self._put(QueuedUrl(record, QueueState.TAKEN, (SEED,), None, claims))
        entry = self._entries.get(url)
        if entry is None:
            return []
        entry = replace(entry, links=tuple(dict.fromkeys(links)))
        if not hold:
            entry = self._schedule(replace(entry, record=harvested(read_into(entry.record, read), Harvest.FOUND, now),
                                           state=QueueState.HARVESTED))
        self._put(entry)
        new: dict[str, QueuedUrl] = {}
        self._follow([(url, seed, hops) for seed, hops in claims_of(entry)], now, new)
        return list(new.values())

    def _follow(self, work: list[tuple[str, str, Hops]], now: float, new: dict[str, QueuedUrl]) -> None:
        """Follow the links of (page, seed, counters) in that seed's context, and of pages reached again."""
        while work:
            page, seed, hops = work.pop()
            source = self._entries.get(page)
            if source is None or (seed, hops) not in claims_of(source) or source.links is None:
                continue  # beaten since
            for link in source.links:
                self._offer(page, seed, hops, link, now, new, work)

    def redirected(self, url: str, target: str, now: float, *, hop: bool = True) -> QueuedUrl | None:
        entry = self._entries.get(url)
        if entry is None or url == target:
            return None
        known = self._entries.get(target)
        entry = self._schedule(replace(entry, links=(target,), record=harvested(entry.record, Harvest.FOUND, now),
                                       state=QueueState.HARVESTED))
        self._put(entry)
        new: dict[str, QueuedUrl] = {}
        work: list[tuple[str, str, Hops]] = []
        for seed, hops in claims_of(entry):  # each target claiming the page follows it on its own path
            self._offer(url, seed, hops, target, now, new, work, redirect=hop)
        self._follow(work, now, new)
        claimed = self._entries.get(target)
        if known is not None or claimed is None or claimed.state is not QueueState.QUEUED:
            return None
        claimed = replace(claimed, state=QueueState.TAKEN)
        self._put(claimed)
        return claimed

    def _offer(self, page: str, seed: str, at: Hops, link: str, now: float, new: dict[str, QueuedUrl],
               work: list[tuple[str, str, Hops]] | _SeedWork, *, redirect: bool | None = None) -> None:
        """The link ``link`` of ``page``, reached by ``seed``'s path ``at``: a claim of ``seed`` if one
        of its crawl profiles has it in scope and no known path of ``seed`` beats it. The URL is filed
        (once), its owner ranked among its claimants (:func:`own`), and a page already fetched is
        pushed onto ``work`` to follow its links again with the new path. ``redirect``: ``page``
        redirects to ``link``, a hop or not (:meth:`idcrawl.core.scope.Hops.redirect`); None: a link."""
        if self._skip is not None and self._skip(link):
            return
        by_domain = self.scope.offsite_by_domain(seed)
        hops = (at.follow(page, link, by_domain=by_domain) if redirect is None
                else at.redirect(page, link, hop=redirect, by_domain=by_domain))
        names = self.scope.scoped(seed, link, hops)
        if not names:
            return
        entry = self._entries.get(link)
        if entry is None:
            record = UrlRecord(link, seed, *self.scope.filed(names), hops)
            queued = self._queue(QueuedUrl(record, QueueState.QUEUED, (hops,), None, ((seed, hops),)), now)
            self._put(queued)
            new[link] = queued
            return
        claims = add_claim(claims_of(entry), seed, hops)
        if claims is None:
            return
        owned = own(entry, claims, self.scope)
        if owned.record.owner != entry.record.owner:
            owned = self._schedule(self._queue(owned, now))
            if owned.state is not QueueState.HARVESTED:
                new[link] = owned
        elif owned.record.crawl_profiles != entry.record.crawl_profiles:
            owned = self._schedule(owned)  # harvested: its revisit by its crawl profiles now
        self._put(owned)
        if owned.links is not None:
            work.append((link, seed, hops))

    def _next_harvest(self, state: QueueState, record: UrlRecord) -> float:
        return next_harvest_of(state, record, self.scope)

    def due_now(self, url: str, now: float) -> QueuedUrl | None:
        entry = self._entries.get(url)
        if entry is None or entry.state is not QueueState.HARVESTED:
            return None
        entry = self._queue(replace(entry, state=QueueState.QUEUED, record=replace(entry.record, next_harvest=None)),
                            now)
        self._put(entry)
        return entry

    def written(self, url: str, now: float, read: PageRead | None = None) -> QueuedUrl | None:
        entry = self._entries.get(url)
        if entry is None:
            return None
        entry = self._schedule(replace(entry, record=harvested(read_into(entry.record, read), Harvest.FOUND, now),
                                       state=QueueState.HARVESTED))
        self._put(entry)
        return entry

    def failed(self, url: str, result: Harvest, now: float) -> QueuedUrl | None:
        entry = self._entries.get(url)
        if entry is None:
            return None
        entry = self._schedule(replace(entry, record=harvested(entry.record, result, now),
                                       state=QueueState.HARVESTED))
        self._put(entry)
        return entry

    def take(self, room: Callable[[str], bool], now: float) -> UrlRecord | None:
        if self._waiting:
            self._promote(now)
        for _ in range(len(self._hosts)):
            host = self._hosts[0]
            self._hosts.rotate(-1)
            if not room(host):
                continue
            groups = self._ready[host]
            group = next(iter(groups)) if len(groups) == 1 else choose_group(self._sizes[host], self.scope, self.rng)
            buckets = groups[group]
            urls = buckets[max(buckets)] if len(buckets) > 1 else next(iter(buckets.values()))
            entry = self._entries[urls[self.rng.randrange(len(urls))] if len(urls) > 1 else urls[0]]
            self._put(replace(entry, state=QueueState.TAKEN))
            return entry.record
        return None

    def ready(self) -> int:
        return len(self._where)

    def get(self, url: str) -> QueuedUrl | None:
        return self._entries.get(url)

    def counts(self) -> list[UrlCount]:
        return count_urls(self._entries.values())


def count_urls(entries: Iterable[QueuedUrl]) -> list[UrlCount]:
    """:meth:`UrlQueue.counts` of ``entries``: by target, crawl profile, collection, hops and state
    (``taken`` counted as ``queued``: not answered yet)."""
    totals: dict[tuple[str, str, str, int, QueueState], int] = {}
    for entry in entries:
        record = entry.record
        state = QueueState.QUEUED if entry.state is QueueState.TAKEN else entry.state
        for name in record.crawl_profiles or ("",):
            key = (record.owner, name, record.collection or "", record.hops.hops, state)
            totals[key] = totals.get(key, 0) + 1
    return sorted(UrlCount(*key, count) for key, count in totals.items())
