"""The Redis index of page due times: a fleet's ``watch_pages`` and ``due_pages`` at 100,000 page records,
with the index (``P pagedue:<target>``) and without it (every record read, as before the index).

    .venv/bin/python bench/page_due.py [--pages 100000] [--due 100] [--rounds 5]

Seeded records (``--seed``): ``--due`` pages due at the clock, the rest due later. Per round: the watch's
wake-up (``RedisStateStore.next_page_due``, one target) and a due run's plan of the pages
(:func:`idcrawl.distributed.pagerecords.fleet_due_ids`; the found ids given), each timed with and without the
index; the table shows the median seconds per call. Starts its own redis-server.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT)]

import redis  # noqa: E402

from idcrawl.core.clock import Clock  # noqa: E402
from idcrawl.core.pagebook import PageBook  # noqa: E402
from idcrawl.core.recrawl import Kind, Policy, Schedule  # noqa: E402
from idcrawl.distributed.pagerecords import fleet_due_ids  # noqa: E402
from idcrawl.state.base import StateStore  # noqa: E402
from idcrawl.state.redis import RedisStateStore  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

NOW = 1_800_000_000.0
DAY = 86400.0
PREFIX = "idcrawl:{bench}:"


def fill(store: RedisStateStore, pages: int, due: int, rng: random.Random) -> list[int]:
    ids = list(range(1, pages + 1))
    late = set(rng.sample(ids, due))
    records = {i: Schedule(Kind.PAGE, f"reg/{i}", NOW - (2 * DAY if i in late else rng.uniform(0, DAY / 2)), DAY,
                           checksum=f"{i:040x}", etag=f'"{i}"', last_status=200) for i in ids}
    for at in range(0, pages, 10_000):
        chunk = {i: records[i] for i in ids[at:at + 10_000]}
        store.commit({}, {}, {}, pages={"reg": chunk})
    return ids


def old_due_ids(store: RedisStateStore, book: PageBook, found: list[int]) -> list[int]:
    """A due run's pages before the index: every record read."""
    book.load("reg", store.load_pages("reg"))
    return book.due_ids("reg", found=found)


def timed(call) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--due", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    server = RedisServer().start()
    try:
        client = redis.Redis.from_url(server.url)
        store = RedisStateStore(client, PREFIX)
        found = fill(store, args.pages, args.due, random.Random(args.seed))
        policy = {"reg": Policy()}
        times: dict[str, list[float]] = {k: [] for k in ("watch old", "watch index", "due old", "due index")}
        built, _ = timed(lambda: store.index_pages("reg"))
        for _ in range(args.rounds):
            t, old_next = timed(lambda: StateStore.next_page_due(store, "reg", NOW, 3))
            times["watch old"].append(t)
            t, new_next = timed(lambda: store.next_page_due("reg", NOW, 3))
            times["watch index"].append(t)
            assert old_next == new_next, (old_next, new_next)
            t, old_due = timed(lambda: old_due_ids(store, PageBook(Clock(NOW), policy, retain=False), found))
            times["due old"].append(t)
            t, new_due = timed(lambda: fleet_due_ids(store, PageBook(Clock(NOW), policy, retain=False), "reg", found,
                                                     NOW))
            times["due index"].append(t)
            assert old_due == new_due and len(new_due) == args.due
        print(f"{args.pages} page records, {args.due} due; index built once in {built:.3f} s; "
              f"median of {args.rounds} rounds (s per call):")
        for what in ("watch", "due"):
            old, new = statistics.median(times[f"{what} old"]), statistics.median(times[f"{what} index"])
            print(f"  {what}_pages: without index {old:.4f}  with index {new:.6f}  ({old / new:.0f}x)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
