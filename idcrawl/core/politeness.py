"""Politeness: how long to wait between two requests to one host (docs/politeness.md).

``gap = max(floor, clamp(factor * latency, min_delay, max_delay))``: pure functions, no Scrapy;
:mod:`idcrawl.extensions.politeness` applies them to Scrapy's download slots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["PolitenessError", "PolitenessRule", "lengthen_only"]


class PolitenessError(ValueError):
    """A bad parameter of the rule: names the field and the value."""

    def __init__(self, field: str, value: float, reason: str) -> None:
        super().__init__(f"{field}={value!r}: {reason}")
        self.field, self.value, self.reason = field, value, reason


@dataclass(frozen=True, slots=True)
class PolitenessRule:
    """``factor`` x the last fetch's duration, clamped to ``[min_delay, max_delay]`` (seconds)."""

    factor: float
    min_delay: float = 0.0
    max_delay: float = 30.0

    def __post_init__(self) -> None:
        for name in ("factor", "min_delay", "max_delay"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise PolitenessError(name, value, "must be a finite number >= 0")
        if self.max_delay < self.min_delay:
            raise PolitenessError("max_delay", self.max_delay, f"must be >= min_delay ({self.min_delay!r})")

    def gap(self, latency: float | None, floor: float = 0.0) -> float:
        """The least gap, in seconds, before the next request to a host.

        ``latency`` is how long the last fetch from the host took (None or
        garbage when unknown: only the clamps and the floor apply).
        """
        wanted = self.factor * latency if latency is not None and math.isfinite(latency) and latency > 0 else 0.0
        return max(floor, min(max(wanted, self.min_delay), self.max_delay))

    def capped(self, latency: float | None, floor: float = 0.0) -> bool:
        """Whether ``max_delay`` made the gap shorter than ``factor`` x ``latency``."""
        if latency is None or not math.isfinite(latency):
            return False
        return self.gap(latency, floor) < self.factor * latency


def lengthen_only(gap: float, jitter: float) -> tuple[float, float]:
    """A (delay, jitter) pair for a symmetric jitter whose *shortest* gap is ``gap``.

    Scrapy draws each wait from ``delay * (1 +- jitter)``. With
    ``delay = gap * (1 + jitter/2)`` and ``jitter' = jitter / (2 + jitter)``
    the draws fall in ``[gap, gap * (1 + jitter)]``: the same spread,
    ``jitter * gap``, moved up so that it only ever lengthens the gap.
    """
    if not math.isfinite(jitter) or jitter <= 0 or gap <= 0:
        return gap, 0.0
    return gap * (1.0 + jitter / 2.0), jitter / (2.0 + jitter)
