"""IdLogFormatter: the per-page DEBUG lines are skipped exactly when LOG_LEVEL would drop them."""

from __future__ import annotations

import pytest
from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.logformatter import LogFormatter
from scrapy.utils.test import get_crawler

from idcrawl.logformatter import IdLogFormatter


def formatter(**settings: object) -> IdLogFormatter:
    return IdLogFormatter.from_crawler(get_crawler(Spider, settings))


def page() -> tuple[Request, HtmlResponse, Spider]:
    request = Request("http://127.0.0.1/notice/7")
    return request, HtmlResponse(request.url, body=b"<html></html>", request=request), Spider("s")


@pytest.mark.parametrize("level", ["INFO", "WARNING", "ERROR", 20, "info"])
def test_above_debug_the_per_page_lines_are_not_built(level: object) -> None:
    request, response, spider = page()
    lf = formatter(LOG_LEVEL=level)
    assert lf.crawled(request, response, spider) is None
    assert lf.scraped({"id": 7}, response, spider) is None


@pytest.mark.parametrize("level", ["DEBUG", 10, "debug"])
def test_at_debug_they_are_scrapys_own(level: object) -> None:
    request, response, spider = page()
    lf, scrapy_lf = formatter(LOG_LEVEL=level), LogFormatter()
    assert lf.crawled(request, response, spider) == scrapy_lf.crawled(request, response, spider)
    assert lf.scraped({"id": 7}, response, spider) == scrapy_lf.scraped({"id": 7}, response, spider)


def test_with_logging_off_nothing_is_built() -> None:
    request, response, spider = page()
    assert formatter(LOG_ENABLED=False, LOG_LEVEL="DEBUG").crawled(request, response, spider) is None
