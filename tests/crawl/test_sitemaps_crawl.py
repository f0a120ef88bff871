"""Sitemaps as seeds in real crawls (issue 30): robots.txt ``Sitemap:`` lines, an index, a gzip sitemap.

The site (tests/support/sitemap_site.py) lists pages that no page links to; a page target with
``sitemaps`` (or a crawl profile with it) fetches them as hop-0 pages, in its scope, each once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.crawl import run_crawl
from tests.support.sitemap_site import SitemapSite, gzipped, sitemap_index, urlset

GRAPH = {
    "/": ["/linked"],
    "/linked": [],
    "/a": ["/e"],
    "/b": [],
    "/c": [],
    "/d": [],
    "/e": [],
    "/item/1": [],
    "/item/2": [],
}


def build(site: SitemapSite, robots: bool = True) -> None:
    if robots:
        site.put("/robots.txt", f"User-agent: *\nAllow: /\nSitemap: {site.url('/sitemap_index.xml')}\n".encode(),
                 "text/plain")
    site.put("/sitemap_index.xml", sitemap_index([site.url("/sitemaps/news.xml"), site.url("/sitemaps/pages.xml.gz")]))
    site.put("/sitemaps/news.xml", urlset([
        {"loc": site.url("/a"), "lastmod": "2026-11-20T10:00:00Z", "priority": "0.9", "changefreq": "daily"},
        {"loc": site.url("/b"), "lastmod": "2026-11-01", "priority": "0.2"},
        {"loc": "http://elsewhere.test/x", "priority": "1.0"},  # another host: out of a host scope
        {"loc": site.url("/item/2")},  # an id target's page: its lanes fetch it
    ]))
    site.put("/sitemaps/pages.xml.gz", gzipped(urlset([
        {"loc": site.url("/c"), "changefreq": "weekly"}, {"loc": site.url("/d")}, {"loc": site.url("/a")},
    ])), "application/octet-stream")
    site.put("/sitemap.xml", urlset([{"loc": site.url("/d")}]))


def changed(path: str) -> bytes:
    """The page ``path`` of ``GRAPH`` in a new version: its links, and a line more."""
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in GRAPH[path])
    return f"<html><body>{path} {anchors}<p>changed</p></body></html>".encode()


@pytest.fixture
def site() -> Iterator[SitemapSite]:
    server = SitemapSite(GRAPH)
    build(server)
    server.start()
    yield server
    server.stop()


def job(tmp_path: Path, site: SitemapSite, *, max_hops: int, on: str) -> Path:
    path = tmp_path / "job.toml"
    profile_key = "sitemaps = true" if on == "profile" else ""
    target_key = "sitemaps = true" if on == "target" else ""
    path.write_text(f"""
[[crawl_profiles]]
name = "site"
max_hops = {max_hops}
{profile_key}

[[targets]]
name = "front"
url = "{site.url('/')}"
crawl_profiles = ["site"]
{target_key}

