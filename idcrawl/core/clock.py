"""One clock for every time idcrawl records or compares (recrawl due times, ``fetched_at``, the recorder).

``IDCRAWL_NOW`` unset (or empty) is the real clock; an ISO 8601 time fixes it,
so a test (or ``iddue --at``) sees the same "now" everywhere. A fixed clock
moves only when told (:meth:`Clock.advance`, :meth:`Clock.set`): no test sleeps
through simulated days. Times are seconds since the Unix epoch (UTC).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

__all__ = ["Clock", "ClockError", "format_time", "parse_time", "stamp"]


class ClockError(ValueError):
    """A time that is not ISO 8601; ``str(error)`` is one line naming the value."""


def parse_time(value: Any, field: str = "IDCRAWL_NOW") -> float:
    """Seconds since the epoch for an ISO 8601 time (``2026-01-12T07:00:00Z``, ``2026-01-12 07:00+01:00``,
    ``2026-01-12``); a time without an offset is UTC. Anything else raises :class:`ClockError`."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value.strip() and "\x00" not in value:
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ClockError(f"{field}={value!r}: must be an ISO 8601 time such as 2026-01-12T07:00:00Z") from None
    else:
        raise ClockError(f"{field}={value!r}: must be an ISO 8601 time such as 2026-01-12T07:00:00Z")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def format_time(seconds: float) -> str:
    """The ISO 8601 UTC form of an epoch time (``2026-01-12T07:00:00Z``)."""
    text = datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
    return text


def stamp(seconds: float) -> str:
    """The ISO 8601 UTC form with milliseconds, as items' ``fetched_at`` and run records show it
    (``2026-01-12T07:00:00.000Z``).

    Every item is stamped, so the text of each second is made once: the digits are those of
    ``datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")``, which rounds the
    fraction to microseconds half to even (a carry goes to the second) and then cuts it to
    milliseconds (``tests/unit/test_recrawl.py`` compares the two on random times).
    """
    if not 0 <= seconds < 253402300800:  # before 1970 or after 9999: the datetime way
        return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    fraction, whole = math.modf(seconds)
    micro = round(fraction * 1e6)
    if micro >= 1_000_000:
        micro -= 1_000_000
        whole += 1.0
    second = int(whole)
    text = _SECONDS.get(second)
    if text is None:
        if len(_SECONDS) >= 4096:
            _SECONDS.clear()
        text = _SECONDS[second] = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
    return f"{text}{micro // 1000:03d}Z"


_SECONDS: dict[int, str] = {}  # stamp's text of a whole second


class Clock:
    """``now()`` in epoch seconds: the real clock, or a fixed one that moves only when told."""

    __slots__ = ("_fixed", "_real")

    def __init__(self, fixed: float | None = None, *, real: Callable[[], float] = time.time) -> None:
        self._fixed = fixed
        self._real = real

    @classmethod
    def from_setting(cls, value: Any) -> Clock:
        """The clock ``IDCRAWL_NOW`` asks for: None or an empty string = real, an ISO 8601 time = fixed there."""
        if value is None or (isinstance(value, str) and not value.strip()):
            return cls()
        return cls(parse_time(value))

    @property
    def fixed(self) -> bool:
        return self._fixed is not None

    def now(self) -> float:
        return self._real() if self._fixed is None else self._fixed

    def stamp(self) -> str:
        """``now()`` as :func:`stamp` writes it (``fetched_at``, the runs' start and end)."""
        return stamp(self.now())

    def set(self, seconds: float) -> None:
        """Fix the clock at ``seconds`` (a real clock becomes a fixed one)."""
        self._fixed = float(seconds)

    def advance(self, seconds: float) -> float:
        """Move a fixed clock forward by ``seconds`` (>= 0) and return the new time."""
        if self._fixed is None:
            raise ValueError("only a fixed clock can be advanced")
        if seconds < 0:
            raise ValueError(f"a clock does not go back ({seconds})")
        self._fixed += seconds
        return self._fixed

    def __repr__(self) -> str:
        return "Clock(real)" if self._fixed is None else f"Clock({format_time(self._fixed)})"
