"""Sentinel failover: a fleet's Redis primary killed mid-crawl and replaced by its replica.

A primary, a replica and three sentinels on loopback (tests/support/sentinels.py); two workers find the
primary through the sentinels (IDCRAWL_REDIS_SENTINELS). The job goes on on the promoted replica and
finishes; every id of the site's ground truth is in the union of the workers' items. docs/distributed.md,
"Sentinel and failover".
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.integration.test_distributed_crawl import KILL_GAPS, finish, start_worker
from tests.integration.test_idjob import scrapy
from tests.support.crawl import read_items
from tests.support.redis_server import require_redis_server
from tests.support.reference import target_truth
from tests.support.sentinels import FAST_SYNC, SERVICE, SentinelGroup

redis = pytest.importorskip("redis")


@pytest.fixture
def sentinels(tmp_path: Path):
    require_redis_server()
    group = SentinelGroup(tmp_path / "sentinels")
    try:
        yield group.start()
    finally:
        group.stop()


class PacedModel(GapModel):
    """``delay`` s per page: 0.5 s until both workers joined (one may take many seconds to start on a loaded
    machine: the other must not finish the job alone meanwhile), 50 ms until the failover, then 5 ms."""

    delay = 0.5

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, self.delay)


def fleet_settings(group: SentinelGroup, job: str, **extra: Any) -> dict[str, Any]:
    return {
        "IDCRAWL_DISTRIBUTED": True,
        "IDCRAWL_REDIS_SENTINELS": group.addresses,
        "IDCRAWL_REDIS_SENTINEL_SERVICE": SERVICE,
        "IDCRAWL_REDIS_JOB": job,
        "IDCRAWL_REDIS_POLL_INTERVAL": 0.1,
        "IDCRAWL_REDIS_CLAIM_BLOCK": 2,
        # the failover takes a few seconds: a worker waits for Redis that long, and keeps its claims
        "IDCRAWL_REDIS_LEASE_TIMEOUT": 30.0,
        "IDCRAWL_STATE_COMMIT_ITEMS": 10,
        "IDCRAWL_STATE_COMMIT_INTERVAL": 0.3,
        "CONCURRENT_REQUESTS": 4,
        **extra,
    }


def wait_for(condition, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def crawl_through_failover(make_site, group: SentinelGroup, tmp_path: Path, *, lose_writes: bool,
                           **settings: Any) -> tuple[list[int], list[Any], list[int]]:
    """Two workers; the primary SIGKILLed once both joined and 80 ids were fetched (``lose_writes``: with its replica cut
    off first, so that the writes of the next 40 fetches never reach it); returns the ground truth, the
    workers' results and the ids of the items in their feeds."""
    model = PacedModel(900, 1400, KILL_GAPS)
    site = make_site(model)
    args = {"url": site.url(), "start": 1000, "direction": "both", "margin": 5, "name": "reg"}
    config = fleet_settings(group, "failover", **settings)
    procs = [start_worker(tmp_path / f"w{n}", args, config) for n in range(2)]
    try:
        primary = group.client(group.primary.port)
        wait_for(lambda: primary.zcard("idcrawl:{failover}:workers") == 2)
        model.delay = 0.05
        wait_for(lambda: len(site.ids()) >= 80)
        if lose_writes:
            group.replica.proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
            primary.client_kill_filter(_type="replica")
            cut_at = len(site.ids())
            wait_for(lambda: len(site.ids()) >= cut_at + 40)
            written = int(primary.info("replication")["master_repl_offset"])
        group.kill_primary()
        if lose_writes:
            group.replica.proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
        group.wait_failover()
        if lose_writes:  # the promoted replica's history ends before what the old primary had written
            kept = int(group.client(group.replica.port).info("replication")["second_repl_offset"]) - 1
            assert 0 < kept < written
        model.delay = 0.005
        results = [finish(proc, tmp_path / f"w{n}") for n, proc in enumerate(procs)]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "finished"
    ids = [i["id"] for n in range(2) for i in read_items(tmp_path / f"w{n}" / "items.jsonl")]
    return target_truth(model.exists, 1000, "both", 5), results, ids


