"""Watch waves that scale (issue 31, finding 2): a wave takes what falls due within its coalescing
window and the pages it fetches share its time, so pages due close together make few waves.

The wave loop of ``idcrawl.extensions.watch`` on the core alone: a :class:`PageBook` on an injected
fixed clock, :func:`next_wave_at` for the wake-up, every page unchanged (a 304) at each visit.
"""

from __future__ import annotations

import random

import pytest

from idcrawl.core.clock import Clock
from idcrawl.core.pagebook import PageBook
from idcrawl.core.recrawl import Fetch, Kind, Outcome, Policy, Schedule
from idcrawl.core.watch import NO_COALESCING, Coalescing, next_wave_at

T0 = 1_768_201_200.0  # 2026-01-12T07:00:00Z


def waves(pages: int, coalescing: Coalescing, until: float, seed: int = 7) -> tuple[int, int]:
    """Run the watch loop over ``pages`` pages last crawled within the 30 s before ``T0`` (due within the 22 s before it and the 8 s after it) (initial 8 s,
    min 5 s: finding 2's site), to ``until`` seconds after the first wave: (waves, fetches)."""
    rng = random.Random(seed)
    policy = Policy(initial_duration=8.0, min_duration=5.0, max_duration=600.0)
    clock = Clock(T0)
    book = PageBook(clock, {"reg": policy})
    book.coalescing = coalescing
    book.load("reg", {id_: Schedule(Kind.PAGE, f"reg/{id_}", T0 - 30 + rng.uniform(0, 30), 8.0, checksum="c")
                      for id_ in range(pages)})
    count = fetches = 0
    at: float | None = T0  # the first wave: the run itself
    first = at
    while at is not None and first is not None and at <= first + until:
        clock.set(at)
        book.wave_at = at
        due = book.due_ids("reg")
        assert due, "a wave wakes for something due"
        for id_ in due:
            book.visit("reg", id_, Fetch(Outcome.NOT_MODIFIED))
        count, fetches = count + 1, fetches + len(due)
        at = next_wave_at([], at, pages=[min(s.due_at() for s in book.schedules["reg"].values())])
    return count, fetches


def test_pages_due_close_together_share_few_waves() -> None:
    """54 pages due within 30 s of each other: without a window, the first wave takes those due and
    each later one wakes a wave of its own (finding 2: 92 waves in 30 s on the real clock); with the
    default window (a minute at least) the first wave takes them all, and as they share its time,
    every later wave takes all 54 again: a tenth of the waves over an hour, the same fetches."""
    alone, _ = waves(54, NO_COALESCING, until=30)
    assert alone >= 15
    together, fetched = waves(54, Coalescing(), until=30)
    assert (together, fetched) == (2, 2 * 54)
    hour_alone, fetched_alone = waves(54, NO_COALESCING, until=3600)
    hour, fetched = waves(54, Coalescing(), until=3600)
    assert fetched == 54 * hour == fetched_alone and 10 * hour <= hour_alone


@pytest.mark.parametrize(("duration", "window"), [(10.0, 60.0), (3600.0, 180.0), (86_400.0, 3600.0),
                                                  (365 * 86_400.0, 3600.0)])
def test_the_window_is_a_minute_or_a_share_of_the_duration_capped(duration: float, window: float) -> None:
    rule = Coalescing()
    assert rule.window(duration) == window and rule.widest == 3600.0
    page = Schedule(Kind.PAGE, "reg/1", T0, duration)
    assert rule.due(page, T0 + duration - window + 0.001) and not rule.due(page, T0 + duration - window)
    assert not NO_COALESCING.due(page, T0 + duration) and NO_COALESCING.due(page, T0 + duration + 0.001)
