"""Interleaver: weighted (stride) interleaving of lanes grouped by slot."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Hashable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.interleave import Interleaver


def make(*lanes: tuple[str, Hashable, int]) -> Interleaver[str, Hashable]:
    iv: Interleaver[str, Hashable] = Interleaver()
    for key, group, weight in lanes:
        iv.add(key, group, weight)
    return iv


def picks(
    iv: Interleaver[str, Hashable],
    n: int,
    group_ready: Callable[[Hashable], bool] | None = None,
    lane_ready: Callable[[str], bool] | None = None,
) -> str:
    out = []
    for _ in range(n):
        key = iv.pick(group_ready, lane_ready)
        assert key is not None
        out.append(key)
    return "".join(out)


def rounds(seq: str, size: int) -> list[Counter[str]]:
    return [Counter(seq[i : i + size]) for i in range(0, len(seq) - size + 1, size)]


def windows(seq: str, size: int) -> list[Counter[str]]:
    return [Counter(seq[i : i + size]) for i in range(len(seq) - size + 1)]


# -- exact weights -----------------------------------------------------------------


def test_weights_one_and_two_give_exactly_abbabbabb() -> None:
    iv = make(("A", "g", 1), ("b", "g", 2))
    assert picks(iv, 9) == "AbbAbbAbb"


def test_weights_one_and_two_in_different_groups_give_the_same_sequence() -> None:
    iv = make(("A", "g1", 1), ("b", "g2", 2))
    assert picks(iv, 9) == "AbbAbbAbb"


def test_equal_weights_alternate_in_declaration_order() -> None:
    assert picks(make(("A", "g", 1), ("B", "g", 1), ("C", "h", 1)), 6) == "ABCABC"


def test_three_lanes_weighted_one_two_three_in_one_group() -> None:
    iv = make(("A", "g", 1), ("B", "g", 2), ("C", "g", 3))
    seq = picks(iv, 6 * 10)
    assert all(c == {"A": 1, "B": 2, "C": 3} for c in rounds(seq, 6))
    assert seq[:6] == "ABCCBC"


def test_lanes_across_groups_get_exact_weights() -> None:
    iv = make(("A", "x", 3), ("B", "y", 1), ("C", "x", 2), ("D", "z", 4))
    seq = picks(iv, 10 * 8)
    assert all(c == {"A": 3, "B": 1, "C": 2, "D": 4} for c in windows(seq, 10))


def test_single_lane_is_always_picked() -> None:
    assert picks(make(("A", "g", 7)), 5) == "AAAAA"


def test_empty_interleaver_picks_none() -> None:
    iv: Interleaver[str, str] = Interleaver()
    assert iv.pick() is None
    assert len(iv) == 0


# -- later additions --------------------------------------------------------------------


def test_adding_a_lane_with_a_new_weight_rescales_and_stays_exact() -> None:
    iv = make(("A", "g", 1))
    assert picks(iv, 3) == "AAA"
    iv.add("b", "g", 2)  # lcm 1 -> 2: passes are rescaled
    assert picks(iv, 9) == "bbAbbAbbA"


def test_adding_a_lane_mid_round_keeps_every_later_stretch_exact() -> None:
    iv = make(("A", "g", 2), ("B", "h", 1))
    picks(iv, 4)  # part of a round
    iv.add("c", "h", 3)  # lcm 2 -> 6
    iv.add("d", "k", 5)  # lcm 6 -> 30
    seq = picks(iv, 11 * 6)
    assert all(c == {"A": 2, "B": 1, "c": 3, "d": 5} for c in windows(seq, 11))


def test_new_lane_does_not_get_a_burst_for_the_time_before_it_existed() -> None:
    iv = make(("A", "g", 1))
    picks(iv, 100)
    iv.add("B", "g", 1)
    seq = picks(iv, 10)
    assert Counter(seq) == {"A": 5, "B": 5}


def test_duplicate_lane_is_rejected() -> None:
    iv = make(("A", "g", 1))
    with pytest.raises(KeyError):
        iv.add("A", "h", 2)


@pytest.mark.parametrize("weight", [0, -1])
def test_non_positive_weight_is_rejected(weight: int) -> None:
    with pytest.raises(ValueError, match="weight"):
        make(("A", "g", weight))


# -- park / unpark ----------------------------------------------------------------------


def test_parked_lane_is_not_picked_and_others_keep_their_ratio() -> None:
    iv = make(("A", "g", 1), ("B", "g", 1), ("c", "h", 2))
    iv.park("A")
    seq = picks(iv, 30)
    assert "A" not in seq
    assert all(c == {"B": 1, "c": 2} for c in rounds(seq, 3))


def test_unparked_lane_rejoins_at_the_current_virtual_time_without_catching_up() -> None:
    iv = make(("A", "g", 1), ("B", "g", 1))
    iv.park("A")
    assert picks(iv, 10) == "B" * 10
    iv.unpark("A")
    seq = picks(iv, 20)
    # it rejoins at the pass of the last pick: one pick ahead at most, no burst for the parked time
    assert seq.startswith("AAB")
    assert all(c == {"A": 1, "B": 1} for c in windows(seq[1:], 2))


def test_all_lanes_parked_picks_none_until_unparked() -> None:
    iv = make(("A", "g", 1), ("B", "h", 2))
    iv.park("A")
    iv.park("B")
    assert iv.pick() is None
    iv.unpark("B")
    assert picks(iv, 2) == "BB"


def test_park_and_unpark_are_idempotent() -> None:
    iv = make(("A", "g", 1), ("B", "g", 2))
    iv.park("A")
    iv.park("A")
    iv.unpark("A")
    iv.unpark("A")
    iv.unpark("unknown")
    seq = picks(iv, 30)
    assert all(c == {"A": 1, "B": 2} for c in rounds(seq, 3))


def test_lane_not_ready_is_parked_and_skipped_without_blocking_others() -> None:
    iv = make(("A", "g", 5), ("B", "g", 1))
    asked: list[str] = []

    def lane_ready(key: str) -> bool:
        asked.append(key)
        return key != "A"

    assert iv.pick(lane_ready=lane_ready) == "B"
    assert asked == ["A", "B"]
    assert picks(iv, 5) == "BBBBB"  # A stays parked until unparked
    iv.unpark("A")
    assert iv.pick() == "A"


def test_park_of_unknown_lane_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        make(("A", "g", 1)).park("B")


# -- group readiness ---------------------------------------------------------------------


def test_busy_group_is_skipped_for_that_pick_only() -> None:
    iv = make(("A", "busy", 1), ("B", "free", 1))
    assert iv.pick(group_ready=lambda g: g != "busy") == "B"
    assert iv.pick() == "A"  # not parked: back as soon as the group is ready
    assert iv.pick() == "A"  # A is behind B by one pick, so it goes twice
    assert picks(iv, 4) == "BABA"


def test_busy_group_skips_all_its_lanes_in_one_step() -> None:
    iv = make(*[(f"a{i}", "busy", 1) for i in range(50)], ("B", "free", 1))
    asked: list[Hashable] = []

    def group_ready(group: Hashable) -> bool:
        asked.append(group)
        return group != "busy"

    assert iv.pick(group_ready) == "B"
    assert asked.count("busy") == 1


def test_no_ready_group_picks_none_and_loses_nothing() -> None:
    iv = make(("A", "g", 1), ("B", "h", 2))
    for _ in range(3):
        assert iv.pick(group_ready=lambda g: False) is None
    assert picks(iv, 6) == "ABBABB"


def test_group_skipped_repeatedly_comes_back() -> None:
    iv = make(("A", "g", 1), ("B", "h", 1), ("C", "h", 1))
    seq = picks(iv, 6, group_ready=lambda g: g == "h")
    assert set(seq) == {"B", "C"}
    assert iv.pick() == "A"


# -- remove --------------------------------------------------------------------------------


def test_removed_lane_is_never_picked_again() -> None:
    iv = make(("A", "g", 1), ("b", "g", 2), ("C", "h", 1))
    picks(iv, 2)
    iv.remove("b")
    assert "b" not in iv
    assert len(iv) == 2
    seq = picks(iv, 10)
    assert "b" not in seq
    assert all(c == {"A": 1, "C": 1} for c in windows(seq, 2))


def test_removing_a_parked_lane_works() -> None:
    iv = make(("A", "g", 1), ("B", "g", 1))
    iv.park("A")
    iv.remove("A")
    assert "A" not in iv
    iv.unpark("A")  # unknown now: ignored
    assert picks(iv, 3) == "BBB"


def test_removing_the_last_lane_of_a_group_leaves_the_others() -> None:
    iv = make(("A", "g", 1), ("B", "h", 1))
    iv.remove("A")
    assert picks(iv, 3) == "BBB"
    iv.remove("B")
    assert iv.pick() is None


def test_removed_key_can_be_added_again() -> None:
    iv = make(("A", "g", 1), ("B", "g", 1))
    iv.remove("A")
    iv.add("A", "h", 3)
    seq = picks(iv, 40)
    assert all(c == {"A": 3, "B": 1} for c in windows(seq, 4))


def test_remove_of_unknown_lane_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        make(("A", "g", 1)).remove("B")


# -- properties -----------------------------------------------------------------------------


@st.composite
def weighted_lanes(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    weights = draw(st.lists(st.integers(1, 20), min_size=1, max_size=8))
    groups = draw(st.lists(st.integers(0, 3), min_size=len(weights), max_size=len(weights)))
    return [(f"L{i}", g, w) for i, (w, g) in enumerate(zip(weights, groups, strict=True))]


@settings(max_examples=200, deadline=None)
@given(lanes=weighted_lanes())
def test_every_aligned_round_gives_each_lane_exactly_its_weight(lanes: list[tuple[str, int, int]]) -> None:
    iv: Interleaver[str, int] = Interleaver()
    for key, group, weight in lanes:
        iv.add(key, group, weight)
    total = sum(w for _, _, w in lanes)
    expected = {key: w for key, _, w in lanes}
    seq = [iv.pick() for _ in range(3 * total)]
    for r in range(3):
        assert Counter(seq[r * total : (r + 1) * total]) == expected
    # the contract is stronger: any stretch of sum(weights) consecutive picks
    for start in range(2 * total + 1):
        assert Counter(seq[start : start + total]) == expected


@settings(max_examples=200, deadline=None)
@given(lanes=weighted_lanes(), before=st.integers(0, 100), weight=st.integers(1, 20), group=st.integers(0, 4))
def test_lane_added_at_any_point_keeps_every_later_stretch_exact(
    lanes: list[tuple[str, int, int]], before: int, weight: int, group: int
) -> None:
    iv: Interleaver[str, int] = Interleaver()
    for key, g, w in lanes:
        iv.add(key, g, w)
    for _ in range(before):
        iv.pick()
    iv.add("new", group, weight)
    expected = {key: w for key, _, w in lanes} | {"new": weight}
    total = sum(expected.values())
    seq = [iv.pick() for _ in range(3 * total)]
    for start in range(2 * total + 1):
        assert Counter(seq[start : start + total]) == expected


@settings(max_examples=200, deadline=None)
@given(lanes=weighted_lanes(), rnd=st.randoms(use_true_random=False))
def test_skipped_groups_never_lose_or_duplicate_lanes(lanes: list[tuple[str, int, int]], rnd: random.Random) -> None:
    iv: Interleaver[str, int] = Interleaver()
    for key, group, weight in lanes:
        iv.add(key, group, weight)
    group_of = {key: g for key, g, _ in lanes}
    groups = set(group_of.values())
    skips = 12
    for _ in range(skips):
        busy = {g for g in groups if rnd.random() < 0.5}

        def group_ready(g: int, busy: set[int] = busy) -> bool:
            return g not in busy

        picked = iv.pick(group_ready)
        if busy >= groups:
            assert picked is None
        else:
            assert picked is not None
            assert group_of[picked] not in busy
    # once nothing is busy, lanes left behind catch up, lanes that went ahead wait, and the
    # weights are exact again (a lane can go at most `skips` rounds ahead of the others)
    total = sum(w for _, _, w in lanes)
    expected = {key: w for key, _, w in lanes}
    seq = [iv.pick() for _ in range((skips + 2) * total)]
    assert set(seq) == set(expected)
    assert Counter(seq[-total:]) == expected
