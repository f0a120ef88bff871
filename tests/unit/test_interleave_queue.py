"""Interleaver: lanes never at their group's head are rows of numbers, and picks stay exactly the same."""

from __future__ import annotations

import math
import random
from collections.abc import Hashable

from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.interleave import Interleaver


class Naive:
    """Stride scheduling by a scan of every lane: the smallest (pass, order) of a ready group goes next."""

    def __init__(self) -> None:
        self.lanes: dict[str, list[int | bool | Hashable]] = {}  # key -> [pass, order, weight, group, parked]
        self.lcm, self.order, self.vtime = 1, 0, 0

    def add(self, key: str, group: Hashable, weight: int) -> None:
        new = math.lcm(self.lcm, weight)
        factor, self.lcm = new // self.lcm, new
        self.vtime *= factor
        for lane in self.lanes.values():
            lane[0] *= factor  # type: ignore[operator]
        self.lanes[key] = [self.vtime, self.order, weight, group, False]
        self.order += 1

    def pick(self, group_ready: set[Hashable], lane_ready: set[str]) -> str | None:
        while True:
            live = [(lane[0], lane[1], key) for key, lane in self.lanes.items()
                    if not lane[4] and lane[3] in group_ready]
            if not live:
                return None
            pass_, _, key = min(live)  # type: ignore[type-var]
            lane = self.lanes[key]
            if key not in lane_ready:
                lane[4] = True
                continue
            self.vtime = pass_  # type: ignore[assignment]
            lane[0] = pass_ + self.lcm // lane[2]  # type: ignore[operator]
            return key

    def unpark(self, key: str) -> None:
        lane = self.lanes.get(key)
        if lane is not None and lane[4]:
            lane[4] = False
            lane[0] = max(lane[0], self.vtime)  # type: ignore[type-var]


def run(seed: int, steps: int) -> None:
    rng = random.Random(seed)
    iv: Interleaver[str, Hashable] = Interleaver()
    model = Naive()
    groups = ["g0", "g1", "g2"][: rng.randint(1, 3)]
    serial = 0
    for _ in range(steps):
        roll = rng.random()
        keys = list(model.lanes)
        if roll < 0.35 or not keys:
            key, serial = f"L{serial}", serial + 1
            group, weight = rng.choice(groups), rng.choice((1, 1, 1, 2, 3))
            iv.add(key, group, weight)
            model.add(key, group, weight)
        elif roll < 0.75:
            ready_groups = {g for g in groups if rng.random() < 0.8}
            ready_lanes = {k for k in keys if rng.random() < 0.9}
            assert iv.pick(ready_groups.__contains__, ready_lanes.__contains__) == model.pick(ready_groups, ready_lanes)
        elif roll < 0.85:
            key = rng.choice(keys)
            iv.remove(key)
            del model.lanes[key]
        elif roll < 0.92:
            key = rng.choice(keys)
            iv.park(key)
            model.lanes[key][4] = True
        else:
            key = rng.choice(keys)
            iv.unpark(key)
            model.unpark(key)
        assert len(iv) == len(model.lanes)
        assert all(key in iv for key in model.lanes)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_picks_are_those_of_a_scan_of_every_lane(seed: int) -> None:
    run(seed, 120)


def test_picks_are_those_of_a_scan_of_every_lane_over_long_runs() -> None:
    for seed in range(20):
        run(seed, 1500)


def test_lanes_never_at_their_groups_head_stay_rows() -> None:
    iv: Interleaver[str, Hashable] = Interleaver()
    for i in range(2000):
        iv.add(f"t{i}", "host", 1)
    assert iv.untouched == 1999  # the first lane is the group's head
    assert [iv.pick() for _ in range(10)] == [f"t{i}" for i in range(10)]
    assert iv.untouched == 1989
    for i in range(1500, 2000):  # closed before they were reached
        iv.remove(f"t{i}")
    assert iv.untouched == 1489 and len(iv) == 1500
    assert [iv.pick() for _ in range(1490)][-1] == "t1499"
    assert iv.untouched == 0
    assert iv.pick() == "t0"  # the next round



def test_a_queued_lane_parked_or_removed_before_it_is_reached() -> None:
    iv: Interleaver[str, Hashable] = Interleaver()
    for key in "ABCDE":
        iv.add(key, "g", 1)
    iv.remove("B")
    iv.park("D")
    assert iv.untouched == 2 and len(iv) == 4 and "B" not in iv and "D" in iv
    assert [iv.pick() for _ in range(4)] == ["A", "C", "E", "A"]
    iv.unpark("D")  # rejoins at the pass of the last pick, in its declaration order
    assert [iv.pick() for _ in range(4)] == ["C", "D", "E", "A"]
