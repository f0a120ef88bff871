"""``LocalWorker``: the lanes of an id crawl in this process, its state through the state recorder."""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Mapping, Sequence, Sized
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pyroaring import BitMap64

from idcrawl import _scrapy
from idcrawl.config import IdConfig, config_of
from idcrawl.core.clock import format_time
from idcrawl.core.frontier import Frontier, lane_specs
from idcrawl.core.lanes import Lane, Outcome
from idcrawl.core.pagebook import PageBook
from idcrawl.core.recrawl import DEFAULT_POLICY, Schedule
from idcrawl.core.resume import IDENTITY_KEYS, due_first, identity, late_pass, resume_specs, tail_due, tail_reach
from idcrawl.core.sitemaps import Evidence, SitemapUrl, evidence_due, pages_by_sitemap, tail_due_by_sitemap
from idcrawl.core.talk import NONE_DEPRECATED, forgotten_text, reach_text, resume_text
from idcrawl.core.targets import RESET_MODES, Target
from idcrawl.core.urlqueue import MemoryUrlQueue
from idcrawl.errors import BadInputError
from idcrawl.feeds import OwnLine, ReadBack, overwritten_feeds, recover_feed_tails
from idcrawl.runtime import STATS_PREFIX, IdRuntime
from idcrawl.state.base import StateError, StateStore, TargetState, due_page_ids
from idcrawl.state.location import state_path
from idcrawl.state.lock import FileLock, RedisOwner, lock_path
from idcrawl.state.recorder import StateRecorder
from idcrawl.state.redis import RedisStateStore
from idcrawl.worker import Payload, Worker

if TYPE_CHECKING:
    import random

    from idcrawl.core.scope import JobScope
    from idcrawl.core.urlqueue import UrlQueue
    from idcrawl.local.limits import LocalLimitParts

__all__ = ["Forgotten", "LocalWorker", "own_line", "rebind"]

logger = logging.getLogger(__name__)


class Forgotten:
    """What ``resume=reset`` forgets of the targets it starts over, warned about in one line."""

    def __init__(self) -> None:
        self.targets = self.found = self.lanes = 0
        self.words: set[str] = set()
        self.names: list[str] = []  # reset once every target passed its checks: a refused run changes nothing

    def add(self, name: str, word: str, state: TargetState) -> None:
        self.names.append(name)
        self.targets += 1
        self.found += len(state.outcomes.get(Outcome.FOUND, ()))
        self.lanes += len(state.lanes)
        self.words.add(word)

    def reset(self, store: StateStore | None) -> None:
        """Forget the stored state of the targets added, and say so in one WARNING."""
        if store is None or not self.targets:
            return
        for name in self.names:
            store.reset(name)
        logger.warning("idcrawl: %s", forgotten_text(self.targets, self.found, self.lanes, self.words))



def rebind(payload: Payload | None, lane_key: str, id_: int) -> Payload:
    """Another lane's payload for a shared id (its items once; ``None``: already emitted)."""
    return (lane_key, id_, payload[2] if payload is not None else [])



def own_line(targets: Sequence[Target]) -> OwnLine:
    """Whether a feed line's ``(target, id, url)`` is an item of one of ``targets``' own pages: a target of
    the job, an id in its bounds, and the URL its template renders for that id (emit-once read-back)."""
    by_name = {target.name: target for target in targets}

    def own(name: str, id_: int, url: Any) -> bool:
        target = by_name.get(name)
        return target is not None and isinstance(url, str) and target.id_of(url) == id_

    return own



