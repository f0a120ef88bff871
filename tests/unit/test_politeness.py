"""Per-host politeness: the gap rule (real crawls: tests/crawl/test_politeness_crawl.py)."""

from __future__ import annotations

import math
import random

import pytest

from idcrawl.core.politeness import PolitenessError, PolitenessRule, lengthen_only

# -- the rule -------------------------------------------------------------------------


def test_gap_is_factor_times_latency_inside_the_clamps() -> None:
    rule = PolitenessRule(5, min_delay=3, max_delay=30)  # Heritrix's defaults
    assert rule.gap(1.0) == 5.0
    assert rule.gap(0.1) == 3.0  # min clamp
    assert rule.gap(10.0) == 30.0  # max clamp
    assert rule.capped(10.0) and not rule.capped(1.0) and not rule.capped(0.1)
    assert PolitenessRule(10).gap(0.25) == 2.5  # Mercator


def test_the_slot_delay_is_a_floor_that_the_max_clamp_does_not_shorten() -> None:
    rule = PolitenessRule(5, min_delay=0, max_delay=2)
    assert rule.gap(0.1, floor=1.0) == 1.0  # DOWNLOAD_DELAY above factor x latency
    assert rule.gap(0.5, floor=1.0) == 2.0
    assert rule.gap(0.5, floor=4.0) == 4.0  # an explicit delay above max_delay holds
    assert not rule.capped(0.5, floor=4.0)


def test_unknown_latency_gives_the_clamps_and_the_floor() -> None:
    rule = PolitenessRule(5, min_delay=0.5, max_delay=2)
    for latency in (None, 0.0, -1.0, math.nan, math.inf):
        assert rule.gap(latency) in (0.5, 2.0)
    assert rule.gap(None) == 0.5
    assert rule.gap(None, floor=0.7) == 0.7


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"factor": -1}, "factor"),
        ({"factor": math.nan}, "factor"),
        ({"factor": 5, "min_delay": -0.1}, "min_delay"),
        ({"factor": 5, "min_delay": 3, "max_delay": 2}, "max_delay"),
    ],
)
def test_bad_parameters_name_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(PolitenessError) as info:
        PolitenessRule(**kwargs)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}=")


@pytest.mark.parametrize("jitter", [0.0, 0.1, 0.5, 1.0, 2.0])
def test_jitter_only_lengthens_the_gap(jitter: float) -> None:
    gap = 0.8
    delay, slot_jitter = lengthen_only(gap, jitter)
    # Scrapy's draw: delay * (1 + uniform(-jitter, jitter)), floored at 0
    low, high = delay * (1 - slot_jitter), delay * (1 + slot_jitter)
    assert low == pytest.approx(gap)
    assert high == pytest.approx(gap * (1 + jitter))
    assert 0 <= slot_jitter < 1
    rng = random.Random(1)
    draws = [delay * (1 + rng.uniform(-slot_jitter, slot_jitter)) for _ in range(1000)]
    assert min(draws) >= gap - 1e-12


def test_no_gap_means_no_jitter() -> None:
    assert lengthen_only(0.0, 0.5) == (0.0, 0.0)
    assert lengthen_only(1.0, math.nan) == (1.0, 0.0)
