"""Turn a target's stored past into the lanes of a resumed run.

``bound`` continues every unfinished lane (a lane cut by its margin from
just after its last found id); ``holes`` refetches holes of the crawled
spans (failed ones, or ``holes="all"``: missing and disallowed too) as list
lanes; ``all`` does both; ``due`` walks the tails (the ascending lanes, as ``bound`` does) and
nothing else: which tails are due is the caller's (:mod:`idcrawl.core.recrawl`). Ids already found
are never fetched again: the frontier records them found without a request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyroaring import BitMap64

from idcrawl.core.frontier import LaneSpec, lane_specs
from idcrawl.core.lanes import Outcome
from idcrawl.core.ranges import LaneRecord, plan_lane
from idcrawl.core.targets import RESUME_MODES, Target

__all__ = ["IDENTITY_KEYS", "RESUME_MODES", "identity", "resume_specs"]

#: The target parameters that define which ids a crawl covers: a resumed run
#: must have the same ones (margin, rate, window, attempts may change freely).
IDENTITY_KEYS = ("url", "start", "min", "max", "direction")


def identity(target: Target) -> dict[str, Any]:
    return {key: (str(getattr(target, key)) if key == "direction" else getattr(target, key)) for key in IDENTITY_KEYS}


def resume_specs(
    target: Target,
    lanes: Mapping[str, LaneRecord],
    outcomes: Mapping[Outcome, BitMap64],
    mode: str,
    holes: str = "failed",
) -> list[LaneSpec]:
    """The lanes to walk when resuming ``target`` with ``mode``."""
    if mode == "none" or not lanes:
        return lane_specs(target)
    specs: list[LaneSpec] = []
    fresh = {spec.key: spec for spec in lane_specs(target)}
    hole_ids = BitMap64()
    for key, record in lanes.items():
        plan = plan_lane(record, dict(outcomes))
        spec = fresh.get(key)
        again: int | None = None  # the continued lane walks its ids from here on: not holes to refetch
        if mode == "due" and spec is not None and spec.direction == "asc" and plan.bound is not None:
            # the tail: the ascending lane from just after its last found id (cut by its margin), or on
            # from its first undecided id (stopped early); a finished lane (its bound reached) has none
            start, stop = plan.bound
            specs.append(LaneSpec(key, spec.direction, start, record.step, stop, spec.weight))
        if mode in ("bound", "all") and plan.bound is not None and spec is not None:
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
        ids = tuple(hole_ids)
        specs.append(LaneSpec(f"{target.name}:holes", "holes", 0, 1, len(ids) - 1, target.rate_asc, ids=ids))
    return specs
