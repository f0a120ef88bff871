"""The schedule records of found pages during a crawl: what each revisit means.

A :class:`PageBook` holds every found page's record, the validators a revisit sends, what each fetch
means (:class:`PageEvent`), the ids due and the records changed since the last commit. No Scrapy
imports. docs/recrawl.md ("Found pages: conditional revisits").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import Protocol

from idcrawl.core.clock import Clock
from idcrawl.core.recrawl import (
    DEFAULT_POLICY,
    Fetch,
    Kind,
    Outcome,
    Policy,
    Schedule,
    body_due,
    due_order,
    page_schedule,
    visit_page,
)
from idcrawl.core.watch import NO_COALESCING, Coalescing

__all__ = [
    "PageBook", "PageEvent", "PageSink", "PageVisit", "by_target", "page_key", "schedule_from_json", "schedule_to_json",
]

#: the fields of a stored page record (``kind`` and ``key`` are where it is stored)
_STORED = tuple(f.name for f in fields(Schedule) if f.name not in ("kind", "key"))


def page_key(target: str, id_: int) -> str:
    """A page's :attr:`Schedule.key`: ``target/id``."""
    return f"{target}/{id_}"


def schedule_to_json(schedule: Schedule) -> str:
    """A page record as stored (JSON of its fields, without kind and key)."""
    return json.dumps({name: getattr(schedule, name) for name in _STORED}, sort_keys=True)


def schedule_from_json(target: str, id_: int, text: str | bytes) -> Schedule:
    """A stored page record read back (fields a later idcrawl added are ignored)."""
    raw = json.loads(text)
    return Schedule(Kind.PAGE, page_key(target, id_), **{k: v for k, v in raw.items() if k in _STORED})


class PageEvent(StrEnum):
    """What one fetch of a found id meant for its page."""

    NEW = "new"  # found, no record yet: an item (revision 1)
    CHANGED = "changed"  # a 200 with another signature (checksum) than the stored one: an item
    UNCHANGED = "unchanged"  # a 200 with the same signature (a site that ignores validators): no item
    NOT_MODIFIED = "not_modified"  # a 304: no body, no item
    GONE = "gone"  # missing now: counted; the id stays found
    LEFT = "left_schedule"  # gone ``recrawl_gone`` times in a row: no more revisits
    NONE = "none"  # no observation (failed; a replay of a fetch already applied; a 304 never asked for)


@dataclass(frozen=True, slots=True)
class PageVisit:
    event: PageEvent
    #: the item's revision number (1 for a new page, +1 per change seen); 0 when there is no item
    revision: int = 0
    previous_checksum: str | None = None

    @property
    def emits(self) -> bool:
        """Whether the fetch gets an item: a new id or a changed page."""
        return self.event in (PageEvent.NEW, PageEvent.CHANGED)


class PageSink(Protocol):
    """Where a visited page's changed records go at once: the part a worker gives its page book when
    they travel with the id's outcome (a fleet: ``idcrawl.distributed.pagerecords.FleetPageRecords``)."""

    def visited(self, changes: Mapping[tuple[str, int], Schedule | None], emits: bool) -> None:
        """The records one visit changed (``emits``: the fetch gets an item)."""


