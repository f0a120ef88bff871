"""Turn a target's stored past into the lanes of a resumed run.

What each ``resume`` word walks: docs/resume.md and docs/architecture.md, "Module notes".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pyroaring import BitMap64

from idcrawl.core.frontier import LaneSpec, lane_specs
from idcrawl.core.lanes import Outcome
from idcrawl.core.ranges import LaneRecord, plan_lane
from idcrawl.core.recrawl import Schedule, overdue
from idcrawl.core.targets import BOUND_MODES, RESET_MODES, RESUME_MODES, Target
from idcrawl.core.watch import NO_COALESCING, Coalescing

__all__ = [
    "IDENTITY_KEYS", "RESUME_MODES", "LatePass", "due_first", "identity", "late_due", "late_ids", "late_pass",
    "resume_specs", "tail_bound", "tail_due", "tail_reach", "tail_specs", "walk_reach",
]

#: The target parameters that define which ids a crawl covers: a resumed run
#: must have the same ones (margin, rate, window, attempts may change freely).
IDENTITY_KEYS = ("url", "start", "min", "max", "direction")


def identity(target: Target) -> dict[str, Any]:
    return {key: (str(getattr(target, key)) if key == "direction" else getattr(target, key)) for key in IDENTITY_KEYS}


def tail_due(schedule: Schedule | None, now: float, coalescing: Coalescing = NO_COALESCING) -> bool:
    """Is a target's tail due at ``now`` (``resume=due``)? Yes when ``now - last_crawled > update_duration``,
    or when it has no schedule yet (no run walked it to its margin: an older state, or a stopped run).
    ``coalescing``: a watch wave's window (due within it is due)."""
    return schedule is None or coalescing.due(schedule, now)


def tail_reach(schedule: Schedule | None) -> int | None:
    """How far a ``resume=due`` walk of a tail goes whatever the misses: the highest id a sitemap listed
    above its last found id that no walk has passed yet (:attr:`Schedule.listed`); None: none. Read
    from the tail's record at plan time, so a run resumed after a kill still walks to it."""
    return schedule.listed if schedule is not None else None


def walk_reach(reach: int | None, start: int, stop: int | None, most: int | None = None) -> int | None:
    """The reach of a tail walk from ``start`` (to ``stop``, None: no bound) given its tail's
    (:func:`tail_reach`): none when it is before the start; at most the bound, and at most ``most`` ids
    from the start (``IDCRAWL_SITEMAP_MAX_REACH``; 0: a sitemap never carries a walk past its margin;
    None: no cap), so a sitemap listing a wrong, huge id costs at most that many requests a run (the id
    stays in the record: the next walk goes on from where this one was cut)."""
    if reach is None or reach < start or most == 0:
        return None
    if most is not None:
        reach = min(reach, start + most - 1)
    return reach if stop is None else min(reach, stop)


@dataclass(frozen=True, slots=True)
class LatePass:
    """One re-probe of a target's late ids: the ids, newest first, and the tail schedule to store once it
    is planned (``late_at`` = the plan's time, ``late_below`` = where the next one goes on)."""

    ids: tuple[int, ...]
    schedule: Schedule


def late_ids(missing: BitMap64, found: BitMap64, below: int | None, cap: int) -> tuple[list[int], int | None]:
    """The late ids one re-probe takes: the ids missing (and not found since) below the highest found id,
    newest first from just below ``below`` (None: from the top), going on from the top when the bottom
    is reached, at most ``cap`` of them; and the last one taken (the next re-probe goes on below it).
    A rotation: every late id is re-probed once in ``ceil(late ids / cap)`` re-probes."""
    if not found or cap <= 0:
        return [], below
    top = found.max()
    late = missing - found
    count = late.rank(top - 1) if top > 0 else 0  # the late ids are late[0:count], the ids < top
    if not count:
        return [], None
    start = count if below is None else min(late.rank(below - 1), count) if below > 0 else 0  # late[:start] < below
    order = [late[i] for i in range(start - 1, max(start - 1 - cap, -1), -1)]
    if len(order) < cap:  # the bottom reached: go on from the top, down to where this re-probe began
        order += [late[i] for i in range(count - 1, max(start - 1, count - 1 - (cap - len(order))), -1)]
    return order, order[-1]


def late_due(target: Target, schedule: Schedule | None, now: float) -> bool:
    """Is a re-probe of ``target``'s late ids due at ``now``? With ``resume=due`` and ``late_every`` (> 0),
    for a tail walked to its margin once (a schedule with a last found id: the ids below it were passed),
    when ``now - late_at > late_every`` (strictly, as :func:`tail_due`) or it was never re-probed."""
    every = target.policy.late_every
    if target.resume != "due" or every <= 0 or schedule is None or schedule.last_found is None:
        return False
    return schedule.late_at is None or now - schedule.late_at > every


def late_pass(target: Target, schedule: Schedule | None, outcomes: Mapping[Outcome, BitMap64],
              now: float) -> LatePass | None:
    """``resume=due``: the re-probe of ``target``'s late ids due at ``now`` (``late_every`` of its policy
    since the last one), or None (off, not due, no tail walked yet, no late id)."""
    if schedule is None or not late_due(target, schedule, now):
        return None
    found = outcomes.get(Outcome.FOUND, BitMap64())
    ids, below = late_ids(outcomes.get(Outcome.MISSING, BitMap64()), found, schedule.late_below,
                          target.policy.late_max)
    if not ids:
        return None
    return LatePass(tuple(ids), replace(schedule, late_at=now, late_below=below))


