"""Adaptive lanes: speculation that follows the evidence, and retries that never stall a lane.

An adaptive lane (:class:`idcrawl.core.lanes.Lane` with ``adaptive=True``, what the core
frontier builds) decides exactly what a fixed-window lane decides; it only dispenses
differently:

- at most ``margin`` ids past its *earliest possible cut* (where the margin would cut it if
  every id without an outcome were a miss), so the requests wasted past the real cut are at most
  the margin at any concurrency;
- its window counts from its *window base* (just after the last found id before the earliest
  possible cut), so an id waiting out a retry whose outcome cannot change the cut holds nothing.

The properties drive lanes through random outcome sequences and completion orders, with some
ids held back as if cooling down between attempts, and check every step against
:func:`tests.support.reference.earliest_cut_truth` and the end against
:func:`tests.support.reference.lane_truth`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.frontier import Frontier
from idcrawl.core.lanes import BEHIND_WINDOWS, BOUND, MARGIN, Lane, Outcome
from idcrawl.core.targets import parse_target
from tests.support.reference import earliest_cut_truth, lane_truth

FOUND, MISSING, FAILED = Outcome.FOUND, Outcome.MISSING, Outcome.FAILED


def lane(start: int = 0, step: int = 1, stop: int | None = None, margin: int = 3, window: int = 100,
         neutral: frozenset[Outcome] = frozenset(), speculation: int | None = None) -> Lane[int]:
    return Lane("t:asc" if step > 0 else "t:desc", start=start, step=step, stop=stop, margin=margin,
                window=window, neutral=neutral, adaptive=True, speculation=speculation)


def fill(ln: Lane[int]) -> list[int]:
    ids = []
    while ln.ready:
        ids.append(ln.dispense())
    return ids


# -- speculation ----------------------------------------------------------------------------------


def test_a_fresh_lane_dispenses_margin_ids_past_its_earliest_cut() -> None:
    ln = lane(margin=3)
    assert ln.earliest_cut == 2  # 0, 1, 2 all missing would cut at 2
    assert fill(ln) == [0, 1, 2, 3, 4, 5]


def test_a_found_id_moves_the_earliest_cut_and_dispensing_grows_again() -> None:
    ln = lane(margin=3)
    fill(ln)
    assert not ln.record(4, FOUND, 4).became_ready  # 0, 1, 2 missing would still cut at 2
    rec = ln.record(2, FOUND, 2)  # now 5, 6, 7 missing would cut at 7 (3 cannot: 4 is found)
    assert rec.became_ready and rec.released == [2, 4]
    assert ln.earliest_cut == 7
    assert fill(ln) == [6, 7, 8, 9, 10]
    assert ln.record(1, MISSING).released == []  # a miss moves nothing
    assert not ln.ready
    assert ln.record(0, FOUND, 0).released == [0]


def test_answers_in_id_order_keep_twice_the_margin_in_flight() -> None:
    ln = lane(margin=3, window=20)
    inflight = fill(ln)
    for _ in range(50):
        id_ = inflight.pop(0)  # the oldest answers first: every id exists
        ln.record(id_, FOUND, id_)
        inflight += fill(ln)
        assert len(inflight) == 6  # 3 ids up to the earliest cut, 3 past it


def test_older_ids_in_flight_before_found_ids_hold_nothing() -> None:
    ln = lane(margin=3, window=20)
    inflight = fill(ln)
    for _ in range(50):
        id_ = inflight.pop()  # the newest answers first: every id exists
        ln.record(id_, FOUND, id_)
        inflight += fill(ln)
        # past the window base: at most 3 ids up to the earliest cut, 3 past it
        assert ln.next_id - ln.window_base <= 6
    assert len(inflight) > 20 and ln.first_undecided == 0  # the older ids: still in flight, holding nothing


def test_misses_in_flight_stop_the_lane_at_margin_past_the_end() -> None:
    """The lane end: ids 0..9 exist, concurrency without limit; the requests past the cut <= margin."""
    ln = lane(margin=4, window=128)
    inflight = fill(ln)
    released: list[int] = []
    while inflight:
        id_ = inflight.pop(0)
        released += ln.record(id_, FOUND if id_ < 10 else MISSING, id_).released
        inflight += fill(ln)
    assert released == list(range(10))
    assert (ln.cut_at, ln.reason) == (13, MARGIN)
    assert ln.counts.past_cut <= 4
    assert ln.next_id - 1 - ln.cut_at == ln.counts.past_cut


def test_a_lane_without_speculation_dispenses_up_to_its_earliest_cut_only() -> None:
    """A sequential slot's lane (``speculation = 0``): the ids up to the earliest possible cut, then
    each next one once an outcome moved it; at the lane end nothing past the cut."""
    ln = lane(margin=3, speculation=0)
    assert fill(ln) == [0, 1, 2]
    ln.record(0, FOUND, 0)
    assert ln.earliest_cut == 3 and fill(ln) == [3]
    for id_ in (1, 2, 3):
        ln.record(id_, MISSING)
    assert (ln.cut_at, ln.reason) == (3, MARGIN) and ln.counts.past_cut == 0 and ln.next_id == 4


def test_neutral_outcomes_do_not_count_toward_the_earliest_cut() -> None:
    ln = lane(margin=2, neutral=frozenset({FAILED}))
    assert fill(ln) == [0, 1, 2, 3]
    ln.record(0, FAILED)
    assert ln.earliest_cut == 2
    assert fill(ln) == [4]


def test_a_lane_without_margin_is_not_held_back() -> None:
    ln = lane(stop=30, margin=0, window=8)
    assert ln.earliest_cut is None
    assert fill(ln) == list(range(8))


def test_the_earliest_cut_is_the_cut_once_the_lane_is_cut() -> None:
    ln = lane(margin=2)
    for id_ in fill(ln):
        ln.record(id_, MISSING)
    assert ln.cut_at == ln.earliest_cut == 1


# -- retries that never stall a lane --------------------------------------------------------------------


def test_an_id_cooling_down_before_a_close_found_id_does_not_hold_the_window() -> None:
    ln = lane(margin=3, window=4)
    assert fill(ln) == [0, 1, 2, 3]
    ln.record(1, MISSING)
    rec = ln.record(2, FOUND, 2)  # 0 (cooling down) and 1 cannot make a run of 3 before 2
    assert rec.released == [2]  # its items do not wait for 0
    assert rec.became_ready and ln.window_base == 3
    assert fill(ln) == [4, 5, 6]
    for id_ in (3, 4, 5, 6):
        ln.record(id_, FOUND, id_)
    assert ln.window_base == 7 and ln.first_undecided == 0
    assert fill(ln) == [7, 8, 9, 10]
    assert ln.record(0, MISSING).released == []  # the retry ends: the prefix catches up
    assert ln.first_undecided == 7
    assert (ln.counts.found, ln.counts.missing) == (5, 2)


def test_an_id_that_can_still_cause_the_cut_holds_the_window() -> None:
    ln = lane(margin=2, window=4)
    assert fill(ln) == [0, 1, 2, 3]
    ln.record(1, MISSING)
    ln.record(2, FOUND, 2)  # 0 and 1 missing would cut at 1: 0 still decides the cut
    assert ln.window_base == 0 and ln.earliest_cut == 1
    assert not ln.ready
    assert ln.record(0, MISSING).stopped
    assert ln.cut_at == 1


def test_a_lane_runs_on_at_most_behind_windows_past_its_first_undecided_id() -> None:
    ln = lane(margin=3, window=2)
    ids = fill(ln)
    ids.remove(0)  # 0 never answers
    while ln.ready or ids:
        if ids:
            id_ = ids.pop()
            ln.record(id_, FOUND, id_)
        ids += fill(ln)
    assert ln.ahead == 2 * BEHIND_WINDOWS
    assert ln.first_undecided == 0 and not ln.stopped


def test_the_frontier_runs_on_past_a_cooling_id() -> None:
    frontier: Frontier[int] = Frontier([parse_target({"url": "https://example.org/{id}", "start": 0, "window": 3})])
    assert [frontier.next().dispatch.id for _ in range(3)] == [0, 1, 2]  # type: ignore[union-attr]
    assert frontier.next().dispatch is None
    frontier.record("example.org:asc", 1, FOUND, 1)
    assert frontier.next().dispatch.id == 3  # type: ignore[union-attr]
    assert frontier.outstanding() == 4  # 0 is still waited for


# -- properties ---------------------------------------------------------------------------------------


def drive(
    ln: Lane[int],
    outcome_of: Callable[[int], Outcome],
    rnd: random.Random,
    concurrency: int,
    slow: set[int],
    check: Callable[[dict[int, Outcome]], None],
) -> list[int]:
    """Up to ``concurrency`` ids in flight, completed in a random order; ids in ``slow`` (retries
    cooling down) complete only when nothing else is in flight. Returns the released ids."""
    inflight: list[int] = []
    known: dict[int, Outcome] = {}
    released: list[int] = []
    for _ in range(100_000):
        while ln.ready and len(inflight) < concurrency and (rnd.random() < 0.8 or not inflight):
            inflight.append(ln.dispense())
        check(known)
        if not inflight:
            return released
        quick = [i for i in inflight if i not in slow]
        id_ = rnd.choice(quick or inflight)
        inflight.remove(id_)
        outcome = outcome_of(id_)
        known[id_] = outcome
        released += ln.record(id_, outcome, id_ if outcome is FOUND else None).released
        check(known)
    raise AssertionError("the lane did not end")


@st.composite
def cases(draw: st.DrawFn) -> tuple[int, int | None, int, int, dict[int, Outcome], set[int], frozenset[Outcome]]:
    step = draw(st.sampled_from([1, -1]))
    start = draw(st.integers(0, 60)) if step < 0 else draw(st.integers(0, 1000))
    margin = draw(st.integers(0, 8))
    stop = None
    if margin == 0 or draw(st.booleans()):
        stop = max(0, start + step * draw(st.integers(0, 80)))
    length = draw(st.integers(0, 120))
    weights = draw(st.sampled_from([(8, 1, 1), (3, 2, 0), (1, 1, 1), (20, 1, 0)]))
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    outcomes = {start + step * k: rnd.choices([FOUND, MISSING, FAILED], weights=weights)[0] for k in range(length)}
    slow = {i for i in outcomes if rnd.random() < 0.05}
    neutral = draw(st.sampled_from([frozenset(), frozenset({FAILED})]))
    return start, stop, step, margin, outcomes, slow, neutral


def truth(start: int, stop: int | None, step: int, margin: int, outcomes: dict[int, Outcome],
          neutral: frozenset[Outcome]) -> tuple[list[int], int | None]:
    """The sequential rule; neutral failed ids are left out of the walk (they neither extend nor reset a run)."""
    ids: list[int] = []
    id_ = start
    while id_ >= 0 and (stop is None or (id_ - stop) * step <= 0) and (id_ - start) * step <= len(outcomes) + margin:
        if outcomes.get(id_, MISSING) not in neutral:
            ids.append(id_)
        id_ += step
    found, cut = lane_truth(lambda k: outcomes.get(ids[k]) is FOUND, 0, 1, len(ids) - 1, margin)
    return [ids[k] for k in found], None if cut is None else ids[cut]


@settings(max_examples=400, derandomize=True, deadline=None)
@given(case=cases(), window=st.integers(1, 40), concurrency=st.integers(1, 64), seed=st.integers(0, 2**32 - 1),
       speculation=st.one_of(st.none(), st.just(0), st.integers(1, 8)))
def test_any_order_decides_as_the_sequential_rule_and_wastes_at_most_the_margin(
    case: tuple[int, int | None, int, int, dict[int, Outcome], set[int], frozenset[Outcome]],
    window: int,
    concurrency: int,
    seed: int,
    speculation: int | None,
) -> None:
    """... and at most ``speculation`` (the margin unless given; 0: nothing past the cut)."""
    start, stop, step, margin, outcomes, slow, neutral = case
    ln = lane(start=start, step=step, stop=stop, margin=margin, window=window, neutral=neutral,
              speculation=speculation)
    spec = margin if speculation is None else speculation
    fixed = Lane("fixed", start=start, step=step, stop=stop, margin=margin, window=window, neutral=neutral)
    neutral_names = {o.value for o in neutral}

    def check(known: dict[int, Outcome]) -> None:
        if ln.cut_at is not None:
            return
        pcut, base = earliest_cut_truth({i: o.value for i, o in known.items()}, start, step, margin, neutral_names)
        assert ln.earliest_cut == pcut
        # the window counts from just after the last found id before the earliest cut
        first = ln.first_undecided
        assert ln.window_base == (base if (base - first) * step > 0 else first)
        if ln.stopped:
            return
        # a lane that does not dispense has a reason: margin ids past the earliest cut, a full
        # window from its base, or BEHIND_WINDOWS windows from its first undecided id
        held_back = (pcut is not None and (ln.next_id - pcut) * step > spec)
        full = (ln.next_id - ln.window_base) * step >= window or ln.ahead >= window * BEHIND_WINDOWS
        assert ln.ready == (not held_back and not full)

    def outcome_of(id_: int) -> Outcome:
        return outcomes.get(id_, MISSING)

    released = drive(ln, outcome_of, random.Random(seed), concurrency, slow, check)
    drive(fixed, outcome_of, random.Random(seed), 1, set(), lambda _: None)
    found, cut = truth(start, stop, step, margin, outcomes, neutral)
    # items, cut and outcomes: the sequential rule's, and the fixed-window lane's
    assert sorted(released, key=lambda i: i * step) == found
    assert ln.cut_at == cut and ln.reason == (MARGIN if cut is not None else BOUND)
    assert ln.settled and not ln.outstanding()
    for name in ("found", "missing", "failed", "emitted"):
        assert getattr(ln.counts, name) == getattr(fixed.counts, name), name
    # requests past the cut: at most the speculation (the margin unless given)
    if cut is not None:
        assert ln.counts.past_cut == (ln.next_id - cut) * step - 1 <= spec


def drive_frontier(frontier: Frontier[tuple[str, int]], outcome_of: Callable[[int], Outcome], rnd: random.Random,
                   concurrency: int, slow: set[int]) -> dict[str, list[int]]:
    """As :func:`drive`, for a whole frontier; the released ids per lane (payloads are (lane, id))."""
    released: dict[str, list[int]] = {key: [] for key in frontier.lanes}

    def take(payloads: Sequence[tuple[str, int]]) -> None:
        for lane_key, id_ in payloads:
            released[lane_key].append(id_)

    inflight: list[tuple[str, int]] = []
    for _ in range(100_000):
        while len(inflight) < concurrency and (rnd.random() < 0.8 or not inflight):
            dispensed = frontier.next()
            take(dispensed.released)
            if (dispatch := dispensed.dispatch) is None:
                break
            inflight.append((dispatch.lane, dispatch.id))
        if not inflight:
            assert frontier.finished
            return released
        quick = [d for d in inflight if d[1] not in slow]
        key, id_ = rnd.choice(quick or inflight)
        inflight.remove((key, id_))
        outcome = outcome_of(id_)
        take(frontier.record(key, id_, outcome, (key, id_) if outcome is FOUND else None).released)
    raise AssertionError("the frontier did not finish")


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    starts=st.lists(st.tuples(st.integers(0, 120), st.sampled_from(["asc", "desc", "both"]), st.integers(1, 6),
                              st.integers(1, 30), st.booleans()), min_size=1, max_size=4),
    exists=st.sets(st.integers(0, 170), max_size=150),
    failing=st.sets(st.integers(0, 170), max_size=15),
    slow=st.sets(st.integers(0, 170), max_size=10),
    concurrency=st.integers(1, 40),
    seed=st.integers(0, 2**32 - 1),
)
def test_frontiers_decide_the_same_with_adaptive_lanes_and_a_fixed_window(
    starts: list[tuple[int, str, int, int, bool]], exists: set[int], failing: set[int], slow: set[int],
    concurrency: int, seed: int,
) -> None:
    """Targets on one site or on sites of their own (overlapping ones share outcomes), ids answering
    late as if retried: items, cuts and every lane's counts equal the fixed window's and the rule's."""
    targets = [parse_target({"name": f"t{i}", "start": start, "direction": direction, "margin": margin,
                             "window": window, "url": f"https://{'shared' if shared else f'h{i}'}.example/{{id}}"})
               for i, (start, direction, margin, window, shared) in enumerate(starts)]

    def outcome_of(id_: int) -> Outcome:
        return FAILED if id_ in failing else FOUND if id_ in exists else MISSING

    def rebind(payload: tuple[str, int] | None, lane: str, id_: int) -> tuple[str, int]:
        return lane, id_

    runs = []
    # adaptive; a fixed window; adaptive with every slot sequential (concurrency 1: no id past an earliest cut)
    for adaptive, sequential in ((True, False), (False, False), (True, True)):
        frontier: Frontier[tuple[str, int]] = Frontier(targets, rebind=rebind, adaptive=adaptive,
                                                       sequential=(lambda t: True) if sequential else None)
        released = drive_frontier(frontier, outcome_of, random.Random(seed), concurrency, slow)
        counts = {key: (ln.cut_at, ln.counts.found, ln.counts.missing, ln.counts.failed)
                  for key, ln in frontier.lanes.items()}
        runs.append(({key: sorted(ids) for key, ids in released.items()}, counts))
        for tgt in targets:
            for key, ln in frontier.lanes.items():
                if frontier.lane_target[key] is not tgt:
                    continue
                found, cut = lane_truth(lambda i: outcome_of(i) is FOUND, ln.start, ln.step, None, tgt.margin)
                assert ln.cut_at == cut, key
                assert sorted(released[key]) == sorted(found), key
                if adaptive and cut is not None:
                    assert ln.counts.past_cut <= (0 if sequential else tgt.margin), key
    assert runs[0] == runs[1] == runs[2]


