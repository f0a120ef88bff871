"""Distributed crawls: pages/s of 1 and 2 workers, and Redis round trips per crawled id.

One fast local site (``bench/throughput.py --serve N``: ids 1..N, every 100th
missing) and, for each worker count, a fresh private ``redis-server`` on
127.0.0.1. The workers crawl one bounded lane (``-a start=1 -a max=N
-a margin=0``) as one job (``IDCRAWL_DISTRIBUTED``), all started together.

* **pages/s** = all workers' responses / (last response of any worker - first
  response of any worker), from the monotonic times ``bench/benchstats.py``
  records (one clock for all processes of this machine). The union of the
  workers' item ids must be exactly the site's pages, each once, or the script
  exits with 1.
* **Redis round trips per id**, two ways: the workers' own count
  (``idcrawl/redis/calls``: every call their clients made, counted by the connection) and, in a
  separate run of the same crawl, a ``MONITOR`` client counting every command
  clients sent (commands that Lua scripts run inside Redis are told apart and
  not counted as round trips; connection set-up such as ``CLIENT SETINFO`` is
  counted). MONITOR slows Redis, so pages/s come from the runs without it.

The machine has 2 cores: with 2 workers the workers, the site and Redis share
them, so the figure says what the coordination costs, not how a fleet of real
machines scales.

    python bench/distributed.py [--ids 4000] [--workers 1,2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(BENCH), str(ROOT)]

from throughput import expected_ids, start_idseq, start_server  # noqa: E402

from tests.support.redis_server import RedisServer  # noqa: E402


@dataclass
class Fleet:
    workers: int
    responses: int
    seconds: float
    round_trips: int
    ids: int
    monitored: int | None = None  # client commands MONITOR saw (None: not monitored)

    @property
    def rate(self) -> float:
        return self.responses / self.seconds if self.seconds else 0.0


def run_fleet(url: str, ids: int, workers: int, args: argparse.Namespace, workdir: Path, monitor: bool,
              distributed: bool = True) -> Fleet:
    """``workers`` workers of one job (``distributed=False``: one plain single-process crawl, for reference)."""
    import redis

    server = RedisServer().start()
    counted: list[int] = []
    stop = threading.Event()
    watcher = None
    if monitor:
        def watch() -> None:
            client = redis.Redis.from_url(server.url)
            seen = 0
            with client.monitor() as m:
                ready.set()
                for command in m.listen():
                    if command.get("client_type") == "lua" or command.get("client_address") == "lua":
                        continue
                    if stop.is_set() and command.get("command", "").upper().startswith("ECHO BENCH-STOP"):
                        break
                    seen += 1
            counted.append(seen)

        ready = threading.Event()
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        ready.wait(10)
    procs = []
    stats_files = []
    for n in range(workers):
        stats_file = workdir / f"w{workers}-{n}-{'mon' if monitor else 'run'}.json"
        stats_file.unlink(missing_ok=True)
        stats_files.append(stats_file)
        settings = {
            "IDCRAWL_DISTRIBUTED": str(distributed), "REDIS_URL": server.url, "IDCRAWL_REDIS_JOB": "bench",
            "IDCRAWL_STATE_PATH": str(workdir / f"state-{workers}-{n}.sqlite"),
            "CONCURRENT_REQUESTS": args.concurrency, "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
            "LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": "False", "ROBOTSTXT_OBEY": "True",
            "STATS_CLASS": "benchstats.BenchStatsCollector", "BENCH_STATS_FILE": str(stats_file),
            "IDCRAWL_PROGRESS_INTERVAL": 0,
        }
        log = workdir / f"w{workers}-{n}.log"
        procs.append(start_idseq(url, ids, workdir / f"items-{n}.jsonl", settings, log, workdir))
    for proc in procs:
        if proc.wait(timeout=args.timeout) != 0:
            raise SystemExit(f"distributed: a worker failed; logs in {workdir}")
    if watcher is not None:
        stop.set()
        redis.Redis.from_url(server.url).echo("bench-stop")
        watcher.join(30)
    server.stop()
    stats = [json.loads(path.read_text()) for path in stats_files]
    got = sorted(i for s in stats for i in s["ids"])
    if got != expected_ids(ids):
        raise SystemExit(f"distributed: the union of the items is not the site's pages ({len(got)} items)")
    first = min(s["first_response"] for s in stats if s.get("first_response"))
    last = max(s["last_response"] for s in stats if s.get("last_response"))
    responses = sum(s["stats"].get("response_received_count", 0) for s in stats)
    trips = sum(s["stats"].get("idcrawl/redis/calls", 0) for s in stats)
    return Fleet(workers, responses, last - first, trips, ids, counted[0] if counted else None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--ids", type=int, default=4000)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    server, port = start_server(args.ids)
    url = f"http://127.0.0.1:{port}/notice/{{id}}"
    results: dict[int, list[Fleet]] = {n: [] for n in counts}
    single: list[Fleet] = []
    monitored: dict[int, Fleet] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="idcrawl-bench-") as tmp:
            workdir = Path(tmp)
            for round_ in range(args.rounds):
                fleet = run_fleet(url, args.ids, 1, args, workdir, monitor=False, distributed=False)
                single.append(fleet)
                print(f"round {round_ + 1}: single process (not distributed): {fleet.rate:.0f} pages/s", flush=True)
                for n in counts:
                    fleet = run_fleet(url, args.ids, n, args, workdir, monitor=False)
                    results[n].append(fleet)
                    print(f"round {round_ + 1}: {n} worker(s): {fleet.rate:.0f} pages/s, "
                          f"{fleet.round_trips / fleet.ids:.2f} round trips per id (workers' count)", flush=True)
            for n in counts:
                monitored[n] = run_fleet(url, args.ids, n, args, workdir, monitor=True)
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(timeout=30)
    print()
    print(f"ids {args.ids}, CONCURRENT_REQUESTS {args.concurrency} per worker, {os.cpu_count()} cores")
    print("| workers | pages/s (median) | runs | round trips per id (workers) | client commands per id (MONITOR) |")
    print("|---|---|---|---|---|")
    rates = [f.rate for f in single]
    print(f"| single process (no Redis) | {statistics.median(rates):.0f} | {', '.join(f'{r:.0f}' for r in rates)} "
          "| 0 | 0 |")
    for n in counts:
        rates = [f.rate for f in results[n]]
        trips = statistics.median(f.round_trips / f.ids for f in results[n])
        mon = monitored[n].monitored
        mon_text = f"{mon / args.ids:.2f}" if mon is not None else "n/a"
        print(f"| {n} | {statistics.median(rates):.0f} | {', '.join(f'{r:.0f}' for r in rates)} | {trips:.2f} "
              f"| {mon_text} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
