"""What a frontier keeps of lanes it has not walked yet: untouched lanes, space keys by their hash."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import idcrawl.core.frontier as frontier_module
from idcrawl.core.frontier import Frontier
from idcrawl.core.lanes import BOUND, Lane, Outcome
from idcrawl.core.overlap import space_key
from idcrawl.core.targets import Target, parse_target


def target(**raw: Any) -> Target:
    raw.setdefault("url", "https://example.org/{id}")
    return parse_target(raw)


def test_a_lane_is_untouched_until_it_dispenses_or_closes() -> None:
    fresh: Lane[str] = Lane("t:asc", start=5, step=1, stop=9, margin=2, window=4)
    assert fresh.untouched
    fresh.dispense()
    assert not fresh.untouched
    closed: Lane[str] = Lane("t:asc", start=5, step=1, stop=9, margin=2, window=4)
    closed.close("limit:x")
    assert not closed.untouched
    empty: Lane[str] = Lane("t:desc", start=-1, step=-1, stop=0, margin=2, window=4)  # starts past its stop
    assert empty.reason == BOUND and empty.untouched


def test_lanes_never_share_their_outcomes_or_held_payloads() -> None:
    lanes: list[Lane[str]] = [Lane(f"t{i}:asc", start=0, step=1, stop=None, margin=1, window=4, adaptive=adaptive,
                              speculation=4)
                              for i, adaptive in enumerate((False, True, False))]
    first, second, third = lanes
    for lane in (first, second):
        for _ in range(3):
            lane.dispense()
        for id_ in (2, 1):  # decided before id 0: held, not released
            assert lane.record(id_, Outcome.FOUND, f"{lane.key}-{id_}").released == []
    assert first.held == second.held == 2 and first.outstanding() == second.outstanding() == [0]
    assert third.held == 0 and third.outstanding() == [] and third.untouched
    assert first.record(0, Outcome.FOUND, "t0:asc-0").released == ["t0:asc-0", "t0:asc-1", "t0:asc-2"]
    assert second.held == 2 and third.held == 0 and third.untouched


class _Colliding:
    """A space key whose hash every key shares."""

    def __init__(self, key: Any) -> None:
        self.key = key

    def __hash__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Colliding) and other.key == self.key


@pytest.mark.parametrize("collide", [False, True])
def test_targets_share_an_id_space_by_key_not_by_its_hash(monkeypatch: pytest.MonkeyPatch, collide: bool) -> None:
    if collide:
        monkeypatch.setattr(frontier_module, "space_key", lambda t: _Colliding(space_key(t)))
    one, other = "https://a.example/{id}", "https://b.example/{id}"
    targets = [target(name=name, url=url, start=0, max=9, margin=0)
               for name, url in (("a1", one), ("b1", other), ("a2", one), ("b2", other), ("a3", one))]
    frontier: Frontier[str] = Frontier(targets)
    fetched: Counter[str] = Counter()
    while (dispatch := frontier.next().dispatch) is not None:
        fetched[dispatch.target.url_for(dispatch.id)] += 1
        frontier.record(dispatch.lane, dispatch.id, Outcome.MISSING)
    assert frontier.finished
    assert sorted(fetched) == sorted([one.format(id=i) for i in range(10)] + [other.format(id=i) for i in range(10)])
    assert set(fetched.values()) == {1}  # each URL once: the targets of one template share their ids
    assert all(lane.counts.missing == 10 for lane in frontier.lanes.values())
