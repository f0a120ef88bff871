"""A distributed worker's log lines (a real redis-server): the single-process lines, with its own counts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import GapModel
from tests.crawl.test_crawl_talk import GAPS, PROJECT, log_lines
from tests.support.crawl import run_crawl
from tests.support.reference import lane_truth


def test_a_distributed_worker_logs_the_same_lines_with_its_own_counts(
    make_site, redis_server, tmp_path: Path
) -> None:
    pytest.importorskip("redis")
    site = make_site(GapModel(1000, 1299, GAPS))
    args = {"url": site.url(), "start": 1150, "margin": 4, "name": "up"}
    # the second crawl joins the first one's run: its grace (one lease after the run started) must outlast
    # the first crawl on a loaded machine
    settings = {"IDCRAWL_DISTRIBUTED": True, "REDIS_URL": redis_server.url, "IDCRAWL_REDIS_JOB": "talk",
                "IDCRAWL_REDIS_POLL_INTERVAL": 0.1, "IDCRAWL_REDIS_LEASE_TIMEOUT": 300}
    result = run_crawl(tmp_path, args, settings, project_defaults=PROJECT)
    assert result.returncode == 0, result.stderr[-3000:]
    messages = [m for _, name, _, m in log_lines(result.stderr) if name == "idcrawl.extensions.progress"]
    assert re.fullmatch(r"plan: 1 target, 1 lane; state in Redis job '.*talk.*' \(worker .+\)", messages[0])
    assert messages[1] == f"plan up: {site.url()}, margin 4: asc 1150 -> no max"
    found, cut = lane_truth(site.model.exists, 1150, 1, None, 4)
    [summary] = [m for m in messages if m.startswith("summary up: ")]
    assert summary.startswith(f"summary up: found {len(found)}, missing {cut - 1150 + 1 - len(found)}, failed 0 "
                              "by this worker, ")
    assert f"; asc cut at {cut} after 4 misses (last found {found[-1]})" in summary

    again = run_crawl(tmp_path, args, settings, project_defaults=PROJECT)  # the job is finished in Redis
    assert again.returncode == 0, again.stderr[-3000:]
    assert "plan: 1 target, 1 lane, 1 resumed; state in Redis job" in again.stderr
    # the default plans as bound, once for the fleet: started within its run, this worker joins that plan
    assert "; resumed (Redis job, resume=auto): joined the fleet's resume in progress" in again.stderr
