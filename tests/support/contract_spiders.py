"""A site spider with a broken contract, for ``scrapy check``: its page is the demo site's notice at
``IDCRAWL_TEST_CONTRACT_URL`` (a test's site), and it claims a field the page does not give."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from scrapy.http import Response

from idcrawl.spiders.demo import DemoSpider

URL = os.environ.get("IDCRAWL_TEST_CONTRACT_URL", "http://127.0.0.1:9/notice/10001")


class BrokenContractSpider(DemoSpider):
    name = "broken_contract"

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        yield from super().parse_found(response, item)

    parse_found.__doc__ = f"""The demo's fields, and a field it never has.

        @url {URL}
        @returns items 1 1
        @scrapes title deadline
        """
