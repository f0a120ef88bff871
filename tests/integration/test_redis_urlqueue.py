"""The shared URL queue (``RedisUrlQueue``, the ``URL_*`` scripts on a real redis-server) against the
in-memory queue (:class:`idcrawl.core.urlqueue.MemoryUrlQueue`) and the breadth-first walk.

A fleet of three simulated workers (one :class:`~idcrawl.distributed.urlqueue.RedisUrlQueue` each,
one job) walks seeded random link graphs: at each step a seeded draw picks a worker and what it does
(take a ready URL of a host, or answer one it holds and offer the page's links); in some cases a
worker is killed holding URLs, and a replacement joins. Whatever the interleaving, the fleet fetches
the URLs the in-memory queue fetches, each once (a killed worker's taken URLs once more, by another
worker), with the same hops. Every random choice comes from ``random.Random(SEED + case)``.
"""

from __future__ import annotations

import random
from collections import Counter
from math import sqrt
from typing import Any

import pytest

from idcrawl.core.scope import Collection, CrawlProfile, Harvest, Hops, JobScope, ScopeKind, Seed
from idcrawl.core.urlqueue import MemoryUrlQueue, QueueState, UrlCount, count_urls
from idcrawl.distributed.runs import SitemapReading, claim_sitemaps, sitemap_reading, sitemaps_read, worker_alive
from idcrawl.distributed.state import JobStateStore
from idcrawl.distributed.urlqueue import BATCH, HOSTS_PER_CALL, RedisUrlQueue
from tests.integration.test_distributed_runs import next_run
from tests.support.reference import scope_truth

redis = pytest.importorskip("redis")

SEED = 16
CASES = 120
HOSTS = ("a.test", "b.test", "c.test")
FRONT = "http://a.test/0"


