"""Workers, commands and the Redis state backend on a three-master Redis Cluster (``IDCRAWL_REDIS_CLUSTER``).

The cluster (tests/support/redis_cluster.py) is started once per test process; ``REDIS_URL`` names
one node. The fleet's exactness tests of test_distributed_crawl.py, the commands of test_idjob.py
and the Redis state backend's resume of test_state_redis_crawl.py (with ``idplan``) run here as they
run on one redis-server; then every key of the job is on the master of its hash tag's slot. Jobs of
other names spread over the three masters; the connection's checks and its one-line errors.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from idcrawl.distributed.connection import RedisUnavailable, check_no_eviction, connect, job_prefix
from tests.integration import test_distributed_crawl as fleet
from tests.integration import test_idjob as idjob
from tests.integration import test_state_redis_crawl as state
from tests.support.redis_cluster import MASTERS

redis = pytest.importorskip("redis")
from redis.cluster import RedisCluster  # noqa: E402


def crawler_on(settings: dict[str, Any]) -> Any:
    from scrapy.utils.test import get_crawler

    return get_crawler(settings_dict=settings)


def counts(stats: Any) -> dict[str, int]:
    return {key: value for key, value in stats.get_stats().items() if key.startswith("idcrawl/redis/")}


def on_one_master(cluster, prefix: str) -> int:
    """The node that holds every key of the job ``prefix`` (asserted: none elsewhere)."""
    holders = [n for n, keys in enumerate(cluster.keys_by_master()) if any(k.startswith(prefix.encode()) for k in keys)]
    assert len(holders) == 1, f"the keys of {prefix!r} are on nodes {holders}"
    return holders[0]


# -- the connection ---------------------------------------------------------------------------------------------


def test_a_client_made_from_any_node_checks_every_master_and_counts_its_calls(redis_cluster) -> None:
    crawler = crawler_on({"REDIS_URL": redis_cluster.nodes[2].url, "IDCRAWL_REDIS_CLUSTER": True})
    client = connect(crawler.settings, stats=crawler.stats)
    assert isinstance(client, RedisCluster) and len(client.get_primaries()) == MASTERS
    # the retries: none inside a worker's call (its scripts are not idempotent), a few for the state store's
    assert client.retry.get_retries() == 0
    assert connect(crawler.settings, idempotent=True).retry.get_retries() == 3
    # the check: PING, and INFO on each master (its version)
    assert counts(crawler.stats) == {"idcrawl/redis/calls": 1 + MASTERS, "idcrawl/redis/commands": 1 + MASTERS,
                                     "idcrawl/redis/commands/ping": 1, "idcrawl/redis/commands/info": MASTERS}
    assert check_no_eviction(client, crawler.settings) is None
    assert counts(crawler.stats)["idcrawl/redis/commands/config get"] == MASTERS
    # a WATCH/MULTI transaction on one slot: WATCH and the read sent at once, then one round trip
    client.set("c:{t}:a", 1)
    before = counts(crawler.stats)["idcrawl/redis/calls"]
    with client.pipeline(transaction=True) as pipe:
        pipe.watch("c:{t}:a")
        value = int(pipe.get("c:{t}:a"))
        pipe.multi()
        pipe.set("c:{t}:a", value + 1)
        pipe.delete("c:{t}:b", "c:{t}:c")
        assert pipe.execute()[1] == 0  # (the SET: True or b"OK" by redis-py version)
    got = counts(crawler.stats)
    assert got["idcrawl/redis/calls"] == before + 3
    assert got["idcrawl/redis/commands/watch"] == 1 and got["idcrawl/redis/commands/del"] == 1
    assert sum(v for k, v in got.items() if k.startswith("idcrawl/redis/commands/")) == got["idcrawl/redis/commands"]
    assert client.get("c:{t}:a") == b"2"

    # a master whose policy may evict keys is named
    policy = redis.Redis(host="127.0.0.1", port=redis_cluster.nodes[1].port)
    policy.config_set("maxmemory-policy", "allkeys-lru")
    try:
        with pytest.raises(RedisUnavailable, match=f"127.0.0.1:{redis_cluster.nodes[1].port}.*allkeys-lru"):
            check_no_eviction(client, crawler.settings)
    finally:
        policy.config_set("maxmemory-policy", "noeviction")


def test_settings_that_do_not_fit_the_server_are_one_line_naming_them(redis_cluster, redis_server) -> None:
    node = redis_cluster.nodes[0]
    cases = [
        ({"REDIS_URL": node.url.replace("/0", "/3"), "IDCRAWL_REDIS_CLUSTER": True},
         f"IDCRAWL_REDIS_CLUSTER = True but REDIS_URL='{node.url[:-2]}/3' asks for database 3: a Redis Cluster has "
         "database 0 only"),
        ({"REDIS_URL": redis_server.url, "IDCRAWL_REDIS_CLUSTER": True},
         f"IDCRAWL_REDIS_CLUSTER = True but Redis at REDIS_URL='{redis_server.url}' is not a node of a Redis Cluster "
         "(cluster_enabled:0): set IDCRAWL_REDIS_CLUSTER = False, or name a node of the cluster"),
        ({"REDIS_URL": node.url},
         f"Redis at REDIS_URL='{node.url}' is a node of a Redis Cluster: set IDCRAWL_REDIS_CLUSTER = True"),
    ]
    for settings, message in cases:
        with pytest.raises(RedisUnavailable) as caught:
            connect(crawler_on(settings).settings)
        assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    # no reachable node: the password masked
    with pytest.raises(RedisUnavailable) as caught:
        connect(crawler_on({"REDIS_URL": "redis://:s3cret@127.0.0.1:1/0", "IDCRAWL_REDIS_CLUSTER": True}).settings)
    assert str(caught.value).startswith("Redis at REDIS_URL='redis://:***@127.0.0.1:1/0' is unreachable: ")
    assert "s3cret" not in str(caught.value)


def test_jobs_spread_over_the_masters_each_job_on_the_master_of_its_slot(redis_cluster) -> None:
    from idcrawl.distributed.frontier import RedisFrontier
    from idcrawl.distributed.job import RedisJob
    from tests.integration.test_distributed_frontier import target

    crawler = crawler_on(redis_cluster.settings)
    client = connect(crawler.settings)
    names = [f"job-{random.Random(29).randrange(10**6)}-{n}" for n in range(24)]
    masters = {}
    for name in names:
        prefix = job_prefix(crawler_on({**redis_cluster.settings, "IDCRAWL_REDIS_JOB": name}).settings, "idseq")
        worker = RedisFrontier(RedisJob(client, prefix), "w0", block=3, lease_ms=60_000, encode=repr, decode=repr)
        worker.add_target(target())  # the job's scripts: the target, its lanes, the job's hash
        assert worker.next() is not None  # ... a claim
        masters[name] = on_one_master(redis_cluster, prefix)
        assert client.get_node_from_key(prefix).port == redis_cluster.nodes[masters[name]].port, name
    assert set(masters.values()) == set(range(MASTERS)), f"24 jobs on masters {sorted(set(masters.values()))} only"


# -- the fleet, the commands and the state backend on the cluster -----------------------------------------------


def test_three_workers_give_the_single_process_items_each_id_once(make_site, redis_cluster, tmp_path: Path) -> None:
    fleet.test_three_workers_produce_the_single_process_result_fetching_each_id_once(make_site, redis_cluster, tmp_path)
    on_one_master(redis_cluster, "idcrawl:{acc}:")


def test_two_workers_on_overlapping_targets_give_the_single_process_requests_and_items(
    make_site, redis_cluster, tmp_path: Path
) -> None:
    fleet.test_overlapping_targets_give_the_single_process_requests_and_items_exactly(
        make_site, redis_cluster, tmp_path, workers=2)
    on_one_master(redis_cluster, "idcrawl:{overlap2}:")


def test_the_commands_read_a_job_through_the_cluster(make_site, redis_cluster, tmp_path: Path) -> None:
    # idplan, iddue, idcoverage and idjob status with IDCRAWL_PROFILE=distributed
    idjob.test_the_commands_apply_the_distributed_profile_and_name_what_they_read(make_site, redis_cluster, tmp_path)
    on_one_master(redis_cluster, "idcrawl:{prof}:")
    # idjob clean: SCAN on the job's master, every key deleted
    profiled = {"IDCRAWL_PROFILE": "distributed", "IDCRAWL_REDIS_JOB": "prof", **redis_cluster.settings}
    clean = idjob.scrapy(tmp_path, "idjob", "clean", settings=profiled)
    assert clean.returncode == 0, clean.stderr
    assert "idjob: deleted" in clean.stdout
    assert not any(keys for keys in redis_cluster.keys_by_master())


def test_the_redis_state_backend_resumes_from_the_cluster(make_site, redis_cluster, tmp_path: Path) -> None:
    state.test_a_stopped_crawl_resumes_from_its_state_in_redis_and_idplan_reads_it(make_site, redis_cluster, tmp_path)
    on_one_master(redis_cluster, "idcrawl:{single}:")


def test_a_cluster_with_no_node_left_is_an_outage_a_connection_error(redis_server) -> None:
    """redis-py says "Redis Cluster cannot be connected" with a RedisClusterException, which is no
    RedisError: the connection makes it a redis.ConnectionError, which the worker takes for an outage
    (docs/reliability.md), for a call and for a pipeline alike."""
    from tests.support.redis_cluster import RedisCluster as OneNode

    cluster = OneNode(masters=1).start()  # a cluster of its own: the session's one stays up
    try:
        client = connect(crawler_on(cluster.settings).settings)
        client.set("o:{t}:a", 1)
        cluster.stop()
        with pytest.raises(redis.ConnectionError, match="Redis Cluster cannot be connected"):
            client.get("o:{t}:a")
        pipe = client.pipeline(transaction=False)
        pipe.get("o:{t}:a")
        with pytest.raises(redis.RedisError):
            pipe.execute()
    finally:
        cluster.stop()
