"""The scheduler core alone: ``Frontier.next()`` calls per second against the number of lanes.

For each lane count (10, 1,000, 100,000 by default) and each number of groups
(download slots; 1, 10, 1,000 by default, capped at the lane count) it builds
one asc target per lane (margin 10, window 32, unbounded) spread round-robin
over the groups with ``Frontier(targets, group_of=...)``, then times calls of
``next()``, each followed by ``record()`` of the dispensed id as FOUND (with a
small payload, so the hold-and-release path runs too) so that windows keep
moving. Each case is warmed up with 10,000 calls, then timed ``--repeats``
times; the best rate is shown (the usual microbenchmark practice: on a shared
machine the noise only ever slows a run down). Construction is timed
separately and not counted.

With more than one group it also times ``next(group_ready)`` where the
callback rejects 1 busy group (and 32 busy groups, the most that
CONCURRENT_REQUESTS=32 can keep busy, when there are more than 32 groups):
the lanes of a busy group are never charged, so its heap entry stays on top
and every pick has to skip it, the worst case of skipping.

The headline is the ratio of calls/s with 100,000 lanes to calls/s with 10
lanes, per group count (target: no more than a 2x drop, i.e. ratio >= 0.5).
Timings are ratios within one run, never pass/fail thresholds.
"""

from __future__ import annotations

import argparse
import gc
import platform
import sys
import time
from collections.abc import Callable, Hashable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from idcrawl.core.frontier import Frontier
from idcrawl.core.lanes import Outcome
from idcrawl.core.targets import Direction, Target

FOUND = Outcome.FOUND
PAYLOAD = ("item",)


def build(lanes: int, groups: int) -> tuple[Frontier[tuple[str, ...]], float]:
    targets = [
        Target(name=f"t{i}", url=f"http://h{i % groups}.example/item/{{id}}", start=1,
               direction=Direction.ASC, margin=10, window=32)
        for i in range(lanes)
    ]
    group_of_name = {t.name: i % groups for i, t in enumerate(targets)}
    started = time.perf_counter()
    frontier: Frontier[tuple[str, ...]] = Frontier(targets, group_of=lambda t: group_of_name[t.name])
    return frontier, time.perf_counter() - started


def drive(frontier: Frontier[tuple[str, ...]], calls: int,
          group_ready: Callable[[Hashable], bool] | None) -> float:
    """Calls of next() (+ record) per second over ``calls`` calls."""
    next_, record = frontier.next, frontier.record
    started = time.perf_counter()
    for _ in range(calls):
        dispatch = next_(group_ready)
        if dispatch is None:
            raise RuntimeError("the frontier ran dry: every lane should stay ready")
        record(dispatch.lane, dispatch.id, FOUND, PAYLOAD)
    return calls / (time.perf_counter() - started)


def measure(frontier: Frontier[tuple[str, ...]], calls: int, repeats: int,
            group_ready: Callable[[Hashable], bool] | None) -> float:
    drive(frontier, min(calls, 10_000), group_ready)  # warm-up
    gc.collect()
    return max(drive(frontier, calls, group_ready) for _ in range(repeats))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Frontier.next() calls/s with 10 to 100,000 lanes (target: at most a 2x drop).")
    parser.add_argument("--lanes", default="10,1000,100000", help="lane counts (default 10,1000,100000)")
    parser.add_argument("--groups", default="1,10,1000", help="group counts (default 1,10,1000)")
    parser.add_argument("--calls", type=int, default=50_000, help="timed calls per measurement (default 50000)")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per case; the best is shown (default 5)")
    args = parser.parse_args(argv)
    lane_counts = [int(x) for x in args.lanes.split(",")]
    group_counts = [int(x) for x in args.groups.split(",")]
    if min(lane_counts) < 1 or min(group_counts) < 1 or args.calls < 1 or args.repeats < 1:
        parser.error("counts must be >= 1")

    print(f"scheduler_lanes: Python {platform.python_version()}; {args.calls} calls per measurement, "
          f"best of {args.repeats}; each call is next() + record(FOUND)")
    header = (f"{'lanes':>7} {'groups':>6} {'build s':>8} {'calls/s':>9} {'1 busy':>9} {'32 busy':>9}")
    print(header)
    print("-" * len(header))
    results: dict[tuple[int, int], dict[str, float]] = {}
    for lanes in lane_counts:
        for groups in sorted({min(g, lanes) for g in group_counts}):
            frontier, build_s = build(lanes, groups)
            row = {"build": build_s, "free": measure(frontier, args.calls, args.repeats, None)}
            for busy in (1, 32):
                if busy < groups:
                    ready = (lambda g: g != 0) if busy == 1 else (lambda g, b=busy: g >= b)  # type: ignore[misc]
                    row[f"busy{busy}"] = measure(frontier, args.calls, args.repeats, ready)
            results[(lanes, groups)] = row
            cells = [f"{row[k]:>9.0f}" if k in row else f"{'-':>9}" for k in ("busy1", "busy32")]
            print(f"{lanes:>7} {groups:>6} {build_s:>8.2f} {row['free']:>9.0f} {' '.join(cells)}", flush=True)
            del frontier
            gc.collect()

    low, high = min(lane_counts), max(lane_counts)
    print()
    print(f"ratio calls/s {high} lanes / {low} lanes (target >= 0.5, i.e. at most a 2x drop):")
    worst = None
    for groups in group_counts:
        a, b = results.get((low, min(groups, low))), results.get((high, min(groups, high)))
        if a is None or b is None:
            continue
        for key, label in (("free", "all groups ready"), ("busy1", "1 busy group"), ("busy32", "32 busy groups")):
            if key in a and key in b:
                ratio = b[key] / a[key]
                worst = ratio if worst is None else min(worst, ratio)
                print(f"  {groups:>5} groups, {label:<16}: {a[key]:>9.0f} -> {b[key]:>9.0f} calls/s, ratio {ratio:.2f}")
            elif key in b and "free" in a:
                ratio = b[key] / a["free"]
                print(f"  {groups:>5} groups, {label:<16}: (vs {low} lanes all ready) {a['free']:>9.0f} -> "
                      f"{b[key]:>9.0f} calls/s, ratio {ratio:.2f}")
    if worst is not None:
        print(f"worst like-for-like ratio: {worst:.2f} (target >= 0.5: {'met' if worst >= 0.5 else 'not met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
