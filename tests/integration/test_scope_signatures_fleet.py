"""Signatures per crawl profile in a fleet (issue 31): two workers of one Redis job harvest the pages of
two crawl profiles, one with ``signature = "text"`` and the clock dropped, one without; every item's
``checksum`` follows its own profile's keys whichever worker fetched it, as in one process
(``tests/crawl/test_scope_signatures_crawl.py``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.crawl.test_scope_signatures_crawl import GRAPH, job
from tests.integration.test_distributed_crawl import run_fleet, worker_settings
from tests.support.linkgraph import LinkGraphSite, resolver_settings

pytest.importorskip("redis")


def test_each_page_of_a_fleet_gets_its_crawl_profiles_signature(redis_server, tmp_path: Path) -> None:
    site = LinkGraphSite(GRAPH, clock=True).start()
    try:
        path = job(tmp_path, site)
        results = run_fleet(tmp_path, {"job": path},
                            {**worker_settings(redis_server, job="sigs"), **resolver_settings(["a.test", "b.test"])},
                            workers=2)
    finally:
        site.stop()
    items = [item for result in results for item in result.items]
    assert sorted((item["target"], item["url"].split(f":{site.port}")[-1]) for item in items) == [
        (target, path) for target in "ab" for path in ("/", "/1", "/2")]  # each page once across the fleet
    for item in items:
        page = f"http://{item['target']}.test{item['url'].split(f':{site.port}')[-1]}"
        text = hashlib.sha1(" ".join([page, *GRAPH[page]]).encode()).hexdigest()
        if item["target"] == "b":  # "steady": the visible text less the clock
            assert item["checksum"] == text, item
        else:  # "plain": the SHA-1 of the body (the markup and the clock in it)
            assert item["checksum"] != text and len(item["checksum"]) == 40, item