def test_writes_the_replica_missed_are_detected_and_their_ids_fetched_again(make_site, sentinels, tmp_path) -> None:
    """No WAIT: the replica misses the writes of ~40 fetches (outcomes, claims, acknowledgements); once
    promoted, each worker sees another server answer and reconciles: nothing is skipped (an item may be
    written twice: at least once)."""
    truth, results, ids = crawl_through_failover(make_site, sentinels, tmp_path, lose_writes=True)
    assert sorted(set(ids)) == truth
    for result in results:
        assert result.stats["idcrawl/redis/failovers"] == 1, result.stderr[-3000:]
        assert "another Redis server answers now" in result.stderr


def test_with_wait_a_failover_loses_no_write_and_writes_no_item_twice(make_site, sentinels, tmp_path) -> None:
    """WAIT 1 with every write that commits: what a worker went on from is on the replica when the primary
    dies, so the job goes on where it was, and each id's item is written once."""
    truth, results, ids = crawl_through_failover(make_site, sentinels, tmp_path, lose_writes=False,
                                                 IDCRAWL_REDIS_WAIT_REPLICAS=1,
                                                 IDCRAWL_REDIS_WAIT_TIMEOUT=0.5)
    assert sorted(ids) == truth, f"twice: {sorted(i for i, n in Counter(ids).items() if n > 1)}"
    for result in results:
        assert result.stats["idcrawl/redis/failovers"] == 1, result.stderr[-3000:]
        assert result.stats.get("idcrawl/redis/commands/wait", 0) > 0
    # the commands find the promoted primary through the sentinels too
    settings = {"IDCRAWL_DISTRIBUTED": True, "IDCRAWL_REDIS_SENTINELS": sentinels.addresses,
                "IDCRAWL_REDIS_JOB": "failover"}
    status = scrapy(tmp_path, "idjob", "status", "--json", settings=settings)
    assert status.returncode == 0, status.stderr
    job = json.loads(status.stdout)
    assert job["finished"] is True and job["workers"] == []
    unknown = scrapy(tmp_path, "idjob", "status", settings={**settings, "IDCRAWL_REDIS_SENTINEL_SERVICE": "nosuch"})
    assert unknown.returncode != 0
    assert "service 'nosuch'" in unknown.stderr and "No master found for 'nosuch'" in unknown.stderr


def test_a_bad_sentinel_setting_is_one_line(tmp_path: Path) -> None:
    from scrapy.settings import Settings

    from idcrawl.distributed.connection import RedisUnavailable, connect

    bad = scrapy(tmp_path, "idjob", "status", settings={"IDCRAWL_DISTRIBUTED": True, "IDCRAWL_REDIS_SENTINELS": "a:b"})
    assert bad.returncode != 0
    lines = [line for line in bad.stderr.splitlines() if "IDCRAWL_REDIS_SENTINELS" in line]
    assert len(lines) == 1 and "IDCRAWL_REDIS_SENTINELS='a:b': must be host:port addresses" in lines[0], bad.stderr
    for value in ("127.0.0.1", "127.0.0.1:0", "127.0.0.1:26379,:26380", "127.0.0.1:70000"):
        with pytest.raises(RedisUnavailable, match=f"IDCRAWL_REDIS_SENTINELS={value!r}: must be host:port addresses"):
            connect(Settings({"IDCRAWL_REDIS_SENTINELS": value}))

