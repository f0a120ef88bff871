"""Watch waves at scale (issue 31, finding 2): waves, commits and CPU per simulated day for 100,000
found pages whose durations spread over a day, with and without the coalescing window.

    .venv/bin/python bench/watch_waves.py [--pages 100000] [--measure 12] [--seed 31]

Seeded pages: each changes at a rate of its own (a mean interval from 10 min to a day), and its
duration starts anywhere from 10 min to a day (``recrawl_max`` 1 d), last crawled so that the pages
fall due over the day. On an injected clock (``idcrawl.core.clock.Clock``, fixed and set to each
wave's time), two parts:

- **a day of waves**: the watch's rule alone (wake at the earliest due time plus a tick, take what
  :class:`idcrawl.core.watch.Coalescing` takes, visit at the wave's time, apply the recrawl rule), on a
  heap of due times: waves, fetches and commits (one per wave, updating the session's one run row)
  per simulated day;
- **CPU per wave**: the first ``--measure`` waves of the same pages through the real code of one
  process (a :class:`PageBook` on a SQLite state: ``due_page_ids`` from the ``pages_due`` index, and before
  it ``load_pages`` of every record, ``due_ids``, the visits, the wave's commit and the wake-up's
  ``next_page_due``) and of a fleet (a Redis state with the index of due
  times, ``fleet_due_ids``; a redis-server of its own): process CPU seconds per wave (median).
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT)]

import redis  # noqa: E402
from pyroaring import BitMap64  # noqa: E402

from idcrawl.core.clock import Clock  # noqa: E402
from idcrawl.core.pagebook import PageBook  # noqa: E402
from idcrawl.core.recrawl import DAY, Fetch, Kind, Outcome, Policy, Schedule, next_duration  # noqa: E402
from idcrawl.core.watch import NO_COALESCING, TICK, Coalescing  # noqa: E402
from idcrawl.distributed.pagerecords import fleet_due_ids  # noqa: E402
from idcrawl.state.base import due_page_ids  # noqa: E402
from idcrawl.state.redis import RedisStateStore  # noqa: E402
from idcrawl.state.sqlite import SqliteStateStore  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

T0 = 1_800_000_000.0
POLICY = Policy(min_duration=600.0, max_duration=DAY, initial_duration=DAY)
PREFIX = "idcrawl:{bench}:"


@dataclass(frozen=True, slots=True)
class Site:
    records: dict[int, Schedule]
    change: dict[int, float]  # mean seconds between two changes of each page

    def news(self, id_: int, elapsed: float, rng: random.Random) -> bool:
        return rng.random() < -math.expm1(-elapsed / self.change[id_])


def site(pages: int, seed: int) -> Site:
    rng = random.Random(seed)
    records, change = {}, {}
    for id_ in range(1, pages + 1):
        duration = rng.uniform(600.0, DAY)
        records[id_] = Schedule(Kind.PAGE, f"reg/{id_}", T0 - rng.uniform(0.0, duration), duration,
                                checksum=f"{id_:040x}", etag=f'"{id_}"')
        change[id_] = rng.uniform(600.0, DAY)
    return Site(records, change)


def a_day(pages: Site, rule: Coalescing, seed: int) -> tuple[int, int, list[int]]:
    """The watch's rule over one simulated day from T0: (waves, fetches, fetches per wave)."""
    rng = random.Random(seed)
    state = {id_: (s.last_crawled, s.update_duration) for id_, s in pages.records.items()}
    by_due = [(last + duration, id_) for id_, (last, duration) in state.items()]
    by_join = [(last + duration - rule.window(duration), id_) for id_, (last, duration) in state.items()]
    heapq.heapify(by_due)
    heapq.heapify(by_join)
    now, waves, sizes = T0, 0, []
    while True:
        while by_due and by_due[0][0] != sum(state[by_due[0][1]]):  # stale entries of pages visited since
            heapq.heappop(by_due)
        due = by_due[0][0]
        at = now if waves == 0 else (due + TICK if due >= now else now + TICK)
        if at > T0 + DAY:
            return waves, sum(sizes), sizes
        taken = 0
        while by_join and by_join[0][0] < at:  # due by at + its window: now - last > duration - window
            join, id_ = heapq.heappop(by_join)
            last, duration = state[id_]
            if join != last + duration - rule.window(duration):
                continue  # stale
            news = pages.news(id_, at - last, rng)
            duration = next_duration(duration, news, POLICY)
            state[id_] = (at, duration)
            heapq.heappush(by_due, (at + duration, id_))
            heapq.heappush(by_join, (at + duration - rule.window(duration), id_))
            taken += 1
        waves += 1
        sizes.append(taken)
        now = at


