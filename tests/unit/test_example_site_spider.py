"""The example of docs/testing.md (included there whole): a site spider tested on pages recorded once.

In a project of your own, the spider is imported from your package (``from myproject.spiders.notices
import NoticeSpider``); it is written here so that the example is complete. The site is idcrawl's demo
site, recorded with ``python -m idcrawl.demo serve --port 8000`` running.
"""

from collections.abc import Iterable
from typing import Any

import pytest
from scrapy.http import Response

from idcrawl.spiders.idseq import IdSeqSpider


class NoticeSpider(IdSeqSpider):
    name = "notices"

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        item["title"] = response.css("h1.title::text").get()
        item["value"] = int(response.css("dd.value::text").get())
        yield item


# the target as a crawl gets it: `scrapy crawl notices -a url=... -a start=... -a soft404_regex=...`
TARGET = {"url": "http://127.0.0.1:8000/register/{id}", "start": 12345, "soft404_regex": "could not be found"}


@pytest.mark.parametrize(
    ("notice", "title", "value"),
    [(12345, "Procurement notice 12345", 760055), (12347, "Procurement notice 12347", 775893)],
)
def test_a_notice_gives_its_fields(recorded_crawl, notice, title, value):
    page = recorded_crawl(NoticeSpider, **TARGET).fetch(notice)
    assert page.outcome == "found"
    assert page.response.status == 200
    assert page.item["id"] == notice
    assert (page.item["title"], page.item["value"]) == (title, value)


def test_a_number_the_register_does_not_have_is_missing(recorded_crawl):
    crawl = recorded_crawl(NoticeSpider, **TARGET)
    page = crawl.fetch(12346)
    assert page.response.status == 200  # a soft 404: the site says "could not be found" with a 200
    assert page.outcome == "missing"
    assert page.items == []
