"""``RedisUrlQueue``: crawl scope's outlinks in a distributed job, one shared queue for the fleet.

In a single process the walk of a job's outlinks (:class:`idcrawl.core.scope.ScopeWalk`) lives in
the worker. In a distributed job every worker follows the links of the pages it fetched, so the
walk lives in Redis, in the job's keys, and changes only inside the ``URL_*`` Lua scripts of
:mod:`idcrawl.distributed.scripts` (``urls_common.lua`` lists the keys):

- **offer** (``URL_OFFER``): the first offer of a URL queues it once for the whole fleet, in its
  host's ready queue; a later offer with the same owner keeps every path that no other beats on
  hops and off-site hops together (the record shows the fewest hops), and hands back the page's
  links when it was fetched already, to be followed again with the better path; with another
  owner this worker decides with :func:`~idcrawl.core.scope.choose_owner` and offers again,
  naming the owner it read (a compare-and-set: a change in between is decided again);
- **take** (``URL_TAKE``): a worker takes a ready URL of a host exclusively; which one is the
  core's yield draw (:func:`~idcrawl.core.scope.choose` over the host's ready URLs by collection
  and crawl profile, with this worker's seeded ``random.Random``), then a seeded uniform draw
  among that group's URLs. A taken URL is held under the fleet's lease
  (``IDCRAWL_REDIS_LEASE_TIMEOUT``): when its worker stops (killed, or left the job) it goes back
  to the ready queue (``URL_STATUS``), as a stopped worker's lane claims do;
- **harvest** (``URL_HARVEST``): the per-URL counters of the seed's "processing the URL itself"
  (:func:`~idcrawl.core.scope.harvested`), and a found page's links, kept for later better paths;
- **put** (``URL_PUT``): a taken URL postponed (ready again at a given time), dropped, re-owned
  or given back, as the harvest checks at dispatch decide (:func:`~idcrawl.core.scope.check_dispatch`).

Round trips: one ``URL_OFFER`` per in-scope link (a link out of every crawl profile's scope costs
none), one ``HGETALL`` and one ``URL_TAKE`` per take, one ``URL_HARVEST`` per fetched URL, one
``URL_STATUS`` per poll.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from idcrawl.core.scope import (
    Candidate,
    Harvest,
    Hops,
    JobScope,
    Owner,
    UrlRecord,
    choose,
    choose_owner,
    host_of,
)
from idcrawl.distributed import scripts

if TYPE_CHECKING:
    import redis

__all__ = ["QueueStatus", "RedisUrlQueue", "Reply", "group_of"]

#: How often an offer is made again when the owner changed in between (a compare-and-set loop).
OFFER_TRIES = 8


def group_of(collection: str | None, crawl_profiles: Sequence[str]) -> str:
    """A queued URL's yield group in Redis: ``<collection>/<first crawl profile>`` ('' for none;
    names never hold '/')."""
    return f"{collection or ''}/{crawl_profiles[0] if crawl_profiles else ''}"


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _float(value: str) -> float | None:
    return float(value) if value else None


def record_of(url: str, row: Sequence[Any]) -> UrlRecord:
    """A record from a script's row (``urls_common.lua``: owner, col, cps, hops, off, paths, host,
    st, w, next, last, nf, err, cyc)."""
    owner, col, cps, hops, off, _paths, _host, _st, _w, nxt, last, nf, err, cyc = (_text(v) for v in row)
    return UrlRecord(url, owner, col or None, tuple(name for name in cps.split("\n") if name),
                     Hops(int(hops), int(off)), _float(nxt), _float(last), int(nf), int(err), int(cyc))


def _paths(row: Sequence[Any]) -> list[Hops]:
    text = _text(row[5])
    return [Hops(int(h), int(o)) for h, _, o in (part.partition(":") for part in text.split(",") if part)]


@dataclass(frozen=True, slots=True)
class Reply:
    """What ``URL_OFFER`` said: its verdict, the page's links (when fetched), the record and its paths."""

    verdict: str
    links: tuple[str, ...]
    record: UrlRecord
    paths: tuple[Hops, ...]
    state: str


@dataclass(slots=True)
class QueueStatus:
    """The shared queue as the last ``URL_STATUS`` saw it."""

    ready: int = 0
    taken: int = 0
    postponed: int = 0
    given_back: int = 0  # URLs of stopped workers that this call put back in the ready queue
    next_due: float = -1.0  # seconds until the earliest postponed URL is ready again; -1: none
    hosts: dict[str, int] = field(default_factory=dict)  # host -> ready URLs

    @property
    def empty(self) -> bool:
        """No URL ready or taken anywhere in the fleet (postponed ones wait for a later run)."""
        return not (self.ready or self.taken)