# -- a reach (a tail told of newer ids by a sitemap) -------------------------------------------------


def reach_truth(start: int, stop: int | None, step: int, margin: int, outcomes: dict[int, Outcome],
                neutral: frozenset[Outcome], reach: int) -> tuple[list[int], int | None]:
    """:func:`truth` with a reach: misses at or before ``reach`` do not count toward the margin."""
    ids: list[int] = []
    id_ = start
    span = max(len(outcomes), (reach - start) * step + 1) + margin
    while id_ >= 0 and (stop is None or (id_ - stop) * step <= 0) and (id_ - start) * step <= span:
        if outcomes.get(id_, MISSING) not in neutral:
            ids.append(id_)
        id_ += step
    at = sum(1 for i in ids if (reach - i) * step >= 0) - 1  # the reach as a position among ``ids``
    found, cut = lane_truth(lambda k: outcomes.get(ids[k]) is FOUND, 0, 1, len(ids) - 1, margin, reach=at)
    return [ids[k] for k in found], None if cut is None else ids[cut]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(case=cases(), window=st.integers(1, 40), concurrency=st.integers(1, 64), seed=st.integers(0, 2**32 - 1),
       speculation=st.one_of(st.none(), st.just(0), st.integers(1, 8)), reach_at=st.integers(-3, 160))
