"""A single-process crawl that keeps its durable state in Redis (IDCRAWL_STATE_BACKEND = "redis")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import GapModel
from tests.crawl.test_kill_soak import foreign_job_appends
from tests.integration.test_idjob import scrapy
from tests.support.crawl import run_crawl
from tests.support.reference import target_truth

redis = pytest.importorskip("redis")

GAPS = {1010, 1011, 1040, 1041, 1042, 1100, 1101, 1102, 1230, 1231}
ARGS = {"start": 1000, "direction": "both", "margin": 5, "min": 900, "name": "reg"}


def test_a_stopped_crawl_resumes_from_its_state_in_redis_and_idplan_reads_it(
    make_site, redis_server, tmp_path: Path
) -> None:
    model = GapModel(900, 1299, GAPS)
    site = make_site(model)
    settings = {"IDCRAWL_STATE_BACKEND": "redis", "REDIS_URL": redis_server.url, "IDCRAWL_REDIS_JOB": "single"}
    first = run_crawl(tmp_path, {**ARGS, "url": site.url()}, {**settings, "CLOSESPIDER_PAGECOUNT": 60},
                      output="run1.jsonl")
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stats["finish_reason"] == "closespider_pagecount"
    # the state store's client is counted like a worker's: its connection check and every commit
    assert first.stats["idcrawl/redis/commands/ping"] == 1 and first.stats["idcrawl/redis/calls"] > 2
    assert not (tmp_path / ".scrapy" / "idcrawl" / "idseq.sqlite").exists(), "the state went to a file"
    fetched_first = set(site.ids())
    site.log.clear()
    second = run_crawl(tmp_path, {**ARGS, "url": site.url(), "resume": "bound"}, settings, output="run2.jsonl")
    assert second.returncode == 0, second.stderr[-3000:]
    assert not fetched_first & set(site.ids()) & {i["id"] for i in first.items}, "a found id was fetched again"
    found = sorted({i["id"] for i in first.items + second.items})
    assert found == target_truth(model.exists, 1000, "both", 5, lo=900)
    plan = scrapy(tmp_path, "idplan", "--json", settings=settings)
    assert plan.returncode == 0, plan.stderr
    document = json.loads(plan.stdout)
    (target,) = document["targets"]
    assert target["last_run"]["finish_reason"] == "finished"
    lanes = {lane["key"]: lane for lane in target["lanes"]}
    assert lanes["reg:asc"]["cut_reason"] == "margin" and lanes["reg:asc"]["cut_at"] == 1304  # past max 1299
    assert lanes["reg:desc"]["bound"] is None  # reached min


def test_a_state_backend_name_that_does_not_exist_is_one_error_line(make_site, tmp_path: Path) -> None:
    site = make_site(GapModel(900, 1299, GAPS))
    result = run_crawl(tmp_path, {**ARGS, "url": site.url()}, {"IDCRAWL_STATE_BACKEND": "mongo"})
    assert result.returncode != 0
    assert "IDCRAWL_STATE_BACKEND='mongo': must be one of sqlite, redis" in result.error_lines()[0]
    assert site.log == []


def test_a_foreign_job_appending_to_the_feed_is_skipped_with_the_feed_marks_in_redis(
    make_site, redis_server, tmp_path: Path
) -> None:
    backend = {"IDCRAWL_STATE_BACKEND": "redis", "REDIS_URL": redis_server.url}
    foreign_job_appends(make_site, tmp_path, {**backend, "IDCRAWL_REDIS_JOB": "a"},
                        {**backend, "IDCRAWL_REDIS_JOB": "b"})
