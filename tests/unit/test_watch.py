"""Watch mode's rule (``idcrawl.core.watch``): when the next wave starts, the sleep, the watched targets."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idcrawl.core.inputs import TargetError
from idcrawl.core.recrawl import Kind, Schedule, due
from idcrawl.core.targets import parse_target
from idcrawl.core.watch import TICK, late_times, next_wave_at, parse_watch, real_sleep, watch_targets, wave_key
from tests.support.reference import watch_visits_truth


def tail(key: str, last_crawled: float, duration: float) -> Schedule:
    return Schedule(Kind.TAIL, key, last_crawled, duration)


def test_the_next_wave_is_a_tick_after_the_earliest_due_time_not_yet_passed() -> None:
    schedules = [tail("a", 100.0, 50.0), tail("b", 0.0, 120.0), tail("c", 10.0, 20.0)]
    # c is due already (a limit stopped its walk, say): not waited for; b falls due first after 120
    assert next_wave_at(schedules, 121.0) == 150.0 + TICK
    assert next_wave_at(schedules, 100.0) == 120.0 + TICK
    assert next_wave_at(schedules, 120.0) == 120.0 + TICK  # due_at == now is not due yet (strict)
    at = next_wave_at(schedules, 100.0)
    assert at is not None and due(schedules[1], at) and not due(schedules[1], at - TICK)
    assert next_wave_at(schedules, 151.0) is None  # all due: nothing left to wait for
    assert next_wave_at([], 0.0) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**9), st.integers(60_000, 365 * 86_400_000)), min_size=1, max_size=6),
       st.integers(0, 10**9), st.permutations(range(6)))
def test_a_fleets_workers_name_a_wave_alike_whatever_order_they_read_the_schedules_in(
    records: list[tuple[int, int]], now_ms: int, order: Sequence[int]
) -> None:
    """Every worker of a watching fleet computes the wave's key from the same schedules (read from Redis,
    in any order) at the same fixed clock: the same key, the wave's time in whole milliseconds."""
    schedules = [tail(str(n), last / 1000, duration / 1000) for n, (last, duration) in enumerate(records)]
    shuffled = [schedules[i] for i in order if i < len(schedules)]
    now = now_ms / 1000
    first, second = next_wave_at(schedules, now), next_wave_at(shuffled, now)
    assert first == second
    if first is not None:
        assert wave_key(first) == wave_key(second or 0) == round(first * 1000)
        assert abs(wave_key(first) / 1000 - first) <= 0.0005


def test_found_pages_wake_as_tails_do_and_a_next_harvest_at_its_own_time() -> None:
    tails = [tail("a", 0.0, 100.0)]
    # a page falling due before the tail wakes a wave a tick after its due time
    assert next_wave_at(tails, 10.0, pages=[50.0]) == 50.0 + TICK
    assert next_wave_at(tails, 10.0, pages=[150.0, None]) == 100.0 + TICK
    assert next_wave_at(tails, 60.0, pages=[50.0]) == 100.0 + TICK  # still due after the wave: not waited for
    assert next_wave_at([], 10.0, pages=[None]) is None
    # a URL's next harvest is due from that moment on (not strictly after): the wave is at it
    assert next_wave_at(tails, 10.0, harvests=[40.0]) == 40.0
    assert next_wave_at([], 10.0, harvests=[10.0]) == 10.0 + TICK  # came at the wave's end: at once
    assert next_wave_at([], 10.0, harvests=[5.0]) == 10.0 + TICK
    assert next_wave_at(tails, 10.0, pages=[30.0], harvests=[30.0]) == 30.0


def test_the_sleep_is_scaled_by_the_speed_and_never_negative() -> None:
    assert real_sleep(86_400.0 + 10, 10.0, 86_400) == 1.0
    assert real_sleep(70.0, 10.0) == 60.0
    assert real_sleep(5.0, 10.0, 2.0) == 0.0
    with pytest.raises(ValueError, match="speed must be > 0"):
        real_sleep(1.0, 0.0, 0.0)


def test_watched_targets_resume_due_and_other_modes_are_refused_in_one_line() -> None:
    plain = parse_target({"url": "http://x/{id}", "start": 1, "name": "a"})
    due_one = parse_target({"url": "http://x/{id}", "start": 1, "name": "b", "resume": "due"})
    assert [t.resume for t in watch_targets([plain, due_one])] == ["due", "due"]
    bound = parse_target({"url": "http://x/{id}", "start": 1, "name": "c", "resume": "bound"})
    with pytest.raises(TargetError) as error:
        watch_targets([plain, bound])
    assert str(error.value) == (
        "target 'c': resume='bound': watch=true runs resume=due waves (leave resume unset or give due)")
    reset = parse_target({"url": "http://x/{id}", "start": 1, "name": "d", "resume": "reset"})
    with pytest.raises(TargetError) as error:
        watch_targets([reset])
    assert str(error.value) == (
        "target 'd': resume='reset': watch=true runs resume=due waves (leave resume unset or give due; to start "
        "over, run once with resume=reset and without watch first)")


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("Yes", True), ("1", True), (True, True),
                                                 ("false", False), ("0", False), ("", False), (False, False)])
def test_the_watch_argument_is_a_switch(value: object, expected: bool) -> None:
    assert parse_watch(value) is expected


