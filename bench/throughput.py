"""Throughput of idcrawl against a plain Scrapy spider on a fast local server.

Both sides crawl the same ids of the same local site (small pages, 1% of the
ids missing):

* ``idcrawl``: ``scrapy crawl idseq -a url=... -a start=1 -a max=N -a margin=0``
  in this project (its settings, the add-on, durable state on unless ``--no-state``);
* ``plain``: ``scrapy runspider bench/plain_spider.py`` run OUTSIDE the project
  (a temporary folder without ``scrapy.cfg``, no ``SCRAPY_SETTINGS_MODULE``), so
  with Scrapy's defaults; every URL yielded from ``async def start()``.

Both sides get only ``CONCURRENT_REQUESTS=32``, ``CONCURRENT_REQUESTS_PER_DOMAIN=32``,
``ROBOTSTXT_OBEY=False``, ``LOG_LEVEL=WARNING``, politeness off (``POLITENESS_OFF``: idcrawl's
is on by default, a second per request to the one host) and the measurement plumbing (the
stats collector of ``bench/benchstats.py`` and its output file).
``--baseline project`` keeps the older comparison (both under the project's settings).

Runs alternate (idcrawl, plain, idcrawl, plain, ...) against one server process
that lives for the whole benchmark. The headline is pages per CPU-second of the
crawl process (user + system time of the child; insensitive to other load on a
shared machine), the median over rounds of idcrawl/plain (target >= 1.0); wall
pages/s (``response_received_count / elapsed_time_seconds``) is printed beside it.
The ids of the scraped items must be exactly the site's pages on both sides, or
the script exits with 1. Each idcrawl run keeps its durable state in a fresh
file of the work directory, so no run resumes another.
Timings are ratios within one run, never pass/fail thresholds.

``python bench/throughput.py --serve N`` (internal) runs the benchmark site
alone: ids 1..N exist except multiples of 100; it prints ``PORT <n>`` and stops
when its stdin closes (so it never outlives the benchmark).
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


# -- the site -------------------------------------------------------------------


def _serve(ids: int, latency: float = 0.0) -> int:
    sys.path.insert(0, str(ROOT))
    from idcrawl.demo.site import DemoModel, IdSite, Reply

    class BenchModel(DemoModel):
        """Ids 1..ids exist except every 100th (a 1% gap rate)."""

        def __init__(self) -> None:
            super().__init__(low=1, high=ids)

        def exists(self, id_: int) -> bool:
            return 1 <= id_ <= ids and id_ % 100 != 0

        def reply(self, id_: int, host: str, nth: int) -> Reply:
            reply = super().reply(id_, host, nth)
            if latency:  # a latency-bound site (bench/distributed.py --latency)
                return Reply(reply.status, reply.body, reply.headers, latency)
            return reply

    site = IdSite(BenchModel(), port=0)
    site.log = _NoLog()  # type: ignore[assignment]  # the benchmark never reads the request log

    def watch_stdin() -> None:
        sys.stdin.read()  # EOF: the benchmark has finished or died
        os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()
    print(f"PORT {site.port}", flush=True)
    site.serve_forever()
    return 0


class _NoLog(list):  # type: ignore[type-arg]
    def append(self, item: object) -> None:
        return


def project_setting(name: str) -> object:
    """A setting of the project (``idcrawl.settings``), as both sides see it."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import idcrawl.settings

    return getattr(idcrawl.settings, name, None)


def expected_ids(ids: int) -> list[int]:
    return [i for i in range(1, ids + 1) if i % 100 != 0]


def start_server(ids: int, latency: float = 0.0) -> tuple[subprocess.Popen[str], int]:
    """The benchmark site in a process of its own; ``latency``: seconds each response takes."""
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", str(ids), "--serve-latency", str(latency)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline() if proc.stdout else ""))
    reader.start()
    reader.join(30)
    if not line or not line[0].startswith("PORT "):
        proc.kill()
        raise SystemExit(f"throughput: the benchmark server did not start ({line!r})")
    return proc, int(line[0].split()[1])


def stop_server(server: subprocess.Popen[str]) -> None:
    """Close its stdin (it exits on EOF); kill it if it has not exited after 10 s."""
    if server.stdin:
        server.stdin.close()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the crawls -------------------------------------------------------------------


