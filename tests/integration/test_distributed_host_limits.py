"""A fleet is one crawler to a host: per-host concurrency and delays hold for all workers together.

Real ``scrapy crawl`` workers on a real redis-server against a local site with two hosts (``127.0.0.1``
and ``localhost``, told apart by the Host header); one process and a fleet of two workers under the same
settings, politeness off. What each host saw is read from the site's log.

In flight, by causality (no timing bound a loaded machine could break): the site logs a request as it
arrives and answers it ``REPLY`` s later, so ``[arrival, arrival + REPLY)`` lies inside the time the
worker counts the request in flight (from before it is sent until its whole response is read). Requests
whose intervals overlap at the site were in flight together in the fleet: their number is at most the
fleet's count, which the settings cap. Two requests of a host one at a time are thus at least ``REPLY``
apart at the site, more than ``DOWNLOAD_DELAY``: the smallest gap one process's settings call for.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from idcrawl.demo.site import LoggedRequest, Reply
from tests.conftest import GapModel
from tests.integration.test_distributed_crawl import finish, start_worker
from tests.support.crawl import run_crawl

pytest.importorskip("redis")

HOSTS = ("127.0.0.1", "localhost")
REPLY = 0.25  # every page answers after this long
IDS = 12  # per host


class SlowModel(GapModel):
    """Every id exists and answers after ``REPLY`` s."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, REPLY)


def job_file(path: Path, site: Any) -> Path:
    targets = "".join(f"""
[[targets]]
name = "t{n}"
url = "{site.url(host)}"
start = 100
max = {100 + IDS - 1}
""" for n, host in enumerate(HOSTS))
    path.write_text(f"[defaults]\nmargin = 0\ndirection = \"asc\"\n{targets}")
    return path


def most_in_flight(log: list[LoggedRequest], host: str) -> int:
    """The most page requests of ``host`` whose ``[arrival, arrival + REPLY)`` overlap at the site."""
    events = sorted([(e.at, 1) for e in log if e.host == host and e.id is not None]
                    + [(e.at + REPLY, -1) for e in log if e.host == host and e.id is not None])
    most = now = 0
    for _, step in events:  # at one moment an end sorts before a start: the intervals are half-open
        now += step
        most = max(most, now)
    return most


def smallest_gap(log: list[LoggedRequest], host: str) -> float:
    times = [e.at for e in log if e.host == host and e.id is not None]
    return min(b - a for a, b in itertools.pairwise(times))


SETTINGS: dict[str, dict[str, Any]] = {
    # a delay and one request at a time per host (Scrapy's default jitter of the delay: +-50%)
    "delay": {"DOWNLOAD_DELAY": 0.2, "CONCURRENT_REQUESTS_PER_DOMAIN": 1},
    # no delay, two requests at a time per host
    "concurrency": {"DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS_PER_DOMAIN": 2},
}


@pytest.mark.parametrize("case", sorted(SETTINGS))
def test_a_fleet_sends_a_host_no_more_than_one_process_would(
    make_site, redis_server, tmp_path: Path, case: str
) -> None:
    per_host = SETTINGS[case]["CONCURRENT_REQUESTS_PER_DOMAIN"]
    common = {"IDCRAWL_POLITENESS_FACTOR": 0, "AUTOTHROTTLE_ENABLED": False, "ROBOTSTXT_OBEY": True,
              "CONCURRENT_REQUESTS": 8, **SETTINGS[case]}
    expected = {(host, id_) for host in HOSTS for id_ in range(100, 100 + IDS)}

    one = make_site(SlowModel(0, 1000, set()))
    (tmp_path / "one").mkdir()
    result = run_crawl(tmp_path / "one", {"job": job_file(tmp_path / "one.toml", one)}, common)
    assert result.returncode == 0, result.stderr[-3000:]
    assert {(e.host, e.id) for e in one.log if e.id is not None} == expected

    fleet = make_site(SlowModel(0, 1000, set()))
    settings = {**common, "IDCRAWL_DISTRIBUTED": True, "REDIS_URL": redis_server.url,
                "IDCRAWL_REDIS_JOB": f"hosts-{case}", "IDCRAWL_REDIS_POLL_INTERVAL": 0.1,
                "IDCRAWL_REDIS_CLAIM_BLOCK": 1}
    args = {"job": job_file(tmp_path / "fleet.toml", fleet)}
    procs = [start_worker(tmp_path / f"w{n}", args, settings) for n in range(2)]
    results = [finish(proc, tmp_path / f"w{n}") for n, proc in enumerate(procs)]
    for worker in results:
        assert worker.returncode == 0, worker.stderr[-3000:]
    assert sorted((e.host, e.id) for e in fleet.log if e.id is not None) == sorted(expected)
    # both workers fetched ids (one worker alone would prove nothing)
    assert all(worker.stats.get("idcrawl/dispensed", 0) > 0 for worker in results)

    for host in HOSTS:
        assert most_in_flight(one.log, host) <= per_host, ("one process", host)
        assert most_in_flight(fleet.log, host) <= per_host, ("fleet", host, [
            (round(e.at - fleet.log[0].at, 3), e.path) for e in fleet.log if e.host == host])
        if per_host == 1:
            # one at a time: each request at least REPLY after the one before, above DOWNLOAD_DELAY
            assert smallest_gap(fleet.log, host) >= REPLY > SETTINGS[case]["DOWNLOAD_DELAY"]
    assert max(worker.stats.get("idcrawl/redis/host_max_in_flight", 0) for worker in results) <= per_host
