"""A real pywb for the replay tests: ``wb-manager init``/``add`` a collection, ``wayback`` on a free 127.0.0.1 port.

pywb 2.10 pins ``redis==2.10.6``, ``fakeredis<1`` and ``werkzeug``, which the project's ``redis>=5`` excludes,
so it lives in a venv of its own: ``.venv-pywb`` at the checkout's root (``make .venv-pywb/.installed``,
the pin in requirements-pywb.txt; ``make test`` makes it), or the venv ``IDCRAWL_PYWB_VENV`` names. Without it
the replay tests skip with that reason, except under ``CI=true`` (.ci/run), where they fail.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

from tests.support.redis_server import in_ci, stop_process

__all__ = ["Replayed", "Wayback", "pywb_missing", "pywb_venv", "require_pywb", "wayback"]

REPO = Path(__file__).resolve().parents[2]
#: How long pywb may take to answer after ``wayback`` starts (gevent and its templates load in ~1 s unloaded).
START_TIMEOUT = 60.0


def pywb_venv() -> Path:
    return Path(os.environ.get("IDCRAWL_PYWB_VENV") or REPO / ".venv-pywb")


def pywb_missing() -> str | None:
    """Why pywb cannot run here, or None."""
    venv = pywb_venv()
    for tool in ("wb-manager", "wayback"):
        if not (venv / "bin" / tool).exists():
            return f"pywb is not installed in {venv} (make .venv-pywb/.installed; make test does it)"
    return None


def require_pywb() -> None:
    """Skip the calling test when pywb is missing; under CI=true (make test installs it) fail instead."""
    import pytest

    missing = pywb_missing()
    if missing is not None:
        if in_ci():
            pytest.fail(f"CI=true but {missing}")
        pytest.skip(missing)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env() -> dict[str, str]:
    """The environment for pywb's tools: the pywb venv first on PATH, nothing of this venv's Python."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PATH"] = f"{pywb_venv() / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@dataclass(frozen=True)
class Replayed:
    """One answer of the wayback: status, headers, body."""

    status: int
    headers: Message
    body: bytes


class Wayback:
    """A pywb directory under ``root`` with one collection; ``start`` serves it on 127.0.0.1."""

    def __init__(self, root: Path, collection: str = "idcrawl") -> None:
        self.root, self.collection = root, collection
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = root / "wayback.log"
        self._manage("init", collection)

    def _manage(self, *args: str) -> None:
        done = subprocess.run(
            [str(pywb_venv() / "bin" / "wb-manager"), *args], cwd=self.root, env=_env(),
            capture_output=True, timeout=300, check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"wb-manager {' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")

    def add(self, warcs: Iterable[Path]) -> None:
        """``wb-manager add``: copy the files into the collection and index them (its own CDXJ)."""
        paths = [str(p) for p in warcs]
        if not paths:
            raise ValueError("no WARC file to add")
        self._manage("add", self.collection, *paths)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Wayback:
        """Serve the collection; returns once its CDX endpoint answers (or raises with the log's tail)."""
        for _attempt in range(3):  # a free port taken by someone else between the probe and the bind: another
            self.port = _free_port()
            with self.log.open("ab") as log:
                self.proc = subprocess.Popen(
                    [str(pywb_venv() / "bin" / "wayback"), "-b", "127.0.0.1", "-p", str(self.port), "-t", "4"],
                    cwd=self.root, env=_env(), stdout=log, stderr=subprocess.STDOUT,
                )
            if self._wait_ready():
                return self
        raise RuntimeError(f"wayback did not start: {self.log.read_text(errors='replace')[-2000:]}")

    def _wait_ready(self) -> bool:
        assert self.proc is not None
        probe = f"{self.base}/{self.collection}/cdx?url=example.invalid/&output=json"
        deadline = START_TIMEOUT
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen(probe, timeout=5) as answer:
                    if answer.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            try:  # the pause between probes is a wait on the process: an exit ends it at once
                self.proc.wait(timeout=0.1)
                return False
            except subprocess.TimeoutExpired:
                continue
        self.stop()
        raise RuntimeError(f"wayback did not answer on port {self.port} within {deadline:.0f} s")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
        self.proc = None

    def get(self, path: str) -> Replayed:
        request = urllib.request.Request(f"{self.base}/{path}")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return Replayed(answer.status, answer.headers, answer.read())
        except urllib.error.HTTPError as error:
            return Replayed(error.code, error.headers, error.read())

    def replay(self, url: str, timestamp: str) -> Replayed:
        """The capture of ``url`` closest to ``timestamp`` (14 digits), as archived (``id_``: not rewritten)."""
        return self.get(f"{self.collection}/{timestamp}id_/{url}")

    def captures(self, url: str) -> list[dict[str, str]]:
        """pywb's CDX lines for ``url``, oldest first."""
        query = urllib.parse.urlencode({"url": url, "output": "json"})
        answer = self.get(f"{self.collection}/cdx?{query}")
        if answer.status != 200:
            raise RuntimeError(f"cdx query for {url} answered {answer.status}")
        return [json.loads(line) for line in answer.body.decode().splitlines() if line.strip()]


@contextmanager
def wayback(root: Path, warcs: Iterable[Path], collection: str = "idcrawl") -> Iterator[Wayback]:
    """A collection of ``warcs`` served on a free port, stopped on exit (pywb skipped/failed as :func:`require_pywb`)."""
    require_pywb()
    server = Wayback(root, collection)
    server.add(warcs)
    server.start()
    try:
        yield server
    finally:
        server.stop()
