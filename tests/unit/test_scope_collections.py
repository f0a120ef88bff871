"""A URL belongs to every collection of every crawl profile that admits it (issue 30, finding 4):
deactivating a collection postpones only the URLs no active collection covers, deleting one drops
only those no other collection holds, and the yield group does not depend on list order."""

from __future__ import annotations

import pytest

from idcrawl.core.scope import Collection, CrawlProfile, JobScope, Seed
from idcrawl.core.urlqueue import MemoryUrlQueue, QueueState, group_of
from tests.unit.test_urlqueue import drain, rerun

LINKS = {"http://m.test/": ["http://m.test/a"], "http://m.test/a": ["http://m.test/a/b"],
         "http://n.test/": ["http://n.test/a"], "http://n.test/a": ["http://n.test/a/b"]}
PROFILES = {"pc": CrawlProfile("pc", 2, collection="c_off"), "pon": CrawlProfile("pon", 1, collection="c_on")}


def job(c_off_enabled: bool = False, collections: tuple[str, ...] = ("c_off", "c_on")) -> JobScope:
    return JobScope({"M": Seed("M", "http://m.test/", ("pc", "pon")), "N": Seed("N", "http://n.test/", ("pon", "pc"))},
                    {name: p for name, p in PROFILES.items() if p.collection in collections},
                    {name: Collection(name, enabled=c_off_enabled or name != "c_off") for name in collections},
                    pages=("M", "N"))


def crawl(scope: JobScope) -> tuple[MemoryUrlQueue, list[str]]:
    queue = MemoryUrlQueue()
    queue.start(scope, 0.0)
    for name in scope.pages:
        queue.seed(name, scope.seeds[name].url, 0.0)
    return queue, drain(queue, LINKS)


def test_finding_4_the_order_of_a_targets_crawl_profiles_changes_nothing() -> None:
    """M lists ["pc" (collection off), "pon" (on)], N the other way round: both are harvested to hop 1
    (what "pon" admits), and the hop-2 pages only "pc" admits wait, postponed, for both."""
    queue, fetched = crawl(job())
    assert sorted(fetched) == ["http://m.test/", "http://m.test/a", "http://n.test/", "http://n.test/a"]
    for host in ("m.test", "n.test"):
        assert queue.get(f"http://{host}/a/b").state is QueueState.POSTPONED  # type: ignore[union-attr]
        assert group_of(queue.get(f"http://{host}/").record) == ("c_on", "pon")  # type: ignore[union-attr]


@pytest.mark.parametrize("c_off_enabled", [False, True])
def test_the_yield_group_is_the_same_whatever_the_list_order(c_off_enabled: bool) -> None:
    queue, _ = crawl(job(c_off_enabled))
    for page in ("", "a"):
        m, n = queue.get(f"http://m.test/{page}"), queue.get(f"http://n.test/{page}")
        assert m is not None and n is not None
        assert group_of(m.record) == group_of(n.record)
        assert m.record.crawl_profiles == n.record.crawl_profiles


def test_reactivating_the_collection_releases_what_only_it_covers_and_fetches_nothing_twice() -> None:
    queue, _ = crawl(job())
    again = rerun(queue, job(c_off_enabled=True), 1.0)
    assert sorted(drain(again, LINKS, 1.0)) == ["http://m.test/a/b", "http://n.test/a/b"]


def test_deleting_a_collection_drops_only_the_urls_no_other_collection_holds() -> None:
    queue, _ = crawl(job())
    again = rerun(queue, job(collections=("c_on",)), 1.0)
    assert again.get("http://m.test/a/b") is None and again.get("http://n.test/a/b") is None  # "c_off" only
    for page in ("http://m.test/a", "http://n.test/a"):
        entry = again.get(page)
        assert entry is not None and entry.record.crawl_profiles == ("pon",) and entry.record.collection == "c_on"
