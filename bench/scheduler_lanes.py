"""The scheduler core alone: ``Frontier.next()`` calls per second against the number of lanes.

For each lane count (10, 1,000, 100,000 by default) and each number of groups
(download slots; 1, 10, 1,000 by default, capped at the lane count) it builds
one asc target per lane (margin 10, window 32, unbounded) spread round-robin
over the groups with ``Frontier(targets, group_of=...)``, then times calls of
``next()``, each followed by ``record()`` of the dispensed id as FOUND (with a
small payload, so the hold-and-release path runs too) so that windows keep
moving. All frontiers are built first (construction is timed separately and
not counted), each case is warmed up with 10,000 calls, then ``--repeats``
passes time every case once in turn and each case shows its best pass (the
usual microbenchmark practice: on a shared machine noise only ever slows a
run down, and interleaving spreads slow spells over all cases).

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
        # a path of its own per target: targets of one URL template share an id space (overlap), which
        # is not what this measures
        Target(name=f"t{i}", url=f"http://h{i % groups}.example/t{i}/item/{{id}}", start=1,
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
        dispatch = next_(group_ready).dispatch
        if dispatch is None:
            raise RuntimeError("the frontier ran dry: every lane should stay ready")
        record(dispatch.lane, dispatch.id, FOUND, PAYLOAD)
    return calls / (time.perf_counter() - started)


def busy_filter(busy: int) -> Callable[[Hashable], bool] | None:
    """A ``group_ready`` that reports groups 0..busy-1 busy (None: all ready)."""
    if busy == 0:
        return None
    return lambda group: group >= busy  # type: ignore[operator]


VARIANTS = {"free": 0, "busy1": 1, "busy32": 32}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Frontier.next() calls/s with 10 to 100,000 lanes (target: at most a 2x drop).")
    parser.add_argument("--lanes", default="10,1000,100000", help="lane counts (default 10,1000,100000)")
    parser.add_argument("--groups", default="1,10,1000", help="group counts (default 1,10,1000)")
    parser.add_argument("--calls", type=int, default=50_000, help="timed calls per measurement (default 50000)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="passes over all cases; each case shows its best pass (default 5)")
    args = parser.parse_args(argv)
    lane_counts = sorted({int(x) for x in args.lanes.split(",")})
    group_counts = sorted({int(x) for x in args.groups.split(",")})
    if min(lane_counts) < 1 or min(group_counts) < 1 or args.calls < 1 or args.repeats < 1:
        parser.error("counts must be >= 1")

    print(f"scheduler_lanes: Python {platform.python_version()}; {args.calls} calls per measurement; "
          f"best of {args.repeats} interleaved passes; each call is next() + record(FOUND)", flush=True)
    frontiers: dict[tuple[int, int], Frontier[tuple[str, ...]]] = {}
    build_s: dict[tuple[int, int], float] = {}
    for lanes in lane_counts:
        for groups in sorted({min(g, lanes) for g in group_counts}):
            frontiers[(lanes, groups)], build_s[(lanes, groups)] = build(lanes, groups)
    cases = [(shape, variant) for shape in frontiers for variant, busy in VARIANTS.items() if busy < shape[1]
             or busy == 0]
    best: dict[tuple[tuple[int, int], str], float] = {}
    for case in cases:  # warm-up
        drive(frontiers[case[0]], min(args.calls, 10_000), busy_filter(VARIANTS[case[1]]))
    for _ in range(args.repeats):
        for shape, variant in cases:
            gc.collect()
            rate = drive(frontiers[shape], args.calls, busy_filter(VARIANTS[variant]))
            best[(shape, variant)] = max(best.get((shape, variant), 0.0), rate)

    header = f"{'lanes':>7} {'groups':>6} {'build s':>8} {'calls/s':>9} {'1 busy':>9} {'32 busy':>9}"
    print(header)
    print("-" * len(header))
    for shape in frontiers:
        cells = [f"{best[(shape, v)]:>9.0f}" if (shape, v) in best else f"{'-':>9}" for v in VARIANTS]
        print(f"{shape[0]:>7} {shape[1]:>6} {build_s[shape]:>8.2f} {' '.join(cells)}")

    low, high = lane_counts[0], lane_counts[-1]
    print()
    print(f"ratio calls/s {high} lanes / {low} lanes, same group count and busy groups "
          "(target >= 0.5, i.e. at most a 2x drop):")
    worst = None
    for groups in group_counts:
        a, b = (low, min(groups, low)), (high, min(groups, high))
        for variant, label in (("free", "all groups ready"), ("busy1", "1 busy group"), ("busy32", "32 busy groups")):
            if (a, variant) in best and (b, variant) in best:
                ratio = best[(b, variant)] / best[(a, variant)]
                worst = ratio if worst is None else min(worst, ratio)
                print(f"  {label:<16}: {a[0]:>6} lanes/{a[1]:<4} groups {best[(a, variant)]:>7.0f} -> "
                      f"{b[0]:>6} lanes/{b[1]:<4} groups {best[(b, variant)]:>7.0f} calls/s: ratio {ratio:.2f}")
    if worst is not None:
        print(f"worst ratio: {worst:.2f} (target >= 0.5: {'met' if worst >= 0.5 else 'not met'})")
    print()
    print("cost of skipping busy groups (calls/s with busy groups / all ready, same frontier):")
    for shape in frontiers:
        parts = [f"{v[4:]} busy {best[(shape, v)] / best[(shape, 'free')]:.2f}"
                 for v in ("busy1", "busy32") if (shape, v) in best]
        if parts:
            print(f"  {shape[0]:>6} lanes/{shape[1]:<4} groups: {', '.join(parts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
