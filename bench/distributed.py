"""Distributed crawls: 1-4 workers on a latency-bound site, their start-up, active and finish phases,
and Redis round trips per crawled id.

One local site (``bench/throughput.py --serve N``: ids 1..N, every 100th
missing; each response takes ``--latency`` seconds, 0.1 by default, so a
worker's pages/s is bounded by its concurrency, not by this machine's CPU) and,
for each worker count, a fresh private ``redis-server`` on 127.0.0.1. The
workers crawl one bounded lane (``-a start=1 -a max=N -a margin=0``) as one job
(``IDCRAWL_DISTRIBUTED``, ``--concurrency`` requests per worker, 8 by
default), all started together.

* **Phases**, from one monotonic clock (all processes of this machine):
  *start-up* = launch of the workers -> first response of any worker;
  *active* = first response -> last response of any worker; *finish* = last
  response -> the last worker's exit (the fleet learning that the job is
  finished and closing), of which *closing* = last response -> the last
  worker's spider closed (its stats written; the rest is the process
  shutting down); *spread* = first worker's exit -> last worker's exit.
  *wall* = launch -> last exit.
* **Efficiency at n workers**, against 1 worker of the same round: active =
  pages/s(active, n) / (n x pages/s(active, 1)); wall = wall(1) / (n x wall(n)).
* The union of the workers' item ids must be exactly the site's pages, each
  once, or the script exits with 1.
* **Redis round trips per id**, two ways: the workers' own count
  (``idcrawl/redis/calls``: every call their clients made, counted by the connection) and, in a
  separate run of the same crawl (``--monitor``), a ``MONITOR`` client counting
  every command clients sent (commands that Lua scripts run inside Redis are
  told apart and not counted as round trips; connection set-up such as
  ``CLIENT SETINFO`` is counted). MONITOR slows Redis, so timings come from the
  runs without it.
* ``--kill``: 3 workers again, and worker 0 is SIGKILLed once the site answered
  a third of the ids (``--replace``: a new worker is started at once). Reported:
  the longest stretch without any response after the kill, and whether the
  union of the items is the site's pages (the killed worker's feed included;
  items it wrote but had not acknowledged may be there twice).

The machine has 2 cores: the workers, the site and Redis share them.

    python bench/distributed.py [--ids 4000] [--workers 1,2,3,4] [--rounds 1] [--latency 0.1]
    python bench/distributed.py --kill [--replace] [--lease S]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
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
    launched: float  # monotonic times: the workers' launch,
    first: float  # the first and last response of any worker,
    last: float
    exits: list[float]  # each worker's exit
    round_trips: int
    ids: int
    monitored: int | None = None  # client commands MONITOR saw (None: not monitored)
    killed_at: float | None = None  # --kill: when worker 0 was killed
    times: list[float] = field(default_factory=list)  # --kill: every response of the other workers
    closed: list[float] = field(default_factory=list)  # each worker's spider closed (its stats written)

    @property
    def seconds(self) -> float:
        return self.last - self.first

    @property
    def rate(self) -> float:
        return self.responses / self.seconds if self.seconds else 0.0

    @property
    def startup(self) -> float:
        return self.first - self.launched

    @property
    def finish(self) -> float:
        return max(self.exits) - self.last

    @property
    def notice(self) -> float:
        """Last response -> the last worker's spider closed: the fleet learning that the job is finished."""
        return max(self.closed) - self.last if self.closed else float("nan")

    @property
    def spread(self) -> float:
        return max(self.exits) - min(self.exits)

    @property
    def wall(self) -> float:
        return max(self.exits) - self.launched

    def longest_silence(self) -> float:
        """The longest stretch without a response after the kill (to the last response)."""
        if self.killed_at is None:
            return 0.0
        after = [self.killed_at, *sorted(t for t in self.times if t > self.killed_at)]
        return max((b - a for a, b in itertools.pairwise(after)), default=0.0)


