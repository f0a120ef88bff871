"""The crawl scope core (idcrawl/core/scope.py, seed 003): scope rules, hops, seed ownership (table
a-f), harvest checks at dispatch, per-URL counters, the yield model, and the walk against a BFS."""

from __future__ import annotations

import random
import re
from math import exp, lgamma, log, sqrt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.scope import (
    SEED,
    Candidate,
    Collection,
    CrawlProfile,
    Harvest,
    Hops,
    JobScope,
    Owner,
    ScopeKind,
    Seed,
    UrlRecord,
    Verdict,
    canonical,
    check_dispatch,
    choose,
    choose_owner,
    expected_shares,
    harvested,
    in_scope,
    ownership_case,
    registered_domain,
    specificity,
)
from idcrawl.core.urlqueue import MemoryUrlQueue
from tests.support.reference import scope_states_truth, scope_truth

# -- ownership: the seed's table a-f, with its exact URLs ------------------------------------------

#: case: (seed in context, outlink, seed in queue, the seed's case 1..6, the winner or None: by next harvest)
TABLE = {
    "a": ("http://www.db.no/artikkel/en", "http://www.db.no/artikkel/en", "http://www.db.no", 1, Owner.CONTEXT),
    "b": ("http://www.db.no/", "http://www.db.no/artikkel/en", "http://www.db.no/artikkel/en", 2, Owner.QUEUED),
    "c": ("http://www.db.no", "http://www.db.no/artikkel/to", "http://www.db.no/artikkel", 3, Owner.QUEUED),
    "d": ("http://www.db.no", "http://www.db.no/bla", "http://www.vg.no", 4, None),
    "e": ("http://www.vg.no", "http://www.db.no/bla", "http://www.db.no", 5, None),
    "f": ("http://www.db.no", "http://www.twatter.gov", "http://www.vg.no", 6, None),
}


@pytest.mark.parametrize("case", sorted(TABLE))
def test_seed_ownership_follows_the_seed_table(case: str) -> None:
    context, outlink, queued, number, winner = TABLE[case]
    assert ownership_case(outlink, context, queued) == number
    if winner is not None:  # the bold seed of the table, whatever the next harvest times
        for context_next, queued_next in ((0.0, 0.0), (0.0, 60.0), (60.0, 0.0)):
            assert choose_owner(outlink, context, queued, context_next=context_next,
                                queued_next=queued_next) is winner
    else:  # cases 4-6: the earliest next harvest time; a tie keeps the queued seed
        assert choose_owner(outlink, context, queued, context_next=10.0, queued_next=20.0) is Owner.CONTEXT
        assert choose_owner(outlink, context, queued, context_next=20.0, queued_next=10.0) is Owner.QUEUED
        assert choose_owner(outlink, context, queued, context_next=10.0, queued_next=10.0) is Owner.QUEUED


def test_specificity_counts_the_seed_path_that_begins_the_url() -> None:
    assert specificity("http://www.db.no", "http://www.db.no/artikkel/to") == 1
    assert specificity("http://www.db.no/artikkel", "http://www.db.no/artikkel/to") == 2
    assert specificity("http://www.db.no/sport", "http://www.db.no/artikkel/to") == -1
    assert specificity("http://img.db.no/", "http://www.db.no/artikkel/to") == -1


def test_the_same_domain_case_with_equally_specific_seeds_goes_by_next_harvest() -> None:
    url, a, b = "http://www.db.no/bla", "http://www.db.no/sport", "http://img.db.no/"
    assert ownership_case(url, a, b) == 3
    assert choose_owner(url, a, b, context_next=1.0, queued_next=2.0) is Owner.CONTEXT
    assert choose_owner(url, a, b, context_next=2.0, queued_next=1.0) is Owner.QUEUED


# -- scope rules and counters ----------------------------------------------------------------------


