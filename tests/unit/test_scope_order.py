"""Order independence of crawl scope (issue 30, finding 1): over generated multi-seed link graphs, every
response order gives the same fetched pages, hops and owners, those of the reference walk
(tests/support/reference.py: each seed's walk to a fixpoint, owners by docs/scope.md's rank)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest

from idcrawl.core.scope import CrawlProfile, JobScope, ScopeKind, Seed
from idcrawl.core.urlqueue import MemoryUrlQueue
from tests.support.reference import scope_walk_truth

HOSTS = ("a.test", "b.test", "c.test")
SECTIONS = ("", "x/", "x/y/")
GRAPHS = 200
ORDERS = 5


@dataclass(frozen=True)
class Case:
    links: dict[str, list[str]]
    seeds: dict[str, str]  # name -> its page
    profiles: dict[str, list[tuple[str, int, int | None, ScopeKind]]]  # seed -> (name, max hops, max off-site, kind)

    def scope(self) -> JobScope:
        profiles = {name: CrawlProfile(name, hops, max_offsite_hops=off, kind=kind)
                    for listed in self.profiles.values() for name, hops, off, kind in listed}
        seeds = {name: Seed(name, page, tuple(p[0] for p in self.profiles[name])) for name, page in self.seeds.items()}
        return JobScope(seeds, profiles, pages=tuple(self.seeds))

    def admits(self, seed: str, url: str, hops: int, offsite: int) -> bool:
        """The crawl profiles' rules written again, plainly (not through idcrawl.core.scope)."""
        seed_host = urlsplit(self.seeds[seed]).hostname
        return any(hops <= max_hops and (max_off is None or offsite <= max_off)
                   and (kind is ScopeKind.ANY or urlsplit(url).hostname == seed_host)
                   for _, max_hops, max_off, kind in self.profiles[seed])


def generate(n: int) -> Case:
    """Graph ``n``: 6-14 pages on three hosts, some under sections (so that seeds differ in
    specificity), 0-30 links; 2-4 seeds (distinct pages) with 1-2 crawl profiles each."""
    rng = random.Random(n)
    pages = sorted({f"http://{rng.choice(HOSTS)}/{rng.choice(SECTIONS)}{rng.choice(('', 'p1', 'p2', 'p3'))}"
                    for _ in range(rng.randint(6, 14))})
    links: dict[str, list[str]] = {}
    for _ in range(rng.randint(0, 30)):
        links.setdefault(rng.choice(pages), []).append(rng.choice(pages))
    names = [f"s{i}" for i in range(rng.randint(2, min(4, len(pages))))]
    seeds = dict(zip(names, rng.sample(pages, len(names)), strict=True))
    profiles = {name: [(f"{name}p{j}", rng.randint(0, 3), rng.choice((None, None, 0, 1)),
                        rng.choice((ScopeKind.ANY, ScopeKind.HOST))) for j in range(rng.randint(1, 2))]
                for name in names}
    return Case(links, seeds, profiles)


def crawl(case: Case, order: int) -> tuple[MemoryUrlQueue, list[str]]:
    """A crawl of ``case`` whose responses come back in the order ``order`` draws: seeds started in a
    shuffled order, URLs taken in batches and answered in a random order of those in flight."""
    rng = random.Random(order)
    queue = MemoryUrlQueue(rng=random.Random(order + 1))
    queue.start(case.scope(), 0.0)
    for name in rng.sample(sorted(case.seeds), len(case.seeds)):
        queue.seed(name, case.seeds[name], 0.0)
    flying: list[str] = []
    fetched: list[str] = []
    while True:
        while rng.random() < 0.6 and (record := queue.take(lambda _: True, 0.0)) is not None:
            flying.append(record.url)
        if not flying:
            record = queue.take(lambda _: True, 0.0)
            if record is None:
                break
            flying.append(record.url)
        page = flying.pop(rng.randrange(len(flying)))
        fetched.append(page)
        queue.fetched(page, case.links.get(page, []), 0.0)
    return queue, fetched


def outcome(queue: MemoryUrlQueue, pages: Sequence[str]) -> dict[str, tuple[str, tuple[int, int]]]:
    result = {}
    for page in pages:
        entry = queue.get(page)
        assert entry is not None
        result[page] = (entry.record.owner, (entry.record.hops.hops, entry.record.hops.offsite))
    return result


def check(case: Case, truth: Mapping[str, tuple[str, tuple[int, int]]], order: int) -> None:
    queue, fetched = crawl(case, order)
    assert len(fetched) == len(set(fetched)), "a page fetched twice"
    assert sorted(fetched) == sorted(truth)
    assert outcome(queue, fetched) == dict(truth)


@pytest.mark.parametrize("chunk", range(4))
def test_every_response_order_fetches_the_reference_walk_with_its_hops_and_owners(chunk: int) -> None:
    """200 seeded graphs x 5 response orders (in 4 chunks): the same pages, each fetched once, each
    with the reference's owner and hops."""
    for n in range(chunk, GRAPHS, 4):
        case = generate(n)
        truth = scope_walk_truth(case.links, case.seeds, case.admits)
        for order in range(ORDERS):
            check(case, truth, n * ORDERS + order)


def test_issue_30_finding_1_a_narrow_seed_answering_first_does_not_cut_a_wider_ones_walk() -> None:
    """Seed A (max_hops 1) and seed B (max_hops 3), both scope any, link to gamma/x -> /y -> /z:
    whichever answers first, the 5 pages are fetched, and x has the same owner."""
    links = {"http://alpha.test/": ["http://gamma.test/x"], "http://beta.test/": ["http://gamma.test/x"],
             "http://gamma.test/x": ["http://gamma.test/y"], "http://gamma.test/y": ["http://gamma.test/z"]}
    case = Case(links, {"A": "http://alpha.test/", "B": "http://beta.test/"},
                {"A": [("one", 1, None, ScopeKind.ANY)], "B": [("three", 3, None, ScopeKind.ANY)]})
    for first in ("alpha.test", "beta.test"):
        queue = MemoryUrlQueue()
        queue.start(case.scope(), 0.0)
        queue.seed("A", case.seeds["A"], 0.0)
        queue.seed("B", case.seeds["B"], 0.0)
        fetched = []
        for host in (first, "beta.test" if first == "alpha.test" else "alpha.test"):
            record = queue.take(lambda h, host=host: h == host, 0.0)  # type: ignore[misc]
            assert record is not None
            fetched.append(record.url)
            queue.fetched(record.url, links.get(record.url, []), 0.0)
        while (record := queue.take(lambda _: True, 0.0)) is not None:
            fetched.append(record.url)
            queue.fetched(record.url, links.get(record.url, []), 0.0)
        assert sorted(fetched) == sorted({*links, "http://gamma.test/z"}), first
        entry = queue.get("http://gamma.test/x")
        assert entry is not None and entry.record.owner == "A"  # a tie at next harvest 0: the smaller name
