"""Sitemaps as evidence for an id target's recrawl in a fleet: two real ``scrapy crawl`` workers, one
redis-server, the sitemap test site (tests/support/sitemap_site.py).

One worker per run reads the sitemap; the job's page records (``P pages:``/``pagedue:``) and tail
(``P tails``) move by it, and the next run's fleet fetches the moved pages and walks the tail once.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path

import pytest

from idcrawl.core.clock import format_time
from tests.crawl.test_sitemap_evidence_crawl import HOUR, T0, job, pages
from tests.integration.test_distributed_crawl import finish, start_worker, worker_settings
from tests.integration.test_distributed_resume import wait_out_the_runs_grace
from tests.support.sitemap_site import SitemapSite, urlset

redis = pytest.importorskip("redis")


def total(results: list, key: str) -> int:
    return sum(r.stats.get(key, 0) for r in results)


def run_fleet(tmp_path: Path, run: str, path: Path, redis_server, site: SitemapSite, now: float,  # type: ignore[no-untyped-def]
              **extra: object) -> list:
    """Two workers on the job; the sitemap is read once per fleet run: by one worker when both join one
    run, by each when a loaded machine starts the second after the first's run is over (a run of its own)."""
    # a run of its own: the last run's grace (one lease) over first, else these workers join it (run.lua)
    settings = worker_settings(redis_server, job="evid", IDCRAWL_NOW=format_time(now), IDCRAWL_REDIS_LEASE_TIMEOUT=1,
                               **extra)
    wait_out_the_runs_grace(redis_server, "evid", 1)
    client = redis.Redis.from_url(redis_server.url)
    runs_before, reads_before = client.llen("idcrawl:{evid}:runs"), Counter(site.fetched())["/sitemap.xml"]
    procs = [start_worker(tmp_path / run / f"w{n}", {"job": path}, settings) for n in range(2)]
    results = [finish(proc, tmp_path / run / f"w{n}") for n, proc in enumerate(procs)]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "finished"
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
    runs = len({json.loads(row)["id"] for row in client.lrange("idcrawl:{evid}:runs", runs_before, -1)})
    assert 1 <= runs <= 2
    assert Counter(site.fetched())["/sitemap.xml"] - reads_before == runs  # one reader per fleet run
    assert total(results, "idcrawl/sitemaps/read_elsewhere") == 2 - runs
    return results


def test_a_fleet_moves_the_job_s_records_by_the_sitemap_once_and_the_next_run_fetches_them(
    redis_server, tmp_path: Path,
) -> None:
    site = SitemapSite({"/item/1": [], "/item/2": [], "/item/3": []})
    site.put("/robots.txt", f"User-agent: *\nSitemap: {site.url('/sitemap.xml')}\n".encode(), "text/plain")
    site.put("/sitemap.xml", urlset([{"loc": site.url(f"/item/{n}"), "lastmod": "2026-11-01"} for n in (1, 2, 3)]))
    site.start()
    try:
        path = job(tmp_path, site)
        first = run_fleet(tmp_path, "r1", path, redis_server, site, T0)
        assert sorted(item["id"] for r in first for item in r.items) == [1, 2, 3]
        assert pages(site) == Counter({"/item/1": 1, "/item/2": 1, "/item/3": 1, "/item/4": 1})

        site.put("/sitemap.xml", urlset([
            {"loc": site.url("/item/1"), "lastmod": "2026-11-01"},
            {"loc": site.url("/item/2"), "lastmod": format_time(T0 + HOUR)},
            {"loc": site.url("/item/3"), "changefreq": "hourly"},
            {"loc": site.url("/item/5")},
        ]))
        site.put("/item/4", b"<html><body>4</body></html>", "text/html")
        site.put("/item/5", b"<html><body>5</body></html>", "text/html")
        second = run_fleet(tmp_path, "r2", path, redis_server, site, T0 + 2 * HOUR)
        assert pages(site) == Counter({"/item/1": 1, "/item/2": 1, "/item/3": 1, "/item/4": 1})
        assert total(second, "idcrawl/sitemaps/pages_moved") == 2  # once, however many runs read it
        assert total(second, "idcrawl/sitemaps/tails_due") == 1

        third = run_fleet(tmp_path, "r3", path, redis_server, site, T0 + 3 * HOUR)
        fetched = pages(site)
        assert fetched["/item/1"] == 1
        assert fetched["/item/2"] == 2 and fetched["/item/3"] == 2
        assert fetched["/item/4"] == 2 and fetched["/item/5"] == 1 and fetched["/item/6"] == 1
        assert sorted(item["id"] for r in third for item in r.items) == [4, 5]
        assert total(third, "idcrawl/sitemaps/pages_moved") == 0  # fetched since: the evidence is old
    finally:
        site.stop()