def test_registered_domains_come_from_the_public_suffix_list_offline() -> None:
    assert registered_domain("www.db.no") == registered_domain("img.db.no") == "db.no"
    assert registered_domain("www.bbc.co.uk") == "bbc.co.uk"
    assert registered_domain("a.test") == "a.test"  # no public suffix: the host is its own domain
    assert registered_domain("127.0.0.1") == "127.0.0.1"


def test_hops_count_every_link_and_offsite_hops_start_where_a_link_leaves_its_referrers_host() -> None:
    one = SEED.follow("http://a.test/", "http://a.test/x")
    assert one == Hops(1, 0)
    out = one.follow("http://a.test/x", "http://b.test/y")
    assert out == Hops(2, 1)
    assert out.follow("http://b.test/y", "http://b.test/z") == Hops(3, 2)  # off site, every link counts
    assert out.follow("http://b.test/y", "http://a.test/back") == Hops(3, 2)


def profile(**keys: object) -> CrawlProfile:
    return CrawlProfile(**{"name": "p", "max_hops": 2, **keys})  # type: ignore[arg-type]


SEED_URL = "http://www.db.no/artikkel/en"


@pytest.mark.parametrize(("keys", "url", "hops", "expected"), [
    ({}, "http://www.db.no/x", Hops(1, 0), True),
    ({}, "http://img.db.no/x", Hops(1, 1), False),  # host: the seed's host only
    ({}, "http://www.db.no/x", Hops(3, 0), False),  # past max_hops
    ({"kind": ScopeKind.DOMAIN}, "http://img.db.no/x", Hops(1, 1), True),
    ({"kind": ScopeKind.DOMAIN}, "http://www.vg.no/x", Hops(1, 1), False),
    ({"kind": ScopeKind.DOMAIN, "max_offsite_hops": 0}, "http://img.db.no/x", Hops(1, 1), False),
    ({"kind": ScopeKind.PREFIX}, "http://www.db.no/artikkel/to", Hops(1, 0), True),  # the seed's folder
    ({"kind": ScopeKind.PREFIX}, "http://www.db.no/sport/to", Hops(1, 0), False),
    ({"kind": ScopeKind.PREFIX, "url_prefixes": ("http://www.db.no/sport/",)}, "http://www.db.no/sport/to",
     Hops(1, 0), True),
    ({"kind": ScopeKind.ANY}, "http://www.twatter.gov/", Hops(1, 1), True),
    ({"kind": ScopeKind.ANY, "max_offsite_hops": 0}, "http://www.twatter.gov/", Hops(1, 1), False),
    ({"include": (re.compile(r"^http://cdn\.vg\.no/"),)}, "http://cdn.vg.no/a.png", Hops(1, 1), True),
    ({"exclude": (re.compile(r"\.pdf$"),)}, "http://www.db.no/a.pdf", Hops(1, 0), False),
    ({"schemes": ("https",)}, "http://www.db.no/x", Hops(1, 0), False),
    ({"enabled": False}, "http://www.db.no/x", Hops(1, 0), True),  # deactivation postpones, scope stays
])
def test_scope_rules(keys: dict[str, object], url: str, hops: Hops, expected: bool) -> None:
    assert in_scope(profile(**keys), canonical(SEED_URL), canonical(url), hops) is expected


def test_not_found_and_error_counters_are_incremented_and_reset_and_cycles_counted() -> None:
    record = UrlRecord("http://a.test/x", "t", None, ("p",), Hops(2, 0))
    seen = []
    for now, result in enumerate([Harvest.NOT_FOUND, Harvest.NOT_FOUND, Harvest.FOUND]):
        record = harvested(record, result, float(now))
        seen.append((record.not_found, record.cycles, record.last_harvest))
    assert seen == [(1, 1, 0.0), (2, 2, 1.0), (0, 3, 2.0)]
    assert record.hops == Hops(2, 0)  # hops are left as they are
    record = harvested(harvested(record, Harvest.ERROR, 3.0), Harvest.ERROR, 4.0)
    assert (record.errors, record.not_found) == (2, 0)
    assert harvested(record, Harvest.NOT_FOUND, 5.0).errors == 0


