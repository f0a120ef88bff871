"""Scope changes between runs take effect in a fleet (issue 30, findings 2 and 3), as in one process
(tests/unit/test_scope_changes.py): the shared queue in a real redis-server, one worker per run."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from idcrawl.core.scope import CrawlProfile, JobScope, ScopeKind, Seed
from idcrawl.distributed.urlqueue import RedisUrlQueue
from tests.integration.test_distributed_runs import next_run
from tests.unit.test_scope_changes import ARTICLE, LINKS, D

redis = pytest.importorskip("redis")


def run(client: Any, prefix: str, scope: JobScope, name: str, now: float) -> tuple[RedisUrlQueue, list[str]]:
    """One run of one worker: start, seed the page targets, take and answer until nothing is ready."""
    queue = RedisUrlQueue(client, prefix, name, rng=random.Random(1))
    queue.start(scope, now, run=next_run(client, prefix, name))
    for target in scope.pages:
        queue.seed(target, scope.seeds[target].url, now)
    fetched = []
    while (record := queue.take(lambda _: True, now)) is not None:
        fetched.append(record.url)
        queue.fetched(record.url, LINKS.get(record.url, []), now)
    client.zrem(prefix + "workers", name)
    return queue, fetched


def test_in_a_fleet_a_new_seed_on_a_harvested_page_walks_its_crawl_profiles(redis_server: Any) -> None:
    client = redis.Redis.from_url(redis_server.url)
    prefix = "c:{new-seed}:"
    _, first = run(client, prefix, D, "w1", 0.0)
    assert ARTICLE in first
    two = JobScope({**D.seeds, "E": Seed("E", ARTICLE, ("deep",))},
                   {**D.crawl_profiles, "deep": CrawlProfile("deep", 2, kind=ScopeKind.PREFIX)}, pages=("D", "E"))
    queue, second = run(client, prefix, two, "w2", 1.0)
    assert sorted(second) == [f"{ARTICLE}/p1", f"{ARTICLE}/p2"]
    assert queue.get(ARTICLE).record.owner == "E"  # type: ignore[union-attr]
    assert run(client, prefix, two, "w3", 2.0)[1] == []


def test_in_a_fleet_a_widened_crawl_profile_walks_what_it_newly_admits(redis_server: Any) -> None:
    client = redis.Redis.from_url(redis_server.url)
    prefix = "c:{widened}:"
    run(client, prefix, D, "w1", 0.0)
    wider = replace(D, crawl_profiles={"d": replace(D.crawl_profiles["d"], max_hops=2, kind=ScopeKind.DOMAIN)})
    _, second = run(client, prefix, wider, "w2", 1.0)
    assert sorted(second) == sorted([f"{ARTICLE}/p1", "http://img.db.no/big", "http://img.db.no/logo"])
    assert run(client, prefix, wider, "w3", 2.0)[1] == []