[[targets]]
name = "items"
url = "{site.url('/item/{id}')}"
start = 1
max = 2
margin = 0
""")
    return path


def pages(site: SitemapSite) -> Counter[str]:
    return Counter(p for p in site.fetched() if not p.startswith(("/robots.txt", "/sitemap")))


@pytest.mark.parametrize("on", ["target", "profile"])
def test_a_sitemap_index_and_a_gzip_sitemap_from_robots_are_hop_0_pages_in_scope_each_fetched_once(
    site: SitemapSite, tmp_path: Path, on: str,
) -> None:
    result = run_crawl(tmp_path, {"job": job(tmp_path, site, max_hops=0, on=on)}, {"CONCURRENT_REQUESTS": 2})
    assert result.returncode == 0, result.stderr[-3000:]
    # the sitemaps' pages (hop 0: their links are not followed with max_hops 0), the front page, the ids
    assert pages(site) == Counter(dict.fromkeys(["/", "/a", "/b", "/c", "/d", "/item/1", "/item/2"], 1))
    files = [p for p in site.fetched() if p.startswith("/sitemap")]
    assert sorted(files) == ["/sitemap_index.xml", "/sitemaps/news.xml", "/sitemaps/pages.xml.gz"]
    prefix = site.url("")
    outlinks = {item["url"][len(prefix):]: (item["target"], item["hops"]) for item in result.items if "hops" in item}
    assert outlinks == {path: ("front", 0) for path in ("/", "/a", "/b", "/c", "/d")}
    assert sorted(item["id"] for item in result.items if "id" in item) == [1, 2]
    assert result.stats["idcrawl/sitemaps/files"] == 3
    assert result.stats["idcrawl/sitemaps/seeded"] == 4  # /a, /b, /c, /d (/a listed twice: once)
    assert result.stats["idcrawl/sitemaps/out_of_scope"] == 1  # elsewhere.test
    assert result.stats["idcrawl/crawl_profiles/site/queued"] == 5


@pytest.mark.parametrize("obey", [True, False])
def test_robots_txt_is_fetched_once_per_site_the_sitemaps_read_from_the_robots_middleware_s_fetch(
    site: SitemapSite, tmp_path: Path, obey: bool,
) -> None:
    result = run_crawl(tmp_path, {"job": job(tmp_path, site, max_hops=0, on="target")},
                       {"CONCURRENT_REQUESTS": 4, "ROBOTSTXT_OBEY": obey})
    assert result.returncode == 0, result.stderr[-3000:]
    assert Counter(site.fetched())["/robots.txt"] == 1  # the server's log
    assert pages(site) == Counter(dict.fromkeys(["/", "/a", "/b", "/c", "/d", "/item/1", "/item/2"], 1))
    assert result.stats.get("idcrawl/robotstxt/shared") == (1 if obey else None)
    assert result.stats.get("robotstxt/request_count") == (1 if obey else None)


def test_links_of_sitemap_pages_are_followed_to_max_hops(site: SitemapSite, tmp_path: Path) -> None:
    result = run_crawl(tmp_path, {"job": job(tmp_path, site, max_hops=1, on="target")})
    assert result.returncode == 0, result.stderr[-3000:]
    assert pages(site) == Counter(dict.fromkeys(
        ["/", "/linked", "/a", "/e", "/b", "/c", "/d", "/item/1", "/item/2"], 1))
    prefix = site.url("")
    hops = {item["url"][len(prefix):]: item["hops"] for item in result.items if "hops" in item}
    assert hops["/e"] == 1 and hops["/a"] == 0 and hops["/linked"] == 1


def test_without_robots_sitemap_lines_the_site_s_sitemap_xml_is_read(tmp_path: Path) -> None:
    server = SitemapSite(GRAPH)
    build(server, robots=False)
    server.start()
    try:
        result = run_crawl(tmp_path, {"job": job(tmp_path, server, max_hops=0, on="target")})
        assert result.returncode == 0, result.stderr[-3000:]
        assert pages(server) == Counter(dict.fromkeys(["/", "/d", "/item/1", "/item/2"], 1))
        assert result.stats["idcrawl/sitemaps/files"] == 1
    finally:
        server.stop()


def test_a_second_run_does_not_fetch_sitemap_pages_again(site: SitemapSite, tmp_path: Path) -> None:
    path = job(tmp_path, site, max_hops=0, on="target")
    jobdir = {"JOBDIR": str(tmp_path / "jobdir")}  # sitemap requests are not the spider's: kept in memory
    first = run_crawl(tmp_path, {"job": path}, jobdir)
    assert first.returncode == 0, first.stderr[-3000:]
    assert " ERROR: " not in first.stderr and "Traceback" not in first.stderr
    before = pages(site)
    second = run_crawl(tmp_path, {"job": path}, jobdir)
    assert second.returncode == 0, second.stderr[-3000:]
    assert pages(site) == before  # harvested hop-0 pages are not queued again (no revisit)
    assert second.stats.get("idcrawl/sitemaps/seeded", 0) == 0


def test_a_bad_sitemaps_value_stops_the_crawl_with_one_line(site: SitemapSite, tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text(f"""
[[crawl_profiles]]
name = "site"
max_hops = 0

