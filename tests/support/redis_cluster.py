"""A private three-master Redis Cluster for the tests: redis-server nodes on free ports of 127.0.0.1.

Each node is a :class:`~tests.support.redis_server.RedisServer` with ``--cluster-enabled yes``; the
16384 slots are split in three ranges by ``CLUSTER ADDSLOTSRANGE`` and the nodes meet by
``CLUSTER MEET``; :meth:`RedisCluster.start` returns once every node sees ``cluster_state:ok`` and
all three masters. ``url`` names the first node, as ``REDIS_URL`` would. The fixtures
``redis_cluster_nodes`` (once per process) and ``redis_cluster`` (flushed for each test) are in tests/conftest.py.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from tests.support.redis_server import RedisServer

__all__ = ["MASTERS", "SLOTS", "RedisCluster", "redis_cluster", "redis_cluster_nodes"]

SLOTS = 16384
MASTERS = 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisCluster:
    """Three cluster-enabled redis-servers, one slot range each; with ``replicas``, that many replicas of
    each master (nodes ``masters`` and on: the replicas of masters 0, 1, 2, 0, ...), which the cluster
    promotes when their master stops answering for ``node_timeout`` ms."""

    def __init__(self, masters: int = MASTERS, replicas: int = 0, node_timeout: int = 5000) -> None:
        self.masters = masters
        count = masters * (1 + replicas)
        self.buses = [_free_port() for _ in range(count)]  # the cluster bus: port + 10000 may not be free
        self.nodes = [RedisServer(extra_args=("--cluster-enabled", "yes", "--cluster-port", str(bus),
                                              "--cluster-node-timeout", str(node_timeout)))
                      for bus in self.buses]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    @property
    def settings(self) -> dict[str, object]:
        """The crawl settings that point at the cluster through its first node."""
        return {"REDIS_URL": self.url, "IDCRAWL_REDIS_CLUSTER": True}

    def client(self) -> object:
        """A redis-py cluster client of the test's own (not idcrawl's connection)."""
        from redis.cluster import RedisCluster as Client

        return Client.from_url(self.url)

    def keys_by_master(self) -> list[set[bytes]]:
        """Every key, by node (the nodes in their order)."""
        import redis

        found = []
        for node in self.nodes:
            with redis.Redis(host="127.0.0.1", port=node.port) as client:
                found.append(set(client.keys("*")))
        return found

    def start(self, timeout: float = 30.0) -> RedisCluster:
        import redis

        try:
            for node in self.nodes:
                node.start()
            clients = [redis.Redis(host="127.0.0.1", port=node.port) for node in self.nodes]
            step = SLOTS // self.masters
            for n, client in enumerate(clients[:self.masters]):
                high = SLOTS - 1 if n == self.masters - 1 else (n + 1) * step - 1
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", n * step, high)
            for node, bus in zip(self.nodes[1:], self.buses[1:], strict=True):
                clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", node.port, bus)
            deadline = time.monotonic() + timeout
            if len(clients) > self.masters:  # each replica follows its master once it knows every node
                while not all(int(c.cluster("INFO")["cluster_known_nodes"]) == len(clients) for c in clients):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the {len(clients)} nodes did not meet within {timeout} s")
                    time.sleep(0.05)  # a condition polled on the nodes, up to the deadline
                for n, client in enumerate(clients[self.masters:]):
                    master = clients[n % self.masters].execute_command("CLUSTER", "MYID")
                    client.execute_command("CLUSTER", "REPLICATE", master)
            while not all(self._formed(client) for client in clients):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the {len(clients)} nodes did not form a cluster within {timeout} s")
                time.sleep(0.05)  # a condition polled on the nodes, up to the deadline
            for client in clients:
                client.close()
        except BaseException:
            self.stop()
            raise
        return self

    def _formed(self, client: object) -> bool:
        info = client.cluster("INFO")  # type: ignore[attr-defined]
        formed = (info["cluster_state"] == "ok" and int(info["cluster_known_nodes"]) == len(self.nodes)
                  and len(client.execute_command("CLUSTER", "SLOTS")) == self.masters)  # type: ignore[attr-defined]
        replication = client.info("replication")  # type: ignore[attr-defined]
        return bool(formed and (replication["role"] == "master" or replication.get("master_link_status") == "up"))

    def node_of(self, key: str) -> int:
        """The index in ``nodes`` of the master that serves ``key`` now."""
        client = self.client()
        try:
            port = client.get_node_from_key(key).port  # type: ignore[attr-defined]
        finally:
            client.close()  # type: ignore[attr-defined]
        return next(n for n, node in enumerate(self.nodes) if node.port == port)

    def kill(self, n: int) -> None:
        """SIGKILL node ``n`` (no shutdown save: what its replica has not received is lost)."""
        proc = self.nodes[n].proc
        assert proc is not None
        proc.kill()
        proc.wait(timeout=10)

    def wait_failover(self, key: str, dead: int, timeout: float = 60.0) -> int:
        """Wait until another node serves ``key``'s slot and the cluster is ok again; returns that node."""
        import redis

        live = [node for n, node in enumerate(self.nodes) if n != dead]
        deadline = time.monotonic() + timeout
        while True:
            with redis.Redis(host="127.0.0.1", port=live[0].port) as client:
                slot = int(client.execute_command("CLUSTER", "KEYSLOT", key))
                owners = [row for row in client.execute_command("CLUSTER", "SLOTS") if row[0] <= slot <= row[1]]
                ok = client.cluster("INFO")["cluster_state"] == "ok"
            port = int(owners[0][2][1]) if owners else None
            if ok and port is not None and port != self.nodes[dead].port:
                return next(n for n, node in enumerate(self.nodes) if node.port == port)
            if time.monotonic() > deadline:
                raise RuntimeError(f"no replica took over the slot of {key!r} within {timeout} s")
            time.sleep(0.05)  # a condition polled on the nodes, up to the deadline

    def flush(self) -> None:
        """Every key of every master deleted (a test's keys gone before the next test)."""
        import redis

        for node in self.nodes:
            with redis.Redis(host="127.0.0.1", port=node.port) as client:
                client.flushall()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


@pytest.fixture(scope="session")
def redis_cluster_nodes() -> Iterator[RedisCluster]:
    """One cluster for the session of this process (each xdist worker is a process of its own, with its own
    cluster on its own free ports): three servers started once, not once per test."""
    from tests.support.redis_server import require_redis_server

    require_redis_server()
    cluster = RedisCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def redis_cluster(redis_cluster_nodes: RedisCluster) -> RedisCluster:
    """The session's three-master cluster, every key of the tests before deleted."""
    redis_cluster_nodes.flush()
    return redis_cluster_nodes
