"""Recrawl signals in real crawls (issue 31): news = a new signature, signatures a target chooses, a
spider's own signature, Last-Modified as evidence (sync) and the forced refetch.

The local sites of test_recrawl_pages_crawl.py with the clock fixed by ``IDCRAWL_NOW``.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from pathlib import Path

import pytest

from idcrawl.demo.site import Reply
from idcrawl.state import SqliteStateStore
from tests.crawl.test_recrawl_pages_crawl import ARGS, DAY, T0, ChangingModel, at, crawl

STATE = Path(".scrapy") / "idcrawl" / "idseq.sqlite"
#: a clock, a session token and a counter in a script in every page: they change at each fetch, the notice
#: does not (in ``text`` mode the script is not in the text anyway)
DROP = r"Served at \d\d:\d\d:\d\d|token=\w+|served = \d+"


class TwoBackendsModel(ChangingModel):
    """Pages that never change behind two backends taking turns per page: one answers a conditional
    request with 304, the other ignores the validators and sends 200 with the same body."""

    def __init__(self) -> None:
        super().__init__()
        self.turns: dict[int, itertools.count[int]] = {i: itertools.count() for i in range(1, 101)}

    def reply_to(self, id_: int, host: str, nth: int, headers: Mapping[str, str]) -> Reply:
        conditional = any(k.lower() in ("if-none-match", "if-modified-since") for k in headers)
        if conditional and next(self.turns[id_]) % 2 == 1:  # the backend that ignores validators
            return Reply(200, self.page(id_), (("Content-Type", "text/html; charset=utf-8"),
                                               ("ETag", self.etag(id_)), ("Last-Modified", self.last_modified(id_))))
        return super().reply_to(id_, host, nth, headers)


def test_a_page_that_never_changes_behind_a_304_and_a_200_backend_never_makes_news(
    make_site, tmp_path: Path
) -> None:
    """Finding 1: 304, then 200 with the same body, in turn: no item, every duration only grows."""
    model = TwoBackendsModel()
    site = make_site(model)
    crawl(site, tmp_path, T0, "run1.jsonl")
    now, duration = T0, DAY
    for visit in (1, 2, 3):  # 304, 200 with the same body, 304
        now += duration + 60  # every page due
        run = crawl(site, tmp_path, now, f"run{visit + 1}.jsonl", resume="due")
        assert run.items == [], visit
        assert "idcrawl/pages/changed" not in run.stats, visit
        kind = "idcrawl/pages/not_modified" if visit % 2 == 1 else "idcrawl/pages/unchanged"
        assert run.stats[kind] == 100, visit
        duration *= 1.8
        pages = SqliteStateStore(tmp_path / STATE).load_pages("reg")
        assert [p.update_duration for p in pages.values()] == [pytest.approx(duration, rel=1e-12)] * 100, visit
        assert {p.revision for p in pages.values()} == {0}


class ClockModel(ChangingModel):
    """A site that ignores validators and prints the time of the request and a fresh token in every page."""

    def __init__(self) -> None:
        super().__init__(validators=False)
        self.served = itertools.count(1)
        self._count_lock = threading.Lock()

    def page(self, id_: int) -> bytes:
        with self._count_lock:
            n = next(self.served)
        clock = f"{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}"
        extra = (f"<script>var served = {n};</script><p>Served at {clock}</p>\n"
                 f"<p>token=s{n * 7919 % 100_003}</p></body>")
        return super().page(id_).replace(b"</body>", extra.encode())


@pytest.mark.parametrize(("keys", "news"), [
    ({}, 100),
    ({"signature_drop": DROP}, 0),
    ({"signature": "text", "signature_drop": DROP}, 0),
])
def test_pages_with_a_clock_make_news_by_their_bytes_and_none_once_it_is_dropped(
    make_site, tmp_path: Path, keys: dict[str, str], news: int
) -> None:
    """Finding 3: the default signature (the body's SHA-1) sees a clock as a change at every visit;
    ``signature_drop`` removes it (in ``body`` or ``text`` mode) and a real change still counts."""
    model = ClockModel()
    site = make_site(model)
    first = crawl(site, tmp_path, T0, "run1.jsonl", **keys)
    assert len(first.items) == 100
    model.version[7] += 1  # a real change of one notice
    second = crawl(site, tmp_path, T0 + 2 * DAY, "run2.jsonl", resume="due", **keys)
    assert second.stats.get("idcrawl/pages/changed", 0) == max(news, 1)
    assert second.stats.get("idcrawl/pages/unchanged", 0) == 100 - max(news, 1)
    if not news:
        [item] = second.items
        assert item["id"] == 7 and item["revision"] == 2 and item["previous_checksum"] != item["checksum"]


SPIDER = '''
from idcrawl.spiders.idseq import IdSeqSpider


class NoticeSpider(IdSeqSpider):
    name = "notice"

    def page_signature(self, response):
        return "v:" + (response.css("p.v::text").get() or "")
'''


def test_a_site_spider_computes_its_own_signature(make_site, tmp_path: Path) -> None:
    """``page_signature`` overridden: only the extracted field counts, whatever else the page holds."""
    model = ClockModel()
    site = make_site(model)
    spider = tmp_path / "notice.py"
    spider.write_text(SPIDER)
    from tests.support.crawl import run_crawl

    def run(now: float, output: str, **extra: object):
        result = run_crawl(tmp_path, {**ARGS, "url": site.url(), **extra}, {"IDCRAWL_NOW": at(now)},
                           runspider=spider, output=output)
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    first = run(T0, "run1.jsonl")
    assert {item["checksum"] for item in first.items} == {"v:version 1"}
    model.version[9] += 1
    second = run(T0 + 2 * DAY, "run2.jsonl", resume="due")
    assert [(item["id"], item["checksum"], item["previous_checksum"]) for item in second.items] == [
        (9, "v:version 2", "v:version 1")]


def test_last_modified_sync_and_the_forced_refetch(make_site, tmp_path: Path) -> None:
    """Finding 4: with ``last_modified = sync`` a 304 sets the duration to the page's age (its
    Last-Modified is 29 days old); past ``IDCRAWL_RECRAWL_REFETCH_AFTER`` a revisit has no validators."""
    model = ChangingModel()
    site = make_site(model)
    crawl(site, tmp_path, T0, "run1.jsonl", last_modified="sync")
    model.conditional.clear()
    now = T0 + 2 * DAY
    second = crawl(site, tmp_path, now, "run2.jsonl", resume="due", last_modified="sync")
    assert second.stats["idcrawl/pages/not_modified"] == 100 and len(model.conditional) == 100
    pages = SqliteStateStore(tmp_path / STATE).load_pages("reg")
    age = now - (T0 - 29 * DAY)  # ChangingModel's Last-Modified of version 1
    assert {p.update_duration for p in pages.values()} == {age}

    model.conditional.clear()
    later = now + age + 60  # every page due; its last body (T0) older than 30 days
    third = run_with(site, tmp_path, later, "run3.jsonl", {"IDCRAWL_RECRAWL_REFETCH_AFTER": "30d"},
                     resume="due", last_modified="sync")
    assert model.conditional == [] and third.stats["idcrawl/pages/refetched"] == 100
    assert "idcrawl/pages/conditional" not in third.stats
    assert third.stats["idcrawl/pages/unchanged"] == 100 and third.items == []
    pages = SqliteStateStore(tmp_path / STATE).load_pages("reg")
    assert {p.body_at for p in pages.values()} == {later}


def run_with(site, workdir: Path, now: float, output: str, settings: dict[str, object], **extra: object):
    from tests.support.crawl import run_crawl

    result = run_crawl(workdir, {**ARGS, "url": site.url(), **extra}, {"IDCRAWL_NOW": at(now), **settings},
                       output=output)
    assert result.returncode == 0, result.stderr[-3000:]
    return result
