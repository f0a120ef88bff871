"""The seam between one process and a fleet: the :class:`Worker` protocol the runtime drives.

:class:`idcrawl.local.worker.LocalWorker` (lanes in this process) and
:class:`idcrawl.distributed.worker.RedisWorker` (lanes shared through Redis) implement it;
:mod:`idcrawl.backends` says which one a crawl gets. docs/architecture.md, "One seam", says why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Mapping

    from idcrawl.config import IdConfig
    from idcrawl.core.frontier import IdFrontier
    from idcrawl.core.lanes import Outcome
    from idcrawl.core.pagebook import PageBook
    from idcrawl.core.recrawl import Schedule
    from idcrawl.core.scope import JobScope
    from idcrawl.core.sitemaps import Evidence, SitemapUrl
    from idcrawl.core.urlqueue import UrlQueue
    from idcrawl.extensions.limits import LimitParts
    from idcrawl.scheduler import PolitenessGate, SharedRetries

__all__ = ["Payload", "Worker"]

Payload = tuple[str, int, list[Any]]  # (lane, id, outputs): what one found id produced


class Worker(Protocol):
    """The runtime's plug-in: the frontier it drives, and what makes outcomes durable.

    Built by :meth:`idcrawl.runtime.IdRuntime.start` (``cls(runtime)``) once every extension
    was built: an extension may bring the state in (Zyte's DotScrapy Persistence), and a bad
    state or an unreachable server raises :class:`~idcrawl.errors.BadInputError` there,
    before the engine starts.
    """

    @classmethod
    def keeps_state(cls, config: IdConfig) -> bool:
        """Whether a crawl with these settings remembers what it found (then its items must go somewhere)."""

    @property
    def frontier(self) -> IdFrontier[Payload]:
        """The lanes this worker dispenses from and records outcomes in."""

    @property
    def pages(self) -> PageBook | None:
        """The page schedule records (recrawl of found pages); None: this worker keeps none."""

    @property
    def records_pages_at_once(self) -> bool:
        """Whether a page record (the capture it names, :class:`~idcrawl.core.recrawl.Schedule`) is stored
        with its outcome at once rather than at a checkpoint after the feeds' flush: then what it names
        must be on disk first (``IdWarcMiddleware`` fsyncs each new capture)."""

    @property
    def counts_scope(self) -> str:
        """What follows the counts in progress and summary lines when they are not the whole job's."""

    @property
    def resume_notes(self) -> dict[str, str]:
        """Target name -> what it takes from earlier runs, for the plan line (``idcrawl.core.talk.resume_text``)."""

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        """Exceptions of frontier calls this worker handles (a server outage); others propagate."""

    def describe_state(self) -> str:
        """Where the durable state is, for the plan and summary lines."""

    def url_queue(
        self, scope: JobScope, rng: random.Random, skip: Callable[[str], bool] | None, postpone_for: float,
        previous: UrlQueue | None,
    ) -> UrlQueue:
        """The URL queue of the crawl scope, not started yet (the runtime asks once per wave); ``previous``:
        the last wave's queue (watch mode), which a worker may keep."""

    def open(self) -> None:
        """The crawl opens (stats are available)."""

    def unavailable(self, exc: Exception) -> None:
        """A frontier call raised one of :attr:`errors` while dispensing."""

    def record_failed(
        self, exc: Exception, lane_key: str, id_: int, outcome: Outcome, outputs: list[Any] | None, attempt: int
    ) -> list[Any]:
        """Recording an outcome raised one of :attr:`errors`: keep it (or emit its outputs); returns outputs."""

    def decided(self, target: str, outcome: Outcome, id_: int) -> None:
        """An id of ``target`` got its final outcome (made durable at the next commit)."""

    def released(self, lane_key: str, id_: int, outputs: list[Any]) -> None:
        """The outputs of a found id are about to be emitted."""

    def hold_page(self, owner: str, url: str, outputs: list[Any], harvest: Callable[[], None]) -> bool:
        """A found page of the crawl scope: ``harvest()`` once its items are written; False: harvest it now."""

    def lock_lost(self) -> None:
        """Another process took the state's owner key (this one's lease ran out): commit nothing more."""

    def stop(self, reason: str) -> None:
        """The crawl is closing: stop timers and loops; lanes that go no further stop."""

    def close(self, reason: str) -> None:
        """Last: commit or acknowledge, and the worker's own closing figures."""

    # -- the components' parts ---------------------------------------------------------------

    def limit_parts(self) -> LimitParts:
        """The job limits' parts (``idcrawl.extensions.limits.IdLimits``): trackers and incident log."""

    def shared_retries(self) -> SharedRetries | None:
        """Where the scheduler parks lane retries for the fleet; None: in the scheduler's own delay queue."""

    def politeness_gate(self) -> PolitenessGate | None:
        """Politeness held across the fleet (the scheduler, ``FleetPoliteness``); None: per process."""

    # -- sitemaps (idcrawl.sitemaps) and their evidence (idcrawl.spidermiddlewares.evidence) -

    def claim_sitemaps(self) -> bool:
        """Whether this process reads the job's sitemaps (crawl scope's and id targets') for the run or watch
        wave (a fleet: the first worker of its run to ask; one process: always). Asked once per run."""

    def sitemap_evidence(self, target: str, entries: Mapping[int, SitemapUrl], now: float) -> Evidence:
        """A sitemap's entries for ``target``'s ids (id -> entry): the stored records of its found pages
        moved (:func:`idcrawl.core.sitemaps.pages_by_sitemap`) and its tail's schedule made due when
        ids above its last found id are listed (:func:`idcrawl.core.sitemaps.tail_due_by_sitemap`),
        kept with the state for the next run or wave to plan."""

    # -- watch mode (idcrawl.extensions.watch) ---------------------------------------------

    def wave_ended(self) -> None:
        """Watch mode, after :meth:`close`: the wave is over; let go of what the next wave's worker holds."""

    def retire(self) -> None:
        """Watch mode: the next wave's worker replaces this one now (it takes the URL queue over)."""

    def watch_schedules(self) -> list[Schedule]:
        """After the wave's close: the tail schedules of the job's targets as stored now."""

    def watch_pages(self) -> list[float]:
        """After the wave's close: the earliest due time of the job's found pages, if any."""

    def sitemaps_pending(self) -> bool:
        """After the wave's close: whether another process still reads the run's sitemaps (a fleet: the
        worker that claimed them, alive and not done); the watch waits for it before it sleeps."""

    def watch_evidence(self) -> float | None:
        """After the wave's close: when what the run's sitemaps made due (sitemaps as evidence) wakes the
        next wave, even a time past (then at once; a fleet: the same time for every worker); None: nothing."""
