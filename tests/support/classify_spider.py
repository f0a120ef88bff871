"""A site spider that decides soft 404s in code, by overriding ``classify``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy.http import Response

from idcrawl.core.lanes import Outcome
from idcrawl.spiders.idseq import IdSeqSpider


class SoftClassifySpider(IdSeqSpider):
    name = "softclassify"

    def classify(self, response: Response) -> Outcome:
        if response.status == 200 and response.css("div.notfound"):
            return Outcome.MISSING
        return super().classify(response)

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        item["title"] = response.css("h1.title::text").get()
        yield item
