"""The scheduler's wake-ups for a host in its gap: one per gap, however often the host is asked."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from scrapy.core.downloader import Slot

from idcrawl import _scrapy
from idcrawl.scheduler import IdScheduler


def _scheduler(slot: Slot, wakes: list[float]) -> Any:
    downloader = SimpleNamespace(slots={"h": slot}, domain_concurrency=8, active={object(), object()},
                                 total_concurrency=4)  # half full: crowded
    scheduler: Any = IdScheduler.__new__(IdScheduler)
    scheduler.crawler = SimpleNamespace(engine=SimpleNamespace(downloader=downloader))
    scheduler._slots = SimpleNamespace(of=lambda host: host)
    scheduler._entering = {}
    scheduler._armed = {}
    scheduler.runtime = SimpleNamespace(wake_at=wakes.append, limiter=None,
                                        worker=SimpleNamespace(politeness_gate=lambda: None))
    return scheduler


def test_a_host_asked_again_in_its_gap_arms_no_new_wake_up() -> None:
    slot = Slot(1, 30.0, 0.0) if _scrapy.SLOT_HAS_JITTER else Slot(1, 30.0, False)
    slot.lastseen = _scrapy.SLOT_CLOCK()  # a request just left: 30 s of gap
    wakes: list[float] = []
    scheduler = _scheduler(slot, wakes)
    assert [scheduler._group_ready("h") for _ in range(1000)] == [False] * 1000
    assert len(wakes) == 1  # not one per refusal
    slot.lastseen -= 31  # the gap has run: ready, and the next gap arms its own wake-up
    assert scheduler._group_ready("h") is True
    slot.lastseen = _scrapy.SLOT_CLOCK()
    assert scheduler._group_ready("h") is False
    assert len(wakes) == 2
