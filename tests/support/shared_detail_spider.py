"""A site spider whose found ids share detail pages: id N links to detail 5000 + (N % 20) // 4."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy import Request
from scrapy.http import Response

from idcrawl.spiders.idseq import IdSeqSpider


class SharedDetailSpider(IdSeqSpider):
    name = "shareddetail"

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        yield item
        detail = response.url.rsplit("/", 1)[0] + f"/{5000 + (item['id'] % 20) // 4}"
        yield Request(detail, callback=self.parse_detail)

    def parse_detail(self, response: Response) -> Iterable[Any]:
        yield {"detail": response.url}
