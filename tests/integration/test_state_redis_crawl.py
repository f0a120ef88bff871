"""A single-process crawl that keeps its durable state in Redis (IDCRAWL_STATE_BACKEND = "redis")."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.crawl.test_kill_soak import foreign_job_appends
from tests.integration.test_distributed_crawl import finish, start_worker
from tests.integration.test_idjob import scrapy
from tests.support.crawl import CrawlResult, run_crawl
from tests.support.redis_server import RedisServer
from tests.support.reference import target_truth

redis = pytest.importorskip("redis")

GAPS = {1010, 1011, 1040, 1041, 1042, 1100, 1101, 1102, 1230, 1231}
ARGS = {"start": 1000, "direction": "both", "margin": 5, "min": 900, "name": "reg"}


def test_a_stopped_crawl_resumes_from_its_state_in_redis_and_idplan_reads_it(
    make_site, redis_server, tmp_path: Path
) -> None:
    model = GapModel(900, 1299, GAPS)
    site = make_site(model)
    settings = {"IDCRAWL_STATE_BACKEND": "redis", **redis_server.settings, "IDCRAWL_REDIS_JOB": "single"}
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


# -- a Redis that fails the state's writes mid-crawl ---------------------------------------------------------


class _Paced(GapModel):
    """Every page takes a few ms: the crawl is mid-way long enough for Redis to fail under it."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, 0.004)


def _state_settings(server: Any) -> dict[str, Any]:
    return {"IDCRAWL_STATE_BACKEND": "redis", "REDIS_URL": server.url, "IDCRAWL_REDIS_JOB": "single"}


def _mid_crawl(tmp_path: Path, site: Any, server: Any, fault: Callable[[], None]) -> CrawlResult:
    """A crawl with its state in Redis at ``server``; ``fault()`` once it has fetched 50 pages."""
    workdir = tmp_path / "run1"
    proc = start_worker(workdir, {**BIG_ARGS, "url": site.url()}, _state_settings(server))
    deadline = time.monotonic() + 120
    while len(site.ids()) < 50:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the crawl did not start"
        time.sleep(0.01)
    fault()
    return finish(proc, workdir, timeout=120)


BIG_ARGS = {"start": 1000, "direction": "both", "margin": 5, "name": "reg"}


def _resumed(tmp_path: Path, site: Any, server: Any, model: GapModel, first: CrawlResult) -> None:
    """The same command again resumes: the union of both runs' feeds is the site's truth."""
    again = run_crawl(tmp_path / "run1", {**BIG_ARGS, "url": site.url()}, _state_settings(server),
                      output="run2.jsonl")
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stats["finish_reason"] == "finished"
    found = sorted({i["id"] for i in first.items + again.items})
    assert found == target_truth(model.exists, 1000, "both", 5, lo=0)


def test_redis_out_of_memory_mid_crawl_is_one_line_and_a_rerun_resumes(make_site, tmp_path: Path) -> None:
    server = RedisServer(extra_args=("--maxmemory-policy", "noeviction")).start()
    try:
        model = _Paced(0, 3999, {1500, 1501, 2400})
        site = make_site(model)
        client = redis.Redis.from_url(server.url)
        result = _mid_crawl(tmp_path, site, server, lambda: client.config_set("maxmemory", "1"))
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "idcrawl_redis_oom", result.stderr[-3000:]
        assert result.returncode == 71
        (error,) = result.error_lines()
        assert "out of memory" in error and "idcrawl:{single}:" in error, error
        assert "give Redis memory (maxmemory)" in error
        client.config_set("maxmemory", "0")
        _resumed(tmp_path, site, server, model, result)
    finally:
        server.stop()


def test_redis_stopped_mid_crawl_is_one_line_and_a_rerun_resumes(make_site, tmp_path: Path) -> None:
    server = RedisServer(persistent=True).start()  # its data survives the stop
    try:
        model = _Paced(0, 3999, {1500, 1501, 2400})
        site = make_site(model)

        def stop() -> None:
            assert server.proc is not None
            server.proc.terminate()
            server.proc.wait(timeout=30)

        result = _mid_crawl(tmp_path, site, server, stop)
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "idcrawl_redis_unavailable", result.stderr[-3000:]
        assert result.returncode == 69
        (error,) = result.error_lines()
        assert "Redis does not answer" in error and "start Redis again" in error, error
        server.start(server.port)
        _resumed(tmp_path, site, server, model, result)
    finally:
        server.stop()
