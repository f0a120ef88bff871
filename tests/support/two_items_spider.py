"""A spider that yields two items per found id, both carrying its target and id (feed marks tests)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy.http import Response

from idcrawl.spiders.idseq import IdSeqSpider


class TwoItemsSpider(IdSeqSpider):
    name = "twoitems"

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        yield {**item, "part": 1}
        yield {**item, "part": 2}
