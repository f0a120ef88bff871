"""Frontier: every lane of every target behind one interleaver.

The key property: whatever the concurrency and the order in which outcomes
arrive, the released payloads equal the sequential margin rule applied in lane
order, and the ids dispensed past a cut never exceed the lane's window (an
adaptive lane, the default: its margin, and its window counts from its window base).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.frontier import Dispatch, Frontier, lane_specs
from idcrawl.core.lanes import BEHIND_WINDOWS, BOUND, MARGIN, Lane, Outcome
from idcrawl.core.targets import Target, parse_target
from tests.support.reference import lane_truth

FOUND, MISSING, FAILED = Outcome.FOUND, Outcome.MISSING, Outcome.FAILED


def target(**raw: Any) -> Target:
    raw.setdefault("url", "https://example.org/{id}")
    return parse_target({k: v for k, v in raw.items() if v is not None})


# -- the sequential ground truth ---------------------------------------------------------


def truth(
    outcome_of: Callable[[int], Outcome], start: int, step: int, stop: int | None, margin: int
) -> tuple[list[int], int | None]:
    """Found ids of one lane in lane order, and where the margin cut it (None: bound)."""
    return lane_truth(lambda i: outcome_of(i) is FOUND, start, step, stop, margin)


def test_reference_truth_on_the_seed_example() -> None:
    marks = list("ooxoooxxoxooxxxo")

    def outcome_of(i: int) -> Outcome:
        return FOUND if i < len(marks) and marks[i] == "o" else MISSING

    assert truth(outcome_of, 0, 1, None, 3) == ([0, 1, 3, 4, 5, 8, 10, 11], 14)
    assert truth(outcome_of, 15, -1, None, 3) == ([15], 12)
    assert truth(outcome_of, 15, -1, None, 4) == ([15, 11, 10, 8, 5, 4, 3, 1, 0], None)
    assert truth(outcome_of, 15, -1, 9, 0) == ([15, 11, 10], None)


# -- a driver: any concurrency, any completion order ----------------------------------------


@dataclass
class Run:
    dispensed: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    released: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    overshoot: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    max_ahead: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    max_past_base: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # ids past the window base


def drive(
    frontier: Frontier[int],
    outcome_of: Callable[[str, int], Outcome],
    rnd: random.Random,
    concurrency: int,
    *,
    busy: Callable[[Hashable], bool] | None = None,
    check: Callable[[Frontier[int]], None] | None = None,
    max_steps: int = 100_000,
) -> Run:
    """Keep up to ``concurrency`` ids in flight; complete a random one at a time."""
    run = Run()
    inflight: list[Dispatch] = []

    def take(dispatch: Dispatch | None) -> bool:
        if dispatch is None:
            return False
        inflight.append(dispatch)
        run.dispensed[dispatch.lane].append(dispatch.id)
        lane = frontier.lanes[dispatch.lane]
        run.max_ahead[dispatch.lane] = max(run.max_ahead[dispatch.lane], lane.ahead)
        past_base = (lane.next_id - lane.window_base) * lane.step
        run.max_past_base[dispatch.lane] = max(run.max_past_base[dispatch.lane], past_base)
        return True

    for _ in range(max_steps):
        eager = rnd.random() < 0.7  # sometimes complete before filling up
        while len(inflight) < concurrency and (eager or not inflight):
            group_ready = (lambda g: not busy(g)) if busy is not None else None
            if not take(frontier.next(group_ready).dispatch):
                break
        if check is not None:
            check(frontier)
        if not inflight:
            if not take(frontier.next().dispatch):  # no slot is busy when nothing is in flight
                break
            continue
        index = rnd.randrange(len(inflight))
        inflight[index], inflight[-1] = inflight[-1], inflight[index]
        dispatch = inflight.pop()
        rec = frontier.record(dispatch.lane, dispatch.id, outcome_of(dispatch.target.name, dispatch.id), dispatch.id)
        run.released[dispatch.lane].extend(rec.released)
        run.overshoot[dispatch.lane] += rec.overshoot
        if check is not None:
            check(frontier)
    else:
        raise AssertionError("the crawl did not end")
    assert frontier.finished
    assert not frontier.can_dispense()
    assert frontier.outstanding() == 0
    return run


def assert_matches_truth(frontier: Frontier[int], run: Run, outcome_of: Callable[[str, int], Outcome]) -> None:
    for key, lane in frontier.lanes.items():
        tgt = frontier.lane_target[key]
        spec = next(s for s in lane_specs(tgt) if s.key == key)
        found, cut = truth(partial(outcome_of, tgt.name), spec.start, spec.step, spec.stop, tgt.margin)
        released = run.released[key]
        assert sorted(released) == sorted(found), key
        assert len(released) == len(set(released)), key
        assert lane.cut_at == cut, key
        assert lane.reason == (MARGIN if cut is not None else BOUND), key
        # ids were dispensed in lane order, each once, from the lane's start
        dispensed = run.dispensed[key]
        assert dispensed == list(range(spec.start, spec.start + spec.step * len(dispensed), spec.step)), key
        # bounded waste: requests past the cut <= window (adaptive: <= margin too)
        past_cut = [i for i in dispensed if cut is not None and (i - cut) * spec.step > 0]
        assert len(past_cut) <= tgt.window, key
        assert run.max_past_base[key] <= tgt.window, key
        if lane.adaptive:
            assert len(past_cut) <= tgt.margin, key
            assert run.max_ahead[key] <= tgt.window * BEHIND_WINDOWS, key
            assert lane.cut_at is None or lane.earliest_cut == lane.cut_at, key
        else:
            assert run.max_ahead[key] <= tgt.window, key
        # the counters tell the same story
        overshoot = [i for i in past_cut if outcome_of(tgt.name, i) is FOUND]
        assert lane.counts.found == lane.counts.emitted == len(found), key
        assert lane.counts.overshoot == len(overshoot), key
        assert run.overshoot[key] <= len(overshoot), key  # a found id decided before the cut is counted by the cut
        assert lane.counts.past_cut == len(past_cut), key
        assert lane.counts.dispensed == len(dispensed), key
        decided = len(dispensed) - len(past_cut)
        assert lane.counts.decided == decided, key


# -- the key property --------------------------------------------------------------------------

HIGH = 300


@st.composite
def existing_ids(draw: st.DrawFn) -> set[int]:
    """Ids 0..HIGH that exist, as runs of present and absent ids (gaps of every length)."""
    runs = draw(st.lists(st.tuples(st.booleans(), st.integers(1, 9)), max_size=90))
    ids: set[int] = set()
    pos = draw(st.integers(0, 20))
    for present, length in runs:
        if present:
            ids.update(range(pos, min(pos + length, HIGH + 1)))
        pos += length
    return ids


@st.composite
def targets(draw: st.DrawFn, name: str = "t", host: str = "example.org") -> Target:
    direction = draw(st.sampled_from(["asc", "desc", "both"]))
    margin = draw(st.integers(0, 6))
    start = draw(st.integers(0, HIGH))
    lo = draw(st.none() | st.integers(0, start))
    hi = draw(st.none() | st.integers(start, HIGH + 10))
    if margin == 0:  # no cut: the lanes need bounds
        if direction in ("asc", "both") and hi is None:
            hi = draw(st.integers(start, HIGH + 10))
        if direction in ("desc", "both") and lo is None:
            lo = draw(st.integers(0, start))
    rate = draw(st.sampled_from(["1", "2", "1:3", "5:2"])) if direction == "both" else draw(st.sampled_from(["1", "3"]))
    return target(
        name=name, url=f"https://{host}/item/{{id}}", direction=direction, start=start, min=lo, max=hi,
        margin=margin, window=draw(st.integers(1, 40)), rate=rate,
    )


def outcomes(exists: set[int], failing: set[int]) -> Callable[[str, int], Outcome]:
    """Found if it exists; ids in ``failing`` fail on every attempt (exist or not)."""

    def outcome_of(_name: str, id_: int) -> Outcome:
        if id_ in failing:
            return FAILED
        return FOUND if id_ in exists else MISSING

    return outcome_of


@pytest.mark.parametrize("adaptive", [True, False], ids=["adaptive", "fixed"])
@settings(max_examples=200, deadline=None)
@given(
    tgt=targets(),
    exists=existing_ids(),
    failing=st.sets(st.integers(0, HIGH), max_size=20),
    concurrency=st.integers(1, 64),
    rnd=st.randoms(use_true_random=True),
)
def test_any_concurrency_and_completion_order_releases_the_sequential_truth(
    tgt: Target, exists: set[int], failing: set[int], concurrency: int, rnd: random.Random, adaptive: bool
) -> None:
    frontier: Frontier[int] = Frontier([tgt], adaptive=adaptive)
    outcome_of = outcomes(exists, failing)
    run = drive(frontier, outcome_of, rnd, concurrency)
    assert_matches_truth(frontier, run, outcome_of)


@pytest.mark.parametrize("adaptive", [True, False], ids=["adaptive", "fixed"])
@settings(max_examples=100, deadline=None)
@given(
    specs=st.lists(st.tuples(targets(), st.sampled_from(["a.example", "b.example", "c.example"])), min_size=2, max_size=4),
    exists=existing_ids(),
    failing=st.sets(st.integers(0, HIGH), max_size=10),
    concurrency=st.integers(1, 64),
    busy_share=st.sampled_from([0.0, 0.3, 0.7]),
    rnd=st.randoms(use_true_random=True),
)
def test_interleaved_targets_and_busy_slots_release_the_same_as_alone(
    specs: list[tuple[Target, str]],
    exists: set[int],
    failing: set[int],
    concurrency: int,
    busy_share: float,
    rnd: random.Random,
    adaptive: bool,
) -> None:
    # each target sees a different site: distinct URLs (equal URLs would share outcomes, see test_overlap.py)
    tgts = [replace(t, name=f"t{i}", url=f"https://{host}/t{i}/{{id}}") for i, (t, host) in enumerate(specs)]
    shift = {t.name: 37 * i for i, t in enumerate(tgts)}  # each target sees a different site
    base = outcomes(exists, failing)

    def outcome_of(name: str, id_: int) -> Outcome:
        return base(name, (id_ + shift[name]) % (HIGH + 40))

    frontier: Frontier[int] = Frontier(tgts, adaptive=adaptive)
    run = drive(frontier, outcome_of, rnd, concurrency, busy=lambda g: rnd.random() < busy_share)
    assert_matches_truth(frontier, run, outcome_of)


@pytest.mark.parametrize("adaptive", [True, False], ids=["adaptive", "fixed"])
@settings(max_examples=100, deadline=None)
@given(
    exists=existing_ids(),
    failing=st.sets(st.integers(0, HIGH), max_size=20),
    window=st.integers(1, 40),
    concurrency=st.integers(1, 64),
    rnd=st.randoms(use_true_random=True),
)
def test_lane_over_a_huge_range_holds_at_most_window_ids(
    exists: set[int], failing: set[int], window: int, concurrency: int, rnd: random.Random, adaptive: bool
) -> None:
    tgt = target(start=0, max=10**15, margin=5, window=window)
    frontier: Frontier[int] = Frontier([tgt], adaptive=adaptive)
    (lane,) = frontier.lanes.values()
    # an adaptive lane runs on past ids that cannot change its cut, up to BEHIND_WINDOWS windows
    bound = window * BEHIND_WINDOWS if adaptive else window

    def check(_: Frontier[int]) -> None:
        tracked = set(lane._decided) | set(lane._held)
        assert len(tracked) <= bound
        assert len(lane._decided) <= bound
        assert lane.held <= window
        assert lane.ahead <= bound
        assert (lane.next_id - lane.window_base) * lane.step <= window
        assert len(lane.outstanding()) <= bound

    outcome_of = outcomes(exists, failing)
    run = drive(frontier, outcome_of, rnd, concurrency, check=check)
    assert_matches_truth(frontier, run, outcome_of)
    assert lane.reason == MARGIN


@pytest.mark.parametrize("adaptive", [True, False], ids=["adaptive", "fixed"])
def test_huge_range_costs_what_a_small_range_costs(adaptive: bool) -> None:
    def peak_tracked(hi: int) -> int:
        frontier: Frontier[int] = Frontier([target(start=0, max=hi, margin=5, window=16)], adaptive=adaptive)
        (lane,) = frontier.lanes.values()
        peak = 0

        def check(_: Frontier[int]) -> None:
            nonlocal peak
            peak = max(peak, len(set(lane._decided) | set(lane._held)), len(lane._decided), lane.held)

        run = drive(frontier, lambda _n, i: FOUND if i < 2000 and i % 4 else MISSING, random.Random(7), 64, check=check)
        assert lane.cut_at == 2004
        assert len(run.released[lane.key]) == 1500
        return peak

    assert peak_tracked(10**15) == peak_tracked(10**4) <= (16 * BEHIND_WINDOWS if adaptive else 16)


@pytest.mark.parametrize("adaptive", [True, False], ids=["adaptive", "fixed"])
@settings(max_examples=200, deadline=None)
@given(
    tgt=targets(),
    exists=existing_ids(),
    failing=st.sets(st.integers(0, HIGH), max_size=40),
    concurrency=st.integers(1, 64),
    rnd=st.randoms(use_true_random=True),
)
def test_failed_outcomes_count_toward_the_margin_like_missing(
    tgt: Target, exists: set[int], failing: set[int], concurrency: int, rnd: random.Random, adaptive: bool
) -> None:
    def with_failures(_name: str, id_: int) -> Outcome:
        if id_ in exists:
            return FOUND
        return FAILED if id_ in failing else MISSING

    def without_failures(_name: str, id_: int) -> Outcome:
        return FOUND if id_ in exists else MISSING

    a: Frontier[int] = Frontier([tgt], adaptive=adaptive)
    b: Frontier[int] = Frontier([tgt], adaptive=adaptive)
    run_a = drive(a, with_failures, rnd, concurrency)
    run_b = drive(b, without_failures, random.Random(0), 1)
    for key in a.lanes:
        assert sorted(run_a.released[key]) == sorted(run_b.released[key])
        assert a.lanes[key].cut_at == b.lanes[key].cut_at
        assert a.lanes[key].counts.missing + a.lanes[key].counts.failed == b.lanes[key].counts.missing


# -- lane_specs ----------------------------------------------------------------------------------


def test_asc_target_has_one_lane_from_start_up_to_max() -> None:
    (spec,) = lane_specs(target(name="s", start=5, max=9, rate=3))
    assert (spec.key, spec.direction, spec.start, spec.step, spec.stop, spec.weight) == ("s:asc", "asc", 5, 1, 9, 3)


def test_desc_target_has_one_lane_from_start_down_to_min() -> None:
    (spec,) = lane_specs(target(name="s", direction="desc", start=5, min=2))
    assert (spec.key, spec.direction, spec.start, spec.step, spec.stop) == ("s:desc", "desc", 5, -1, 2)


def test_both_target_walks_asc_from_start_and_desc_from_start_minus_one() -> None:
    asc, desc = lane_specs(target(name="s", direction="both", start=5, min=0, max=10, rate="1:2"))
    assert (asc.key, asc.start, asc.step, asc.stop, asc.weight) == ("s:asc", 5, 1, 10, 1)
    assert (desc.key, desc.start, desc.step, desc.stop, desc.weight) == ("s:desc", 4, -1, 0, 2)


def test_both_from_min_has_an_empty_desc_lane_that_is_settled_at_once() -> None:
    frontier: Frontier[int] = Frontier([target(name="s", direction="both", start=3, min=3, max=5)])
    assert frontier.lanes["s:desc"].settled
    ids = []
    while (d := frontier.next().dispatch) is not None:
        ids.append(d.id)
        frontier.record(d.lane, d.id, FOUND, d.id)
    assert ids == [3, 4, 5]
    assert frontier.finished


def test_both_from_zero_without_min_has_an_empty_desc_lane() -> None:
    frontier: Frontier[int] = Frontier([target(name="s", direction="both", start=0, margin=2)])
    assert frontier.lanes["s:desc"].settled
    assert frontier.lanes["s:desc"].reason == BOUND


# -- dispensing ------------------------------------------------------------------------------------


def test_dispatch_carries_target_lane_and_id() -> None:
    tgt = target(name="s", url="https://example.org/p/{id:05d}", start=42)
    frontier: Frontier[int] = Frontier([tgt])
    d = frontier.next().dispatch
    assert d == Dispatch(tgt, "s:asc", 42)
    assert d.target.url_for(d.id) == "https://example.org/p/00042"


def test_rates_interleave_targets_exactly() -> None:
    frontier: Frontier[int] = Frontier([
        target(name="A", url="https://a.example/{id}", start=0, rate=1, window=100),
        target(name="b", url="https://b.example/{id}", start=0, rate=2, window=100),
    ])
    names = "".join(frontier.next().dispatch.target.name for _ in range(9))  # type: ignore[union-attr]
    assert names == "AbbAbbAbb"


def test_rate_pair_interleaves_the_two_lanes_of_a_target() -> None:
    frontier: Frontier[int] = Frontier([target(name="s", direction="both", start=50, rate="1:2", window=100)])
    seq = [frontier.next().dispatch for _ in range(6)]
    assert [(d.lane, d.id) for d in seq if d] == [
        ("s:asc", 50), ("s:desc", 49), ("s:desc", 48), ("s:asc", 51), ("s:desc", 47), ("s:desc", 46),
    ]


def test_full_window_does_not_block_other_lanes() -> None:
    frontier: Frontier[int] = Frontier([
        target(name="a", url="https://a.example/{id}", start=0, window=2),
        target(name="b", url="https://b.example/{id}", start=100, window=50),
    ])
    seq = [frontier.next().dispatch for _ in range(10)]
    assert all(d is not None for d in seq)
    assert [d.id for d in seq if d and d.lane == "a:asc"] == [0, 1]
    assert not frontier.lanes["a:asc"].ready
    # deciding the first undecided id of a frees it again
    rec = frontier.record("a:asc", 0, FOUND, 0)
    assert rec.became_ready
    assert rec.released == [0]
    ids = [d.id for d in (frontier.next().dispatch for _ in range(4)) if d and d.lane == "a:asc"]
    assert ids == [2]


def test_nothing_to_dispense_while_every_window_is_full() -> None:
    # a fixed window (an adaptive one runs on past 0 once 1 is found: tests/unit/test_speculation.py)
    frontier: Frontier[int] = Frontier([target(start=0, window=3)], adaptive=False)
    assert [frontier.next().dispatch.id for _ in range(3)] == [0, 1, 2]  # type: ignore[union-attr]
    assert frontier.next().dispatch is None
    assert not frontier.can_dispense()
    assert not frontier.finished
    assert frontier.outstanding() == 3
    frontier.record("example.org:asc", 1, FOUND, 1)
    assert frontier.next().dispatch is None  # 0 still undecided
    frontier.record("example.org:asc", 0, FOUND, 0)
    assert frontier.can_dispense()
    assert [frontier.next().dispatch.id for _ in range(2)] == [3, 4]  # type: ignore[union-attr]


def test_busy_slot_is_skipped_and_its_lanes_come_back() -> None:
    frontier: Frontier[int] = Frontier([
        target(name="a", url="https://a.example/{id}", start=0, window=100),
        target(name="b", url="https://b.example/{id}", start=0, window=100),
    ])
    skipped = [frontier.next(lambda g: g != "a.example").dispatch for _ in range(3)]
    assert [d.lane for d in skipped if d] == ["b:asc"] * 3
    assert frontier.next(lambda g: False).dispatch is None
    assert frontier.next().dispatch.lane == "a:asc"  # type: ignore[union-attr]


def test_custom_group_of_puts_targets_in_one_slot() -> None:
    frontier: Frontier[int] = Frontier(
        [target(name="a", url="https://a.example/{id}", start=0), target(name="b", url="https://b.example/{id}", start=0)],
        group_of=lambda t: "shared",
    )
    assert frontier.next(lambda g: g != "shared").dispatch is None
    assert frontier.next().dispatch is not None


def test_duplicate_target_name_is_rejected() -> None:
    frontier: Frontier[int] = Frontier([target(name="a", start=0)])
    with pytest.raises(ValueError, match="'a'"):
        frontier.add_target(target(name="a", start=5))


def test_target_added_later_is_interleaved_too() -> None:
    frontier: Frontier[int] = Frontier([target(name="a", url="https://a.example/{id}", start=0, window=100)])
    frontier.next()
    frontier.add_target(target(name="b", url="https://b.example/{id}", start=0, window=100, rate=2))
    names = "".join(frontier.next().dispatch.target.name for _ in range(6))  # type: ignore[union-attr]
    assert sorted(names) == sorted("abbabb")


def test_lanes_of_a_target() -> None:
    frontier: Frontier[int] = Frontier([
        target(name="a", direction="both", start=5),
        target(name="b", url="https://b.example/{id}", start=0),
    ])
    assert [ln.key for ln in frontier.lanes_of("a")] == ["a:asc", "a:desc"]
    assert [ln.key for ln in frontier.lanes_of("b")] == ["b:asc"]
    assert list(frontier.lanes_of("nope")) == []


# -- stopping ------------------------------------------------------------------------------------------


def test_margin_cut_finishes_the_lane_with_ids_still_in_flight() -> None:
    # a fixed window (an adaptive lane stops at 2 past the earliest cut: tests/unit/test_speculation.py)
    frontier: Frontier[int] = Frontier([target(name="s", start=0, margin=2, window=5)], adaptive=False)
    ids = [frontier.next().dispatch.id for _ in range(5)]  # type: ignore[union-attr]
    assert ids == [0, 1, 2, 3, 4]
    frontier.record("s:asc", 0, MISSING)
    rec = frontier.record("s:asc", 1, MISSING)
    assert rec.stopped
    assert frontier.finished
    assert frontier.next().dispatch is None
    rec = frontier.record("s:asc", 3, FOUND, 3)
    assert rec.overshoot
    assert rec.released == []
    assert frontier.lanes["s:asc"].counts.overshoot == 1


def test_bounded_lane_finishes_once_every_id_has_an_outcome() -> None:
    frontier: Frontier[int] = Frontier([target(name="s", start=0, max=2, margin=0)])
    ids = [frontier.next().dispatch.id for _ in range(3)]  # type: ignore[union-attr]
    assert ids == [0, 1, 2]
    assert frontier.next().dispatch is None
    assert not frontier.finished
    for id_ in (2, 0):
        frontier.record("s:asc", id_, FOUND, id_)
    assert not frontier.finished
    assert frontier.record("s:asc", 1, MISSING).released == []
    assert frontier.finished


def test_close_lane_stops_dispensing_and_waits_for_ids_in_flight() -> None:
    frontier: Frontier[int] = Frontier([
        target(name="a", url="https://a.example/{id}", start=0, window=10),
        target(name="b", url="https://b.example/{id}", start=0, window=10),
    ])
    first = frontier.next().dispatch
    assert first is not None
    assert first.lane == "a:asc"
    frontier.close_lane("a:asc", "limit")
    assert frontier.lanes["a:asc"].reason == "limit"
    assert {frontier.next().dispatch.lane for _ in range(5)} == {"b:asc"}  # type: ignore[union-attr]
    assert "a:asc" in frontier._unsettled
    assert frontier.record("a:asc", 0, FOUND, 0).released == [0]
    assert "a:asc" not in frontier._unsettled


def test_close_of_an_idle_lane_settles_it_at_once() -> None:
    frontier: Frontier[int] = Frontier([target(name="a", start=0)])
    frontier.close_lane("a:asc", "shutdown")
    assert frontier.finished
    assert frontier.next().dispatch is None


def test_records_for_unknown_ids_do_not_disturb_the_frontier() -> None:
    frontier: Frontier[int] = Frontier([target(name="a", start=10, window=2)])
    frontier.next()
    frontier.next()
    for id_ in (9, 12, 10**9):
        rec = frontier.record("a:asc", id_, FOUND, id_)
        assert rec.released == []
        assert not rec.became_ready
    assert frontier.next().dispatch is None
    assert frontier.record("a:asc", 10, FOUND, 10).became_ready
    assert frontier.next().dispatch.id == 12  # type: ignore[union-attr]


def test_lane_object_is_shared_with_the_frontier() -> None:
    frontier: Frontier[int] = Frontier([target(name="a", start=0)])
    assert isinstance(frontier.lanes["a:asc"], Lane)
    assert frontier.lane_direction == {"a:asc": "asc"}
    assert frontier.lane_target["a:asc"].name == "a"


def test_lane_target_and_direction_for_keys_of_any_shape() -> None:
    """Lanes whose keys do not read ``<target>:<direction>`` (a resumed lane, names with colons, a lane
    key that names another target) still map to their own target and their spec's direction."""
    from idcrawl.core.frontier import LaneSpec

    a, b, c = target(name="a", start=5), target(name="a:b", start=0), target(name="x:y:z", start=9)
    frontier: Frontier[int] = Frontier([a])
    frontier.add_target(b, [LaneSpec("a:b:asc", "asc", 0, 1, None, 1), LaneSpec("a:desc", "desc", 4, -1, 0, 1)])
    frontier.add_target(c, [LaneSpec("c", "holes", 0, 1, 1, 1, ids=(3, 7)), LaneSpec("x:y:z", "up", 9, 1, None, 1),
                            LaneSpec("odd", "asc", 9, -1, 0, 1)])
    assert dict(frontier.lane_target) == {"a:asc": a, "a:b:asc": b, "a:desc": b, "c": c, "x:y:z": c, "odd": c}
    assert dict(frontier.lane_direction) == {"a:asc": "asc", "a:b:asc": "asc", "a:desc": "desc", "c": "holes",
                                             "x:y:z": "up", "odd": "asc"}
    assert "nope" not in frontier.lane_target and "a" not in frontier.lane_direction
    assert len(frontier.lane_target) == len(frontier.lane_direction) == 6
    with pytest.raises(KeyError):
        frontier.lane_target["a:nope"]


