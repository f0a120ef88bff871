"""Overlapping targets (same URL template): one fetch per id, every lane its own outcome.

The property: whatever the overlap, concurrency and completion order, each id
is requested at most once, every lane's cut and found ids equal what the lane
would get alone, and each found id's items are emitted exactly once.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.frontier import Dispatch, Frontier, Touched, lane_specs
from idcrawl.core.lanes import Outcome
from idcrawl.core.overlap import IdSpace, space_key
from idcrawl.core.targets import Target, parse_target
from tests.support.reference import lane_truth, shared_emitter_truth

FOUND, MISSING, FAILED = Outcome.FOUND, Outcome.MISSING, Outcome.FAILED
URL = "https://register.example/notice/{id}"
Payload = tuple[str, int, list[Any]]


def target(**raw: Any) -> Target:
    raw.setdefault("url", URL)
    return parse_target({k: v for k, v in raw.items() if v is not None})


def rebind(payload: Payload | None, lane: str, id_: int) -> Payload:
    return (lane, id_, payload[2] if payload is not None else [])


def test_space_key_ignores_how_a_target_walks_but_not_what_an_id_means() -> None:
    a = target(name="a", start=10, direction="both", margin=3, min=0, max=100)
    b = target(name="b", start=50, direction="asc", margin=7, rate="3")
    assert space_key(a) == space_key(b)
    assert space_key(a) != space_key(target(name="c", start=1, url="https://register.example/other/{id}"))
    assert space_key(a) != space_key(target(name="d", start=1, missing_statuses="404"))
    assert space_key(a) != space_key(target(name="e", start=1, attempts=5))


def test_claim_fetch_wait_then_known() -> None:
    space: IdSpace[str] = IdSpace()
    assert space.claim("a:asc", 7).fetch
    waiting = space.claim("b:asc", 7)
    assert not waiting.fetch and waiting.outcome is None
    assert space.settle(7, FOUND, "items of 7") == ["b:asc"]
    known = space.claim("c:asc", 7)
    assert (known.fetch, known.outcome, known.payload) == (False, FOUND, "items of 7")
    assert space.first_emit(7) and not space.first_emit(7)
    assert space.claim("d:asc", 7).payload is None  # emitted: nothing left to hand over
    assert space.deduplicated == 3


def test_two_overlapping_targets_fetch_each_id_once_in_sequence() -> None:
    exists = set(range(0, 60)) - {5, 6, 7, 30, 31, 32, 33}
    a, b = target(name="a", start=0, max=40, margin=0), target(name="b", start=20, max=59, margin=0)
    frontier: Frontier[Payload] = Frontier([a, b], rebind=rebind)
    fetched: Counter[int] = Counter()
    emitted: list[int] = []
    found_by_lane: dict[str, list[int]] = defaultdict(list)
    while True:
        dispensed = frontier.next()
        dispatch = dispensed.dispatch
        released = list(dispensed.released)  # ids decided at dispatch (known from the other target)
        if dispatch is not None:
            fetched[dispatch.id] += 1
            outcome = FOUND if dispatch.id in exists else MISSING
            payload = (dispatch.lane, dispatch.id, [dispatch.id]) if outcome is FOUND else None
            released += frontier.record(dispatch.lane, dispatch.id, outcome, payload).released
        for lane, id_, outputs in released:
            found_by_lane[lane].append(id_)
            emitted += outputs
        if dispatch is None:
            break
    assert frontier.finished
    assert set(fetched) == set(range(60)) and max(fetched.values()) == 1
    assert sorted(emitted) == sorted(exists)
    assert sorted(found_by_lane["a:asc"]) == sorted(i for i in exists if i <= 40)
    assert sorted(found_by_lane["b:asc"]) == sorted(i for i in exists if i >= 20)
    assert frontier.deduplicated == 21  # ids 20..40


@st.composite
def overlapping(draw: st.DrawFn) -> list[Target]:
    count = draw(st.integers(2, 4))
    targets = []
    for i in range(count):
        start = draw(st.integers(0, 120))
        direction = draw(st.sampled_from(["asc", "desc", "both"]))
        margin = draw(st.integers(1, 6))
        lo = draw(st.one_of(st.none(), st.integers(0, start)))
        hi = draw(st.one_of(st.none(), st.integers(start, 160)))
        window = draw(st.integers(1, 30))
        rate = draw(st.sampled_from([1, 1, 4, 16]))  # a lane far from an id may reach it first
        targets.append(target(name=f"t{i}", start=start, direction=direction, margin=margin, min=lo, max=hi,
                              window=window, rate=rate))
    return targets


@settings(max_examples=150, deadline=None)
@given(
    targets=overlapping(),
    exists=st.one_of(  # sparse, or dense with a few gaps (long lanes that overlap a lot)
        st.sets(st.integers(0, 170), max_size=150),
        st.sets(st.integers(0, 170), max_size=25).map(lambda gaps: set(range(171)) - gaps),
    ),
    failing=st.sets(st.integers(0, 170), max_size=15),
    concurrency=st.integers(1, 40),
    adaptive=st.booleans(),
    max_held=st.sampled_from([0, 1, 3]),
    rnd=st.randoms(use_true_random=True),
)
def test_overlapping_targets_match_each_lane_alone(
    targets: list[Target], exists: set[int], failing: set[int], concurrency: int, adaptive: bool, max_held: int,
    rnd: random.Random,
) -> None:
    """... and the lane that emits a shared id's items is the reference's, whatever the order, with
    the held payloads capped (IDCRAWL_MAX_HELD_PAYLOADS 1 or 3: lanes wait, the crawl still ends) or not."""
    def outcome_of(id_: int) -> Outcome:
        return FAILED if id_ in failing else FOUND if id_ in exists else MISSING

    frontier: Frontier[Payload] = Frontier(targets, rebind=rebind, adaptive=adaptive, max_held=max_held)
    fetched: Counter[int] = Counter()
    emitted: list[int] = []
    emitter: dict[int, str] = {}
    released_by_lane: dict[str, list[int]] = defaultdict(list)
    inflight: list[Dispatch] = []

    def take_released(released: list[Payload]) -> None:
        for lane, id_, outputs in released:
            released_by_lane[lane].append(id_)
            emitted.extend(outputs)
            if outputs:
                emitter[id_] = lane

    for _ in range(100_000):
        while len(inflight) < concurrency:
            dispensed = frontier.next()
            take_released(dispensed.released)
            if (dispatch := dispensed.dispatch) is None:
                break
            fetched[dispatch.id] += 1
            inflight.append(dispatch)
        if not inflight:
            dispensed = frontier.next()
            assert dispensed.dispatch is None
            take_released(dispensed.released)
            break
        dispatch = inflight.pop(rnd.randrange(len(inflight)))
        outcome = outcome_of(dispatch.id)
        payload = (dispatch.lane, dispatch.id, [dispatch.id]) if outcome is FOUND else None
        take_released(frontier.record(dispatch.lane, dispatch.id, outcome, payload).released)
    assert frontier.finished
    assert max(fetched.values(), default=1) == 1, "an id was requested twice"
    expected_items: set[int] = set()
    for tgt in targets:
        for spec in lane_specs(tgt):
            found, cut = lane_truth(lambda i: outcome_of(i) is FOUND, spec.start, spec.step, spec.stop, tgt.margin)
            lane = frontier.lanes[spec.key]
            assert lane.cut_at == cut, spec.key
            assert sorted(released_by_lane[spec.key]) == sorted(found), spec.key
            expected_items |= set(found)
    assert sorted(emitted) == sorted(expected_items), "each found id's items exactly once"
    specs = [(spec.key, spec.start, spec.step, spec.stop, tgt.margin) for tgt in targets for spec in lane_specs(tgt)]
    assert emitter == shared_emitter_truth(specs, lambda i: outcome_of(i) is FOUND), "the rule's emitting lane"
    assert sum(lane.counts.emitted for lane in frontier.lanes.values()) == len(emitted)


@pytest.mark.parametrize("seed", range(8))
def test_the_cap_on_held_payloads_bounds_them_and_changes_no_item(seed: int) -> None:
    """a walks 1..200 at rate 8, b 100..300 at rate 1 (margin 5): b is nearer to 100..200, so a holds
    the items of those it reaches first for b. Without a cap a holds dozens at once; with the cap at 1
    a waits instead (held payloads at most 1 + the requests in flight), the crawl ends and the items
    and their emitting lanes are those of the uncapped crawl (seeded completion orders)."""
    gaps = {50, 150, 151, 250}
    exists = set(range(1, 301)) - gaps
    a = target(name="a", start=1, direction="asc", margin=5, max=200, rate=8, window=64)
    b = target(name="b", start=100, direction="asc", margin=5, max=300, window=64)
    concurrency = 6

    def crawl(max_held: int) -> tuple[dict[int, str], int]:
        rnd = random.Random(seed)
        frontier: Frontier[Payload] = Frontier([a, b], rebind=rebind, max_held=max_held)
        space = frontier._space["a"]
        emitter: dict[int, str] = {}
        inflight: list[Dispatch] = []
        most = 0

        def take(released: list[Payload]) -> None:
            for lane, id_, outputs in released:
                if outputs:
                    assert id_ not in emitter, "emitted twice"
                    emitter[id_] = lane.split(":")[0]

        while True:
            while len(inflight) < concurrency:
                dispensed = frontier.next()
                take(dispensed.released)
                if (dispatch := dispensed.dispatch) is None:
                    break
                inflight.append(dispatch)
            if not inflight:
                break
            dispatch = inflight.pop(rnd.randrange(len(inflight)))
            found = dispatch.id in exists
            payload = (dispatch.lane, dispatch.id, [dispatch.id]) if found else None
            take(frontier.record(dispatch.lane, dispatch.id, FOUND if found else MISSING, payload).released)
            most = max(most, space.held_count)
        assert frontier.finished and space.held_count == 0
        return emitter, most

    free, most_free = crawl(0)
    capped, most_capped = crawl(1)
    assert capped == free == {i: "a" if i < 100 else "b" for i in exists if i <= 300}
    assert most_free > 10, "the case holds many payloads without the cap"
    assert most_capped <= 1 + concurrency


def test_resumed_holes_of_overlapping_targets_are_fetched_once_and_every_list_lane_settles() -> None:
    """List lanes (resumed holes) walk positions; the shared space knows ids: a hole of two
    overlapping targets is fetched once, and the other list lane takes its outcome by id."""
    from idcrawl.core.frontier import LaneSpec

    a = parse_target({"name": "a", "url": "http://h/n/{id}", "start": 1000, "direction": "both", "margin": 5})
    b = parse_target({"name": "b", "url": "http://h/n/{id}", "start": 1010, "direction": "asc", "margin": 5})
    f: Frontier[tuple[str, int, list[int]]] = Frontier(
        [], rebind=lambda payload, lane, id_: (lane, id_, payload[2] if payload else []))
    f.add_target(a, [LaneSpec("a:holes", "holes", 0, 1, 2, a.rate_asc, ids=(997, 1013, 1015))])
    f.add_target(b, [LaneSpec("b:holes", "holes", 0, 1, 1, b.rate_asc, ids=(1013, 1015))])
    fetched, emitted = [], []
    touched: list[Touched] = []
    while True:
        dispensed = f.next()
        emitted += [(lane, id_) for lane, id_, items in dispensed.released if items]
        touched += dispensed.touched
        if (d := dispensed.dispatch) is None:
            break
        fetched.append(d.id)
        rec = f.record(d.lane, d.id, Outcome.FOUND, (d.lane, d.id, [d.id]))
        emitted += [(lane, id_) for lane, id_, items in rec.released if items]
        touched += rec.touched
    assert sorted(fetched) == [997, 1013, 1015], "each hole once"
    assert sorted(id_ for _, id_ in emitted) == [997, 1013, 1015], "each found hole's items once"
    assert f.finished, "the list lane that waited took the outcomes"
    assert all(lane.counts.found == len(f._ids[key]) for key, lane in f.lanes.items())
    shared = [(t.lane, t.id) for t in touched]
    assert shared and all(id_ in (1013, 1015) for _, id_ in shared), "touched carries ids, not positions"


def test_a_shared_id_is_emitted_by_the_nearest_lane_whatever_the_completion_order() -> None:
    """a walks 1..200, b 100..300 (margin 5, window 12): b reaches 100..200 in fewer steps, so b
    emits them, in every completion order and with either speculation (seeded orders), even
    when a dispenses 8 ids for each of b's and gets there first (then a holds them for b)."""
    gaps = {50, 150, 151, 250}
    exists = set(range(1, 301)) - gaps
    b = target(name="b", start=100, max=300, margin=5, window=12)
    for seed in range(20):
        a = target(name="a", start=1, max=200, margin=5, window=12, rate=8 if seed % 4 < 2 else 1)
        rnd = random.Random(seed)
        frontier: Frontier[Payload] = Frontier([a, b], rebind=rebind, adaptive=seed % 2 == 0)
        emitter: dict[int, str] = {}
        inflight: list[Dispatch] = []
        while True:
            released: list[Payload] = []
            while len(inflight) < 1 + seed:
                dispensed = frontier.next()
                released += dispensed.released
                if (dispatch := dispensed.dispatch) is None:
                    break
                inflight.append(dispatch)
            if inflight:
                d = inflight.pop(rnd.randrange(len(inflight)))
                found = d.id in exists
                released += frontier.record(d.lane, d.id, FOUND if found else MISSING,
                                            (d.lane, d.id, [d.id]) if found else None).released
            elif not released:
                break
            for lane, id_, outputs in released:
                if outputs:
                    assert id_ not in emitter, f"{id_} emitted twice"
                    emitter[id_] = lane
        assert frontier.finished
        assert {i for i, lane in emitter.items() if lane == "b:asc"} == {i for i in exists if i >= 100}, seed
        assert {i for i, lane in emitter.items() if lane == "a:asc"} == {i for i in exists if i < 100}, seed


