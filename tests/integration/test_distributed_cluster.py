"""A job's scripts on a two-node Redis Cluster: every key a job touches lives in its hash tag's slot.

Node A serves only the slot of the job's hash tag ``{job}``, node B every other slot. The
frontier runs there through redis-py's ``RedisCluster`` client, which sends each script to the
node of the keys it is passed in ``KEYS`` (a script passed no key would go to a random slot, and
node B refuses a script that touches A's keys): workers claim, decide, stop and are taken back,
retries wait and are taken, the fleet's politeness and the Bloom dupefilter work, and at the end
every key of the job is on node A. Workers and commands on a three-master cluster through idcrawl's
connection (IDCRAWL_REDIS_CLUSTER): test_redis_cluster.py.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator

import pytest

from idcrawl.distributed.dupefilters import RedisBloomSeen
from idcrawl.distributed.frontier import RedisFrontier
from idcrawl.distributed.job import RedisJob
from tests.integration.test_distributed_frontier import drive, exists, target
from tests.support.redis_server import RedisServer, require_redis_server
from tests.support.reference import lane_truth

redis = pytest.importorskip("redis")
from redis.cluster import ClusterNode, RedisCluster  # noqa: E402

PREFIX = "t:{job}:"
SLOTS = 16384


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cluster_node() -> tuple[RedisServer, int]:
    """A cluster-enabled redis-server and its cluster bus port (a free one: port + 10000 may not be)."""
    bus = free_port()
    return RedisServer(extra_args=("--cluster-enabled", "yes", "--cluster-port", str(bus))).start(), bus


@pytest.fixture
def cluster() -> Iterator[tuple[RedisCluster, redis.Redis, redis.Redis]]:
    """Node A with the job's slot, node B with the others, and a cluster client."""
    require_redis_server()
    (node_a, bus_a), (node_b, _) = cluster_node(), cluster_node()
    nodes = [node_a, node_b]
    try:
        a, b = (redis.Redis(host="127.0.0.1", port=node.port) for node in nodes)
        slot = int(a.execute_command("CLUSTER", "KEYSLOT", PREFIX))
        a.execute_command("CLUSTER", "ADDSLOTS", slot)
        ranges = [(lo, hi) for lo, hi in ((0, slot - 1), (slot + 1, SLOTS - 1)) if lo <= hi]
        b.execute_command("CLUSTER", "ADDSLOTSRANGE", *(n for r in ranges for n in r))
        b.execute_command("CLUSTER", "MEET", "127.0.0.1", node_a.port, bus_a)
        deadline = time.monotonic() + 30
        while not all(_sees_both(node) for node in (a, b)):
            assert time.monotonic() < deadline, "the two nodes did not form a cluster within 30 s"
            time.sleep(0.05)
        client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", node_a.port)])
        yield client, a, b
        client.close()
    finally:
        for node in nodes:
            node.stop()


def _sees_both(node: redis.Redis) -> bool:
    info = node.cluster("INFO")
    return bool(info["cluster_state"] == "ok" and int(info["cluster_known_nodes"]) == 2
                and len(node.execute_command("CLUSTER", "SLOTS")) >= 2)


def frontier(client: RedisCluster, worker: str, lease_ms: int = 60_000) -> RedisFrontier:
    return RedisFrontier(
        RedisJob(client, PREFIX), worker, block=3, lease_ms=lease_ms,
        encode=lambda payload: repr(payload[2]).encode(),
        decode=lambda lane, id_, blob: (lane, id_, blob),
    )


def test_a_job_s_scripts_run_on_a_cluster_node_that_serves_only_the_job_s_slot(cluster) -> None:
    client, a, b = cluster
    client.set("t:{other}:x", 1)  # the test's own check: another tag lands on node B
    assert b.get("t:{other}:x") == b"1" and a.dbsize() == 0
    client.delete("t:{other}:x")

    # two workers, one stops with ids in hand: taken back (CLAIM/STATUS touch its keys), items adopted
    workers = [frontier(client, f"w{i}", lease_ms=300) for i in range(2)]
    for w in workers:
        w.add_target(target())
    emitted, _ = drive(workers, random.Random(7), stop_after={0: 6})
    asc, _ = lane_truth(exists, 1000, 1, None, 5)
    desc, _ = lane_truth(exists, 999, -1, None, 5)
    assert sorted(set(emitted)) == sorted(asc + desc)
    assert int(client.hget(PREFIX + "job", "reclaimed_workers") or 0) == 1

    # retries, a reply lost, a clean leave, the fleet's politeness, the Bloom dupefilter
    late = frontier(client, "w9")
    # another URL template: an overlapping target would take reg:asc's outcomes and fetch nothing
    late.add_target(target(name="late", url="http://127.0.0.1:1/late/{id}", direction="asc", max=1003, margin=0))
    d = late.next().dispatch
    assert d is not None
    late.job.delay(d.lane, d.id, 1, f"{d.lane}\t{d.id}\nrequest".encode())
    late.inflight.discard((d.lane, d.id))
    time.sleep(0.01)
    assert len(late.job.pop_delayed("w9", 16)) == 1  # ... its reply lost
    assert late.give_back_unknown() == 1
    assert late.job.leave("w9") == 2  # the two ids of its block it never fetched
    polite = {"gap_ms": 60_000, "cap": 1, "life_ms": 60_000, "lease_ms": 8000}
    assert late.job.polite("go", "127.0.0.1", "w9#1", **polite).wait_ms == 0
    assert late.job.polite("go", "127.0.0.1", "w9#2", **polite).wait_ms > 0
    assert late.job.polite("done", "127.0.0.1", "w9#1", **polite).flying == 0  # w9#1's place back
    seen = RedisBloomSeen(client, PREFIX, 0.001, 1000)
    assert seen.add(b"f" * 20) is False and seen.add(b"f" * 20) is True

    keys = a.keys("*")
    assert keys and all(k.startswith(PREFIX.encode()) for k in keys)
    assert b.dbsize() == 0, "a key of the job landed outside its slot"
