"""A site spider whose ``start()`` yields a request of its own and not ``super().start()``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from scrapy import Request
from scrapy.http import Response

from idcrawl.spiders.idseq import IdSeqSpider


class OwnStartSpider(IdSeqSpider):
    name = "ownstart"

    async def start(self) -> AsyncIterator[Any]:
        yield Request("data:,hello", callback=self.greeted, dont_filter=True, meta={"dont_obey_robotstxt": True})

    def greeted(self, response: Response) -> Iterable[Any]:
        self.logger.info("own start request answered: %s", response.text)
        return []
