"""A real scrapyd for the deployment tests: its config under a temp folder, started, waited for, stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


def call(port: int, endpoint: str, data: list[tuple[str, str]] | None = None, **query: str) -> dict[str, Any]:
    """One call of the scrapyd on ``port`` (a POST with ``data``), its JSON answer, which must say ok."""
    url = f"http://127.0.0.1:{port}/{endpoint}" + ("?" + urllib.parse.urlencode(query) if query else "")
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with urllib.request.urlopen(url, data=body, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
    assert answer.get("status") == "ok", answer
    return answer


def write_conf(root: Path, port: int, *extra: str) -> None:
    """``root/scrapyd.conf`` (scrapyd and the job processes it starts, cwd = root, both read it): every
    directory under ``root``, loopback only, a short poll; ``extra`` lines added."""
    (root / "scrapyd.conf").write_text(
        "[scrapyd]\nbind_address = 127.0.0.1\n"
        f"http_port = {port}\neggs_dir = {root / 'eggs'}\nlogs_dir = {root / 'logs'}\n"
        f"items_dir = {root / 'items'}\njobs_dir = {root / 'jobs'}\ndbs_dir = {root / 'dbs'}\n"
        "poll_interval = 0.2\nmax_proc = 2\n" + "".join(f"{line}\n" for line in extra)
    )


@contextmanager
def running(command: Sequence[str], root: Path, env: dict[str, str], status: Callable[[], Any],
            log: Callable[[], str]) -> Iterator[subprocess.Popen[bytes]]:
    """scrapyd by ``command`` in ``root`` (output in ``root/scrapyd.out``), once ``status()`` answers
    (an OSError until it listens; 30 s at most, else the test fails with ``log()``); stopped at the
    end with its job processes (its own session: one killpg)."""
    with (root / "scrapyd.out").open("wb") as out:
        proc = subprocess.Popen(list(command), cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"scrapyd did not start:\n{log()}")
                time.sleep(0.1)  # a poll of a condition: until scrapyd listens
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