def test_a_bad_watch_argument_is_one_line() -> None:
    with pytest.raises(TargetError) as error:
        parse_watch("maybe")
    assert str(error.value) == "watch='maybe': must be true or false"


def watch_visits(things: dict[str, tuple[int, Sequence[int]]], start: int, horizon: int,
                 harvests: dict[str, tuple[int, Sequence[int]]] | None = None) -> list[tuple[int, str]]:
    """The waves of a watch (``next_wave_at``, what is ``due`` at each) on a fixed clock counting
    ticks (integer times, ``tick=1``: exact arithmetic, the ticks the reference's milliseconds).
    Things named ``p``..``r`` are found pages (the earliest due time given as ``pages``); ``harvests``
    are crawl scope's URLs (last harvest + revisit, due from then on, given as ``harvests``)."""
    harvests = harvests or {}
    schedules = {name: tail(name, first, durations[0]) for name, (first, durations) in things.items()}
    next_harvest = {name: first + revisits[0] for name, (first, revisits) in harvests.items()}
    visits_of = dict.fromkeys([*things, *harvests], 0)
    visits: list[tuple[int, str]] = []
    now: float | None = start
    while now is not None and now <= horizon:
        for name in sorted([*schedules, *harvests]):
            if name in harvests:
                if next_harvest[name] <= now:
                    visits.append((int(now), name))
                    visits_of[name] += 1
                    revisits = harvests[name][1]
                    next_harvest[name] = now + revisits[min(visits_of[name], len(revisits) - 1)]
            elif due(schedules[name], now):
                visits.append((int(now), name))
                visits_of[name] += 1
                durations = things[name][1]
                schedules[name] = tail(name, now, durations[min(visits_of[name], len(durations) - 1)])
        pages = [s.due_at() for name, s in schedules.items() if name in "pqr" and s.due_at() >= now]
        now = next_wave_at([s for name, s in schedules.items() if name not in "pqr"], now, tick=1,
                           pages=[min(pages, default=None)], harvests=[min(next_harvest.values(), default=None)])
    return visits


thing = st.tuples(st.integers(0, 60), st.lists(st.integers(1, 40), min_size=1, max_size=6))


@settings(max_examples=300, derandomize=True, deadline=None)
@given(things=st.dictionaries(st.sampled_from("abcd"), thing, min_size=1), start=st.integers(0, 100))
def test_waves_visit_everything_exactly_when_a_timer_firing_every_millisecond_would(
    things: dict[str, tuple[int, list[int]]], start: int
) -> None:
    """Watch mode loses nothing against an infinitely frequent timer: each thing is visited in the
    first millisecond it is due, never earlier, never twice for one falling due."""
    horizon = 400
    assert watch_visits(things, start, horizon) == watch_visits_truth(things, start, horizon)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(things=st.dictionaries(st.sampled_from("abpq"), thing, min_size=1),
       harvests=st.dictionaries(st.sampled_from("uv"), thing), start=st.integers(0, 100))
def test_waves_woken_by_tails_pages_and_next_harvests_visit_each_when_the_timer_would(
    things: dict[str, tuple[int, list[int]]], harvests: dict[str, tuple[int, list[int]]], start: int
) -> None:
    """Found pages (given as each target's earliest due time) and crawl scope's next harvests wake
    waves too: nothing waits for a later wave, nothing is visited early or twice."""
    horizon = 400
    assert watch_visits(things, start, horizon, harvests) == watch_visits_truth(things, start, horizon, harvests)


def test_at_epoch_times_the_wave_finds_the_thing_due_and_a_tick_earlier_it_is_not() -> None:
    """With real epoch times (float spacing ~2.4e-7 s near 2026) the tick is ample: the wave's time
    finds the earliest thing due, and the time a tick before it does not."""
    t0 = 1_768_201_200.0  # 2026-01-12T07:00:00Z
    for k, duration in enumerate([60.0, 86_400.0, 0.8 * 86_400, 3_600.0 * 1.8 ** 5, 31_536_000.0]):
        schedule = tail("a", t0 + k * 0.001, duration)
        at = next_wave_at([schedule], schedule.last_crawled)
        assert at is not None and due(schedule, at) and not due(schedule, at - TICK), duration


def test_a_re_probe_of_late_ids_wakes_a_wave_late_every_after_the_last_one() -> None:
    """``late_times``: a re-probed tail's next re-probe time; none for a tail never re-probed, without
    ``late_every``, or not ``resume=due`` (the watch passes them as pages' due times: a tick later)."""
    late = parse_target({"url": "http://x/{id}", "start": 1, "name": "a", "resume": "due", "late_every": "6h"})
    off = parse_target({"url": "http://x/{id}", "start": 1, "name": "b", "resume": "due"})
    never = parse_target({"url": "http://x/{id}", "start": 1, "name": "c", "resume": "due", "late_every": "1h"})
    tails = [Schedule(Kind.TAIL, "a", 0.0, 86400.0, last_found=9, late_at=100.0),
             Schedule(Kind.TAIL, "b", 0.0, 86400.0, last_found=9, late_at=100.0),
             Schedule(Kind.TAIL, "c", 0.0, 86400.0, last_found=9)]
    assert late_times([late, off, never], tails) == [100.0 + 6 * 3600]
    assert next_wave_at(tails, 200.0, pages=late_times([late], tails)) == 100.0 + 6 * 3600 + TICK
