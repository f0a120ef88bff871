"""A site spider whose callback raises for one id (for error-incident tests)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy.http import Response

from idcrawl.spiders.idseq import IdSeqSpider


class FailingSpider(IdSeqSpider):
    name = "failing"

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        if item["id"] == 3:
            raise ValueError("cannot parse <notice> & co")
        yield item
