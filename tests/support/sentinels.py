"""A primary, its replica and three sentinels for the tests, on free loopback ports under a temp dir.

``SentinelGroup(dir).start()`` returns once every sentinel knows the replica and the two other sentinels
(a failover needs their votes) and the replica is in sync; ``kill_primary()`` SIGKILLs the primary and
``wait_failover()`` waits until the sentinels name the replica as the primary and it answers as one.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.support.redis_server import RedisServer, stop_process

__all__ = ["FAST_SYNC", "SERVICE", "SentinelGroup"]

SERVICE = "mymaster"

#: A primary that sends its replica the first sync at once (Redis waits 5 s for more replicas by default).
FAST_SYNC = ("--repl-diskless-sync-delay", "0")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SentinelGroup:
    """One primary, one replica, three sentinels (quorum 2) watching ``mymaster``."""

    def __init__(self, root: Path, *, down_after_ms: int = 400, failover_timeout_ms: int = 2000) -> None:
        self.root = root
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.primary = RedisServer(extra_args=FAST_SYNC)
        self.replica = RedisServer()
        self.sentinel_ports: list[int] = []
        self.sentinels: list[subprocess.Popen[bytes]] = []

    @property
    def addresses(self) -> str:
        """``IDCRAWL_REDIS_SENTINELS``."""
        return ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)

    def start(self, timeout: float = 30) -> SentinelGroup:
        self.primary.start()
        self.replica.extra_args = ("--replicaof", "127.0.0.1", str(self.primary.port))
        self.replica.start()
        for n in range(3):
            port = _free_port()
            folder = self.root / f"sentinel{n}"
            folder.mkdir(parents=True, exist_ok=True)
            conf = folder / "sentinel.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {folder}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}\n"
                f"sentinel failover-timeout {SERVICE} {self.failover_timeout_ms}\n"
                f"sentinel parallel-syncs {SERVICE} 1\n")
            self.sentinel_ports.append(port)
            self.sentinels.append(subprocess.Popen(["redis-server", str(conf), "--sentinel"], cwd=folder,
                                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self._wait(self._ready, timeout, "the sentinels did not find the replica and each other")
        return self

    def client(self, port: int):  # type: ignore[no-untyped-def]
        import redis

        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, socket_connect_timeout=2)

    def _ready(self) -> bool:
        import redis

        try:
            if self.client(self.replica.port).info("replication").get("master_link_status") != "up":
                return False
            for port in self.sentinel_ports:
                state = self.client(port).sentinel_master(SERVICE)
                if int(state.get("num-slaves", 0)) < 1 or int(state.get("num-other-sentinels", 0)) < 2:
                    return False
        except redis.RedisError:
            return False
        return True

    def kill_primary(self) -> None:
        assert self.primary.proc is not None
        self.primary.proc.send_signal(signal.SIGKILL)
        self.primary.proc.wait(timeout=10)

    def wait_failover(self, timeout: float = 60) -> None:
        """Until every sentinel names the replica as the primary and the replica answers as a primary."""
        self._wait(self._failed_over, timeout, "the sentinels did not promote the replica")

    def _failed_over(self) -> bool:
        import redis

        try:
            if self.client(self.replica.port).info("replication").get("role") != "master":
                return False
            for port in self.sentinel_ports:
                _host, port_ = self.client(port).sentinel_get_master_addr_by_name(SERVICE)
                if int(port_) != self.replica.port:
                    return False
        except redis.RedisError:
            return False
        return True

    @staticmethod
    def _wait(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} within {timeout:.0f} s")
            time.sleep(0.05)

    def stop(self) -> None:
        for proc in self.sentinels:
            stop_process(proc)
        self.sentinels = []
        self.replica.stop()
        self.primary.stop()