class LocalWorker:
    """Lanes in this process (:class:`~idcrawl.core.frontier.Frontier`), state through the state recorder."""

    counts_scope = ""
    errors: tuple[type[Exception], ...] = ()
    records_pages_at_once = False  # with the state's commits, after the feeds' flush

    @classmethod
    def keeps_state(cls, config: IdConfig) -> bool:
        return config.state

    def __init__(self, runtime: IdRuntime) -> None:
        """The runtime's targets planned from the stored state (``IDCRAWL_STATE``), or fresh."""
        if runtime.missing_targets is not None:
            raise runtime.missing_targets
        self.runtime = runtime
        self.crawler = crawler = runtime.crawler
        settings = crawler.settings
        self.config = config = config_of(crawler)
        neutral = frozenset() if config.margin_counts_failed else frozenset({Outcome.FAILED})
        adaptive = config.speculation == "adaptive"
        max_held = config.max_held_payloads
        sequential = _scrapy.sequential_hosts(settings)  # the settings read once, not per target
        self.frontier: Frontier[Payload] = Frontier(
            [], neutral=neutral, rebind=rebind, adaptive=adaptive, max_held=max_held,
            sequential=lambda target: sequential(target.host),
        )
        self.recorder: StateRecorder | None = None
        self._url_commit: Callable[[], None] | None = None  # the URL queue's commit at the recorder's checkpoints
        self.resume_notes: dict[str, str] = {}
        #: the page schedule records of the targets (conditional revisits, due pages, items of changes
        #: only), kept with the state (None: state off, every found page is new)
        self.pages: PageBook | None = None
        self._recovered_count = 0  # found ids read back from the last run's feed tails
        self._foreign_lines = 0  # lines of those tails that are not this job's (skipped)
        self._due_pages = 0  # page ids due (resume=due)
        self._moved_pages: dict[str, dict[int, Schedule]] = {}  # sitemaps as evidence: records moved by this run
        self._evidence_at: float | None = None  # the earliest due time of what a sitemap moved (watch: a wave then)
        #: resume=due: the tail schedules of the re-probes of late ids planned (stored at the run's end), their ids
        self._late: dict[str, Schedule] = {}
        self._late_ids: dict[str, frozenset[int]] = {}
        self._late_found = 0
        store = None
        name = getattr(crawler.spidercls, "name", "idseq")
        if config.state:
            from idcrawl.state.factory import open_store

            if config.state_backend == "sqlite":  # locked before the file is opened
                path = state_path(settings, name)
                runtime.hold(str(lock_path(path).resolve()), FileLock(lock_path(path), f"state file {str(path)!r}"))
            try:
                store = open_store(settings, name, stats=crawler.stats)  # IDCRAWL_STATE_BACKEND: sqlite or redis
            except StateError as exc:
                raise BadInputError(f"{name}: {exc}") from None
            if isinstance(store, RedisStateStore):  # locked before anything is read or written
                runtime.hold(f"redis {store.prefix}", RedisOwner(
                    store.client, store.keys, config.state_lease, f"Redis state {store.prefix!r}",
                    fleet_lease=config.redis_lease_timeout))
        try:
            self._load(store)
        except StateError as exc:  # damaged state (idcrawl.state.decode): one line, nothing written
            if store is not None:
                store.close()
            raise BadInputError(f"{name}: {exc}") from None

    def _load(self, store: StateStore | None) -> None:
        """The targets' lanes, planned from the stored state when there is one."""
        config = self.config
        self._store = store
        if store is not None:
            self.pages = PageBook(self.runtime.clock, {t.name: t.policy for t in self.runtime.targets
                                                           if t.policy != DEFAULT_POLICY}, retain=False,
                                  refetch_after=config.recrawl_refetch_after)
            self.pages.coalescing = self.runtime.coalescing
            if config.watch:  # the pages a wave fetches share its time
                self.pages.wave_at = self.runtime.wave_time()
        origins: dict[str, int] = {}
        self._found_max: dict[str, int] = {}  # target -> the highest id its stored state found
        self._last_found: dict[str, int] = {}  # continued lane -> its stored last found id
        emit_once = config.state_emit_once
        # ids the last run wrote to its feeds after its last commit: found already, never emitted again
        # (not in a watching crawl's later waves: the feeds are this process's own, committed at the last wave's end)
        # only this job's lines: another job appending to the same file writes lines that are not
        read = (recover_feed_tails(store.feed_marks(), skip=overwritten_feeds(self.crawler),
                                   own=own_line(self.runtime.targets))
                if store is not None and emit_once and self.runtime.wave == 1 else ReadBack())
        recovered, self._foreign_lines = read.found, read.foreign
        # the tails' schedules (idcrawl.core.recrawl), read once: resume=due plans with them, the recorder
        # applies the recrawl rule to them at the run's end
        self._tails: dict[str, Schedule] = store.tail_schedules() if store is not None else {}
        self._forgotten = Forgotten()  # resume=reset: what the stored state held, warned about once
        # every target's state read (and checked) before any target's is reset
        # (a target without one takes no entry: a job of 100,000 new targets would hold a map of them all)
        states = ({t.name: state for t in self.runtime.targets if (state := store.load(t.name)) is not None}
                  if store is not None else {})
        for target in self._in_due_order(self.runtime.targets):
            if target.resume in RESET_MODES:
                recovered.pop(target.name, None)  # the target starts over
            self._add_target(target, store, origins, recovered.get(target.name), states.pop(target.name, None))
        self._forgotten.reset(store)
        if any(target.resume == "none" for target in self.runtime.targets):
            logger.warning("idcrawl: %s", NONE_DEPRECATED)
        self._recovered_count = sum(len(ids) for ids in recovered.values())
        if self._foreign_lines:
            logger.warning("idcrawl: resume: %d feed lines past the last commit are not this job's (another "
                           "target, URL or id: another job appends to the same feed?); skipped, their ids "
                           "are fetched again", self._foreign_lines)
        if store is not None:
            self.recorder = StateRecorder(
                store, self.crawler, self.frontier, origins,
                batch=config.state_commit_items,
                interval=config.state_commit_interval,
                emit_once=emit_once,
                recovered=recovered,
                clock=self.runtime.clock,
                found_max=self._found_max,
                last_found=self._last_found,
                pages=self.pages,
                tails=self._tails,
            )
            self.recorder.late = self._late
            # watch mode: the wave's last commit tells when its earliest found page falls due
            self.recorder.watch = config.watch

    def _add_target(
        self, target: Target, store: StateStore | None, origins: dict[str, int], recovered: BitMap64 | None = None,
        state: TargetState | None = None,
    ) -> None:
        """Fresh lanes, or the lanes of the resume plan of the target's stored past ``state``
        (``recovered``: found ids read back from the last run's feeds, not in the state yet)."""
        if state is None or target.resume in RESET_MODES:
            note = resume_text(target.resume, stored=state is not None)
            if note is not None:
                self.resume_notes[target.name] = note
            if state is not None and store is not None:
                self._forgotten.add(target.name, target.resume, state)  # reset once every target is checked
            elif target.resume not in ("auto", *RESET_MODES):
                logger.warning("idcrawl: target %r has no stored state; resume=%s starts fresh",
                               target.name, target.resume)
            self.frontier.add_target(target)
            return
        stored, current = state.params, identity(target)
        for key in IDENTITY_KEYS:
            if key in stored and stored[key] != current[key]:
                raise BadInputError(
                    f"target {target.name!r}: {key}={current[key]!r} differs from the stored state "
                    f"({key}={stored[key]!r}): -a resume=reset starts the target over (forgetting its "
                    "stored outcomes), or give another JOBDIR / IDCRAWL_STATE_PATH"
                )
        if recovered:
            found = state.outcomes.get(Outcome.FOUND)
            if found is not None:
                # a line past the last commit is of an id not found then: one found before is not this job's
                before = recovered & found
                if before:
                    self._foreign_lines += len(before)
                    recovered -= before
                state.outcomes[Outcome.FOUND] = recovered | found
            else:
                state.outcomes[Outcome.FOUND] = recovered
        walk_tail = True
        late: tuple[int, ...] = ()
        reach: int | None = None
        if target.resume == "due":
            schedule = self._tails.get(target.name)
            walk_tail = tail_due(schedule, self.runtime.clock.now(), self.runtime.coalescing)
            reach = tail_reach(schedule)
            passed = late_pass(target, schedule, state.outcomes, self.runtime.clock.now())
            if passed is not None:
                late = passed.ids
                self._late[target.name] = passed.schedule
                self._late_ids[target.name] = frozenset(late)
            if not walk_tail and schedule is not None:
                self.resume_notes[target.name] = (
                    f"resume=due: tail not due until {format_time(schedule.due_at())}, "
                    + (f"{len(late):,} late ids to re-probe" if late else "nothing to fetch")
                )
        specs = resume_specs(target, state.lanes, state.outcomes, target.resume, target.holes,
                             walk_tail=walk_tail, due_pages=self.due_pages(target, state), late=late, reach=reach,
                             max_reach=self.config.sitemap_max_reach)
        origins.update({key: record.start for key, record in state.lanes.items()})
        known = cast("Container[int] | None", state.outcomes.get(Outcome.FOUND))  # a roaring bitmap
        if isinstance(known, BitMap64) and known:
            self._found_max[target.name] = known.max()
        self.frontier.add_target(target, specs, known_found=known)
        continued = {spec.key for spec in specs}
        self._last_found.update((key, record.last_found) for key, record in state.lanes.items()
                                if key in continued and record.last_found is not None)
        note = resume_text(
            target.resume, stored=True, known_found=len(known) if isinstance(known, Sized) else 0,
            finished=[spec.direction for spec in lane_specs(target) if spec.key not in continued],
        )
        if note is not None and target.name not in self.resume_notes:
            self.resume_notes[target.name] = note
        walks_to = next((spec.reach for spec in specs if spec.reach is not None), None)
        if walks_to is not None and reach is not None:  # a sitemap listed an id above the last found one
            self.resume_notes[target.name] = (f"{self.resume_notes.get(target.name, 'resume=due')}; "
                                              f"{reach_text(walks_to, reach)}")

    def _in_due_order(self, targets: Sequence[Target]) -> list[Target]:
        """``resume=due``: the targets whose tails are most overdue first (they win the interleaving's
        ties, so a run cut short by a limit has walked them); the others as given."""
        return due_first(targets, self._tails, self.runtime.clock.now()) if self._tails else list(targets)

    def due_pages(self, target: Target, state: TargetState) -> list[int]:
        """``resume=due``: the found ids of ``target`` due for a revisit at the clock's now, most overdue
        first (:func:`idcrawl.core.recrawl.due_order`); walked after its tail, as conditional requests.
        Only a due run loads page records, and only those due by now (plus a watch wave's widest
        coalescing window), from the store's index of due times: a wave does not read every record."""
        if target.resume != "due" or self._store is None or self.pages is None:
            return []
        due = due_page_ids(self._store, self.pages, target.name, BitMap64(state.outcomes.get(Outcome.FOUND, ())))
        self._due_pages += len(due)
        return due

    def watch_schedules(self) -> list[Schedule]:
        """Watch mode, after the wave's last commit: the schedules of this job's targets as stored now
        (the tails just walked with the rule applied; the others as they were). The next wave starts
        when the earliest of them falls due (:func:`idcrawl.core.watch.next_wave_at`)."""
        if self.recorder is None:
            return []
        targets = self.frontier.targets
        return [schedule for name, schedule in self.recorder.schedules.items() if name in targets]

    def watch_pages(self) -> list[float]:
        """Watch mode, after the wave's last commit: the earliest due time of this job's found pages
        not before the wave's end, as stored then (one indexed query per target: no walk over the
        pages), so a page falling due before the next tail wakes a wave of its own."""
        at = self.recorder.next_page_at if self.recorder is not None else None
        return [] if at is None else [at]

    def sitemaps_pending(self) -> bool:
        """One process read its sitemaps during the wave: none pending after it."""
        return False

    def watch_evidence(self) -> float | None:
        """What a sitemap made due during the wave (sitemaps as evidence) wakes the next wave at once (at
        its due time, if later)."""
        return None if self._evidence_at is None else max(self._evidence_at, self.runtime.clock.now())

    def claim_sitemaps(self) -> bool:
        """One process reads its sitemaps itself."""
        return True

    def sitemap_evidence(self, target: str, entries: Mapping[int, SitemapUrl], now: float) -> Evidence:
        """The target's page records of the listed ids (this run's, else as stored) and its tail's schedule
        moved by a sitemap's entries, committed by the recorder: the pages at its next checkpoint, the tail
        at the run's end (unless this run walks it: the walk's rule wins). No state: nothing to move."""
        recorder, store, pages = self.recorder, self._store, self.pages
        if recorder is None or store is None or pages is None or target not in self.frontier.targets:
            return Evidence()
        policy = pages.policy(target)
        records = {id_: record for id_ in entries if (record := pages.get(target, id_)) is not None}
        stored = self._moved_pages.setdefault(target, {})  # moved by an earlier sitemap of the run
        records.update((id_, record) for id_ in entries if id_ not in records and (record := stored.get(id_)))
        records.update(store.load_page_ids(target, [id_ for id_ in entries if id_ not in records]))
        moved = pages_by_sitemap(records, entries, now, policy)
        stored.update(moved)
        recorder.moved_pages(target, moved)
        tail = recorder.evidence.get(target) or self._tails.get(target)
        due = tail_due_by_sitemap(tail, entries, now, policy) if tail is not None else None
        if due is not None:
            recorder.evidence[target] = due
        self._evidence_at = evidence_due(
            self._evidence_at, [record.due_at() for record in (*moved.values(), *((due,) if due is not None else ()))])
        return Evidence(len(moved), due is not None)

    def describe_state(self) -> str:
        if self.recorder is None:
            return "state off"
        where = self.recorder.store.path if hasattr(self.recorder.store, "path") else None
        if isinstance(where, Path):
            return f"state {where.resolve()}"
        return f"state in Redis ({where})" if where else f"state in {type(self.recorder.store).__name__}"

    def open(self) -> None:
        if self._recovered_count:
            self.runtime.stats.set_value(f"{STATS_PREFIX}/resume/recovered_from_feed", self._recovered_count)
        if self._foreign_lines:
            self.runtime.stats.set_value(f"{STATS_PREFIX}/resume/foreign_feed_lines", self._foreign_lines)
        if self._due_pages:
            self.runtime.stats.set_value(f"{STATS_PREFIX}/pages/due", self._due_pages)
        if self._late_ids:
            self.runtime.stats.set_value(f"{STATS_PREFIX}/late/planned", sum(map(len, self._late_ids.values())))
        if self.recorder is not None:
            if self.runtime.watch_run is not None:  # watch mode's later wave: one run row per session
                self.recorder.continue_run(self.runtime.watch_run)
            self.recorder.open()
            if self.runtime.watching:
                self.runtime.watch_run = self.recorder.run_id

    def unavailable(self, exc: Exception) -> None:  # pragma: no cover - errors is empty
        raise exc

    def record_failed(
        self, exc: Exception, lane_key: str, id_: int, outcome: Outcome, outputs: list[Any] | None, attempt: int
    ) -> list[Any]:  # pragma: no cover - errors is empty
        raise exc

    def decided(self, target: str, outcome: Outcome, id_: int) -> None:
        if outcome is Outcome.FOUND and id_ in self._late_ids.get(target, ()):
            self._late_found += 1
            self.runtime.stats.set_value(f"{STATS_PREFIX}/late/found", self._late_found)
        if self.recorder is not None:
            self.recorder.outcome(target, outcome, id_)

    def released(self, lane_key: str, id_: int, outputs: list[Any]) -> None:
        if self.recorder is not None:
            self.recorder.released(self.frontier.lane_target[lane_key].name, lane_key, id_, outputs)

    def hold_page(self, owner: str, url: str, outputs: list[Any], harvest: Callable[[], None]) -> bool:
        """A found page of the crawl scope: harvested once its items are written (the recorder's
        checkpoint, as found ids); False (no state, or no item of its own): harvest it now."""
        return self.recorder is not None and self.recorder.hold_page(owner, url, outputs, harvest)

    def url_queue(
        self, scope: JobScope, rng: random.Random, skip: Callable[[str], bool] | None, postpone_for: float,
        previous: UrlQueue | None,
    ) -> UrlQueue:
        """The crawl scope's URL queue: in memory, with the URLs the store keeps (``previous``: the last wave's,
        kept), its changes committed at this worker's checkpoints."""
        recorder = self.recorder
        store = recorder.store if recorder is not None and recorder.store.keeps_urls else None
        if previous is not None:
            queue = previous
        else:
            queue = MemoryUrlQueue(store.load_urls() if store is not None else (), rng=rng, skip=skip,
                                   postpone_for=postpone_for,
                                   marks=store.load_scope_marks() if store is not None else None)
        if recorder is not None and store is not None and isinstance(queue, MemoryUrlQueue):
            kept = queue

            def commit() -> None:
                store.commit_urls(*kept.changes(), kept.marks_changed())

            recorder.also_commit.append(commit)
            self._url_commit = commit
        return queue

    def lock_lost(self) -> None:
        if self.recorder is not None:
            self.recorder.abandon()

    def wave_ended(self) -> None:
        if self.recorder is not None:
            self.recorder.detach()

    def retire(self) -> None:
        """The URL queue's changes are committed at the next wave's checkpoints, no longer at this one's."""
        if self.recorder is not None and self._url_commit is not None:
            self.recorder.also_commit.remove(self._url_commit)
            self._url_commit = None

    def stop(self, reason: str) -> None:
        """Lanes still running stop with the close reason."""
        for key, lane in self.frontier.lane_states():
            if lane is None or (isinstance(lane, Lane) and not lane.stopped):  # (None: not reached yet, ready)
                self.frontier.close_lane(key, reason)

    def close(self, reason: str) -> None:
        """The last commit of the state, with the run's totals."""
        if self.recorder is not None:
            watch = self.runtime.watch_counters()
            self.recorder.close(reason, self.runtime.job_counts(per_wave=watch is None), watch)
            self.runtime.stats.set_value(f"{STATS_PREFIX}/state/commits", self.recorder.commits)

    # -- the components' parts ---------------------------------------------------------------

    def limit_parts(self) -> LocalLimitParts:
        """The job limits' parts: counters in this process, incidents in the XML log."""
        from idcrawl.local.limits import LocalLimitParts

        return LocalLimitParts(self.crawler.settings, self.crawler.spidercls.name)

    def shared_retries(self) -> None:
        """None: retries wait in the scheduler's delay queue."""
        return None

    def politeness_gate(self) -> None:
        """None: the download slots' delays are this process's politeness."""
        return None


if TYPE_CHECKING:  # mypy checks that the in-process worker is a Worker and its frontier an IdFrontier

    def _is_a_worker(worker: LocalWorker) -> Worker:
        return worker