[[targets]]
url = "{site.url('/')}"
crawl_profiles = ["site"]
sitemaps = "ftp://x/sitemap.xml"
""")
    result = run_crawl(tmp_path, {"job": path})
    assert result.returncode != 0
    assert "targets[0]: sitemaps=" in result.stderr
    assert site.fetched() == []


def test_a_lastmod_newer_than_the_last_harvest_fetches_the_page_again(site: SitemapSite, tmp_path: Path) -> None:
    path = job(tmp_path, site, max_hops=0, on="target")
    first = run_crawl(tmp_path, {"job": path}, {"IDCRAWL_NOW": "2026-11-10T00:00:00Z"})
    assert first.returncode == 0, first.stderr[-3000:]
    site.put("/sitemaps/news.xml", urlset([
        {"loc": site.url("/a"), "lastmod": "2026-11-15T00:00:00Z"},  # changed after its harvest
        {"loc": site.url("/b"), "lastmod": "2026-11-01"},  # not since
        {"loc": site.url("/c"), "lastmod": "2026-12-01"},  # after now: no evidence
    ]))
    site.then("/a", changed("/a"), "text/html")  # it did change: an item (the same body would be no news)
    second = run_crawl(tmp_path, {"job": path}, {"IDCRAWL_NOW": "2026-11-20T00:00:00Z"})
    assert second.returncode == 0, second.stderr[-3000:]
    assert pages(site)["/a"] == 2 and pages(site)["/b"] == 1 and pages(site)["/c"] == 1
    assert second.stats["idcrawl/sitemaps/due"] == 1
    assert [item["url"] for item in second.items if "hops" in item] == [site.url("/a")]


def test_a_watching_crawl_reads_the_sitemaps_again_each_wave_and_fetches_what_changed(tmp_path: Path) -> None:
    """"hourly" (the front page, revisit 1 h) wakes a wave an hour after the first; "once" (no revisit)
    takes the sitemaps' pages. By wave 2 the news sitemap says /a changed half an hour after wave 1:
    wave 2 fetches the front page and /a, not /b. Both changed (an unchanged body is no item): the items
    limit (7 + 2) ends the watch after wave 2."""
    from idcrawl.core.clock import format_time

    t0 = 1_790_000_000.0
    server = SitemapSite(GRAPH)
    build(server)
    server.then("/sitemaps/news.xml", urlset([
        {"loc": server.url("/a"), "lastmod": format_time(t0 + 1800)},
        {"loc": server.url("/b"), "lastmod": format_time(t0 - 1800)},
    ]))
    server.then("/", changed("/"), "text/html")
    server.then("/a", changed("/a"), "text/html")
    server.start()
    try:
        path = tmp_path / "job.toml"
        path.write_text(f"""
[[crawl_profiles]]
name = "hourly"
max_hops = 0
revisit = "1h"

[[crawl_profiles]]
name = "once"
max_hops = 0

[[targets]]
name = "front"
url = "{server.url('/')}"
crawl_profiles = ["hourly"]

[[targets]]
name = "maps"
url = "{server.url('/linked')}"
crawl_profiles = ["once"]
sitemaps = true
""")
        result = run_crawl(tmp_path, {"job": path, "watch": "true"},
                           {"IDCRAWL_NOW": format_time(t0), "IDCRAWL_WATCH_SPEED": 3600, "CONCURRENT_REQUESTS": 1,
                            "CLOSESPIDER_ITEMCOUNT": 9})
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        assert result.stats["idcrawl/watch/waves"] == 2
        # no id target here: /item/2 is a page like the others
        assert pages(server) == Counter({"/": 2, "/linked": 1, "/a": 2, "/b": 1, "/c": 1, "/d": 1, "/item/2": 1})
        assert result.stats["idcrawl/sitemaps/due"] == 1
        assert server.fetched().count("/sitemaps/news.xml") == 2
    finally:
        server.stop()