@dataclass
class Run:
    side: str
    round: int
    responses: int
    elapsed: float  # spider opened -> closed (CoreStats)
    steady: float  # first -> last response
    wall: float  # the whole subprocess, Python start-up included
    cpu: float  # CPU seconds of the crawl process
    server_cpu: float  # CPU seconds of the server during the crawl
    items: int
    ids: list[int]
    finish_reason: str

    @property
    def rate(self) -> float:
        return self.responses / self.elapsed if self.elapsed else 0.0

    @property
    def cpu_rate(self) -> float:
        return self.responses / self.cpu if self.cpu else 0.0

    @property
    def steady_rate(self) -> float:
        return (self.responses - 1) / self.steady if self.steady else 0.0


#: Politeness off, said explicitly to both sides (and to every crawl the benchmarks start): idcrawl's is on by
#: default (0.2.0: one request at a time per host, >= 1 s apart); Scrapy's delays are 0 and AutoThrottle off
#: by default, but a project may set them. Throughput figures compare crawls that ask a host as fast as they can.
POLITENESS_OFF: dict[str, object] = {
    "IDCRAWL_POLITENESS_FACTOR": 0,  # idcrawl's per-host gaps (a plain Scrapy spider ignores the name)
    "DOWNLOAD_DELAY": 0,
    "AUTOTHROTTLE_ENABLED": "False",
}

BASELINE_SETTINGS: dict[str, object] = {  # the only settings given to both sides (issue 18)
    "CONCURRENT_REQUESTS": 32,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 32,
    "ROBOTSTXT_OBEY": "False",
    "LOG_LEVEL": "WARNING",
    **POLITENESS_OFF,
}


def command(side: str, url: str, ids: int, args: argparse.Namespace, stats_file: Path,
            state_file: Path) -> tuple[list[str], dict[str, str], Path]:
    """The command line, environment and working directory of one side.

    ``--baseline outside`` (the default): ``plain`` runs in the work directory (no ``scrapy.cfg``), so
    with Scrapy's defaults; ``idcrawl`` with the project's settings and add-on. Both get
    ``BASELINE_SETTINGS`` (``--concurrency`` replaces the 32) plus the measurement plumbing (the stats
    collector and its file). ``--baseline project``: the older comparison, both sides under the
    project's settings (the plain side then carries the add-on's filter and pipeline).
    """
    settings: dict[str, object] = {
        **BASELINE_SETTINGS,
        "CONCURRENT_REQUESTS": args.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
        "STATS_CLASS": "benchstats.BenchStatsCollector",
        "BENCH_STATS_FILE": str(stats_file),
    }
    if args.concurrent_items is not None:
        settings["CONCURRENT_ITEMS"] = args.concurrent_items
    env, cwd = environment(), ROOT
    if side == "base":  # idcrawl from another checkout (--base), same settings: before/after a change
        env, cwd = environment(args.base), args.base
    if side in ("idcrawl", "base"):
        settings["IDCRAWL_STATE_PATH"] = str(state_file)
        settings["IDCRAWL_DISCARD_ITEMS"] = "True"  # items go nowhere on purpose, as the plain spider's do
        if args.window is not None:
            settings["IDCRAWL_WINDOW"] = args.window
        if not args.state:
            settings["IDCRAWL_STATE"] = "False"
        for item in args.set:
            key, _, value = item.partition("=")
            settings[key] = value
        cmd = ["scrapy", "crawl", "idseq", "-a", f"url={url}", "-a", "start=1", "-a", f"max={ids}", "-a", "margin=0"]
    else:
        cmd = ["scrapy", "runspider", str(BENCH / "plain_spider.py"), "-a", f"url={url}", "-a", "start=1",
               "-a", f"max={ids}"]
        if args.baseline == "outside":
            base_env = {k: v for k, v in os.environ.items() if k not in ("SCRAPY_SETTINGS_MODULE", "PYTHONPATH")}
            env, cwd = {**base_env, "PYTHONPATH": str(BENCH)}, stats_file.parent
        else:
            settings["SCHEDULER"] = "scrapy.core.scheduler.Scheduler"
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    return cmd, env, cwd


