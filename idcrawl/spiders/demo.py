"""An example site spider: the demo site's notices, fields by CSS selectors.

This is the pattern for a real register: subclass IdSeqSpider, set ``name``,
and fill the item in ``parse_found``. Ids, margins and outcomes stay generic.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy.http import Response

from idcrawl.spiders.idseq import IdSeqSpider


class DemoSpider(IdSeqSpider):
    name = "demo"

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        """A notice's fields. ``scrapy check demo`` runs these contracts on the demo site
        (``python -m idcrawl.demo serve``, port 8000), through the id path as a crawl does.

        @url http://127.0.0.1:8000/notice/12345
        @returns items 1 1
        @returns requests 0 0
        @scrapes target id url title agency value published
        """
        item["title"] = response.css("h1.title::text").get()
        item["agency"] = response.css("dd.agency::text").get()
        value = response.css("dd.value::text").get()
        item["value"] = int(value) if value and value.isdigit() else None
        item["published"] = response.css("dd.published::text").get()
        yield item
