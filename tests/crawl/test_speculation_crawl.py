"""Adaptive speculation and retries that never stall a lane, in real ``scrapy crawl`` runs.

No timing is measured: the waste past a cut is a count of the server's requests, and the retry
check is an order (the flaky id heals only once a later id was requested, which a stalled lane
cannot do).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from idcrawl.demo.site import Reply
from tests.conftest import GapModel
from tests.support.crawl import run_crawl
from tests.support.reference import lane_truth, target_truth

GAPS = {1152, 1160, 1161, 1170, 1171, 1172}  # runs shorter than the margin: the lanes end at the site's ends


class Jitter(GapModel):
    """Small per-id delays so that responses arrive out of id order."""

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        reply = super().reply(id_, host, nth)
        return Reply(reply.status, reply.body, reply.headers, (id_ * 7919 % 13) / 1000)


class HealsLater(GapModel):
    """``flaky`` answers 503 until an id at or past ``after`` was requested."""

    def __init__(self, low: int, high: int, *, flaky: int, after: int) -> None:
        super().__init__(low, high, set())
        self.flaky, self.after, self.healed = flaky, after, False

    def reply(self, id_: int, host: str, nth: int) -> Reply:
        if id_ >= self.after:
            self.healed = True
        if id_ == self.flaky and not self.healed:
            return Reply(503, b"busy")
        return super().reply(id_, host, nth)


@pytest.mark.parametrize("speculation", ["adaptive", "window"])
def test_requests_past_each_lane_end_are_at_most_the_margin(make_site, tmp_path: Path, speculation: str) -> None:
    model = Jitter(1100, 1199, GAPS)
    site = make_site(model)
    margin, concurrency = 4, 32
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 1150, "direction": "both", "margin": margin, "window": 64},
        {"CONCURRENT_REQUESTS": concurrency, "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency,
         "IDCRAWL_SPECULATION": speculation},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == target_truth(model.exists, 1150, "both", margin)
    requested = site.ids()
    assert max(Counter(requested).values()) == 1
    _, asc_cut = lane_truth(model.exists, 1150, 1, None, margin)
    _, desc_cut = lane_truth(model.exists, 1149, -1, None, margin)
    assert (asc_cut, desc_cut) == (1203, 1096)
    past = len([i for i in requested if i > 1203]) + len([i for i in requested if i < 1096])
    assert result.stats.get("idcrawl/past_cut", 0) == past
    if speculation == "adaptive":
        assert len([i for i in requested if i > 1203]) <= margin
        assert len([i for i in requested if i < 1096]) <= margin


def test_an_id_cooling_down_does_not_stall_its_lane(make_site, tmp_path: Path) -> None:
    """1003 answers 503 until 1020 was requested: more than a window (8) past it, so a lane whose
    window counted from 1003 could never get there (see the next test); the adaptive lane walks on
    past 1003 while it cools down (1004 is found: 1003 cannot change the cut)."""
    site = make_site(HealsLater(1000, 1099, flaky=1003, after=1020))
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 1000, "max": 1099, "margin": 5, "window": 8,
         "attempts": 10, "cooldown": 0.2, "backoff": 1.5},
        {"CONCURRENT_REQUESTS": 4, "CONCURRENT_REQUESTS_PER_DOMAIN": 4},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == list(range(1000, 1100))
    item = next(i for i in result.items if i["id"] == 1003)
    assert item["attempts"] >= 2
    assert result.stats.get("idcrawl/failed", 0) == 0


def test_with_a_fixed_window_the_same_id_holds_its_lane(make_site, tmp_path: Path) -> None:
    site = make_site(HealsLater(1000, 1099, flaky=1003, after=1020))
    result = run_crawl(
        tmp_path,
        {"url": site.url(), "start": 1000, "max": 1099, "margin": 5, "window": 8,
         "attempts": 3, "cooldown": 0.2, "backoff": 1.5},
        {"CONCURRENT_REQUESTS": 4, "CONCURRENT_REQUESTS_PER_DOMAIN": 4, "IDCRAWL_SPECULATION": "window"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.ids == [i for i in range(1000, 1100) if i != 1003]  # its attempts ran out before 1020
    assert result.stats["idcrawl/failed"] == 1
