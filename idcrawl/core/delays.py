"""A delay queue: items held until a due time, earliest first.

The scheduler keeps retries here while they cool down, so that waiting costs
nothing: other ids and lanes keep flowing, and no request sleeps.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Generic, TypeVar

__all__ = ["DelayQueue"]

T = TypeVar("T")


class DelayQueue(Generic[T]):
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, T]] = []
        self._seq = itertools.count()  # equal due times keep arrival order

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, due: float, item: T) -> None:
        heapq.heappush(self._heap, (due, next(self._seq), item))

    def next_due(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> T | None:
        """The earliest item whose due time has come, or None."""
        if self._heap and self._heap[0][0] <= now:
            return heapq.heappop(self._heap)[2]
        return None
