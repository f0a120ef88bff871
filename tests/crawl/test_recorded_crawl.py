"""Record a local site's pages into a cassette in a temp folder, stop the site, replay: the same items and the same
outcomes as when recording, and the same items as a real ``scrapy crawl`` of that site (idcrawl.recorded)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import vcr
import yaml
from scrapy import Request

from idcrawl.core.lanes import Outcome
from idcrawl.demo.site import IdSite, Reply
from idcrawl.recorded import RecordedCrawl
from idcrawl.spiders.demo import DemoSpider
from tests.conftest import GapModel
from tests.support.crawl import run_crawl

LOW, HIGH = 100, 120
GAPS = {105, 106}
BROKEN = 110  # answers 500: failed
IDS = range(LOW, HIGH + 4)  # past the last page: missing
PROBE = 9_999


class BrokenModel(GapModel):
    """One id answers 500; every notice and real 404 sets two cookies (a header given twice, kept twice)."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if id_ == BROKEN:
            return Reply(500, b"<html><body>server error</body></html>", (("Content-Type", "text/html"),))
        reply = super().reply(id_, host, nth)
        return replace(reply, headers=(*reply.headers, ("Set-Cookie", "a=1"), ("Set-Cookie", f"id={id_}")))


def targets(site: IdSite) -> dict[str, dict[str, Any]]:
    """The targets judged: real 404s, soft 404s by a regex, soft 404s learned from a probe page."""
    return {
        "real": {"url": site.url(), "start": LOW, "name": "real"},
        "regex": {"url": site.soft_url(), "start": LOW, "name": "regex", "soft404_regex": "could not be found"},
        "learned": {"url": site.soft_url(), "start": LOW, "name": "learned", "soft404_probe": PROBE},
    }


def judged(arguments: dict[str, Any], cassette: Any) -> dict[int, tuple[Outcome, int, list[dict[str, Any]], list[bytes]]]:
    """id -> (outcome, status, items without fetched_at, Set-Cookie headers) of every id of IDS, through
    ``cassette``."""
    pages = {}
    with RecordedCrawl(DemoSpider, cassette=cassette, **arguments) as crawl:
        for id_ in IDS:
            page = crawl.fetch(id_)
            items = [{key: value for key, value in item.items() if key != "fetched_at"} for item in page.items]
            pages[id_] = (page.outcome, page.response.status, items, page.response.headers.getlist("Set-Cookie"))
    return pages


def test_a_recorded_cassette_replays_with_the_site_stopped_the_same_items_and_outcomes(tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    site = IdSite(BrokenModel(LOW, HIGH, GAPS)).start()
    try:
        recorded = {}
        for name, arguments in targets(site).items():
            with vcr.VCR(record_mode="once").use_cassette(str(cassettes / f"{name}.yaml")) as cassette:
                recorded[name] = judged(arguments, cassette)
        crawled = run_crawl(tmp_path, {**targets(site)["regex"], "attempts": 1, "margin": 5}, spider="demo")
        requests_while_recording = len(site.log)
    finally:
        site.stop()
    arguments = targets(site)  # the same URLs, nothing listening at them now
    replayed = {}
    for name in recorded:
        with vcr.VCR(record_mode="none").use_cassette(str(cassettes / f"{name}.yaml")) as cassette:
            replayed[name] = judged(arguments[name], cassette)
    assert replayed == recorded
    assert requests_while_recording == 3 * len(IDS) + 1 + crawled.stats["downloader/request_count"]

    real, regex, learned = recorded["real"], recorded["regex"], recorded["learned"]
    for gap in (*GAPS, HIGH + 1):
        cookies = [b"a=1", f"id={gap}".encode()]
        assert real[gap] == (Outcome.MISSING, 404, [], cookies)  # a real 404
        assert regex[gap] == (Outcome.MISSING, 200, [], [])  # a soft 404 (the register's page: no cookies), by the regex
        assert learned[gap] == (Outcome.MISSING, 200, [], [])  # a soft 404, like the page learned from the probe
    for pages in recorded.values():
        assert pages[BROKEN] == (Outcome.FAILED, 500, [], [])
        assert sorted(id_ for id_, page in pages.items() if page[0] is Outcome.FOUND) == sorted(
            set(range(LOW, HIGH + 1)) - GAPS - {BROKEN})
    assert real[LOW][2][0]["title"] == f"Procurement notice {LOW}"
    assert real[LOW][3] == [b"a=1", f"id={LOW}".encode()]

    # a real crawl of the regex target makes the same items of the same pages
    assert crawled.returncode == 0, crawled.stderr[-3000:]
    crawl_items = sorted(({key: value for key, value in item.items() if key != "fetched_at"}
                          for item in crawled.items), key=lambda item: item["id"])
    recorded_items = [item for id_ in sorted(regex) for item in regex[id_][2]]
    assert crawl_items == recorded_items


class MovedModel(GapModel):
    """Id 7 moved to id 8 (a 301); id 9 answers 503 once, then its page."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if id_ == 7:
            return Reply(301, b"", (("Location", "/notice/8"),))
        if id_ == 9 and nth == 1:
            return Reply(503, b"busy")
        return super().reply(id_, host, nth)


def test_a_redirect_and_a_retry_are_recorded_and_replayed_as_scrapy_follows_them(tmp_path: Path) -> None:
    site = IdSite(MovedModel(1, 10, set())).start()
    url, path = site.url(), tmp_path / "moved.yaml"

    def pages(cassette: Any) -> tuple[Any, ...]:
        with RecordedCrawl(DemoSpider, url=url, start=1, cassette=cassette) as crawl:
            moved = crawl.fetch(7)
            # no dont_retry (id pages carry it: idcrawl's attempts retry them in a crawl): Scrapy's RetryMiddleware
            retried = crawl.fetch_response(Request(url.format(id=9)))
            return (moved.outcome, moved.response.url, moved.response.meta["redirect_urls"], moved.item["title"],
                    retried.status, retried.meta.get("retry_times"), retried.css("h1::text").get())

    try:
        with vcr.VCR(record_mode="once").use_cassette(str(path)) as cassette:
            recorded = pages(cassette)
        fetched = [(logged.path, logged.status) for logged in site.log]
    finally:
        site.stop()
    with vcr.VCR(record_mode="none").use_cassette(str(path)) as cassette:  # the site is gone: the cassette answers
        replayed = pages(cassette)
        assert cassette.all_played
    page = url.format(id="{}")
    assert recorded == replayed == (Outcome.FOUND, page.format(8), [page.format(7)], "Procurement notice 8",
                                    200, 1, "Procurement notice 9")
    wire = [("/notice/7", 301), ("/notice/8", 200), ("/notice/9", 503), ("/notice/9", 200)]
    assert fetched == wire  # what Scrapy's engine asked for, redirect and retry included
    interactions = yaml.safe_load(path.read_text())["interactions"]
    assert [(i["request"]["uri"].replace(page.format(""), "/notice/"), i["response"]["status"]["code"])
            for i in interactions] == wire
    assert all("python-requests" not in str(i["request"]["headers"]) for i in interactions)