class RedisUrlQueue:
    """The walk of a job's outlinks in Redis, for one worker (``worker``: its id in the job).

    ``skip(url)``: URLs never queued (another target's id pages: its lanes fetch them).
    ``rng``: the seeded draw of the yields and of the URL within a group.
    """

    def __init__(self, client: redis.Redis, prefix: str, scope: JobScope, worker: str, *, lease_ms: int = 8_000,
                 rng: random.Random | None = None, skip: Callable[[str], bool] | None = None) -> None:
        self.client = client
        self.prefix = prefix
        self.scope = scope
        self.worker = worker
        self.lease_ms = lease_ms
        self.rng = rng if rng is not None else random.Random(0)
        self._skip = skip
        self._offer = client.register_script(scripts.URL_OFFER)
        self._take = client.register_script(scripts.URL_TAKE)
        self._harvest = client.register_script(scripts.URL_HARVEST)
        self._put = client.register_script(scripts.URL_PUT)
        self._status = client.register_script(scripts.URL_STATUS)
        self.status = QueueStatus()
        #: the URLs this worker took and has not harvested, put or given back
        self.taken: dict[str, UrlRecord] = {}

    def key(self, *parts: str) -> str:
        return self.prefix + "".join(parts)

    # -- offers -------------------------------------------------------------------------

    def offer(self, url: str, owner: str, crawl_profiles: Sequence[str], hops: Hops, *, mode: str = "link",
              expect: str = "", links: Iterable[str] = ()) -> Reply:
        """One ``URL_OFFER`` (module docstring; ``mode``: ``link``, ``seed``, ``fetched``)."""
        collection = self.scope.collection_of(crawl_profiles)
        args: list[Any] = [url, owner, collection or "", "\n".join(crawl_profiles), hops.hops, hops.offsite,
                           host_of(url), mode, expect]
        if mode == "fetched":
            args.append("\n".join(links))
        verdict, raw_links, row = self._offer(keys=[self.key("U:", url)], args=args)
        text = _text(raw_links)
        return Reply(_text(verdict), tuple(text.split("\n")) if text else (), record_of(url, row),
                     tuple(_paths(row)), _text(row[7]))

    def seed(self, owner: str, url: str) -> UrlRecord | None:
        """A hop-0 page of ``owner`` to fetch (a page target's page): queued for the fleet; the record
        when this call queued it or made it ``owner``'s hop-0 page, None when it was that already."""
        reply = self.offer(url, owner, self.scope.seeds[owner].crawl_profiles, Hops(), mode="seed")
        if reply.verdict == "same":
            return None
        if reply.links:  # fetched already under another owner: its links again, from hop 0
            self._follow([(url, owner, Hops(), reply.links)])
        return reply.record

    def fetched_seed(self, owner: str, url: str, links: Iterable[str]) -> list[UrlRecord]:
        """A hop-0 page of ``owner`` fetched already (a found id page) with these canonical links:
        the records of the URLs this call queued for the fleet."""
        links = tuple(dict.fromkeys(links))
        reply = self.offer(url, owner, self.scope.seeds[owner].crawl_profiles, Hops(), mode="fetched", links=links)
        if reply.verdict == "same":
            return []
        return self._follow([(url, owner, Hops(), links)])

    def _follow(self, work: list[tuple[str, str, Hops, tuple[str, ...]]]) -> list[UrlRecord]:
        """Offer the links of (page, owner, its counters, links), and of pages a better path reaches
        again; returns the records queued for the first time."""
        new: list[UrlRecord] = []
        while work:
            page, owner, at, links = work.pop()
            for link in links:
                if self._skip is not None and self._skip(link):
                    continue
                hops = at.follow(page, link)
                names = self.scope.scoped(owner, link, hops)
                if names:
                    self._offer_link(link, owner, names, hops, new, work)
        return new

    def _offer_link(self, link: str, owner: str, names: tuple[str, ...], hops: Hops, new: list[UrlRecord],
                    work: list[tuple[str, str, Hops, tuple[str, ...]]]) -> None:
        expect = ""
        for _ in range(OFFER_TRIES):
            reply = self.offer(link, owner, names, hops, expect=expect)
            if reply.verdict == "new":
                new.append(reply.record)
                return
            if reply.verdict in ("better", "reowned"):
                if reply.links:
                    work.append((link, owner, hops, reply.links))
                return
            if reply.verdict != "owner":
                return
            queued = reply.record.owner
            seeds = self.scope.seeds
            if queued in seeds and choose_owner(link, seeds[owner].url, seeds[queued].url) is not Owner.CONTEXT:
                return
            expect = queued  # this owner takes it, if the queued one still has it
        raise RuntimeError(f"idcrawl: the owner of {link} kept changing ({OFFER_TRIES} offers)")

    # -- takes, harvests, dispatch decisions -------------------------------------------------

    def poll(self) -> QueueStatus:
        """``URL_STATUS``: stopped workers' URLs back to the ready queue, due postponed URLs ready."""
        reply = self._status(keys=[self.key("uhosts"), self.key("workers")], args=[self.lease_ms])
        ready, taken, postponed, back, next_due = (int(v) for v in reply[:5])
        hosts = {_text(reply[i]): int(reply[i + 1]) for i in range(5, len(reply), 2)}
        self.status = QueueStatus(ready, taken, postponed, back, next_due / 1000 if next_due >= 0 else -1.0, hosts)
        return self.status

    def candidates(self, host: str) -> list[Candidate[str]]:
        """The host's ready URLs as the yield draw sees them: one candidate per URL, keyed by group."""
        raw = self.client.hgetall(self.key("uqc:", host))
        result: list[Candidate[str]] = []
        collections, profiles = self.scope.collections, self.scope.crawl_profiles
        for group_raw, count in sorted((_text(k), int(v)) for k, v in raw.items()):
            collection, _, profile = group_raw.partition("/")
            c = Candidate(group_raw, collection or None, profile,
                          collections[collection].yield_probability if collection in collections else 0.0,
                          profiles[profile].yield_probability if profile in profiles else 0.0)
            result += [c] * count
        return result

    def take(self, host: str) -> UrlRecord | None:
        """A ready URL of ``host``, taken by this worker (exclusive), or None when it has none."""
        for _ in range(OFFER_TRIES):
            candidates = self.candidates(host)
            if not candidates:
                return None
            group = choose(candidates, self.rng).key
            reply = self._take(keys=[self.key("uhosts"), self.key("workers")],
                               args=[self.worker, host, group, repr(self.rng.random())])
            if reply:
                url = _text(reply[0])
                record = record_of(url, reply[1])
                self.taken[url] = record
                return record
        return None

    def harvested(self, url: str, result: Harvest, now: float, *, next_harvest: float | None = None,
                  links: Iterable[str] = ()) -> list[UrlRecord]:
        """A URL of the walk was fetched (``result``; a found page's canonical ``links``): its counters
        in Redis, its links offered from every path known; the records queued for the first time."""
        links = tuple(dict.fromkeys(links))
        self.taken.pop(url, None)
        row = self._harvest(keys=[self.key("U:", url)],
                            args=[url, self.worker, result.value, repr(now),
                                  "" if next_harvest is None else repr(next_harvest), "\n".join(links)])
        if not row or result is not Harvest.FOUND:
            return []
        owner = _text(row[0])
        if owner not in self.scope.seeds:
            return []
        return self._follow([(url, owner, hops, links) for hops in _paths(row)])

    def record(self, url: str) -> UrlRecord | None:
        """The job's record of ``url`` (None: not a URL of the walk)."""
        row = self.client.hmget(self.key("U:", url), "owner", "col", "cps", "hops", "off", "paths", "host", "st",
                                "w", "next", "last", "nf", "err", "cyc")
        return None if row[0] is None else record_of(url, row)

    def _put_call(self, url: str, what: str, *args: Any) -> UrlRecord | None:
        self.taken.pop(url, None)
        row = self._put(keys=[self.key("U:", url)], args=[url, self.worker, what, *args])
        return record_of(url, row) if row else None

    def give_back(self, url: str) -> None:
        """A taken URL this worker will not fetch: back to its host's ready queue for the fleet."""
        self._put_call(url, "back")

    def postpone(self, url: str, until: float, until_ms: int) -> None:
        """A taken URL postponed (a deactivated target, crawl profile or collection): ready again
        from ``until_ms`` (Redis's clock), its next harvest ``until`` (the job's clock)."""
        self._put_call(url, "postpone", until_ms, repr(until))

    def drop(self, url: str) -> None:
        """A taken URL out of the queue (its collection deleted, out of scope): kept as dropped."""
        self._put_call(url, "drop")

    def reown(self, record: UrlRecord) -> None:
        """A taken URL whose target is gone, taken by another target (``record``: its new owner)."""
        row = self._put(keys=[self.key("U:", record.url)],
                        args=[record.url, self.worker, "reown", record.owner, record.collection or "",
                              "\n".join(record.crawl_profiles)])
        if row:
            self.taken[record.url] = record_of(record.url, row)

    def give_back_all(self) -> int:
        """This worker leaves: every URL it took and did not finish goes back; returns how many."""
        urls = list(self.taken)
        for url in urls:
            self.give_back(url)
        return len(urls)
