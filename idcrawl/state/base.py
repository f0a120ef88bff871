"""The state store interface: what a crawl must remember between runs.

Backends only move these values; the rules that use them live in :mod:`idcrawl.core.ranges`,
:mod:`idcrawl.core.recrawl` and :mod:`idcrawl.core.urlqueue`. What is kept: docs/architecture.md, "Module notes".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyroaring import BitMap64

from idcrawl.core.lanes import Outcome
from idcrawl.core.pagebook import PageBook
from idcrawl.core.ranges import LaneRecord
from idcrawl.core.recrawl import Schedule
from idcrawl.core.urlqueue import QueuedUrl

__all__ = ["WATCH_COUNTERS", "FeedMarks", "RunRecord", "StateError", "StateStore", "TargetState", "due_page_ids"]


class StateError(Exception):
    """The state cannot be used (corrupt, foreign, newer schema, locked, full disk).

    The message names the file and the cause; the file is left as it was.
    """

    #: a failed write mid-crawl closes the crawl with this finish reason (None: ``idcrawl_storage_error``)
    reason: str | None = None
    #: what the error line names as the state written (None: the store's ``path``)
    where: str | None = None


@dataclass(slots=True)
class TargetState:
    name: str
    params: dict[str, Any]
    lanes: dict[str, LaneRecord] = field(default_factory=dict)
    outcomes: dict[Outcome, BitMap64] = field(default_factory=dict)

    def outcome_of(self, id_: int) -> Outcome | None:
        for outcome, ids in self.outcomes.items():
            if id_ in ids:
                return outcome
        return None


@dataclass(slots=True)
class RunRecord:
    id: int
    started_at: str
    ended_at: str | None
    finish_reason: str | None
    counts: dict[str, int]
    #: Names of the targets the run crawled; None: not recorded (a state written before idcrawl recorded them).
    targets: list[str] | None = None
    #: A watch session's counters (:data:`WATCH_COUNTERS`: waves, fetches, news), the row being the whole
    #: session's; None: a run without watch mode (or written before idcrawl kept one row per session).
    watch: dict[str, int] | None = None

    def took_part(self, name: str) -> bool | None:
        """Whether target ``name`` was crawled in this run; None if the run did not record its targets."""
        return None if self.targets is None else name in self.targets


#: A watch session's counters in its run row: waves started, responses downloaded, pages new or changed (news).
WATCH_COUNTERS = ("waves", "fetches", "news")


@dataclass(slots=True)
class FeedMarks:
    """How far a run's local feed files hold only committed items.

    ``offsets`` maps a feed file's absolute path to its size when the state
    was last committed: every found id whose items lie before that offset is
    committed *found*; the bytes after it were written since (ids a resumed
    run would otherwise fetch and emit again). -1: the file's tail cannot be
    read back (not JSON lines, post-processed, batched, or ids with several
    items).
    """

    run_id: int
    offsets: dict[str, int]


class StateStore(ABC):
    """One job's durable state. Writes are applied by :meth:`commit` atomically."""

    @abstractmethod
    def load(self, name: str) -> TargetState | None:
        """The state of a target, or None if this store never saw it."""

    @abstractmethod
    def targets(self) -> list[str]:
        """Names of every target in the store."""

    @abstractmethod
    def commit(
        self,
        params: Mapping[str, dict[str, Any]],
        outcomes: Mapping[str, Mapping[Outcome, BitMap64]],
        lanes: Mapping[str, Mapping[str, LaneRecord]],
        feeds: FeedMarks | None = None,
        pages: Mapping[str, Mapping[int, Schedule | None]] | None = None,
        tails: Mapping[str, Schedule] | None = None,
    ) -> None:
        """Atomically: set targets' params, add outcome ids, upsert lane records, set a run's feed marks,
        upsert page schedule records (``pages``: target -> id -> record; None: the page left the schedule),
        set targets' tail schedules (``tails``: target name -> its schedule)."""

    def load_pages(self, name: str) -> dict[int, Schedule]:
        """The page schedule records of target ``name`` (id -> record; recrawl of found pages)."""
        return {}

    def load_page_ids(self, name: str, ids: Sequence[int]) -> dict[int, Schedule]:
        """The page records of ``ids`` of target ``name`` (those that have one). This default reads every
        record (O(pages)); a store may read only those (O(len(ids)))."""
        wanted = set(ids)
        return {id_: schedule for id_, schedule in self.load_pages(name).items() if id_ in wanted}

    def due_page_records(self, name: str, until: float) -> dict[int, Schedule]:
        """The page records of target ``name`` whose due time (``due_at()``) is not after ``until``: what
        a ``resume=due`` run (a watch wave) may fetch. This default reads every record (O(pages)); a
        store may answer from an index of due times (O(log pages + due))."""
        return {id_: schedule for id_, schedule in self.load_pages(name).items() if schedule.due_at() <= until}

    def page_ids(self, name: str) -> BitMap64:
        """The ids of target ``name`` that have a page record (ids only; this default reads the records)."""
        return BitMap64(self.load_pages(name))

    def next_page_due(self, name: str, now: float, gone_limit: int) -> float | None:
        """The earliest ``due_at()`` not before ``now`` of target ``name``'s found pages on the
        schedule (fewer than ``gone_limit`` gone revisits in a row); None: none (watch mode's wake-up).
        This default reads every record (O(pages)); a store may answer from an index."""
        return min((at for schedule in self.load_pages(name).values()
                    if schedule.gone < gone_limit and (at := schedule.due_at()) >= now), default=None)

    def tail_schedules(self) -> dict[str, Schedule]:
        """Target name -> its tail's recrawl schedule, for the targets that have one."""
        return {}

    def feed_marks(self) -> FeedMarks | None:
        """The feed marks of the latest run that committed any (None: no run did)."""
        return None

    #: Whether the store keeps the URL queue of crawl scope (:meth:`load_urls`, :meth:`commit_urls`).
    keeps_urls = False

    def load_urls(self) -> list[QueuedUrl]:
        """The stored URLs of crawl scope (:mod:`idcrawl.core.urlqueue`), in URL order."""
        return []

    def load_scope_marks(self) -> dict[str, str] | None:
        """The targets' scope marks the last run stored with the URLs (:func:`idcrawl.core.scope.scope_marks`);
        None: none stored."""
        return None

    def commit_urls(self, changed: Sequence[QueuedUrl], deleted: Sequence[str],
                    marks: Mapping[str, str] | None = None) -> None:
        """Atomically: store ``changed`` URLs (replacing their earlier entries), forget ``deleted`` ones,
        and (not None) the targets' scope ``marks``."""
        raise NotImplementedError(f"{type(self).__name__} does not keep the URL queue")

    @abstractmethod
    def reset(self, name: str) -> None:
        """Forget a target's outcomes, lanes, page records and tail schedule (a fresh crawl); run history stays."""

    @abstractmethod
    def begin_run(self, started_at: str, targets: Sequence[str] | None = None) -> int:
        """Record a run's start and the names of the targets it crawls."""

    @abstractmethod
    def end_run(self, run_id: int, ended_at: str, finish_reason: str, counts: Mapping[str, int],
                watch: Mapping[str, int] | None = None) -> None:
        """Record a run's end (a watch session's: at the end of each wave, with its ``watch`` counters,
        :data:`WATCH_COUNTERS`; the same row again at the next wave's end)."""

    @abstractmethod
    def runs(self) -> list[RunRecord]: ...

    @abstractmethod
    def close(self) -> None: ...


def due_page_ids(store: StateStore, book: PageBook, target: str, found: BitMap64) -> list[int]:
    """The found ids of ``target`` due at the book's now, most overdue first (:meth:`PageBook.due_ids`),
    with only the records due by then (plus a watch wave's widest coalescing window) read into ``book``
    (:meth:`StateStore.due_page_records`: from an index of due times where the store has one); the
    found ids without a record (due first) are ``found`` less the store's :meth:`~StateStore.page_ids`."""
    now = book.now()
    book.load(target, store.due_page_records(target, now + book.coalescing.widest))
    return book.due_ids(target, now, found=BitMap64(found) - store.page_ids(target))
