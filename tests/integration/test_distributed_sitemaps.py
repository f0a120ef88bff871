"""Sitemaps as seeds and as evidence in a distributed job: two real ``scrapy crawl`` workers, one
redis-server, the sitemap test site (tests/support/sitemap_site.py).

One worker of each run reads the sitemaps (robots.txt, each sitemap file fetched once for the fleet);
the fleet's one URL queue fetches each listed page once, and a page whose ``lastmod`` is newer than its
harvest once more in the next run, not once per worker.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.crawl.test_sitemaps_crawl import GRAPH, build, job, pages
from tests.integration.test_distributed_crawl import finish, start_worker, worker_settings
from tests.support.fleet_runs import wait_out_the_runs_grace
from tests.support.sitemap_site import SitemapSite, urlset

redis = pytest.importorskip("redis")


def run_fleet(tmp_path: Path, run: str, path: Path, redis_server: object, now: str) -> list:
    # a run of its own: the last run's grace (one lease) over first, else these workers join it (run.lua)
    settings = worker_settings(redis_server, job="maps", IDCRAWL_NOW=now, IDCRAWL_REDIS_LEASE_TIMEOUT=1)
    wait_out_the_runs_grace(redis_server, "maps", 1)
    procs = [start_worker(tmp_path / run / f"w{n}", {"job": path}, settings) for n in range(2)]
    results = [finish(proc, tmp_path / run / f"w{n}") for n, proc in enumerate(procs)]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "finished"
    return results


def test_two_workers_fetch_each_sitemap_page_once_and_a_newer_lastmod_once_more(redis_server, tmp_path: Path) -> None:
    site = SitemapSite(GRAPH)
    build(site)
    site.start()
    try:
        path = job(tmp_path, site, max_hops=0, on="target")
        results = run_fleet(tmp_path, "r1", path, redis_server, "2026-11-10T00:00:00Z")
        assert pages(site) == Counter(dict.fromkeys(["/", "/a", "/b", "/c", "/d", "/item/1", "/item/2"], 1))
        assert sum(r.stats.get("idcrawl/sitemaps/seeded", 0) for r in results) == 4  # the fleet's queue: once
        files = Counter(p for p in site.fetched() if p.startswith("/sitemap"))
        assert files == Counter(["/sitemap_index.xml", "/sitemaps/news.xml", "/sitemaps/pages.xml.gz"])  # one reader
        assert sorted(r.stats.get("idcrawl/sitemaps/read_elsewhere", 0) for r in results) == [0, 1]
        items = sorted(item["url"] for r in results for item in r.items if "hops" in item)
        assert items == sorted(site.url(p) for p in ("/", "/a", "/b", "/c", "/d"))

        site.put("/sitemaps/news.xml", urlset([
            {"loc": site.url("/a"), "lastmod": "2026-11-15T00:00:00Z"},
            {"loc": site.url("/b"), "lastmod": "2026-11-01"},
        ]))
        results = run_fleet(tmp_path, "r2", path, redis_server, "2026-11-20T00:00:00Z")
        counts = pages(site)
        assert counts["/a"] == 2 and counts["/b"] == 1 and counts["/c"] == 1, counts
        assert sum(r.stats.get("idcrawl/sitemaps/due", 0) for r in results) == 1
        assert sorted(r.stats.get("idcrawl/sitemaps/read_elsewhere", 0) for r in results) == [0, 1]  # run 2: once
    finally:
        site.stop()
