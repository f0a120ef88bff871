"""A Redis that loses or refuses data is never a silent stall: eviction refused at start, the job's keys
checked at each poll, a fleet without progress stopped, out of memory in one line, one set of targets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.integration.test_distributed_crawl import finish, start_worker, worker_settings
from tests.integration.test_idjob import redis_settings, scrapy
from tests.support.crawl import CrawlResult, run_crawl

redis = pytest.importorskip("redis")


class Paced(GapModel):
    """Every page takes ``delay`` seconds (workers are mid-crawl long enough to damage their job)."""

    def __init__(self, low: int, high: int, delay: float) -> None:
        super().__init__(low, high, set())
        self.delay = delay

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, self.delay)


@pytest.fixture
def make_redis() -> Iterator[Any]:
    """A private redis-server started with more options (``--maxmemory-policy ...``)."""
    from tests.support.redis_server import RedisServer, require_redis_server

    require_redis_server()
    servers: list[RedisServer] = []

    def factory(*extra: str) -> RedisServer:
        server = RedisServer(extra_args=extra).start()
        servers.append(server)
        return server

    yield factory
    for server in servers:
        server.stop()


def no_traceback(result: CrawlResult) -> None:
    assert "Traceback" not in result.stderr, result.stderr[-3000:]


# -- at start: a Redis that may evict keys -------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["distributed", "state"])
def test_a_redis_that_may_evict_keys_is_refused_in_one_line(make_site, make_redis, tmp_path: Path,
                                                            backend: str) -> None:
    server = make_redis("--maxmemory-policy", "allkeys-lru")
    site = make_site(GapModel(0, 100, set()))
    settings: dict[str, Any] = ({"IDCRAWL_DISTRIBUTED": True} if backend == "distributed"
                                else {"IDCRAWL_STATE_BACKEND": "redis"})
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1, "max": 5, "margin": 0},
                       {**settings, "REDIS_URL": server.url, "IDCRAWL_REDIS_JOB": "evict"})
    assert result.returncode != 0
    errors = result.error_lines()
    assert len(errors) == 1, result.stderr[-3000:]
    assert "maxmemory-policy 'allkeys-lru'" in errors[0] and "noeviction" in errors[0]
    no_traceback(result)
    assert site.log == []
    assert redis.Redis.from_url(server.url).keys("idcrawl:{evict}:*") == []


def test_idjob_push_to_a_redis_that_may_evict_keys_is_refused(make_redis, tmp_path: Path) -> None:
    server = make_redis("--maxmemory-policy", "volatile-lru")
    target = tmp_path / "t.json"
    target.write_text(json.dumps({"name": "x", "url": "http://h/n/{id}", "start": 1}))
    pushed = scrapy(tmp_path, "idjob", "push", str(target), settings=redis_settings(server, "evictpush"))
    assert pushed.returncode == 1
    assert pushed.stderr.strip().splitlines() == [pushed.stderr.strip()]
    assert "maxmemory-policy 'volatile-lru'" in pushed.stderr
    assert redis.Redis.from_url(server.url).llen("idcrawl:{evictpush}:feed") == 0


@pytest.mark.parametrize("options", [("--rename-command", "CONFIG", ""),  # unknown command
                                     ("--user", "default", "on", "nopass", "~*", "&*", "+@all", "-config")])  # ACL
def test_a_redis_whose_config_command_is_not_allowed_gets_one_warning(make_site, make_redis, tmp_path: Path,
                                                                      options: tuple[str, ...]) -> None:
    server = make_redis(*options)
    site = make_site(GapModel(0, 100, set()))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1, "max": 5, "margin": 0},
                       worker_settings(server, job="renamed"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["finish_reason"] == "finished"
    warnings = [line for line in result.stderr.splitlines() if "maxmemory-policy" in line]
    assert len(warnings) == 1 and " WARNING: " in warnings[0] and "cannot be read" in warnings[0]
    assert result.ids == [1, 2, 3, 4, 5]


# -- each poll: the job's keys -------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["L:t:asc", "L:t:asc:dec", "unsettled", "specs"])
def test_a_key_of_the_job_deleted_mid_crawl_stops_every_worker_naming_it(
    make_site, redis_server, tmp_path: Path, key: str
) -> None:
    """As ``allkeys-lru`` would: a lane's hash, its outcomes decided ahead of its prefix (the fleet would wait
    for them for ever), the set of unsettled lanes (the job would look finished), the targets."""
    model = Paced(0, 4000, 0.004)
    site = make_site(model)
    args = {"url": site.url(), "start": 1000, "direction": "both", "margin": 5, "name": "t"}
    settings = worker_settings(redis_server, job="lost", IDCRAWL_REDIS_LEASE_TIMEOUT=2)
    # a worker still starting when the key goes is refused at its start (one line, no stats): each worker
    # has its own User-Agent, and the key goes once both asked for pages
    procs = [start_worker(tmp_path / f"w{n}", args, {**settings, "USER_AGENT": f"w{n}"}) for n in range(2)]
    client = redis.Redis.from_url(redis_server.url)
    full = f"idcrawl:{{lost}}:{key}"
    while len(site.ids()) < 100 or not {"w0", "w1"} <= model.agents:  # both workers crawling
        assert all(proc.poll() is None for proc in procs)
    while not client.delete(full):  # the outcomes ahead of the prefix are there only now and then
        assert all(proc.poll() is None for proc in procs), "a worker ended before the key was deleted"
    results = [finish(proc, tmp_path / f"w{n}", timeout=120) for n, proc in enumerate(procs)]
    for result in results:
        assert result.stats["finish_reason"] == "idcrawl_redis_state_lost", result.stderr[-3000:]
        (error,) = result.error_lines()
        assert full in error and "are gone from Redis" in error
        no_traceback(result)
    assert len(set(site.ids())) < 3000  # stopped, not crawled to the end


# -- no progress ---------------------------------------------------------------------------------------------


def hold_the_window(redis_server, site_url: str, job: str) -> None:
    """A "worker" that claims the lane's first ids, never answers and whose heartbeat never ages: nothing is
    missing in Redis, yet no id past its claims can be decided."""
    from idcrawl import default_settings
    from idcrawl.core.targets import parse_target
    from idcrawl.distributed.frontier import RedisFrontier
    from idcrawl.distributed.job import RedisJob

    client = redis.Redis.from_url(redis_server.url)
    ghost = RedisFrontier(RedisJob(client, f"idcrawl:{{{job}}}:"), "ghost", block=64)
    ghost.add_target(parse_target({"url": site_url, "start": 10, "margin": 3, "name": "t"},
                                  {"margin": 10, "window": 128,
                                   "missing_statuses": default_settings.IDCRAWL_MISSING_STATUSES}))
    assert ghost.next().dispatch is not None
    client.zadd(f"idcrawl:{{{job}}}:workers", {"ghost": 2**52})


def test_a_fleet_without_progress_stops_with_its_own_reason(make_site, redis_server, tmp_path: Path) -> None:
    site = make_site(GapModel(0, 1000, set()))
    hold_the_window(redis_server, site.url(), "stall")
    args = {"url": site.url(), "start": 10, "margin": 3, "name": "t"}
    settings = worker_settings(redis_server, job="stall", IDCRAWL_REDIS_LEASE_TIMEOUT=0.5,
                               IDCRAWL_REDIS_NO_PROGRESS_LEASES=3)
    procs = [start_worker(tmp_path / f"w{n}", args, settings) for n in range(2)]
    results = [finish(proc, tmp_path / f"w{n}", timeout=120) for n, proc in enumerate(procs)]
    for result in results:
        assert result.stats["finish_reason"] == "idcrawl_no_progress", result.stderr[-3000:]
        (error,) = result.error_lines()
        assert "no progress in Redis job 'idcrawl:{stall}:'" in error and "t:asc" in error
        no_traceback(result)


def test_a_slow_crawl_is_progress_however_long_each_page_takes(make_site, redis_server, tmp_path: Path) -> None:
    """Pages slower than the no-progress time: the worker waiting for them is busy, so the job goes on."""
    site = make_site(Paced(0, 1000, 1.2))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 10, "max": 12, "margin": 0},
                       worker_settings(redis_server, job="slow", CONCURRENT_REQUESTS=1, IDCRAWL_REDIS_CLAIM_BLOCK=1,
                                       IDCRAWL_REDIS_LEASE_TIMEOUT=0.25, IDCRAWL_REDIS_NO_PROGRESS_LEASES=2))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["finish_reason"] == "finished", result.stderr[-3000:]
    assert result.ids == [10, 11, 12]


# -- out of memory -------------------------------------------------------------------------------------------


def test_redis_out_of_memory_as_a_worker_joins_is_one_line(make_site, make_redis, tmp_path: Path) -> None:
    server = make_redis("--maxmemory", "1", "--maxmemory-policy", "noeviction")
    site = make_site(GapModel(0, 100, set()))
    result = run_crawl(tmp_path, {"url": site.url(), "start": 1, "max": 5, "margin": 0},
                       worker_settings(server, job="oom"))
    assert result.returncode != 0
    errors = result.error_lines()
    assert len(errors) == 1, result.stderr[-3000:]
    assert "is out of memory (maxmemory reached) as this worker joined the job" in errors[0]
    no_traceback(result)
    assert site.log == []


def test_redis_out_of_memory_mid_crawl_stops_the_worker_in_one_line(make_site, redis_server, tmp_path: Path) -> None:
    site = make_site(Paced(0, 4000, 0.004))
    args = {"url": site.url(), "start": 1000, "direction": "both", "margin": 5, "name": "t"}
    proc = start_worker(tmp_path, args, worker_settings(redis_server, job="oomlater", IDCRAWL_REDIS_LEASE_TIMEOUT=20))
    while len(site.ids()) < 50:
        assert proc.poll() is None
    client = redis.Redis.from_url(redis_server.url)
    client.config_set("maxmemory", "1")
    result = finish(proc, tmp_path, timeout=120)
    client.config_set("maxmemory", "0")
    assert result.stats["finish_reason"] == "idcrawl_redis_oom", result.stderr[-3000:]
    (error,) = result.error_lines()
    assert "is out of memory (maxmemory reached) mid-crawl" in error
    assert "intact" not in result.stderr
    no_traceback(result)


# -- a fleet job's targets are one set -----------------------------------------------------------------------


STARTS = {"a": 100, "b": 200, "c": 300}


def job_file(path: Path, site: Any, *names: str) -> Path:
    path.write_text("".join(f'[[targets]]\nname = "{name}"\nurl = "{site.url()}"\nstart = {STARTS[name]}\n'
                            f"margin = 2\nmax = {STARTS[name] + 4}\n\n" for name in names))
    return path


def test_a_worker_whose_targets_differ_from_the_jobs_is_refused_unless_it_merges(
    make_site, redis_server, tmp_path: Path
) -> None:
    site = make_site(GapModel(0, 1000, set()))
    settings = worker_settings(redis_server, job="set")
    for name in ("a", "x", "m"):
        (tmp_path / name).mkdir()
    first = run_crawl(tmp_path / "a", {"job": job_file(tmp_path / "a.toml", site, "a", "b")}, settings)
    assert first.returncode == 0, first.stderr[-3000:]
    sent = len(site.log)
    for names, why in [(("a", "c"), "'c' not in the job; the job's 'b' not among this worker's"),
                       (("a",), "the job's 'b' not among this worker's")]:
        other = run_crawl(tmp_path / "x", {"job": job_file(tmp_path / "x.toml", site, *names)}, settings)
        assert other.returncode != 0
        (error,) = other.error_lines()
        assert f"this worker's targets differ from those of Redis job 'idcrawl:{{set}}:' ({why})" in error
        assert "IDCRAWL_REDIS_MERGE_TARGETS=True" in error
        no_traceback(other)
    assert len(site.log) == sent
    same = run_crawl(tmp_path / "a", {"job": job_file(tmp_path / "a.toml", site, "a", "b")}, settings)
    assert same.returncode == 0 and same.error_lines() == [], same.stderr[-3000:]
    merged = run_crawl(tmp_path / "m", {"job": job_file(tmp_path / "m.toml", site, "a", "c")},
                       {**settings, "IDCRAWL_REDIS_MERGE_TARGETS": True})
    assert merged.returncode == 0, merged.stderr[-3000:]
    assert {(i["target"], i["id"]) for i in merged.items} == {("c", i) for i in range(300, 305)}
    status = scrapy(tmp_path, "idjob", "status", "--json", settings=redis_settings(redis_server, "set"))
    assert status.returncode == 0, status.stderr
    targets = {t["name"]: t for t in json.loads(status.stdout)["targets"]}
    assert {name: (t["url"], t["start"], t["joined"]) for name, t in targets.items()} == {
        "a": (site.url(), 100, "started"), "b": (site.url(), 200, "started"), "c": (site.url(), 300, "added")}
    assert json.loads(status.stdout)["progress"]["outcomes"] == 15  # a, b, then c: 5 ids each
    text = scrapy(tmp_path, "idjob", "status", settings=redis_settings(redis_server, "set")).stdout
    assert "  progress: 15 outcomes recorded, last activity " in text
    assert f"  target a: {site.url()} from 100 asc, max 104, margin 2\n" in text
    assert f"  target c: {site.url()} from 300 asc, max 304, margin 2 (added after the start)\n" in text
