"""A private ``redis-server`` for the tests: a free port on 127.0.0.1, a temp dir, no persistence.

CI (``.ci/run``) installs Debian's redis-server; the tests start their own so
that they exercise real Redis (Lua scripts, TIME, MULTI) and never touch a
server someone else uses. Without redis-server on PATH the distributed tests
are skipped with that reason, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["RedisServer", "in_ci", "redis_server_missing"]


def redis_server_missing() -> str | None:
    """Why the distributed tests cannot run here, or None."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (apt-get install redis-server; .ci/run does it)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """``redis-server --port <free> --bind 127.0.0.1 --save '' --appendonly no`` in a temp dir."""

    def __init__(self, *, persistent: bool = False, extra_args: tuple[str, ...] = (), password: str = "") -> None:
        self.persistent = persistent  # an append-only file fsync'd on every write: survives a restart
        self.extra_args = extra_args  # more options, e.g. ("--cluster-enabled", "yes")
        self.password = password  # requirepass: clients must AUTH (the URL carries it)
        self.port = 0
        self.dir = Path(tempfile.mkdtemp(prefix="idcrawl-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def settings(self) -> dict[str, object]:
        """The crawl settings that point at this server (a :class:`~tests.support.redis_cluster.RedisCluster`
        gives its own, with ``IDCRAWL_REDIS_CLUSTER``: tests that take either use these)."""
        return {"REDIS_URL": self.url}

    def start(self, port: int | None = None) -> RedisServer:
        self.port = port or _free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes" if self.persistent else "no", "--appendfsync", "always",
             "--dir", str(self.dir), "--daemonize", "no", "--protected-mode", "no",
             *(("--requirepass", self.password) if self.password else ()), *self.extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.dir,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with status {self.proc.returncode} on port {self.port}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    auth = f"AUTH {self.password}\r\n".encode() if self.password else b""
                    sock.sendall(auth + b"PING\r\n")
                    expected = (b"+OK\r\n" if auth else b"") + b"+PONG\r\n"
                    replies = b""
                    while len(replies) < len(expected) and (chunk := sock.recv(64)):
                        replies += chunk
                    if replies == expected:
                        return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port} within 10 s")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self, downtime: float = 0.0) -> None:
        """Stop, wait ``downtime`` seconds, start again on the same port (the data survives only if persistent)."""
        port = self.port
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        time.sleep(downtime)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.start(port)


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """Terminate a server the tests started, and kill it if it has not ended within 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def require_redis_server() -> None:
    """Skip the calling test when redis-server is missing; under CI=true (.ci/run installs it) fail instead."""
    import pytest

    missing = redis_server_missing()
    if missing is not None:
        if in_ci():
            pytest.fail(f"CI=true but {missing}")
        pytest.skip(missing)
