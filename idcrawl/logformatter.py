"""``IdLogFormatter``: Scrapy's log formatter without the per-page lines a crawl's log level drops.

What reaches the log is unchanged; the ``fast`` profile sets it. Why: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.logformatter import LogFormatter

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.logformatter import LogFormatterResult
    from twisted.python.failure import Failure

__all__ = ["IdLogFormatter"]


class IdLogFormatter(LogFormatter):
    """``LOG_FORMATTER = "idcrawl.logformatter.IdLogFormatter"``."""

    def __init__(self, per_page: bool = True) -> None:
        self.per_page = per_page  # whether the per-page DEBUG lines can reach the log at all

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdLogFormatter:
        level = crawler.settings.get("LOG_LEVEL", "DEBUG")
        number = level if isinstance(level, int) else logging.getLevelName(str(level).upper())
        enabled = crawler.settings.getbool("LOG_ENABLED", True)
        return cls(per_page=enabled and (not isinstance(number, int) or number <= logging.DEBUG))

    # Scrapy documents None as "no message" but types the methods as always returning a result
    def crawled(  # type: ignore[override]
        self, request: Request, response: Response, spider: Spider
    ) -> LogFormatterResult | None:
        return super().crawled(request, response, spider) if self.per_page else None

    def scraped(  # type: ignore[override]
        self, item: Any, response: Response | Failure | None, spider: Spider
    ) -> LogFormatterResult | None:
        return super().scraped(item, response, spider) if self.per_page else None
