"""Sitemaps as evidence for an id target's recrawl (issue 31), in real crawls with the state kept.

An id target with ``sitemaps = true`` and ``resume = "due"`` (no crawl scope): its site's sitemap, read at
each run's start, moves its found pages' records (a ``lastmod`` newer than the last fetch: due now; a
``changefreq`` seeds a page's first interval) and tells its tail of ids above its last found one. The
clock is fixed with ``IDCRAWL_NOW``; the effect is on the next run, whose plan is made at its open.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from idcrawl.core.clock import format_time
from tests.support.crawl import CrawlResult, run_crawl
from tests.support.sitemap_site import SitemapSite, urlset
from tests.support.states import scrapy

T0 = 1_794_300_000.0  # 2026-11-10T08:40:00Z
HOUR = 3600.0


@pytest.fixture
def site() -> Iterator[SitemapSite]:
    server = SitemapSite({"/item/1": [], "/item/2": [], "/item/3": []})
    server.put("/robots.txt", f"User-agent: *\nSitemap: {server.url('/sitemap.xml')}\n".encode(), "text/plain")
    server.put("/sitemap.xml", urlset([{"loc": server.url(f"/item/{n}"), "lastmod": "2026-11-01"} for n in (1, 2, 3)]))
    server.start()
    yield server
    server.stop()


def job(tmp_path: Path, site: SitemapSite, sitemaps: str = "true") -> Path:
    """``window = 1``: one id in flight per lane, so each run fetches exactly the ids up to its margin."""
    path = tmp_path / "job.toml"
    path.write_text(f"""