def test_a_lane_with_a_reach_decides_as_the_sequential_rule_in_any_order(
    case: tuple[int, int | None, int, int, dict[int, Outcome], set[int], frozenset[Outcome]],
    window: int,
    concurrency: int,
    seed: int,
    speculation: int | None,
    reach_at: int,
) -> None:
    """Misses at or before the reach do not count toward the margin: the cut, the items, the earliest
    possible cut and the window base are the sequential rule's with the reach
    (:func:`tests.support.reference.lane_truth`, :func:`~tests.support.reference.earliest_cut_truth`),
    a fixed-window lane decides the same, and at most ``speculation`` ids go past the cut."""
    start, stop, step, margin, outcomes, slow, neutral = case
    reach = start + step * reach_at
    if step < 0 and reach < 0:
        reach = 0
    ln = Lane("t:asc" if step > 0 else "t:desc", start=start, step=step, stop=stop, margin=margin, window=window,
              neutral=neutral, adaptive=True, speculation=speculation, reach=reach)
    spec = margin if speculation is None else speculation
    fixed = Lane("fixed", start=start, step=step, stop=stop, margin=margin, window=window, neutral=neutral,
                 reach=reach)
    neutral_names = {o.value for o in neutral}

    def check(known: dict[int, Outcome]) -> None:
        if ln.cut_at is not None:
            return
        pcut, base = earliest_cut_truth({i: o.value for i, o in known.items()}, start, step, margin, neutral_names,
                                        reach=reach)
        assert ln.earliest_cut == pcut
        first = ln.first_undecided
        assert ln.window_base == (base if (base - first) * step > 0 else first)

    def outcome_of(id_: int) -> Outcome:
        return outcomes.get(id_, MISSING)

    released = drive(ln, outcome_of, random.Random(seed), concurrency, slow, check)
    fixed_released = drive(fixed, outcome_of, random.Random(seed), concurrency, set(), lambda _: None)
    found, cut = reach_truth(start, stop, step, margin, outcomes, neutral, reach)
    assert sorted(released, key=lambda i: i * step) == found
    assert sorted(fixed_released, key=lambda i: i * step) == found
    assert ln.cut_at == cut == fixed.cut_at
    assert ln.settled and not ln.outstanding()
    if cut is not None:
        assert (cut - reach) * step >= margin, "cut at least margin ids past the reach"
        assert ln.counts.past_cut == (ln.next_id - cut) * step - 1 <= spec