def test_emitted_items_take_the_emitting_target_and_nothing_else_changes() -> None:
    import dataclasses

    import scrapy

    from idcrawl.runtime import emitted_as

    class Page(scrapy.Item):
        target = scrapy.Field()
        id = scrapy.Field()

    @dataclasses.dataclass
    class Bare:
        id: int

    names = {"a": None, "b": None}
    outputs = [
        {"target": "a", "id": 7},  # the fetching lane's item of the id: relabelled
        {"target": "a", "id": 8},  # another id's item: left
        {"target": "mine", "id": 7},  # a spider's own field, no target of the job: left
        Page(target="a", id=7),
        Bare(7),  # no target field at all
        scrapy.Request("https://example.org/7"),
    ]
    emitted_as(outputs, "b", 7, names)
    assert [o["target"] for o in outputs[:4]] == ["b", "a", "mine", "b"]
    assert outputs[4] == Bare(7)


def test_released_outputs_of_a_lane_the_worker_never_joined_are_emitted_as_its_keys_target() -> None:
    """A worker adopting a stopped worker's unacknowledged outputs of a list lane it never joined (a settled
    ``<target>:due`` lane of a fleet) emits them, the lane named by its key (it raised KeyError)."""
    from types import SimpleNamespace

    from idcrawl.runtime import IdRuntime

    told: list[tuple[str, int]] = []
    frontier = SimpleNamespace(lane_target={}, targets={"a": None})
    worker = SimpleNamespace(released=lambda lane, id_, outputs: told.append((lane, id_)))
    runtime = SimpleNamespace(worker=worker, frontier=frontier)
    outputs = IdRuntime.emit_released(runtime, [("a:due", 7, [{"target": "a", "id": 7}])])  # type: ignore[arg-type]
    assert outputs == [{"target": "a", "id": 7}] and told == [("a:due", 7)]
