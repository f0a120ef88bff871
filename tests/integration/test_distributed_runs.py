"""Runs of a fleet (``idcrawl.distributed.runs``, ``run.lua``) on a real redis-server, without Scrapy: the
one rule that says which run a starting worker belongs to, which the URL queue (a run's reconcile) and the
resume plans (``resume.lua``) both follow. Time is injected (``now_ms``: the fleet's clock a test drives,
relative to the stamps Redis holds): nothing sleeps."""

from __future__ import annotations

import pickle
import random
from typing import Any

import pytest

from idcrawl.core.urlqueue import QueueState
from idcrawl.distributed.frontier import RedisFrontier
from idcrawl.distributed.job import RedisJob
from idcrawl.distributed.runs import Run, join_run
from idcrawl.distributed.urlqueue import RedisUrlQueue

redis = pytest.importorskip("redis")

LEASE = 60_000  # ms: the workers' lease, the run's grace
PREFIX = "t:{runs}:"
NOT_FOUND = "http://b.test/1"


def redis_now(client: Any) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def next_run(client: Any, prefix: str, worker: str, lease_ms: int = 8_000) -> Run:
    """``worker`` starts the next run of the fleet: it joins on the fleet's clock one grace after the run's
    last join or leave (an injected time: nothing sleeps). For tests whose runs follow one another."""
    at = client.hget(prefix + "run", "at")
    run = join_run(client, prefix, worker, lease_ms=lease_ms,
                   now_ms=(int(at) if at is not None else redis_now(client)) + lease_ms)
    assert run.new
    return run


class Worker:
    """What a ``RedisWorker`` holds of a run: its frontier and the crawl scope's queue, one run for both."""

    def __init__(self, client: Any, name: str, now_ms: int | None = None) -> None:
        self.frontier: RedisFrontier[Any] = RedisFrontier(
            RedisJob(client, PREFIX), name, block=3, lease_ms=LEASE,
            encode=lambda payload: pickle.dumps(payload[2]),
            decode=lambda lane, id_, blob: (lane, id_, pickle.loads(blob)))
        # the worker's start (RedisWorker): it joins the fleet's run once, then plans and starts the queue with it
        self.run = self.frontier.run = join_run(client, PREFIX, name, lease_ms=LEASE, now_ms=now_ms)
        self.queue = RedisUrlQueue(client, PREFIX, name, lease_ms=LEASE, rng=random.Random(1), run=self.run)

    def start(self, now: float) -> tuple[str | None, Any]:
        """Resume the target (``resume=bound``) and start the URL queue: (plan verdict, reconciled)."""
        from tests.integration.test_distributed_resume import target

        t = target(resume="bound")
        self.frontier.add_target(t)
        verdict = self.frontier.resume(t)
        return verdict, self.queue.start(one_seed(), now)

    def leave(self) -> None:
        self.frontier.job.leave(self.frontier.worker)


def one_seed() -> Any:
    from tests.integration.test_redis_urlqueue import one_seed as seed

    return seed(1)


def walks(client: Any) -> dict[str, Any]:
    return {lane: client.hget(PREFIX + "L:" + lane, "walk") for lane in ("reg:asc", "reg:desc")}


