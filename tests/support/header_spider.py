"""A site spider that adds a header to every id's request by overriding ``make_id_request``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy import Request
from scrapy.http import Response

from idcrawl.core.frontier import Dispatch
from idcrawl.spiders.idseq import IdSeqSpider


class HeaderSpider(IdSeqSpider):
    name = "header"

    def make_id_request(self, dispatch: Dispatch) -> Request:
        request = super().make_id_request(dispatch)
        return request.replace(headers={"X-Token": f"token-{dispatch.id}"})

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        item["token"] = (response.request.headers.get("X-Token") or b"").decode()
        yield item
