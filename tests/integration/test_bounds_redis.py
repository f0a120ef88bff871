"""Bounds in a fleet: an id page redirected to another host, two workers on one job in Redis."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_distributed_crawl import run_fleet, worker_settings
from tests.support.hostile_site import HostileSite

pytest.importorskip("redis")


def test_a_fleet_follows_a_redirect_to_another_host_only_where_the_target_allows_it(
    redis_server, tmp_path: Path
) -> None:
    with HostileSite(range(1, 10)) as other:
        stay_site = HostileSite(range(1, 10), redirects={4: other.url().format(id=4)})
        go_site = HostileSite(range(1, 10), redirects={4: other.url().format(id=5)})
        with stay_site, go_site:
            job = tmp_path / "job.toml"
            job.write_text(f"""
[defaults]
start = 1
max = 9
margin = 0

[[targets]]
name = "stay"
url = "{stay_site.url()}"

[[targets]]
name = "go"
url = "{go_site.url()}"
follow_redirects = "any"
""")
            results = run_fleet(tmp_path, {"job": job}, worker_settings(redis_server, job="bounds"), workers=2)
        assert "/notice/4" not in other.paths and other.paths.count("/notice/5") == 1
    items = {(item["target"], item["id"]): item for result in results for item in result.items}
    assert sorted(items) == sorted([("go", i) for i in range(1, 10)] + [("stay", i) for i in range(1, 10) if i != 4])
    assert items[("go", 4)]["url"] == go_site.url().format(id=4)
    assert items[("go", 4)]["final_url"] == other.url().format(id=5)
    assert sum(result.stats.get("idcrawl/outcome/redirected_offsite", 0) for result in results) == 1
    assert sum(result.stats.get("idcrawl/missing", 0) for result in results) == 1
