"""Crawl scope in real crawls (issue 16): page targets, outlinks in the scope of crawl profiles, hops.

The link-graph site (tests/support/linkgraph.py) serves several host names on one local port; the
tests' resolver sends those names to 127.0.0.1 and refuses every other one (no real DNS).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.crawl import run_crawl
from tests.support.linkgraph import LinkGraphSite, resolver_settings
from tests.support.reference import scope_truth

A, B, C = "a.test", "b.test", "c.test"

#: a.test is the seed's site; b.test and c.test are off its scope (a host crawl profile)
GRAPH = {
    "http://a.test/": ["http://a.test/1", "http://a.test/2", "http://b.test/x", "http://a.test/"],
    "http://a.test/1": ["http://a.test/3", "http://a.test/1", "http://c.test/y"],
    "http://a.test/2": ["http://a.test/3", "http://a.test/4", "http://a.test/2?utm=&b=2&a=1"],
    "http://a.test/2?a=1&b=2&utm=": ["http://a.test/9"],
    "http://a.test/3": ["http://a.test/5", "http://a.test/1"],
    "http://a.test/4": ["http://a.test/6#top", "http://a.test/"],
    "http://a.test/5": ["http://a.test/7"],
    "http://a.test/6": ["http://a.test/7", "http://a.test/8"],
    "http://a.test/7": ["http://a.test/10"],
    "http://b.test/x": ["http://a.test/11", "http://b.test/z"],
    "http://c.test/y": ["http://a.test/12"],
}


@pytest.fixture
def site() -> Iterator[LinkGraphSite]:
    server = LinkGraphSite(GRAPH).start()
    yield server
    server.stop()


def job(tmp_path: Path, site: LinkGraphSite, max_hops: int) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(f"""
[[crawl_profiles]]
name = "site"
max_hops = {max_hops}

[[targets]]
name = "front"
url = "{site.url('http://a.test/')}"
crawl_profiles = ["site"]
""")
    return path


def truth(site: LinkGraphSite, max_hops: int) -> dict[str, int]:
    """The BFS of the graph from a.test's front page through a.test pages, as the server's paths."""
    from idcrawl.core.scope import canonical

    links = {canonical(site.url(page)): [canonical(site.url(link)) for link in targets]
             for page, targets in GRAPH.items()}
    walk = scope_truth(links, canonical(site.url("http://a.test/")), max_hops, lambda url: "//a.test:" in url)
    prefix = f"http://a.test:{site.port}"
    return {url[len(prefix):]: hops for url, hops in walk.items()}


@pytest.mark.parametrize("max_hops", [0, 1, 2, 3])
def test_the_fetched_set_is_a_breadth_first_walk_to_max_hops_and_off_scope_hosts_get_no_request(
    site: LinkGraphSite, tmp_path: Path, max_hops: int,
) -> None:
    result = run_crawl(tmp_path, {"job": job(tmp_path, site, max_hops)}, resolver_settings([A, B, C]))
    assert result.returncode == 0, result.stderr[-3000:]
    expected = truth(site, max_hops)
    pages = [p for p in site.fetched(A) if p != "/robots.txt"]
    assert Counter(pages) == Counter(dict.fromkeys(expected, 1))  # each page of the walk once, nothing else
    assert site.fetched(B) == [] and site.fetched(C) == []  # not even robots.txt
    prefix = f"http://a.test:{site.port}"
    answered = {path: hops for path, hops in expected.items() if path != "/9"}  # /9 answers 404: no item
    assert {item["url"][len(prefix):]: item["hops"] for item in result.items} == answered
    assert all(item["target"] == "front" and item["crawl_profiles"] == ["site"] for item in result.items)
    deeper = sum(1 for hops in answered.values() if hops > 0)  # outlink pages that answered 2xx
    assert result.stats.get("idcrawl/crawl_profiles/site/fetched", 0) == deeper
    assert result.stats.get("idcrawl/crawl_profiles/site/queued", 0) == len(expected)