class PageBook:
    """Page schedule records of a crawl's targets, the one clock, and the records changed since taken."""

    def __init__(
        self, clock: Clock | None = None, policies: Mapping[str, Policy] | None = None, *, retain: bool = True,
        sink: PageSink | None = None, refetch_after: float = 0.0,
    ) -> None:
        """``retain`` False: a visited page's record is not kept once visited, only handed on by
        :meth:`take_changes` (a crawl fetches a found id once: its memory holds the loaded records
        and the changes not yet committed, not every page it found). ``sink``: a visit's changed
        records go there at once, and its item waits for nothing here (it travels with the outcome);
        without one they wait for :meth:`take_changes` (the state's next commit). ``refetch_after``:
        seconds after a page's last body at which its revisit is unconditional (0: never;
        ``IDCRAWL_RECRAWL_REFETCH_AFTER``)."""
        self.refetch_after = refetch_after
        self.clock = clock if clock is not None else Clock()
        self.retain = retain
        self.sink = sink
        #: target name -> its policy, unless it is the default one (a big job keeps no entry per target)
        self.policies: dict[str, Policy] = {name: p for name, p in (policies or {}).items() if p != DEFAULT_POLICY}
        self.schedules: dict[str, dict[int, Schedule]] = {}
        self._changed: dict[tuple[str, int], Schedule | None] = {}
        #: pages whose fetch gets an item not yet handed on (:meth:`released`): their records wait for it
        self.awaiting: set[tuple[str, int]] = set()
        #: watch mode: a wave takes the pages due within their window (:class:`Coalescing`), and the pages
        #: it fetches share its time (``wave_at``, else the clock's now), so they stay together
        self.coalescing: Coalescing = NO_COALESCING
        self.wave_at: float | None = None

    def now(self) -> float:
        """The time of a visit: the wave's time in watch mode, else the clock's now."""
        return self.clock.now() if self.wave_at is None else self.wave_at

    def policy(self, target: str) -> Policy:
        return self.policies.get(target, DEFAULT_POLICY)

    def load(self, target: str, schedules: Mapping[int, Schedule]) -> None:
        """The stored records of ``target`` (replacing any held)."""
        self.schedules[target] = dict(schedules)

    def get(self, target: str, id_: int) -> Schedule | None:
        pages = self.schedules.get(target)
        return None if pages is None else pages.get(id_)

    def records(self, target: str) -> int:
        """How many page records of ``target`` are held (on the schedule or not)."""
        return len(self.schedules.get(target, ()))

    def forced(self, target: str, id_: int) -> bool:
        """Is a revisit of this page now a forced unconditional refetch (its last body older than
        ``refetch_after``: :func:`~idcrawl.core.recrawl.body_due`)?"""
        schedule = self.get(target, id_)
        return schedule is not None and body_due(schedule, self.clock.now(), self.refetch_after)

    def validators(self, target: str, id_: int) -> dict[str, str]:
        """The conditional headers of a revisit: ``If-None-Match`` / ``If-Modified-Since`` from the last 200;
        none when the revisit is a forced refetch (:meth:`forced`)."""
        schedule = self.get(target, id_)
        headers: dict[str, str] = {}
        if schedule is not None and not body_due(schedule, self.clock.now(), self.refetch_after):
            if schedule.etag:
                headers["If-None-Match"] = schedule.etag
            if schedule.last_modified:
                headers["If-Modified-Since"] = schedule.last_modified
        return headers

    def due_ids(self, target: str, now: float | None = None, found: Iterable[int] = ()) -> list[int]:
        """The ids of ``target`` whose page is due at ``now`` (default: the clock), most overdue first.

        ``found``: the target's found ids; those without a record (found before page records existed, or
        whose record a kill lost) have no schedule yet and are due first, in id order, as a tail without
        a schedule is: fetched without validators, their answer starts their record."""
        at = self.now() if now is None else now
        pages = self.schedules.get(target, {})
        by_key = {schedule.key: id_ for id_, schedule in pages.items()}
        unknown = [id_ for id_ in found if id_ not in pages]
        limit = self.policy(target).gone_limit
        scheduled = [schedule for schedule in pages.values() if schedule.gone < limit]  # not left
        if self.coalescing != NO_COALESCING:  # watch mode: the ones due within their window too
            taken = [schedule for schedule in scheduled if self.coalescing.due(schedule, at)]
            return unknown + [by_key[schedule.key] for schedule in due_order(taken, at + self.coalescing.widest)]
        return unknown + [by_key[schedule.key] for schedule in due_order(scheduled, at)]

    def visit(self, target: str, id_: int, fetch: Fetch) -> PageVisit:
        """Apply one fetch of a found id of ``target`` at the clock's now (the rule of :func:`visit_page`)."""
        visit = self._apply(target, id_, fetch)
        if self.sink is not None:
            self.sink.visited(self.take_changes(), visit.emits)
            self.awaiting.discard((target, id_))  # the item travels with the outcome
        return visit

    def _apply(self, target: str, id_: int, fetch: Fetch) -> PageVisit:
        now = self.now()
        policy = self.policy(target)
        pages = self.schedules.setdefault(target, {})
        old = pages.get(id_)
        if old is None:
            if fetch.outcome is not Outcome.OK:
                return PageVisit(PageEvent.NONE)
            new = page_schedule(page_key(target, id_), now, fetch.checksum, etag=fetch.etag,
                                last_modified=fetch.last_modified, policy=policy, capture=fetch.capture)
            self._set(target, id_, new)
            self.awaiting.add((target, id_))
            return PageVisit(PageEvent.NEW, 1)
        visit = visit_page(old, fetch, now, policy)
        if visit.schedule is old:  # failed, or a replay of a fetch already applied
            return PageVisit(PageEvent.NONE)
        if visit.schedule is None:  # kept as a record that left the schedule (gone_limit gone visits)
            self._set(target, id_, replace(old, last_crawled=now, gone=max(old.gone + 1, policy.gone_limit)))
            return PageVisit(PageEvent.LEFT, previous_checksum=visit.previous_checksum)
        self._set(target, id_, visit.schedule)
        if visit.gone:
            return PageVisit(PageEvent.GONE, previous_checksum=visit.previous_checksum)
        if fetch.outcome is Outcome.NOT_MODIFIED:
            return PageVisit(PageEvent.NOT_MODIFIED, previous_checksum=visit.previous_checksum)
        if visit.news:
            self.awaiting.add((target, id_))
            return PageVisit(PageEvent.CHANGED, visit.schedule.revision + 1, visit.previous_checksum)
        return PageVisit(PageEvent.UNCHANGED, previous_checksum=visit.previous_checksum)

    def _set(self, target: str, id_: int, schedule: Schedule | None) -> None:
        pages = self.schedules.setdefault(target, {})
        if schedule is None or not self.retain:
            pages.pop(id_, None)
        else:
            pages[id_] = schedule
        self._changed[(target, id_)] = schedule

    def released(self, target: str, id_: int) -> None:
        """The item of a new or changed page was handed on (the recorder now waits for it to be written)."""
        self.awaiting.discard((target, id_))

    def take_changes(self) -> dict[tuple[str, int], Schedule | None]:
        """The records changed since the last call, to commit."""
        changed, self._changed = self._changed, {}
        return changed


def by_target(changes: Iterable[tuple[tuple[str, int], Schedule | None]]) -> dict[str, dict[int, Schedule | None]]:
    """``{(target, id): record}`` regrouped per target, as the state stores take them."""
    grouped: dict[str, dict[int, Schedule | None]] = {}
    for (target, id_), schedule in changes:
        grouped.setdefault(target, {})[id_] = schedule
    return grouped
