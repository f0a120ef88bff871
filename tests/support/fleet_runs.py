"""Waiting out the grace of a fleet's run (``P run``: idcrawl.distributed.runs, run.lua) between two fleets.

A worker that starts within one lease of the run's ``at`` (it started, or a worker of it joined or left)
joins that run and its plan, as a late worker of the same fleet does; a test whose next fleet must be a
run of its own first waits, on Redis's clock (the one run.lua reads), until that grace has passed.
"""

from __future__ import annotations

import time
from typing import Any

from idcrawl.state.keys import JobKeys

__all__ = ["wait_out_the_runs_grace"]

#: seconds between two reads of ``P run`` (a condition on Redis's clock, not a sleep through time)
POLL = 0.05


def wait_out_the_runs_grace(redis_server: Any, job: str, lease: float, *, prefix: str = "idcrawl",
                            timeout: float = 60) -> None:
    """Until the run of ``job`` on ``redis_server`` (its ``url``), if it has one, is older than ``lease``
    seconds (``IDCRAWL_REDIS_LEASE_TIMEOUT``, the run's grace) on Redis's clock; fails after ``timeout`` s."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    key = JobKeys(f"{prefix}:{{{job}}}:").run
    deadline = time.monotonic() + timeout
    try:
        while True:
            at = client.hget(key, "at")
            seconds, micros = client.time()
            if at is None or seconds * 1000 + micros // 1000 - int(at) >= lease * 1000:  # no run yet: none to wait for
                return
            assert time.monotonic() < deadline, f"the grace of job {job}'s run never ended"
            time.sleep(POLL)
    finally:
        client.close()