def test_a_lane_settled_in_writes_a_failover_lost_is_walked_again(tmp_path: Path) -> None:
    """The piece a worker runs after a failover (RedisWorker._after_failover), on a replica promoted while
    it lagged: the outcomes that settled a lane are lost, the ids of their claims still this worker's in
    the job. Without reading settled lanes again, nothing gives those ids back (this worker's heartbeat
    keeps them) and the job never finishes."""
    from idcrawl.core.lanes import Outcome
    from idcrawl.distributed.sentinel import primary_id
    from tests.integration.test_distributed_frontier import frontier, target
    from tests.support.redis_server import RedisServer

    require_redis_server()
    primary = RedisServer(extra_args=FAST_SYNC).start()
    replica = RedisServer(extra_args=("--replicaof", "127.0.0.1", str(primary.port)))
    try:
        replica.start()
        replica_client = redis.Redis.from_url(replica.url)
        deadline = time.monotonic() + 30
        while replica_client.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica never synced"
            time.sleep(0.02)
        worker = frontier(primary, "w1", block=3, adaptive=False)
        worker.add_target(target(direction="asc", margin=2, window=8))
        taken = [worker.next().dispatch for _ in range(6)]
        assert [d.id for d in taken if d is not None] == [1000, 1001, 1002, 1003, 1004, 1005]
        for id_ in (1000, 1001, 1002, 1003):
            worker.record("reg:asc", id_, Outcome.FOUND, ("reg:asc", id_, [id_]))
        client = worker.job.client
        assert client.wait(1, 3000) == 1  # the replica has all of it ...
        old = primary_id(client, worker.job.keys.workers)
        replica_client.replicaof("NO", "ONE")  # ... and no more: the next writes are lost with the primary
        for id_ in (1004, 1005):
            worker.record("reg:asc", id_, Outcome.MISSING)
        worker.poll()
        assert worker.lanes["reg:asc"].settled and worker.unsettled() == []
        # the failover: the client's next connection goes to the promoted replica
        client.connection_pool.connection_kwargs["port"] = replica.port
        client.connection_pool.reset()
        assert primary_id(client, worker.job.keys.workers) != old
        assert worker.give_back_unknown() == 0  # the lane looks settled: 1004, 1005 would stay this worker's
        assert worker.reopen_settled() == 1
        assert worker.give_back_unknown() == 2
        worker.poll()
        again = [worker.next().dispatch, worker.next().dispatch]
        assert sorted(d.id for d in again if d is not None) == [1004, 1005]
        for d in again:
            assert d is not None
            worker.record(d.lane, d.id, Outcome.MISSING)
        worker.poll()
        assert worker.lanes["reg:asc"].settled and worker.finished
        assert replica_client.hlen("t:{job}:L:reg:asc:own") == 0
    finally:
        replica.stop()
        primary.stop()


def test_the_primary_gets_redis_urls_credentials_and_the_sentinels_their_own() -> None:
    from scrapy.settings import Settings

    from idcrawl.distributed.connection import describe
    from idcrawl.distributed.sentinel import sentinel_client

    settings = Settings({"IDCRAWL_REDIS_SENTINELS": "10.0.0.1:26379,[::1]:26380", "IDCRAWL_REDIS_SENTINEL_SERVICE": "jobs",
                         "IDCRAWL_REDIS_SENTINEL_PASSWORD": "sentinel-pw", "REDIS_URL": "redis://bob:primary-pw@ignored:1/3",
                         "REDIS_PARAMS": {"socket_timeout": 7}})
    client = sentinel_client(settings)  # no call yet: nothing is reached
    assert client is not None
    pool: Any = client.connection_pool
    primary = pool.connection_kwargs
    assert (primary["username"], primary["password"], primary["db"], primary["socket_timeout"]) == (
        "bob", "primary-pw", 3, 7)
    assert "host" not in primary and "port" not in primary and pool.service_name == "jobs"
    sentinels = [s.connection_pool.connection_kwargs for s in pool.sentinel_manager.sentinels]
    assert [(s["host"], s["port"]) for s in sentinels] == [("10.0.0.1", 26379), ("::1", 26380)]
    assert all(s["password"] == "sentinel-pw" and s["socket_timeout"] == 7 for s in sentinels)
    assert describe(settings) == "IDCRAWL_REDIS_SENTINELS='10.0.0.1:26379,[::1]:26380' (service 'jobs')"
    assert sentinel_client(Settings({"REDIS_URL": "redis://localhost:6379/0"})) is None
