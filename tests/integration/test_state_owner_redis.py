"""Issue 27, item 2, with the Redis state backend: one process per state through an owner key with a
lease (``IDCRAWL_STATE_LEASE``). A second process is refused in one line naming the holder and sends no
request; the lease is renewed while the crawl runs; a killed holder's key is taken over at once on the
same machine, and once its lease ends when it names another machine."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.integration.test_idjob import scrapy
from tests.support.crawl import read_items, run_crawl
from tests.support.gated import SECOND_AGENT, START, GatedModel, gate_args, held_crawl, refused_run
from tests.support.reference import target_truth

redis = pytest.importorskip("redis")

KEY = "idcrawl:{single}:owner"


def _settings(redis_server, lease: float = 1.0) -> dict:  # type: ignore[no-untyped-def]
    return {"IDCRAWL_STATE_BACKEND": "redis", "REDIS_URL": redis_server.url, "IDCRAWL_REDIS_JOB": "single",
            "IDCRAWL_STATE_LEASE": lease}


def _until(condition, what: str, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


def test_a_second_process_is_refused_while_the_owner_renews_its_lease(make_site, redis_server, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_server.url)
    model = GatedModel()
    site = make_site(model)
    settings = _settings(redis_server, lease=5.0)
    first = held_crawl(tmp_path, site, model, settings)
    try:
        assert json.loads(client.get(KEY))["pid"] == first.pid
        # renewed while the crawl runs: the key's time to live goes up again (renewed every third of the lease)
        ttls = [client.pttl(KEY)]
        _until(lambda: ttls.append(client.pttl(KEY)) or ttls[-1] > ttls[-2], "the lease is renewed")
        second = refused_run(tmp_path, site, settings, output="second.jsonl")
        plan = scrapy(tmp_path, "idplan", settings=settings)  # reading takes no owner key
        assert json.loads(client.get(KEY))["pid"] == first.pid
    finally:
        model.opened.set()
    first.wait(180)
    assert first.returncode == 0, (tmp_path / "first.log").read_text()[-3000:]
    assert second.returncode != 0
    errors = second.error_lines()
    assert len(errors) == 1, second.stderr[-3000:]
    assert "Redis state 'idcrawl:{single}:' is in use by another crawl" in errors[0], errors[0]
    assert f"held by pid {first.pid} on host " in errors[0] and f"owner key '{KEY}'" in errors[0], errors[0]
    assert SECOND_AGENT not in model.agents, "the refused crawl sent a request"
    assert plan.returncode == 0, plan.stderr
    ids = [item["id"] for item in read_items(tmp_path / "items.jsonl")]
    assert sorted(ids) == target_truth(model.exists, START, "both", 10)
    assert not client.exists(KEY), "the owner key was not released at close"


def test_the_key_of_a_killed_crawl_of_this_machine_is_taken_over_at_once(
    make_site, redis_server, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    model = GatedModel()
    site = make_site(model)
    settings = _settings(redis_server, lease=300.0)  # long: only the dead pid lets the next run in
    first = held_crawl(tmp_path, site, model, settings)
    first.kill()  # SIGKILL: the key stays until its lease ends, but names a dead process of this machine
    first.wait(60)
    model.opened.set()
    assert client.pttl(KEY) > 60_000
    again = run_crawl(tmp_path, {**gate_args(site), "resume": "bound"}, settings, output="again.jsonl")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"its last holder (pid {first.pid} on host " in again.stderr
    found = {item["id"] for item in read_items(tmp_path / "items.jsonl")} | set(again.ids)
    assert sorted(found) == target_truth(model.exists, START, "both", 10)
    assert not client.exists(KEY), "the owner key was not released at close"


def test_a_key_left_by_another_machine_refuses_until_its_lease_ends(make_site, redis_server, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_server.url)
    model = GatedModel()
    model.opened.set()
    site = make_site(model)
    settings = _settings(redis_server)
    # a holder on another machine, killed: its process cannot be checked from here, only its lease ends
    left = {"pid": 4242, "host": "elsewhere", "since": "2026-11-27T20:00:00Z", "worker": "elsewhere:4242:ab12cd34:ffff"}
    client.set(KEY, json.dumps(left), px=600_000)
    refused = refused_run(tmp_path, site, settings)
    assert refused.returncode != 0
    (error,) = refused.error_lines()
    assert "held by pid 4242 on host elsewhere, since 2026-11-27T20:00:00Z; its lease ends in" in error, error
    assert model.agents == []
    client.pexpire(KEY, 100)  # the rest of its lease runs out (no wall-clock wait as long as a lease)
    _until(lambda: not client.exists(KEY), "the lease ends")
    after = run_crawl(tmp_path, gate_args(site), settings)
    assert after.returncode == 0, after.stderr[-3000:]
    assert after.ids == target_truth(model.exists, START, "both", 10)


def test_a_fleet_worker_and_a_single_process_crawl_of_one_job_refuse_each_other(
    make_site, redis_server, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    model = GatedModel()
    site = make_site(model)
    settings = _settings(redis_server, lease=300.0)
    first = held_crawl(tmp_path, site, model, settings)
    try:
        fleet = {"IDCRAWL_DISTRIBUTED": True, "REDIS_URL": redis_server.url, "IDCRAWL_REDIS_JOB": "single"}
        worker = refused_run(tmp_path, site, fleet, output="worker.jsonl")
    finally:
        model.opened.set()
    first.wait(180)
    assert first.returncode == 0, (tmp_path / "first.log").read_text()[-3000:]
    assert worker.returncode != 0
    (error,) = worker.error_lines()
    assert "Redis job 'idcrawl:{single}:' is in use by a single-process crawl" in error, error
    assert f"held by pid {first.pid} on host " in error, error
    assert SECOND_AGENT not in model.agents
    # and the other way round: a live worker of the fleet (a fresh heartbeat) refuses a single-process crawl;
    # the heartbeat is dated a while ahead so that a slow start of the crawl cannot make it stale
    seconds, micros = client.time()
    client.zadd("idcrawl:{single}:workers", {"elsewhere:77:ab12cd34:ffff": seconds * 1000 + micros // 1000 + 600_000})
    single = refused_run(tmp_path, site, settings, output="single.jsonl")
    assert single.returncode != 0
    (error,) = single.error_lines()
    assert "Redis state 'idcrawl:{single}:' is in use by 1 live worker(s) of a distributed job" in error, error
    assert "elsewhere:77:ab12cd34:ffff" in error
    assert not client.exists(KEY), "the refused crawl kept the owner key"
    assert SECOND_AGENT not in model.agents


def test_a_crawl_whose_owner_key_another_process_took_stops_and_commits_nothing_more(
    make_site, redis_server, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    model = GatedModel()
    site = make_site(model)
    first = held_crawl(tmp_path, site, model, _settings(redis_server, lease=3.0))
    try:
        # as if its lease had run out while it stalled, and another process had taken the key
        other = {"pid": 4242, "host": "elsewhere", "since": "2026-11-27T20:00:00Z", "worker": "elsewhere:4242:ab:ffff"}
        client.set(KEY, json.dumps(other))
        runs_before = client.llen("idcrawl:{single}:runs")
        _until(lambda: b"another process took it" in (tmp_path / "first.log").read_bytes(), "the crawl sees it")
    finally:
        model.opened.set()
    first.wait(180)
    log = (tmp_path / "first.log").read_text()
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["finish_reason"] == "idcrawl_state_lock_lost", log[-3000:]
    assert client.llen("idcrawl:{single}:runs") == runs_before, "the run's end was recorded in another's state"
    assert json.loads(client.get(KEY))["pid"] == 4242, "the stopped crawl deleted the new holder's key"


def test_idjob_clean_keeps_a_job_a_single_process_crawl_holds(redis_server, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_server.url)
    holder = {"pid": 4242, "host": "elsewhere", "since": "2026-11-27T20:00:00Z", "worker": "elsewhere:4242:ab:ffff"}
    client.set(KEY, json.dumps(holder), px=600_000)
    client.hset("idcrawl:{single}:targets", "reg", "{}")
    settings = _settings(redis_server)
    kept = scrapy(tmp_path, "idjob", "clean", settings=settings)
    assert kept.returncode == 1
    assert kept.stderr.strip() == ("idjob: error: 'idcrawl:{single}:' is in use by a single-process crawl (held by "
                                   "pid 4242 on host elsewhere, since 2026-11-27T20:00:00Z); stop it or give --force")
    assert client.exists("idcrawl:{single}:targets")
    cleaned = scrapy(tmp_path, "idjob", "clean", "--force", settings=settings)
    assert cleaned.returncode == 0, cleaned.stderr
    assert client.keys("idcrawl:{single}:*") == []
