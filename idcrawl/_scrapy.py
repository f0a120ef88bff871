"""The Scrapy internals idcrawl relies on, in one place, for every Scrapy that ``pyproject.toml`` admits.

Scrapy has no public call for a few things idcrawl needs (wake the engine now,
schedule a coroutine without awaiting it, set a download slot's jitter). Each
is one small function here, in the spirit of Scrapy's own
``DownloaderInterface`` (``scrapy/pqueues.py``): callers never touch a private
Scrapy name themselves, and where Scrapy versions differ the difference is
handled here, by testing for the feature (never by comparing version numbers).

Supported: from the floor pinned in ``constraints-floor.txt`` (the same number
as ``pyproject.toml``'s ``scrapy>=``) to the latest release. ``make test``
runs ``tests/unit/test_scrapy_adapter.py`` and the crawl tests on both (README,
"Supported Scrapy versions"). What each function relies on, by version:

- :func:`wake_engine`: ``engine._slot.nextcall`` (``CallLaterOnce``), the
  call ``engine.crawl()`` itself makes; the same from 2.14 to 2.19.
- :func:`schedule_coro`: ``scrapy.utils.defer._schedule_coro``; the same from
  2.14 to 2.19.
- :func:`slot_jitter` and :func:`set_slot_delay`: Scrapy 2.19 gave download
  slots a ``jitter`` (a wait is drawn from ``delay * (1 +- jitter)``); before
  that a slot had a ``randomize_delay`` flag that means +-50%, and any other
  spread cannot be had: such a slot waits its mean, ``delay``, every time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.core.downloader import Slot
from scrapy.utils.defer import _schedule_coro

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from scrapy.crawler import Crawler

__all__ = ["SLOT_HAS_JITTER", "schedule_coro", "set_slot_delay", "slot_jitter", "wake_engine"]

#: Scrapy >= 2.19: ``Slot.jitter`` (a float); before, ``Slot.randomize_delay`` (a bool meaning +-50%).
SLOT_HAS_JITTER: bool = hasattr(Slot, "jitter")
_OLD_JITTER = 0.5  # what randomize_delay=True meant before 2.19


def wake_engine(crawler: Crawler | Any) -> None:
    """Ask the engine to call ``next_request()`` soon (no-op when no spider is open).

    Without it a lane freed by a late outcome, or a retry that fell due,
    would wait for the engine's 5 s heartbeat.
    """
    engine = getattr(crawler, "engine", None)
    slot = getattr(engine, "_slot", None)
    nextcall = getattr(slot, "nextcall", None)
    if nextcall is not None:
        nextcall.schedule()


def schedule_coro(coro: Coroutine[Any, Any, Any]) -> None:
    """Run a coroutine (``engine.close_spider_async(...)``) as a task of the running loop, not awaited."""
    _schedule_coro(coro)


def slot_jitter(slot: Any) -> float:
    """A download slot's jitter: its waits are drawn from ``delay * (1 +- jitter)``."""
    if SLOT_HAS_JITTER:
        return float(slot.jitter)
    return _OLD_JITTER if slot.randomize_delay else 0.0


def set_slot_delay(slot: Any, delay: float, jitter: float) -> None:
    """Make a download slot wait ``delay * (1 +- jitter)`` between requests.

    Before Scrapy 2.19 only a jitter of 0 or 0.5 exists; for any other the
    slot waits the mean, ``delay``, every time (never shorter than the
    shortest draw asked for).
    """
    slot.delay = delay
    if SLOT_HAS_JITTER:
        slot.jitter = jitter
    else:
        slot.randomize_delay = jitter == _OLD_JITTER