def make_graph(rng: random.Random) -> dict[str, list[str]]:
    pages = [f"http://{rng.choice(HOSTS[:1] * 3 + HOSTS)}/{i}" for i in range(rng.randint(4, 30))]
    pages[0] = FRONT
    graph = {page: [rng.choice(pages) for _ in range(rng.randint(1, 6))] for page in pages}
    for page in rng.sample(pages[1:], len(pages) // 5):  # some pages answer 404
        del graph[page]
    return graph


def make_scope(rng: random.Random) -> JobScope:
    kind = rng.choice((ScopeKind.HOST, ScopeKind.ANY))
    offsite = rng.choice((None, 0, 1, 2)) if kind is ScopeKind.ANY else None
    profile = CrawlProfile("p", max_hops=rng.randint(0, 6), kind=kind, max_offsite_hops=offsite)
    return JobScope({"front": Seed("front", FRONT, ("p",))}, {"p": profile}, {}, ("front",))


def answer(queue: Any, graph: dict[str, list[str]], url: str, now: float = 0.0) -> None:
    links = graph.get(url)
    if links is None:
        queue.failed(url, Harvest.NOT_FOUND, now)
    else:
        queue.fetched(url, links, now)


def memory_walk(graph: dict[str, list[str]], scope: JobScope, rng: random.Random) -> dict[str, Hops]:
    """What one process fetches (each URL once), with the hops its queue ends with."""
    queue = MemoryUrlQueue(rng=random.Random(rng.random()))
    queue.start(scope, 0.0)
    queue.seed("front", FRONT, 0.0)
    fetched = []
    while (record := queue.take(lambda _: True, 0.0)) is not None:
        fetched.append(record.url)
        answer(queue, graph, record.url)
    assert len(fetched) == len(set(fetched))
    return {url: queue.get(url).record.hops for url in fetched}  # type: ignore[union-attr]


def check_host_index(client: Any, prefix: str) -> None:
    """The running host index and ready count (``P uhostz``, ``P uready``) equal a recount of ``P uhosts``,
    itself a recount of the ready queues ``P uq:<host>/<group>``."""
    queues: Counter[str] = Counter()
    for key in client.scan_iter(match=f"{prefix}uq:*".replace("{", "[{]").replace("}", "[}]")):
        host = key.decode()[len(prefix) + 3:].split("/", 1)[0]
        queues[host] += client.zcard(key)
    hosts = {k.decode(): int(v) for k, v in client.hgetall(prefix + "uhosts").items()}
    assert hosts == {h: n for h, n in queues.items() if n}
    assert {h.decode() for h in client.zrange(prefix + "uhostz", 0, -1)} == set(hosts)
    assert int(client.get(prefix + "uready") or 0) == sum(hosts.values())


def fleet_walk(client: Any, case: int, graph: dict[str, list[str]], scope: JobScope,
               rng: random.Random) -> tuple[Counter[str], dict[str, Hops], int]:
    """The fleet's walk: fetches per URL, final hops, URLs given back from a killed worker."""
    prefix = f"t:{{{case}}}:"

    def worker(name: str) -> RedisUrlQueue:
        queue = RedisUrlQueue(client, prefix, name, lease_ms=60_000, rng=random.Random(rng.random()))
        queue.start(scope, 0.0)
        return queue

    workers = [worker(f"w{i}") for i in range(3)]
    fetched: Counter[str] = Counter()
    holding: dict[str, list[str]] = {w.worker: [] for w in workers}
    for w in workers:  # every worker starts the page target: queued once
        w.seed("front", FRONT, 0.0)
    given_back = killed = 0
    while True:
        status = workers[0].poll()
        given_back += status.given_back
        check_host_index(client, prefix)
        if not (status.ready or status.taken_by_others or status.taken_here) and not any(holding.values()):
            break
        w = rng.choice(workers)
        if holding[w.worker] and (rng.random() < 0.5 or not status.ready):
            url = holding[w.worker].pop(rng.randrange(len(holding[w.worker])))
            fetched[url] += 1
            answer(w, graph, url)
        elif status.ready:
            record = w.take(lambda _: rng.random() < 0.8, 0.0)
            if record is not None:
                holding[w.worker].append(record.url)
                if killed < 1 and rng.random() < 0.05:  # killed holding URLs: another worker fetches them
                    killed += 1
                    fetched.update(holding[w.worker][:-1])  # fetched, never answered in Redis
                    holding[w.worker] = []
                    client.zrem(prefix + "workers", w.worker)  # its lease ran out, or a replacement took over
                    workers[workers.index(w)] = replacement = worker(f"r{killed}")
                    holding[replacement.worker] = []
    hops = {}
    for url in fetched:
        entry = workers[0].get(url)
        assert entry is not None and entry.state is QueueState.HARVESTED
        hops[url] = entry.record.hops
    return fetched, hops, given_back


def test_a_fleet_fetches_what_one_process_fetches_each_url_once_with_the_same_hops(redis_server) -> None:
    client = redis.Redis.from_url(redis_server.url)
    kills = 0
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
        kills += given_back > 0
        if scope.crawl_profiles["p"].kind is ScopeKind.HOST:
            truth = scope_truth(graph, FRONT, scope.crawl_profiles["p"].max_hops, lambda u: u.startswith("http://a."))
            assert {url: h.hops for url, h in hops.items()} == truth, where
    assert kills >= 10  # the seeded cases do kill workers that hold URLs


def run(client: Any, prefix: str, scope: JobScope, name: str, graph: dict[str, list[str]],
        now: float) -> tuple[RedisUrlQueue, list[str]]:
    """One run of one worker: start, seed, take and answer until nothing is ready, leave."""
    queue = RedisUrlQueue(client, prefix, name, rng=random.Random(1))
    queue.start(scope, now, run=next_run(client, prefix, name))  # a run of its own
    queue.seed("front", FRONT, now)
    fetched = []
    while (record := queue.take(lambda _: True, now)) is not None:
        fetched.append(record.url)
        answer(queue, graph, record.url, now)
    client.zrem(prefix + "workers", name)
    return queue, fetched


def one_seed(max_hops: int, *, news: bool = True, enabled: bool = True) -> JobScope:
    return JobScope({"front": Seed("front", FRONT, ("p",))},
                    {"p": CrawlProfile("p", max_hops, kind=ScopeKind.ANY, collection="news")},
                    {"news": Collection("news", enabled=enabled)} if news else {}, ("front",))


def test_a_url_answering_404_404_200_in_three_runs_counts_not_found_1_2_0_and_3_cycles(redis_server) -> None:
    client = redis.Redis.from_url(redis_server.url)
    seen = []
    for n, graph in enumerate([{FRONT: ["http://b.test/1"]}] * 2 + [{FRONT: [], "http://b.test/1": []}]):
        queue, fetched = run(client, "t:{counts}:", one_seed(1), f"w{n}", graph, float(n))
        assert fetched == ([FRONT, "http://b.test/1"] if n == 0 else ["http://b.test/1"])  # the front page once
        entry = queue.get("http://b.test/1")
        assert entry is not None
        seen.append((entry.record.not_found, entry.record.cycles, entry.record.last_harvest))
    assert seen == [(1, 1, 0.0), (2, 2, 1.0), (0, 3, 2.0)]


def test_a_collection_deactivated_in_run_2_postpones_and_run_3_finishes_the_walk_each_url_once(redis_server) -> None:
    client = redis.Redis.from_url(redis_server.url)
    graph = {FRONT: ["http://b.test/1", "http://c.test/2"], "http://b.test/1": ["http://a.test/3"],
             "http://c.test/2": [], "http://a.test/3": []}
    prefix = "t:{deactivate}:"
    queue = RedisUrlQueue(client, prefix, "w1")
    queue.start(one_seed(3), 0.0)
    queue.seed("front", FRONT, 0.0)
    assert queue.take(lambda _: True, 0.0) is not None
    answer(queue, graph, FRONT)
    client.zrem(prefix + "workers", "w1")  # run 1 stopped after the front page
    queue, second = run(client, prefix, one_seed(3, enabled=False), "w2", graph, 1.0)
    assert second == [] and queue.poll().postponed == 2
    entry = queue.get("http://b.test/1")
    assert entry is not None and entry.state is QueueState.POSTPONED and entry.record.next_harvest == 3601.0
    queue, third = run(client, prefix, one_seed(3), "w3", graph, 2.0)
    assert third in (["http://b.test/1", "http://c.test/2", "http://a.test/3"],
                     ["http://c.test/2", "http://b.test/1", "http://a.test/3"])
    assert queue.counts() == [UrlCount("front", "p", "news", h, QueueState.HARVESTED, n)
                              for h, n in ((0, 1), (1, 2), (2, 1))]
    # deleting the collection (its crawl profile with it) drops the job's URLs
    reconciled = RedisUrlQueue(client, prefix, "w4").start(
        JobScope({"front": Seed("front", FRONT, ())}, {}, {}, ("front",)), 3.0, run=next_run(client, prefix, "w4"))
    assert reconciled.forgotten == 4 and queue.counts() == []


def test_a_taken_url_is_exclusive_and_ready_again_when_its_worker_stops(redis_server) -> None:
    client = redis.Redis.from_url(redis_server.url)
    scope = one_seed(1)
    one, two = (RedisUrlQueue(client, "t:{lease}:", name, lease_ms=60_000) for name in ("w1", "w2"))
    one.start(scope, 0.0)
    two.start(scope, 0.0)
    one.seed("front", FRONT, 0.0)
    assert two.seed("front", FRONT, 0.0) is None  # queued once for the fleet
    assert one.take(lambda _: True, 0.0) is not None
    assert two.take(lambda _: True, 0.0) is None  # taken: nobody else gets it
    assert two.ready() == 1  # one.take's page may queue more: two is not finished
    client.zrem("t:{lease}:workers", "w1")  # w1 left the job (LEAVE, or its lease ran out)
    status = two.poll()
    assert (status.given_back, status.ready, status.taken_by_others) == (1, 1, 0)
    record = two.take(lambda _: True, 0.0)
    assert record is not None and record.url == FRONT
    assert two.give_back() == 1 and two.poll().ready == 1  # a worker leaving gives back what it took
    assert (one.taken_over, two.taken_over) == (0, 1)


def test_a_worker_that_starts_the_fleets_run_counts_the_stopped_workers_urls_it_takes_over(redis_server) -> None:
    """The first worker of a fleet's run makes a stopped worker's taken URLs ready again in its start,
    before any poll: they count as taken over too (``idcrawl/redis/urls_taken_over``; a worker whose
    start-up lagged a killed one's by more than the lease counted none)."""
    client = redis.Redis.from_url(redis_server.url)
    scope = one_seed(1)
    killed = RedisUrlQueue(client, "t:{late}:", "w1", lease_ms=60_000)
    killed.start(scope, 0.0)
    killed.seed("front", FRONT, 0.0)
    assert killed.take(lambda _: True, 0.0) is not None
    client.zrem("t:{late}:workers", "w1")  # killed, and its lease ran out before another worker started
    late = RedisUrlQueue(client, "t:{late}:", "w2", lease_ms=60_000)
    late.start(scope, 0.0, run=next_run(client, "t:{late}:", "w2", 60_000))
    assert late.taken_over == 1 and late.poll().given_back == 0 and late.taken_over == 1
    record = late.take(lambda _: True, 0.0)
    assert record is not None and record.url == FRONT


DRAWS = 2000


def test_yields_over_2000_takes_on_one_host_follow_the_seed_example(redis_server) -> None:
    """1 "frontpages" URL and 19 "daily" URLs (yield 0.9) ready on one host: "frontpages" gets the
    slot with probability 1/20 + 19/20 * 0.9 = 0.905. Each take is given back, so the 20 stay ready."""
    client = redis.Redis.from_url(redis_server.url)
    scope = JobScope({"s": Seed("s", FRONT, ("frontpages", "daily"))},
                     {"frontpages": CrawlProfile("frontpages", 1, kind=ScopeKind.ANY, collection="news"),
                      "daily": CrawlProfile("daily", 2, kind=ScopeKind.ANY, collection="news",
                                            yield_probability=0.9)},
                     {"news": Collection("news")}, ("s",))
    queue = RedisUrlQueue(client, "t:{yields}:", "w1", rng=random.Random(2026))
    queue.start(scope, 0.0)
    for i in range(19):
        queue._offer_call(f"http://a.test/d{i}", "s", ("daily",), Hops(1), "link", 0.0)
    queue._offer_call("http://a.test/front", "s", ("frontpages",), Hops(1), "link", 0.0)
    wins = 0
    for _ in range(DRAWS):
        record = queue.take(lambda _: True, 0.0)
        assert record is not None
        wins += record.url == "http://a.test/front"
        assert queue.give_back() == 1
    p = 1 / 20 + 19 / 20 * 0.9
    mean, sd = DRAWS * p, sqrt(DRAWS * p * (1 - p))
    assert abs(wins - mean) <= 3 * sd, (wins, mean, sd)  # seeded: reproducible, cannot fail by chance


def test_the_job_state_store_reads_the_fleets_queue_in_url_order_batch_by_batch(redis_server) -> None:
    """What ``scrapy idplan`` counts of a distributed job (``JobStateStore.load_urls``): every URL of the
    shared queue as the workers left it, read ``BATCH`` URLs per round trip, taken ones counted queued."""
    client = redis.Redis.from_url(redis_server.url)
    links = [f"http://b.test/{i}" for i in range(BATCH * 2 + 200)]
    prefix = "idcrawl:{plan}:"
    queue = RedisUrlQueue(client, prefix, "w1", rng=random.Random(1))
    queue.start(one_seed(1), 0.0)
    queue.seed("front", FRONT, 0.0)
    assert queue.take(lambda _: True, 0.0) is not None
    queue.fetched(FRONT, links, 0.0)
    for n in range(301):  # 300 answered (every third not found), one taken and not answered
        record = queue.take(lambda _: True, 0.0)
        assert record is not None
        if n < 300:
            answer(queue, {url: [] for url in links[::3]}, record.url)
    stored = JobStateStore(client, prefix, read_only=True).load_urls()
    assert [entry.url for entry in stored] == sorted([FRONT, *links])
    assert stored == sorted(queue.entries(), key=lambda entry: entry.url)
    assert count_urls(stored) == [UrlCount("front", "p", "news", 0, QueueState.HARVESTED, 1),
                                  UrlCount("front", "p", "news", 1, QueueState.HARVESTED, 300),
                                  UrlCount("front", "p", "news", 1, QueueState.QUEUED, len(links) - 300)]
    assert JobStateStore(client, "idcrawl:{other}:", read_only=True).load_urls() == []


def test_the_fleet_takes_the_highest_sitemap_priority_of_a_group_first_and_keeps_it(redis_server) -> None:
    client = redis.Redis.from_url(redis_server.url)
    scope = JobScope({"front": Seed("front", FRONT, ("p",))}, {"p": CrawlProfile("p", 0)}, {}, ("front",))
    one, two = (RedisUrlQueue(client, "t:{pri}:", name, lease_ms=60_000, rng=random.Random(7)) for name in ("w1", "w2"))
    one.start(scope, 0.0)
    two.start(scope, 0.0)
    priorities = [0.1, 0.9, 0.3, 0.7, 0.0, 1.0, 0.2, 0.8, 0.4, 0.6]
    for i, priority in enumerate(priorities):
        (one if i % 2 else two).seed("front", f"http://a.test/{i}", 0.0, priority=priority)
    one.seed("front", "http://a.test/link", 0.0)  # no priority: 0.5
    two.seed("front", "http://a.test/4", 0.0, priority=0.95)  # listed again: kept for the fleet
    assert two.get("http://a.test/4").record.priority == 0.95  # type: ignore[union-attr]
    taken = []
    while (record := (one, two)[len(taken) % 2].take(lambda _: True, 0.0)) is not None:
        taken.append(record.priority)
    assert taken == [1.0, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]


def test_one_worker_of_each_fleet_run_claims_the_sitemaps(redis_server) -> None:
    client = redis.Redis.from_url(redis_server.url)
    prefix = "t:{maps}:"
    scope = one_seed(1)
    one, two = (RedisUrlQueue(client, prefix, name, lease_ms=60_000) for name in ("w1", "w2"))
    one.start(scope, 0.0)
    two.start(scope, 0.0)
    assert one.run is not None and two.run is not None and one.run.number == two.run.number
    asks = ((one.run, "w1"), (two.run, "w2"), (one.run, "w1"))
    assert [claim_sitemaps(client, prefix, run, name) for run, name in asks] == [True, False, False]
    client.zrem(prefix + "workers", "w1", "w2")  # the run is over
    three = RedisUrlQueue(client, prefix, "w3", lease_ms=60_000, run=next_run(client, prefix, "w3", 60_000))
    three.start(scope, 0.0)
    assert three.run is not None and claim_sitemaps(client, prefix, three.run, "w3")  # the next run: read again, once
    assert 0 < client.ttl(f"{prefix}sitemaps:{three.run.number}") <= 7 * 86400
    # the reader leaves: done, and when what it made due wakes a watch's wave (the others wait till then)
    assert sitemap_reading(client, prefix, three.run) == SitemapReading("w3", False, None)
    assert worker_alive(client, prefix, "w3", lease_ms=60_000)
    sitemaps_read(client, prefix, three.run, 100.0, 150.5)
    assert sitemap_reading(client, prefix, three.run) == SitemapReading("w3", True, 150.5)
    client.zrem(prefix + "workers", "w3")
    assert not worker_alive(client, prefix, "w3", lease_ms=60_000)


def test_a_take_reads_a_few_hosts_however_many_have_ready_urls_and_visits_them_all_in_turn(redis_server) -> None:
    """300 hosts with a ready URL each: each ``URL_DUE`` names at most ``HOSTS_PER_CALL`` of them, and takes
    that admit only every other host still go round all of them, each taken once."""
    client = redis.Redis.from_url(redis_server.url)
    scope = JobScope({"front": Seed("front", FRONT, ("p",))}, {"p": CrawlProfile("p", 1, kind=ScopeKind.ANY)}, {},
                     ("front",))
    prefix = "t:{hosts}:"
    queue = RedisUrlQueue(client, prefix, "w1", lease_ms=60_000)
    queue.start(scope, 0.0)
    queue.seed("front", FRONT, 0.0)
    assert queue.take(lambda _: True, 0.0) is not None
    hosts = [f"h{n:03d}.test" for n in range(300)]
    queue.fetched(FRONT, [f"http://{h}/1" for h in hosts], 0.0)
    check_host_index(client, prefix)
    names: list[int] = []
    due = queue._due

    def counted(*args: Any, **kwargs: Any) -> Any:
        reply = due(*args, **kwargs)
        names.append(len(reply) - 1)
        return reply

    queue._due = counted  # type: ignore[method-assign]
    taken = []
    for turn in range(600):
        record = queue.take(lambda host, turn=turn: int(host[1:4]) % 2 == turn % 2, 0.0)
        if record is not None:
            taken.append(record.url)
    assert max(names) <= HOSTS_PER_CALL
    assert sorted(taken) == sorted(f"http://{h}/1" for h in hosts)
    check_host_index(client, prefix)
