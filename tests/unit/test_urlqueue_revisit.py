"""Revisit frequency per crawl profile in the URL queue (seed 003: step 6.3 and "processing the URL
itself"): a found page's next harvest is its last + the shortest revisit of its enabled in-scope crawl
profiles; a later run (or the same run) takes it again when due; a crawl profile slowed down since
the URL was queued puts it back; without the key a page is harvested once. Times are passed in: no
test sleeps."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.scope import (
    SEED,
    Collection,
    CrawlProfile,
    Harvest,
    Hops,
    JobScope,
    ScopeKind,
    Seed,
    UrlRecord,
    Verdict,
    check_dispatch,
    revisit_of,
)
from idcrawl.core.urlqueue import MemoryUrlQueue, QueueState
from tests.support.reference import revisit_truth, scope_truth
from tests.unit.test_urlqueue import drain, graph, rerun, url


def job(*profiles: CrawlProfile, collections: dict[str, Collection] | None = None) -> JobScope:
    """One page target ``s`` (``url(0)``) with ``profiles``."""
    return JobScope({"s": Seed("s", url(0), tuple(p.name for p in profiles))}, {p.name: p for p in profiles},
                    collections or {}, pages=("s",))


def profile(name: str, max_hops: int, revisit: float | None, **keys: object) -> CrawlProfile:
    return CrawlProfile(name, max_hops, kind=ScopeKind.ANY, revisit=revisit, **keys)  # type: ignore[arg-type]


def first_run(scope: JobScope, links: dict[str, list[str]], now: float = 0.0) -> tuple[MemoryUrlQueue, list[str]]:
    queue = MemoryUrlQueue(rng=random.Random(0))
    queue.start(scope, now)
    queue.seed("s", url(0), now)
    return queue, drain(queue, links, now)


def next_run(queue: MemoryUrlQueue, scope: JobScope, now: float) -> MemoryUrlQueue:
    """The next run at ``now``, as the scope middleware starts it (its page targets seeded again)."""
    queue = rerun(queue, scope, now)
    queue.seed("s", url(0), now)
    return queue


LINKS = {url(0): [url(1), url(2)], url(1): [url(3)], url(2): [url(3)]}  # hops 0, 1, 1, 2


# -- the rule ----------------------------------------------------------------------------------------


def test_the_revisit_is_the_shortest_of_the_active_crawl_profiles_that_have_it_in_scope() -> None:
    """Of every collection (a URL belongs to each collection of each crawl profile that admits it)."""
    scope = job(profile("slow", 2, 100.0, collection="news"), profile("off", 2, 5.0, collection="news", enabled=False),
                profile("other", 2, 7.0, collection="shop"), profile("none", 2, None, collection="news"),
                profile("fast", 0, 10.0, collection="news"),
                collections={"news": Collection("news"), "shop": Collection("shop")})
    in_scope = scope.scoped("s", url(1), Hops(1))  # a record's crawl profiles: those that have it in scope
    assert in_scope == ("slow", "off", "other", "none")
    assert revisit_of(UrlRecord(url(1), "s", "news", in_scope, Hops(1)), scope) == 7.0  # "other", of "shop"
    assert revisit_of(UrlRecord(url(1), "s", "news", ("slow", "off", "none"), Hops(1)), scope) == 100.0
    assert revisit_of(UrlRecord(url(0), "s", "news", scope.scoped("s", url(0), SEED), SEED), scope) == 7.0
    assert revisit_of(UrlRecord(url(0), "s", "news", ("slow", "fast"), SEED), scope) == 10.0
    assert revisit_of(UrlRecord(url(1), "s", "news", ("none",), Hops(1)), scope) is None  # harvested once
    ids = JobScope({"ids": Seed("ids", url(0), ("slow",))}, scope.crawl_profiles, scope.collections)
    # an id target's found page (hop 0): its lanes fetch it, the URL queue never revisits it
    assert revisit_of(UrlRecord(url(0), "ids", "news", ("slow",), SEED), ids) is None
    assert revisit_of(UrlRecord(url(1), "ids", "news", ("slow",), Hops(1)), ids) == 100.0


@pytest.mark.parametrize(("last", "not_found", "errors", "now", "verdict", "next_harvest"), [
    (None, 0, 0, 0.0, Verdict.HARVEST, None),  # never harvested
    (0.0, 0, 0, 99.0, Verdict.WAIT, 100.0),  # step 6.3: not due yet
    (0.0, 0, 0, 100.0, Verdict.HARVEST, None),  # due
    (0.0, 1, 0, 1.0, Verdict.HARVEST, None),  # "not found": fetched again at once, as without a revisit
    (0.0, 0, 2, 1.0, Verdict.HARVEST, None),  # an error: the same
])
def test_dispatch_waits_for_a_found_pages_revisit(last: float | None, not_found: int, errors: int, now: float,
                                                  verdict: Verdict, next_harvest: float | None) -> None:
    scope = job(profile("p", 2, 100.0))
    record = UrlRecord(url(1), "s", None, ("p",), Hops(1), None, last, not_found, errors, 1 if last is not None else 0)
    decision = check_dispatch(record, scope, now, postpone_for=60.0)
    assert (decision.verdict, decision.record.next_harvest) == (verdict, next_harvest)


# -- across runs and within one ----------------------------------------------------------------------


def test_without_a_revisit_a_found_page_is_harvested_once_however_late_the_next_run() -> None:
    scope = job(profile("p", 2, None))
    queue, fetched = first_run(scope, LINKS)
    assert sorted(fetched) == sorted([url(0), url(1), url(2), url(3)])
    assert all(e.record.next_harvest is None for e in queue.entries())
    queue = next_run(queue, scope, 1e12)
    assert drain(queue, LINKS, 1e12) == []


def test_a_found_page_is_harvested_again_when_its_revisit_is_due_with_its_counters() -> None:
    scope = job(profile("front", 0, 60.0), profile("daily", 2, 1000.0))
    queue, _ = first_run(scope, LINKS, 0.0)
    assert {e.url: e.record.next_harvest for e in queue.entries()} == {
        url(0): 60.0, url(1): 1000.0, url(2): 1000.0, url(3): 1000.0}
    queue = next_run(queue, scope, 59.0)
    assert drain(queue, LINKS, 59.0) == []  # nothing due
    queue = rerun(queue, scope, 60.0)
    assert drain(queue, LINKS, 60.0) == [url(0)]  # the front page, and its links are not new
    entry = queue.get(url(0))
    assert entry is not None and (entry.record.cycles, entry.record.last_harvest, entry.record.next_harvest,
                                  entry.record.hops, entry.state) == (2, 60.0, 120.0, SEED, QueueState.HARVESTED)
    queue = MemoryUrlQueue(queue.entries())
    reconciled = queue.start(scope, 1000.0)
    assert reconciled.due == 4 and reconciled.not_due == 0
    assert sorted(drain(queue, LINKS, 1000.0)) == sorted([url(0), url(1), url(2), url(3)])
    assert [queue.get(url(n)).record.cycles for n in range(4)] == [3, 2, 2, 2]  # type: ignore[union-attr]


def test_a_revisit_found_page_with_a_new_link_queues_it() -> None:
    scope = job(profile("front", 1, 60.0))
    queue, _ = first_run(scope, LINKS)
    queue = next_run(queue, scope, 60.0)
    fetched = drain(queue, {**LINKS, url(0): [url(1), url(2), url(5)]}, 60.0)
    assert sorted(fetched) == sorted([url(0), url(1), url(2), url(5)])
    entry = queue.get(url(5))
    assert entry is not None and entry.record.hops == Hops(1, 1) and entry.record.next_harvest == 120.0


def test_a_due_revisit_is_taken_later_in_the_same_run() -> None:
    scope = job(profile("p", 1, 100.0))
    queue, fetched = first_run(scope, {url(0): [url(1)]})
    assert fetched == [url(0), url(1)]
    assert queue.take(lambda _: True, 99.0) is None and queue.ready() == 0
    record = queue.take(lambda _: True, 100.0)
    assert record is not None and record.url == url(0)
    queue.fetched(url(0), [url(1)], 100.0)
    entry = queue.get(url(0))
    assert entry is not None and (entry.record.cycles, entry.record.next_harvest) == (2, 200.0)


def test_a_crawl_profile_slowed_down_since_the_url_was_queued_puts_it_back_unfetched() -> None:
    """Step 6.3: due and queued in run 2 (cut short after one page), the crawl profile slowed down for
    run 3: its URLs are not fetched; their next harvest is the last harvest + the new frequency."""
    fast, slow = job(profile("p", 2, 100.0)), job(profile("p", 2, 300.0))
    queue, _ = first_run(fast, LINKS, 0.0)
    queue = next_run(queue, fast, 150.0)
    assert queue.ready() == 4
    taken = queue.take(lambda _: True, 150.0)
    assert taken is not None
    queue.fetched(taken.url, LINKS.get(taken.url, []), 150.0)
    queue.take(lambda _: True, 150.0)  # taken, never answered (the run is killed)
    queue = MemoryUrlQueue(queue.entries())
    reconciled = queue.start(slow, 160.0)
    assert (reconciled.not_due, reconciled.requeued, reconciled.due) == (3, 1, 0)
    assert queue.ready() == 0 and drain(queue, LINKS, 160.0) == []
    due = {e.url: e.record.next_harvest for e in queue.entries()}
    assert due == {u: (450.0 if u == taken.url else 300.0) for u in (url(0), url(1), url(2), url(3))}
    assert all(e.state is QueueState.HARVESTED for e in queue.entries())
    queue = next_run(queue, slow, 300.0)
    assert sorted(drain(queue, LINKS, 300.0)) == sorted(u for u in due if u != taken.url)


def test_a_crawl_profile_sped_up_brings_the_next_harvest_forward() -> None:
    queue, _ = first_run(job(profile("p", 2, 1000.0)), LINKS)
    queue = next_run(queue, job(profile("p", 2, 50.0)), 50.0)
    assert len(drain(queue, LINKS, 50.0)) == 4


def test_a_revisit_taken_away_leaves_its_queued_urls_harvested() -> None:
    queue, _ = first_run(job(profile("p", 2, 100.0)), LINKS)
    queue = next_run(queue, job(profile("p", 2, 100.0)), 100.0)  # all due, queued; the run stops at once
    assert queue.ready() == 4
    queue = MemoryUrlQueue(queue.entries())
    assert queue.start(job(profile("p", 2, None)), 200.0).not_due == 4
    assert drain(queue, LINKS, 200.0) == []


def test_a_revisit_that_answers_not_found_is_queued_again_at_the_next_run_and_counts() -> None:
    scope = job(profile("p", 1, 100.0))
    queue, _ = first_run(scope, {url(0): [url(1)]})
    queue = next_run(queue, scope, 100.0)
    assert drain(queue, {url(0): [url(1)]}, 100.0,
                 answer=lambda u: Harvest.NOT_FOUND if u == url(1) else Harvest.FOUND) == [url(0), url(1)]
    queue = next_run(queue, scope, 101.0)  # not found: not waiting for its revisit
    assert drain(queue, {url(0): [url(1)]}, 101.0) == [url(1)]
    entry = queue.get(url(1))
    assert entry is not None and (entry.record.not_found, entry.record.cycles, entry.record.next_harvest) == (
        0, 3, 201.0)


def test_a_deactivated_collection_postpones_a_due_revisit_and_reactivation_releases_it() -> None:
    news = {"news": Collection("news")}
    scope = job(profile("p", 1, 100.0, collection="news"), collections=news)
    off = job(profile("p", 1, 100.0, collection="news"), collections={"news": Collection("news", enabled=False)})
    queue, _ = first_run(scope, {url(0): [url(1)]})
    queue = MemoryUrlQueue(queue.entries())
    queue.start(off, 500.0)
    assert drain(queue, {}, 500.0) == [] and queue.take(lambda _: True, 1e9) is None  # kept, not woken by time
    queue = next_run(queue, scope, 600.0)
    assert sorted(drain(queue, {url(0): [url(1)]}, 600.0)) == [url(0), url(1)]


@settings(max_examples=120, deadline=None)
@given(edges=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=30),
       max_hops=st.lists(st.integers(0, 3), min_size=1, max_size=3),
       runs=st.lists(st.tuples(st.integers(0, 70), st.lists(st.sampled_from([None, 10.0, 25.0, 60.0]),
                                                             min_size=3, max_size=3)), min_size=1, max_size=6),
       seed=st.integers(0, 2**32 - 1))
def test_runs_fetch_what_the_revisit_rule_says_each_page_once_per_run(
    edges: list[tuple[int, int]], max_hops: list[int], runs: list[tuple[int, list[float | None]]], seed: int,
) -> None:
    """Against the reference model: each run at its time fetches the pages never fetched and those
    whose last fetch + the shortest revisit of the crawl profiles reaching them is over (the crawl
    profiles' frequencies change from run to run: slowed down, sped up, taken away)."""
    links = graph(edges)
    times = []
    now = 0.0
    for step, _ in runs:
        now += step
        times.append(now)
    plan = [(t, revisits[:len(max_hops)]) for t, (_, revisits) in zip(times, runs, strict=True)]
    hops = scope_truth(links, url(0), max(max_hops), lambda _: True)
    truth = revisit_truth(hops, max_hops, plan)
    queue: MemoryUrlQueue | None = None
    cycles = dict.fromkeys(hops, 0)
    for (t, revisits), expected in zip(plan, truth, strict=True):
        scope = job(*(profile(f"p{i}", m, r) for i, (m, r) in enumerate(zip(max_hops, revisits, strict=True))))
        if queue is None:
            queue = MemoryUrlQueue(rng=random.Random(seed))
            queue.start(scope, t)
            queue.seed("s", url(0), t)
        else:
            queue = rerun(queue, scope, t, seed)
            queue.seed("s", url(0), t)
        fetched = drain(queue, links, t)
        assert len(fetched) == len(set(fetched))
        assert set(fetched) == expected, (t, revisits)
        for page in fetched:
            cycles[page] += 1
    assert queue is not None
    for page, n in cycles.items():
        entry = queue.get(page)
        assert entry is not None and entry.record.cycles == n


# -- seed ownership with revisits (the seed's outlink cases 3.3-3.6: the earliest next harvest) ------


def two_seeds(a_revisit: float | None, b_revisit: float | None) -> JobScope:
    return JobScope({"a": Seed("a", "http://www.db.no/", ("pa",)), "b": Seed("b", "http://www.vg.no/", ("pb",))},
                    {"pa": CrawlProfile("pa", 2, kind=ScopeKind.ANY, revisit=a_revisit),
                     "pb": CrawlProfile("pb", 2, kind=ScopeKind.ANY, revisit=b_revisit)}, pages=("a", "b"))


@pytest.mark.parametrize(("a_revisit", "b_revisit", "owner"), [
    (None, None, "a"),  # a tie (both never again): the smaller name, whichever seed reached it first
    (100.0, None, "a"),  # a harvests it again, b never: a gives the earliest next harvest
    (None, 100.0, "b"),
    (50.0, 100.0, "a"),
    (100.0, 50.0, "b"),
    (100.0, 100.0, "a"),  # a tie: the smaller name
])
def test_a_harvested_url_two_seeds_reach_goes_to_the_seed_that_harvests_it_next_first(
    a_revisit: float | None, b_revisit: float | None, owner: str,
) -> None:
    """Case 6 of the table (f): http://www.twatter.gov shares its domain with neither seed."""
    scope = two_seeds(a_revisit, b_revisit)
    queue = MemoryUrlQueue()
    queue.start(scope, 0.0)
    queue.seed("b", "http://www.vg.no/", 0.0)
    drain(queue, {"http://www.vg.no/": ["http://www.twatter.gov/"]})
    queue.seed("a", "http://www.db.no/", 1.0)
    drain(queue, {"http://www.db.no/": ["http://www.twatter.gov/"]}, 1.0)
    entry = queue.get("http://www.twatter.gov/")
    assert entry is not None and entry.record.owner == owner and entry.record.cycles == 1
    revisit = a_revisit if owner == "a" else b_revisit
    assert entry.record.next_harvest == (None if revisit is None else revisit)  # harvested at 0


@pytest.mark.parametrize("first", ["a", "b"])
def test_an_unharvested_url_two_seeds_reach_goes_by_the_tie_rule_whichever_reached_it_first(first: str) -> None:
    """Both would harvest it now (a tie at next harvest 0): the smaller name, in either order."""
    scope = two_seeds(10.0, None)
    queue = MemoryUrlQueue()
    queue.start(scope, 0.0)
    queue.seed("b", "http://www.vg.no/", 0.0)
    queue.seed("a", "http://www.db.no/", 0.0)
    hosts = {"a": "www.db.no", "b": "www.vg.no"}
    for name in (first, "b" if first == "a" else "a"):
        assert queue.take(lambda h, name=name: h == hosts[name], 0.0) is not None  # type: ignore[misc]
        queue.fetched(f"http://{hosts[name]}/", ["http://www.twatter.gov/"], 0.0)
    entry = queue.get("http://www.twatter.gov/")
    assert entry is not None and entry.record.owner == "a" and entry.state is QueueState.QUEUED


# -- outlink case 2.4: not in scope and queued with the same seed -------------------------------------


def test_a_link_out_of_scope_by_a_longer_path_keeps_its_entry_queued_with_the_same_seed() -> None:
    """The seed's outlink case 2.4 decides by hops: the entry's own path keeps it in scope (its hops
    are the fewest known), so a longer path that would be out of scope drops nothing."""
    scope = job(profile("p", 1, None))
    queue = MemoryUrlQueue()
    queue.start(scope, 0.0)
    queue.seed("s", url(0), 0.0)
    assert queue.take(lambda _: True, 0.0) is not None
    queue.fetched(url(0), [url(1), url(2)], 0.0)
    record = queue.take(lambda _: True, 0.0)
    assert record is not None
    other = url(2) if record.url == url(1) else url(1)
    assert queue.fetched(record.url, [other], 0.0) == []  # hop 2 > max_hops: out of scope by this path
    entry = queue.get(other)
    assert entry is not None and entry.state is QueueState.QUEUED and entry.record.hops.hops == 1
    assert drain(queue, {}) == [other]


def test_next_harvest_is_the_earliest_revisit_waiting_and_skips_what_was_taken_since() -> None:
    """Watch mode's wake-up for crawl scope: the earliest next harvest of the URLs waiting for a
    revisit; a URL promoted and harvested again has a later one (its old heap entry is stale)."""
    scope = job(profile("frontpages", 0, 3600.0), profile("daily", 2, 86_400.0))
    queue, _ = first_run(scope, LINKS, now=100.0)
    assert queue.next_harvest() == 100.0 + 3600  # the front page; its outlinks a day later
    assert drain(queue, LINKS, now=100.0 + 3600) == [url(0)]
    assert queue.next_harvest() == 100.0 + 7200
    assert sorted(drain(queue, LINKS, now=100.0 + 86_400)) == sorted(url(i) for i in range(4))
    assert queue.next_harvest() == 100.0 + 86_400 + 3600
    without = job(profile("once", 2, None))
    assert first_run(without, LINKS)[0].next_harvest() is None  # harvested once: nothing to wake for
