"""The baseline of ``bench/throughput.py``: a plain Scrapy spider over the same ids.

It yields every URL from ``async def start()`` through Scrapy's default
scheduler, lets 404 through to the callback (``handle_httpstatus_list``) and
yields one small dict per 200 page, which is what a hand-written Scrapy spider
for an id range does. Run it with ``scrapy runspider``::

    scrapy runspider bench/plain_spider.py -a url='http://127.0.0.1:8000/notice/{id}' -a start=1 -a max=20000
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from scrapy import Request, Spider


class PlainIdSpider(Spider):
    name = "plain_ids"

    def __init__(self, url: str = "", start: str = "1", max: str = "20000", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if "{id}" not in url:
            raise ValueError(f"url={url!r}: needs an {{id}} field")
        self.url_template = url
        self.first = int(start)
        self.last = int(max)

    async def start(self) -> AsyncIterator[Any]:
        for id_ in range(self.first, self.last + 1):
            yield Request(
                self.url_template.format(id=id_),
                callback=self.parse_id,
                cb_kwargs={"id_": id_},
                meta={"handle_httpstatus_list": [404]},
            )

    def parse_id(self, response: Any, id_: int) -> Iterator[dict[str, Any]]:
        if response.status == 200:
            yield {"id": id_, "url": response.url, "status": response.status}
