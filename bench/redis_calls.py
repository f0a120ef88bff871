"""Redis calls per crawled id of a distributed job, as Redis itself counts them, with the ``distributed`` profile.

A latency-bound local site (ids 1..N, every 100th missing, each answer
``--latency`` s late: 0.1 s like the issue's trial) and, for each worker count,
a fresh private ``redis-server`` on 127.0.0.1 that logs every command it runs
(``slowlog-log-slower-than 0``). The workers (``scrapy crawl idseq -a start=1
-a max=N -a margin=0 -s IDCRAWL_PROFILE=distributed``, so with the profile's
``RedisBloomDupeFilter`` and lease; ``CONCURRENT_REQUESTS_PER_DOMAIN=8``
each) crawl one bounded lane as one job, all started together.

Redis's own counts, read once all workers exited:

* **client calls**: the commands Redis ran for its clients, every worker
  connection together, from the slow log (an entry per command; those that
  Lua scripts ran inside Redis carry no client address and are counted apart,
  as **inside scripts**; the benchmark's own connection is left out). Set-up
  (``HELLO``, ``PING``, ``INFO``, ``SCRIPT LOAD``, target registration) is in.
* **EVALSHA**: ``INFO commandstats`` (``cmdstat_evalsha``), and the sum of
  every ``cmdstat_*``: all commands Redis executed, those inside scripts included.

The workers' own count (``idcrawl/redis/commands``, from the connection
wrapper, per command or script name) is printed beside them: the two agree
but for the ``HELLO`` that redis-py's connections send on connecting, outside
the client's command path (one per connection). The union of the workers' item ids must be exactly the site's pages,
each once, or the script exits with 1.

Politeness is off (``IDCRAWL_POLITENESS_FACTOR=0``); ``--delay`` sets ``DOWNLOAD_DELAY`` (no jitter):
a host with a gap costs a reservation more per request (``POLITE``).

    python bench/redis_calls.py [--ids 2000] [--workers 1,2,3] [--latency 0.1] [--delay 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(BENCH), str(ROOT)]

from throughput import expected_ids, start_idseq  # noqa: E402

from idcrawl.demo.site import DemoModel, IdSite, Reply  # noqa: E402
from idcrawl.distributed.scripts import NAMES  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

#: Commands Redis logs when this many exist at once at most (a run of 2,000 ids logs about 60,000).
SLOWLOG_MAX = 5_000_000


class SlowSite(DemoModel):
    """Ids 1..N, every 100th missing, each answer ``latency`` s late."""

    def __init__(self, ids: int, latency: float) -> None:
        super().__init__(1, ids)
        self.latency = latency

    def exists(self, id_: int) -> bool:
        return 1 <= id_ <= self.high and id_ % 100 != 0

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, self.latency)


@dataclass
class Fleet:
    workers: int
    ids: int
    seconds: float
    client: int  # commands Redis ran for the workers' connections
    inside: int  # commands Lua scripts ran inside Redis
    evalsha: int  # cmdstat_evalsha
    executed: int  # every cmdstat_*
    counted: int  # the workers' own count (idcrawl/redis/commands)
    trips: int  # the workers' round trips (idcrawl/redis/calls)
    by_name: Counter[str] = field(default_factory=Counter)  # Redis's client commands by name


def run_fleet(url: str, ids: int, workers: int, args: argparse.Namespace, workdir: Path) -> Fleet:
    import redis

    server = RedisServer(extra_args=("--slowlog-log-slower-than", "0", "--slowlog-max-len", str(SLOWLOG_MAX))).start()
    procs, stats_files = [], []
    started = time.monotonic()
    for n in range(workers):
        stats_file = workdir / f"w{workers}-{n}.json"
        stats_file.unlink(missing_ok=True)
        stats_files.append(stats_file)
        settings = {
            "IDCRAWL_PROFILE": "distributed", "REDIS_URL": server.url, "IDCRAWL_REDIS_JOB": "bench",
            "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
            "LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": "False",
            "STATS_CLASS": "benchstats.BenchStatsCollector", "BENCH_STATS_FILE": str(stats_file),
            "IDCRAWL_PROGRESS_INTERVAL": 0, "IDCRAWL_POLITENESS_FACTOR": 0,
            "DOWNLOAD_DELAY": args.delay, "DOWNLOAD_DELAY_JITTER": 0,
        }
        log = workdir / f"w{workers}-{n}.log"
        procs.append(start_idseq(url, ids, workdir / f"items-{workers}-{n}.jsonl", settings, log, workdir))
    for proc in procs:
        if proc.wait(timeout=args.timeout) != 0:
            raise SystemExit(f"redis_calls: a worker failed; logs in {workdir}")
    seconds = time.monotonic() - started
    client = redis.Redis.from_url(server.url, client_name="bench")
    commandstats = client.info("commandstats")
    entries = client.slowlog_get(-1)
    server.stop()
    inside = 0
    by_name: Counter[str] = Counter()
    for entry in entries:
        name = entry.get("client_name") or b""
        if (name.decode() if isinstance(name, bytes) else name) == "bench":
            continue
        address = entry.get("client_address") or b""
        address = address.decode() if isinstance(address, bytes) else str(address)
        if not address or address.startswith("?"):
            inside += 1
            continue
        command = entry["command"]
        words = (command.decode(errors="replace") if isinstance(command, bytes) else str(command)).split(" ")
        name = words[0].lower()
        by_name[NAMES.get(words[1], name) if name == "evalsha" and len(words) > 1 else name] += 1
    if len(entries) >= SLOWLOG_MAX:
        raise SystemExit("redis_calls: the slow log overflowed; raise SLOWLOG_MAX")
    executed = sum(int(v["calls"]) for v in commandstats.values())  # (the bench's own handful included)
    stats = [json.loads(path.read_text()) for path in stats_files]
    got = sorted(i for s in stats for i in s["ids"])
    if got != expected_ids(ids):
        raise SystemExit(f"redis_calls: the union of the items is not the site's pages ({len(got)} items)")
    counted = sum(s["stats"].get("idcrawl/redis/commands", 0) for s in stats)
    trips = sum(s["stats"].get("idcrawl/redis/calls", 0) for s in stats)
    evalsha = int(commandstats.get("cmdstat_evalsha", {}).get("calls", 0))
    return Fleet(workers, ids, seconds, sum(by_name.values()), inside, evalsha, executed, counted, trips, by_name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--ids", type=int, default=2000)
    parser.add_argument("--workers", default="1,2,3")
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=8, help="CONCURRENT_REQUESTS_PER_DOMAIN per worker")
    parser.add_argument("--delay", type=float, default=0.0, help="DOWNLOAD_DELAY (no jitter)")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    site = IdSite(SlowSite(args.ids, args.latency)).start()
    fleets = []
    try:
        with tempfile.TemporaryDirectory(prefix="idcrawl-bench-") as tmp:
            for n in (int(n) for n in args.workers.split(",")):
                fleet = run_fleet(site.url(), args.ids, n, args, Path(tmp))
                fleets.append(fleet)
                print(f"{n} worker(s): {fleet.client / fleet.ids:.3f} client calls per id (Redis), "
                      f"{fleet.counted / fleet.ids:.3f} (workers' count), {fleet.seconds:.1f} s", flush=True)
    finally:
        site.stop()
    print()
    print(f"ids {args.ids}, latency {args.latency} s, CONCURRENT_REQUESTS_PER_DOMAIN {args.concurrency} per worker, "
          f"DOWNLOAD_DELAY {args.delay}, politeness off, IDCRAWL_PROFILE=distributed")
    print("| workers | client calls per id (Redis) | of which EVALSHA | workers' count per id | round trips per id "
          "| commands inside scripts per id | all commands executed per id | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for f in fleets:
        print(f"| {f.workers} | **{f.client / f.ids:.3f}** | {f.evalsha / f.ids:.3f} | {f.counted / f.ids:.3f} "
              f"| {f.trips / f.ids:.3f} | {f.inside / f.ids:.2f} | {f.executed / f.ids:.2f} | {f.seconds:.1f} |")
    print()
    for f in fleets:
        top = ", ".join(f"{name} {count}" for name, count in f.by_name.most_common())
        print(f"{f.workers} worker(s), client commands by name (Redis): {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
