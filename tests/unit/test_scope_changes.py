"""Scope changes between runs take effect (issue 30, findings 2 and 3): a new seed on a page already
harvested walks its crawl profiles from the stored links; a widened crawl profile walks what it newly
admits; a narrowed one drops what it no longer admits; nothing is fetched twice."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from idcrawl.core.scope import CrawlProfile, JobScope, ScopeKind, Seed
from idcrawl.core.urlqueue import MemoryUrlQueue, QueueState
from tests.unit.test_urlqueue import drain, rerun

FRONT = "http://www.db.no/"
ARTICLE = "http://www.db.no/artikkel/en"
LINKS = {FRONT: [ARTICLE, "http://img.db.no/logo", "http://www.vg.no/"],
         ARTICLE: [f"{ARTICLE}/p1"], f"{ARTICLE}/p1": [f"{ARTICLE}/p2"], f"{ARTICLE}/p2": [f"{ARTICLE}/p3"],
         "http://img.db.no/logo": ["http://img.db.no/big"], "http://www.vg.no/": ["http://www.vg.no/sport"]}


def first_run(scope: JobScope) -> MemoryUrlQueue:
    queue = MemoryUrlQueue()
    queue.start(scope, 0.0)
    for name in scope.pages:
        queue.seed(name, scope.seeds[name].url, 0.0)
    drain(queue, LINKS)
    return queue


def next_run(queue: MemoryUrlQueue, scope: JobScope) -> tuple[MemoryUrlQueue, list[str]]:
    """The next run from what the last one stored (its scope marks too), its page targets started."""
    again = rerun(queue, scope, 1.0)
    for name in scope.pages:
        again.seed(name, scope.seeds[name].url, 1.0)
    return again, drain(again, LINKS, 1.0)


D = JobScope({"D": Seed("D", FRONT, ("d",))}, {"d": CrawlProfile("d", 1)}, pages=("D",))


def test_finding_2_a_new_seed_on_a_harvested_page_walks_its_own_crawl_profiles_from_the_stored_links() -> None:
    queue = first_run(D)
    assert queue.get(ARTICLE).state is QueueState.HARVESTED  # type: ignore[union-attr]
    two = JobScope({**D.seeds, "E": Seed("E", ARTICLE, ("deep",))},
                   {**D.crawl_profiles, "deep": CrawlProfile("deep", 2, kind=ScopeKind.PREFIX)}, pages=("D", "E"))
    queue, fetched = next_run(queue, two)
    assert sorted(fetched) == [f"{ARTICLE}/p1", f"{ARTICLE}/p2"]  # the article itself is not fetched again
    article = queue.get(ARTICLE)
    assert article is not None and article.record.owner == "E" and article.record.hops.hops == 0  # case a
    assert queue.get(f"{ARTICLE}/p2").record.owner == "E"  # type: ignore[union-attr]
    _, third = next_run(queue, two)
    assert third == []  # nothing changed: nothing walked, nothing fetched


@pytest.mark.parametrize(("widened", "new"), [
    (replace(D.crawl_profiles["d"], max_hops=2), [f"{ARTICLE}/p1"]),
    (replace(D.crawl_profiles["d"], kind=ScopeKind.DOMAIN), ["http://img.db.no/logo"]),
    (replace(D.crawl_profiles["d"], kind=ScopeKind.ANY, max_offsite_hops=1), ["http://img.db.no/logo",
                                                                               "http://www.vg.no/"]),
    (replace(D.crawl_profiles["d"], include=(re.compile(r"^http://www\.vg\.no/"),)), ["http://www.vg.no/"]),
    (replace(D.crawl_profiles["d"], max_hops=3, exclude=(re.compile(r"/p2$"),)), [f"{ARTICLE}/p1"]),
])
def test_finding_3_a_widened_crawl_profile_walks_what_it_newly_admits_from_the_stored_links(
    widened: CrawlProfile, new: list[str],
) -> None:
    queue = first_run(D)
    queue, fetched = next_run(queue, replace(D, crawl_profiles={"d": widened}))
    assert sorted(fetched) == new  # the front page and the article are not fetched again


def test_a_narrowed_crawl_profile_hands_a_queued_url_to_another_seed_that_still_admits_it() -> None:
    """A and B both reach c.test/x (A first; a tie: A owns it). Run 2 narrows A's crawl profile to its
    own pages: x is not dropped, B's claim takes it, and it is fetched once; A's out-of-scope pages go."""
    links = {"http://a.test/": ["http://c.test/x", "http://a.test/more"], "http://b.test/": ["http://c.test/x"]}
    wide = JobScope({"A": Seed("A", "http://a.test/", ("ka",)), "B": Seed("B", "http://b.test/", ("kb",))},
                    {"ka": CrawlProfile("ka", 2, kind=ScopeKind.ANY), "kb": CrawlProfile("kb", 2, kind=ScopeKind.ANY)},
                    pages=("A", "B"))
    queue = MemoryUrlQueue()
    queue.start(wide, 0.0)
    for name in ("A", "B"):
        queue.seed(name, wide.seeds[name].url, 0.0)
    for host in ("a.test", "b.test"):  # the run stops after the two front pages
        record = queue.take(lambda h, host=host: h == host, 0.0)  # type: ignore[misc]
        assert record is not None
        queue.fetched(record.url, links[record.url], 0.0)
    assert queue.get("http://c.test/x").record.owner == "A"  # type: ignore[union-attr]
    narrow = replace(wide, crawl_profiles={**wide.crawl_profiles, "ka": CrawlProfile("ka", 0, kind=ScopeKind.ANY)})
    again = rerun(queue, narrow, 1.0)
    x = again.get("http://c.test/x")
    assert x is not None and x.record.owner == "B" and x.state is QueueState.QUEUED
    assert again.get("http://a.test/more") is None  # A's alone: dropped
    assert drain(again, links, 1.0) == ["http://c.test/x"]
