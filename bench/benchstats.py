"""A tiny Scrapy extension for the benchmarks: the crawl's stats as one JSON file.

Enabled by ``bench/throughput.py`` on both sides of the comparison through
``-s EXTENSIONS=...`` with ``bench/`` on ``PYTHONPATH``; ``-s BENCH_STATS_FILE=path``
says where to write. At ``engine_stopped`` (after CoreStats has written
``elapsed_time_seconds``) it writes every stat (values made JSON-safe), the ids
of the scraped items (to compare both sides), and the monotonic times of the
first and last response (for a rate that leaves start-up and shut-down out).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from scrapy import signals
from scrapy.exceptions import NotConfigured


class BenchStats:
    def __init__(self, crawler: Any, path: str) -> None:
        self.crawler = crawler
        self.path = Path(path)
        self.ids: list[Any] = []
        self.first_response: float | None = None
        self.last_response: float | None = None
        self.opened: float | None = None

    @classmethod
    def from_crawler(cls, crawler: Any) -> BenchStats:
        path = crawler.settings.get("BENCH_STATS_FILE")
        if not path:
            raise NotConfigured
        ext = cls(crawler, path)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.response_received, signal=signals.response_received)
        crawler.signals.connect(ext.item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(ext.engine_stopped, signal=signals.engine_stopped)
        return ext

    def spider_opened(self, spider: Any) -> None:
        self.opened = time.monotonic()

    def response_received(self, response: Any, request: Any, spider: Any) -> None:
        now = time.monotonic()
        if self.first_response is None:
            self.first_response = now
        self.last_response = now

    def item_scraped(self, item: Any, response: Any, spider: Any) -> None:
        self.ids.append(item.get("id") if isinstance(item, dict) else None)

    def engine_stopped(self) -> None:
        stats = {k: (v if isinstance(v, int | float | str | None) else str(v))
                 for k, v in self.crawler.stats.get_stats().items()}
        data = {
            "stats": stats,
            "ids": self.ids,
            "opened": self.opened,
            "first_response": self.first_response,
            "last_response": self.last_response,
        }
        self.path.write_text(json.dumps(data))
