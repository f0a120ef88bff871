"""A fresh target's lane is made when the crawl first reaches it (``Frontier.lanes``, a ``LaneMap``),
and a frontier that made every lane at once does exactly what one that makes them when reached does."""

from __future__ import annotations

import random
from dataclasses import asdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.frontier import Frontier
from idcrawl.core.lanes import BOUND, Lane, Outcome
from idcrawl.core.targets import Target, parse_target

FOUND, MISSING, FAILED = Outcome.FOUND, Outcome.MISSING, Outcome.FAILED


def _targets(rnd: random.Random, count: int) -> list[Target]:
    targets = []
    for i in range(count):
        raw: dict[str, Any] = {"name": f"t{i}", "start": rnd.randrange(0, 30), "margin": rnd.randrange(1, 4),
                               "window": rnd.randrange(1, 5), "direction": rnd.choice(["asc", "desc", "both"])}
        # a few share a host (one download slot) or a URL template (one id space)
        raw["url"] = f"https://h{rnd.randrange(3)}.example/{rnd.randrange(3) if rnd.random() < 0.6 else i}/{{id}}"
        if rnd.random() < 0.5:
            raw["max"] = raw["start"] + rnd.randrange(0, 40)
        if rnd.random() < 0.3:
            raw["min"] = raw["start"]  # with both directions: its desc lane stops at its bound when added
        if "max" in raw and "min" in raw and rnd.random() < 0.5:
            raw["margin"] = 0  # no cut: walks to its bounds
        targets.append(parse_target(raw))
    return targets


def _lane_view(lane: Lane[int]) -> tuple[Any, ...]:
    return (lane.key, lane.start, lane.step, lane.stop, lane.next_id, lane.first_undecided, lane.cut_at,
            lane.reason, lane.last_found, lane.held, lane.untouched, lane.settled, asdict(lane.counts))


def _run(frontier: Frontier[int], rnd: random.Random, exists: float, close: set[str]) -> list[Any]:
    """Drive the frontier (random completion order, some lanes closed on the way); what it did, step by step."""
    log: list[Any] = []
    inflight: list[tuple[str, int, str]] = []
    for step in range(2_000):
        if step == 40:
            for key in sorted(close):
                decided = frontier.close_lane(key, "limit")
                log.append(("close", key, decided.released, decided.stopped))
        if rnd.random() < 0.6:
            dispensed = frontier.next()
            log.append(("next", dispensed.dispatch, list(dispensed.released), dispensed.skipped_found,
                        dispensed.deduplicated))
            if dispensed.dispatch is not None:
                inflight.append((dispensed.dispatch.lane, dispensed.dispatch.id, dispensed.dispatch.target.name))
        elif inflight:
            lane, id_, name = inflight.pop(rnd.randrange(len(inflight)))
            seeded = random.Random(f"{name}:{id_}")
            outcome = FOUND if seeded.random() < exists else rnd.choice([MISSING, MISSING, FAILED])
            decided = frontier.record(lane, id_, outcome, id_)
            log.append(("record", lane, id_, decided.released, decided.stopped, decided.became_ready))
        log.append((frontier.finished, frontier.can_dispense(), frontier.outstanding()))
        if frontier.finished and not inflight:
            break
    log.append(sorted((key, _lane_view(lane)) for key, lane in frontier.read_lanes()))
    log.append(frontier.lost())
    return log


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 12), exists=st.floats(0.2, 0.9),
       max_held=st.sampled_from([0, 1, 3]), adaptive=st.booleans())
def test_lanes_made_when_reached_do_what_lanes_made_at_once_do(seed: int, count: int, exists: float, max_held: int,
                                                               adaptive: bool) -> None:
    targets = _targets(random.Random(seed), count)
    close = {key for key in (f"t{i}:{d}" for i in range(count) for d in ("asc", "desc"))
             if random.Random(f"{seed}:{key}").random() < 0.2}

    def build() -> Frontier[int]:
        return Frontier(targets, adaptive=adaptive, max_held=max_held,
                        rebind=lambda payload, lane, id_: id_ if payload is not None else -1)

    lazy, eager = build(), build()
    for key in list(eager.lanes):
        eager.lanes[key]  # every lane made at once
    assert all(isinstance(lane, Lane) for _, lane in eager.lane_states())
    close &= set(lazy.lanes)
    assert _run(lazy, random.Random(seed), exists, close) == _run(eager, random.Random(seed), exists, close)


def test_a_fresh_lane_is_no_object_until_reached() -> None:
    frontier: Frontier[int] = Frontier([parse_target({"name": f"t{i}", "url": f"https://h.example/{i}/{{id}}",
                                                      "start": 5, "direction": "both"}) for i in range(50)])
    assert len(frontier.lanes) == 100 and "t7:desc" in frontier.lanes
    assert all(state is None for _, state in frontier.lane_states())
    copies = dict(frontier.read_lanes())  # read, not kept
    assert copies["t7:desc"].start == 4 and copies["t7:desc"].step == -1 and copies["t7:desc"].untouched
    assert all(state is None for _, state in frontier.lane_states())
    assert frontier.lane_direction["t7:desc"] == "desc" and frontier.lane_target["t7:desc"].name == "t7"
    dispatch = frontier.next().dispatch
    assert dispatch is not None
    made = [key for key, state in frontier.lane_states() if isinstance(state, Lane)]
    assert made == [dispatch.lane]
    assert frontier.outstanding() == 1 and not frontier.finished and frontier.can_dispense()


def test_a_lane_closed_before_it_is_reached_keeps_its_reason_only() -> None:
    frontier: Frontier[int] = Frontier([
        parse_target({"name": "a", "url": "https://a.example/{id}", "start": 0}),
        parse_target({"name": "b", "url": "https://b.example/{id}", "start": 3, "min": 3, "direction": "both"}),
    ])
    assert isinstance(dict(frontier.lane_states())["b:desc"], Lane)  # at its bound when added: kept as a lane
    assert dict(frontier.lane_states())["b:asc"] is None
    assert frontier.close_lane("a:asc", "limit").stopped
    assert frontier.close_lane("b:asc", "limit").stopped
    assert dict(frontier.lane_states())["a:asc"] == "limit"
    assert frontier.finished and not frontier.can_dispense() and frontier.next().dispatch is None
    lane = frontier.lanes["a:asc"]  # made when read, closed
    assert (lane.reason, lane.untouched, lane.settled, lane.next_id) == ("limit", False, True, 0)
    assert frontier.lanes["b:desc"].reason == BOUND


@pytest.mark.parametrize("max_held", [0, 2])
def test_a_frontier_of_lanes_not_reached_can_dispense_until_each_is_closed(max_held: int) -> None:
    frontier: Frontier[int] = Frontier(
        [parse_target({"name": f"t{i}", "url": f"https://h.example/{i}/{{id}}", "start": 0}) for i in range(3)],
        max_held=max_held)
    for key in ("t0:asc", "t1:asc"):
        frontier.close_lane(key, "limit")
        assert frontier.can_dispense() and not frontier.finished
    frontier.close_lane("t2:asc", "limit")
    assert not frontier.can_dispense() and frontier.finished