[[targets]]
name = "items"
url = "{site.url('/item/{id}')}"
start = 1
margin = 1
window = 1
resume = "due"
sitemaps = {sitemaps}
""")
    return path


def crawl(tmp_path: Path, path: Path, now: float, **settings: object) -> CrawlResult:
    result = run_crawl(tmp_path, {"job": path}, {"IDCRAWL_NOW": format_time(now), **settings})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result


def pages(site: SitemapSite) -> Counter[str]:
    return Counter(p for p in site.fetched() if p.startswith("/item/"))


def test_lastmod_changefreq_and_newer_ids_in_the_sitemap_make_pages_and_the_tail_due_next_run(
    site: SitemapSite, tmp_path: Path,
) -> None:
    path = job(tmp_path, site)
    first = crawl(tmp_path, path, T0)
    assert sorted(item["id"] for item in first.items) == [1, 2, 3]
    assert first.stats["idcrawl/sitemaps/id_pages"] == 3
    assert "idcrawl/sitemaps/pages_moved" not in first.stats  # every lastmod before the fetch
    assert pages(site) == Counter({"/item/1": 1, "/item/2": 1, "/item/3": 1, "/item/4": 1})

    # an hour after run 1: page 2 changed, page 3 is said to change hourly, ids 4 and 5 are published
    site.put("/sitemap.xml", urlset([
        {"loc": site.url("/item/1"), "lastmod": "2026-11-01"},
        {"loc": site.url("/item/2"), "lastmod": format_time(T0 + HOUR)},
        {"loc": site.url("/item/3"), "changefreq": "hourly"},
        {"loc": site.url("/item/5"), "lastmod": format_time(T0 + HOUR)},
    ]))
    site.put("/item/4", b"<html><body>4</body></html>", "text/html")
    site.put("/item/5", b"<html><body>5</body></html>", "text/html")
    second = crawl(tmp_path, path, T0 + 2 * HOUR)  # nothing due yet (a day's first interval): the sitemap only
    assert pages(site) == Counter({"/item/1": 1, "/item/2": 1, "/item/3": 1, "/item/4": 1})
    assert second.stats["idcrawl/sitemaps/pages_moved"] == 2  # 2 by its lastmod, 3 by its changefreq
    assert second.stats["idcrawl/sitemaps/tails_due"] == 1  # id 5 above the last found, 3

    third = crawl(tmp_path, path, T0 + 3 * HOUR)
    fetched = pages(site)
    assert fetched["/item/1"] == 1  # no evidence: not due for a day
    assert fetched["/item/2"] == 2 and fetched["/item/3"] == 2  # moved by the sitemap
    assert fetched["/item/4"] == 2 and fetched["/item/5"] == 1 and fetched["/item/6"] == 1  # the tail walked
    assert sorted(item["id"] for item in third.items) == [4, 5]  # 2 and 3: same bodies, no item


def test_a_sitemap_listing_nothing_new_moves_nothing(site: SitemapSite, tmp_path: Path) -> None:
    path = job(tmp_path, site, f'["{site.url("/sitemap.xml")}"]')
    crawl(tmp_path, path, T0)
    second = crawl(tmp_path, path, T0 + 2 * HOUR)
    assert second.stats["idcrawl/sitemaps/id_pages"] == 3
    assert "idcrawl/sitemaps/pages_moved" not in second.stats and "idcrawl/sitemaps/tails_due" not in second.stats
    assert pages(site) == Counter({"/item/1": 1, "/item/2": 1, "/item/3": 1, "/item/4": 1})
    assert Counter(site.fetched())["/sitemap.xml"] == 2  # read at each run's start


def test_a_bad_sitemaps_value_on_an_id_target_stops_with_one_line(site: SitemapSite, tmp_path: Path) -> None:
    result = run_crawl(tmp_path, {"job": job(tmp_path, site, '"ftp://x/s.xml"')})
    assert result.returncode != 0
    assert "targets[0]: sitemaps='ftp://x/s.xml': must be an http or https URL" in result.stderr
    assert site.fetched() == []


def test_a_watching_crawl_takes_a_page_a_sitemap_made_due_in_the_next_wave_at_once(
    site: SitemapSite, tmp_path: Path,
) -> None:
    """Run 1 (2 h ago) finds 1..3, everything due a day later. A watch on the real clock: wave 1 has
    nothing due, but the sitemap says page 2 changed an hour ago; wave 2 comes at once (the page fell
    due during wave 1, before its end: not a day later) and fetches page 2 alone (SIGINT then)."""
    import time

    from tests.crawl.test_watch_crawl import watch_until

    started = time.time()
    path = job(tmp_path, site)
    crawl(tmp_path, path, started - 2 * HOUR)
    site.put("/sitemap.xml", urlset([
        {"loc": site.url("/item/2"), "lastmod": format_time(started - HOUR)},
        {"loc": site.url("/item/3"), "lastmod": "2026-11-01"},
    ]))
    site.log.clear()
    code, log = watch_until(tmp_path, {"job": path, "watch": "true"}, {}, "idcrawl: watch: wave 2 done")
    assert code == 0, log[-3000:]
    assert "Traceback" not in log, log[log.find("Traceback") - 500:][:3000]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["idcrawl/watch/waves"] == 2
    assert stats["idcrawl/sitemaps/pages_moved"] == 1  # in wave 1 (wave 2 found page 2 due already)
    assert pages(site) == Counter({"/item/2": 1})
    assert Counter(site.fetched())["/sitemap.xml"] == 2  # read at each wave


def both_job(tmp_path: Path, site: SitemapSite) -> Path:
    """A page target taking its site's sitemaps as seeds (robots.txt's ``Sitemap:`` line) and an id target
    naming the same sitemap as evidence."""
    site.put("/", b"<html><body>front</body></html>", "text/html")
    site.put("/sitemap.xml", urlset([{"loc": site.url(f"/item/{n}"), "lastmod": "2026-11-01"} for n in (1, 2, 3)]
                                    + [{"loc": site.url("/news/a")}, {"loc": site.url("/news/b")}]))
    site.put("/news/a", b"<html><body>a</body></html>", "text/html")
    site.put("/news/b", b"<html><body>b</body></html>", "text/html")
    path = tmp_path / "job.toml"
    path.write_text(f"""
[[crawl_profiles]]
name = "site"
max_hops = 0

