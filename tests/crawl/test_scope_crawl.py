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
    assert "idcrawl.spidermiddlewares.scope.IdScopeMiddleware" in result.stderr  # enabled for a job with scope
    prefix = f"http://a.test:{site.port}"
    answered = {path: hops for path, hops in expected.items() if path != "/9"}  # /9 answers 404: no item
    assert {item["url"][len(prefix):]: item["hops"] for item in result.items} == answered
    assert all(item["target"] == "front" and item["crawl_profiles"] == ["site"] for item in result.items)
    deeper = sum(1 for hops in answered.values() if hops > 0)  # outlink pages that answered 2xx
    assert result.stats.get("idcrawl/crawl_profiles/site/fetched", 0) == deeper
    assert result.stats.get("idcrawl/crawl_profiles/site/queued", 0) == len(expected)
    assert result.stats.get("idcrawl/crawl_profiles/site/not_found", 0) == len(expected) - len(answered)  # /9


ID_GRAPH = {
    "http://a.test/": ["http://a.test/1", "http://a.test/item/2"],  # a link to an id page: the lane's
    "http://a.test/1": ["http://a.test/deep"],
    "http://a.test/item/1": ["http://a.test/1", "http://a.test/item/3"],
    "http://a.test/item/2": ["http://a.test/5", "http://b.test/x"],
    "http://a.test/item/3": [],
    "http://a.test/5": ["http://a.test/deep"],
}


def test_found_id_pages_are_hop_0_and_a_link_to_an_id_page_is_not_fetched_twice(tmp_path: Path) -> None:
    site = LinkGraphSite(ID_GRAPH).start()
    try:
        path = tmp_path / "job.toml"
        path.write_text(f"""
[[crawl_profiles]]
name = "near"
max_hops = 1

[[targets]]
name = "front"
url = "{site.url('http://a.test/')}"
crawl_profiles = ["near"]

[[targets]]
name = "items"
url = "{site.url('http://a.test/item/{id}')}"
start = 1
max = 3
margin = 0
crawl_profiles = ["near"]
""")
        result = run_crawl(tmp_path, {"job": path}, resolver_settings([A, B, C]))
        assert result.returncode == 0, result.stderr[-3000:]
        pages = Counter(p for p in site.fetched(A) if p != "/robots.txt")
        # the front page and its hop 1; the id pages (the lanes'), and their hop 1 (/5); not /deep (hop 2)
        assert pages == Counter({"/": 1, "/1": 1, "/item/1": 1, "/item/2": 1, "/item/3": 1, "/5": 1})
        assert site.fetched(B) == []
        outlinks = {item["url"].split(str(site.port), 1)[1]: (item["target"], item["hops"])
                    for item in result.items if "hops" in item}
        assert outlinks == {"/": ("front", 0), "/1": ("front", 1), "/5": ("items", 1)}
        assert sorted(item["id"] for item in result.items if "id" in item) == [1, 2, 3]
    finally:
        site.stop()


def test_a_deactivated_target_or_collection_postpones_its_pages(site: LinkGraphSite, tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text(f"""
[[collections]]
name = "news"

[[collections]]
name = "old"
enabled = false

[[crawl_profiles]]
name = "news"
collection = "news"
max_hops = 1

[[crawl_profiles]]
name = "old"
collection = "old"
max_hops = 1

[[targets]]
name = "on"
url = "{site.url('http://a.test/5')}"
crawl_profiles = ["news"]

[[targets]]
name = "off"
url = "{site.url('http://a.test/4')}"
crawl_profiles = ["news"]
enabled = false

[[targets]]
name = "paused"
url = "{site.url('http://a.test/6')}"
crawl_profiles = ["old"]
""")
    result = run_crawl(tmp_path, {"job": path}, resolver_settings([A, B, C]))
    assert result.returncode == 0, result.stderr[-3000:]
    assert Counter(p for p in site.fetched(A) if p != "/robots.txt") == Counter({"/5": 1, "/7": 1})
    assert result.stats["idcrawl/crawl_profiles/news/postponed"] == 1
    assert result.stats["idcrawl/crawl_profiles/old/postponed"] == 1
    assert result.stats["idcrawl/crawl_profiles/news/queued"] == 2


def test_a_bad_crawl_profile_stops_the_crawl_with_one_line_and_no_request(site: LinkGraphSite, tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text(f"""
[[crawl_profiles]]
name = "near"
max_hops = -1

[[targets]]
url = "{site.url('http://a.test/')}"
crawl_profiles = ["near"]
""")
    result = run_crawl(tmp_path, {"job": path}, resolver_settings([A, B, C]))
    assert result.returncode != 0
    assert f"job file {str(path)!r}: crawl_profiles[0]: max_hops=-1: must be an integer >= 0" in result.stderr
    assert "Traceback" not in result.stderr
    assert site.log == []


def test_outlinks_obey_robots_txt(tmp_path: Path) -> None:
    site = LinkGraphSite(GRAPH, robots={A: "User-agent: *\nDisallow: /3\n"}).start()
    try:
        result = run_crawl(tmp_path, {"job": job(tmp_path, site, 3)}, resolver_settings([A, B, C]))
        assert result.returncode == 0, result.stderr[-3000:]
        pages = [p for p in site.fetched(A) if p != "/robots.txt"]
        # /3 is disallowed; /5 is reached only through it (hop 3), so it is not fetched either
        assert "/3" not in pages and "/5" not in pages
        assert Counter(pages) == Counter(dict.fromkeys(set(truth(site, 3)) - {"/3", "/5"}, 1))
    finally:
        site.stop()


def test_a_plain_id_crawl_has_no_scope_middleware(tmp_path: Path) -> None:
    site = LinkGraphSite(ID_GRAPH).start()
    try:
        result = run_crawl(tmp_path, {"url": site.url("http://a.test/item/{id}"), "start": 1, "max": 3, "margin": 0},
                           resolver_settings([A]))
        assert result.returncode == 0, result.stderr[-3000:]
        assert Counter(p for p in site.fetched(A) if p != "/robots.txt") == Counter(
            {"/item/1": 1, "/item/2": 1, "/item/3": 1})  # no outlink followed
        assert "IdScopeMiddleware" not in result.stderr  # not in the enabled spider middlewares: the hot path as before
        assert not any(key.startswith("idcrawl/crawl_profiles/") for key in result.stats)
    finally:
        site.stop()
