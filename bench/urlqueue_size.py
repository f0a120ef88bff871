"""The URL queue of crawl scope at size: memory, fill, pick and commit time, one process and a fleet.

``python bench/urlqueue_size.py`` (1,000,000 URLs in one process, 100,000 in a fleet; ``--urls N``,
``--redis-urls N``, ``--hosts H``, ``--no-redis``, ``--redis-targets T``) builds a job of H page
targets (one host each, ``http://hK.example/``) with a crawl profile ``max_hops = 1, scope = "host"``,
seeds each target's page and hands it back fetched with N/H links of its host, so N URLs are queued
through the queue's own offers. Then, for each side:

- **one process** (:class:`~idcrawl.core.urlqueue.MemoryUrlQueue`, persisted by the SQLite state store):
  fill time, resident memory per URL (RSS before and after), ``take()`` time (``--takes`` picks),
  ``written()`` time, the commit of every URL (``changes()`` + ``commit_urls``) and of the taken ones
  only, the state file's size, and the next run's open (``load_urls`` + a queue from them + ``start``);
- **a fleet** (:class:`~idcrawl.distributed.urlqueue.RedisUrlQueue` on a ``redis-server`` this script
  starts on a free loopback port, no persistence): fill time (one ``URL_OFFER`` per link), Redis
  ``used_memory`` per URL, ``take()`` and ``written()`` time, and a read of every URL (what a new run's
  reconcile and ``scrapy idplan`` do). With ``--redis-targets T`` (default 100,000), the Redis state
  store's first commit of T targets (params and one lane record each) and ``used_memory`` per target.

Figures, not thresholds; results in docs/benchmarks.md ("The URL queue and targets at size").
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from idcrawl.core.jobfile import read_job  # noqa: E402
from idcrawl.core.ranges import LaneRecord  # noqa: E402
from idcrawl.core.scope import JobScope  # noqa: E402
from idcrawl.core.urlqueue import MemoryUrlQueue, UrlQueue  # noqa: E402
from idcrawl.state.sqlite import SqliteStateStore  # noqa: E402

NOW = 1_000_000.0


def rss_mb() -> float:
    """The resident set of this process now (Linux /proc), MB."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def job_scope(folder: Path, hosts: int) -> JobScope:
    path = folder / "scope.toml"
    lines = ['[[crawl_profiles]]\nname = "site"\nmax_hops = 1\nscope = "host"\n']
    lines += [f'[[targets]]\nname = "h{k}"\nurl = "http://h{k}.example/"\ncrawl_profiles = ["site"]\n'
              for k in range(hosts)]
    path.write_text("\n".join(lines))
    return read_job(path).scope()


def fill(queue: UrlQueue, hosts: int, per_host: int) -> int:
    """Seed every target's page and fetch it with ``per_host`` links of its host; returns URLs queued."""
    queued = 0
    for k in range(hosts):
        page = f"http://h{k}.example/"
        queue.seed(f"h{k}", page, NOW)
        assert queue.take(lambda host, page_host=f"h{k}.example": host == page_host, NOW) is not None
        links = [f"http://h{k}.example/p/{i}" for i in range(per_host)]
        queued += len(queue.fetched(page, links, NOW))
    return queued


#: What the one-process figures count: this process's CPU time (other load on a shared machine moves
#: it much less than wall time); the fleet's are wall time (round trips), with Redis's own CPU beside.
clock = time.process_time


def per_call(calls: int, call: Callable[[int], Any]) -> float:
    """Microseconds per call of ``call(i)`` over ``calls`` calls (:data:`clock`)."""
    started = clock()
    for i in range(calls):
        call(i)
    return (clock() - started) / calls * 1e6


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = clock()
    result = call()
    return clock() - started, result