[[targets]]
name = "front"
url = "{site.url('/')}"
crawl_profiles = ["site"]
sitemaps = true

[[targets]]
name = "items"
url = "{site.url('/item/{id}')}"
start = 1
margin = 1
window = 1
resume = "due"
sitemaps = ["{site.url('/sitemap.xml')}"]
""")
    return path


def test_a_sitemap_named_for_crawl_scope_and_as_evidence_is_fetched_once(site: SitemapSite, tmp_path: Path) -> None:
    """One reader per crawler: the sitemap serves the page target's seeds and the id target's evidence."""
    result = crawl(tmp_path, both_job(tmp_path, site), T0)
    fetched = Counter(site.fetched())
    assert fetched["/sitemap.xml"] == 1 and fetched["/robots.txt"] == 1
    assert fetched["/news/a"] == 1 and fetched["/news/b"] == 1  # seeds of the crawl scope
    assert result.stats["idcrawl/sitemaps/id_pages"] == 3  # evidence for the id target
    assert result.stats["idcrawl/sitemaps/files"] == 1
    assert sorted(item["id"] for item in result.items if "id" in item and item.get("target") == "items") == [1, 2, 3]


def test_a_tail_whose_sitemap_lists_an_id_far_past_its_margin_walks_straight_to_it(
    site: SitemapSite, tmp_path: Path,
) -> None:
    """Run 1 finds 1..3 (margin 1: cut at 4). Id 20 is published and listed: run 2 only reads the
    sitemap (the tail due now, 20 kept in its record); run 3 is stopped by a page limit on the way
    (no walk to its margin: the tail stays due); run 4 goes on from where run 3 stopped, past every
    miss to 20, finds it and stops one miss past it. On a tail walked by its margin alone, 20 is never
    reached (run 3 would stop at 4)."""
    path = job(tmp_path, site)
    crawl(tmp_path, path, T0)
    site.put("/item/20", b"<html><body>20</body></html>", "text/html")
    site.put("/sitemap.xml", urlset([{"loc": site.url(f"/item/{n}")} for n in (1, 2, 3, 20)]))
    second = crawl(tmp_path, path, T0 + 2 * HOUR)
    assert second.stats["idcrawl/sitemaps/tails_due"] == 1
    assert pages(site) == Counter({"/item/1": 1, "/item/2": 1, "/item/3": 1, "/item/4": 1})
    listed = scrapy(tmp_path, "iddue", "--job", str(path), "--at", format_time(T0 + 3 * HOUR), "--format", "json")
    assert listed.returncode == 0, listed.stderr
    (tail,) = (t["tail"] for t in json.loads(listed.stdout)["targets"])
    assert (tail["walk_from"], tail["reach"], tail["due"]) == (4, 20, True)
    tsv = scrapy(tmp_path, "iddue", "--job", str(path), "--at", format_time(T0 + 3 * HOUR), "--format", "tsv")
    header, row = (line.split("\t") for line in tsv.stdout.splitlines()[-2:])
    assert dict(zip(header, row, strict=True))["tail walk"] == "from 4 to 20 (listed), then the margin"

    limited = run_crawl(tmp_path, {"job": path}, {"IDCRAWL_NOW": format_time(T0 + 3 * HOUR),
                                                  "CLOSESPIDER_PAGECOUNT": 6})
    assert limited.returncode == 0, limited.stderr[-3000:]
    assert limited.stats["finish_reason"] == "closespider_pagecount"
    assert limited.items == [] and pages(site)["/item/20"] == 0, "stopped on the way"

    fourth = crawl(tmp_path, path, T0 + 4 * HOUR)
    assert "its tail walks on to 20, listed in a sitemap" in fourth.stderr
    fetched = pages(site)
    assert [item["id"] for item in fourth.items] == [20]
    assert all(fetched[f"/item/{n}"] >= 1 for n in range(5, 22)), "every id up to 20 and one past it"
    assert fetched["/item/20"] == 1 and fetched["/item/21"] == 1 and fetched["/item/22"] == 0
    assert fetched["/item/1"] == 1  # the found pages are not due for a day

    fifth = crawl(tmp_path, path, T0 + 30 * 24 * HOUR)  # 20 passed: the next walk goes by its margin again
    assert fifth.items == [] and pages(site)["/item/21"] == 2 and pages(site)["/item/22"] == 0


def test_a_tail_walks_on_to_a_listed_id_at_most_max_reach_ids_a_run(site: SitemapSite, tmp_path: Path) -> None:
    """A sitemap listing an id far off (a typo, another numbering) costs at most
    ``IDCRAWL_SITEMAP_MAX_REACH`` requests past a walk's start, each run: with 5, run 3 walks 4..8 past
    the misses, then its margin (9), and says how far it is from the listed 20; the id stays listed."""
    path = job(tmp_path, site)
    crawl(tmp_path, path, T0)
    site.put("/item/20", b"<html><body>20</body></html>", "text/html")
    site.put("/sitemap.xml", urlset([{"loc": site.url(f"/item/{n}")} for n in (1, 2, 3, 20)]))
    crawl(tmp_path, path, T0 + 2 * HOUR)
    listed = scrapy(tmp_path, "iddue", "--job", str(path), "--at", format_time(T0 + 3 * HOUR), "--format", "tsv",
                    "-s", "IDCRAWL_SITEMAP_MAX_REACH=5")
    header, row = (line.split("\t") for line in listed.stdout.splitlines()[-2:])
    assert dict(zip(header, row, strict=True))["tail walk"] == "from 4 to 8 (on the way to 20 listed), then the margin"

    third = crawl(tmp_path, path, T0 + 3 * HOUR, IDCRAWL_SITEMAP_MAX_REACH=5)
    assert "its tail walks on to 8, on the way to 20 listed in a sitemap (IDCRAWL_SITEMAP_MAX_REACH)" in third.stderr
    assert third.items == []
    assert pages(site) == Counter({"/item/1": 1, "/item/2": 1, "/item/3": 1, "/item/4": 2,
                                   **{f"/item/{n}": 1 for n in range(5, 10)}})
    stored = scrapy(tmp_path, "iddue", "--job", str(path), "--at", format_time(T0 + 30 * 24 * HOUR), "--format", "json")
    (tail,) = (t["tail"] for t in json.loads(stored.stdout)["targets"])
    assert tail["reach"] == 20  # kept: the next walk goes on to it (no cap given here: the default's 1000)


def test_a_watching_crawl_walks_a_tail_to_the_id_its_sitemap_listed_in_the_next_wave(
    site: SitemapSite, tmp_path: Path,
) -> None:
    """Run 1 (2 h ago) finds 1..3 (cut at 4), its tail due a day later. A watch on the real clock:
    wave 1 has nothing due, but the sitemap lists id 20; wave 2 comes at once and walks the tail
    from 4 past the misses to 20, finds it, and stops one miss past it (SIGINT then)."""
    import time

    from tests.crawl.test_watch_crawl import watch_until

    started = time.time()
    path = job(tmp_path, site)
    crawl(tmp_path, path, started - 2 * HOUR)
    site.put("/item/20", b"<html><body>20</body></html>", "text/html")
    site.put("/sitemap.xml", urlset([{"loc": site.url(f"/item/{n}")} for n in (1, 2, 3, 20)]))
    site.log.clear()
    code, log = watch_until(tmp_path, {"job": path, "watch": "true"}, {}, "idcrawl: watch: wave 2 done")
    assert code == 0, log[-3000:]
    assert "Traceback" not in log, log[log.find("Traceback") - 500:][:3000]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["idcrawl/watch/waves"] == 2 and stats["idcrawl/sitemaps/tails_due"] == 1
    assert pages(site) == Counter({f"/item/{n}": 1 for n in range(4, 22)})
    assert [json.loads(line)["id"] for line in (tmp_path / "items.jsonl").read_text().splitlines()] == [20]