def test_a_worker_within_the_grace_joins_the_fleets_run_and_one_after_it_starts_a_new_run_for_both(
    redis_server: Any,
) -> None:
    """Run 1: two workers walk the id target (``resume=bound`` on a fresh job) and the crawl scope (the
    front page links to a page answering 404), then leave. A worker starting within the grace after they
    left (one lease after the last leave, on the injected clock) joins their run for both: it joins the
    plan, no lane is reopened, the queue is not reconciled (the not-found URL is not queued again: the
    seed's rule at a run's start) and it has nothing to send. A worker starting past the grace while one
    of the run is alive joins too. One starting past the grace with nobody alive starts run 2 for both:
    it plans a resume of its own (the cut lanes reopened) and reconciles the queue (the not-found URL
    queued again)."""
    from tests.integration.test_distributed_resume import drive, flaky
    from tests.integration.test_redis_urlqueue import FRONT, answer

    client = redis.Redis.from_url(redis_server.url)
    first = [Worker(client, "a0"), Worker(client, "a1")]
    assert [(w.run.number, w.run.new) for w in first] == [(1, True), (1, False)]
    started = [w.start(0.0) for w in first]
    assert [verdict for verdict, _ in started] == [None, None]  # a fresh job: the fleet's plan "start fresh"
    first[0].queue.seed("front", FRONT, 0.0)
    graph = {FRONT: [NOT_FOUND]}
    for w in [*first, *first]:
        record = w.queue.take(lambda _: True, 0.0)
        if record is not None:
            answer(w.queue, graph, record.url, 0.0)
    entry = first[0].queue.get(NOT_FOUND)
    assert entry is not None and entry.state is QueueState.HARVESTED and entry.record.not_found == 1
    drive([w.frontier for w in first], random.Random(5), flaky(set()))
    walked = walks(client)
    for w in first:
        w.leave()

    left = int(client.hget(PREFIX + "run", "at"))
    late = Worker(client, "late", now_ms=left + LEASE - 1)  # within the grace: run 1
    assert (late.run.number, late.run.new) == (1, False)
    verdict, reconciled = late.start(1.0)
    assert verdict == "joined" and reconciled.requeued == 0
    assert walks(client) == walked, "no lane reopened"
    late.frontier.poll()
    assert late.frontier.next().dispatch is None and late.queue.take(lambda _: True, 1.0) is None, "nothing to send"
    entry = late.queue.get(NOT_FOUND)
    assert entry is not None and entry.state is QueueState.HARVESTED, "not queued again"

    joined = int(client.hget(PREFIX + "run", "at"))
    client.zadd(PREFIX + "workers", {"late": joined + LEASE})  # late's heartbeat: alive
    alive = Worker(client, "alive", now_ms=joined + LEASE + 1)  # past the grace, with a worker of the run alive
    assert (alive.run.number, alive.run.new) == (1, False)
    assert alive.start(1.0)[0] == "joined"
    late.leave()
    alive.leave()

    left = int(client.hget(PREFIX + "run", "at"))
    new = Worker(client, "new", now_ms=left + LEASE)  # past the grace, nobody alive: run 2
    assert (new.run.number, new.run.new) == (2, True)
    verdict, reconciled = new.start(2.0)
    assert verdict == "created" and reconciled.requeued == 1
    assert all(int(walk or 0) == int(walked[lane] or 0) + 1 for lane, walk in walks(client).items()), "lanes reopened"
    entry = new.queue.get(NOT_FOUND)
    assert entry is not None and entry.state is QueueState.QUEUED
    new.frontier.poll()
    assert new.frontier.next().dispatch is not None


def test_a_later_wave_starts_a_run_at_once_and_a_wave_names_its_run(redis_server: Any) -> None:
    """Watch mode: a wave's workers join its run whatever the time, a later wave starts its own at once (the
    last wave's grace and a worker of it alive do not hold it back), one late for an earlier wave joins the
    wave in progress; a run without a wave after the grace is a new run."""
    client = redis.Redis.from_url(redis_server.url)
    now = redis_now(client)

    def join(worker: str, wave: int | None, at: int) -> Run:
        return join_run(client, PREFIX, worker, lease_ms=LEASE, wave=wave, now_ms=at)

    assert join("w1", None, now) == Run(1, True)
    assert join("w2", 1000, now + 1) == Run(2, True), "a later wave, w1 alive"
    assert join("w3", 1000, now + 10 * LEASE) == Run(2, False), "the wave's run, past its grace"
    assert join("w4", 900, now + 10 * LEASE) == Run(2, False), "late for an earlier wave"
    assert join("w5", 2000, now + 10 * LEASE) == Run(3, True)
    assert join("w6", None, now + 10 * LEASE + 1) == Run(3, False), "a due run within the wave's grace"
    client.zrem(PREFIX + "workers", *[f"w{n}" for n in range(1, 7)])  # they left the job
    assert join("w7", None, now + 30 * LEASE).number == 4, "past the grace, nobody in the job"