def test_targets_of_one_template_share_a_space_only_when_their_keys_are_equal() -> None:
    url = "http://example.org/{id}"
    one, two = target(name="one", url=url, start=0), target(name="two", url=url, start=0, missing_statuses=[404])
    three = target(name="three", url=url, start=3, missing_statuses=[404])
    frontier: Frontier[int] = Frontier([one, two, three])
    assert frontier._space.get("one") is None
    assert frontier._space["two"] is frontier._space["three"]


def test_lanes_of_a_target_whatever_its_lane_keys() -> None:
    from idcrawl.core.frontier import LaneSpec

    a, b, c, d = (target(name=n, start=5, direction="both", min=0) for n in ("a", "a:b", "c", "d"))
    frontier: Frontier[int] = Frontier([a])
    frontier.add_target(b, [LaneSpec("a:b:desc", "desc", 4, -1, 0, 1), LaneSpec("a:b:asc", "asc", 5, 1, None, 1)])
    frontier.add_target(c, [LaneSpec("c:holes", "holes", 0, 1, 0, 1, ids=(3,)), LaneSpec("c:asc", "asc", 5, 1, None, 1)])
    frontier.add_target(d, [])
    keys = {name: [lane.key for lane in frontier.lanes_of(name)] for name in ("a", "a:b", "c", "d", "nope")}
    assert keys == {"a": ["a:asc", "a:desc"], "a:b": ["a:b:desc", "a:b:asc"], "c": ["c:holes", "c:asc"], "d": [],
                    "nope": []}
