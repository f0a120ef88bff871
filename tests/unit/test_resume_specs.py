"""core.resume.resume_specs: with ``all``, a hole the reopened lane walks again is not refetched twice."""

from __future__ import annotations

import pytest
from pyroaring import BitMap64

from idcrawl.core.lanes import Outcome
from idcrawl.core.ranges import LaneRecord
from idcrawl.core.resume import resume_specs
from idcrawl.core.targets import parse_target

TARGET = parse_target({"name": "reg", "url": "http://127.0.0.1:1/n/{id}", "start": 1000, "direction": "both",
                       "margin": 3})
# asc: found up to 1019, 1005 and 1021 failed, cut at 1023 (1021..1023 the margin's misses; 1020 missing)
# desc: found down to 990, 995 and 988 failed, cut at 987
LANES = {
    "reg:asc": LaneRecord("reg:asc", 1000, 1, None, 1024, 1019, 1023, "margin"),
    "reg:desc": LaneRecord("reg:desc", 999, -1, None, 986, 990, 987, "margin"),
}
OUTCOMES = {
    Outcome.FOUND: BitMap64(i for i in range(990, 1020) if i not in (995, 1005)),
    Outcome.FAILED: BitMap64([995, 1005, 1021, 988]),
    Outcome.MISSING: BitMap64([1020, 1022, 1023, 989, 987]),
}


def holes_of(mode: str, holes: str = "failed") -> tuple[int, ...] | None:
    specs = [s for s in resume_specs(TARGET, LANES, OUTCOMES, mode, holes) if s.direction == "holes"]
    return tuple(specs[0].ids) if specs else None


def test_holes_refetches_every_failed_id_of_the_crawled_spans() -> None:
    assert holes_of("holes") == (988, 995, 1005, 1021)


@pytest.mark.parametrize("holes", ["failed", "all"])
def test_all_leaves_out_the_holes_the_reopened_lanes_walk_again(holes: str) -> None:
    specs = {s.key: s for s in resume_specs(TARGET, LANES, OUTCOMES, "all", holes)}
    assert (specs["reg:asc"].start, specs["reg:desc"].start) == (1020, 989)  # just after the last found ids
    # 1020..1023 and 989..987 are walked again by the reopened lanes: not in the holes lane
    assert holes_of("all", holes) == (995, 1005)


def test_bound_has_no_holes_lane() -> None:
    assert holes_of("bound") is None


def test_due_walks_the_tail_only_from_just_after_its_last_found_id() -> None:
    specs = resume_specs(TARGET, LANES, OUTCOMES, "due")
    assert [(s.key, s.direction, s.start, s.stop, s.ids) for s in specs] == [("reg:asc", "asc", 1020, None, None)]


def test_due_has_no_tail_for_an_ascending_lane_that_reached_its_bound() -> None:
    bounded = parse_target({"name": "reg", "url": "http://127.0.0.1:1/n/{id}", "start": 1000, "max": 1023,
                            "margin": 3})
    lanes = {"reg:asc": LaneRecord("reg:asc", 1000, 1, 1023, 1024, 1019, None, "bound")}
    assert resume_specs(bounded, lanes, OUTCOMES, "due") == []


def test_the_default_auto_plans_as_bound_and_reset_starts_over() -> None:
    """``auto`` (the default) continues as ``bound`` does; ``reset`` (and the deprecated ``none``) walk fresh lanes."""
    assert TARGET.resume == "auto"
    bound = resume_specs(TARGET, LANES, OUTCOMES, "bound")
    assert resume_specs(TARGET, LANES, OUTCOMES, "auto") == bound
    assert [(s.key, s.start) for s in bound] == [("reg:asc", 1020), ("reg:desc", 989)]
    fresh = resume_specs(TARGET, {}, {}, "bound")
    assert resume_specs(TARGET, LANES, OUTCOMES, "reset") == fresh
    assert resume_specs(TARGET, LANES, OUTCOMES, "none") == fresh
