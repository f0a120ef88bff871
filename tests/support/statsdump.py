"""A test-only extension: writes the crawl's final stats as JSON to STATS_DUMP_PATH."""

from __future__ import annotations

import json
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler


class StatsDump:
    def __init__(self, crawler: Crawler, path: str) -> None:
        self.crawler, self.path = crawler, path

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StatsDump:
        ext = cls(crawler, crawler.settings["STATS_DUMP_PATH"])
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        return ext

    def spider_closed(self, spider: Spider, reason: str) -> None:
        assert self.crawler.stats is not None
        stats: dict[str, Any] = dict(self.crawler.stats.get_stats())
        stats["finish_reason"] = reason
        with open(self.path, "w") as fh:
            json.dump(stats, fh, default=str, indent=1, sort_keys=True)
