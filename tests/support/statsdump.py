"""A test-only extension: writes the crawl's final stats as JSON to STATS_DUMP_PATH.

With it comes ``test/peak_rss_mib``: the process's peak RSS so far (``VmHWM``, Linux), which unlike
``ru_maxrss`` does not count what the parent held before ``exec``."""

from __future__ import annotations

import json
from pathlib import Path
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
        status = Path("/proc/self/status")
        if status.exists():
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    stats["test/peak_rss_mib"] = int(line.split()[1]) // 1024
        with open(self.path, "w") as fh:
            json.dump(stats, fh, default=str, indent=1, sort_keys=True)
