"""The attempt rule: cool-down growth, jitter, Retry-After (core, no reactor)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from idcrawl.core.attempts import parse_retry_after, retry_delay
from idcrawl.core.delays import DelayQueue


def test_cooldown_grows_by_backoff_per_attempt() -> None:
    assert [retry_delay(k, cooldown=10, backoff=2) for k in (1, 2, 3)] == [10, 20, 40]


def test_backoff_1_keeps_the_cooldown_constant() -> None:
    assert {retry_delay(k, cooldown=3, backoff=1) for k in range(1, 6)} == {3}


@given(
    attempt=st.integers(1, 8),
    cooldown=st.floats(0, 100),
    backoff=st.floats(1, 4),
    jitter=st.floats(0, 1),
    seed=st.integers(0, 2**32),
)
def test_jitter_only_lengthens_the_wait(attempt: int, cooldown: float, backoff: float, jitter: float, seed: int) -> None:
    base = cooldown * backoff ** (attempt - 1)
    delay = retry_delay(attempt, cooldown=cooldown, backoff=backoff, jitter=jitter, rng=random.Random(seed))
    assert base <= delay <= base * (1 + jitter) + 1e-9


def test_retry_after_is_a_floor_not_a_ceiling() -> None:
    assert retry_delay(1, cooldown=1, backoff=2, retry_after=5) == 5
    assert retry_delay(3, cooldown=10, backoff=2, retry_after=5) == 40


def test_attempt_counts_from_one() -> None:
    with pytest.raises(ValueError, match="attempt counts from 1"):
        retry_delay(0, cooldown=1, backoff=1)


@pytest.mark.parametrize(("header", "seconds"), [("2", 2.0), (b"120", 120.0), (" 7 ", 7.0), ("0", 0.0)])
def test_retry_after_in_seconds(header: str | bytes, seconds: float) -> None:
    assert parse_retry_after(header, cap=600) == seconds


def test_retry_after_as_http_date() -> None:
    now = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
    header = format_datetime(now + timedelta(seconds=90), usegmt=True)
    assert parse_retry_after(header, now=now, cap=600) == 90.0


def test_retry_after_in_the_past_means_now() -> None:
    now = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after(format_datetime(now - timedelta(hours=1), usegmt=True), now=now, cap=600) == 0.0


def test_retry_after_is_capped() -> None:
    assert parse_retry_after("86400", cap=600) == 600


@pytest.mark.parametrize("header", [None, "", "soon", "-5", "1.5", "Thu, 99 Foo 2026", b"\xff\xfe"])
def test_garbage_retry_after_is_ignored(header: str | bytes | None) -> None:
    assert parse_retry_after(header, cap=600) is None


def test_delay_queue_releases_by_due_time_then_arrival() -> None:
    queue: DelayQueue[str] = DelayQueue()
    queue.push(5.0, "late")
    queue.push(1.0, "first")
    queue.push(1.0, "second")
    assert queue.next_due() == 1.0
    assert queue.pop_due(0.5) is None
    assert [queue.pop_due(1.0), queue.pop_due(1.0), queue.pop_due(1.0)] == ["first", "second", None]
    assert len(queue) == 1 and queue.pop_due(10) == "late" and queue.next_due() is None