def run_fleet(url: str, ids: int, workers: int, args: argparse.Namespace, workdir: Path, monitor: bool,
              distributed: bool = True, kill: bool = False) -> Fleet:
    """``workers`` workers of one job (``distributed=False``: one plain single-process crawl, for reference;
    ``kill``: worker 0 is SIGKILLed a third of the way, and with ``args.replace`` a new worker started)."""
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
    procs: list[subprocess.Popen[bytes]] = []
    stats_files: list[Path] = []
    exits: dict[int, float] = {}
    tag = "kill" if kill else "mon" if monitor else "run"

    def launch(n: int) -> None:
        stats_file = workdir / f"w{workers}-{n}-{tag}.json"
        stats_file.unlink(missing_ok=True)
        stats_files.append(stats_file)
        settings = {
            "IDCRAWL_DISTRIBUTED": str(distributed), "REDIS_URL": server.url, "IDCRAWL_REDIS_JOB": "bench",
            "IDCRAWL_STATE_PATH": str(workdir / f"state-{workers}-{n}-{tag}.sqlite"),
            "CONCURRENT_REQUESTS": args.concurrency, "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
            "LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": "False", "ROBOTSTXT_OBEY": "True",
            "STATS_CLASS": "benchstats.BenchStatsCollector", "BENCH_STATS_FILE": str(stats_file),
            "BENCH_RESPONSE_TIMES": str(kill), "IDCRAWL_PROGRESS_INTERVAL": 0,
        }
        if args.lease is not None:
            settings["IDCRAWL_REDIS_LEASE_TIMEOUT"] = args.lease
        proc = start_idseq(url, ids, workdir / f"items-{workers}-{n}-{tag}.jsonl", settings,
                           workdir / f"w{workers}-{n}-{tag}.log", workdir)
        procs.append(proc)

        def waiter() -> None:
            proc.wait()
            exits[n] = time.monotonic()

        threading.Thread(target=waiter, daemon=True).start()

    launched = time.monotonic()
    for n in range(workers):
        launch(n)
    killed_at = None
    if kill:
        import redis as redis_py

        client = redis_py.Redis.from_url(server.url)
        deadline = time.monotonic() + args.timeout
        # a third of the ids decided (the lane's first undecided id), then SIGKILL worker 0
        while time.monotonic() < deadline:
            lanes = client.keys("idcrawl:{bench}:L:*:asc")
            fu = client.hget(lanes[0], "fu") if lanes else None
            if fu is not None and int(fu) >= ids // 3:
                break
            time.sleep(0.01)
        procs[0].send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        if args.replace:
            procs[0].wait()
            launch(workers)
    for n, proc in enumerate(procs):
        status = proc.wait(timeout=args.timeout)
        if status != 0 and not (kill and n == 0):
            raise SystemExit(f"distributed: a worker failed; logs in {workdir}")
    while len(exits) < len(procs):
        time.sleep(0.01)
    if kill:
        del exits[0]  # the killed worker's end is not the fleet's finish
    if watcher is not None:
        stop.set()
        redis.Redis.from_url(server.url).echo("bench-stop")
        watcher.join(30)
    server.stop()
    stats = [json.loads(path.read_text()) for path in stats_files if path.exists()]
    got = {i for s in stats for i in s["ids"]}
    if kill:  # the killed worker wrote no stats: its feed holds what it emitted
        killed_feed = workdir / f"items-{workers}-0-{tag}.jsonl"
        if killed_feed.exists():
            for line in killed_feed.read_text().splitlines():
                with contextlib.suppress(ValueError, KeyError):  # a line cut by the kill
                    got.add(json.loads(line)["id"])
    emitted = sorted(i for s in stats for i in s["ids"])
    if sorted(got) != expected_ids(ids) or (not kill and emitted != expected_ids(ids)):
        raise SystemExit(f"distributed: the union of the items is not the site's pages ({len(got)} ids, "
                         f"{len(emitted)} items)")
    first = min(s["first_response"] for s in stats if s.get("first_response"))
    last = max(s["last_response"] for s in stats if s.get("last_response"))
    responses = sum(s["stats"].get("response_received_count", 0) for s in stats)
    trips = sum(s["stats"].get("idcrawl/redis/calls", 0) for s in stats)
    times = [t for s in stats for t in (s.get("response_times") or [])]
    closed = [s["closed_at"] for s in stats if s.get("closed_at")]
    return Fleet(workers, responses, launched, first, last, list(exits.values()), trips, ids,
                 counted[0] if counted else None, killed_at, times, closed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--ids", type=int, default=4000)
    parser.add_argument("--workers", default="1,2,3,4")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight per worker (default 8)")
    parser.add_argument("--latency", type=float, default=0.1, help="seconds per response (default 0.1)")
    parser.add_argument("--monitor", action="store_true", help="also count client commands with MONITOR")
    parser.add_argument("--single", action="store_true", help="also run a plain single process (no Redis)")
    parser.add_argument("--kill", action="store_true", help="3 workers, worker 0 SIGKILLed a third of the way")
    parser.add_argument("--replace", action="store_true", help="--kill: start a new worker at once")
    parser.add_argument("--lease", type=float, help="IDCRAWL_REDIS_LEASE_TIMEOUT (default: the setting's)")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    server, port = start_server(args.ids, args.latency)
    url = f"http://127.0.0.1:{port}/notice/{{id}}"
    results: dict[int, list[Fleet]] = {n: [] for n in counts}
    single: list[Fleet] = []
    monitored: dict[int, Fleet] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="idcrawl-bench-") as tmp:
            workdir = Path(tmp)
            if args.kill:
                for round_ in range(args.rounds):
                    fleet = run_fleet(url, args.ids, 3, args, workdir, monitor=False, kill=True)
                    print(f"round {round_ + 1}: 3 workers, worker 0 SIGKILLed"
                          f"{', a replacement started at once' if args.replace else ''}: longest stretch "
                          f"without a response after the kill {fleet.longest_silence():.2f} s, wall "
                          f"{fleet.wall:.1f} s, nothing lost", flush=True)
                return 0
            for round_ in range(args.rounds):
                if args.single:
                    fleet = run_fleet(url, args.ids, 1, args, workdir, monitor=False, distributed=False)
                    single.append(fleet)
                    print(f"round {round_ + 1}: single process (not distributed): {fleet.rate:.0f} pages/s, "
                          f"wall {fleet.wall:.1f} s", flush=True)
                for n in counts:
                    fleet = run_fleet(url, args.ids, n, args, workdir, monitor=False)
                    results[n].append(fleet)
                    print(f"round {round_ + 1}: {n} worker(s): {fleet.rate:.0f} pages/s active, start-up "
                          f"{fleet.startup:.2f} s, active {fleet.seconds:.2f} s, finish {fleet.finish:.2f} s "
                          f"(spiders closed after {fleet.notice:.2f} s) "
                          f"(exits spread {fleet.spread:.2f} s), wall {fleet.wall:.2f} s, "
                          f"{fleet.round_trips / fleet.ids:.2f} round trips per id (workers' count)", flush=True)
            if args.monitor:
                for n in counts:
                    monitored[n] = run_fleet(url, args.ids, n, args, workdir, monitor=True)
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(timeout=30)
    print()
    print(f"ids {args.ids}, {args.latency * 1000:.0f} ms per response, CONCURRENT_REQUESTS {args.concurrency} "
          f"per worker, {os.cpu_count()} cores, {args.rounds} round(s); medians")
    print("| workers | pages/s (active) | start-up s | active s | finish s | of which closing s | exits spread s "
          "| wall s "
          "| active efficiency | wall efficiency | round trips per id (workers) | client commands per id (MONITOR) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    if single:
        med = statistics.median
        print(f"| single process (no Redis) | {med(f.rate for f in single):.0f} "
              f"| {med(f.startup for f in single):.2f} | {med(f.seconds for f in single):.2f} "
              f"| {med(f.finish for f in single):.2f} | {med(f.notice for f in single):.2f} | - "
              f"| {med(f.wall for f in single):.2f} | - | - | 0 | 0 |")
    base = results.get(1)
    for n in counts:
        fleets = results[n]
        med = statistics.median
        if base:
            active_eff = med(f.rate / (n * b.rate) for f, b in zip(fleets, base, strict=True))
            wall_eff = med(b.wall / (n * f.wall) for f, b in zip(fleets, base, strict=True))
            effs = f"{active_eff:.2f} | {wall_eff:.2f}"
        else:
            effs = "- | -"
        mon = monitored[n].monitored if n in monitored else None
        mon_text = f"{mon / args.ids:.2f}" if mon is not None else "n/a"
        print(f"| {n} | {med(f.rate for f in fleets):.0f} | {med(f.startup for f in fleets):.2f} "
              f"| {med(f.seconds for f in fleets):.2f} | {med(f.finish for f in fleets):.2f} "
              f"| {med(f.notice for f in fleets):.2f} | {med(f.spread for f in fleets):.2f} "
              f"| {med(f.wall for f in fleets):.2f} | {effs} "
              f"| {med(f.round_trips / f.ids for f in fleets):.2f} | {mon_text} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
