"""Revisits (a crawl profile's ``revisit``) and the gained-crawl-profile re-follow in a distributed
job: fleets of real ``scrapy crawl`` workers on one redis-server, the link-graph site, the crawl's
clock fixed by ``IDCRAWL_NOW`` (no sleeping). Each run is a fleet started together and finished; the
shared URL queue decides what is due with the single process's rule on the job's clock.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from idcrawl.core.clock import parse_time
from idcrawl.core.scope import canonical
from idcrawl.core.urlqueue import QueueState
from idcrawl.distributed.urlqueue import read_entries
from tests.crawl.test_scope_crawl import GRAPH, truth
from tests.crawl.test_urlqueue_crawl import at, revisit_job
from tests.integration.test_distributed_crawl import finish, start_worker, worker_settings
from tests.support.crawl import CrawlResult, run_crawl
from tests.support.fleet_runs import wait_out_the_runs_grace
from tests.support.linkgraph import LinkGraphSite, resolver_settings

redis = pytest.importorskip("redis")

HOSTS = ("a.test", "b.test", "c.test")


@pytest.fixture
def site() -> Any:
    gate = threading.Event()
    gate.set()  # open but while a fleet's workers join (fleet)
    server = LinkGraphSite({page: list(links) for page, links in GRAPH.items()}, gate=gate).start()
    yield server
    server.stop()


def fleet(site: LinkGraphSite, tmp_path: Path, name: str, run: int, workers: int, job: str, redis_server: Any,
          extra: dict[str, Any]) -> list[CrawlResult]:
    """One run of the job ``name``: ``workers`` workers started together, each finished. The site holds
    its pages (its gate) until every worker has joined the job (its heartbeat in ``P workers``): a worker
    that started after the others had finished would be the first of a new run of the fleet and
    reconcile the queue again (a not-found URL requeued and fetched twice: seen at load 15)."""
    path = tmp_path / f"job{run}.toml"
    path.write_text(job)
    settings = {**worker_settings(redis_server, job=name), **resolver_settings(HOSTS),
                "IDCRAWL_REDIS_LEASE_TIMEOUT": 1, **extra}
    assert site.gate is not None
    site.gate.clear()
    client = redis.Redis.from_url(redis_server.url)
    # a run of its own: started once the last run's grace (the lease, 1 s) passed on Redis's clock (run.lua)
    wait_out_the_runs_grace(redis_server, name, 1)
    procs = [start_worker(tmp_path / f"r{run}w{n}", {"job": path}, settings) for n in range(workers)]
    deadline = time.monotonic() + 120
    # a condition, not a time: all joined, or one ended (a run with nothing to fetch needs no gate)
    while (client.zcard(f"idcrawl:{{{name}}}:workers") < workers and all(p.poll() is None for p in procs)
           and time.monotonic() < deadline):
        time.sleep(0.01)
    site.gate.set()
    results = [finish(proc, tmp_path / f"r{run}w{n}") for n, proc in enumerate(procs)]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    return results


def pages(site: LinkGraphSite) -> Counter[str]:
    """The requests of the run per path of a.test (the walk's host), robots.txt left out."""
    with site._lock:
        return Counter(path for host, path in site.log if host == "a.test" and path != "/robots.txt")


def total(results: list[CrawlResult], key: str) -> int:
    return sum(result.stats.get(key, 0) for result in results)


def test_revisits_over_five_runs_of_a_fleet_fetch_what_one_process_fetches_each_url_once(
    site: LinkGraphSite, redis_server: Any, tmp_path: Path,
) -> None:
    """The single process's five-run test (tests/crawl/test_urlqueue_crawl.py) on fleets of three and
    two workers: "frontpages" (hop 0) every hour, "daily" (to hop 2) every day; each run fetches exactly
    what is due, each URL once across the fleet; a run cut short with its revisits queued, then both
    crawl profiles slowed down: nothing is fetched (the seed's step 6.3)."""
    walk = sorted(truth(site, 2))
    job = revisit_job(site, "1h", "1d")
    client = redis.Redis.from_url(redis_server.url)

    first = fleet(site, tmp_path, "rv", 1, 3, job, redis_server, at(0))
    assert sorted(pages(site)) == walk and max(pages(site).values()) == 1
    assert sorted(item["url"] for r in first for item in r.items) == sorted(site.url(f"http://a.test{p}")
                                                                          for p in walk)
    site.log.clear()

    second = fleet(site, tmp_path, "rv", 2, 2, job, redis_server, at(0.5))  # nothing due: no request at all
    assert site.log == [] and not any(r.items for r in second)

    site.graph["http://a.test/"].append("http://a.test/new")
    site.graph["http://a.test/new"] = []
    third = fleet(site, tmp_path, "rv", 3, 3, job, redis_server, at(1))  # the front page is due, its new link is new
    assert pages(site) == Counter({"/": 1, "/new": 1})
    assert total(third, "idcrawl/scope/due") == 1
    assert total(third, "idcrawl/crawl_profiles/frontpages/revisits") == 1
    site.log.clear()

    fourth = fleet(site, tmp_path, "rv", 4, 2, job, redis_server, at(25))  # a day after /new: every page, each once
    assert pages(site) == Counter({path: 1 for path in [*walk, "/new"]})
    assert total(fourth, "idcrawl/scope/due") == len(walk) + 1
    front = canonical(site.url("http://a.test/"))
    now = parse_time(at(25)["IDCRAWL_NOW"])
    records = {e.url: e.record for e in read_entries(client, "idcrawl:{rv}:")}
    assert {url: (r.cycles, r.last_harvest, r.next_harvest) for url, r in records.items()} == {
        url: (3 if url == front else 2, now, now + (3600 if url == front else 86400)) for url in records}
    site.log.clear()

    # all due, cut short: each worker closes after its first page (a request in flight may be answered)
    fleet(site, tmp_path, "rv", 5, 2, job, redis_server,
          {**at(49), "CLOSESPIDER_PAGECOUNT": 1, "CONCURRENT_REQUESTS": 1})
    left = [e for e in read_entries(client, "idcrawl:{rv}:") if e.state is not QueueState.HARVESTED]
    assert left and sum(pages(site).values()) < len(walk) + 1
    site.log.clear()
    slowed = fleet(site, tmp_path, "rv", 6, 3, revisit_job(site, "3d", "3d"), redis_server, at(49.5))
    assert site.log == [] and not any(r.items for r in slowed)  # queued revisits, not due any more
    assert total(slowed, "idcrawl/scope/not_due") == len(left)
    assert all(e.state is QueueState.HARVESTED for e in read_entries(client, "idcrawl:{rv}:"))


def gained_job(site: LinkGraphSite, deep: bool) -> str:
    return f"""
[[crawl_profiles]]
name = "short"
max_hops = 1

[[crawl_profiles]]
name = "deep"
max_hops = 3

[[targets]]
name = "front"
url = "{site.url('http://a.test/')}"
crawl_profiles = {'["short", "deep"]' if deep else '["short"]'}
"""


def test_a_crawl_profile_assigned_later_re_follows_the_stored_links_in_a_fleet_as_in_one_process(
    site: LinkGraphSite, redis_server: Any, tmp_path: Path,
) -> None:
    """Run 1 with "short" (1 hop), run 2 with "deep" (3 hops) assigned too: the fleet's run 2 fetches
    what one process's run 2 fetches (the hops 2 and 3 only, nothing fetched twice) and counts the same
    URLs started (``idcrawl/scope/started``)."""
    single_dir = tmp_path / "single"
    single_dir.mkdir()

    def single(run: int, deep: bool) -> CrawlResult:
        path = single_dir / f"job{run}.toml"
        path.write_text(gained_job(site, deep))
        result = run_crawl(single_dir, {"job": path}, {**resolver_settings(HOSTS), **at(run)})
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    single(1, deep=False)
    one_first = pages(site)
    site.log.clear()
    one = single(2, deep=True)
    one_second = pages(site)
    assert one_second and set(one_second).isdisjoint(one_first)
    assert sorted([*one_first, *one_second]) == sorted(truth(site, 3))
    site.log.clear()

    fleet(site, tmp_path, "gain", 1, 3, gained_job(site, False), redis_server, at(1))
    assert pages(site) == one_first
    site.log.clear()
    second = fleet(site, tmp_path, "gain", 2, 3, gained_job(site, True), redis_server, at(2))
    assert pages(site) == one_second  # each once
    assert total(second, "idcrawl/scope/started") == one.stats["idcrawl/scope/started"] > 0