# -- harvest checks at dispatch (steps 1-7) --------------------------------------------------------


def job_scope(**changes: object) -> JobScope:
    collections = {"news": Collection("news"), "old": Collection("old")}
    crawl_profiles = {"daily": CrawlProfile("daily", 2, "news"), "deep": CrawlProfile("deep", 3, "news"),
                      "archive": CrawlProfile("archive", 3, "old")}
    seeds = {"db": Seed("db", "http://www.db.no/", ("daily", "archive")),
             "db2": Seed("db2", "http://www.db.no/artikkel", ("deep",))}
    scope = {"seeds": seeds, "crawl_profiles": crawl_profiles, "collections": collections, **changes}
    return JobScope(**scope)  # type: ignore[arg-type]


RECORD = UrlRecord("http://www.db.no/artikkel/to", "db", "news", ("daily",), Hops(2, 0))


def test_dispatch_harvests_a_url_in_scope_of_an_enabled_crawl_profile() -> None:
    decision = check_dispatch(RECORD, job_scope(), now=100.0, postpone_for=60.0)
    assert decision.verdict is Verdict.HARVEST
    assert decision.record.crawl_profiles == ("daily", "archive")  # every crawl profile that admits it


@pytest.mark.parametrize(("changes", "verdict", "reason"), [
    ({"seeds": {"db2": Seed("db2", "http://www.db.no/artikkel", ("deep",))}}, Verdict.REOWN, "target 'db' deleted"),
    ({"seeds": {"x": Seed("x", "http://www.vg.no/", ("deep",))}}, Verdict.DROP, "target 'db' deleted"),
    ({"collections": {"old": Collection("old")}, "seeds": {"db": Seed("db", "http://www.db.no/", ("daily",))}},
     Verdict.DROP, "collection 'news' deleted"),
    ({"seeds": {"db": Seed("db", "http://www.db.no/", ("daily",), enabled=False)}}, Verdict.POSTPONE,
     "target 'db' deactivated"),
    ({"collections": {"news": Collection("news", enabled=False)}}, Verdict.POSTPONE, "collection 'news' deactivated"),
    ({"crawl_profiles": {"daily": CrawlProfile("daily", 2, "news", enabled=False)}}, Verdict.POSTPONE,
     "crawl profiles daily deactivated"),
    ({"crawl_profiles": {"daily": CrawlProfile("daily", 1, "news")}}, Verdict.DROP, "in the scope of none"),
    ({"seeds": {"db": Seed("db", "http://www.db.no/", ("archive",))},
      "crawl_profiles": {"archive": CrawlProfile("archive", 1, "old")}}, Verdict.DROP, "in the scope of none"),
])
def test_dispatch_drops_postpones_or_reowns(changes: dict[str, object], verdict: Verdict, reason: str) -> None:
    decision = check_dispatch(RECORD, job_scope(**changes), now=100.0, postpone_for=60.0)
    assert (decision.verdict, decision.reason.startswith(reason)) == (verdict, True), decision
    if verdict is Verdict.POSTPONE:
        assert decision.record.next_harvest == 160.0  # kept, with a next harvest in the future
    if verdict is Verdict.REOWN:
        assert (decision.record.owner, decision.record.crawl_profiles) == ("db2", ("deep",))


# -- yields ----------------------------------------------------------------------------------------

DRAWS = 2000


def seed_example() -> list[Candidate[int]]:
    """The seed's example: 20 URLs ready on one host, one collection: 1 "frontpages", 19 "daily" (yield 0.9)."""
    return [Candidate(0, "news", "frontpages", 0.0, 0.0)] + [
        Candidate(i, "news", "daily", 0.0, 0.9) for i in range(1, 20)]


def binomial_outside(n: int, p: float, low: float, high: float) -> float:
    """P(X < low or X > high) for X ~ Binomial(n, p), exactly (log-gamma pmf)."""
    def pmf(k: int) -> float:
        return exp(lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1) + k * log(p) + (n - k) * log(1 - p))
    return sum(pmf(k) for k in range(n + 1) if k < low or k > high)


