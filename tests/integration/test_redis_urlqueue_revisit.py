"""Revisits and the gained-crawl-profile re-follow in the fleet's shared URL queue (``RedisUrlQueue``,
the ``URL_*`` scripts on a real redis-server) against the in-memory queue (:class:`MemoryUrlQueue`).

Each seeded case is a link graph, a page target with one to three crawl profiles (each with or
without a ``revisit``) and several runs at given times on the job's clock; between runs the crawl
profiles' frequencies change (slowed down, sped up, taken away) and a crawl profile may be assigned
to the target. Within a run the clock moves on in steps (no sleeping: the time is an argument) and
each step takes until nothing is ready: what falls due during the run is taken at the step it is due.
Crawl profiles belong to a collection or none (a revisit counts for a URL of its collection only), and
now and then one is deactivated for a run (its URLs postponed).
One process (:class:`MemoryUrlQueue`, rebuilt from its entries per run as the SQLite store does) and a
fleet of two or three simulated workers (seeded interleaving of takes and answers) must fetch the same
URLs at every step, each once, start each run with the same counts (``due``, ``not_due``,
``started``) and leave the same records (state, hops, last and next harvest, counters). Every random
choice comes from ``random.Random(SEED + case)``.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from idcrawl.core.scope import Collection, CrawlProfile, Harvest, JobScope, ScopeKind, Seed
from idcrawl.core.urlqueue import MemoryUrlQueue, QueuedUrl, Reconciled
from idcrawl.distributed.urlqueue import RedisUrlQueue
from tests.integration.test_distributed_runs import next_run
from tests.integration.test_redis_urlqueue import FRONT, make_graph

redis = pytest.importorskip("redis")

SEED = 1616
CASES = 60
REVISITS = (None, 10.0, 25.0, 60.0)


Run = tuple[float, list[float], tuple[str, ...], tuple[float | None, ...], tuple[bool, ...]]


def make_plan(rng: random.Random) -> tuple[list[CrawlProfile], list[Run]]:
    """The crawl profiles and the runs: (start time, the clock's steps in the run, the target's crawl
    profiles, each crawl profile's revisit)."""
    profiles = [CrawlProfile(f"p{i}", rng.randint(0, 4), kind=rng.choice((ScopeKind.ANY, ScopeKind.HOST)),
                             collection=rng.choice((None, "news"))) for i in range(rng.randint(1, 3))]
    names = tuple(p.name for p in profiles)
    runs = []
    now = 0.0
    for n in range(rng.randint(2, 5)):
        now += rng.choice((0.0, 5.0, 10.0, 30.0, 70.0))
        steps = sorted({now + rng.choice((0.0, 10.0, 25.0, 40.0)) for _ in range(rng.randint(1, 3))} | {now})
        assigned = names[:-1] if n == 0 and len(names) > 1 and rng.random() < 0.5 else names  # gained in run 2
        runs.append((now, steps, assigned, tuple(rng.choice(REVISITS) for _ in profiles),
                     tuple(rng.random() >= 0.15 for _ in profiles)))  # now and then one deactivated
        now = steps[-1]
    return profiles, runs


def scope_of(profiles: list[CrawlProfile], assigned: tuple[str, ...], revisits: tuple[float | None, ...],
             enabled: tuple[bool, ...]) -> JobScope:
    crawl_profiles = {p.name: replace(p, revisit=r, enabled=on)
                      for p, r, on in zip(profiles, revisits, enabled, strict=True)}
    return JobScope({"front": Seed("front", FRONT, assigned)}, crawl_profiles, {"news": Collection("news")},
                    ("front",))


def answer(queue: Any, graph: dict[str, list[str]], url: str, now: float) -> None:
    links = graph.get(url)
    if links is None:
        queue.failed(url, Harvest.NOT_FOUND, now)
    else:
        queue.fetched(url, links, now)


def memory_run(entries: list[QueuedUrl], scope: JobScope, steps: list[float],
               graph: dict[str, list[str]], marks: dict[str, str]) -> tuple[MemoryUrlQueue, Reconciled, list[set[str]]]:
    queue = MemoryUrlQueue(entries, rng=random.Random(len(entries)), marks=marks)  # as a store keeps them
    reconciled = queue.start(scope, steps[0])
    queue.seed("front", FRONT, steps[0])
    fetched = []
    for now in steps:
        got = []
        while (record := queue.take(lambda _: True, now)) is not None:
            got.append(record.url)
            answer(queue, graph, record.url, now)
        assert len(got) == len(set(got))
        fetched.append(set(got))
    return queue, reconciled, fetched


def fleet_run(client: Any, prefix: str, run: int, scope: JobScope, steps: list[float], graph: dict[str, list[str]],
              rng: random.Random) -> tuple[RedisUrlQueue, Reconciled, list[set[str]]]:
    workers = []
    reconciled = Reconciled()
    for i in range(rng.randint(2, 3)):
        queue = RedisUrlQueue(client, prefix, f"r{run}w{i}", lease_ms=600_000, rng=random.Random(rng.random()))
        started = queue.start(scope, steps[0], run=next_run(client, prefix, queue.worker, 600_000) if i == 0 else None)
        if i == 0:
            reconciled = started
        else:
            assert started == Reconciled()  # the first worker of the fleet reconciles, the others join
        queue.seed("front", FRONT, steps[0])
        workers.append(queue)
    fetched = []
    for now in steps:
        got: list[str] = []
        holding: dict[str, list[str]] = {w.worker: [] for w in workers}
        while True:
            w = rng.choice(workers)
            if holding[w.worker] and rng.random() < 0.5:
                url = holding[w.worker].pop(rng.randrange(len(holding[w.worker])))
                answer(w, graph, url, now)
                continue
            idle = not any(holding.values())
            record = w.take(lambda _, idle=idle: idle or rng.random() < 0.9, now)  # type: ignore[misc]
            if record is not None:
                got.append(record.url)
                holding[w.worker].append(record.url)
            elif idle:
                break  # nothing held, nothing ready or due on any host: the step is over
        assert len(got) == len(set(got)), got  # each URL once across the fleet per due time
        fetched.append(set(got))
    for w in workers:  # the run ends: the fleet leaves
        client.zrem(prefix + "workers", w.worker)
    return workers[0], reconciled, fetched


def records(entries: Any) -> dict[str, tuple[Any, ...]]:
    return {e.url: (e.state, e.record.hops, e.record.last_harvest, e.record.next_harvest, e.record.cycles,
                    e.record.not_found, frozenset(e.record.crawl_profiles)) for e in entries}


def test_a_fleet_revisits_what_one_process_revisits_at_every_step_of_every_run(redis_server) -> None:
    client = redis.Redis.from_url(redis_server.url)
    revisited = started = 0
    for case in range(CASES):
        rng = random.Random(SEED + case)
        graph = make_graph(rng)
        profiles, runs = make_plan(rng)
        prefix = f"rv:{{{case}}}:"
        entries: list[QueuedUrl] = []
        marks: dict[str, str] = {}
        for run, (_, steps, assigned, revisits, enabled) in enumerate(runs):
            scope = scope_of(profiles, assigned, revisits, enabled)
            memory, expected_start, expected = memory_run(entries, scope, steps, graph, marks)
            fleet, fleet_start, got = fleet_run(client, prefix, run, scope, steps, graph, rng)
            where = f"case {case} run {run}: graph={graph} profiles={profiles} runs={runs}"
            assert got == expected, where
            assert (fleet_start.due, fleet_start.not_due, fleet_start.started) == (
                expected_start.due, expected_start.not_due, expected_start.started), where
            assert records(fleet.entries()) == records(memory.entries()), where
            assert fleet.next_harvest() == memory.next_harvest(), where  # a watching worker's wake-up
            entries, marks = memory.entries(), memory.marks
            revisited += run > 0 and any(fetched for fetched in got)
            started += fleet_start.started > 0
    assert revisited >= 20 and started >= 3  # the seeded cases do revisit and re-follow


def two_seeds(a_revisit: float | None, b_revisit: float | None) -> JobScope:
    return JobScope({"a": Seed("a", "http://www.db.no/", ("pa",)), "b": Seed("b", "http://www.vg.no/", ("pb",))},
                    {"pa": CrawlProfile("pa", 2, kind=ScopeKind.ANY, revisit=a_revisit),
                     "pb": CrawlProfile("pb", 2, kind=ScopeKind.ANY, revisit=b_revisit)}, pages=("a", "b"))


@pytest.mark.parametrize(("a_revisit", "b_revisit", "owner"), [
    (None, None, "a"), (100.0, None, "a"), (None, 100.0, "b"), (50.0, 100.0, "a"), (100.0, 50.0, "b"),
    (100.0, 100.0, "a"),
])
def test_in_a_fleet_a_harvested_url_two_seeds_reach_goes_to_the_seed_that_harvests_it_next_first(
    redis_server: Any, a_revisit: float | None, b_revisit: float | None, owner: str,
) -> None:
    """The seed's outlink case 6 (http://www.twatter.gov shares its domain with neither seed) as in
    one process (tests/unit/test_urlqueue_revisit.py): the earliest next harvest wins, a tie keeps b."""
    client = redis.Redis.from_url(redis_server.url)
    prefix = f"own:{{{a_revisit}-{b_revisit}}}:"
    one, two = (RedisUrlQueue(client, prefix, name) for name in ("w1", "w2"))
    for queue in (one, two):
        queue.start(two_seeds(a_revisit, b_revisit), 0.0)
    one.seed("b", "http://www.vg.no/", 0.0)
    for _ in range(2):
        record = one.take(lambda _: True, 0.0)
        assert record is not None
        answer(one, {"http://www.vg.no/": ["http://www.twatter.gov/"], "http://www.twatter.gov/": []}, record.url, 0.0)
    two.seed("a", "http://www.db.no/", 1.0)
    record = two.take(lambda h: h == "www.db.no", 1.0)
    assert record is not None
    two.fetched(record.url, ["http://www.twatter.gov/"], 1.0)  # another worker reaches it from a's page
    entry = two.get("http://www.twatter.gov/")
    assert entry is not None and entry.record.owner == owner and entry.record.cycles == 1
    revisit = a_revisit if owner == "a" else b_revisit
    assert entry.record.next_harvest == revisit  # harvested at 0
