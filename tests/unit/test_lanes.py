"""Lane: cursor, window and margin of one direction of one target."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.lanes import BOUND, MARGIN, Lane, Outcome
from tests.support.reference import lane_truth

FOUND, MISSING, FAILED = Outcome.FOUND, Outcome.MISSING, Outcome.FAILED

#: The seed example: "o" exists, "x" does not.
SEED = list("ooxoooxxoxooxxx")


def lane(start: int = 0, step: int = 1, stop: int | None = None, margin: int = 3, window: int = 8) -> Lane[int]:
    return Lane("t:asc" if step > 0 else "t:desc", start=start, step=step, stop=stop, margin=margin, window=window)


def walk_sequentially(ln: Lane[int], outcome: Callable[[int], Outcome], limit: int = 10_000) -> tuple[list[int], list[int]]:
    """Dispense one id, record it, repeat: (dispensed ids, released payloads)."""
    dispensed: list[int] = []
    released: list[int] = []
    while ln.ready and len(dispensed) < limit:
        id_ = ln.dispense()
        dispensed.append(id_)
        released += ln.record(id_, outcome(id_), id_).released
    return dispensed, released


def drive_in_random_order(
    ln: Lane[int], outcome: Callable[[int], Outcome], rnd: random.Random, eagerness: float
) -> list[int]:
    """Dispense while ready (with probability ``eagerness``), complete a random in-flight id; released ids."""
    inflight: list[int] = []
    released: list[int] = []
    while True:
        while ln.ready and rnd.random() < eagerness:
            inflight.append(ln.dispense())
        if not inflight:
            if not ln.ready:
                return released
            inflight.append(ln.dispense())
        id_ = inflight.pop(rnd.randrange(len(inflight)))
        released += ln.record(id_, outcome(id_), id_).released


def fill(ln: Lane[int]) -> list[int]:
    """Dispense until the lane is not ready."""
    ids = []
    while ln.ready:
        ids.append(ln.dispense())
    return ids


def pattern(marks: list[str], start: int = 0) -> Callable[[int], Outcome]:
    def outcome(id_: int) -> Outcome:
        offset = id_ - start
        return FOUND if 0 <= offset < len(marks) and marks[offset] == "o" else MISSING

    return outcome


# -- construction --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "word"), [({"step": 2}, "step"), ({"step": 0}, "step"), ({"window": 0}, "window"), ({"margin": -1}, "margin")]
)
def test_bad_lane_parameters_are_rejected(kwargs: dict[str, int], word: str) -> None:
    args = {"start": 0, "step": 1, "margin": 3, "window": 4, **kwargs}
    with pytest.raises(ValueError, match=word):
        Lane("k", stop=None, **args)


def test_new_lane_is_ready_and_not_stopped() -> None:
    ln = lane(start=5)
    assert ln.ready
    assert not ln.stopped
    assert not ln.settled
    assert (ln.next_id, ln.first_undecided, ln.ahead) == (5, 5, 0)


@pytest.mark.parametrize(("start", "step", "stop"), [(11, 1, 10), (9, -1, 10), (-1, -1, None), (-1, -1, 0)])
def test_lane_starting_past_its_bound_is_stopped_and_settled_at_once(start: int, step: int, stop: int | None) -> None:
    ln = lane(start=start, step=step, stop=stop)
    assert ln.stopped
    assert ln.settled
    assert ln.reason == BOUND
    assert not ln.ready
    with pytest.raises(RuntimeError, match="not ready"):
        ln.dispense()


# -- bounded walks ---------------------------------------------------------------------


def test_bounded_asc_walk_dispenses_start_to_max_inclusive() -> None:
    ln = lane(start=5, stop=9, margin=0)
    dispensed, released = walk_sequentially(ln, lambda i: MISSING)
    assert dispensed == [5, 6, 7, 8, 9]
    assert released == []
    assert ln.reason == BOUND
    assert ln.cut_at is None
    assert ln.settled


def test_bounded_desc_walk_dispenses_start_down_to_min_inclusive() -> None:
    ln = lane(start=9, step=-1, stop=5, margin=0)
    dispensed, released = walk_sequentially(ln, lambda i: FOUND)
    assert dispensed == [9, 8, 7, 6, 5]
    assert released == [9, 8, 7, 6, 5]
    assert ln.reason == BOUND
    assert ln.counts.found == ln.counts.emitted == 5


def test_one_id_lane_dispenses_that_id_only() -> None:
    ln = lane(start=7, stop=7)
    assert ln.dispense() == 7
    assert ln.stopped
    assert not ln.settled  # 7 is still in flight
    assert ln.record(7, FOUND, 7).released == [7]
    assert ln.settled


def test_bound_stops_dispensing_but_in_flight_ids_still_count() -> None:
    ln = lane(start=0, stop=3, margin=2, window=10)
    assert fill(ln) == [0, 1, 2, 3]
    assert ln.stopped
    assert ln.reason == BOUND
    assert not ln.settled
    assert ln.outstanding() == [0, 1, 2, 3]
    released = []
    for id_ in (3, 1, 2, 0):
        released += ln.record(id_, FOUND, id_).released
    assert sorted(released) == [0, 1, 2, 3]
    assert ln.settled
    assert ln.outstanding() == []


def test_bound_reached_first_keeps_reason_bound_when_all_found() -> None:
    ln = lane(start=0, stop=2, margin=1)
    walk_sequentially(ln, lambda i: FOUND)
    assert ln.reason == BOUND


def test_unbounded_desc_lane_stops_at_zero_and_never_goes_negative() -> None:
    ln = lane(start=3, step=-1, stop=None, margin=100, window=50)
    assert fill(ln) == [3, 2, 1, 0]
    assert ln.stopped
    assert ln.reason == BOUND
    assert ln.next_id == -1
    with pytest.raises(RuntimeError):
        ln.dispense()


def test_unbounded_desc_lane_from_zero_dispenses_only_zero() -> None:
    ln = lane(start=0, step=-1, margin=5)
    dispensed, released = walk_sequentially(ln, lambda i: FOUND)
    assert dispensed == [0]
    assert released == [0]


def test_unbounded_asc_lane_stops_only_by_the_margin() -> None:
    ln = lane(start=10**15, margin=2, window=3)
    dispensed, _ = walk_sequentially(ln, lambda i: MISSING)
    assert dispensed == [10**15, 10**15 + 1]
    assert ln.reason == MARGIN


# -- the margin rule -------------------------------------------------------------------


def test_seed_example_margin_three_cuts_at_the_third_consecutive_missing_id() -> None:
    start = 38401264
    ln = lane(start=start, margin=3, window=4)
    dispensed, released = walk_sequentially(ln, pattern(SEED, start))
    assert ln.cut_at == start + 14  # the third x of "x x x", not an earlier pair
    assert dispensed == list(range(start, start + 15))
    assert released == [start + i for i, m in enumerate(SEED) if m == "o"]
    assert ln.reason == MARGIN
    assert ln.settled
    assert (ln.counts.found, ln.counts.missing) == (8, 7)


@pytest.mark.parametrize("seed", range(20))
def test_seed_example_gives_the_same_cut_in_any_completion_order(seed: int) -> None:
    rnd = random.Random(seed)
    marks = [*SEED, "o", "o", "o", "x", "o"]  # ids after the cut exist: overshoot if fetched
    ln = lane(start=0, margin=3, window=rnd.randint(1, 20))
    released = drive_in_random_order(ln, pattern(marks), rnd, 0.7)
    assert ln.cut_at == 14
    assert sorted(released) == [0, 1, 3, 4, 5, 8, 10, 11]
    assert ln.counts.emitted == 8
    assert ln.next_id - 1 - ln.cut_at <= ln.window  # waste past the cut is bounded


@pytest.mark.parametrize("margin", [1, 2, 3, 4, 5])
def test_cut_happens_at_the_first_run_of_exactly_margin_missing_ids(margin: int) -> None:
    # runs of 1, 2, 3, 4, 5 missing ids separated by found ids
    marks = ["o"]
    for run in range(1, 6):
        marks += ["x"] * run + ["o"]
    ln = lane(start=0, margin=margin, window=3)
    walk_sequentially(ln, pattern(marks))
    run_end = {r: marks.index("o", 1 + sum(k + 1 for k in range(1, r))) - 1 for r in range(1, 6)}
    assert ln.cut_at == run_end[margin]
    assert marks[ln.cut_at - margin + 1 : ln.cut_at + 1] == ["x"] * margin


def test_margin_one_cuts_at_the_first_missing_id() -> None:
    ln = lane(start=0, margin=1)
    walk_sequentially(ln, pattern(["o", "o", "x", "o"]))
    assert ln.cut_at == 2


def test_margin_zero_never_cuts() -> None:
    ln = lane(start=0, stop=999, margin=0, window=16)
    dispensed, _ = walk_sequentially(ln, lambda i: MISSING)
    assert len(dispensed) == 1000
    assert ln.cut_at is None
    assert ln.reason == BOUND
    assert ln.counts.missing == 1000


def test_margin_zero_releases_found_ids_at_once_whatever_is_pending() -> None:
    ln = lane(start=0, stop=99, margin=0, window=10)
    fill(ln)
    assert ln.record(9, FOUND, 9).released == [9]
    assert ln.held == 0


def test_failed_counts_toward_the_margin_like_missing() -> None:
    ln = lane(start=0, margin=3)
    outcomes = {0: FOUND, 1: FAILED, 2: MISSING, 3: FAILED, 4: FOUND}
    walk_sequentially(ln, outcomes.__getitem__)
    assert ln.cut_at == 3
    assert (ln.counts.found, ln.counts.missing, ln.counts.failed) == (1, 1, 2)


def test_found_id_resets_the_run() -> None:
    ln = lane(start=0, margin=3, window=1)
    marks = ["x", "x", "o", "x", "x", "o", "x", "x", "x"]
    walk_sequentially(ln, pattern(marks))
    assert ln.cut_at == 8
    assert ln.last_found == 5


def test_margin_is_counted_in_lane_order_not_arrival_order() -> None:
    # arrival order: 1, 2, 3 missing first (three misses in a row by arrival), then 0 found
    ln = lane(start=0, margin=3, window=10)
    fill(ln)
    for id_ in (1, 2):
        assert not ln.record(id_, MISSING).stopped
    assert ln.record(4, MISSING).stopped is False
    assert ln.cut_at is None
    assert ln.record(0, FOUND, 0).released == [0]
    assert ln.cut_at is None  # 1, 2 missing, 3 pending: no cut yet
    rec = ln.record(3, MISSING)
    assert rec.stopped
    assert ln.cut_at == 3


def test_desc_margin_cuts_at_the_right_id() -> None:
    ln = lane(start=20, step=-1, margin=2, window=5)
    marks = {20: FOUND, 19: MISSING, 18: FOUND, 17: MISSING, 16: MISSING, 15: FOUND}
    _, released = walk_sequentially(ln, lambda i: marks.get(i, MISSING))
    assert ln.cut_at == 16
    assert released == [20, 18]


# -- holding and releasing ---------------------------------------------------------------


def test_found_id_after_a_possible_cut_is_held_until_safe() -> None:
    ln = lane(start=0, margin=2, window=10)
    fill(ln)
    rec = ln.record(2, FOUND, 2)  # 0 and 1 pending could still cut at 1
    assert rec.released == []
    assert ln.held == 1
    assert ln.record(0, MISSING).released == []
    rec = ln.record(1, FOUND, 1)
    assert sorted(rec.released) == [1, 2]
    assert ln.held == 0
    assert ln.counts.emitted == 2


def test_found_id_with_fewer_pending_ids_than_the_margin_before_it_is_released_at_once() -> None:
    ln = lane(start=0, margin=3, window=10)
    fill(ln)
    assert ln.record(2, FOUND, 2).released == [2]  # 0, 1 pending: at most 2 misses


def test_found_without_payload_counts_but_releases_nothing() -> None:
    ln = lane(start=0, margin=3)
    ln.dispense()
    rec = ln.record(0, FOUND)
    assert rec.released == []
    assert ln.counts.found == 1
    assert ln.counts.emitted == 0


def test_zero_is_a_payload_like_any_other() -> None:
    ln = lane(start=0, margin=3)
    ln.dispense()
    assert ln.record(0, FOUND, 0).released == [0]


# -- the window -------------------------------------------------------------------------


@pytest.mark.parametrize("window", [1, 2, 5, 32])
def test_window_bounds_how_far_dispensing_runs_ahead(window: int) -> None:
    ln = lane(start=100, margin=5, window=window)
    assert fill(ln) == list(range(100, 100 + window))
    assert ln.ahead == window
    assert not ln.ready
    assert not ln.stopped
    with pytest.raises(RuntimeError, match="not ready"):
        ln.dispense()


def test_window_is_counted_from_the_first_undecided_id() -> None:
    ln = lane(start=0, margin=10, window=4)
    fill(ln)
    rec = ln.record(3, FOUND, 3)  # not the first undecided: nothing frees up
    assert not rec.became_ready
    assert not ln.ready
    rec = ln.record(0, FOUND, 0)
    assert rec.became_ready
    assert ln.ahead == 3
    assert ln.dispense() == 4
    assert not ln.ready


def test_deciding_the_first_undecided_id_frees_every_decided_id_behind_it() -> None:
    ln = lane(start=0, margin=10, window=5)
    fill(ln)
    for id_ in (1, 2, 3):
        ln.record(id_, FOUND, id_)
    ln.record(0, FOUND, 0)
    assert ln.first_undecided == 4
    assert ln.ahead == 1
    assert fill(ln) == [5, 6, 7, 8]


@settings(max_examples=200, deadline=None)
@given(
    window=st.integers(1, 12),
    margin=st.integers(1, 5),
    marks=st.lists(st.booleans(), max_size=60),
    rnd=st.randoms(use_true_random=False),
)
def test_ahead_never_exceeds_the_window(window: int, margin: int, marks: list[bool], rnd: random.Random) -> None:
    ln = lane(start=0, margin=margin, window=window)
    inflight: list[int] = []
    for _ in range(500):
        while ln.ready and rnd.random() < 0.6:
            inflight.append(ln.dispense())
            assert ln.ahead <= window
        if not inflight:
            if not ln.ready:
                break
            inflight.append(ln.dispense())
        id_ = inflight.pop(rnd.randrange(len(inflight)))
        found = id_ < len(marks) and marks[id_]
        ln.record(id_, FOUND if found else MISSING, id_)
        assert ln.ahead <= window
        assert len(ln.outstanding()) <= window


# -- overshoot ---------------------------------------------------------------------------


def test_found_id_past_the_cut_is_not_released_and_counts_as_overshoot() -> None:
    ln = lane(start=0, margin=2, window=5)
    assert fill(ln) == [0, 1, 2, 3, 4]
    assert ln.record(2, FOUND, 2).released == []  # held: 0, 1 may still cut
    assert ln.record(0, MISSING).released == []
    rec = ln.record(1, MISSING)
    assert rec.stopped
    assert rec.released == []
    assert ln.cut_at == 1
    assert ln.held == 0  # 2 is dropped: it lies past the cut
    assert ln.counts.overshoot == 1
    assert ln.counts.past_cut == 1

    rec = ln.record(3, FOUND, 3)
    assert rec.overshoot
    assert rec.released == []
    assert ln.counts.overshoot == 2
    rec = ln.record(4, MISSING)
    assert not rec.overshoot
    assert ln.counts.overshoot == 2
    assert ln.counts.past_cut == 3
    assert ln.counts.found == 0
    assert ln.counts.emitted == 0


def test_cut_still_releases_found_ids_before_it() -> None:
    ln = lane(start=0, margin=2, window=6)
    fill(ln)
    ln.record(5, FOUND, 5)
    ln.record(3, FOUND, 3)  # held: 1, 2 pending could cut at 2
    ln.record(1, MISSING)
    rec = ln.record(2, MISSING)  # 0 pending: still no cut
    assert ln.cut_at is None
    assert rec.released == []
    rec = ln.record(0, FOUND, 0)  # 0 found, 1 2 missing: cut at 2
    assert ln.cut_at == 2
    assert rec.released == [0]
    assert ln.counts.overshoot == 2  # 3 and 5


def test_cut_lane_is_settled_with_ids_still_in_flight() -> None:
    ln = lane(start=0, margin=1, window=4)
    fill(ln)
    ln.record(0, MISSING)
    assert ln.cut_at == 0
    assert ln.settled  # ids 1..3 do not matter any more
    assert not ln.ready


# -- ignored records ---------------------------------------------------------------------


def test_record_for_an_id_never_dispensed_is_ignored() -> None:
    ln = lane(start=10, margin=3, window=4)
    ln.dispense()
    for id_ in (11, 12, 9, 1000, -1):
        rec = ln.record(id_, FOUND, id_)
        assert rec.released == []
        assert not rec.overshoot
    assert ln.counts.decided == 0
    assert ln.first_undecided == 10
    assert ln.held == 0


def test_duplicate_record_is_ignored() -> None:
    ln = lane(start=0, margin=3, window=4)
    fill(ln)
    assert ln.record(0, FOUND, 0).released == [0]
    assert ln.record(0, FOUND, 0).released == []
    assert ln.record(0, MISSING).released == []
    ln.record(2, MISSING)
    ln.record(2, FOUND, 2)  # the first outcome stands
    ln.record(1, FOUND, 1)
    assert (ln.counts.found, ln.counts.missing) == (2, 1)
    assert ln.counts.emitted == 1 + 1


def test_duplicate_record_past_the_cut_is_not_counted_twice() -> None:
    ln = lane(start=0, margin=1, window=5)
    fill(ln)
    ln.record(2, FOUND, 2)
    ln.record(3, MISSING)
    ln.record(0, MISSING)  # cut at 0: 2 and 3 were decided past it
    assert ln.cut_at == 0
    assert (ln.counts.overshoot, ln.counts.past_cut) == (1, 2)
    ln.record(4, FOUND, 4)
    assert (ln.counts.overshoot, ln.counts.past_cut) == (2, 3)
    for id_ in (2, 3, 4):
        rec = ln.record(id_, FOUND, id_)
        assert not rec.overshoot
        assert rec.released == []
    assert (ln.counts.overshoot, ln.counts.past_cut) == (2, 3)


def test_record_past_the_cut_for_an_id_never_dispensed_is_ignored() -> None:
    ln = lane(start=0, margin=1, window=3)
    fill(ln)
    ln.record(0, MISSING)
    assert ln.cut_at == 0
    for id_ in (3, 4, 10**6):
        rec = ln.record(id_, FOUND, id_)
        assert not rec.overshoot
    assert (ln.counts.overshoot, ln.counts.past_cut) == (0, 0)


def test_record_before_the_cut_after_it_happened_is_ignored() -> None:
    ln = lane(start=0, margin=1, window=3)
    fill(ln)
    ln.record(0, MISSING)
    rec = ln.record(0, FOUND, 0)
    assert rec.released == []
    assert ln.counts.decided == 1


# -- close ----------------------------------------------------------------------------------


def test_close_stops_dispensing_and_keeps_the_first_reason() -> None:
    ln = lane(start=0, margin=3, window=4)
    ln.dispense()
    ln.close("limit:TDL")
    ln.close("shutdown")
    assert ln.reason == "limit:TDL"
    assert not ln.ready
    assert not ln.settled
    assert ln.record(0, FOUND, 0).released == [0]
    assert ln.settled


# -- progress ------------------------------------------------------------------------------


def test_share_done_is_none_for_an_unbounded_lane() -> None:
    assert lane(start=0).share_done() is None


def test_share_done_grows_with_the_first_undecided_id() -> None:
    ln = lane(start=0, stop=9, margin=0, window=10)
    assert ln.share_done() == 0.0
    fill(ln)
    for id_ in (4, 3, 2, 1):
        ln.record(id_, FOUND, id_)
    assert ln.share_done() == 0.0  # nothing decided in lane order yet
    ln.record(0, FOUND, 0)
    assert ln.share_done() == 0.5
    for id_ in range(5, 10):
        ln.record(id_, MISSING)
    assert ln.share_done() == 1.0


def test_share_done_of_a_desc_lane() -> None:
    ln = lane(start=19, step=-1, stop=10, margin=0, window=3)
    walk_sequentially(ln, lambda i: FOUND, limit=3)
    assert ln.share_done() == 0.3


def test_share_done_is_one_once_cut() -> None:
    ln = lane(start=0, stop=99, margin=1, window=2)
    walk_sequentially(ln, lambda i: MISSING)
    assert ln.cut_at == 0
    assert ln.share_done() == 1.0


# -- sequential truth as a property -----------------------------------------------------------


def truth(found: set[int], start: int, step: int, stop: int | None, margin: int) -> tuple[list[int], int | None]:
    return lane_truth(found.__contains__, start, step, stop, margin)


@settings(max_examples=200, deadline=None)
@given(
    found=st.sets(st.integers(0, 80)),
    start=st.integers(0, 80),
    step=st.sampled_from([1, -1]),
    margin=st.integers(1, 6),
    window=st.integers(1, 20),
    rnd=st.randoms(use_true_random=False),
)
def test_any_completion_order_releases_the_sequential_truth(
    found: set[int], start: int, step: int, margin: int, window: int, rnd: random.Random
) -> None:
    ln = lane(start=start, step=step, margin=margin, window=window)
    released = drive_in_random_order(ln, lambda i: FOUND if i in found else MISSING, rnd, 0.8)
    expected, cut = truth(found, start, step, None, margin)
    assert sorted(released) == sorted(expected)
    assert len(released) == len(set(released))
    assert ln.cut_at == cut
    assert ln.settled
    if cut is not None:
        assert (ln.next_id - cut) * step - 1 <= window


def test_released_payloads_come_out_in_lane_order() -> None:
    for step, ids in ((1, [0, 1, 2]), (-1, [10, 9, 8])):
        lane: Lane[int] = Lane("k", start=ids[0], step=step, stop=None, margin=1, window=10)
        for _ in range(4):
            lane.dispense()
        assert lane.record(ids[2], Outcome.FOUND, ids[2]).released == []
        assert lane.record(ids[1], Outcome.FOUND, ids[1]).released == []
        assert lane.record(ids[0], Outcome.FOUND, ids[0]).released == ids
