"""Attempts: when to try a failed id again.

Pure functions, so that the downloader middleware, spiders and tests share
one rule (the shape of Scrapy's ``get_retry_request``): the k-th retry of an
id waits ``cooldown * backoff**(k-1)``, varied by ``jitter`` (a fraction),
and never less than what a ``Retry-After`` header asks, capped.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["parse_retry_after", "retry_delay"]


def retry_delay(
    attempt: int,
    *,
    cooldown: float,
    backoff: float,
    jitter: float = 0.0,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait before attempt ``attempt + 1``, after attempt ``attempt`` failed.

    ``attempt`` counts from 1 (the first try). Jitter only ever lengthens the
    wait, so the documented minimum ``cooldown * backoff**(attempt-1)`` holds.
    """
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, not {attempt!r}")
    base = cooldown * backoff ** (attempt - 1)
    if jitter > 0:
        base *= 1.0 + (rng or random).uniform(0.0, jitter)
    if retry_after is not None:
        base = max(base, retry_after)
    return base


def parse_retry_after(value: str | bytes | None, *, now: datetime | None = None, cap: float) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta seconds or HTTP date), capped.

    Garbage gives None: a header is a hint from the server, never a reason to fail.
    """
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if not text:
        return None
    if text.isdigit():
        seconds = float(int(text))
    else:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(seconds, 0.0), cap)