def environment(root: Path = ROOT) -> dict[str, str]:
    """The crawl's environment: the project's settings, idcrawl imported from ``root`` (its folder comes
    before the installed package on ``PYTHONPATH``, so ``--base`` runs another checkout's code)."""
    path = os.pathsep.join([str(BENCH), str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings", "PYTHONPATH": path}


def start_idseq(url: str, ids: int, items: Path, settings: dict[str, object], log: Path,
                workdir: Path) -> subprocess.Popen[bytes]:
    """One ``scrapy crawl idseq`` of ids 1..``ids`` (margin 0) with ``-s`` ``settings`` (politeness off
    unless they say otherwise), logging to ``log``: how the distributed benchmarks start each worker."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", "idseq", "-a", f"url={url}", "-a", "start=1",
           "-a", f"max={ids}", "-a", "margin=0", "-O", str(items)]
    for key, value in {**POLITENESS_OFF, **settings}.items():
        cmd += ["-s", f"{key}={value}"]
    with log.open("w") as out:
        return subprocess.Popen(cmd, cwd=workdir, env=environment(), stdout=out, stderr=subprocess.STDOUT)


def crawl(side: str, round_: int, url: str, ids: int, args: argparse.Namespace, server: subprocess.Popen[str],
          workdir: Path, profile: Path | None = None) -> Run:
    stats_file = workdir / f"{side}-{round_}.json"
    state_file = workdir / f"{side}-{round_}.state.sqlite"
    for path in (stats_file, state_file):
        path.unlink(missing_ok=True)
    cmd, env, cwd = command(side, url, ids, args, stats_file, state_file)
    prefix = [sys.executable, "-m", "cProfile", "-o", str(profile), "-m"] if profile else [sys.executable, "-m"]
    return measure(side, round_, prefix + cmd, env=env, cwd=cwd, server=server, stats_file=stats_file,
                   log_file=workdir / f"{side}-{round_}.log", timeout=args.timeout, tool="throughput")


def measure(label: str, round_: int, argv: list[str], *, env: dict[str, str], cwd: Path,
            server: subprocess.Popen[str], stats_file: Path, log_file: Path, timeout: float, tool: str) -> Run:
    """Run one crawl to its end and read its rate, CPU and items (shared by the benchmarks)."""
    server_before = cpu_seconds(server.pid)
    usage_before = os.times()
    started = time.monotonic()
    with log_file.open("w") as log:
        try:
            status = subprocess.run(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    timeout=timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            raise SystemExit(f"{tool}: {label} round {round_} took more than {timeout}s; log: {log_file}") from None
    wall = time.monotonic() - started
    usage_after = os.times()
    server_cpu = cpu_seconds(server.pid) - server_before
    if server.poll() is not None:
        raise SystemExit(f"{tool}: the benchmark server died during {label} round {round_}; log: {log_file}")
    if status != 0 or not stats_file.exists():
        raise SystemExit(f"{tool}: {label} round {round_} failed (exit status {status}); log: {log_file}")
    data = json.loads(stats_file.read_text())
    stats = data["stats"]
    cpu = (usage_after.children_user - usage_before.children_user) + (
        usage_after.children_system - usage_before.children_system)
    return Run(
        side=label, round=round_,
        responses=int(stats.get("response_received_count", 0)),
        elapsed=float(stats.get("elapsed_time_seconds", 0.0)),
        steady=(data["last_response"] or 0.0) - (data["first_response"] or 0.0),
        wall=wall, cpu=cpu, server_cpu=server_cpu,
        items=int(stats.get("item_scraped_count", 0)),
        ids=sorted(i for i in data["ids"] if i is not None),
        finish_reason=str(stats.get("finish_reason")),
    )


# -- report -------------------------------------------------------------------------


def print_table(runs: list[Run]) -> None:
    header = (f"{'round':>5} {'side':<8} {'responses':>9} {'items':>6} {'elapsed s':>9} {'pages/s':>8} "
              f"{'steady/s':>8} {'pages/cpu-s':>11} {'crawl cpu%':>10} {'server cpu%':>11} {'wall s':>7}")
    print(header)
    print("-" * len(header))
    for r in runs:
        print(f"{r.round:>5} {r.side:<8} {r.responses:>9} {r.items:>6} {r.elapsed:>9.2f} {r.rate:>8.1f} "
              f"{r.steady_rate:>8.1f} {r.cpu_rate:>11.1f} {100 * r.cpu / r.wall:>9.0f}% "
              f"{100 * r.server_cpu / r.elapsed:>10.0f}% {r.wall:>7.1f}")


def summarize_profile(path: Path, label: str, top: int) -> None:
    stats = pstats.Stats(str(path))
    total = sum(tt for (_cc, _nc, tt, _ct, _callers) in stats.stats.values())  # type: ignore[attr-defined]
    by_origin: dict[str, float] = {}
    rows = []
    for (filename, line, func), (_cc, ncalls, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        origin = _origin(filename)
        by_origin[origin] = by_origin.get(origin, 0.0) + tt
        rows.append((tt, ct, ncalls, origin, f"{_short(filename)}:{line}({func})"))
    print(f"\nprofile of {label}: {total:.1f}s own time in total; by origin (tottime):")
    for origin, tt in sorted(by_origin.items(), key=lambda kv: -kv[1]):
        print(f"  {origin:<10} {tt:7.2f}s {100 * tt / total:5.1f}%")
    print(f"  top {top} functions by own time:")
    for tt, ct, ncalls, origin, name in sorted(rows, reverse=True)[:top]:
        print(f"  {tt:7.2f}s own {ct:7.2f}s cum {ncalls:>9} calls  [{origin}] {name}")
    idcrawl = sorted((r for r in rows if r[3] == "idcrawl"), key=lambda r: -r[1])[:top]
    print("  idcrawl functions by cumulative time (includes what they call):")
    for tt, ct, ncalls, _, name in idcrawl:
        print(f"  {tt:7.2f}s own {ct:7.2f}s cum {ncalls:>9} calls  {name}")


def _origin(filename: str) -> str:
    for part in ("idcrawl", "scrapy", "twisted", "asyncio", "parsel", "lxml", "w3lib"):
        if f"/{part}/" in filename:
            return part
    if filename.startswith("~") or filename.startswith("<"):
        return "builtin"
    return "other"


def _short(filename: str) -> str:
    for part in ("/site-packages/", "/lib/python3"):
        if part in filename:
            return filename.split(part, 1)[1]
    return filename.replace(str(ROOT) + "/", "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Throughput of idcrawl versus a plain Scrapy spider on a fast local server; headline: "
                    "pages per CPU-second of the crawl process, median ratio idcrawl/plain (target >= 1.0).")
    parser.add_argument("--ids", type=int, default=20_000, help="ids 1..N to crawl (default 20000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (idcrawl, plain) (default 3)")
    parser.add_argument("--concurrency", type=int, default=32,
                        help="CONCURRENT_REQUESTS and CONCURRENT_REQUESTS_PER_DOMAIN, both sides (default 32)")
    parser.add_argument("--concurrent-items", type=int,
                        help="CONCURRENT_ITEMS, both sides (default: not set, each side's own default)")
    parser.add_argument("--baseline", choices=("outside", "project"), default="outside",
                        help="outside (default): the plain spider runs outside the project with Scrapy's "
                             "defaults; project: under the project's settings and add-on (the older comparison)")
    parser.add_argument("--no-state", dest="state", action="store_false",
                        help="idcrawl side with IDCRAWL_STATE=False (default: durable state on, as shipped)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra -s setting for the idcrawl side (e.g. IDCRAWL_PROFILE=fast); repeatable")
    parser.add_argument("--window", type=int,
                        help="IDCRAWL_WINDOW, at least 32 (default: the project's, "
                             f"now {project_setting('IDCRAWL_WINDOW')})")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before one crawl is killed")
    parser.add_argument("--keep", type=Path,
                        help="keep logs and stats files in this directory (else a temporary one, "
                             "removed after a successful run)")
    parser.add_argument("--base", type=Path, metavar="DIR",
                        help="also run idcrawl from another checkout DIR (e.g. `git archive main | tar -x -C DIR`) "
                             "with the same settings, alternating: prints the ratio this checkout / DIR")
    parser.add_argument("--no-plain", dest="plain", action="store_false",
                        help="leave out the plain side (with --base: only this checkout against DIR)")
    parser.add_argument("--profile", action="store_true",
                        help="after the timed rounds, run each side once more under cProfile and summarize")
    parser.add_argument("--top", type=int, default=15, help="rows of each profile summary (default 15)")
    parser.add_argument("--serve", type=int, metavar="N", help=argparse.SUPPRESS)
    parser.add_argument("--serve-latency", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        return _serve(args.serve, args.serve_latency)
    if (args.window is not None and args.window < 32) or args.ids < 1 or args.rounds < 1:
        parser.error("need --window >= 32, --ids >= 1 and --rounds >= 1")

    workdir = args.keep or Path(tempfile.mkdtemp(prefix="idcrawl-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    server, port = start_server(args.ids)
    url = f"http://127.0.0.1:{port}/notice/{{id}}"
    expected = expected_ids(args.ids)
    print(f"throughput: {args.ids} ids ({len(expected)} pages, 1% missing) at {url}; "
          f"{args.rounds} rounds; baseline {args.baseline}; CONCURRENT_REQUESTS={args.concurrency} "
          f"CONCURRENT_REQUESTS_PER_DOMAIN={args.concurrency} CONCURRENT_ITEMS={args.concurrent_items or 'default'} "
          f"IDCRAWL_WINDOW={args.window or project_setting('IDCRAWL_WINDOW')} state={'on' if args.state else 'off'} "
          f"{' '.join('-s ' + s for s in args.set)}; files in {workdir}", flush=True)
    sides = ["idcrawl", *(["base"] if args.base else []), *(["plain"] if args.plain else [])]
    runs: list[Run] = []
    try:
        for round_ in range(1, args.rounds + 1):
            for side in sides:
                run = crawl(side, round_, url, args.ids, args, server, workdir)
                runs.append(run)
                print(f"  round {round_} {side:<7}: {run.cpu_rate:7.1f} pages/CPU-s, {run.rate:7.1f} pages/s "
                      f"({run.responses} responses in {run.elapsed:.1f}s, {run.cpu:.1f} CPU-s, {run.items} items)",
                      flush=True)
        if args.profile:
            for side in sides:
                crawl(side, 0, url, args.ids, args, server, workdir, profile=workdir / f"{side}.prof")
    finally:
        stop_server(server)

    print()
    print_table(runs)
    print()
    med = {s: statistics.median(r.rate for r in runs if r.side == s) for s in sides}
    cpu = {s: statistics.median(r.cpu_rate for r in runs if r.side == s) for s in sides}
    steady = {s: statistics.median(r.steady_rate for r in runs if r.side == s) for s in sides}
    print("median pages/CPU-s:", ", ".join(f"{s} {cpu[s]:.1f}" for s in sides),
          "; median pages/s:", ", ".join(f"{s} {med[s]:.1f}" for s in sides),
          "; steady pages/s (first to last response):", ", ".join(f"{s} {steady[s]:.1f}" for s in sides))
    for other in sides[1:]:
        cpu_ratios, ratios = [], []
        for round_ in range(1, args.rounds + 1):
            a, b = (next(r for r in runs if r.round == round_ and r.side == s) for s in ("idcrawl", other))
            cpu_ratios.append(a.cpu_rate / b.cpu_rate)
            ratios.append(a.rate / b.rate)
        print(f"pages per CPU-second, ratio idcrawl/{other} per round:", " ".join(f"{r:.3f}" for r in cpu_ratios))
        print(f"wall pages/s, ratio idcrawl/{other} per round:", " ".join(f"{r:.3f}" for r in ratios))
        ratio = statistics.median(cpu_ratios)
        target = f"; target >= 1.0: {'met' if ratio >= 1.0 else 'not met'}" if other == "plain" else ""
        print(f"MEDIAN RATIO idcrawl/{other}, pages per CPU-second: {ratio:.3f} "
              f"(wall pages/s: {statistics.median(ratios):.3f}{target})")

    items = {s: sorted({r.items for r in runs if r.side == s}) for s in sides}
    print("items:", ", ".join(f"{s} {items[s]}" for s in sides), f"; the site has {len(expected)} pages")
    bad = [r for r in runs if r.ids != expected or r.items != len(expected)]
    if args.profile:
        for side in sides:
            summarize_profile(workdir / f"{side}.prof", side, args.top)
    if bad:
        for r in bad:
            missing = sorted(set(expected) - set(r.ids))[:10]
            extra = sorted(set(r.ids) - set(expected))[:10]
            print(f"MISMATCH: round {r.round} {r.side}: {r.items} items; missing {missing} extra {extra}",
                  file=sys.stderr)
        return 1
    print("every side found exactly the site's pages in every round")
    if args.keep is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
