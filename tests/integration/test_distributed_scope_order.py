"""Order independence of crawl scope in a fleet (issue 30, finding 1): two real ``scrapy crawl`` workers
on one redis-server crawl a few multi-seed link graphs, with the seeds' pages answering in different
orders; the fleet requests the reference walk's pages once, and its shared queue ends with the
reference's owners and hops."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from idcrawl.distributed.urlqueue import read_entries
from tests.crawl.test_scope_order_crawl import GRAPHS, SLOW
from tests.integration.test_distributed_crawl import finish, start_worker, worker_settings
from tests.support.linkgraph import LinkGraphSite, resolver_settings
from tests.support.scopegraphs import on_site, write_job
from tests.unit.test_scope_order import HOSTS

redis = pytest.importorskip("redis")


@pytest.mark.parametrize(("graph", "late"), [(0, 0), (0, 1), (1, 1)])
def test_two_workers_fetch_the_reference_walk_once_with_its_owners_and_hops(
    redis_server: object, tmp_path: Path, graph: int, late: int,
) -> None:
    case = GRAPHS[graph]
    names = sorted(case.seeds)
    held = {case.seeds[name]: SLOW for i, name in enumerate(names) if (i % 2) == late}
    site = LinkGraphSite(case.links, delays=held).start()
    job = f"order{graph}{late}"
    try:
        path = write_job(tmp_path / "job.toml", site, case.seeds, case.profiles)
        hosts = sorted({urlsplit(page).hostname or "" for page in [*case.links, *case.seeds.values()]} | set(HOSTS))
        settings = {**worker_settings(redis_server, job=job), **resolver_settings(hosts)}
        procs = [start_worker(tmp_path / f"w{n}", {"job": path}, settings) for n in range(2)]
        for n, proc in enumerate(procs):
            result = finish(proc, tmp_path / f"w{n}")
            assert result.returncode == 0, result.stderr[-3000:]
        truth = on_site(site, case.links, case.seeds, case.admits)
        with site._lock:
            requested = Counter((host, p) for host, p in site.log if p != "/robots.txt")
        assert requested == Counter({(urlsplit(url).hostname, urlsplit(url).path): 1 for url in truth})
        client = redis.Redis.from_url(redis_server.url)  # type: ignore[attr-defined]
        stored = {entry.url: (entry.record.owner, (entry.record.hops.hops, entry.record.hops.offsite))
                  for entry in read_entries(client, f"idcrawl:{{{job}}}:")}
        assert stored == truth
    finally:
        site.stop()