def test_a_reach_walks_past_any_run_of_misses_to_a_listed_id() -> None:
    """Margin 3, the last found id 10, a sitemap lists 40: the walk from 11 goes on to 40 and finds it,
    then stops 3 misses past it; without the reach it stops at 13."""
    for reach, cut, found in ((None, 13, []), (40, 43, [40])):
        ln = Lane("t:asc", start=11, step=1, stop=None, margin=3, window=5, adaptive=True, reach=reach)
        released = drive(ln, lambda i: FOUND if i == 40 else MISSING, random.Random(7), 4, set(), lambda _: None)
        assert (ln.cut_at, released) == (cut, found)


@settings(max_examples=120, derandomize=True, deadline=None)
@given(
    starts=st.lists(st.tuples(st.integers(0, 120), st.integers(1, 6), st.integers(1, 30), st.booleans(),
                              st.one_of(st.none(), st.integers(-5, 80))), min_size=1, max_size=4),
    exists=st.sets(st.integers(0, 250), max_size=150),
    slow=st.sets(st.integers(0, 250), max_size=10),
    concurrency=st.integers(1, 40),
    seed=st.integers(0, 2**32 - 1),
)
def test_tails_with_a_reach_in_a_frontier_decide_as_the_rule_in_any_order(
    starts: list[tuple[int, int, int, bool, int | None]], exists: set[int], slow: set[int], concurrency: int,
    seed: int,
) -> None:
    """Resumed tails (ascending lanes from a LaneSpec with a reach), on one site or on sites of their own
    (overlapping ones share outcomes): each lane's items and cut are the rule's with its reach, adaptive
    or with a fixed window, and an adaptive lane wastes at most its margin past the cut."""
    from idcrawl.core.frontier import LaneSpec

    targets = [parse_target({"name": f"t{i}", "start": start, "direction": "asc", "margin": margin, "window": window,
                             "url": f"https://{'shared' if shared else f'h{i}'}.example/{{id}}"})
               for i, (start, margin, window, shared, _) in enumerate(starts)]
    reaches = {t.name: None if r is None else max(0, t.start + r) for t, (*_, r) in zip(targets, starts, strict=True)}

    def outcome_of(id_: int) -> Outcome:
        return FOUND if id_ in exists else MISSING

    def rebind(payload: tuple[str, int] | None, lane: str, id_: int) -> tuple[str, int]:
        return lane, id_

    for adaptive in (True, False):
        frontier: Frontier[tuple[str, int]] = Frontier([], rebind=rebind, adaptive=adaptive)
        for tgt in targets:
            reach = reaches[tgt.name]
            frontier.add_target(tgt, [LaneSpec(f"{tgt.name}:asc", "asc", tgt.start, 1, None, 1, reach=reach)])
        released = drive_frontier(frontier, outcome_of, random.Random(seed), concurrency, slow)
        for key, ln in frontier.lanes.items():
            tgt = frontier.lane_target[key]
            found, cut = lane_truth(lambda i: outcome_of(i) is FOUND, ln.start, 1, None, tgt.margin,
                                    reach=reaches[tgt.name])
            assert ln.cut_at == cut, key
            assert sorted(released[key]) == sorted(found), key
            if adaptive and cut is not None:
                assert ln.counts.past_cut <= tgt.margin, key
