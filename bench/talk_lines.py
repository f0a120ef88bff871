"""What the plan, progress and summary lines (``IdProgress``) cost for a job of many targets.

For each job size (5,000, 100,000 and 650,000 targets by default, each with
``direction=both``: two lanes a target) it builds the core ``Frontier`` and
times, best of ``--repeats``:

- ``index``: finding the lanes of the shown targets (once per crawl);
- ``plan/summary``: the snapshot with one pass over every lane (at open and at close);
- ``progress``: a progress snapshot and its lines (the others from the job's totals).

Progress lines should cost the same at any job size; the full pass grows with the lanes.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from idcrawl.core.frontier import Frontier
from idcrawl.core.talk import progress_lines
from idcrawl.core.targets import parse_targets
from idcrawl.extensions.progress import shown_lanes, snapshot


def best(repeats: int, func: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        func()
        times.append(time.perf_counter() - started)
    return min(times)


def measure(count: int, shown: int, repeats: int) -> str:
    raws = [{"url": f"https://h{i}.example/{{id}}", "start": "10", "direction": "both", "name": f"t{i}"}
            for i in range(count)]
    frontier: Frontier[object] = Frontier(parse_targets(raws))
    runtime: Any = SimpleNamespace(frontier=frontier, resume_notes={}, stats=SimpleNamespace(get_value=lambda key: 0))
    index = best(repeats, lambda: shown_lanes(runtime, shown))
    keys = shown_lanes(runtime, shown)
    full = best(repeats, lambda: snapshot(runtime, keys, full=True))

    def progress() -> None:
        targets, rest = snapshot(runtime, keys, full=False)
        progress_lines(targets, seconds=5.0, before={}, rest=rest)

    cheap = best(repeats * 100, progress)
    return (f"{count:>9,} targets ({len(frontier.lanes):>9,} lanes): index {index * 1000:7.1f} ms, "
            f"plan/summary {full * 1000:7.1f} ms, progress {cheap * 1000:6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, nargs="+", default=[5_000, 100_000, 650_000])
    parser.add_argument("--shown", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for count in args.targets:
        print(measure(count, args.shown, args.repeats), flush=True)


if __name__ == "__main__":
    main()
