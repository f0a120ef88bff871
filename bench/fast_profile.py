"""The ``fast`` settings profile against a plain Scrapy spider with Scrapy's default settings.

The issue's comparison: what a user gets from ``scrapy crawl idseq ... -s IDCRAWL_PROFILE=fast``
in this project, against what a hand-written Scrapy spider for an id range gets out of the box.

* ``fast``: ``scrapy crawl idseq -a url=... -a start=1 -a max=N -a margin=0 -s IDCRAWL_PROFILE=fast``
  with this project's settings (``idcrawl.settings``: the add-on, robots.txt obeyed, ...);
* ``plain``: ``scrapy runspider bench/plain_spider.py`` run outside any project, so with nothing
  but Scrapy's defaults (``LOG_LEVEL=DEBUG``, 16 requests / 8 per domain, cookies, telnet, ...);
* ``idcrawl`` (only with ``--sides``): the project's settings without a profile.

The only settings given to a side are the measurement plumbing (``STATS_CLASS`` and its output
file; the state file of idcrawl runs) plus ``--set`` for the profiled side when trying candidates.
Rounds alternate sides against one server process (``bench/throughput.py``'s site and helpers:
ids 1..N, every 100th missing). Rates are each crawl's responses / elapsed seconds (CoreStats);
the items of every run must be exactly the site's pages, or the script exits with 1. The result is
the median over rounds of fast/plain (target: >= 1.15). Timings are ratios within one run, never
pass/fail thresholds of the test suite.

    .venv/bin/python bench/fast_profile.py                      # 20,000 ids, 3 rounds
    .venv/bin/python bench/fast_profile.py --ids 3000 --rounds 1 --set CONCURRENT_ITEMS=100
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from throughput import (  # noqa: E402
    POLITENESS_OFF,
    ROOT,
    Run,
    expected_ids,
    measure,
    print_table,
    start_server,
    stop_server,
)

SIDES = ("fast", "plain", "idcrawl")


def command(side: str, url: str, ids: int, args: argparse.Namespace, stats_file: Path,
            state_file: Path) -> tuple[list[str], dict[str, str], Path]:
    """The command line, environment and working directory of one side."""
    # politeness off on every side (fast turns it off itself; the default is on, plain Scrapy's delays are 0)
    settings: dict[str, object] = {**POLITENESS_OFF, "STATS_CLASS": "benchstats.BenchStatsCollector",
                                   "BENCH_STATS_FILE": str(stats_file)}
    base_env = {k: v for k, v in os.environ.items() if k not in ("SCRAPY_SETTINGS_MODULE", "PYTHONPATH")}
    if side == "plain":
        cmd = ["scrapy", "runspider", str(BENCH / "plain_spider.py"), "-a", f"url={url}", "-a", "start=1",
               "-a", f"max={ids}"]
        env = {**base_env, "PYTHONPATH": str(BENCH)}
        cwd = stats_file.parent  # no scrapy.cfg there: no project settings, only Scrapy's defaults
    else:
        cmd = ["scrapy", "crawl", "idseq", "-a", f"url={url}", "-a", "start=1", "-a", f"max={ids}", "-a", "margin=0"]
        settings["IDCRAWL_STATE_PATH"] = str(state_file)
        settings["IDCRAWL_DISCARD_ITEMS"] = True  # as the plain side, no feed: the items are dropped on purpose
        if side == "fast":
            settings["IDCRAWL_PROFILE"] = args.profile_name
            for item in args.set:
                key, _, value = item.partition("=")
                settings[key] = value
        env = {**base_env, "SCRAPY_SETTINGS_MODULE": "idcrawl.settings",
               "PYTHONPATH": os.pathsep.join([str(BENCH), str(ROOT)])}
        cwd = ROOT
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    return cmd, env, cwd


def crawl(side: str, round_: int, url: str, ids: int, args: argparse.Namespace, server: subprocess.Popen[str],
          workdir: Path, label: str | None = None) -> Run:
    label = label or side
    stats_file = workdir / f"{label}-{round_}.json"
    log_file = workdir / f"{label}-{round_}.log"
    state_file = workdir / f"{label}-{round_}.state.sqlite"
    for path in (stats_file, state_file):
        path.unlink(missing_ok=True)
    cmd, env, cwd = command(side, url, ids, args, stats_file, state_file)
    return measure(label, round_, [sys.executable, "-m", *cmd], env=env, cwd=cwd, server=server,
                   stats_file=stats_file, log_file=log_file, timeout=args.timeout, tool="fast_profile")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="The fast settings profile (idcrawl) versus a plain Scrapy spider with Scrapy's default "
                    "settings; median ratio fast/plain (the issue's target is >= 1.15).")
    parser.add_argument("--ids", type=int, default=20_000, help="ids 1..N to crawl (default 20000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of alternating sides (default 3)")
    parser.add_argument("--profile-name", default="fast", help="the profile of the 'fast' side (default fast)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra -s setting for the profiled side (to try a candidate); repeatable")
    parser.add_argument("--sides", default="fast,plain",
                        help=f"comma-separated sides, in round order, from {', '.join(SIDES)} (default fast,plain; "
                             "without plain no ratio is computed, e.g. to compare --set candidates by pages/CPU-s)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE[,KEY=VALUE]",
                        help="ablation: instead of the sides, run the profiled side as is and once per variant "
                             "(its settings on top, separated by ';' if a value has commas), alternating; "
                             "repeatable")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before one crawl is killed")
    parser.add_argument("--keep", type=Path, help="keep logs and stats in this directory")
    args = parser.parse_args(argv)
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if args.ids < 1 or args.rounds < 1 or not sides or set(sides) - set(SIDES):
        parser.error(f"need --ids >= 1, --rounds >= 1 and --sides from {SIDES}")

    if args.variant:
        return ablate(args)
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="idcrawl-fast-"))
    workdir.mkdir(parents=True, exist_ok=True)
    server, port = start_server(args.ids)
    url = f"http://127.0.0.1:{port}/notice/{{id}}"
    expected = expected_ids(args.ids)
    extra = " ".join(f"-s {s}" for s in args.set)
    print(f"fast_profile: {args.ids} ids ({len(expected)} pages) at {url}; {args.rounds} rounds of {sides}; "
          f"profile {args.profile_name!r} {extra}; files in {workdir}", flush=True)
    runs: list[Run] = []
    try:
        for round_ in range(1, args.rounds + 1):
            for side in sides:
                run = crawl(side, round_, url, args.ids, args, server, workdir)
                runs.append(run)
                print(f"  round {round_} {side:<7}: {run.rate:7.1f} pages/s ({run.responses} responses in "
                      f"{run.elapsed:.1f}s, {run.items} items)", flush=True)
    finally:
        stop_server(server)

    print()
    print_table(runs)
    print()
    for side in sides:
        if side == "plain" or "plain" not in sides:  # without plain (--sides fast: trying candidates) no ratio
            continue
        ratios = []
        for round_ in range(1, args.rounds + 1):
            a, b = (next(r for r in runs if r.round == round_ and r.side == s) for s in (side, "plain"))
            ratios.append(a.rate / b.rate)
        cpu_ratio = statistics.median(r.cpu_rate for r in runs if r.side == side) / statistics.median(
            r.cpu_rate for r in runs if r.side == "plain")
        ratio = statistics.median(ratios)
        print(f"ratio {side}/plain per round: {' '.join(f'{r:.3f}' for r in ratios)}; "
              f"pages per CPU-second ratio {cpu_ratio:.3f}")
        target = f" (target >= 1.15: {'met' if ratio >= 1.15 else 'not met'})" if side == "fast" else ""
        print(f"MEDIAN RATIO {side}/plain: {ratio:.3f}{target}")
    med = {s: statistics.median(r.rate for r in runs if r.side == s) for s in sides}
    print("median pages/s: " + ", ".join(f"{s} {v:.1f}" for s, v in med.items()))
    bad = [r for r in runs if r.ids != expected or r.items != len(expected)]
    for r in bad:
        missing = sorted(set(expected) - set(r.ids))[:10]
        extra_ids = sorted(set(r.ids) - set(expected))[:10]
        print(f"MISMATCH: round {r.round} {r.side}: {r.items} items; missing {missing} extra {extra_ids}",
              file=sys.stderr)
    if bad:
        return 1
    print("every side found exactly the site's pages in every round")
    if args.keep is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def ablate(args: argparse.Namespace) -> int:
    """Each setting of the profile earns its place: the profile with one variant's settings on top."""
    variants: list[tuple[str, list[str]]] = [(args.profile_name, [])]
    for spec in args.variant:
        name, _, sets = spec.partition(":")
        sep = ";" if ";" in sets else ","  # ";" when a value has commas (a dict of several keys)
        variants.append((name, [s for s in sets.split(sep) if s]))
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="idcrawl-ablate-"))
    workdir.mkdir(parents=True, exist_ok=True)
    server, port = start_server(args.ids)
    url = f"http://127.0.0.1:{port}/notice/{{id}}"
    print(f"fast_profile ablation: {args.ids} ids, {args.rounds} rounds of {[v[0] for v in variants]}; "
          f"files in {workdir}", flush=True)
    runs: list[Run] = []
    try:
        for round_ in range(1, args.rounds + 1):
            for name, sets in variants:
                one = argparse.Namespace(**{**vars(args), "set": [*args.set, *sets]})
                run = crawl("fast", round_, url, args.ids, one, server, workdir, label=name)
                runs.append(run)
                print(f"  round {round_} {name:<12}: {run.rate:7.1f} pages/s, {run.cpu_rate:7.1f} pages/CPU-s",
                      flush=True)
    finally:
        stop_server(server)
    base = variants[0][0]
    med = {n: statistics.median(r.rate for r in runs if r.side == n) for n, _ in variants}
    cpu = {n: statistics.median(r.cpu_rate for r in runs if r.side == n) for n, _ in variants}
    print()
    print(f"{'variant':<12} {'settings on top of ' + base:<60} {'pages/s':>8} {'vs base':>8} {'pages/CPU-s':>11} "
          f"{'vs base':>8}")
    for name, sets in variants:
        print(f"{name:<12} {' '.join(sets) or '-':<60} {med[name]:>8.1f} {med[name] / med[base]:>8.3f} "
              f"{cpu[name]:>11.1f} {cpu[name] / cpu[base]:>8.3f}")
    expected = expected_ids(args.ids)
    bad = [r for r in runs if r.ids != expected]
    if args.keep is None and not bad:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
