"""The Redis index of page due times (``P pagedue:<target>``, :mod:`idcrawl.state.redis`): on seeded random
page records, a due run's ids (:func:`idcrawl.distributed.pagerecords.fleet_due_ids`) and the watch's wake-up
(``next_page_due``) are the same with the index as without it (every record read) and as the reference
(:func:`tests.support.reference.page_due_truth`): for a job written before the index (rebuilt once), and
after records are changed and deleted by later commits (the index kept with them)."""

from __future__ import annotations

import random

import pytest

from idcrawl.core.clock import Clock
from idcrawl.core.pagebook import PageBook
from idcrawl.core.recrawl import Kind, Policy, Schedule
from idcrawl.distributed.pagerecords import fleet_due_ids
from idcrawl.state.base import StateStore
from idcrawl.state.redis import RedisStateStore
from tests.support.reference import page_due_truth

redis = pytest.importorskip("redis")

CASES = 40
SEED = 17
T = 1_800_000_000.0
GONE = 3


def random_record(rng: random.Random, id_: int) -> Schedule:
    # durations of minutes to weeks; some records share a due time; some pages are off the schedule
    last = T - rng.choice((0, 60, 3600, 86400, rng.uniform(0, 30 * 86400)))
    duration = rng.choice((3600.0, 86400.0, rng.uniform(60, 14 * 86400)))
    return Schedule(Kind.PAGE, f"reg/{id_}", last, duration, checksum=f"c{id_}", gone=rng.choice((0, 0, 0, 1, GONE)))


def answers(store: RedisStateStore, found: list[int], now: float, indexed: bool) -> tuple[list[int], float | None]:
    book = PageBook(Clock(now), {"reg": Policy(gone_limit=GONE)}, retain=False)
    if indexed:
        due = fleet_due_ids(store, book, "reg", found, now)
        return due, store.next_page_due("reg", now, GONE)
    book.load("reg", store.load_pages("reg"))  # the old way: every record
    return book.due_ids("reg", now, found=found), StateStore.next_page_due(store, "reg", now, GONE)


def truth(records: dict[int, Schedule], found: list[int], now: float) -> tuple[list[int], float | None]:
    return page_due_truth({i: (r.last_crawled, r.update_duration, r.gone) for i, r in records.items()}, found, now,
                          GONE, "reg")


def test_due_pages_and_the_next_due_time_are_the_same_with_the_index_as_without(redis_server) -> None:
    client = redis.Redis.from_url(redis_server.url)
    rng = random.Random(SEED)
    for case in range(CASES):
        prefix = f"idcrawl:{{idx{case}}}:"
        store = RedisStateStore(client, prefix)
        ids = rng.sample(range(1, 400), rng.randint(0, 120))
        records = {i: random_record(rng, i) for i in ids}
        found = sorted({*ids, *rng.sample(range(1, 400), rng.randint(0, 10))})  # some found ids have no record
        store.commit({}, {}, {}, pages={"reg": records})
        client.delete(prefix + "pagedue:reg", prefix + "pageidx")  # a job written before the index
        for step in range(3):
            now = T + rng.choice((0, 1800, 86400, rng.uniform(0, 20 * 86400)))
            expected = truth(records, found, now)
            assert answers(store, found, now, indexed=False) == expected, (case, step)
            # read-only (iddue): no rebuild; the first writable reader builds it once
            assert RedisStateStore(client, prefix, read_only=True).index_pages("reg") is (step > 0)
            assert answers(store, found, now, indexed=True) == expected, (case, step)
            assert store.pages_indexed("reg")
            # later commits change and delete records: the index moves with them (no rebuild)
            changed = {i: random_record(rng, i) for i in rng.sample(ids, min(len(ids), 10))}
            deleted = rng.sample(sorted(set(ids) - set(changed)), min(len(set(ids) - set(changed)), 3))
            store.commit({}, {}, {}, pages={"reg": {**changed, **dict.fromkeys(deleted)}})
            records.update(changed)
            for i in deleted:
                del records[i]
            ids = sorted(records)
            scores = {int(i): s for i, s in client.zrange(prefix + "pagedue:reg", 0, -1, withscores=True)}
            assert scores == {i: r.due_at() for i, r in records.items()}, (case, step)
