"""Fleet-wide limits on a real redis-server: the workers' trackers share counts, times and TST.

In a crawl Redis's clock places each worker's times; here the fleet's clock is the
``now`` the test passes (``fleet_clock``), the same for every worker, so no real
time passes in a test's eyes.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from scrapy.settings import Settings

from idcrawl.core.limits import DomainLimits, Limits
from idcrawl.distributed.limits import shared_trackers

pytest.importorskip("redis")

HOST = "127.0.0.1"


def trackers(redis_server: Any, job: str, limits: Limits, count: int = 2) -> list[Any]:
    settings = Settings({"REDIS_URL": redis_server.url, "IDCRAWL_REDIS_JOB": job})
    domain, _ = shared_trackers(settings, "idseq", fleet_clock=lambda now: round(now * 1000))
    return [domain(limits, HOST) for _ in range(count)]


def test_tdl_runs_from_the_fleets_first_request(redis_server) -> None:
    a, b = trackers(redis_server, "tdl", Limits(tdl=1000.0))
    assert a.take(0.0)
    a.sync(0.0)
    b.sync(500.0)  # b has not iterated itself, the fleet has
    assert b.check(900.0) is None
    trigger = b.check(1001.0)
    assert trigger is not None and trigger.rule == "TDL"


def test_tac_counts_the_iterations_of_every_worker(redis_server) -> None:
    a, b = trackers(redis_server, "tac", Limits(tac=1000.0))
    assert b.take(0.0)
    b.sync(0.0)
    assert a.take(0.0)
    assert a.take(800.0)  # the fleet's last iteration
    a.sync(800.0)
    assert b.check(1001.0) is None  # b's own last iteration is 1001 s old, the fleet's is not
    assert a.check(1700.0) is None
    trigger = a.check(1801.0)
    assert trigger is not None and trigger.rule == "TAC"


@pytest.mark.parametrize("found_in_third", [False, True])
def test_tst_counts_the_fleets_iterations_without_a_new_found_target(redis_server, found_in_third: bool) -> None:
    a, b = trackers(redis_server, f"tst-{found_in_third}", Limits(tst=3))
    a.sync(0.0)
    assert a.take(0.0)  # fleet iteration 1
    a.sync(0.0)
    b.sync(0.0)
    assert b.take(0.0)  # 2
    b.sync(0.0)
    a.sync(0.0)
    assert a.take(0.0)  # 3
    if found_in_third:
        a.found()
    a.sync(0.0)
    b.sync(0.0)
    granted = b.take(0.0)  # the fleet's 4th: stable for 3 iterations unless the 3rd found a target
    if found_in_third:
        assert granted and b.trigger is None
    else:
        assert granted == 0 and b.trigger is not None and b.trigger.rule == "TST"


def test_one_worker_that_syncs_after_every_event_decides_as_one_process(redis_server) -> None:
    limits = Limits(imax=60, tst=4, tac=1000.0)
    for seed in range(5):
        rng = random.Random(seed)
        (shared,) = trackers(redis_server, f"one-{seed}", limits, count=1)
        local = DomainLimits(limits, HOST)
        now = 0.0
        for _ in range(80):
            now += rng.choice([0.5, 1.0, 3.0])
            if rng.random() < 0.3:
                shared.found()
                local.found()
            assert shared.take(now) == local.take(now), seed
            shared.sync(now)
            assert (shared.stable, shared.iterations, shared.stopped) == (local.stable, local.iterations,
                                                                          local.stopped), seed
            if local.stopped:
                assert shared.trigger is not None and local.trigger is not None
                assert shared.trigger.rule == local.trigger.rule
                break