def test_the_seed_example_frontpages_get_about_18_slots_in_20() -> None:
    candidates = seed_example()
    p = expected_shares(candidates)[("news", "frontpages")]
    assert p == pytest.approx(1 / 20 + 19 / 20 * 0.9)  # 0.905: 18.1 slots in 20
    mean, sd = DRAWS * p, sqrt(DRAWS * p * (1 - p))  # 1810, 13.1
    rng = random.Random(2026)
    wins = sum(choose(candidates, rng).crawl_profile == "frontpages" for _ in range(DRAWS))
    # the seed is fixed, so this cannot fail by chance; any seed fails 3 sd with probability 0.26%
    assert abs(wins - mean) <= 3 * sd, (wins, mean, sd)


def test_the_yield_model_holds_for_any_seed_within_a_bound_a_false_failure_misses_one_in_a_million() -> None:
    candidates = seed_example()
    p = expected_shares(candidates)[("news", "frontpages")]
    mean, sd = DRAWS * p, sqrt(DRAWS * p * (1 - p))
    seeds = range(10)
    # 5.5 sd: each seed fails with probability 7.1e-8 (exact binomial tail); ten seeds 7.1e-7 < 1e-6
    assert len(seeds) * binomial_outside(DRAWS, p, mean - 5.5 * sd, mean + 5.5 * sd) < 1e-6
    for seed in seeds:
        rng = random.Random(seed)
        wins = sum(choose(candidates, rng).crawl_profile == "frontpages" for _ in range(DRAWS))
        assert abs(wins - mean) <= 5.5 * sd, (seed, wins, mean, sd)


def test_collections_yield_before_crawl_profiles_and_a_lone_collection_gets_every_slot() -> None:
    lone = [Candidate(i, "news", "daily", 0.9, 0.9) for i in range(5)]
    rng = random.Random(1)
    assert all(choose(lone, rng).collection == "news" for _ in range(100))
    assert expected_shares(lone) == {("news", "daily"): pytest.approx(1.0)}
    mixed = [Candidate(0, "a", "x", 0.5, 0.0), Candidate(1, "b", "y", 0.0, 0.0)]
    shares = expected_shares(mixed)
    assert shares[("a", "x")] == pytest.approx(0.5 * 0.5)  # a drawn half the time and keeps it half of those
    assert shares[("b", "y")] == pytest.approx(0.75)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y"]),
                          st.sampled_from([0.0, 0.5, 0.9]), st.sampled_from([0.0, 0.3, 0.99])),
                min_size=1, max_size=12))
def test_expected_shares_are_a_distribution_over_the_groups_present(
    rows: list[tuple[str, str, float, float]],
) -> None:
    # a collection's yield is one number: the first row of each collection gives it
    first: dict[str, float] = {}
    candidates = [Candidate(i, c, f"{c}-{x}", first.setdefault(c, cy), py) for i, (c, x, cy, py) in enumerate(rows)]
    shares = expected_shares(candidates)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert set(shares) == {(c.collection, c.crawl_profile) for c in candidates}
    assert all(share >= 0 for share in shares.values())


# -- the walk: the fetched set is a BFS to max_hops, whatever the order of arrival -----------------

HOSTS = ["a.test", "b.test", "c.test"]


