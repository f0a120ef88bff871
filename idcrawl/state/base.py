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
from idcrawl.core.ranges import LaneRecord
from idcrawl.core.recrawl import Schedule
from idcrawl.core.urlqueue import QueuedUrl

__all__ = ["FeedMarks", "RunRecord", "StateError", "StateStore", "TargetState"]


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

    def took_part(self, name: str) -> bool | None:
        """Whether target ``name`` was crawled in this run; None if the run did not record its targets."""
        return None if self.targets is None else name in self.targets


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
    def end_run(self, run_id: int, ended_at: str, finish_reason: str, counts: Mapping[str, int]) -> None: ...

    @abstractmethod
    def runs(self) -> list[RunRecord]: ...

    @abstractmethod
    def close(self) -> None: ...
