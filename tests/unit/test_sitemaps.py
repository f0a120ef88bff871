"""Sitemaps as seeds and as evidence (issues 30, 31): the rules (idcrawl/core/sitemaps.py), the job-file
keys, the queue's seeding and ``due_now``, and the reader's bodies (idcrawl/sitemaps.py)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
from scrapy.http import Request, Response, TextResponse, XmlResponse
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from idcrawl.core.inputs import TargetError
from idcrawl.core.jobfile import read_job
from idcrawl.core.scope import SEED, CrawlProfile, JobScope, Seed
from idcrawl.core.sitemaps import (
    DEFAULT_PRIORITY,
    SitemapSpec,
    SitemapUrl,
    TailNews,
    by_priority,
    first_interval,
    lastmod_is_news,
    parse_lastmod,
    parse_priority,
    parse_sitemaps,
    site_sitemaps,
    sitemap_url,
    tail_news,
)
from idcrawl.core.urlqueue import MemoryUrlQueue, QueueState
from idcrawl.sitemaps import SITEMAP_KEY, SitemapReader, Wanted, seed_urls, wanted_sitemaps
from tests.support.sitemap_site import gzipped, sitemap_index, urlset

# -- the rules ---------------------------------------------------------------------------------------


def test_lastmod_reads_every_w3c_datetime_form_and_refuses_the_rest() -> None:
    assert parse_lastmod("2026-11-28") == 1795824000.0
    assert parse_lastmod("2026-11-28T01:00:00+01:00") == 1795824000.0
    assert parse_lastmod("2026-11-28T00:00:00Z") == 1795824000.0
    assert parse_lastmod("2026-11-28T00:00:00.5Z") == 1795824000.5
    assert parse_lastmod("2026-11") == parse_lastmod("2026-11-01")
    assert parse_lastmod("2026") == parse_lastmod("2026-01-01")
    for bad in (None, "", "yesterday", "2026-13-01", "28/11/2026"):
        assert parse_lastmod(bad) is None


def test_priority_is_in_0_1_and_defaults_to_one_half() -> None:
    assert parse_priority("0.9") == 0.9
    assert parse_priority("1") == 1.0
    for bad in (None, "high", "1.5", "-0.1"):
        assert parse_priority(bad) == DEFAULT_PRIORITY


def test_entries_as_scrapy_gives_them() -> None:
    entry = sitemap_url({"loc": " http://a/x ", "lastmod": "2026-11-28", "priority": "0.8", "changefreq": "Daily"})
    assert entry == SitemapUrl("http://a/x", 1795824000.0, 0.8, "daily")
    assert sitemap_url({"loc": "http://a/x", "changefreq": "sometimes"}) == SitemapUrl("http://a/x")
    assert sitemap_url({"lastmod": "2026"}) is None


def test_urls_are_queued_highest_priority_first_then_newest_then_by_url_each_once() -> None:
    urls = [SitemapUrl("http://a/low", None, 0.1), SitemapUrl("http://a/old", 10.0, 0.5),
            SitemapUrl("http://a/new", 20.0, 0.5), SitemapUrl("http://a/none"), SitemapUrl("http://a/top", None, 1.0),
            SitemapUrl("http://a/low", None, 0.9)]  # listed twice: the first entry counts
    assert [u.loc for u in by_priority(urls)] == ["http://a/top", "http://a/new", "http://a/old", "http://a/none",
                                                  "http://a/low"]


def test_changefreq_seeds_a_first_interval_clamped_by_the_policy() -> None:
    def clamp(d: float) -> float:
        return min(max(d, 3600.0), 30 * 86400.0)

    assert first_interval("daily", clamp) == 86400.0
    assert first_interval("always", clamp) == 3600.0
    assert first_interval("yearly", clamp) == 30 * 86400.0
    assert first_interval("never", clamp) is None
    assert first_interval(None, clamp) is None


def test_a_lastmod_newer_than_the_last_fetch_is_news() -> None:
    assert lastmod_is_news(101.0, 100.0, 200.0)
    assert lastmod_is_news(200.0, 100.0, 200.0)
    assert not lastmod_is_news(100.0, 100.0, 200.0)
    assert not lastmod_is_news(201.0, 100.0, 200.0)  # in the future: no evidence
    assert not lastmod_is_news(None, 100.0, 200.0)
    assert not lastmod_is_news(101.0, None, 200.0)


def test_the_ids_a_sitemap_lists_tell_a_tail_whether_it_has_news() -> None:
    assert tail_news([3, 9, 7], 8) == (TailNews.NEWS, 9)
    assert tail_news([3, 8], 8) == (TailNews.NONE, 8)
    assert tail_news([], 8) == (TailNews.UNKNOWN, None)
    assert tail_news([5], None) == (TailNews.UNKNOWN, 5)


def test_a_newer_lastmod_makes_a_found_id_page_due_now_not_below_the_floor() -> None:
    from idcrawl.core.recrawl import DAY, Kind, Policy, Schedule
    from idcrawl.core.sitemaps import due_by_sitemap

    policy = Policy(min_duration=3600.0)
    page = Schedule(Kind.PAGE, "t/7", last_crawled=1000.0, update_duration=10 * DAY)
    moved = due_by_sitemap(page, 5000.0, 2 * DAY, policy)
    assert moved is not None and moved.due_at() == 2 * DAY and moved.last_crawled == 1000.0
    assert moved.update_duration == 2 * DAY - 1000.0
    assert due_by_sitemap(page, 900.0, 2 * DAY, policy) is None  # changed before its last visit
    assert due_by_sitemap(page, 3 * DAY, 2 * DAY, policy) is None  # a lastmod in the future: no evidence
    assert due_by_sitemap(page, None, 2 * DAY, policy) is None
    soon = due_by_sitemap(page, 1500.0, 2000.0, policy)  # not before the floor after its last visit
    assert soon is not None and soon.due_at() == 1000.0 + 3600.0
    assert due_by_sitemap(Schedule(Kind.PAGE, "t/8", 1000.0, 600.0), 1500.0, 2000.0, policy) is None  # due


def test_ids_listed_above_last_found_make_a_tail_due_now_and_none_above_leave_it() -> None:
    from idcrawl.core.recrawl import DAY, Kind, Policy, Schedule
    from idcrawl.core.sitemaps import tail_due_by_sitemap

    tail = Schedule(Kind.TAIL, "t", last_crawled=0.0, update_duration=4 * DAY, last_found=120)
    moved = tail_due_by_sitemap(tail, [118, 121, 119], DAY, Policy())
    assert moved is not None and moved.due_at() == DAY and moved.last_found == 120
    assert tail_due_by_sitemap(tail, [118, 120], DAY, Policy()) is None
    assert tail_due_by_sitemap(tail, [], DAY, Policy()) is None
    assert tail_due_by_sitemap(Schedule(Kind.TAIL, "t", 0.0, DAY, last_found=None), [5], DAY, Policy()) is None


def test_a_tail_keeps_the_highest_id_listed_above_its_last_found_until_a_walk_passes_it() -> None:
    """The tail's record keeps the highest listed id (its reach): raised by a later sitemap, kept
    when already due, cleared once a walk was cut past it or found at or above it."""
    from dataclasses import replace

    from idcrawl.core.recrawl import DAY, Kind, Policy, Schedule, tail_after_run
    from idcrawl.core.sitemaps import tail_due_by_sitemap

    tail = Schedule(Kind.TAIL, "t", last_crawled=0.0, update_duration=4 * DAY, last_found=120)
    told = tail_due_by_sitemap(tail, [118, 400, 121], DAY, Policy())
    assert told is not None and told.listed == 400 and told.due_at() == DAY
    assert tail_due_by_sitemap(told, [300], 2 * DAY, Policy()) is None, "due already, nothing higher"
    higher = tail_due_by_sitemap(told, [500], 2 * DAY, Policy())
    assert higher is not None and higher.listed == 500 and higher.due_at() == told.due_at()
    # a walk cut before the listed id (planned before the sitemap was read) keeps it
    kept = tail_after_run(told, "t", 130, 3 * DAY, Policy(), cut=133)
    assert (kept.last_found, kept.listed) == (130, 400)
    # a walk cut past it forgets it, found or not; so does finding it (or above it) without a known cut
    assert tail_after_run(told, "t", 130, 3 * DAY, Policy(), cut=403).listed is None
    assert tail_after_run(told, "t", 400, 3 * DAY, Policy()).listed is None
    assert tail_after_run(told, "t", 130, 3 * DAY, Policy()).listed == 400
    assert tail_after_run(replace(told, listed=None), "t", 130, 3 * DAY, Policy(), cut=133).listed is None


def test_a_due_tail_walks_to_its_listed_id_from_its_stored_lanes() -> None:
    """resume=due: the tail's lane goes on from just after its last found id with the listed id as its
    reach (clamped to the lane's bound, none when the walk starts past it); the plan reads it from the
    tail's record, so a run resumed after a kill walks to it too."""
    from idcrawl.core.lanes import MARGIN
    from idcrawl.core.ranges import LaneRecord
    from idcrawl.core.recrawl import Kind, Schedule
    from idcrawl.core.resume import resume_specs, tail_reach, tail_specs
    from idcrawl.core.targets import parse_target

    target = parse_target({"name": "t", "url": "https://a.test/{id}", "start": 1, "margin": 3, "resume": "due"})
    cut = LaneRecord(key="t:asc", start=1, step=1, stop=None, cursor=14, reason=MARGIN, last_found=10, cut_at=13)
    lanes = {"t:asc": cut}
    assert [spec.reach for spec in tail_specs(target, lanes)] == [None]
    (spec,) = tail_specs(target, lanes, 400)
    assert (spec.start, spec.reach) == (11, 400)
    assert tail_specs(target, lanes, 5)[0].reach is None, "listed before where the walk starts"
    bounded = parse_target({"name": "t", "url": "https://a.test/{id}", "start": 1, "max": 200, "margin": 3})
    assert tail_specs(bounded, {"t:asc": LaneRecord(key="t:asc", start=1, step=1, stop=200, cursor=14,
                                                    reason=MARGIN, last_found=10, cut_at=13)}, 400)[0].reach == 200
    tail = Schedule(Kind.TAIL, "t", 0.0, 1.0, last_found=10, listed=400)
    assert tail_reach(tail) == 400 and tail_reach(None) is None
    (due,) = resume_specs(target, lanes, {}, "due", reach=tail_reach(tail))
    assert (due.start, due.reach) == (11, 400)
    (capped,) = resume_specs(target, lanes, {}, "due", reach=tail_reach(tail), max_reach=100)
    assert (capped.start, capped.reach) == (11, 110), "IDCRAWL_SITEMAP_MAX_REACH ids from the walk's start"
    assert resume_specs(target, lanes, {}, "due", reach=400, max_reach=0)[0].reach is None, "0: none"
    assert resume_specs(target, lanes, {}, "due", reach=50, max_reach=100)[0].reach == 50


def test_the_sitemaps_key_is_true_false_or_urls_and_anything_else_one_line() -> None:
    assert parse_sitemaps(True) == SitemapSpec(site=True)
    assert parse_sitemaps(False) is None
    assert parse_sitemaps("https://a/s.xml") == SitemapSpec(urls=("https://a/s.xml",))
    assert parse_sitemaps(["https://a/s.xml", " https://a/s.xml"]) == SitemapSpec(urls=("https://a/s.xml",))
    for bad in ([], 1, ["ftp://a/s.xml"], [1], "sitemap.xml"):
        with pytest.raises(TargetError, match="sitemaps="):
            parse_sitemaps(bad)
    assert site_sitemaps("https://a.test:8080/x/y?z") == ("https://a.test:8080/robots.txt",
                                                          "https://a.test:8080/sitemap.xml")


def test_a_changefreq_seeds_the_first_interval_of_a_page_not_revisited_yet_and_a_lastmod_wins() -> None:
    from idcrawl.core.recrawl import DAY, Kind, Policy, Schedule
    from idcrawl.core.sitemaps import SitemapUrl, page_by_sitemap, pages_by_sitemap

    policy = Policy(min_duration=3600.0, max_duration=30 * DAY, initial_duration=DAY)
    fresh = Schedule(Kind.PAGE, "t/1", last_crawled=1000.0, update_duration=DAY, revision=1)
    hourly = page_by_sitemap(fresh, SitemapUrl("u", changefreq="hourly"), 2000.0, policy)
    assert hourly is not None and hourly.update_duration == 3600.0 and hourly.last_crawled == 1000.0
    yearly = page_by_sitemap(fresh, SitemapUrl("u", changefreq="yearly"), 2000.0, policy)
    assert yearly is not None and yearly.update_duration == 30 * DAY  # clamped by the policy
    assert page_by_sitemap(fresh, SitemapUrl("u", changefreq="daily"), 2000.0, policy) is None  # the same
    assert page_by_sitemap(fresh, SitemapUrl("u", changefreq="never"), 2000.0, policy) is None
    assert page_by_sitemap(fresh, SitemapUrl("u"), 2000.0, policy) is None
    revisited = Schedule(Kind.PAGE, "t/2", last_crawled=1000.0, update_duration=1.2 * DAY, revision=1)
    assert page_by_sitemap(revisited, SitemapUrl("u", changefreq="hourly"), 2000.0, policy) is None
    changed = Schedule(Kind.PAGE, "t/3", last_crawled=1000.0, update_duration=DAY, revision=2)
    assert page_by_sitemap(changed, SitemapUrl("u", changefreq="hourly"), 2000.0, policy) is None
    both = page_by_sitemap(fresh, SitemapUrl("u", lastmod=1500.0, changefreq="weekly"), 9000.0, policy)
    assert both is not None and both.due_at() == 9000.0  # a newer lastmod: due now
    moved = pages_by_sitemap({1: fresh, 2: revisited}, {1: SitemapUrl("u", changefreq="hourly"),
                                                        2: SitemapUrl("v", lastmod=1500.0), 9: SitemapUrl("w")},
                             9000.0, policy)
    assert sorted(moved) == [1, 2] and moved[2].due_at() == 9000.0  # id 9: no record, left alone


def test_job_files_take_sitemaps_on_page_targets_crawl_profiles_and_id_targets(
    tmp_path: Path,
) -> None:
    path = tmp_path / "job.toml"
    text = """
[[crawl_profiles]]
name = "p"
max_hops = 1
sitemaps = ["https://a.test/news.xml"]

[[targets]]
name = "front"
url = "https://a.test/"
crawl_profiles = ["p"]
sitemaps = true

[[targets]]
name = "ids"
url = "https://a.test/n/{id}"
start = 1
crawl_profiles = ["p"]
"""
    path.write_text(text)
    job = read_job(path)
    assert job.crawl_profiles["p"].sitemaps == SitemapSpec(urls=("https://a.test/news.xml",))
    assert job.page_targets[0].sitemaps == SitemapSpec(site=True)
    wanted = wanted_sitemaps(job.scope())
    assert wanted["front"].site == {"https://a.test/robots.txt": None}
    assert wanted["front"].urls == {"https://a.test/news.xml": ["p"]}
    assert wanted["ids"].urls == {"https://a.test/news.xml": ["p"]} and wanted["ids"].site == {}
    assert job.id_sitemaps == {}
    path.write_text(text + "sitemaps = true\n")  # the id target's: evidence for its recrawl, not seeds
    job = read_job(path)
    assert job.id_sitemaps == {"ids": SitemapSpec(site=True)}
    assert wanted_sitemaps(job.scope())["ids"].site == {}
    path.write_text(text + "sitemaps = [1]\n")
    with pytest.raises(TargetError, match=r"targets\[1\]: sitemaps=\[1\]: must be true, false"):
        read_job(path)


def test_a_bad_sitemaps_value_names_the_table_field_and_value(tmp_path: Path) -> None:
    path = tmp_path / "job.toml"
    path.write_text('[[crawl_profiles]]\nname = "p"\nmax_hops = 0\nsitemaps = "yes"\n'
                    '[[targets]]\nurl = "https://a.test/"\ncrawl_profiles = ["p"]\n')
    with pytest.raises(TargetError, match=r"crawl_profiles\[0\]: sitemaps='yes'"):
        read_job(path)


# -- seeding the queue -------------------------------------------------------------------------------


def scope() -> JobScope:
    return JobScope({"s": Seed("s", "http://a.test/", ("p",)), "o": Seed("o", "http://a.test/o", ("p",))},
                    {"p": CrawlProfile("p", 0)}, {}, pages=("s", "o"))


def test_sitemap_urls_in_scope_are_queued_as_hop_0_pages_highest_priority_first() -> None:
    queue = MemoryUrlQueue()
    job = scope()
    queue.start(job, 0.0)
    queue.seed("o", "http://a.test/taken", 0.0)
    urls = [SitemapUrl("http://a.test/low", None, 0.1), SitemapUrl("http://b.test/off", None, 1.0),
            SitemapUrl("http://a.test/id/3"), SitemapUrl("http://a.test/taken"), SitemapUrl("http://a.test/top", None, 1)]
    done = seed_urls(queue, job, "s", urls, 1.0, None, skip=lambda url: "/id/" in url)
    assert [e.url for e in done.queued] == ["http://a.test/top", "http://a.test/low"]
    assert all(e.record.hops == SEED and e.record.owner == "s" for e in done.queued)
    assert done.out_of_scope == 1 and done.due == []
    assert queue.get("http://a.test/taken").record.owner == "o"  # another target's URL stays its own
    assert queue.get("http://a.test/id/3") is None  # an id target's lanes fetch it


def test_within_a_yield_group_the_highest_sitemap_priority_is_taken_first_and_a_relisting_updates_it() -> None:
    queue = MemoryUrlQueue()
    job = scope()
    queue.start(job, 0.0)
    priorities = [0.1, 0.9, 0.3, 0.7, 0.0, 1.0, 0.2, 0.8, 0.4, 0.6]
    seed_urls(queue, job, "s", [SitemapUrl(f"http://a.test/{i}", None, p) for i, p in enumerate(priorities)],
              0.0, None)
    queue.seed("s", "http://a.test/link", 0.0)  # listed in no sitemap: 0.5, the protocol's default
    seed_urls(queue, job, "s", [SitemapUrl("http://a.test/4", None, 0.95)], 0.0, None)  # listed again: kept
    taken = []
    while (record := queue.take(lambda host: True, 1.0)) is not None:
        taken.append(record.priority)
    assert taken == [1.0, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]


def test_a_harvested_page_with_a_newer_lastmod_is_queued_again_now_and_an_older_one_not() -> None:
    queue = MemoryUrlQueue()
    job = scope()
    queue.start(job, 0.0)
    seed_urls(queue, job, "s", [SitemapUrl("http://a.test/x"), SitemapUrl("http://a.test/y")], 0.0, None)
    for _ in range(2):
        assert queue.take(lambda host: True, 1.0) is not None
    queue.fetched("http://a.test/x", [], 10.0)
    queue.fetched("http://a.test/y", [], 10.0)
    assert queue.ready() == 0
    done = seed_urls(queue, job, "s", [SitemapUrl("http://a.test/x", 11.0), SitemapUrl("http://a.test/y", 9.0)],
                     20.0, None)
    assert seed_urls(queue, job, "s", [SitemapUrl("http://a.test/y", 21.0)], 20.0, None).due == []  # future
    assert [e.url for e in done.due] == ["http://a.test/x"] and done.queued == []
    assert queue.get("http://a.test/x").state is QueueState.QUEUED
    assert queue.get("http://a.test/y").state is QueueState.HARVESTED
    assert queue.ready() == 1
    assert queue.due_now("http://a.test/x", 21.0) is None  # queued already
    assert queue.due_now("http://a.test/nope", 21.0) is None


# -- the reader --------------------------------------------------------------------------------------


def reader(**settings: Any) -> tuple[SitemapReader, list[tuple[str, list[str] | None, list[SitemapUrl]]]]:
    crawler = get_crawler(settings_dict=settings)
    crawler.stats = MemoryStatsCollector(crawler)
    found: list[tuple[str, list[str] | None, list[SitemapUrl]]] = []
    read = SitemapReader(crawler)
    read.subscribe({"s": Wanted()}, lambda t, p, u: found.append((t, p, u)))
    return read, found


def response(cls: type[Response], url: str, body: bytes, targets: dict[int, Any] | None = None) -> Response:
    request = Request(url, meta={SITEMAP_KEY: {"targets": targets or {0: {"s": None}}}})
    return cls(url=url, body=body, request=request)


def test_bodies_are_found_as_scrapy_s_sitemap_spider_finds_them() -> None:
    read, _ = reader(DOWNLOAD_MAXSIZE=10_000)
    xml = urlset([{"loc": "http://a/x"}])
    assert read.body(response(XmlResponse, "http://a/s", xml)) == xml
    assert read.body(response(Response, "http://a/s.xml.gz", gzipped(xml))) == xml
    assert read.body(response(Response, "http://a/s.xml", xml)) == xml
    assert read.body(response(TextResponse, "http://a/page", xml)) is None
    big = gzip.compress(b"<urlset>" + b" " * 20_000 + b"</urlset>")
    assert read.body(response(Response, "http://a/s.xml.gz", big)) is None  # over DOWNLOAD_MAXSIZE


def test_an_index_is_followed_within_the_file_limit_and_a_urlset_handed_over_within_the_url_limit() -> None:
    read, found = reader(IDCRAWL_SITEMAP_MAX_FILES=2, IDCRAWL_SITEMAP_MAX_URLS=2)
    index = sitemap_index(["http://a/1.xml", "http://a/2.xml", "http://a/3.xml"])
    follow = list(read._sitemap(response(XmlResponse, "http://a/index.xml", index)))
    assert [r.url for r in follow] == ["http://a/1.xml", "http://a/2.xml"]
    assert read.stats.get_value("idcrawl/sitemaps/over_limit") == 1
    body = urlset([{"loc": "http://a/x", "priority": "0.1"}, {"loc": "http://a/y", "priority": "0.9"},
                   {"loc": "http://a/z"}])
    assert list(read._sitemap(response(XmlResponse, "http://a/1.xml", body))) == []
    assert [(t, [u.loc for u in urls]) for t, _, urls in found] == [("s", ["http://a/y", "http://a/z"])]
    assert read.stats.get_value("idcrawl/sitemaps/files") == 2
    assert list(read._sitemap(response(XmlResponse, "http://a/2.xml", b"<html>not one</html>"))) == []
    assert read.stats.get_value("idcrawl/sitemaps/invalid") == 1


def test_robots_sitemap_lines_are_followed_and_a_site_without_them_gets_its_sitemap_xml() -> None:
    read, _ = reader()
    robots = b"User-agent: *\nSitemap: http://a/s1.xml\nSitemap: /s2.xml.gz\n"
    follow = list(read._robots(response(TextResponse, "http://a/robots.txt", robots)))
    assert [r.url for r in follow] == ["http://a/s1.xml", "http://a/s2.xml.gz"]
    follow = list(read._robots(response(TextResponse, "http://b/robots.txt", b"User-agent: *\n")))
    assert [r.url for r in follow] == ["http://b/sitemap.xml"]


def test_a_sitemap_two_subscribers_want_is_fetched_once_and_each_gets_its_entries() -> None:
    """The crawl scope's target ``s`` takes the site's sitemaps (robots.txt), id target ``i`` names one of them:
    one request, whoever asked first, and a late asker (robots.txt read after the sitemap) is handed the
    entries already read."""
    crawler = get_crawler(settings_dict={})
    crawler.stats = MemoryStatsCollector(crawler)
    found: list[tuple[str, str, list[str]]] = []
    read = SitemapReader(crawler)
    read.subscribe({"s": Wanted(site={"http://a/robots.txt": ["p"]})},
                   lambda t, p, u: found.append(("scope", t, [e.loc for e in u])))
    read.subscribe({"i": Wanted(urls={"http://a/s.xml": None}), "j": Wanted(urls={"http://a:80/s.xml": None})},
                   lambda t, p, u: found.append(("evidence", t, [e.loc for e in u])))
    first = read.start_requests()
    assert [r.url for r in first] == ["http://a/robots.txt", "http://a/s.xml"]  # the sitemap once for i and j
    robots, sitemap = first
    xml = urlset([{"loc": "http://a/x"}])
    assert read._sitemap(XmlResponse(url=sitemap.url, body=xml, request=sitemap)) == []
    assert found == [("evidence", "i", ["http://a/x"]), ("evidence", "j", ["http://a/x"])]
    later = read._robots(TextResponse(url=robots.url, body=b"Sitemap: http://a/s.xml\n", request=robots))
    assert later == [] and found[-1] == ("scope", "s", ["http://a/x"])  # read already: handed over, not fetched
    assert read.stats.get_value("idcrawl/sitemaps/files") == 1

    found.clear()  # the next reading: robots.txt answers first, the named sitemap joins its request
    robots, sitemap = read.start_requests()
    follow = read._robots(TextResponse(url=robots.url, body=b"Sitemap: http://a/s.xml\n", request=robots))
    assert follow == []  # requested already (for the evidence): the scope's target joins that request
    assert read._sitemap(XmlResponse(url=sitemap.url, body=xml, request=sitemap)) == []
    assert sorted(found) == [("evidence", "i", ["http://a/x"]), ("evidence", "j", ["http://a/x"]),
                             ("scope", "s", ["http://a/x"])]


def test_the_sqlite_store_reads_the_page_records_of_the_listed_ids_only(tmp_path: Path) -> None:
    from idcrawl.core.recrawl import page_schedule
    from idcrawl.state import SqliteStateStore

    store = SqliteStateStore(tmp_path / "s.sqlite")
    try:
        records = {i: page_schedule(f"t/{i}", 1000.0 + i, f"c{i}") for i in range(1, 1201)}
        store.commit({"t": {}, "u": {}}, {}, {}, pages={"t": records, "u": {5: records[5]}})
        got = store.load_page_ids("t", [3, 700, 1200, 5000])
        assert got == {3: records[3], 700: records[700], 1200: records[1200]}
        assert store.load_page_ids("u", [5, 3])[5].key == "u/5" and store.load_page_ids("t", []) == {}
    finally:
        store.close()


def test_the_evidence_of_a_wave_wakes_it_at_the_earliest_due_time_moved() -> None:
    from idcrawl.core.sitemaps import evidence_due

    assert evidence_due(None, []) is None
    assert evidence_due(None, [5.0, 3.0]) == 3.0
    assert evidence_due(4.0, []) == 4.0
    assert evidence_due(4.0, [5.0]) == 4.0 and evidence_due(4.0, [2.0, 6.0]) == 2.0
