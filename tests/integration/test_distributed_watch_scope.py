"""Watch mode with crawl scope in a fleet: each wave is a run of the fleet (``idcrawl.distributed.runs``) for
the URL queue too, so a watching fleet fetches per wave what one watching process fetches
(``tests/crawl/test_watch_pages_crawl.py``'s crawl-scope test is the reference). Two workers, the clock fixed
(``IDCRAWL_NOW``) and sped up while they sleep; the site holds its pages until both have joined (a gate,
not a time)."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from idcrawl.core.clock import format_time, stamp
from tests.crawl.test_recrawl_pages_crawl import T0
from tests.crawl.test_scope_crawl import GRAPH, truth
from tests.crawl.test_urlqueue_crawl import revisit_job
from tests.integration.test_distributed_crawl import worker_settings
from tests.integration.test_distributed_watch import Watcher
from tests.support.linkgraph import LinkGraphSite, resolver_settings

redis = pytest.importorskip("redis")

HOSTS = ("a.test", "b.test", "c.test")
HOUR = 3600.0
#: simulated seconds per real second while asleep: the hour between the waves takes 30 s (the test acts on
#: the second wave's end well within the hour after it)
SPEED = 120


def test_a_watching_fleet_with_crawl_profiles_fetches_per_wave_what_one_watching_process_fetches(
    redis_server: Any, tmp_path: Path,
) -> None:
    """"frontpages" (hop 0) every hour, "daily" (to hop 2) every day, watched by two workers: wave 1 walks
    the graph to hop 2, each page once across the fleet; both sleep an hour (the front page's next harvest,
    as Redis holds it); wave 2 (a run of the fleet: one worker starts it, the other joins) fetches the front
    page alone, once (a clock in the pages: news, an item). SIGINT on both while asleep: exit 0."""
    gate = threading.Event()
    site = LinkGraphSite({page: list(links) for page, links in GRAPH.items()}, gate=gate, clock=True).start()
    try:
        walk = sorted(truth(site, 2))
        job = tmp_path / "job.toml"
        job.write_text(revisit_job(site, "1h", "1d"))
        settings = {**worker_settings(redis_server, job="wscope", IDCRAWL_NOW=format_time(T0),
                                      IDCRAWL_WATCH_SPEED=SPEED, IDCRAWL_REDIS_LEASE_TIMEOUT=1),
                    **resolver_settings(HOSTS)}
        workers = [Watcher(tmp_path / f"w{n}", job, settings) for n in range(2)]
        client = redis.Redis.from_url(redis_server.url)
        deadline = time.monotonic() + 120
        while client.zcard("idcrawl:{wscope}:workers") < 2:  # a condition: both joined wave 1's run
            assert time.monotonic() < deadline and all(w.proc.poll() is None for w in workers)
            time.sleep(0.01)
        gate.set()
        for w in workers:  # asleep after wave 2, until the front page's next harvest
            w.wait_for(f"watch: wave 2 done; next wave at {format_time(T0 + 2 * HOUR)}")
        assert all(w.stop(signal.SIGINT) == 0 for w in workers)
        with site._lock:
            fetched = Counter(path for host, path in site.log if host == "a.test" and path != "/robots.txt")
        assert fetched == Counter({**{path: 1 for path in walk}, "/": 2}), "wave 1's walk once, wave 2 the front page"
        items = Counter(item["url"] for w in workers for item in w.items)
        assert items == Counter({**{site.url(f"http://a.test{path}"): 1 for path in walk}, site.url("http://a.test/"): 2})
        assert [w.stats["idcrawl/watch/waves"] for w in workers] == [2, 2]
        assert all(w.stats["idcrawl/watch/next_wave"] == stamp(T0 + 2 * HOUR) for w in workers)
        assert [w.stats["idcrawl/watch/slept"] for w in workers] == [HOUR, HOUR]
    finally:
        site.stop()