def run_waves(pages: Site, rule: Coalescing, waves: int, seed: int,
              plan: Callable[[PageBook, float], list[int]], commit: Callable[[PageBook], None],
              wake: Callable[[float], float | None]) -> list[tuple[float, int]]:
    """The first ``waves`` waves through the real code: (CPU seconds, fetches) per wave."""
    rng = random.Random(seed)
    clock = Clock(T0)
    at: float | None = T0
    costs = []
    for _ in range(waves):
        if at is None:
            break
        clock.set(at)
        start = time.process_time()
        book = PageBook(clock, {"reg": POLICY}, retain=False)
        book.coalescing, book.wave_at = rule, at
        due = plan(book, at)
        for id_ in due:
            record = book.get("reg", id_)
            assert record is not None
            news = pages.news(id_, at - record.last_crawled, rng)
            book.visit("reg", id_, Fetch(Outcome.OK, checksum="x" * 40 if news else record.checksum))
        commit(book)
        nxt = wake(at)
        costs.append((time.process_time() - start, len(due)))
        at = None if nxt is None else nxt + TICK
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--measure", type=int, default=12, help="waves timed through the real code per case")
    parser.add_argument("--seed", type=int, default=31)
    args = parser.parse_args()
    pages = site(args.pages, args.seed)
    rules = {"off (0 s)": NO_COALESCING, "default (60 s, 5%, 1 h)": Coalescing()}
    print(f"{args.pages:,} pages, durations 10 min to 1 day; one simulated day from T0")
    days = {}
    for name, rule in rules.items():
        waves, fetches, sizes = a_day(pages, rule, args.seed)
        days[name] = waves
        print(f"  {name:24} waves/day {waves:>9,}  commits/day {waves:>9,}  fetches/day {fetches:>9,}  "
              f"median fetches/wave {statistics.median(sizes):>7,.0f}")
    server = RedisServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sqlite = SqliteStateStore(Path(tmp) / "state.sqlite")
            client = redis.Redis.from_url(server.url)
            fleet = RedisStateStore(client, PREFIX)
            records = list(pages.records.items())
            for at in range(0, len(records), 10_000):
                chunk = dict(records[at:at + 10_000])
                sqlite.commit({}, {}, {}, pages={"reg": chunk})
                fleet.commit({}, {}, {}, pages={"reg": chunk})
            fleet.index_pages("reg")
            found = list(pages.records)
            found_ids = BitMap64(found)

            def every_record_plan(book: PageBook, at: float) -> list[int]:  # before: every record read
                book.load("reg", sqlite.load_pages("reg"))
                return book.due_ids("reg")

            def process_plan(book: PageBook, at: float) -> list[int]:  # the local worker's: the pages_due index
                return due_page_ids(sqlite, book, "reg", found_ids)

            def fleet_plan(book: PageBook, at: float) -> list[int]:
                return fleet_due_ids(fleet, book, "reg", found, at)

            cases = {"one process, every record": (sqlite, every_record_plan),
                     "one process (SQLite)": (sqlite, process_plan), "fleet (Redis)": (fleet, fleet_plan)}
            print(f"CPU per wave, median of the first {args.measure} waves (the pages as stored at T0 each time):")
            for label, (store, plan) in cases.items():
                for name, rule in rules.items():
                    # every case starts from the pages as generated: write them back first
                    for at in range(0, len(records), 10_000):
                        store.commit({}, {}, {}, pages={"reg": dict(records[at:at + 10_000])})

                    def commit(book: PageBook, store=store) -> None:  # type: ignore[no-untyped-def]
                        changes = book.take_changes()
                        store.commit({}, {}, {}, pages={"reg": {i: s for (_, i), s in changes.items()}})

                    def wake(at: float, store=store) -> float | None:  # type: ignore[no-untyped-def]
                        return store.next_page_due("reg", at, POLICY.gone_limit)

                    costs = run_waves(pages, rule, args.measure, args.seed, plan, commit, wake)
                    cpu = statistics.median(c for c, _ in costs)
                    fetched = statistics.median(n for _, n in costs)
                    print(f"  {label:26} {name:24} CPU/wave {cpu:8.3f} s  fetches/wave {fetched:>7,.0f}  "
                          f"CPU/day {cpu * days[name]:>10,.0f} s")
            sqlite.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
