"""Order independence of crawl scope in real crawls (issue 30, finding 1): a few multi-seed link graphs,
each crawled with the seeds' pages answering in different orders (some held back by the site); every
crawl requests the reference walk's pages once, and the state's URL queue ends with its owners and hops."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from idcrawl.state import SqliteStateStore
from tests.support.crawl import run_crawl
from tests.support.linkgraph import LinkGraphSite, resolver_settings
from tests.support.scopegraphs import FINDING_1, on_site, write_job
from tests.unit.test_scope_order import HOSTS, Case, generate

#: generated graphs with three seeds or more and pages two seeds reach (tests/unit/test_scope_order.py)
GRAPHS = [Case(FINDING_1["links"], FINDING_1["seeds"], FINDING_1["profiles"]), generate(5), generate(14)]
SLOW = 0.5  # seconds a held-back seed page waits: an order, not a threshold (any order must give the same)


@pytest.mark.parametrize("graph", range(len(GRAPHS)))
@pytest.mark.parametrize("late", [0, 1])
def test_every_response_order_fetches_the_reference_walk_once_with_its_owners_and_hops(
    tmp_path: Path, graph: int, late: int,
) -> None:
    case = GRAPHS[graph]
    names = sorted(case.seeds)
    held = {case.seeds[name]: SLOW for i, name in enumerate(names) if (i % 2) == late}
    site = LinkGraphSite(case.links, delays=held).start()
    try:
        path = write_job(tmp_path / "job.toml", site, case.seeds, case.profiles)
        hosts = sorted({urlsplit(page).hostname or "" for page in case.links} | set(HOSTS)
                       | {urlsplit(page).hostname or "" for page in case.seeds.values()})
        result = run_crawl(tmp_path, {"job": path}, resolver_settings(hosts))
        assert result.returncode == 0, result.stderr[-3000:]
        truth = on_site(site, case.links, case.seeds, case.admits)
        with site._lock:
            requested = Counter((host, p) for host, p in site.log if p != "/robots.txt")
        assert requested == Counter({(urlsplit(url).hostname, urlsplit(url).path): 1 for url in truth})
        store = SqliteStateStore(tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite", read_only=True)
        try:
            stored = {entry.url: (entry.record.owner, (entry.record.hops.hops, entry.record.hops.offsite))
                      for entry in store.load_urls()}
        finally:
            store.close()
        assert stored == truth
    finally:
        site.stop()
