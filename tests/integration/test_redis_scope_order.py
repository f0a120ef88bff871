"""Order independence of crawl scope in a fleet (issue 30, finding 1): two simulated workers (one
:class:`~idcrawl.distributed.urlqueue.RedisUrlQueue` each, one job, a real redis-server) walk the
generated multi-seed graphs of tests/unit/test_scope_order.py, taking and answering in seeded random
interleavings; each fetches the reference walk's pages once, with its owners and hops."""

from __future__ import annotations

import random
from typing import Any

import pytest

from idcrawl.distributed.urlqueue import RedisUrlQueue
from tests.support.reference import scope_walk_truth
from tests.unit.test_scope_order import Case, generate

redis = pytest.importorskip("redis")

GRAPHS = 40
ORDERS = 3


def fleet(client: Any, prefix: str, case: Case, order: int) -> tuple[list[str], RedisUrlQueue]:
    rng = random.Random(order)
    workers = []
    for name in ("w0", "w1"):
        queue = RedisUrlQueue(client, prefix, name, lease_ms=60_000, rng=random.Random(rng.random()))
        queue.start(case.scope(), 0.0)
        workers.append(queue)
    for name in rng.sample(sorted(case.seeds), len(case.seeds)):
        rng.choice(workers).seed(name, case.seeds[name], 0.0)
    holding: dict[str, list[str]] = {"w0": [], "w1": []}
    fetched: list[str] = []
    while True:
        w = rng.choice(workers)
        if holding[w.worker] and rng.random() < 0.5:
            url = holding[w.worker].pop(rng.randrange(len(holding[w.worker])))
            fetched.append(url)
            w.fetched(url, case.links.get(url, []), 0.0)
            continue
        record = w.take(lambda _: True, 0.0)
        if record is not None:
            holding[w.worker].append(record.url)
        elif not any(holding.values()):
            break
    return fetched, workers[0]


def test_a_fleet_fetches_the_reference_walk_with_its_owners_and_hops_in_every_order(redis_server: Any) -> None:
    client = redis.Redis.from_url(redis_server.url)
    for n in range(GRAPHS):
        case = generate(n)
        truth = scope_walk_truth(case.links, case.seeds, case.admits)
        for order in range(ORDERS):
            fetched, queue = fleet(client, f"o:{{{n}-{order}}}:", case, n * ORDERS + order)
            where = f"graph {n}, order {order}"
            assert len(fetched) == len(set(fetched)), where
            assert sorted(fetched) == sorted(truth), where
            got = {}
            for page in fetched:
                entry = queue.get(page)
                assert entry is not None, where
                got[page] = (entry.record.owner, (entry.record.hops.hops, entry.record.hops.offsite))
            assert got == truth, where


def test_two_targets_on_one_hop0_page_get_the_reference_owner_whichever_seeds_first(redis_server: Any) -> None:
    # two targets whose hop-0 page is the same URL: the owner is the rank's (the smallest name on a tie),
    # not the target seeded last, in the fleet as in one process
    client = redis.Redis.from_url(redis_server.url)
    for n in range(12):
        base = generate(n)
        first, second = sorted(base.seeds)[:2]
        case = Case(base.links, {**base.seeds, second: base.seeds[first]}, base.profiles)
        truth = scope_walk_truth(case.links, case.seeds, case.admits)
        for order in range(4):
            fetched, queue = fleet(client, f"h0:{{{n}-{order}}}:", case, 1000 + n * 4 + order)
            where = f"graph {n}, order {order}"
            assert sorted(fetched) == sorted(truth), where
            entry = queue.get(case.seeds[first])
            assert entry is not None, where
            assert entry.record.owner == truth[case.seeds[first]][0], where