def due_first(targets: Sequence[Target], tails: Mapping[str, Schedule], now: float) -> list[Target]:
    """``resume=due``: the targets whose tails are most overdue first (``overdue / duration``: they win the
    interleaving's ties, so a run cut short by a limit has walked them); the others keep their order."""

    def rank(target: Target) -> float:
        schedule = tails.get(target.name)
        return -overdue(schedule, now) if target.resume == "due" and schedule is not None else 0.0

    return sorted(targets, key=rank)  # stable: ties keep the job's order


def resume_specs(
    target: Target,
    lanes: Mapping[str, LaneRecord],
    outcomes: Mapping[Outcome, BitMap64],
    mode: str,
    holes: str = "failed",
    *,
    walk_tail: bool = True,
    due_pages: Sequence[int] = (),
    late: Sequence[int] = (),
    reach: int | None = None,
    max_reach: int | None = None,
) -> list[LaneSpec]:
    """The lanes to walk when resuming ``target`` with ``mode``.

    ``due`` only: ``walk_tail`` False leaves out the tail (not due: :func:`tail_due`); ``due_pages``,
    found ids due for a revisit in fetch order (most overdue first: :func:`idcrawl.core.recrawl.due_order`),
    become a list lane ``<target>:due`` after the tail (the hook of the page revisits); ``late``, the
    ids of a re-probe of late ids (:func:`late_pass`), a list lane ``<target>:late`` after them;
    ``reach``, the tail's reach (:func:`tail_reach`), at most ``max_reach`` ids (:func:`walk_reach`).
    """
    if mode == "due":
        walks = tail_specs(target, lanes, reach, max_reach) if walk_tail else []
        if due_pages:
            walks.append(_list_lane(target, "due", due_pages, refetch_found=True))  # found ids, which the tail skips
        if late:
            walks.append(_list_lane(target, "late", late))
        return walks
    if mode in RESET_MODES or not lanes:
        return lane_specs(target)
    specs: list[LaneSpec] = []
    fresh = {spec.key: spec for spec in lane_specs(target)}
    hole_ids = BitMap64()
    for key, record in lanes.items():
        plan = plan_lane(record, dict(outcomes))
        spec = fresh.get(key)
        again: int | None = None  # the continued lane walks its ids from here on: not holes to refetch
        if (mode in BOUND_MODES or mode == "all") and plan.bound is not None and spec is not None:
            start, stop = plan.bound
            specs.append(LaneSpec(key, spec.direction, start, record.step, stop, spec.weight))
            again = start
        if mode in ("holes", "all"):
            kinds = [Outcome.FAILED] if holes == "failed" else [Outcome.FAILED, Outcome.MISSING, Outcome.DISALLOWED]
            lane_holes = BitMap64()
            for kind in kinds:
                lane_holes |= plan.holes.get(kind, BitMap64())
            if again is not None:  # keep the holes before ``again`` in the lane's direction
                upto = lane_holes.rank(again)  # holes <= again
                if record.step > 0:
                    lane_holes = lane_holes[: upto - (again in lane_holes)]
                else:
                    lane_holes = lane_holes[upto:]
            hole_ids |= lane_holes
    if hole_ids:
        specs.append(_list_lane(target, "holes", hole_ids))
    return specs


def _list_lane(target: Target, name: str, ids: Iterable[int], *, refetch_found: bool = False) -> LaneSpec:
    """A list lane ``<target>:<name>`` walking ``ids`` in the order given (holes, due pages);
    ``refetch_found``: fetch ids already found too (due pages are found ids)."""
    listed = tuple(ids)
    return LaneSpec(f"{target.name}:{name}", "holes", 0, 1, len(listed) - 1, target.rate_asc, ids=listed,
                    refetch_found=refetch_found)


def tail_bound(lanes: Mapping[str, LaneRecord]) -> tuple[int, int | None] | None:
    """Where a ``resume=due`` run walks the tail of a target with these stored lanes: (from, to), to
    None = up to its margin; None: no tail (no ascending lane, or one that reached its bound)."""
    for record in lanes.values():
        if record.step > 0 and record.key.endswith(":asc"):
            return plan_lane(record, {}).bound
    return None


def tail_specs(target: Target, lanes: Mapping[str, LaneRecord], reach: int | None = None,
               max_reach: int | None = None) -> list[LaneSpec]:
    """The lane that walks ``target``'s tail (none or one): its ascending lane from just after its last found
    id (cut by its margin) or from its first undecided id (stopped early); none when it has no ascending
    lane or that one reached its bound; the fresh ascending lane when nothing was crawled.
    ``reach`` (:func:`tail_reach`): a continued walk goes on to that id whatever the misses, when it
    starts at or before it, at most ``max_reach`` ids (:func:`walk_reach`, :attr:`LaneSpec.reach`)."""
    if not lanes:
        return [spec for spec in lane_specs(target) if spec.direction == "asc"]
    specs: list[LaneSpec] = []
    for spec in lane_specs(target):
        record = lanes.get(spec.key)
        if spec.direction != "asc":
            continue
        if record is None:
            specs.append(spec)
            continue
        plan = plan_lane(record, {})
        if plan.bound is not None:
            start, stop = plan.bound
            walks_to = walk_reach(reach, start, stop, max_reach)
            specs.append(LaneSpec(spec.key, spec.direction, start, record.step, stop, spec.weight, reach=walks_to))
    return specs