def test_a_fleet_reads_a_sitemap_named_for_crawl_scope_and_as_evidence_once_per_run(
    redis_server, tmp_path: Path,
) -> None:
    """One claim per fleet run (``P sitemaps:<run>``) and one reader per worker: the worker that claims it
    fetches the sitemap once for the page target's seeds and the id target's evidence."""
    from tests.crawl.test_sitemap_evidence_crawl import both_job

    site = SitemapSite({"/item/1": [], "/item/2": [], "/item/3": []})
    site.put("/robots.txt", f"User-agent: *\nSitemap: {site.url('/sitemap.xml')}\n".encode(), "text/plain")
    site.start()
    try:
        results = run_fleet(tmp_path, "r1", both_job(tmp_path, site), redis_server, site, T0)  # sitemap: once a run
        fetched = Counter(site.fetched())
        assert fetched["/news/a"] == 1 and fetched["/news/b"] == 1  # seeded once into the fleet's queue
        runs = fetched["/sitemap.xml"]
        assert total(results, "idcrawl/sitemaps/id_pages") == 3 * runs
        assert sorted(item["id"] for r in results for item in r.items if item.get("target") == "items") == [1, 2, 3]
    finally:
        site.stop()


def test_a_watching_fleet_takes_a_page_a_sitemap_made_due_in_a_wave_at_once_every_worker_in_it(
    redis_server, tmp_path: Path,
) -> None:
    """The fleet's twin of the one-process watch test (tests/crawl/test_sitemap_evidence_crawl.py), on the
    real clock. The pre-run (2 h ago) finds 1..3, everything due a day later. Two watching workers join
    one run (the sitemap waits until both have); wave 1 has nothing due but the sitemap says page 2
    changed an hour ago. The worker that did not read it waits for the reader's end and both wake at the
    time the reader left on the run's claim: one wave 2 for the fleet (the sitemap read once more, not
    twice), which fetches page 2 once."""
    import time

    from tests.integration.test_distributed_watch import Watcher

    site = SitemapSite({"/item/1": [], "/item/2": [], "/item/3": []})
    site.put("/robots.txt", f"User-agent: *\nSitemap: {site.url('/sitemap.xml')}\n".encode(), "text/plain")
    site.put("/sitemap.xml", urlset([{"loc": site.url(f"/item/{n}"), "lastmod": "2026-11-01"} for n in (1, 2, 3)]))
    site.start()
    try:
        started = time.time()
        path = job(tmp_path, site)
        run_fleet(tmp_path, "before", path, redis_server, site, started - 2 * HOUR)
        site.put("/sitemap.xml", urlset([
            {"loc": site.url("/item/2"), "lastmod": format_time(started - HOUR)},
            {"loc": site.url("/item/3"), "lastmod": "2026-11-01"},
        ]))
        site.log.clear()
        site.hold("/sitemap.xml")  # wave 1 lasts until both workers are in its run
        wait_out_the_runs_grace(redis_server, "evid", 1)
        settings = worker_settings(redis_server, job="evid", IDCRAWL_REDIS_LEASE_TIMEOUT=1)
        watchers = [Watcher(tmp_path / "watch" / f"w{n}", path, settings) for n in range(2)]
        try:
            for watcher in watchers:
                watcher.wait_for("of Redis job")
            site.release()
            for watcher in watchers:
                watcher.wait_for("idcrawl: watch: wave 2 done", timeout=120)
        finally:
            codes = [watcher.stop(signal.SIGINT) for watcher in watchers]
        assert codes == [0, 0], [w.log[-3000:] for w in watchers]
        for watcher in watchers:
            assert "Traceback" not in watcher.log, watcher.log[-3000:]
            assert watcher.stats["idcrawl/watch/waves"] == 2
        assert pages(site) == Counter({"/item/2": 1})
        assert Counter(site.fetched())["/sitemap.xml"] == 2  # one reading per wave: both workers in each
        assert sum(w.stats.get("idcrawl/sitemaps/pages_moved", 0) for w in watchers) == 1
    finally:
        site.release()
        site.stop()


