"""``RedisUrlQueue``: the URL queue of crawl scope (:class:`idcrawl.core.urlqueue.UrlQueue`) shared by a fleet.

The queue lives in the job's keys and changes only inside the ``URL_*`` Lua scripts, with the core's rules
(offers, takes, harvests, a run's reconcile). Why: docs/architecture.md, "The shared URL queue".
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from idcrawl.core.scope import SEED, Harvest, Hops, JobScope, PageRead, UrlRecord, Verdict, host_of, scope_marks
from idcrawl.core.sitemaps import DEFAULT_PRIORITY
from idcrawl.core.urlqueue import (
    Claim,
    Group,
    QueuedUrl,
    QueueState,
    Reconciled,
    UrlCount,
    check_queued,
    choose_group,
    claims_of,
    count_urls,
    own,
    reconcile,
    waits,
    walk_stored,
)
from idcrawl.distributed import scripts
from idcrawl.distributed.connection import reply_text, scan_job
from idcrawl.distributed.replies import UrlDueReply, UrlStatusReply
from idcrawl.distributed.runs import Run, await_reconciled, join_run, reconciled
from idcrawl.state.keys import JobKeys
from idcrawl.state.redis import redis_now_ms

if TYPE_CHECKING:
    import redis

__all__ = ["QueueStatus", "RedisUrlQueue", "entry_of", "group_key", "read_entries", "read_text", "revisit_spec"]

#: How often an offer is made again when the owner changed in between (the compare-and-set).
TRIES = 8
#: Hosts with ready URLs one ``URL_DUE`` names (from the worker's place in the round robin), and such calls
#: one take makes at most before it gives up for now (the next take goes on from there).
HOSTS_PER_CALL = 32
CALLS_PER_TAKE = 4
#: How long (s) :meth:`RedisUrlQueue.ready` trusts the fleet's counts it read (the scheduler asks often).
READY_FRESH = 0.05

_STATES = {"q": QueueState.QUEUED, "p": QueueState.POSTPONED, "t": QueueState.TAKEN, "h": QueueState.HARVESTED}
_CODES = {state: code for code, state in _STATES.items()}


def group_key(group: Group) -> str:
    """A yield group in Redis: ``<collection>/<crawl profile>`` ('' for none; names never hold '/')."""
    return f"{group[0] or ''}/{group[1]}"


def revisit_spec(scope: JobScope) -> str:
    """What the ``URL_*`` scripts need of ``scope`` to schedule revisits (``urls_common.lua``'s
    ``revisit_of``, :func:`idcrawl.core.scope.revisit_of`): '' when no crawl profile has a revisit, else
    JSON of the page targets and of the active crawl profiles (JobScope.active) with a revisit (collection, seconds)."""
    profiles = {name: [profile.collection or "", profile.revisit] for name, profile in scope.crawl_profiles.items()
                if profile.revisit is not None and scope.active(name)}
    if not profiles:
        return ""
    return json.dumps({"pages": list(scope.pages), "profiles": profiles}, sort_keys=True)



def _float(value: str) -> float | None:
    return float(value) if value else None


def read_text(read: PageRead | None) -> str:
    """What a harvest read as ``URL_HARVEST`` sets it (JSON of the entry's fields ``sum``, ``etag``, ``lm``,
    ``cap``: :func:`idcrawl.core.scope.read_into`; '': nothing read, they stay). A capture left out keeps
    the stored one."""
    if read is None:
        return ""
    fields = {"sum": read.checksum or "", "etag": read.etag or "", "lm": read.last_modified or ""}
    if read.at is not None:
        fields["rat"] = repr(read.at)
    if read.capture is not None:
        fields["cap"] = "\n".join(read.capture)
    return json.dumps(fields, separators=(",", ":"))


def claims_text(claims: Sequence[Claim]) -> str:
    """Claims as the ``claims`` field holds them (``urls_common.lua``: JSON [[seed, hops, off], ...])."""
    return json.dumps([[seed, hops.hops, hops.offsite] for seed, hops in claims], separators=(",", ":"))


def entry_of(url: str, row: Sequence[Any]) -> QueuedUrl:
    """An entry from a script's row (``urls_common.lua``: owner, col, cps, hops, off, paths, host,
    st, w, next, last, nf, err, cyc, claims, pri, sum, etag, lm, cap, rat, links, has links)."""
    (owner, col, cps, hops, off, paths, _host, st, _w, nxt, last, nf, err, cyc, claims, pri, checksum, etag, lm, cap,
     rat, links, has) = (reply_text(v) for v in row)
    uri, _, rest = cap.partition("\n")
    date, _, digest = rest.partition("\n")
    record = UrlRecord(url, owner, col or None, tuple(name for name in cps.split("\n") if name),
                       Hops(int(hops), int(off)), _float(nxt), _float(last), int(nf), int(err), int(cyc),
                       float(pri) if pri else DEFAULT_PRIORITY, checksum or None, etag or None, lm or None,
                       (uri, date, digest) if cap else None, _float(rat))
    path_list = tuple(Hops(int(h), int(o)) for h, _, o in (p.partition(":") for p in paths.split(",") if p))
    claim_list = tuple(sorted((str(seed), Hops(int(h), int(o))) for seed, h, o in json.loads(claims))) if claims else ()
    return QueuedUrl(record, _STATES[st], path_list or (SEED,),
                     tuple(link for link in links.split("\n") if link) if has == "1" else None, claim_list)


@dataclass(slots=True)
class QueueStatus:
    """The shared queue as the last ``URL_STATUS`` saw it."""

    ready: int = 0
    taken_by_others: int = 0
    taken_here: int = 0
    postponed: int = 0
    given_back: int = 0  # URLs of stopped workers that this call made ready again
    at: float = float("-inf")  # monotonic time of the call


class RedisUrlQueue:
    """:class:`~idcrawl.core.urlqueue.UrlQueue` in Redis, for the worker ``worker`` of the job whose
    keys start with ``prefix``. ``rng``: the yield model's draws (seeded); ``skip(url)``: URLs never
    queued (another target's id pages: its lanes fetch them); ``postpone_for``: seconds from now to
    a postponed URL's next harvest time; ``lease_ms``: the fleet's lease of a taken URL; ``run``: the
    fleet's run the worker joined (:func:`idcrawl.distributed.runs.join_run`), None: :meth:`start` joins it."""

    def __init__(self, client: redis.Redis, prefix: str, worker: str, *, lease_ms: int = 8_000,
                 rng: random.Random | None = None, skip: Callable[[str], bool] | None = None,
                 postpone_for: float = 3600.0, run: Run | None = None) -> None:
        self.client = client
        self.prefix = prefix
        self.keys = JobKeys(prefix)
        self.worker = worker
        self.lease_ms = lease_ms
        self.scope = JobScope()
        self._spec = ""  # revisit_spec(scope)
        self.rng = rng if rng is not None else random.Random(0)
        self._skip = skip
        self.postpone_for = postpone_for
        #: the fleet's run its worker joined (:mod:`idcrawl.distributed.runs`; None: :meth:`start` joins one)
        self.run = run
        self._offer = client.register_script(scripts.URL_OFFER)
        self._due = client.register_script(scripts.URL_DUE)
        self._take = client.register_script(scripts.URL_TAKE)
        self._harvest = client.register_script(scripts.URL_HARVEST)
        self._put = client.register_script(scripts.URL_PUT)
        self._status = client.register_script(scripts.URL_STATUS)
        self.status = QueueStatus()
        self._after = ""  # the last host a take looked at: the round robin goes on after it
        #: URLs this worker took and has not answered (given back when it leaves)
        self.taken: set[str] = set()
        #: taken URLs of stopped workers that this worker's calls made ready again (its start's included)
        self.taken_over = 0

    # -- a run's start -----------------------------------------------------------------------

    def start(self, scope: JobScope, now: float, run: Run | None = None) -> Reconciled:
        """The job file's ``scope``; the worker that starts a run of the fleet (``run``, the run the worker
        joined: :func:`idcrawl.distributed.runs.join_run`; None: this queue joins one with its lease) reconciles
        the stored URLs with it (:func:`~idcrawl.core.urlqueue.reconcile`); a worker joining the run in
        progress waits until they are (:func:`~idcrawl.distributed.runs.await_reconciled`; it reconciles them
        itself if that worker stopped first). A URL taken by a worker that is gone is ready again (``URL_STATUS``).
        As in one process, a harvested URL not due waits for its revisit (``P uwait``, by the time the
        rule gives it now), and a target whose scope changed since the last run (its mark in ``P umarks``:
        a crawl profile assigned, activated again, widened) walks its stored links again (``started``)."""
        self.scope = scope
        self._spec = revisit_spec(scope)
        run = run or self.run
        if run is None:
            run = self.run = join_run(self.client, self.prefix, self.worker, lease_ms=self.lease_ms)
        if not run.new and await_reconciled(self.client, self.prefix, run, lease_ms=self.lease_ms):
            return Reconciled()
        self.poll()
        counts: dict[str, int] = {}
        pairs: Any = self.client.zrange(self.keys.uwait, 0, -1, withscores=True)
        waiting = {reply_text(url): float(score) for url, score in pairs}  # harvested URLs waiting, by next harvest
        marks = scope_marks(scope)
        stored: Any = self.client.hgetall(self.keys.umarks)
        old = {reply_text(k): reply_text(v) for k, v in stored.items()}
        #: targets whose scope changed since the last run: claims checked, stored links walked again
        stale = {name for name, mark in marks.items() if old.get(name) != mark}
        #: the pages with stored links each stale target claims (the walks' starts)
        starts: dict[str, list[QueuedUrl]] = {}
        for n, entry in enumerate(self.entries()):
            if n % BATCH == 0:  # alive while reconciling: the joining workers wait for it (runs.await_reconciled)
                self.client.zadd(self.keys.workers, {self.worker: redis_now_ms(self.client, self.keys.workers)})
            if entry.links is not None:
                for name in {seed for seed, _ in claims_of(entry)} & stale:
                    starts.setdefault(name, []).append(entry)
            if entry.state is QueueState.TAKEN:
                continue  # a live worker's (its lease decides)
            new, events = reconcile(entry, scope, now, self.postpone_for, stale)
            wait = new is not None and waits(new, scope, now, self.postpone_for)
            if new == entry and ((waiting.get(entry.url) == new.record.next_harvest) if wait
                                 else entry.url not in waiting):
                continue
            if not self._set(entry, new, wait=wait):
                continue  # changed in between by a worker that joined: its state stands
            for what in events:
                counts[what] = counts.get(what, 0) + 1
        started: dict[str, QueuedUrl] = {}
        for name in sorted(starts):
            self._walk([page for entry in starts[name] if (page := self.get(entry.url)) is not None],
                       name, now, started)
        if marks != old:
            with self.client.pipeline(transaction=True) as pipe:
                pipe.delete(self.keys.umarks)
                if marks:
                    pipe.hset(self.keys.umarks, mapping=marks)  # type: ignore[arg-type]
                pipe.execute()
        reconciled(self.client, self.prefix, run)
        return Reconciled.of_counts(counts, len(started))

    def _walk(self, start: QueuedUrl | Sequence[QueuedUrl], seed: str, now: float, new: dict[str, QueuedUrl]) -> None:
        """:func:`~idcrawl.core.urlqueue.walk_stored` from ``start`` (a page or pages) in the context of ``seed``."""
        if seed not in self.scope.seeds:
            return

        def offer(page: str, hops: Hops, link: str, work: list[tuple[str, Hops]]) -> None:
            if self._skip is not None and self._skip(link):
                return
            at = hops.follow(page, link, by_domain=self.scope.offsite_by_domain(seed))
            names = self.scope.scoped(seed, link, at)
            if names:
                reached: list[tuple[str, str, Hops, tuple[str, ...]]] = []  # pages a better path reaches again
                self._offer_link(link, seed, names, at, now, new, reached)
                work.extend((url, path) for url, _, path, _ in reached)

        walk_stored([start] if isinstance(start, QueuedUrl) else start, seed, self.get, offer)

    def _set(self, old: QueuedUrl, new: QueuedUrl | None, *, wait: bool = False) -> bool:
        """Write a reconciled entry (None: gone) if it is still as read (state and last harvest);
        ``wait``: it waits for its revisit at its next harvest time (``P uwait``)."""
        if new is None:
            args: list[Any] = ["", "", "", 0, 0, "gone", "", ""]
            more = ["", ""]
        else:
            record = new.record
            args = [record.owner, record.collection or "", "\n".join(record.crawl_profiles), record.hops.hops,
                    record.hops.offsite, _CODES[new.state],
                    "" if record.next_harvest is None else repr(record.next_harvest), "1" if wait else ""]
            more = [",".join(f"{p.hops}:{p.offsite}" for p in new.paths), claims_text(new.claims) if new.claims else ""]
        last = old.record.last_harvest
        return bool(self._put(keys=[self.keys.url(old.url)], args=[
            old.url, "set", _CODES[old.state], *args, "" if last is None else repr(last), *more]))

    # -- offers ------------------------------------------------------------------------------

    def _offer_call(self, url: str, owner: str, names: Sequence[str], hops: Hops, mode: str,
                    now: float, *, take: bool = False) -> tuple[str, QueuedUrl]:
        """``take``: a URL this call files (not postponed) is taken by this worker at once (a redirect's
        new target, which the redirected worker follows: no other worker can take it in between)."""
        collection, names = self.scope.filed(names)
        record = UrlRecord(url, owner, collection, tuple(names), hops)
        decision = check_queued(record, self.scope, now, self.postpone_for)
        postponed = decision.verdict is Verdict.POSTPONE
        nxt = decision.record.next_harvest if postponed else None
        verdict, row = self._offer(keys=[self.keys.url(url)], args=[
            url, owner, collection or "", "\n".join(names), hops.hops, hops.offsite, host_of(url), mode, "",
            "p" if postponed else ("t" if take else "q"), "" if nxt is None else repr(nxt), self.worker,
            self._spec, ""])
        return reply_text(verdict), entry_of(url, row)

    def seed(self, owner: str, url: str, now: float, *, priority: float | None = None) -> QueuedUrl | None:
        self.status.at = float("-inf")
        verdict, entry = self._offer_call(url, owner, self.scope.seeds[owner].crawl_profiles, SEED, "seed", now)
        if priority is not None and entry.record.priority != priority:  # kept, whoever queued it
            self._put(keys=[self.keys.url(url)], args=[url, "pri", repr(priority)])
            entry = replace(entry, record=replace(entry.record, priority=priority))
        if verdict == "same":
            return None
        if sum(1 for _, hops in claims_of(entry) if hops == SEED) > 1:  # two targets' hop-0 page: the rank decides
            entry = self._rank(url, entry, now, {})
        if entry.links is not None:  # harvested before: the new seed walks its stored links (no refetch)
            self._walk(entry, owner, now, {})
        return entry

    def fetched(self, url: str, links: Sequence[str], now: float, *, seed_of: str | None = None,
                hold: bool = False, read: PageRead | None = None) -> list[QueuedUrl]:
        if seed_of is not None:
            self._offer_call(url, seed_of, self.scope.seeds[seed_of].crawl_profiles, SEED, "fetched", now)
        links = tuple(dict.fromkeys(links))
        if not hold:
            self.taken.discard(url)
        self.status.at = float("-inf")  # the fleet's counts change: read again
        row = self._harvest(keys=[self.keys.url(url)],
                            args=[url, "links" if hold else Harvest.FOUND.value, repr(now), "\n".join(links),
                                  self.worker, self._spec, read_text(read)])
        if not row:
            return []
        entry = entry_of(url, row)
        new: dict[str, QueuedUrl] = {}
        self._follow([(url, seed, hops, links) for seed, hops in claims_of(entry)], now, new)
        if not hold:  # held until its links are offered (URL_HARVEST): the fleet was not finished in between
            self._put(keys=[self.keys.url(url)], args=[url, "done", self.worker])
        return list(new.values())

    def due_now(self, url: str, now: float) -> QueuedUrl | None:
        """Queued again now if still harvested as read (``URL_PUT`` 'set' compares state and last harvest:
        a worker that harvested it since wins)."""
        entry = self.get(url)
        if entry is None or entry.state is not QueueState.HARVESTED:
            return None
        record = replace(entry.record, next_harvest=None)
        decision = check_queued(record, self.scope, now, self.postpone_for)
        new = (replace(entry, state=QueueState.POSTPONED, record=decision.record)
               if decision.verdict is Verdict.POSTPONE else replace(entry, state=QueueState.QUEUED, record=record))
        self.status.at = float("-inf")
        return new if self._set(entry, new, wait=waits(new, self.scope, now, self.postpone_for)) else None

    def redirected(self, url: str, target: str, now: float, *, hop: bool = True) -> QueuedUrl | None:
        """A redirect is a link (:meth:`idcrawl.core.urlqueue.MemoryUrlQueue.redirected`): ``url`` harvested
        with ``target`` as its link; a ``target`` this call files is filed taken by this worker (``URL_OFFER``,
        state 't'), which follows the redirect. None: not to be followed (out of scope, or known to the fleet)."""
        if url == target:
            return None
        known = self.get(target) is not None
        self.taken.discard(url)
        self.status.at = float("-inf")
        row = self._harvest(keys=[self.keys.url(url)],
                            args=[url, Harvest.FOUND.value, repr(now), target, self.worker, self._spec])
        if not row:
            return None
        entry = entry_of(url, row)
        new: dict[str, QueuedUrl] = {}
        if not (self._skip is not None and self._skip(target)):
            work: list[tuple[str, str, Hops, tuple[str, ...]]] = []
            for seed, path in claims_of(entry):  # each target claiming the page follows it on its own path
                if seed not in self.scope.seeds:
                    continue
                at = path.redirect(url, target, hop=hop, by_domain=self.scope.offsite_by_domain(seed))
                names = self.scope.scoped(seed, target, at)
                if names:
                    self._offer_link(target, seed, names, at, now, new, work, take=True)
            self._follow(work, now, new)
        self._put(keys=[self.keys.url(url)], args=[url, "done", self.worker])
        claimed = new.get(target)
        # filed taken by this worker in the offer itself (else another worker could take it first and fetch
        # it as a plain link: an item without the redirect, unlike one process)
        if known or claimed is None or claimed.state is not QueueState.TAKEN:
            return None
        self.taken.add(target)
        return QueuedUrl(claimed.record, QueueState.TAKEN, claimed.paths, claimed.links)

    def written(self, url: str, now: float, read: PageRead | None = None) -> QueuedUrl | None:
        """The page's items are written: its found harvest (``URL_HARVEST`` 'written', with what it
        ``read``); it is no longer held by this worker."""
        self.taken.discard(url)
        self.status.at = float("-inf")
        row = self._harvest(keys=[self.keys.url(url)],
                            args=[url, "written", repr(now), "", self.worker, self._spec, read_text(read)])
        return entry_of(url, row) if row else None

    def _follow(self, work: list[tuple[str, str, Hops, tuple[str, ...]]], now: float,
                new: dict[str, QueuedUrl]) -> None:
        """Offer the links of (page, a seed claiming it, its counters, its links), and of pages a better
        path reaches again; ``new`` gets the URLs filed for the first time or taken over from another owner."""
        while work:
            page, seed, at, links = work.pop()
            if seed not in self.scope.seeds:
                continue
            for link in links:
                if self._skip is not None and self._skip(link):
                    continue
                hops = at.follow(page, link, by_domain=self.scope.offsite_by_domain(seed))
                names = self.scope.scoped(seed, link, hops)
                if names:
                    self._offer_link(link, seed, names, hops, now, new, work)

    def _offer_link(self, link: str, seed: str, names: tuple[str, ...], hops: Hops, now: float,
                    new: dict[str, QueuedUrl], work: list[tuple[str, str, Hops, tuple[str, ...]]], *,
                    take: bool = False) -> None:
        """``seed``'s path ``hops`` to ``link`` (in the scope of its crawl profiles ``names``): filed, or
        added to its claims; the claimants ranked (:func:`~idcrawl.core.urlqueue.own`) and the owner's
        record written if it changed (a compare-and-set on the claims read); a page already fetched
        goes onto ``work`` to follow its links with the new path."""
        verdict, entry = self._offer_call(link, seed, names, hops, "link", now, take=take)
        if verdict == "new":
            new[link] = entry
            return
        if verdict != "claimed":
            return
        entry = self._rank(link, entry, now, new)
        if entry.links is not None:
            work.append((link, seed, hops, entry.links))

    def _rank(self, link: str, entry: QueuedUrl, now: float, new: dict[str, QueuedUrl]) -> QueuedUrl:
        """The owner of ``link`` ranked among the claims read (:func:`~idcrawl.core.urlqueue.own`) and
        written if it changed, a compare-and-set on those claims (``URL_OFFER`` 'own'); ``new`` gets it
        if it changed owner and is not harvested. The entry as written."""
        for _ in range(TRIES):
            owned = own(entry, claims_of(entry), self.scope)
            if owned.record == entry.record and owned.paths == entry.paths:
                break
            record = owned.record
            decision = check_queued(record, self.scope, now, self.postpone_for)
            postponed = decision.verdict is Verdict.POSTPONE
            nxt = decision.record.next_harvest if postponed else None
            reply, row = self._offer(keys=[self.keys.url(link)], args=[
                link, record.owner, record.collection or "", "\n".join(record.crawl_profiles), record.hops.hops,
                record.hops.offsite, host_of(link), "own", claims_text(entry.claims) if entry.claims else "",
                "p" if postponed else "q", "" if nxt is None else repr(nxt), self.worker, self._spec,
                ",".join(f"{p.hops}:{p.offsite}" for p in owned.paths)])
            verdict, written = reply_text(reply), entry_of(link, row)
            if verdict == "changed":
                entry = written
                continue
            if verdict == "reowned" and written.state is not QueueState.HARVESTED:
                new[link] = written
            entry = written
            break
        else:
            raise RuntimeError(f"idcrawl: the claims on {link} kept changing ({TRIES} offers in a row)")
        return entry

    def failed(self, url: str, result: Harvest, now: float) -> QueuedUrl | None:
        self.taken.discard(url)
        self.status.at = float("-inf")
        row = self._harvest(keys=[self.keys.url(url)],
                            args=[url, result.value, repr(now), "", self.worker, self._spec])
        return entry_of(url, row) if row else None

    # -- takes -------------------------------------------------------------------------------

    def poll(self) -> QueueStatus:
        """``URL_STATUS``: stopped workers' URLs ready again; the fleet's counts and hosts."""
        reply = self._status(keys=[self.keys.uhosts, self.keys.workers], args=[self.lease_ms, self.worker])
        counts = UrlStatusReply.parse(reply)
        self.status = QueueStatus(counts.ready, counts.taken_by_others, counts.taken_here, counts.postponed,
                                  counts.given_back, time.monotonic())
        self.taken_over += counts.given_back
        return self.status

    def take(self, room: Callable[[str], bool], now: float) -> UrlRecord | None:
        """Of the next host (round robin) with ready URLs that ``room(host)`` admits, the URL the yield
        model chooses; taken by this worker for the fleet. None: nothing ready on a host with room among
        the ``HOSTS_PER_CALL * CALLS_PER_TAKE`` hosts looked at (the next take goes on after them: the
        cost of a take does not grow with the hosts)."""
        for _ in range(CALLS_PER_TAKE):
            # revisits due at now queued first; then a few hosts after this worker's place in the round robin
            due = UrlDueReply.parse(self._due(keys=[self.keys.uhosts], args=[repr(now), self._after, HOSTS_PER_CALL]))
            for host in due.hosts:
                self._after = host
                if not room(host):
                    continue
                record = self._take_from(host)
                if record is not None:
                    return record
            if len(due.hosts) < HOSTS_PER_CALL:  # every host with ready URLs was looked at
                break
        return None

    def _take_from(self, host: str) -> UrlRecord | None:
        """A ready URL of ``host`` of the group the yield model draws (None: none left)."""
        for _ in range(TRIES):
            counts = {reply_text(k): int(v) for k, v in self.client.hgetall(self.keys.url_counts(host)).items()}
            if not counts:
                break
            groups: dict[Group, int] = {}
            for key, n in counts.items():
                collection, _, profile = key.partition("/")
                groups[(collection or None, profile)] = n
            group = next(iter(groups)) if len(groups) == 1 else choose_group(groups, self.scope, self.rng)
            draw = self.rng.random() if groups[group] > 1 else 0.0
            reply = self._take(keys=[self.keys.uhosts, self.keys.workers],
                               args=[self.worker, host, group_key(group), repr(draw)])
            if reply:
                url_raw, row = reply  # URL_TAKE: {url, entry row}
                url = reply_text(url_raw)
                self.taken.add(url)
                self.status.at = float("-inf")
                return entry_of(url, row).record
        return None

    def next_harvest(self) -> float | None:
        """The earliest next harvest time of the fleet's harvested URLs waiting for a revisit (``P uwait``):
        a watching worker's wake-up (:meth:`idcrawl.core.urlqueue.MemoryUrlQueue.next_harvest`), the same for
        every worker; None: none waits."""
        first: Any = self.client.zrange(self.keys.uwait, 0, 0, withscores=True)
        return float(first[0][1]) if first else None

    def ready(self) -> int:
        """URLs queued and ready in the fleet, and URLs other workers took and have not answered (their
        pages may queue more): a worker is not finished while some are. Read again after every change
        this worker made, else at most every ``READY_FRESH`` seconds."""
        if time.monotonic() - self.status.at > READY_FRESH:
            self.poll()
        return self.status.ready + self.status.taken_by_others

    def give_back(self) -> int:
        """This worker leaves: the URLs it took and has not answered are ready again; returns how many."""
        given = 0
        for url in sorted(self.taken):
            given += int(self._put(keys=[self.keys.url(url)], args=[url, "back", f"t:{self.worker}"]))
        self.taken.clear()
        return given

    # -- reading -----------------------------------------------------------------------------

    def get(self, url: str) -> QueuedUrl | None:
        return next(_read(self.client, self.prefix, [url]), None)

    def entries(self) -> Iterator[QueuedUrl]:
        """Every URL of the job (a ``SCAN`` of its ``U:`` keys)."""
        return read_entries(self.client, self.prefix)

    def counts(self) -> list[UrlCount]:
        return count_urls(self.entries())


#: The fields of a URL's entry in a script's row order (``urls_common.lua``), then its links.
_ROW = ("owner", "col", "cps", "hops", "off", "paths", "host", "st", "w", "next", "last", "nf", "err", "cyc", "claims",
        "pri", "sum", "etag", "lm", "cap", "rat", "links")
#: URLs read in one round trip (:func:`read_entries`).
BATCH = 500


def read_entries(client: redis.Redis, prefix: str) -> Iterator[QueuedUrl]:
    """Every URL of the job whose keys start with ``prefix`` (a ``SCAN`` of its ``U:`` keys, read
    ``BATCH`` URLs per round trip); only reads. What ``scrapy idplan`` counts of a distributed job."""
    keys = JobKeys(prefix)
    batch: list[str] = []
    for key in scan_job(client, keys.url_pattern(), BATCH):
        batch.append(keys.url_of(reply_text(key)))
        if len(batch) == BATCH:
            yield from _read(client, prefix, batch)
            batch = []
    yield from _read(client, prefix, batch)


def _read(client: redis.Redis, prefix: str, urls: Sequence[str]) -> Iterator[QueuedUrl]:
    """The entries of ``urls`` (each read in one transaction; a URL gone in between is skipped)."""
    if not urls:
        return
    keys = JobKeys(prefix)
    with client.pipeline(transaction=True) as pipe:
        for url in urls:
            pipe.hmget(keys.url(url), *_ROW)
            pipe.hexists(keys.url(url), "links")
        replies = pipe.execute()
    for url, fields, has in zip(urls, replies[::2], replies[1::2], strict=True):
        if fields[0] is not None:
            try:
                entry = entry_of(url, [*fields, "1" if has else "0"])
            except (ValueError, KeyError, TypeError, AttributeError):
                from idcrawl.state.decode import DamagedState

                raise DamagedState(f"key {keys.url(url)!r}", None,
                                   "the URL's fields (hops, counters, state) do not decode") from None
            yield entry


