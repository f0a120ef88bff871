"""The shared URL queue (``URL_*`` scripts on a real redis-server) against the in-memory walk.

A fleet of simulated workers (one :class:`idcrawl.distributed.urlqueue.RedisUrlQueue` each, on
one job) walks seeded random link graphs: at each step a seeded draw picks a worker and what it
does (take a ready URL of some host, or harvest one it holds, whose links it then offers; some
workers are killed holding URLs). Whatever the interleaving, the fleet fetches the URLs the
in-memory :class:`idcrawl.core.scope.ScopeWalk` queues, each once (a killed worker's URLs once
more, by another worker), with the same hops (:func:`tests.support.reference.scope_states_truth`
for the off-site counter). Every random choice comes from ``random.Random(SEED + case)``.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from idcrawl.core.scope import (
    CrawlProfile,
    Harvest,
    Hops,
    JobScope,
    ScopeKind,
    ScopeWalk,
    Seed,
    UrlRecord,
    harvested,
    host_of,
)
from idcrawl.distributed.urlqueue import RedisUrlQueue

redis = pytest.importorskip("redis")

SEED = 16
CASES = 120
HOSTS = ("a.test", "b.test", "c.test")


def make_graph(rng: random.Random) -> dict[str, list[str]]:
    pages = [f"http://{rng.choice(HOSTS[:1] * 3 + HOSTS)}/{i}" for i in range(rng.randint(4, 30))]
    pages[0] = "http://a.test/0"
    graph = {page: [rng.choice(pages) for _ in range(rng.randint(1, 6))] for page in pages}
    for page in rng.sample(pages, len(pages) // 5):  # some pages answer 404
        del graph[page]
    graph.setdefault(pages[0], [rng.choice(pages)])
    return graph


def make_scope(rng: random.Random) -> JobScope:
    kind = rng.choice((ScopeKind.HOST, ScopeKind.ANY))
    offsite = rng.choice((None, 0, 1, 2)) if kind is ScopeKind.ANY else None
    profile = CrawlProfile("p", max_hops=rng.randint(0, 6), kind=kind, max_offsite_hops=offsite)
    return JobScope({"front": Seed("front", "http://a.test/0", ("p",))}, {"p": profile}, {}, ("front",))


def memory_walk(graph: dict[str, list[str]], scope: JobScope, rng: random.Random) -> dict[str, Hops]:
    """The in-memory walk, pages fetched in a random order: what it queued, with its final hops."""
    walk = ScopeWalk(scope)
    record = walk.seed("front", "http://a.test/0")
    assert record is not None
    queue, queued = [record.url], [record.url]
    while queue:
        url = queue.pop(rng.randrange(len(queue)))
        new = walk.fetched(url, graph.get(url, ()))
        queue += [r.url for r in new]
        queued += [r.url for r in new]
    assert len(queued) == len(set(queued))
    return {url: walk.record(url).hops for url in queued}  # type: ignore[union-attr]


def fleet_walk(client: Any, case: int, graph: dict[str, list[str]], scope: JobScope,
               rng: random.Random) -> tuple[Counter[str], dict[str, Hops], int]:
    """The fleet's walk: fetch counts, final hops, URLs given back from killed workers."""
    prefix = f"t:{{{case}}}:"
    workers = [RedisUrlQueue(client, prefix, scope, f"w{i}", lease_ms=60_000, rng=random.Random(rng.random()))
               for i in range(3)]
    fetched: Counter[str] = Counter()
    holding: dict[str, list[str]] = {w.worker: [] for w in workers}
    for w in workers:  # every worker starts the page target: queued once
        w.seed("front", "http://a.test/0")
    given_back = 0
    killed = 0
    while True:
        status = workers[0].poll()
        given_back += status.given_back
        if status.empty and not any(holding.values()):
            break
        w = rng.choice(workers)
        if holding[w.worker] and (rng.random() < 0.5 or not status.hosts):
            url = holding[w.worker].pop(rng.randrange(len(holding[w.worker])))
            fetched[url] += 1
            links = graph.get(url)
            w.harvested(url, Harvest.FOUND if links is not None else Harvest.NOT_FOUND, 1.0, links=links or ())
        elif status.hosts:
            record = w.take(rng.choice(sorted(status.hosts)))
            if record is not None:
                holding[w.worker].append(record.url)
                if killed < 1 and rng.random() < 0.05:  # killed holding its URLs: another worker fetches them
                    killed += 1
                    fetched.update(holding[w.worker][:-1])  # it fetched the others, never recorded
                    holding[w.worker] = []
                    client.zrem(prefix + "workers", w.worker)
                    replacement = RedisUrlQueue(client, prefix, scope, f"r{killed}", lease_ms=60_000,
                                                rng=random.Random(rng.random()))
                    workers[workers.index(w)] = replacement
                    holding[replacement.worker] = []
    hops = {}
    for url in fetched:
        record = workers[0].record(url)
        assert record is not None
        hops[url] = record.hops
    return fetched, hops, given_back


def test_a_fleet_fetches_what_one_process_queues_each_url_once_with_its_shortest_hops(redis_server) -> None:
    client = redis.Redis.from_url(redis_server.url)
    for case in range(CASES):
        rng = random.Random(SEED + case)
        graph, scope = make_graph(rng), make_scope(rng)
        expected = memory_walk(graph, scope, rng)
        fetched, hops, given_back = fleet_walk(client, case, graph, scope, rng)
        where = f"case {case}: graph={graph} scope={scope.crawl_profiles['p']}"
        assert set(fetched) == set(expected), where
        assert hops == expected, where
        # each URL once, except what a killed worker held (fetched by it, then by another)
        assert sum(fetched.values()) - len(fetched) <= given_back, where


def test_a_harvest_counts_as_the_core_counts(redis_server) -> None:
    """Not-found, error and cycle counters of a URL harvested 404, 404, error, 200 (the core's rule)."""
    client = redis.Redis.from_url(redis_server.url)
    scope = JobScope({"front": Seed("front", "http://a.test/0", ("p",))}, {"p": CrawlProfile("p", 1)}, {}, ("front",))
    queue = RedisUrlQueue(client, "t:{counts}:", scope, "w0")
    queue.seed("front", "http://a.test/0")
    model = UrlRecord("http://a.test/0", "front", None, ("p",))
    for now, result in enumerate((Harvest.NOT_FOUND, Harvest.NOT_FOUND, Harvest.ERROR, Harvest.FOUND), 1):
        queue.harvested("http://a.test/0", result, float(now))
        model = harvested(model, result, float(now))
        assert queue.record("http://a.test/0") == model


def test_a_taken_url_is_exclusive_and_comes_back_when_its_worker_stops(redis_server) -> None:
    client = redis.Redis.from_url(redis_server.url)
    scope = JobScope({"front": Seed("front", "http://a.test/0", ("p",))}, {"p": CrawlProfile("p", 1)}, {}, ("front",))
    one, two = (RedisUrlQueue(client, "t:{lease}:", scope, name, lease_ms=60_000) for name in ("w1", "w2"))
    one.seed("front", "http://a.test/0")
    assert one.take("a.test") is not None
    assert two.take("a.test") is None  # taken: nobody else gets it
    assert two.poll().taken == 1
    client.zrem("t:{lease}:workers", "w1")  # w1 left the job (LEAVE, or a lease that ran out)
    status = two.poll()
    assert (status.given_back, status.ready, status.taken) == (1, 1, 0)
    record = two.take(host_of("http://a.test/0"))
    assert record is not None and record.url == "http://a.test/0"
