"""A stats collector for the benchmarks: the crawl's stats as one JSON file.

``bench/throughput.py`` sets ``-s STATS_CLASS=benchstats.BenchStatsCollector``
on both sides of the comparison (with ``bench/`` on ``PYTHONPATH``) and
``-s BENCH_STATS_FILE=path``. A stats collector rather than an extension, so
that the project's ``EXTENSIONS`` stay exactly as they are. When the spider
closes (after CoreStats wrote ``elapsed_time_seconds``) it writes every stat
(values made JSON-safe), the ids of the scraped items (to compare both sides)
and the monotonic times of the first and last response (for a rate that leaves
start-up and shut-down out); with ``-s BENCH_RESPONSE_TIMES=True`` also the
monotonic time of every response (``bench/distributed.py``: stretches without
a response).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from scrapy import signals
from scrapy.statscollectors import MemoryStatsCollector, StatsT


class BenchStatsCollector(MemoryStatsCollector):
    def __init__(self, crawler: Any) -> None:
        super().__init__(crawler)
        path = crawler.settings.get("BENCH_STATS_FILE")
        self.bench_path = Path(path) if path else None
        self.bench_ids: list[Any] = []
        self.first_response: float | None = None
        self.last_response: float | None = None
        self.response_times: list[float] | None = [] if crawler.settings.getbool("BENCH_RESPONSE_TIMES") else None
        crawler.signals.connect(self._response_received, signal=signals.response_received)
        crawler.signals.connect(self._item_scraped, signal=signals.item_scraped)

    def _response_received(self, response: Any, request: Any, spider: Any) -> None:
        now = time.monotonic()
        if self.first_response is None:
            self.first_response = now
        self.last_response = now
        if self.response_times is not None:
            self.response_times.append(now)

    def _item_scraped(self, item: Any, response: Any, spider: Any) -> None:
        self.bench_ids.append(item.get("id") if isinstance(item, dict) else None)

    def _persist_stats(self, stats: StatsT) -> None:
        super()._persist_stats(stats)
        if self.bench_path is None:
            return
        data = {
            "stats": {k: (v if isinstance(v, int | float | str | None) else str(v)) for k, v in stats.items()},
            "ids": self.bench_ids,
            "first_response": self.first_response,
            "last_response": self.last_response,
            "response_times": self.response_times,
            "closed_at": time.monotonic(),  # the spider closed: stats are persisted last
        }
        self.bench_path.write_text(json.dumps(data))