def test_a_refused_worker_puts_back_the_run_it_started_unless_another_worker_joined_it(redis_server: Any) -> None:
    """A worker refused after RUN (bad input) leaves as if it had never started: a run it started is put back
    as it was (``P run``'s n, wave and at), or removed if there was none. A run another worker joined
    between the two stays, for that worker; so does a run that is no longer the refused worker's."""
    from idcrawl.distributed.runs import refused

    client = redis.Redis.from_url(redis_server.url)
    prefix = "t:{refused}:"
    run_key, workers = prefix + "run", prefix + "workers"
    first = join_run(client, prefix, "first", lease_ms=LEASE, now_ms=1_000)
    assert (first.number, first.new) == (1, True)
    assert refused(client, prefix, "first", first) is True
    assert not client.exists(run_key) and client.zcard(workers) == 0, "no run before it: none after"

    join_run(client, prefix, "old", lease_ms=LEASE, now_ms=1_000)
    client.zrem(workers, "old")  # it left the job (release_worker sets at; the test leaves it at 1,000)
    before = client.hgetall(run_key)
    lone = join_run(client, prefix, "lone", lease_ms=LEASE, now_ms=1_000 + LEASE)
    assert (lone.number, lone.new) == (2, True)
    assert refused(client, prefix, "lone", lone) is True
    assert client.hgetall(run_key) == before and client.zcard(workers) == 0, "the run as it was"

    starter = join_run(client, prefix, "starter", lease_ms=LEASE, now_ms=1_000 + LEASE)
    other = join_run(client, prefix, "other", lease_ms=LEASE, now_ms=1_000 + LEASE + 1)
    assert (starter.number, starter.new, other.number, other.new) == (2, True, 2, False)
    during = client.hgetall(run_key)
    assert refused(client, prefix, "starter", starter) is False
    assert client.hgetall(run_key) == during, "the run another worker joined stays"
    assert [w.decode() for w in client.zrange(workers, 0, -1)] == ["other"]

    assert refused(client, prefix, "other", other) is False  # it joined, it did not start: nothing to put back
    assert client.hgetall(run_key) == during and client.zcard(workers) == 0
    later = join_run(client, prefix, "later", lease_ms=LEASE, now_ms=10 * LEASE)
    assert (later.number, later.new) == (3, True)
    client.hset(run_key, "n", 4)  # the run moved on (its heartbeat was reclaimed and another worker started run 4)
    moved = client.hgetall(run_key)
    assert refused(client, prefix, "later", later) is False
    assert client.hgetall(run_key) == moved


def _run_one_with_a_not_found_url(client: Any) -> None:
    """Run 1 of the job: one worker walks the crawl scope (the front page links to a page answering 404) and
    leaves; the next run's reconcile queues the not-found URL again (the seed's rule at a run's start)."""
    from tests.integration.test_redis_urlqueue import FRONT, answer

    first = Worker(client, "a0")
    first.queue.start(one_seed(), 0.0)
    first.queue.seed("front", FRONT, 0.0)
    for _ in range(2):
        record = first.queue.take(lambda _: True, 0.0)
        assert record is not None
        answer(first.queue, {FRONT: [NOT_FOUND]}, record.url, 0.0)
    first.leave()


def test_a_joining_worker_takes_nothing_before_the_worker_that_started_the_run_reconciled_it(
    redis_server: Any,
) -> None:
    """Workers of a fleet start together: one starts run 2, another joins it before the first has reconciled
    the queue. The joiner waits (it would otherwise take URLs under the last run's scope, and the run's
    reconcile would count nothing: seen in CI as a due revisit fetched but not counted) and goes on once the
    starter marked the run reconciled. The starter is alive throughout (the lease is a minute): the joiner
    still waiting after half a second is the rule, not a timing."""
    import threading

    client = redis.Redis.from_url(redis_server.url)
    _run_one_with_a_not_found_url(client)
    left = int(client.hget(PREFIX + "run", "at"))
    starter = Worker(client, "starter", now_ms=left + LEASE)
    joiner = Worker(client, "joiner", now_ms=left + LEASE + 1)
    assert (starter.run.new, joiner.run.new, joiner.run.number) == (True, False, 2)
    results: list[Any] = []
    waiting = threading.Thread(target=lambda: results.append(joiner.queue.start(one_seed(), 2.0)), daemon=True)
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive() and not results, "the joiner returned before the run was reconciled"
    entry = joiner.queue.get(NOT_FOUND)
    assert entry is not None and entry.state is QueueState.HARVESTED
    assert starter.queue.start(one_seed(), 2.0).requeued == 1
    waiting.join(30)
    assert not waiting.is_alive() and results[0].requeued == 0, "reconciled once, by the starter"
    assert joiner.queue.take(lambda _: True, 2.0) is not None


def test_a_joining_worker_reconciles_the_run_itself_when_its_starter_stopped_first(redis_server: Any) -> None:
    """The worker that started run 2 stopped before reconciling it (left the job, or its heartbeat is older
    than the lease): the joiner reconciles the queue itself and marks the run, so a third worker goes on."""
    client = redis.Redis.from_url(redis_server.url)
    _run_one_with_a_not_found_url(client)
    left = int(client.hget(PREFIX + "run", "at"))
    starter = Worker(client, "starter", now_ms=left + LEASE)
    joiner = Worker(client, "joiner", now_ms=left + LEASE + 1)
    client.zadd(PREFIX + "workers", {"joiner": left + 2 * LEASE})  # alive while the starter is gone
    starter.leave()
    assert joiner.queue.start(one_seed(), 2.0).requeued == 1
    assert client.hget(PREFIX + "run", "ready") == b"2"
    third = Worker(client, "third", now_ms=left + LEASE + 2)
    assert (third.run.number, third.queue.start(one_seed(), 2.0).requeued) == (2, 0)