def listing_1_to_3() -> SitemapSite:
    """A started site of items 1..3, each listed in the sitemap robots.txt names."""
    site = SitemapSite({"/item/1": [], "/item/2": [], "/item/3": []})
    site.put("/robots.txt", f"User-agent: *\nSitemap: {site.url('/sitemap.xml')}\n".encode(), "text/plain")
    site.put("/sitemap.xml", urlset([{"loc": site.url(f"/item/{n}")} for n in (1, 2, 3)]))
    return site.start()


def list_20_past_the_cut(tmp_path: Path, redis_server, site: SitemapSite) -> tuple[Path, list]:  # type: ignore[no-untyped-def]
    """Run 1 finds 1..3 (cut at 4); id 20 is published and listed; run 2 reads the sitemap (the tail due, 20
    kept in the job's tail record). The job file and run 2's results."""
    path = job(tmp_path, site)
    run_fleet(tmp_path, "r1", path, redis_server, site, T0)
    site.put("/item/20", b"<html><body>20</body></html>", "text/html")
    site.put("/sitemap.xml", urlset([{"loc": site.url(f"/item/{n}")} for n in (1, 2, 3, 20)]))
    return path, run_fleet(tmp_path, "r2", path, redis_server, site, T0 + 2 * HOUR)


def test_a_fleet_s_tail_whose_sitemap_lists_an_id_far_past_its_margin_walks_straight_to_it(
    redis_server, tmp_path: Path,
) -> None:
    """As the single process (tests/crawl/test_sitemap_evidence_crawl.py): run 1 finds 1..3 (cut at 4); id
    20 is published and listed, run 2 reads the sitemap (the tail due, 20 kept in the job's tail record);
    run 3's plan gives the tail's lane 20 as its reach (the lane hash's ``reach``): the two workers walk
    every id from 4 past the misses to 20, find it, and the margin cuts one past it."""
    site = listing_1_to_3()
    try:
        path, second = list_20_past_the_cut(tmp_path, redis_server, site)
        assert total(second, "idcrawl/sitemaps/tails_due") == 1
        assert pages(site) == Counter({"/item/1": 1, "/item/2": 1, "/item/3": 1, "/item/4": 1})
        client = redis.Redis.from_url(redis_server.url)
        assert json.loads(client.hget("idcrawl:{evid}:tails", "items"))["listed"] == 20

        third = run_fleet(tmp_path, "r3", path, redis_server, site, T0 + 3 * HOUR)
        fetched = pages(site)
        assert sorted(item["id"] for r in third for item in r.items) == [20]
        assert any("its tail walks on to 20, listed in a sitemap" in r.stderr for r in third)
        assert [fetched[f"/item/{n}"] for n in range(4, 23)] == [2] + [1] * 17 + [0]  # 4 again, 5..21, not 22
        assert "listed" not in json.loads(client.hget("idcrawl:{evid}:tails", "items")), "passed: forgotten"
    finally:
        site.stop()


def test_a_fleet_s_tail_walks_on_to_a_listed_id_at_most_max_reach_ids_a_run(redis_server, tmp_path: Path) -> None:
    """As the single process: with ``IDCRAWL_SITEMAP_MAX_REACH=5`` run 3's plan gives the tail's lane 8
    as its reach (5 ids from 4), the workers walk 4..8 past the misses, then the margin (9); 20 stays
    listed in the job's tail record for the next walk."""
    site = listing_1_to_3()
    try:
        path, _ = list_20_past_the_cut(tmp_path, redis_server, site)
        third = run_fleet(tmp_path, "r3", path, redis_server, site, T0 + 3 * HOUR, IDCRAWL_SITEMAP_MAX_REACH=5)
        fetched = pages(site)
        assert [item for r in third for item in r.items] == []
        assert any("its tail walks on to 8, on the way to 20 listed in a sitemap" in r.stderr for r in third)
        assert [fetched[f"/item/{n}"] for n in range(4, 12)] == [2, 1, 1, 1, 1, 1, 0, 0]  # 4 again, 5..9
        client = redis.Redis.from_url(redis_server.url)
        assert json.loads(client.hget("idcrawl:{evid}:tails", "items"))["listed"] == 20, "kept for the next walk"
    finally:
        site.stop()
