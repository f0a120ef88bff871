"""``IdPoliteness``: per-host gaps that grow with the host's response time.

The rule is :mod:`idcrawl.core.politeness`'s; this extension applies it to Scrapy's download slots on
signals, shaped like AutoThrottle (``NotConfigured`` when off). What a user sees: docs/politeness.md;
how the slots are adopted: docs/architecture.md ("Module notes"); stats: docs/reference/stats.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured

from idcrawl._scrapy import download_slot, set_slot_delay, slot_jitter, slots_sequential
from idcrawl.config import config_of
from idcrawl.core.politeness import PolitenessError, PolitenessRule, lengthen_only
from idcrawl.errors import BadInputError
from idcrawl.runtime import STATS_PREFIX

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.core.downloader import Slot
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = ["IdPoliteness"]

logger = logging.getLogger(__name__)

PREFIX = f"{STATS_PREFIX}/politeness"
_SETTING_OF_FIELD = {
    "factor": "IDCRAWL_POLITENESS_FACTOR",
    "min_delay": "IDCRAWL_POLITENESS_MIN_DELAY",
    "max_delay": "IDCRAWL_POLITENESS_MAX_DELAY",
}


@dataclass(slots=True, eq=False)
class _SlotState:
    slot: Slot
    floor: float  # the slot's own delay, before adoption
    jitter: float  # the slot's own jitter, before adoption
    gap: float = 0.0  # the least gap now in force
    max_gap: float = 0.0


class IdPoliteness:
    def __init__(self, crawler: Crawler, rule: PolitenessRule) -> None:
        self.crawler = crawler
        self.rule = rule
        self._states: dict[str, _SlotState] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IdPoliteness:
        config = config_of(crawler)
        values = {
            "factor": config.politeness_factor,
            "min_delay": config.politeness_min_delay,
            "max_delay": config.politeness_max_delay,
        }
        if values["factor"] == 0:
            raise NotConfigured
        try:
            rule = PolitenessRule(**values)
        except PolitenessError as exc:
            setting = _SETTING_OF_FIELD[exc.field]
            reason = exc.reason
            for field, name in _SETTING_OF_FIELD.items():
                reason = reason.replace(field, name)
            raise BadInputError(f"bad setting: {setting}={exc.value!r}: {reason}") from None
        if crawler.settings.getbool("AUTOTHROTTLE_ENABLED"):
            # both would set the same slot delays on the same signal, in extension order
            raise BadInputError(
                f"bad setting: IDCRAWL_POLITENESS_FACTOR={rule.factor!r} with AUTOTHROTTLE_ENABLED=True: "
                "both set each slot's download delay; turn one off (politeness is on by default: "
                "IDCRAWL_POLITENESS_FACTOR=0 leaves the delays to AutoThrottle)"
            )
        ext = cls(crawler, rule)
        crawler.signals.connect(ext._spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(ext._reached_downloader, signal=signals.request_reached_downloader)
        crawler.signals.connect(ext._response_downloaded, signal=signals.response_downloaded)
        return ext

    def _spider_opened(self, spider: Any = None) -> None:
        # new slots take one request at a time from the start: before a host's first request reaches
        # its slot (robots.txt first) the scheduler hands it no more than that one
        if self.crawler.engine is not None:
            slots_sequential(self.crawler)
        if self.crawler.stats is not None:
            self.crawler.stats.set_value(f"{PREFIX}/capped", 0)
        rule = self.rule
        logger.info(
            "idcrawl politeness: per-host gap >= max(slot delay, %g x last fetch), clamped to [%g, %g] s; "
            "one request at a time per slot",
            rule.factor, rule.min_delay, rule.max_delay,
        )

    # -- slots ----------------------------------------------------------------------

    def first_gap(self, key: str, floor: float) -> float:
        """The gap slot ``key`` will have once adopted, for a request that makes the slot (its first, or
        the first after Scrapy's slot GC): the last known gap, else the rule's gap with no fetch yet."""
        state = self._states.get(key)
        return max(state.gap, floor) if state is not None else self.rule.gap(None, floor)

    def _slot_of(self, request: Request) -> tuple[str, Slot] | None:
        key = request.meta.get("download_slot")
        if key is None:
            return None
        slot = download_slot(self.crawler, key)
        return (key, slot) if slot is not None else None

    def _adopt(self, key: str, slot: Slot) -> _SlotState:
        """Take over a slot the first time it is seen (again after Scrapy's slot GC recreated it)."""
        state = self._states.get(key)
        if state is not None and state.slot is slot:
            return state
        floor, jitter = slot.delay, slot_jitter(slot)
        if state is None:
            state = self._states[key] = _SlotState(slot, floor, jitter)
            state.gap = self.rule.gap(None, floor)
        else:  # recreated: its own settings again, the last known gap still holds
            state.slot, state.floor, state.jitter = slot, floor, jitter
            state.gap = max(state.gap, floor)
        slot.concurrency = 1
        self._apply(key, state)
        return state

    def _apply(self, key: str, state: _SlotState) -> None:
        set_slot_delay(state.slot, *lengthen_only(state.gap, state.jitter))
        state.max_gap = max(state.max_gap, state.gap)
        # kept current as it changes: other spider_closed listeners (stats exporters) may run first
        stats = self.crawler.stats
        if stats is not None:
            stats.set_value(f"{PREFIX}/slots/{key}/delay", round(state.gap, 6))
            stats.max_value(f"{PREFIX}/slots/{key}/max_delay", round(state.max_gap, 6))
            stats.max_value(f"{PREFIX}/max_delay", round(state.max_gap, 6))

    # -- signals ----------------------------------------------------------------------

    def _reached_downloader(self, request: Request, spider: Any = None) -> None:
        found = self._slot_of(request)
        if found is not None:
            self._adopt(*found)

    def _response_downloaded(self, response: Response, request: Request, spider: Any = None) -> None:
        latency = request.meta.get("download_latency")
        found = self._slot_of(request)
        if latency is None or found is None:
            return
        key, slot = found
        state = self._adopt(key, slot)
        state.gap = self.rule.gap(latency, state.floor)
        stats = self.crawler.stats
        if stats is not None:
            stats.inc_value(f"{PREFIX}/slots/{key}/fetches")
            if self.rule.capped(latency, state.floor):
                stats.inc_value(f"{PREFIX}/capped")
        self._apply(key, state)
        if slot.latercall is not None:
            # A request already queued in the slot waits on a timer drawn from the previous
            # gap, and Scrapy keeps such a timer even when the delay drops. Dropping it is
            # safe: right after this signal the downloader re-runs the slot's queue (the
            # order AutoThrottle relies on too), which waits again with the new gap.
            slot.latercall.cancel()
            slot.latercall = None
        logger.debug(
            "idcrawl politeness: slot %s: fetch took %.3f s, next gap >= %.3f s", key, latency, state.gap
        )
