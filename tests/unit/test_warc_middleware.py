"""idcrawl.archive.middleware without a crawl: a response Scrapy's HTTP cache served is not archived again,
and whether a new capture is fsync'd at once is the worker's answer (``Worker.records_pages_at_once``),
not a reading of the settings."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from idcrawl.archive import middleware as warc
from idcrawl.runtime import META_KEY
from tests.support.warcs import read_warcs


def built(tmp_path: Path, **settings: Any) -> warc.IdWarcMiddleware:
    crawler = get_crawler(Spider, {"IDCRAWL_WARC_DIR": str(tmp_path / "warc"), **settings})
    mw = warc.IdWarcMiddleware.from_crawler(crawler)
    mw.spider_opened()
    return mw


def answer(url: str, flags: list[str] | None = None, *, lane: bool = False) -> tuple[Request, HtmlResponse]:
    request = Request(url, meta={META_KEY: {"target": "reg", "lane": "reg", "id": 1}} if lane else {})
    response = HtmlResponse(url, body=b"<html><body>notice</body></html>", request=request, flags=flags or [])
    return request, response


def test_a_response_from_the_http_cache_is_not_archived_again(tmp_path: Path) -> None:
    mw = built(tmp_path)
    for n, flags in enumerate(([], ["cached"], [])):
        request, response = answer(f"http://a.test/{n}", flags)
        assert mw.process_response(request, response) is response
    mw.spider_closed()
    records = read_warcs(tmp_path / "warc")
    assert sorted(r.uri for r in records if r.type == "response") == ["http://a.test/0", "http://a.test/2"]
    assert not [r for r in records if r.uri == "http://a.test/1"]  # no request record either
    assert mw.crawler.stats.get_value("idcrawl/warc/cached") == 1
    assert mw.crawler.stats.get_value("idcrawl/warc/response") == 2


@pytest.mark.parametrize("at_once", [True, False])
def test_a_new_capture_is_synced_at_once_when_the_worker_records_pages_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at_once: bool
) -> None:
    # IDCRAWL_DISTRIBUTED says the opposite of the worker: the worker's answer is the one that counts
    mw = built(tmp_path, IDCRAWL_DISTRIBUTED=not at_once)
    worker = SimpleNamespace(records_pages_at_once=at_once, pages=None)
    monkeypatch.setattr(warc, "runtime_of", lambda crawler: SimpleNamespace(worker=worker, pages=None))
    synced: list[int] = []
    flush = mw.files.flush
    monkeypatch.setattr(mw.files, "flush", lambda: (synced.append(1), flush())[1])
    mw.process_response(*answer("http://a.test/1", lane=True))
    assert synced == ([1] if at_once else [])
    mw.process_response(*answer("http://a.test/robots.txt"))  # not an id page: never synced at once
    assert synced == ([1] if at_once else [])
    mw.spider_closed()