@settings(max_examples=200, deadline=None)
@given(
    edges=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=40),
    max_hops=st.integers(0, 4),
    kind=st.sampled_from([ScopeKind.HOST, ScopeKind.ANY]),
    order=st.randoms(use_true_random=False),
)
def test_the_walk_fetches_a_breadth_first_walk_to_max_hops_in_any_order(
    edges: list[tuple[int, int]], max_hops: int, kind: ScopeKind, order: random.Random,
) -> None:
    def url(n: int) -> str:
        return f"http://{HOSTS[n % 3]}/p{n}"

    links: dict[str, list[str]] = {}
    for a, b in edges:
        links.setdefault(url(a), []).append(url(b))
    seed = url(0)
    scope = JobScope({"s": Seed("s", seed, ("p",))}, {"p": CrawlProfile("p", max_hops, kind=kind)})
    walk = _queue(scope)
    assert walk.seed("s", seed, 0.0) is not None
    pending = [seed]
    fetched: list[str] = []
    while pending:  # pages answer in any order
        page = pending.pop(order.randrange(len(pending)))
        fetched.append(page)
        pending.extend(entry.url for entry in walk.fetched(page, links.get(page, []), 0.0))
    truth = scope_truth(links, seed, max_hops, lambda u: kind is ScopeKind.ANY or u.startswith("http://a.test/"))
    assert sorted(fetched) == sorted(truth)  # each page once, and exactly the BFS's
    for page, hops in truth.items():
        entry = walk.get(page)
        assert entry is not None and entry.record.hops.hops == hops


def test_a_link_reached_from_two_seeds_is_owned_by_the_table_and_queued_once() -> None:
    scope = JobScope({"front": Seed("front", "http://www.db.no/", ("p",)),
                      "section": Seed("section", "http://www.db.no/artikkel", ("p",))},
                     {"p": CrawlProfile("p", 2)})
    walk = _queue(scope)
    walk.seed("front", "http://www.db.no/", 0.0)
    walk.seed("section", "http://www.db.no/artikkel", 0.0)
    first = walk.fetched("http://www.db.no/", ["http://www.db.no/artikkel/to"], 0.0)
    assert [(e.url, e.record.owner) for e in first] == [("http://www.db.no/artikkel/to", "front")]
    # the more specific seed reaches it too: case 3, it takes the URL over (a changed entry), not queued again
    second = walk.fetched("http://www.db.no/artikkel", ["http://www.db.no/artikkel/to"], 0.0)
    assert [(e.url, e.record.owner) for e in second] == [("http://www.db.no/artikkel/to", "section")]
    taken = []
    while (record := walk.take(lambda host: True, 0.0)) is not None:
        taken.append(record.url)
    assert taken.count("http://www.db.no/artikkel/to") == 1


@settings(max_examples=300, deadline=None)
@given(
    edges=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=40),
    max_hops=st.integers(0, 4),
    max_offsite=st.sampled_from([None, 0, 1, 2]),
    kind=st.sampled_from([ScopeKind.HOST, ScopeKind.ANY]),
    include_b=st.booleans(),
    order=st.randoms(use_true_random=False),
)
def test_the_walk_with_off_site_hops_reaches_what_a_walk_of_both_counters_reaches(
    edges: list[tuple[int, int]], max_hops: int, max_offsite: int | None, kind: ScopeKind, include_b: bool,
    order: random.Random,
) -> None:
    def url(n: int) -> str:
        return f"http://{HOSTS[n % 3]}/p{n}"

    links: dict[str, list[str]] = {}
    for a, b in edges:
        links.setdefault(url(a), []).append(url(b))
    seed = url(0)
    crawl_profile = CrawlProfile("p", max_hops, max_offsite_hops=max_offsite, kind=kind,
                                 include=(re.compile(r"^http://b\.test/"),) if include_b else ())
    walk = _queue(JobScope({"s": Seed("s", seed, ("p",))}, {"p": crawl_profile}))
    walk.seed("s", seed, 0.0)
    pending, fetched = [seed], []
    while pending:
        page = pending.pop(order.randrange(len(pending)))
        fetched.append(page)
        pending.extend(entry.url for entry in walk.fetched(page, links.get(page, []), 0.0))
    truth = scope_states_truth(links, seed, lambda u, h, o: in_scope(crawl_profile, seed, u, Hops(h, o)))
    assert sorted(fetched) == sorted(truth)


def _queue(scope: JobScope) -> MemoryUrlQueue:
    """The URL queue the crawl walks with (:mod:`idcrawl.core.urlqueue`), started on ``scope``."""
    queue = MemoryUrlQueue()
    queue.start(scope, 0.0)
    return queue
