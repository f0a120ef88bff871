"""A site spider that closes the crawl itself (``CloseSpider('site_gone')``) at ids ending in 30 (exit-status tests)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy.exceptions import CloseSpider
from scrapy.http import Response

from idcrawl.spiders.idseq import IdSeqSpider


class ClosingSpider(IdSeqSpider):
    name = "closing"

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        if item["id"] % 100 == 30:
            raise CloseSpider("site_gone")
        yield item
