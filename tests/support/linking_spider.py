"""A site spider whose pages link to each other over and over (for dupefilter tests).

Ids 1..RING are lane ids; detail pages ``1000 + k`` (k = 1..RING) form a ring.
Found id ``i`` links to details ``1000 + i`` and the next one on the ring;
each detail page links to both its neighbours. So a crawl of ids 1..RING
meets every detail URL four times (2 * RING links from ids, 2 * RING from
details) and should fetch each once: ``dupefilter/filtered`` = 3 * RING.

With the setting ``LINKING_QUERY = True`` every link carries ``?from=<page>``,
which makes the links to one page differ unless the request fingerprinter
ignores the query (``tests.support.linking_spider.PathFingerprinter``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.http import Response

from idcrawl.spiders.idseq import IdSeqSpider

RING = 20


def ring_next(detail: int) -> int:
    return 1000 + (detail - 1000) % RING + 1


def ring_prev(detail: int) -> int:
    return 1000 + (detail - 1000 - 2) % RING + 1


class PathFingerprinter:
    """REQUEST_FINGERPRINTER_CLASS that ignores the query string."""

    def fingerprint(self, request: Request) -> bytes:
        parts = urlsplit(request.url)
        return hashlib.sha1(f"{request.method} {parts.netloc}{parts.path}".encode()).digest()


class LinkingSpider(IdSeqSpider):
    name = "linking"

    def link(self, response: Response, detail: int, source: int) -> Request:
        url = response.url.rsplit("/", 1)[0] + f"/{detail}"
        if self.settings.getbool("LINKING_QUERY"):
            url += f"?from={source}"
        return Request(url, callback=self.parse_detail, cb_kwargs={"detail": detail})

    def parse_found(self, response: Response, item: dict[str, Any]) -> Iterable[Any]:
        yield item
        first = 1000 + item["id"]
        yield self.link(response, first, item["id"])
        yield self.link(response, ring_next(first), item["id"])

    def parse_detail(self, response: Response, detail: int) -> Iterable[Any]:
        yield {"detail": detail}
        yield self.link(response, ring_prev(detail), detail)
        yield self.link(response, ring_next(detail), detail)