def one_process(folder: Path, scope: JobScope, urls: int, hosts: int, takes: int) -> None:
    gc.collect()
    before = rss_mb()
    queue = MemoryUrlQueue(rng=random.Random(0))
    queue.start(scope, NOW)
    seconds, queued = timed(lambda: fill(queue, hosts, urls // hosts))
    gc.collect()
    grown = rss_mb() - before
    print(f"one process (CPU time): {queued:,} URLs queued in {seconds:.1f} s "
          f"({seconds / queued * 1e6:.1f} us per URL); RSS +{grown:.0f} MB ({grown * 1e6 / queued:.0f} bytes per URL)")
    store = SqliteStateStore(folder / "state.sqlite")
    seconds, _ = timed(lambda: store.commit_urls(*queue.changes()))
    size = (folder / "state.sqlite").stat().st_size + sum(
        p.stat().st_size for p in folder.glob("state.sqlite-wal"))
    print(f"  commit of every URL: {seconds:.1f} s; state file {size / 1e6:.0f} MB ({size / queued:.0f} bytes per URL)")
    taken: list[str] = []

    def take(_: int) -> None:
        record = queue.take(lambda host: True, NOW)
        assert record is not None
        taken.append(record.url)

    print(f"  take(): {per_call(takes, take):.1f} us per call ({takes:,} calls, {hosts} hosts)")
    print(f"  written(): {per_call(takes, lambda i: queue.written(taken[i], NOW + 1)):.1f} us per call")
    seconds, _ = timed(lambda: store.commit_urls(*queue.changes()))
    print(f"  commit of the {takes:,} harvested URLs: {seconds * 1e3:.0f} ms")
    store.close()
    del queue
    gc.collect()
    store = SqliteStateStore(folder / "state.sqlite")
    before = rss_mb()
    load, entries = timed(store.load_urls)
    build, queue = timed(lambda: MemoryUrlQueue(entries, rng=random.Random(0)))
    start, _ = timed(lambda: queue.start(scope, NOW + 2))
    gc.collect()
    print(f"  next run's open: load_urls {load:.1f} s, queue {build:.1f} s, start (reconcile) {start:.1f} s; "
          f"RSS +{rss_mb() - before:.0f} MB")
    store.close()


def fleet(scope: JobScope, urls: int, hosts: int, takes: int, targets: int) -> None:
    import redis

    from idcrawl.distributed.urlqueue import RedisUrlQueue
    from idcrawl.state.redis import RedisStateStore
    from tests.support.redis_server import RedisServer

    global clock
    clock = time.perf_counter
    server = RedisServer().start()
    try:
        client = redis.Redis.from_url(server.url)

        def used() -> int:
            return int(client.info("memory")["used_memory"])

        def redis_cpu() -> float:
            info = client.info("cpu")
            return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

        base = used()
        cpu = redis_cpu()
        queue = RedisUrlQueue(client, "bench:", "w1", rng=random.Random(0))
        queue.start(scope, NOW)
        seconds, queued = timed(lambda: fill(queue, hosts, urls // hosts))
        grown = used() - base
        print(f"fleet (Redis): {queued:,} URLs queued in {seconds:.1f} s wall "
              f"({seconds / queued * 1e6:.0f} us per URL, one URL_OFFER each; "
              f"Redis CPU {(redis_cpu() - cpu) / queued * 1e6:.0f} us per URL); "
              f"used_memory +{grown / 1e6:.0f} MB ({grown / queued:.0f} bytes per URL)")
        taken: list[str] = []

        def take(_: int) -> None:
            record = queue.take(lambda host: True, NOW)
            assert record is not None
            taken.append(record.url)

        cpu = redis_cpu()
        print(f"  take(): {per_call(takes, take):.0f} us per call wall ({takes:,} calls, {hosts} hosts; "
              f"Redis CPU {(redis_cpu() - cpu) / takes * 1e6:.0f} us per call)")
        cpu = redis_cpu()
        print(f"  written(): {per_call(takes, lambda i: queue.written(taken[i], NOW + 1)):.0f} us per call wall "
              f"(Redis CPU {(redis_cpu() - cpu) / takes * 1e6:.0f} us per call)")
        seconds, count = timed(lambda: sum(1 for _ in queue.entries()))
        print(f"  read of every URL (a run's reconcile, idplan): {count:,} in {seconds:.1f} s")
        client.flushall()
        if targets:
            base = used()
            store = RedisStateStore(client, "bench:")
            params = {f"t{i}": {"url": f"http://127.0.0.1:9/{i}/{{id}}", "start": i % 1000, "min": None,
                                "max": i % 1000 + 50, "direction": "asc"} for i in range(targets)}
            lanes = {f"t{i}": {f"t{i}:asc": LaneRecord(f"t{i}:asc", i % 1000, 1, i % 1000 + 51, i % 1000,
                                                      None, None, None)} for i in range(targets)}
            seconds, _ = timed(lambda: store.commit(params, {}, lanes))
            grown = used() - base
            print(f"  Redis state of {targets:,} targets (params, one lane each): first commit {seconds:.1f} s; "
                  f"used_memory +{grown / 1e6:.0f} MB ({grown / targets:.0f} bytes per target)")
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--redis-urls", type=int, default=100_000,
                        help="URLs of the fleet side (one URL_OFFER round trip each: about 1 ms on a busy machine)")
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--takes", type=int, default=10_000, help="take() and written() calls timed")
    parser.add_argument("--no-redis", action="store_true", help="the one-process side only")
    parser.add_argument("--no-local", action="store_true", help="the fleet side only")
    parser.add_argument("--redis-targets", type=int, default=100_000, help="targets in the Redis state (0: none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scope = job_scope(Path(tmp), args.hosts)
        if not args.no_local:
            one_process(Path(tmp), scope, args.urls, args.hosts, args.takes)
        if not args.no_redis:
            fleet(scope, args.redis_urls, args.hosts, args.takes, args.redis_targets)


if __name__ == "__main__":
    main()
