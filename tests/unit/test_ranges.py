"""The resume plan splits a lane's past into content, holes and bound."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

from idcrawl.core.lanes import Lane, Outcome
from idcrawl.core.ranges import LaneRecord, plan_lane, runs, span_ids

FOUND, MISSING, FAILED = Outcome.FOUND, Outcome.MISSING, Outcome.FAILED


def crawl(marks: str, start: int, step: int, margin: int, stop_after: int | None = None):
    """Walk a lane sequentially over 'o' (found), 'x' (missing), 'f' (failed) marks; return record + outcomes."""
    lane: Lane[None] = Lane("t:asc", start=start, step=step, stop=None, margin=margin, window=4)
    outcomes: dict[Outcome, BitMap64] = {FOUND: BitMap64(), MISSING: BitMap64(), FAILED: BitMap64()}
    done = 0
    while lane.ready and (stop_after is None or done < stop_after):
        id_ = lane.dispense()
        mark = marks[id_] if 0 <= id_ < len(marks) else "x"
        outcome = {"o": FOUND, "x": MISSING, "f": FAILED}[mark]
        lane.record(id_, outcome)
        outcomes[outcome].add(id_)
        done += 1
    record = LaneRecord(lane.key, lane.start, lane.step, lane.stop, lane.first_undecided,
                        lane.last_found, lane.cut_at, lane.reason or "shutdown")
    return record, outcomes


def test_the_seed_example_interrupted_run() -> None:
    # "... o o x | @ o o x x o o x o @   o o x ..." : started at 3, terminated after 10 ids
    marks = "ooxooxxooxoooxooxoxooo"
    record, outcomes = crawl(marks, 3, 1, margin=3, stop_after=10)
    plan = plan_lane(record, outcomes)
    assert plan.span == (3, 12)
    assert list(plan.content) == [3, 4, 7, 8, 10, 11, 12]
    assert list(plan.holes[MISSING]) == [5, 6, 9]
    assert plan.bound == (13, None)


def test_a_lane_cut_by_its_margin_restarts_after_its_last_found_id() -> None:
    record, outcomes = crawl("oooxoxxx", 0, 1, margin=3)
    plan = plan_lane(record, outcomes)
    assert record.cut_at == 7 and record.last_found == 4
    assert plan.bound == (5, None)
    assert list(plan.holes[MISSING]) == [3, 5, 6, 7]


def test_a_lane_that_reached_its_bound_has_nothing_left() -> None:
    lane: Lane[None] = Lane("t:desc", start=5, step=-1, stop=3, margin=0, window=4)
    outcomes = {FOUND: BitMap64()}
    while lane.ready:
        id_ = lane.dispense()
        lane.record(id_, FOUND)
        outcomes[FOUND].add(id_)
    record = LaneRecord(lane.key, 5, -1, 3, lane.first_undecided, lane.last_found, lane.cut_at, lane.reason)
    plan = plan_lane(record, outcomes)
    assert plan.finished and list(plan.content) == [3, 4, 5]


def test_failed_and_missing_holes_are_told_apart() -> None:
    record, outcomes = crawl("oxofoo", 0, 1, margin=0, stop_after=6)
    plan = plan_lane(record, outcomes)
    assert list(plan.holes[MISSING]) == [1] and list(plan.holes[FAILED]) == [3]


@settings(max_examples=200, deadline=None)
@given(
    marks=st.text(alphabet="oxf", min_size=1, max_size=60),
    start=st.integers(0, 59),
    step=st.sampled_from([1, -1]),
    margin=st.integers(0, 5),
    stop_after=st.one_of(st.none(), st.integers(0, 70)),
)
def test_content_and_holes_partition_the_crawled_span(marks, start, step, margin, stop_after) -> None:
    if margin == 0 and stop_after is None:
        stop_after = 70
    record, outcomes = crawl(marks, start, step, margin, stop_after)
    plan = plan_lane(record, outcomes)
    if plan.span is None:
        assert not plan.content
        return
    span = span_ids(*plan.span)
    holes = [plan.holes[o] for o in (MISSING, FAILED, Outcome.DISALLOWED)]
    union = BitMap64(plan.content)
    for hole in holes:
        assert not (hole & union)
        union |= hole
    assert union == span
    if plan.bound is not None:
        # the bound starts inside or right after the span, never before the last found id
        assert record.last_found is None or (plan.bound[0] - record.last_found) * step > 0


def test_runs_compress_consecutive_ids() -> None:
    assert list(runs(BitMap64([1, 2, 3, 7, 9, 10]))) == [(1, 3), (7, 7), (9, 10)]
    assert list(runs(BitMap64())) == []


def test_found_is_sticky_and_newer_misses_replace_older_ones() -> None:
    from idcrawl.core.ranges import merge_outcomes

    old = {FOUND: BitMap64([1, 2]), MISSING: BitMap64([3, 4]), FAILED: BitMap64([5])}
    new = {FAILED: BitMap64([1, 3]), FOUND: BitMap64([5]), MISSING: BitMap64([6])}
    merged = merge_outcomes(old, new)
    assert list(merged[FOUND]) == [1, 2, 5]
    assert list(merged[MISSING]) == [4, 6]
    assert list(merged[FAILED]) == [3]
