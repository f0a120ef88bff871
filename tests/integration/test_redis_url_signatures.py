"""What a crawl-scope page's harvest read, kept in the fleet's URL queue (``U:<url>``'s ``sum``, ``etag``,
``lm``, ``cap``, set by ``URL_HARVEST``) as the in-memory queue keeps it (tests/unit/test_url_signatures.py):
seeded cases of 200s (held until written or not), 304s, 404s and errors against ``url_news_truth``, each
answer by one of two workers. Every random choice comes from ``random.Random(SEED + case)``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from idcrawl.distributed.urlqueue import RedisUrlQueue
from tests.integration.test_distributed_runs import next_run
from tests.unit.test_url_signatures import FRONT, SCOPE, check

redis = pytest.importorskip("redis")

SEED = 3133
CASES = 40


class Fleet:
    """Two workers' queues of one job: each call goes to one of them, drawn by ``rng``; a take and the
    answers to it go to the same worker."""

    def __init__(self, queues: list[RedisUrlQueue], rng: random.Random) -> None:
        self.queues = queues
        self.rng = rng
        self.current = queues[0]

    def take(self, *args: Any) -> Any:
        self.current = self.rng.choice(self.queues)
        return self.current.take(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.current, name)


def test_the_fleets_queue_keeps_what_a_harvest_read_as_the_reference_says(redis_server: Any) -> None:
    client = redis.Redis.from_url(redis_server.url)
    for case in range(CASES):
        rng = random.Random(SEED + case)
        prefix = f"t:{{sig{case}}}:"
        queues = [RedisUrlQueue(client, prefix, f"w{n}", lease_ms=60_000, rng=random.Random(n)) for n in range(2)]
        queues[0].start(SCOPE, 0.0, run=next_run(client, prefix, "w0"))
        queues[1].start(SCOPE, 0.0, run=queues[0].run)
        answers = [(rng.choice(["200", "200", "304", "404", "error"]), rng.choice(["x", "y"]),
                    rng.choice([None, "c1", "c2"])) for _ in range(rng.randint(1, 10))]
        holds = [rng.random() < 0.5 for _ in answers]
        check(Fleet(queues, rng), answers, holds)
        assert queues[1].get(FRONT) == queues[0].get(FRONT)
