"""Bad input with the state or the job in Redis (a real redis-server): one clear line, no request."""

from __future__ import annotations

from pathlib import Path

import pytest

from idcrawl.core.clock import parse_time
from idcrawl.demo.site import DemoModel
from tests.crawl.test_input_errors import MAX_ID, _assert_refused
from tests.support.crawl import run_crawl


def test_a_distributed_job_refuses_ids_its_lua_numbers_cannot_hold(make_site, redis_server, tmp_path: Path) -> None:
    site = make_site()
    result = run_crawl(tmp_path, {"url": site.url(), "start": 2**53},
                       {"IDCRAWL_DISTRIBUTED": True, "REDIS_URL": redis_server.url, "IDCRAWL_REDIS_IDLE_TIMEOUT": 1})
    _assert_refused(result, f"start={2**53}: is above the largest id a distributed job can hold (2**53-1")
    assert site.log == []


@pytest.mark.parametrize("backend", ["none", "redis"])
def test_overlapping_targets_at_the_largest_id_without_state_and_in_redis(make_site, redis_server, tmp_path: Path,
                                                                          backend: str) -> None:
    site = make_site(DemoModel(low=MAX_ID - 10, high=2**65, gap_percent=0))
    job = tmp_path / "job.toml"
    job.write_text(f"[[targets]]\nname = 'a'\nurl = '{site.url()}'\nstart = {MAX_ID - 4}\n"
                   f"[[targets]]\nname = 'b'\nurl = '{site.url()}'\nstart = {MAX_ID - 2}\ndirection = 'both'\n")
    settings = ({"IDCRAWL_STATE": False} if backend == "none"
                else {"IDCRAWL_STATE_BACKEND": "redis", "REDIS_URL": redis_server.url})
    result = run_crawl(tmp_path, {"job": job}, settings)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and result.error_lines() == []
    assert result.ids == list(range(MAX_ID - 10, MAX_ID + 1))




def test_a_single_process_crawl_keeps_its_tail_schedule_in_redis(make_site, redis_server, tmp_path: Path) -> None:
    redis = pytest.importorskip("redis")
    from idcrawl.state.redis import RedisStateStore

    site = make_site(DemoModel(low=1000, high=1009, gap_percent=0))
    settings = {"IDCRAWL_STATE_BACKEND": "redis", "REDIS_URL": redis_server.url, "IDCRAWL_NOW": "2026-01-12T07:00:00Z"}
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1000, "margin": 3, "name": "reg"}, settings)
    assert result.returncode == 0, result.stderr[-3000:]
    prefixes = {key.decode().split("tails")[0] for key in redis.Redis.from_url(redis_server.url).keys("*tails")}
    assert len(prefixes) == 1
    store = RedisStateStore(redis.Redis.from_url(redis_server.url), prefixes.pop(), read_only=True)
    tail = store.tail_schedules()["reg"]
    assert (tail.last_crawled, tail.last_found) == (parse_time("2026-01-12T07:00:00Z"), 1009)
    site.log.clear()
    again = run_crawl(tmp_path, {"url": site.url(), "start": 1000, "margin": 3, "name": "reg", "resume": "due"},
                      settings)
    assert again.returncode == 0 and site.log == []  # not due a moment later
