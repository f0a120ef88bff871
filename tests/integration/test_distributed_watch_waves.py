"""Watch waves that scale in a fleet (issue 31, finding 2): a wave's plan of the found pages
(:func:`idcrawl.distributed.pagerecords.fleet_due_ids`, from the index of page due times in Redis) takes
what falls due within the coalescing window, as one process's :class:`PageBook` does on the same
records; pages fetched in the wave share its time, so the fleet's next wake-up takes them together."""

from __future__ import annotations

import random

import pytest

from idcrawl.core.clock import Clock
from idcrawl.core.pagebook import PageBook
from idcrawl.core.recrawl import Fetch, Kind, Outcome, Policy, Schedule
from idcrawl.core.watch import NO_COALESCING, TICK, Coalescing
from idcrawl.distributed.pagerecords import fleet_due_ids
from idcrawl.state.redis import RedisStateStore

redis = pytest.importorskip("redis")

T = 1_800_000_000.0
POLICY = Policy(min_duration=5.0, max_duration=3600.0, initial_duration=8.0)


def book(rule: Coalescing, at: float) -> PageBook:
    pages = PageBook(Clock(at), {"reg": POLICY}, retain=False)
    pages.coalescing, pages.wave_at = rule, at
    return pages


def test_a_fleet_wave_takes_the_pages_due_within_its_window_as_one_process_does(redis_server) -> None:
    """200 pages with a 2 min duration crawled in the 150 s before T (seeded): at T the fleet's plan
    with the default window is one process's plan on the same records, and holds every page due by
    T + 60 s; without a window only those due at T. After the wave (every page visited at its time,
    unchanged) the next wake-up finds all it took due together."""
    rng = random.Random(31)
    records = {i: Schedule(Kind.PAGE, f"reg/{i}", T - rng.uniform(0, 150), 120.0, checksum="c")
               for i in range(1, 201)}
    client = redis.Redis.from_url(redis_server.url)
    store = RedisStateStore(client, "idcrawl:{waves}:")
    store.commit({}, {}, {}, pages={"reg": records})
    found = sorted(records)
    within = sorted(i for i, r in records.items() if r.due_at() < T + 60)
    strictly = sorted(i for i, r in records.items() if r.due_at() < T)
    assert len(strictly) < len(within) < len(records)
    for rule, expected in ((Coalescing(), within), (NO_COALESCING, strictly)):
        fleet = fleet_due_ids(store, book(rule, T), "reg", found, T)
        alone = book(rule, T)
        alone.load("reg", store.load_pages("reg"))
        assert fleet == alone.due_ids("reg", T) and sorted(fleet) == expected
    wave = book(Coalescing(), T)
    taken = fleet_due_ids(store, wave, "reg", found, T)
    for id_ in taken:
        wave.visit("reg", id_, Fetch(Outcome.NOT_MODIFIED))
    store.commit({}, {}, {}, pages={"reg": {i: s for (_, i), s in wave.take_changes().items()}})
    stored = store.load_pages("reg")
    assert {stored[i].last_crawled for i in taken} == {T}  # the wave's time, shared
    assert {stored[i].due_at() for i in taken} == {T + 120 * 1.8}  # one due time: they stay together
    at = T + 120 * 1.8 + TICK
    again = fleet_due_ids(store, book(Coalescing(), at), "reg", found, at)
    assert set(taken) <= set(again)
