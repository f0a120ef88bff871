"""Which download slot serves a host: one cache per crawl, shared by the scheduler and the job limits."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from scrapy import Request

from idcrawl._scrapy import slot_key

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["HostSlots", "host_slots"]


class HostSlots:
    """Host -> the key of the downloader slot that serves it (hostname, or IP with PER_IP)."""

    def __init__(self, crawler: Crawler) -> None:
        self._crawler = weakref.ref(crawler)  # the crawl's registry holds this object, keyed by the crawler
        self._slots: dict[str, str] = {}

    def of(self, host: str) -> str:
        """The slot of ``host`` (needs the engine the first time a host is asked for)."""
        key = self._slots.get(host)
        if key is None:
            crawler = self._crawler()
            assert crawler is not None
            key = self._slots[host] = str(slot_key(crawler, Request(f"http://{host}/")))
        return key

    def known(self, host: str) -> str | None:
        """The slot of ``host`` if it was asked for already, else None."""
        return self._slots.get(host)


_SLOTS: weakref.WeakKeyDictionary[Crawler, HostSlots] = weakref.WeakKeyDictionary()


def host_slots(crawler: Crawler) -> HostSlots:
    """The one host-to-slot cache of ``crawler``'s crawl."""
    slots = _SLOTS.get(crawler)
    if slots is None:
        slots = _SLOTS[crawler] = HostSlots(crawler)
    return slots
