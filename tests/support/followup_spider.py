"""A site spider that follows one detail page per found id (for scheduler tests)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy import Request
from scrapy.http import Response

from idcrawl.spiders.idseq import IdSeqSpider


class FollowUpSpider(IdSeqSpider):
    name = "followup"

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        yield item
        detail = response.url.rsplit("/", 1)[0] + f"/{1000 + item['id']}"
        yield Request(detail, callback=self.parse_detail, cb_kwargs={"of": item["id"]}, priority=10)

    def parse_detail(self, response: Response, of: int) -> Iterable[Any]:
        yield {"detail_of": of, "url": response.url}
