"""Adaptive speculation and retries that never stall a lane: requests wasted, throughput, crawl time.

Two benchmarks, each a series of real ``scrapy crawl idseq`` runs against a local site (an
``IdSite`` in a thread of this process, answering after ``--latency``), sides alternating in
every round (``IDCRAWL_SPECULATION=adaptive``, then ``window``, then adaptive again, ...):

``waste`` (the default): for each concurrency of ``--concurrency`` (1, 4, 16, 32, 64):

- *lane end*: ids 1,000-1,400 exist but for 3 gaps, one target from 1,200 in both directions,
  margin 10, 20 ms latency. A sequential walk sends 421 requests (the two lanes up to and including
  their cuts); the *waste* is the requests sent beyond it (``idcrawl/past_cut``). Goal: <= the margin
  per lane end (20 here) at any concurrency with ``adaptive``.
- *gappy*: ids 1..``--gappy-ids`` (5,000) with 5% scattered gaps (seeded; every run of gaps is
  shorter than the margin), one asc lane from 1, margin 10: pages/s (spider opened to closed), pages
  per CPU-second of the crawl process, and the waste. Goal: ``adaptive`` >= 0.95 of ``window``.

``flaky``: ``--ids`` (3,000) ids that all exist, ``--flaky`` (30) of them (seeded, spread out)
answer 503 twice and then 200; 100 ms latency, concurrency 8, the default attempts (3) and
cool-downs (10 s, then 20 s). Three sides per round: a *clean* crawl (the same site without flaky
ids), ``flaky adaptive`` and ``flaky window``; each run's crawl time (spider opened to closed).
Goal: ``flaky adaptive`` <= clean + the longest cool-down chain (30 s).

Every run checks its items: exactly the site's existing ids (exit status 1 otherwise). Timings
are ratios within one run on one machine, never pass/fail thresholds; the test suite times nothing.

Smoke runs (seconds, not figures)::

    .venv/bin/python bench/speculation.py waste --rounds 1 --concurrency 1 16 --gappy-ids 500
    .venv/bin/python bench/speculation.py flaky --rounds 1 --ids 200 --flaky 3 --cooldown 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from throughput import POLITENESS_OFF  # noqa: E402

from idcrawl.demo.site import DemoModel, IdSite, Reply  # noqa: E402
from tests.support.reference import lane_truth  # noqa: E402

LANE_END_GAPS = frozenset({1050, 1230, 1310})  # ids 1,000-1,400 but these
MARGIN = 10


class Site(DemoModel):
    """Ids in ``[low, high]`` exist but ``gaps``; ``flaky`` ones answer 503 ``fails`` times first."""

    def __init__(self, low: int, high: int, gaps: frozenset[int] = frozenset(), *, latency: float,
                 flaky: frozenset[int] = frozenset(), fails: int = 2) -> None:
        super().__init__(low, high)
        self.gaps, self.latency, self.flaky, self.fails = gaps, latency, flaky, fails

    def exists(self, id_: int) -> bool:
        return self.low <= id_ <= self.high and id_ not in self.gaps

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if id_ in self.flaky and nth <= self.fails:
            return Reply(503, b"busy", (), self.latency)
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, self.latency)


@dataclass
class Run:
    side: str
    requests: int
    elapsed: float  # spider opened -> closed (CoreStats)
    cpu: float  # CPU seconds of the crawl process
    past_cut: int
    ids: list[int]

    @property
    def pages_per_s(self) -> float:
        return self.requests / self.elapsed if self.elapsed else 0.0

    @property
    def pages_per_cpu_s(self) -> float:
        return self.requests / self.cpu if self.cpu else 0.0


def crawl(side: str, model: Site, args: Sequence[str], settings: dict[str, object], workdir: Path) -> Run:
    """One ``scrapy crawl idseq`` against a fresh site; its requests, times and items."""
    site = IdSite(model).start()
    stats_file = workdir / "stats.json"
    stats_file.unlink(missing_ok=True)
    every = {"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": "False", "ROBOTSTXT_OBEY": "False",
             "IDCRAWL_STATE": "False", "STATS_CLASS": "benchstats.BenchStatsCollector",
             "BENCH_STATS_FILE": str(stats_file), **POLITENESS_OFF, **settings}
    cmd = [sys.executable, "-m", "scrapy", "crawl", "idseq", "-a", f"url={site.url()}"]
    for arg in args:
        cmd += ["-a", arg]
    for key, value in every.items():
        cmd += ["-s", f"{key}={value}"]
    path = os.pathsep.join([str(BENCH), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings", "PYTHONPATH": path}
    before = os.times()
    try:
        with (workdir / f"{side}.log").open("w") as log:
            status = subprocess.run(cmd, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    check=False, timeout=3600).returncode
    finally:
        site.stop()
    after = os.times()
    if status != 0 or not stats_file.exists():
        raise SystemExit(f"speculation: {side} failed (exit status {status}); log: {workdir / f'{side}.log'}")
    data = json.loads(stats_file.read_text())
    stats = data["stats"]
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return Run(side, len(site.ids()), float(stats.get("elapsed_time_seconds", 0.0)), cpu,
               int(stats.get("idcrawl/past_cut", 0)), sorted(i for i in data["ids"] if i is not None))


def check(run: Run, model: Site) -> None:
    expected = [i for i in range(model.low, model.high + 1) if model.exists(i)]
    if run.ids != expected:
        raise SystemExit(f"speculation: {run.side} emitted {len(run.ids)} ids, the site has {len(expected)}")


def sequential_requests(model: Site, start: int, direction: str) -> int:
    """Requests of a sequential walk (each lane up to and including its cut)."""
    total = 0
    lanes = [(start, 1), (start - 1, -1)] if direction == "both" else [(start, 1)]
    for first, step in lanes:
        _, cut = lane_truth(model.exists, first, step, None, MARGIN)
        assert cut is not None
        total += (cut - first) * step + 1
    return total


def gappy_site(ids: int, latency: float, seed: int) -> Site:
    """5% of ids 1..ids missing, scattered; no run of gaps as long as the margin."""
    rnd = random.Random(seed)
    gaps: set[int] = set()
    while len(gaps) < ids // 20:
        gap = rnd.randint(2, ids - 1)
        if all(gap + k not in gaps for k in range(-MARGIN // 2, MARGIN // 2 + 1)):  # runs of 1
            gaps.add(gap)
    return Site(1, ids, frozenset(gaps), latency=latency)


def waste(options: argparse.Namespace, workdir: Path) -> None:
    lane_end = Site(1000, 1400, LANE_END_GAPS, latency=options.latency)
    sequential = sequential_requests(lane_end, 1200, "both")
    gappy = gappy_site(options.gappy_ids, options.latency, options.seed)
    gappy_sequential = sequential_requests(gappy, 1, "asc")
    print(f"lane end: ids 1,000-1,400 but {sorted(LANE_END_GAPS)}, both from 1,200, margin {MARGIN}, "
          f"{options.latency * 1000:.0f} ms; a sequential walk sends {sequential} requests")
    print(f"gappy: ids 1..{options.gappy_ids}, {len(gappy.gaps)} scattered gaps, asc from 1, margin {MARGIN}; "
          f"a sequential walk sends {gappy_sequential} requests")
    rows: dict[tuple[int, str, str], list[Run]] = {}
    for round_ in range(options.rounds):
        for concurrency in options.concurrency:
            conc = {"CONCURRENT_REQUESTS": concurrency, "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency}
            sides = ("adaptive", "window") if round_ % 2 == 0 else ("window", "adaptive")
            for side in sides:
                settings = {**conc, "IDCRAWL_SPECULATION": side}
                run = crawl(side, lane_end, ["start=1200", "direction=both", f"margin={MARGIN}"], settings, workdir)
                check(run, lane_end)
                rows.setdefault((concurrency, "lane end", side), []).append(run)
                run = crawl(side, gappy, ["start=1", f"margin={MARGIN}"], settings, workdir)
                check(run, gappy)
                rows.setdefault((concurrency, "gappy", side), []).append(run)
    print()
    print(f"{'concurrency':>11} {'site':<9} {'side':<9} {'requests':>8} {'waste':>6} {'pages/s':>8} "
          f"{'pages/cpu-s':>11}  (medians of {options.rounds} rounds)")
    for (concurrency, site, side), runs in rows.items():
        base = sequential if site == "lane end" else gappy_sequential
        requests = statistics.median(r.requests for r in runs)
        print(f"{concurrency:>11} {site:<9} {side:<9} {requests:>8.0f} {requests - base:>6.0f} "
              f"{statistics.median(r.pages_per_s for r in runs):>8.1f} "
              f"{statistics.median(r.pages_per_cpu_s for r in runs):>11.1f}")
    for concurrency in options.concurrency:
        ratio = [a.pages_per_s / w.pages_per_s for a, w in zip(rows[(concurrency, "gappy", "adaptive")],
                                                                rows[(concurrency, "gappy", "window")], strict=True)]
        print(f"gappy, concurrency {concurrency}: adaptive/window pages/s per round "
              f"{' '.join(f'{r:.3f}' for r in ratio)}, median {statistics.median(ratio):.3f}")


def flaky(options: argparse.Namespace, workdir: Path) -> None:
    rnd = random.Random(options.seed)
    ids = options.ids
    flaky_ids = frozenset(rnd.sample(range(2, ids), options.flaky))
    clean = Site(1, ids, latency=options.latency)
    with_flaky = Site(1, ids, latency=options.latency, flaky=flaky_ids)
    chain = options.cooldown * (1 + 2.0)
    print(f"ids 1..{ids} all found, {len(flaky_ids)} answer 503 twice; {options.latency * 1000:.0f} ms, "
          f"concurrency {options.concurrency}, cool-downs {options.cooldown:g} s then {options.cooldown * 2:g} s "
          f"(chain {chain:g} s)")
    args = ["start=1", f"margin={MARGIN}", "attempts=3", f"cooldown={options.cooldown}", "backoff=2"]
    conc = {"CONCURRENT_REQUESTS": options.concurrency, "CONCURRENT_REQUESTS_PER_DOMAIN": options.concurrency,
            "IDCRAWL_RETRY_JITTER": 0}
    sides = [("clean", clean, "adaptive"), ("flaky adaptive", with_flaky, "adaptive"),
             ("flaky window", with_flaky, "window")]
    times: dict[str, list[float]] = {}
    for round_ in range(options.rounds):
        for label, model, speculation in sides if round_ % 2 == 0 else sides[::-1]:
            run = crawl(label.replace(" ", "-"), model, args, {**conc, "IDCRAWL_SPECULATION": speculation}, workdir)
            check(run, model)
            times.setdefault(label, []).append(run.elapsed)
            print(f"round {round_ + 1} {label:<15} {run.elapsed:8.1f} s  {run.requests} requests", flush=True)
    clean_time = statistics.median(times["clean"])
    for label, values in times.items():
        median = statistics.median(values)
        print(f"{label:<15} median {median:8.1f} s  (clean + {median - clean_time:.1f} s)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="bench")
    w = sub.add_parser("waste", help="requests past lane ends and throughput per concurrency")
    w.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 32, 64])
    w.add_argument("--latency", type=float, default=0.02)
    w.add_argument("--gappy-ids", type=int, default=5000)
    w.add_argument("--rounds", type=int, default=3)
    w.add_argument("--seed", type=int, default=18)
    f = sub.add_parser("flaky", help="crawl time with ids answering 503 twice, against a clean crawl")
    f.add_argument("--ids", type=int, default=3000)
    f.add_argument("--flaky", type=int, default=30)
    f.add_argument("--latency", type=float, default=0.1)
    f.add_argument("--concurrency", type=int, default=8)
    f.add_argument("--cooldown", type=float, default=10.0)
    f.add_argument("--rounds", type=int, default=2)
    f.add_argument("--seed", type=int, default=18)
    options = parser.parse_args(argv)
    print(f"{platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d', time.gmtime())}")
    with tempfile.TemporaryDirectory(prefix="idcrawl-speculation-") as tmp:
        if options.bench == "flaky":
            flaky(options, Path(tmp))
        else:
            if options.bench is None:
                options = parser.parse_args(["waste", *(argv or sys.argv[1:])])
            waste(options, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
